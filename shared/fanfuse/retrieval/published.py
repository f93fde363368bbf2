"""Corpora published to a bucket for the cloud: immutable versions, a pointer written last.

`fanfuse index DIR --publish s3://BUCKET/PREFIX` (or gs://, file://) writes, under PREFIX:

    versions/{version}/docs.jsonl          the documents (id, title, text, url), one per line
    versions/{version}/bm25/...            the BM25 index as bm25s saves it, with its meta.json
    versions/{version}/dense/...           the embeddings (float32 .npy) with their meta.json
    versions/{version}/manifest.json       every file's sha256 and size, the corpus fingerprint,
                                           the model's hash, fanfuse's version, the time
    CURRENT                                {"version", "manifest_sha256", "published"}

Every object of a version is created once (never rewritten; the stores refuse to replace it),
the manifest after the files it lists, and `CURRENT` last: a reader who follows the pointer
finds a whole version, never half of one, and a version's bytes never change under it.

A platform names its corpus by URL (`corpus_url`). Its `Subscription` follows the pointer: the
first search of a process (a worker's cold start) reads `CURRENT`, downloads that version into
the cache folder (`/tmp` in the cloud), checks every file against the manifest and the manifest
against the pointer, then loads it. Later searches keep that version while the pointer is
unchanged (read again at most every `refresh_s`); when it moves, the new version is
downloaded and checked whole before it replaces the old one, so each search runs on one version
and its hits say which (`corpus_version`). A file that does not match its hash is refused with
the file's URL: the platform run fails, saying so, and no other platform is affected.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fanfuse.retrieval.buckets import Bucket, BucketError, MissingObject, open_bucket
from fanfuse.retrieval.corpus import Corpus, CorpusDoc, cache_dir, slugify
from fanfuse.support.version import __version__
from fanfuse.wire.errors import CorpusError

if TYPE_CHECKING:
    from fanfuse.retrieval.bm25 import Bm25Index
    from fanfuse.retrieval.dense import DenseIndex

log = logging.getLogger(__name__)

FORMAT = 1
POINTER = "CURRENT"
MANIFEST = "manifest.json"
DOCS = "docs.jsonl"
BM25 = "bm25"
DENSE = "dense"
REFRESH_S = 30.0
"""How long a worker serves the version it holds before it reads the pointer again."""


class FileEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    sha256: str
    bytes: int = Field(ge=0)


class Manifest(BaseModel):
    """One version of a published corpus: what it holds and how to check it."""

    model_config = ConfigDict(frozen=True)

    format: int = FORMAT
    corpus: str
    version: str
    fingerprint: str = Field(description="the source's content hash (`Corpus.fingerprint`)")
    documents: int = Field(ge=1)
    created: datetime
    fanfuse: str
    model: str | None = Field(
        default=None, description="the dense model's hash the embeddings were made with"
    )
    files: dict[str, FileEntry]


class Pointer(BaseModel):
    """`CURRENT`: the version readers get, and the hash its manifest must have."""

    model_config = ConfigDict(frozen=True)

    version: str
    manifest_sha256: str
    published: datetime


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _key(prefix: str, *parts: str) -> str:
    return "/".join(p for p in (prefix, *parts) if p)


def version_id(corpus: Corpus, now: datetime) -> str:
    """Sortable by time, naming the content, unique: `20261127T101500Z-3f9a1c2e-5b1d`."""
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{corpus.fingerprint[:8]}-{secrets.token_hex(2)}"


# -- publishing ------------------------------------------------------------------------------


def version_files(corpus: Corpus, bm25: Bm25Index, dense: DenseIndex | None) -> dict[str, bytes]:
    """The objects of a version, by path inside it (the manifest aside)."""
    import io

    import numpy as np

    from fanfuse.retrieval.bm25 import index_meta as bm25_meta

    files = {DOCS: "".join(doc.model_dump_json() + "\n" for doc in corpus.docs).encode()}
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp)
        bm25.save(saved)
        for path in sorted(saved.rglob("*")):
            if path.is_file():
                files[f"{BM25}/{path.relative_to(saved).as_posix()}"] = path.read_bytes()
    files[f"{BM25}/meta.json"] = json.dumps(bm25_meta(corpus), indent=2).encode()
    if dense is not None:
        from fanfuse.retrieval.dense import index_meta as dense_meta

        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(dense.embeddings, dtype=np.float32))
        files[f"{DENSE}/embeddings.npy"] = buffer.getvalue()
        files[f"{DENSE}/meta.json"] = json.dumps(dense_meta(corpus), indent=2).encode()
    return files


def upload_version(
    corpus: Corpus,
    url: str,
    files: dict[str, bytes],
    model: str | None,
    say: Callable[[str], None] = lambda message: None,
    now: datetime | None = None,
) -> Pointer:
    """Create every object of a new version, its manifest last; the pointer is not moved (see
    `move_pointer`). Returns the pointer that would name it."""
    bucket, prefix = open_bucket(url)
    created = now or datetime.now(UTC)
    version = version_id(corpus, created)
    manifest = Manifest(
        corpus=corpus.name,
        version=version,
        fingerprint=corpus.fingerprint,
        documents=len(corpus),
        created=created,
        fanfuse=__version__,
        model=model,
        files={
            name: FileEntry(sha256=sha256(data), bytes=len(data)) for name, data in files.items()
        },
    )
    for name, data in files.items():
        bucket.create(_key(prefix, "versions", version, name), data)
        say(f"{bucket.url(_key(prefix, 'versions', version, name))} ({len(data):,} bytes)")
    body = manifest.model_dump_json(indent=2).encode()
    bucket.create(_key(prefix, "versions", version, MANIFEST), body)
    say(f"{bucket.url(_key(prefix, 'versions', version, MANIFEST))}")
    return Pointer(version=version, manifest_sha256=sha256(body), published=created)


def move_pointer(url: str, pointer: Pointer) -> None:
    """Make `pointer`'s version the current one: the last write of a publication."""
    bucket, prefix = open_bucket(url)
    bucket.replace(_key(prefix, POINTER), pointer.model_dump_json(indent=2).encode())


