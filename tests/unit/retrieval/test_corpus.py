"""Corpus loading: the three formats, the bundled Vaswani default, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fanfuse.retrieval import corpus as corpus_module
from fanfuse.retrieval.corpus import (
    Corpus,
    cache_dir,
    default_qrels_path,
    default_queries_path,
    derive_title,
    indexable_text,
    load_corpus,
    load_trec_queries,
    snippet,
)
from fanfuse.wire.errors import CorpusError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_bundled_vaswani_is_the_default() -> None:
    corpus = load_corpus()
    assert corpus.name == "vaswani"
    assert len(corpus) == 11429
    first = corpus.docs[0]
    assert first.id == "1"
    assert first.url == "https://vaswani.local/doc/1"
    assert first.text.startswith("compact memories have flexible capacities")
    assert first.title == derive_title(first.text)
    assert len(first.title.rstrip("…").split()) == 10
    assert load_corpus() is corpus  # memoized while the file is unchanged


def test_bundled_queries_and_qrels() -> None:
    queries = load_trec_queries(default_queries_path())
    assert len(queries) == 93
    assert queries["1"] == (
        "MEASUREMENT OF DIELECTRIC CONSTANT OF LIQUIDS BY THE USE OF MICROWAVE TECHNIQUES"
    )
    assert default_qrels_path().read_text().startswith("1 0 1239 1")


def test_trec_file_with_optional_title_and_text_tags(tmp_path: Path) -> None:
    path = write(
        tmp_path / "news.trec",
        "<DOC>\n<DOCNO> a1 </DOCNO>\n<TITLE>Radio waves</TITLE>\n<TEXT>\nWaves  in the\n"
        "ionosphere.\n</TEXT>\n</DOC>\n"
        "<DOC><DOCNO>a2</DOCNO> plain text without tags </DOC>\n",
    )
    corpus = load_corpus(path)
    assert corpus.name == "news"
    assert [d.id for d in corpus.docs] == ["a1", "a2"]
    assert corpus.docs[0].title == "Radio waves"
    assert corpus.docs[0].text == "Waves in the ionosphere."
    assert corpus.docs[1].title == "plain text without tags"
    assert corpus.docs[1].url == "https://news.local/doc/a2"
    assert corpus.position("a2") == 1


def test_jsonl_file(tmp_path: Path) -> None:
    rows = [
        {"id": "x", "title": "Lasers", "text": "Coherent light.", "url": "https://ex.org/x"},
        {"id": 7, "title": "", "text": "one two three four five six seven eight nine ten eleven"},
    ]
    path = write(tmp_path / "My Notes.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    corpus = load_corpus(path)
    x, seven = corpus.docs
    assert (x.id, x.title, x.url) == ("x", "Lasers", "https://ex.org/x")
    assert seven.id == "7"
    assert seven.title == "one two three four five six seven eight nine ten…"
    assert seven.url == "https://my-notes.local/doc/7"


def test_folder_of_text_and_markdown(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    write(root / "b.md", "---\ntags: x\n---\nintro line\n\n# Fusion of rankings\n\nbody\n")
    write(root / "sub" / "a.txt", "\n\nFirst line is the title\nsecond line\n")
    write(root / "empty.txt", "  \n")
    write(root / ".hidden.md", "# hidden")
    write(root / "image.png", "not text")
    corpus = load_corpus(root)
    assert corpus.name == "kb"
    assert [d.id for d in corpus.docs] == ["b.md", "sub/a.txt"]
    assert corpus.docs[0].title == "Fusion of rankings"
    assert corpus.docs[1].title == "First line is the title"
    assert corpus.docs[1].url == (root / "sub" / "a.txt").as_uri()  # the file, to open


def test_a_note_is_titled_as_its_author_titled_it(tmp_path: Path) -> None:
    """Front matter's `title:` first, then the first heading, then the first line; a space in
    a file name is percent-encoded in its file:// URL."""
    root = tmp_path / "my notes"
    write(root / "front.md", '---\ntitle: "Kayak trip: day 2"\ntags: [sea]\n---\n# Day two\n')
    write(root / "plain.txt", "  Shopping list  \n\nmilk\n")
    write(root / "long title.md", "# " + "word " * 60 + "\n")
    docs = {d.id: d for d in load_corpus(root).docs}
    assert docs["front.md"].title == "Kayak trip: day 2"
    assert docs["plain.txt"].title == "Shopping list"
    long = docs["long title.md"]
    assert long.title.endswith("…") and len(long.title) <= 201
    assert long.url.startswith("file://") and long.url.endswith("/my%20notes/long%20title.md")


