"""Named local corpora: a folder (or a TREC / JSONL file) indexed under a name, searched as a
platform with no setting to write.

`fanfuse index ~/notes` (named `notes` after the folder, or `--name`) takes a snapshot of the
folder, `{cache}/corpora/notes.jsonl` (one document a line: its file:// URL, its own title, its
text), builds its indexes and writes the manifest `notes.json` last. `Registry.from_settings`
reads the manifests and offers `notes` (the `docs` engine, BM25, over the snapshot) and, when
the dense index was built, `notes_vectors` (the `vectors` engine). A search reads the snapshot,
not the folder: what was indexed is what is searched, until the next `fanfuse index`.

Indexing again is incremental. A file whose size and mtime are those the manifest recorded is
not read again (its document is the snapshot's); a document whose text did not change keeps its
embedding, so only added and changed documents are encoded: the part that costs (about a
second per hundred notes on two cores, after the model's load). BM25 is rebuilt from the
snapshot, since its statistics (document frequencies, the average length) depend on every
document; that is milliseconds per hundred notes. The indexes of the replaced snapshot are
deleted, unless another corpus uses them.

The retrieval stack (numpy, bm25s, the model) is imported only to index: every composition root
reads the manifests (a cloud worker too, which finds none), and must not pay for it.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, ValidationError

from fanfuse.wire.errors import CorpusError
from fanfuse.wire.instances import ExtraPlatform

if TYPE_CHECKING:
    from fanfuse.retrieval.corpus import Corpus, CorpusDoc
    from fanfuse.retrieval.dense import DenseIndex

log = logging.getLogger(__name__)

NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
"""A corpus name is a platform name (wire/request.py's pattern) with room for `_vectors`."""
DENSE_SUFFIX = "_vectors"

StepFn = Callable[[str], None]


class LocalCorpus(BaseModel):
    """A manifest: what was indexed under `name`, from where, when, and how each file looked
    when it was last read (size, mtime in ns), which is what lets the next run skip it."""

    name: str
    source: Path
    kind: Literal["folder", "file"]
    indexed_at: datetime
    documents: int
    fingerprint: str
    dense: bool = Field(description="a dense index was built: `{name}_vectors` is offered too")
    files: dict[str, tuple[int, int]] = Field(default_factory=dict)

    @property
    def platforms(self) -> list[str]:
        return [self.name, *([self.name + DENSE_SUFFIX] if self.dense else [])]


class IndexReport(BaseModel):
    """What one `fanfuse index` did, for its closing lines."""

    corpus: LocalCorpus
    added: list[str]
    changed: list[str]
    removed: list[str]
    unchanged: int
    read: int = Field(description="files read (the others were unchanged since the last run)")
    encoded: int = 0
    reused: int = Field(default=0, description="embeddings kept from the previous snapshot")
    replaced: Path | None = Field(default=None, description="the source the name named before")
    dense_skipped: str | None = Field(default=None, description="why no dense index was built")
    seconds: float = 0.0


def corpora_dir(cache_root: Path) -> Path:
    return cache_root.expanduser() / "corpora"


def snapshot_path(cache_root: Path, name: str) -> Path:
    return corpora_dir(cache_root) / f"{name}.jsonl"


def manifest_path(cache_root: Path, name: str) -> Path:
    return corpora_dir(cache_root) / f"{name}.json"


def name_for(source: Path) -> str:
    """The name a source gets when none is given: its folder's (or file's stem) in lower case,
    every other character an underscore (`My Notes` -> `my_notes`)."""
    stem = source.name if source.is_dir() else source.stem
    name = re.sub(r"[^a-z0-9]+", "_", stem.lower()).strip("_")[:32].rstrip("_")
    if not NAME.match(name):
        raise CorpusError(
            f"{source}: cannot name a platform after {stem!r}; give one with --name "
            "(a lower-case letter, then letters, digits or _)"
        )
    return name


def registered(cache_root: Path) -> list[LocalCorpus]:
    """The manifests under `cache_root`, by name; an unreadable one is skipped with a warning."""
    found: list[LocalCorpus] = []
    folder = corpora_dir(cache_root)
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        try:
            found.append(LocalCorpus.model_validate_json(path.read_bytes()))
        except (OSError, ValidationError) as exc:
            log.warning("local corpus manifest %s is unreadable (%s); skipped", path, exc)
    return found


def local_platforms(cache_root: Path) -> dict[str, ExtraPlatform]:
    """The platforms the registered corpora offer: `name` (BM25) and `name_vectors` (dense)."""
    platforms: dict[str, ExtraPlatform] = {}
    for corpus in registered(cache_root):
        settings = {"corpus": str(snapshot_path(cache_root, corpus.name))}
        platforms[corpus.name] = ExtraPlatform(engine="docs", settings=settings)
        if corpus.dense:
            platforms[corpus.name + DENSE_SUFFIX] = ExtraPlatform(
                engine="vectors", settings=settings
            )
    return platforms


def descriptions(cache_root: Path) -> dict[str, str]:
    """Per platform of a registered corpus, what it searches (`fanfuse platforms`' notes)."""
    said: dict[str, str] = {}
    for corpus in registered(cache_root):
        what = (
            f"{corpus.source} ({corpus.documents} documents, indexed "
            f"{corpus.indexed_at.astimezone(UTC):%Y-%m-%d %H:%M}Z)"
        )
        said[corpus.name] = f"BM25 over {what}"
        if corpus.dense:
            said[corpus.name + DENSE_SUFFIX] = f"dense over {what}"
    return said


def _check_name(name: str, reserved: Collection[str], cache_root: Path) -> None:
    if not NAME.match(name):
        raise CorpusError(
            f"--name {name!r}: a lower-case letter, then up to 31 letters, digits or _"
        )
    taken = set(reserved)
    for other in registered(cache_root):
        if other.name != name:  # its dense twin's name too, built or not yet
            taken.update({other.name, other.name + DENSE_SUFFIX})
    clash = sorted({name, name + DENSE_SUFFIX} & taken)
    if clash:
        raise CorpusError(
            f"--name {name!r}: {clash[0]!r} is taken by a platform or a local corpus; "
            "choose another"
        )


def _previous(cache_root: Path, name: str) -> tuple[LocalCorpus | None, Corpus | None]:
    """The manifest and snapshot the name has now, if both are readable."""
    from fanfuse.retrieval.corpus import load_corpus

    try:
        manifest = LocalCorpus.model_validate_json(manifest_path(cache_root, name).read_bytes())
    except (OSError, ValidationError):
        return None, None
    try:
        return manifest, load_corpus(snapshot_path(cache_root, name), name)
    except CorpusError:
        return manifest, None


def _folder_docs(
    folder: Path, old: LocalCorpus | None, old_docs: dict[str, CorpusDoc]
) -> tuple[list[CorpusDoc], dict[str, tuple[int, int]], int]:
    """The folder's documents, reading only the files that changed since `old` recorded them;
    also each file's (size, mtime ns) and how many files were read."""
    from fanfuse.retrieval.corpus import folder_doc
    from fanfuse.retrieval.notes import note_files

    docs: list[CorpusDoc] = []
    seen: dict[str, tuple[int, int]] = {}
    read = 0
    for file in note_files(folder):
        rel = file.relative_to(folder).as_posix()
        try:
            st = file.stat()
        except OSError as exc:
            raise CorpusError(f"{file}: cannot read: {exc.strerror or exc}") from exc
        seen[rel] = (st.st_size, st.st_mtime_ns)
        if old is not None and old.files.get(rel) == seen[rel]:
            kept = old_docs.get(rel)  # absent: the file was blank then, and still is
            if kept is not None:
                docs.append(kept)
            continue
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise CorpusError(f"{file}: cannot read: {exc.strerror or exc}") from exc
        read += 1
        doc = folder_doc(folder, rel, data)
        if doc is not None:
            docs.append(doc)
    if not seen:
        raise CorpusError(f"{folder}: no .txt or .md files in the folder")
    if not docs:
        raise CorpusError(f"{folder}: every .txt/.md file in the folder is empty")
    return docs, seen, read


def _write_snapshot(path: Path, docs: list[CorpusDoc]) -> None:
    """One JSON document a line (the JSONL corpus format `load_corpus` reads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [doc.model_dump_json(include={"id", "title", "text", "url"}) for doc in docs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def index_local(
    source: Path,
    name: str,
    cache_root: Path,
    *,
    dense: bool = True,
    reserved: Collection[str] = (),
    step: StepFn | None = None,
) -> IndexReport:
    """Index `source` (a folder of notes, a TREC or JSONL file) as the local corpus `name`.

    `reserved`: names already taken (the built-in and configured platforms). `dense`: also build
    the dense index when the `vectors` extra is installed (else the report says why not).
    `step(message)` is told each phase as it starts, and the encoding's progress.
    """
    from fanfuse.retrieval.bm25 import Bm25Index
    from fanfuse.retrieval.corpus import load_corpus

    say = step or (lambda message: None)
    started = time.monotonic()
    source = source.expanduser()
    if not source.exists():
        raise CorpusError(f"{source}: no such file or folder")
    source = source.resolve()
    _check_name(name, reserved, cache_root)
    old, old_corpus = _previous(cache_root, name)
    same_source = old is not None and old.source == source
    old_docs = {d.id: d for d in old_corpus.docs} if old_corpus is not None else {}
    say(f"reading {source}")
    if source.is_dir():
        docs, files, read = _folder_docs(source, old if same_source else None, old_docs)
    else:
        docs, files, read = list(load_corpus(source, name).docs), {}, 1
    ids = {d.id for d in docs}
    before = old_docs if same_source else {}
    added = [d.id for d in docs if d.id not in before]
    changed = [d.id for d in docs if d.id in before and before[d.id] != d]
    removed = [i for i in before if i not in ids]

    tmp = snapshot_path(cache_root, f".{name}.new")
    _write_snapshot(tmp, docs)
    try:
        corpus = load_corpus(tmp, name)
        report = IndexReport(
            corpus=LocalCorpus(
                name=name,
                source=source,
                kind="folder" if source.is_dir() else "file",
                indexed_at=datetime.now(UTC),
                documents=len(corpus),
                fingerprint=corpus.fingerprint,
                dense=False,
                files=files,
            ),
            added=added,
            changed=changed,
            removed=removed,
            unchanged=len(docs) - len(added) - len(changed),
            read=read,
            replaced=old.source if old is not None and not same_source else None,
        )
        say(f"building the BM25 index of {len(corpus)} documents")
        Bm25Index.load_or_build(corpus, cache_root)
        if dense:
            _dense(corpus, old_corpus, report, cache_root, say)
        os.replace(tmp, snapshot_path(cache_root, name))
    finally:
        tmp.unlink(missing_ok=True)
    _write_atomically(manifest_path(cache_root, name), report.corpus.model_dump_json(indent=1))
    if old is not None and old.fingerprint != corpus.fingerprint:
        _drop_indexes(cache_root, old.fingerprint)
    report.seconds = time.monotonic() - started
    return report


def _dense(
    corpus: Corpus,
    old_corpus: Corpus | None,
    report: IndexReport,
    cache_root: Path,
    say: StepFn,
) -> None:
    """The dense index of `corpus`, encoding only the documents whose indexed text the previous
    snapshot's index does not hold."""
    import numpy as np

    from fanfuse.retrieval import dense, index_dir, publish
    from fanfuse.retrieval.corpus import indexable_text
    from fanfuse.retrieval.embeddings import MODEL_NAME, encode

    reason = dense.dense_unavailable_reason()
    if reason is not None:
        report.dense_skipped = reason
        return
    previous = _stored_dense(old_corpus, cache_root) if old_corpus is not None else None
    parts = [previous.embeddings] if previous is not None else []
    row = {indexable_text(d): i for i, d in enumerate(previous.corpus.docs)} if previous else {}
    texts = [indexable_text(d) for d in corpus.docs]
    missing = [t for t in dict.fromkeys(texts) if t not in row]
    if missing:

        def encoding(done: int, total: int) -> None:
            say(f"encoding documents with {MODEL_NAME}: {done}/{total}")

        parts.append(encode(missing, on_progress=encoding))
        offset = len(previous.corpus) if previous is not None else 0
        row.update({t: offset + i for i, t in enumerate(missing)})
    embeddings = np.concatenate(parts)[[row[t] for t in texts]]
    # The index `vectors` loads for this snapshot: the path and meta DenseIndex reads.
    path = index_dir(corpus, dense.KIND, cache_root)
    publish(path, dense.index_meta(corpus), lambda tmp: np.save(tmp / "embeddings.npy", embeddings))
    report.encoded = len(missing)
    report.reused = len(texts) - len(missing)
    report.corpus.dense = True


def _stored_dense(corpus: Corpus, cache_root: Path) -> DenseIndex | None:
    """The previous snapshot's dense index if the cache holds it for the installed model (so
    loading it never encodes), else None."""
    from fanfuse.retrieval import dense, index_dir, read_meta

    if read_meta(index_dir(corpus, dense.KIND, cache_root)) != dense.index_meta(corpus):
        return None
    return dense.DenseIndex.load_or_build(corpus, cache_root, show_progress=False)


def _drop_indexes(cache_root: Path, fingerprint: str) -> None:
    """Delete a replaced snapshot's indexes, unless a registered corpus still uses them."""
    if any(c.fingerprint == fingerprint for c in registered(cache_root)):
        return
    shutil.rmtree(cache_root.expanduser().resolve() / "indexes" / fingerprint, ignore_errors=True)


def forget(name: str, cache_root: Path) -> LocalCorpus:
    """Unregister `name`: its manifest, snapshot and indexes go; the source is not touched."""
    manifest, _ = _previous(cache_root, name)
    if manifest is None:
        known = ", ".join(c.name for c in registered(cache_root)) or "none"
        raise CorpusError(f"no local corpus named {name!r} (registered: {known})")
    manifest_path(cache_root, name).unlink(missing_ok=True)
    snapshot_path(cache_root, name).unlink(missing_ok=True)
    _drop_indexes(cache_root, manifest.fingerprint)
    return manifest
