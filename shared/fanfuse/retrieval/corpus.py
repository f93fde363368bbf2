"""Document collections for the offline platforms: loading, identity and the on-disk cache.

A corpus is a TREC file, a JSONL file or a folder of `.txt` / `.md` files; the bundled Vaswani
collection is the default. Every corpus carries a content fingerprint so that indexes built from
it can be cached on disk and reused until the source actually changes.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict

from fanfuse.retrieval.notes import note_files, note_title, note_url
from fanfuse.settings.sources import default_cache_dir
from fanfuse.wire.errors import CorpusError

# Bump when parsing changes what a source yields, so cached indexes of the old parse are ignored.
_PARSER_VERSION = b"fanfuse-corpus-1"

DATA_DIR = Path(__file__).resolve().parent / "data" / "vaswani"
DEFAULT_CORPUS_NAME = "vaswani"
TITLE_WORDS = 10
TITLE_MAX_CHARS = 200
JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})


class CorpusDoc(BaseModel):
    """One document: `id` is unique within its corpus and `url` is stable across runs."""

    model_config = ConfigDict(frozen=True)

    id: str
    title: str
    text: str
    url: str


@dataclass(frozen=True, eq=False)
class Corpus:
    """A loaded collection. `fingerprint` is a hash of the source content: the cache key."""

    name: str
    docs: tuple[CorpusDoc, ...]
    fingerprint: str
    source: Path
    _positions: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._positions.update({doc.id: i for i, doc in enumerate(self.docs)})

    def __len__(self) -> int:
        return len(self.docs)

    def position(self, doc_id: str) -> int:
        """Position of a document id in `docs` (KeyError when unknown)."""
        return self._positions[doc_id]


def cache_dir() -> Path:
    """Root of fanfuse's on-disk caches: `$FANFUSE_CACHE_DIR`, else `~/.cache/fanfuse`."""
    return default_cache_dir().expanduser()


def default_corpus_path() -> Path:
    return DATA_DIR / "doc-text.trec"


def default_queries_path() -> Path:
    return DATA_DIR / "query-text.trec"


def default_qrels_path() -> Path:
    return DATA_DIR / "qrels"


def derive_title(text: str, words: int = TITLE_WORDS) -> str:
    """A short title from the text's first words, for collections (like Vaswani) that have none."""
    parts = text.split()
    title = " ".join(parts[:words])
    if len(title) > TITLE_MAX_CHARS:
        title = title[:TITLE_MAX_CHARS].rstrip()
        return title + "…"
    return title + ("…" if len(parts) > words else "")