def publish(
    corpus: Corpus,
    url: str,
    bm25: Bm25Index,
    dense: DenseIndex | None,
    say: Callable[[str], None] = lambda message: None,
) -> Pointer:
    """Publish `corpus` with its indexes to `url` as a new version, then point readers at it."""
    from fanfuse.retrieval.minilm import model_hash

    files = version_files(corpus, bm25, dense)
    pointer = upload_version(corpus, url, files, model_hash() if dense else None, say)
    move_pointer(url, pointer)
    return pointer


# -- reading ---------------------------------------------------------------------------------


@dataclass(eq=False)
class CorpusVersion:
    """One published version, downloaded and checked: its corpus and, on demand, its indexes."""

    url: str
    manifest: Manifest
    corpus: Corpus
    folder: Path
    _bm25: Bm25Index | None = field(default=None, repr=False)
    _dense: DenseIndex | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def version(self) -> str:
        return self.manifest.version

    def bm25(self) -> Bm25Index:
        from fanfuse.retrieval.bm25 import Bm25Index

        with self._lock:
            if self._bm25 is None:
                self._bm25 = Bm25Index.from_folder(self.corpus, self.folder / BM25)
            return self._bm25

    def dense(self) -> DenseIndex:
        """The version's embeddings; CorpusError when it has none or another model made them."""
        from fanfuse.retrieval.dense import DenseIndex

        with self._lock:
            if self._dense is None:
                if self.manifest.model is None:
                    raise CorpusError(
                        f"{self.url} version {self.version} has no embeddings: publish it with "
                        "the vectors extra installed (fanfuse index DIR --publish URL)"
                    )
                try:
                    self._dense = DenseIndex.from_folder(self.corpus, self.folder / DENSE)
                except CorpusError as exc:
                    raise CorpusError(f"{self.url} version {self.version}: {exc}") from exc
            return self._dense


def read_pointer(bucket: Bucket, prefix: str, url: str) -> Pointer:
    try:
        raw = bucket.read(_key(prefix, POINTER))
    except MissingObject as exc:
        raise MissingObject(
            f"corpus {url} not found: {exc} (publish it: fanfuse index DIR --publish {url})"
        ) from exc
    try:
        return Pointer.model_validate_json(raw)
    except ValidationError as exc:
        raise CorpusError(
            f"{bucket.url(_key(prefix, POINTER))}: not a corpus pointer ({exc})"
        ) from exc


def download(bucket: Bucket, prefix: str, url: str, pointer: Pointer, into: Path) -> CorpusVersion:
    """The version `pointer` names, in `into` (reused when every file there checks out, else
    downloaded anew through a temporary folder), each file checked against the manifest."""
    version = pointer.version
    manifest_key = _key(prefix, "versions", version, MANIFEST)
    raw = _local(into / MANIFEST)
    if raw is None or sha256(raw) != pointer.manifest_sha256:
        raw = bucket.read(manifest_key)
    if sha256(raw) != pointer.manifest_sha256:
        raise CorpusError(
            f"{bucket.url(manifest_key)}: sha256 {sha256(raw)[:16]}… is not the pointer's "
            f"{pointer.manifest_sha256[:16]}…: refusing version {version}"
        )
    try:
        manifest = Manifest.model_validate_json(raw)
    except ValidationError as exc:
        raise CorpusError(f"{bucket.url(manifest_key)}: not a corpus manifest ({exc})") from exc
    if manifest.version != version or manifest.format != FORMAT:
        raise CorpusError(
            f"{bucket.url(manifest_key)}: version {manifest.version!r}, format {manifest.format} "
            f"(expected {version!r}, format {FORMAT})"
        )
    if not _complete(into, manifest, raw):
        staging = Path(tempfile.mkdtemp(prefix=f".{into.name}-", dir=_mkdir(into.parent)))
        try:
            for name, entry in manifest.files.items():
                data = bucket.read(_key(prefix, "versions", version, name))
                if sha256(data) != entry.sha256 or len(data) != entry.bytes:
                    raise CorpusError(
                        f"{bucket.url(_key(prefix, 'versions', version, name))}: sha256 "
                        f"{sha256(data)[:16]}… ({len(data):,} bytes) does not match the "
                        f"manifest's {entry.sha256[:16]}… ({entry.bytes:,} bytes): refusing "
                        f"version {version} of {url}"
                    )
                _write(staging / name, data)
            _write(staging / MANIFEST, raw)
            shutil.rmtree(into, ignore_errors=True)
            os.replace(staging, into)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return CorpusVersion(url, manifest, _corpus(manifest, into), into)