def test_fingerprint_follows_content(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", '{"id": "1", "title": "t", "text": "a"}\n')
    first = load_corpus(path).fingerprint
    assert load_corpus(path).fingerprint == first
    write(path, '{"id": "1", "title": "t", "text": "b"}\n')
    assert load_corpus(path).fingerprint != first

    folder = tmp_path / "f"
    write(folder / "a.txt", "alpha")
    before = load_corpus(folder).fingerprint
    (folder / "a.txt").rename(folder / "b.txt")
    assert load_corpus(folder).fingerprint != before  # file names are part of the identity


def test_an_unchanged_file_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Platforms load the corpus per search: a file whose size, inode and mtime are unchanged
    is the corpus already loaded; any rewrite (a new mtime) is read and hashed again."""
    path = write(tmp_path / "c.jsonl", '{"id": "1", "title": "t", "text": "a"}\n')
    first = load_corpus(path)
    reads: list[Path] = []
    real = corpus_module._read_bytes

    def counting(source: Path) -> bytes:
        reads.append(source)
        return real(source)

    monkeypatch.setattr(corpus_module, "_read_bytes", counting)
    assert load_corpus(path) is first and reads == []
    write(path, '{"id": "1", "title": "t", "text": "z"}\n')
    changed = load_corpus(path)
    assert reads == [path.resolve()] and changed.docs[0].text == "z"
    assert load_corpus(path) is changed and len(reads) == 1


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("e.trec", "", "the file is empty"),
        ("b.trec", "<DOC>\n<DOCNO>1</DOCNO> a\n", "b.trec:1: <DOC> is never closed"),
        ("c.trec", "<DOC><DOCNO>1</DOCNO> a </DOC>\n\n</DOC>", "c.trec:3: </DOC> without"),
        ("d.trec", "<DOC>\n x \n</DOC>\n", "d.trec:1: <DOC> has no <DOCNO>"),
        (
            "f.trec",
            "<DOC><DOCNO>1</DOCNO></DOC>\n<DOC><DOCNO>1</DOCNO></DOC>",
            "f.trec:2: duplicate DOCNO '1' (first at line 1)",
        ),
        ("g.trec", "<DOC><DOCNO>1</DOCNO></DOC>\nstray", "g.trec:2: text outside a <DOC>"),
        ("h.jsonl", '{"id": "1", "text": "a"}\n{"id": 2, "text": ', "h.jsonl:2: invalid JSON"),
        ("i.jsonl", '{"id": "1", "text": 3}', "i.jsonl:1: `text` must be a string"),
        ("j.jsonl", '{"title": "t", "text": "a"}', "j.jsonl:1: `id` must be"),
        ("k.jsonl", "[1, 2]", "k.jsonl:1: expected a JSON object"),
        ("l.jsonl", '{"id": "1", "text": "a", "url": "ftp://x"}', "l.jsonl:1: `url` must be"),
        ("m.csv", "id,text\n1,a\n", "m.csv:1: unknown corpus format"),
    ],
)
def test_malformed_files_name_file_and_line(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = write(tmp_path / name, text)
    with pytest.raises(CorpusError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_corpus(path)


def test_unreadable_inputs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such file or folder"):
        load_corpus(tmp_path / "missing.trec")
    bad = tmp_path / "latin.trec"
    bad.write_bytes(b"<DOC><DOCNO>1</DOCNO>\ncaf\xe9</DOC>")
    with pytest.raises(CorpusError, match=r"latin.trec:2: not UTF-8"):
        load_corpus(bad)
    (tmp_path / "nothing").mkdir()
    with pytest.raises(CorpusError, match=r"no \.txt or \.md files"):
        load_corpus(tmp_path / "nothing")
    write(tmp_path / "blank" / "a.md", "\n")
    with pytest.raises(CorpusError, match=r"every \.txt/\.md file in the folder is empty"):
        load_corpus(tmp_path / "blank")


def test_trec_queries_errors(tmp_path: Path) -> None:
    path = write(tmp_path / "q.trec", "<top>\n<num>1</num><title> a b </title>\n</top>\n")
    assert load_trec_queries(path) == {"1": "a b"}
    write(path, "<top><num>1</num><title>a</title></top>\n<top><title>b</title></top>")
    with pytest.raises(CorpusError, match=r"q.trec:2: <top> has no <num>"):
        load_trec_queries(path)
    write(path, "nothing here")
    with pytest.raises(CorpusError, match="no <top> queries"):
        load_trec_queries(path)


def test_cache_dir_honours_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FANFUSE_CACHE_DIR", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv("FANFUSE_CACHE_DIR")
    assert cache_dir() == Path.home() / ".cache" / "fanfuse"


def test_snippet_and_indexable_text() -> None:
    assert snippet("a  b\nc", 300) == "a b c"
    long = " ".join(["word"] * 100)
    cut = snippet(long, 300)
    assert len(cut) <= 301 and cut.endswith("…") and not cut.endswith(" …")
    corpus = Corpus(name="t", docs=(), fingerprint="x", source=Path("."))
    assert len(corpus) == 0
    from fanfuse.retrieval.corpus import CorpusDoc

    derived = CorpusDoc(id="1", title="alpha beta", text="alpha beta gamma", url="u")
    assert indexable_text(derived) == "alpha beta gamma"
    titled = CorpusDoc(id="2", title="Lasers", text="Coherent light.", url="u")
    assert indexable_text(titled) == "Lasers\nCoherent light."