def snippet(text: str, limit: int = 300) -> str:
    """The first `limit` characters of the text on one line, cut at a word boundary."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def indexable_text(doc: CorpusDoc) -> str:
    """What the indexes see: the text, preceded by the title when the text does not hold it.

    Derived titles (Vaswani) and first-line titles (folders) are already in the text; indexing
    them twice would double their weight.
    """
    title = doc.title.rstrip("…").strip()
    if not title:
        return doc.text
    head = " ".join(doc.text.split()[: len(title.split()) + 8]).lower()
    if " ".join(title.split()).lower() in head:
        return doc.text
    return f"{doc.title}\n{doc.text}"


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug or "corpus"


def doc_url(corpus_name: str, doc_id: str) -> str:
    return f"https://{slugify(corpus_name)}.local/doc/{quote(doc_id, safe='/')}"


Signature = tuple[int, int, int]
_memo: dict[tuple[Path, str], Corpus] = {}
_signatures: dict[tuple[Path, str], Signature | None] = {}
_memo_lock = threading.Lock()


def load_corpus(path: Path | None = None, name: str | None = None) -> Corpus:
    """Load a TREC file, a JSONL file or a folder of .txt/.md files (None: bundled Vaswani).

    The name (used in URLs) defaults to "vaswani" for the bundled file, else the file's stem or
    the folder's name. A file with the size, inode and mtime (ns) it had when last loaded is not
    read again (reading and hashing Vaswani took ~5 ms a search); else the source is read and
    hashed, and parsed again only when its content changed: platforms call this per request.
    """
    source = (path or default_corpus_path()).expanduser()
    if not source.exists():
        raise CorpusError(f"{source}: no such file or folder")
    source = source.resolve()
    if name is None:
        if source == default_corpus_path().resolve():
            name = DEFAULT_CORPUS_NAME
        else:
            name = source.name if source.is_dir() else source.stem
    key = (source, name)
    signature = _signature(source)
    with _memo_lock:
        cached = _memo.get(key)
        if cached is not None and signature is not None and _signatures.get(key) == signature:
            return cached
    if source.is_dir():
        files = [(f.relative_to(source).as_posix(), _read_bytes(f)) for f in note_files(source)]
        if not files:
            raise CorpusError(f"{source}: no .txt or .md files in the folder")
        fingerprint = _digest(b"folder", *(c for rel, data in files for c in (rel.encode(), data)))
    else:
        data = _read_bytes(source)
        kind = _sniff(source, _decode(source, data))
        fingerprint = _digest(kind.encode(), data)
    with _memo_lock:
        cached = _memo.get(key)
    if cached is not None and cached.fingerprint == fingerprint:
        with _memo_lock:
            _signatures[key] = signature
        return cached
    if source.is_dir():
        docs = _parse_folder(source, files)
    else:
        text = _decode(source, data)
        docs = (
            _parse_jsonl(source, text, name) if kind == "jsonl" else _parse_trec(source, text, name)
        )
    if not docs:
        raise CorpusError(f"{source}: the corpus has no documents")
    corpus = Corpus(name=name, docs=tuple(docs), fingerprint=fingerprint, source=source)
    with _memo_lock:
        _memo[key] = corpus
        _signatures[key] = signature
    return corpus


def _signature(source: Path) -> Signature | None:
    """(size, inode, mtime ns) of a file, taken before it is read; None (read it) for a folder."""
    try:
        st = source.stat()
    except OSError:
        return None
    return (st.st_size, st.st_ino, st.st_mtime_ns) if source.is_file() else None


def _digest(*chunks: bytes) -> str:
    h = hashlib.sha256(_PARSER_VERSION)
    for chunk in chunks:
        h.update(len(chunk).to_bytes(8, "big"))
        h.update(chunk)
    return h.hexdigest()[:32]


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CorpusError(f"{path}:{line}: not UTF-8 text ({exc.reason})") from exc


def _sniff(path: Path, text: str) -> str:
    if path.suffix.lower() in JSONL_SUFFIXES:
        return "jsonl"
    first = text.lstrip()[:1]
    if first == "<":
        return "trec"
    if first == "{":
        return "jsonl"
    if not first:
        raise CorpusError(f"{path}: the file is empty")
    raise CorpusError(
        f"{path}:1: unknown corpus format (expected a TREC file of <DOC> elements, "
        "JSONL objects, or a folder of .txt/.md files)"
    )


class _Lines:
    """Offset -> 1-based line number, in O(log n) per lookup."""

    def __init__(self, text: str) -> None:
        self._starts = [m.end() for m in re.finditer("\n", text)]

    def at(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset) + 1


_DOC_TAG = re.compile(r"<(/?)DOC>", re.IGNORECASE)
_DOCNO = re.compile(r"<DOCNO>(.*?)</DOCNO>", re.IGNORECASE | re.DOTALL)
_TITLE = re.compile(r"<TITLE>(.*?)</TITLE>", re.IGNORECASE | re.DOTALL)
_TEXT = re.compile(r"<TEXT>(.*?)</TEXT>", re.IGNORECASE | re.DOTALL)
_ANY_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9_]*>")


def _trec_blocks(path: Path, text: str) -> Iterator[tuple[int, str]]:
    """Yield (line, body) per <DOC> element; stray text or unbalanced tags are errors."""
    lines = _Lines(text)
    open_at: int | None = None
    body_start = 0
    last = 0
    for match in _DOC_TAG.finditer(text):
        closing = match.group(1) == "/"
        if not closing:
            if open_at is not None:
                raise CorpusError(
                    f"{path}:{lines.at(match.start())}: <DOC> opened before the <DOC> "
                    f"of line {lines.at(open_at)} was closed"
                )
            stray = text[last : match.start()].strip()
            if stray:
                raise CorpusError(
                    f"{path}:{lines.at(text.find(stray[0], last))}: text outside a <DOC> element"
                )
            open_at = match.start()
            body_start = match.end()
        else:
            if open_at is None:
                raise CorpusError(
                    f"{path}:{lines.at(match.start())}: </DOC> without an opening <DOC>"
                )
            yield lines.at(open_at), text[body_start : match.start()]
            open_at = None
            last = match.end()
    if open_at is not None:
        raise CorpusError(f"{path}:{lines.at(open_at)}: <DOC> is never closed")
    stray = text[last:].strip()
    if stray:
        raise CorpusError(
            f"{path}:{lines.at(text.find(stray[0], last))}: text outside a <DOC> element"
        )


def _parse_trec(path: Path, text: str, name: str) -> list[CorpusDoc]:
    docs: list[CorpusDoc] = []
    seen: dict[str, int] = {}
    for line, body in _trec_blocks(path, text):
        numbers = _DOCNO.findall(body)
        if len(numbers) != 1:
            problem = "has no <DOCNO>" if not numbers else "has several <DOCNO>"
            raise CorpusError(f"{path}:{line}: <DOC> {problem}")
        doc_id = " ".join(numbers[0].split())
        if not doc_id:
            raise CorpusError(f"{path}:{line}: empty <DOCNO>")
        if doc_id in seen:
            raise CorpusError(
                f"{path}:{line}: duplicate DOCNO {doc_id!r} (first at line {seen[doc_id]})"
            )
        seen[doc_id] = line
        titles = _TITLE.findall(body)
        texts = _TEXT.findall(body)
        raw = "\n".join(texts) if texts else _TITLE.sub(" ", _DOCNO.sub(" ", body))
        content = " ".join(_ANY_TAG.sub(" ", raw).split())
        title = " ".join(_ANY_TAG.sub(" ", " ".join(titles)).split())
        docs.append(
            CorpusDoc(
                id=doc_id,
                title=title or derive_title(content) or doc_id,
                text=content,
                url=doc_url(name, doc_id),
            )
        )
    return docs


def _parse_jsonl(path: Path, text: str, name: str) -> list[CorpusDoc]:
    docs: list[CorpusDoc] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{where}: invalid JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise CorpusError(f"{where}: expected a JSON object with id, title, text")
        raw_id = record.get("id")
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or not str(raw_id).strip():
            raise CorpusError(f"{where}: `id` must be a non-empty string or an integer")
        doc_id = str(raw_id).strip()
        if doc_id in seen:
            raise CorpusError(f"{where}: duplicate id {doc_id!r} (first at line {seen[doc_id]})")
        seen[doc_id] = number
        body = record.get("text")
        if not isinstance(body, str):
            raise CorpusError(f"{where}: `text` must be a string")
        title = record.get("title", "")
        if title is None:
            title = ""
        if not isinstance(title, str):
            raise CorpusError(f"{where}: `title` must be a string")
        url = record.get("url")
        if url is not None and (
            not isinstance(url, str) or not re.match(r"^(https?|file)://\S+$", url.strip())
        ):
            raise CorpusError(f"{where}: `url` must be an http(s) or file URL")
        title = " ".join(title.split())
        content = body.strip()
        docs.append(
            CorpusDoc(
                id=doc_id,
                title=title or derive_title(content) or doc_id,
                text=content,
                url=url.strip() if isinstance(url, str) else doc_url(name, doc_id),
            )
        )
    return docs


def folder_doc(folder: Path, rel: str, data: bytes) -> CorpusDoc | None:
    """The document of one file of a folder corpus (None for a whitespace-only file: an empty
    note should not break a whole folder), titled and addressed as `notes` says."""
    content = _decode(folder / rel, data).strip()
    if not content:
        return None
    title = note_title(content) or rel
    return CorpusDoc(id=rel, title=title, text=content, url=note_url(folder / rel))


def _parse_folder(folder: Path, files: list[tuple[str, bytes]]) -> list[CorpusDoc]:
    docs = [doc for rel, data in files if (doc := folder_doc(folder, rel, data)) is not None]
    if not docs:
        raise CorpusError(f"{folder}: every .txt/.md file in the folder is empty")
    return docs


_TOP = re.compile(r"<top>(.*?)</top>", re.IGNORECASE | re.DOTALL)
_NUM = re.compile(r"<num>\s*(?:Number:)?\s*(.*?)\s*(?:</num>|\n)", re.IGNORECASE | re.DOTALL)
_QTITLE = re.compile(r"<title>\s*(?:Topic:)?(.*?)(?:</title>|<desc>|<narr>|</top>|$)", re.I | re.S)


def load_trec_queries(path: Path | None = None) -> dict[str, str]:
    """Query id -> text from a TREC topics file (`<top><num>..</num><title>..</title></top>`)."""
    source = path or default_queries_path()
    text = _decode(source, _read_bytes(source))
    queries: dict[str, str] = {}
    lines = _Lines(text)
    for match in _TOP.finditer(text):
        line = lines.at(match.start())
        body = match.group(1)
        num = _NUM.search(body)
        title = _QTITLE.search(body)
        if num is None or not num.group(1).strip():
            raise CorpusError(f"{source}:{line}: <top> has no <num>")
        qid = num.group(1).strip()
        query = " ".join(_ANY_TAG.sub(" ", title.group(1)).split()) if title else ""
        if not query:
            raise CorpusError(f"{source}:{line}: query {qid} has no <title> text")
        if qid in queries:
            raise CorpusError(f"{source}:{line}: duplicate query number {qid}")
        queries[qid] = query
    if not queries:
        raise CorpusError(f"{source}: no <top> queries found")
    return queries