def _local(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _complete(folder: Path, manifest: Manifest, raw: bytes) -> bool:
    """The folder holds this manifest and every file it lists, each with its hash."""
    if _local(folder / MANIFEST) != raw:
        return False
    for name, entry in manifest.files.items():
        data = _local(folder / name)
        if data is None or sha256(data) != entry.sha256:
            return False
    return True


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write(path: Path, data: bytes) -> None:
    _mkdir(path.parent)
    path.write_bytes(data)


def _corpus(manifest: Manifest, folder: Path) -> Corpus:
    docs: list[CorpusDoc] = []
    for number, line in enumerate((folder / DOCS).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                docs.append(CorpusDoc.model_validate_json(line))
            except ValidationError as exc:
                raise CorpusError(f"{folder / DOCS}:{number}: not a document ({exc})") from exc
    if len(docs) != manifest.documents:
        raise CorpusError(
            f"{folder / DOCS}: {len(docs)} documents, the manifest says {manifest.documents}"
        )
    return Corpus(
        name=manifest.corpus, docs=tuple(docs), fingerprint=manifest.fingerprint, source=folder
    )


class Subscription:
    """A process's view of one published corpus: the version it holds, and when it last looked.

    `current()` is what a search calls. One download at a time per corpus (the lock); a search
    that arrives meanwhile waits for it rather than starting another. If the pointer cannot be
    read while a version is held, the held version keeps answering (and the failure is logged);
    with none held, the search fails with the reason.
    """

    def __init__(
        self,
        url: str,
        refresh_s: float = REFRESH_S,
        cache_root: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.clock = clock
        self.refresh_s = refresh_s
        self.root = (cache_root or cache_dir()).expanduser() / "published" / _folder_name(url)
        self._bucket: Bucket | None = None
        self._prefix = ""
        self._held: CorpusVersion | None = None
        self._checked = 0.0
        self._lock = threading.Lock()

    def current(self) -> CorpusVersion:
        with self._lock:
            held = self._held
            if held is not None and self.clock() - self._checked < self.refresh_s:
                return held
            try:
                if self._bucket is None:
                    self._bucket, self._prefix = open_bucket(self.url)
                pointer = read_pointer(self._bucket, self._prefix, self.url)
            except BucketError as exc:
                if held is None:
                    raise
                log.warning("corpus %s: keeping version %s: %s", self.url, held.version, exc)
                return held
            self._checked = self.clock()
            if held is not None and pointer.version == held.version:
                return held
            fresh = download(
                self._bucket, self._prefix, self.url, pointer, self.root / pointer.version
            )
            self._held = fresh
            if held is not None:
                log.info("corpus %s: version %s replaces %s", self.url, fresh.version, held.version)
            self._forget_older(keep={fresh.folder, *([held.folder] if held else [])})
            return fresh

    def _forget_older(self, keep: set[Path]) -> None:
        """Delete the versions on disk but the current one and the one it replaced: a search
        that began on that one may still load its indexes from there."""
        for folder in self.root.iterdir() if self.root.is_dir() else ():
            if folder not in keep and not folder.name.startswith("."):
                shutil.rmtree(folder, ignore_errors=True)


def _folder_name(url: str) -> str:
    return f"{slugify(url)[:80]}-{sha256(url.encode())[:8]}"


_subscriptions: dict[tuple[str, float, Path | None], Subscription] = {}
_subscriptions_lock = threading.Lock()


def subscription(
    url: str, refresh_s: float = REFRESH_S, cache_root: Path | None = None
) -> Subscription:
    """The process's subscription to `url` (one per corpus URL, refresh period and cache
    folder: `cache_root`, the settings tree's `cache_dir`; None: FANFUSE_CACHE_DIR's)."""
    key = (url, refresh_s, cache_root)
    with _subscriptions_lock:
        found = _subscriptions.get(key)
        if found is None:
            found = _subscriptions[key] = Subscription(url, refresh_s, cache_root)
        return found


def clear_subscriptions() -> None:
    """Forget every held version (tests)."""
    with _subscriptions_lock:
        _subscriptions.clear()


def describe(version: CorpusVersion) -> dict[str, Any]:
    """What a hit says of the version that answered it."""
    return {"corpus_url": version.url, "corpus_version": version.version}
