"""Corpus URLs (`fanfuse.retrieval.buckets`) and the published-corpus protocol's pieces that need
no store: what a URL names, why one cannot be used, how a worker follows the pointer."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from fanfuse.platforms.docs import DocsPlatform
from fanfuse.retrieval import published
from fanfuse.retrieval.buckets import FolderBucket, bucket_problem, parse_url
from fanfuse.retrieval.corpus import Corpus, CorpusDoc
from fanfuse.wire.errors import CorpusError


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("s3://corpora/handbook", ("s3", "corpora", "handbook")),
        ("gs://corpora/team/handbook/", ("gs", "corpora", "team/handbook")),
        ("file:///srv/corpora/handbook", ("file", "/srv/corpora/handbook", "")),
        ("S3://corpora/x", ("s3", "corpora", "x")),
    ],
)
def test_a_url_names_a_bucket_and_a_prefix(url: str, parsed: tuple[str, str, str]) -> None:
    assert parse_url(url) == parsed


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://corpora/handbook", "a corpus URL is s3://BUCKET/PREFIX"),
        ("s3://corpora", "name the corpus's prefix"),
        ("s3:///handbook", "no bucket name"),
        ("gs://corpora/a/../b", "`..` part"),
        ("s3://corpora/handbook?version=1", "no query or fragment"),
        ("file://server/share", "a file URL names a local folder"),
        ("file:///", "an absolute folder"),
    ],
)
def test_a_bad_url_says_what_is_wrong(url: str, problem: str) -> None:
    with pytest.raises(CorpusError, match="^" + url.replace("?", r"\?").replace(".", r"\.")):
        parse_url(url)
    assert problem in (bucket_problem(url) or "")


def test_a_platform_with_a_bad_corpus_url_is_unavailable_and_says_why() -> None:
    platform = DocsPlatform("handbook", {"corpus_url": "ftp://corpora/handbook"})
    assert "a corpus URL is s3://BUCKET/PREFIX" in (platform.availability() or "")
    both = DocsPlatform("handbook", {"corpus_url": "s3://a/b", "corpus": "/tmp/x"})
    assert "missing or invalid settings" in (both.availability() or "")
    assert DocsPlatform("handbook", {"corpus_url": "s3://corpora/handbook"}).availability() is None


def small_corpus(text: str) -> Corpus:
    docs = tuple(
        CorpusDoc(id=f"d{i}", title=f"Doc {i}", text=f"{text} {i}", url=f"https://x.local/d{i}")
        for i in range(3)
    )
    return Corpus(
        name="notes", docs=docs, fingerprint=f"{abs(hash(text)):032x}"[:32], source=Path("/")
    )


class CountingBucket(FolderBucket):
    """A folder that counts how often each key is read (the pointer, above all)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.reads: dict[str, int] = {}

    def read(self, key: str) -> bytes:
        self.reads[key] = self.reads.get(key, 0) + 1
        return super().read(key)


def publish_files(url: str, text: str) -> published.Pointer:
    corpus = small_corpus(text)
    files = {published.DOCS: "".join(d.model_dump_json() + "\n" for d in corpus.docs).encode()}
    pointer = published.upload_version(corpus, url, files, None, now=datetime.now(UTC))
    published.move_pointer(url, pointer)
    return pointer


def test_the_pointer_is_read_at_most_once_per_refresh_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    first = publish_files(url, "alpha")
    bucket = CountingBucket(str(tmp_path / "bucket"))
    monkeypatch.setattr(published, "open_bucket", lambda u: (bucket, ""))
    clock = [1000.0]
    follower = published.Subscription(
        url, refresh_s=30, cache_root=tmp_path / "cache", clock=lambda: clock[0]
    )
    assert follower.current().version == first.version
    assert follower.current().version == first.version
    assert bucket.reads[published.POINTER] == 1
    second = publish_files(url, "beta")
    clock[0] += 29
    assert follower.current().version == first.version  # within the period: not read again
    clock[0] += 2
    held = follower.current()
    assert held.version == second.version and bucket.reads[published.POINTER] == 2
    assert [d.text for d in held.corpus.docs] == ["beta 0", "beta 1", "beta 2"]


def test_an_unreadable_pointer_keeps_the_held_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    first = publish_files(url, "alpha")
    follower = published.Subscription(url, refresh_s=0, cache_root=tmp_path / "cache")
    assert follower.current().version == first.version
    (tmp_path / "bucket" / published.POINTER).unlink()
    assert follower.current().version == first.version  # held, the failure logged
    fresh = published.Subscription(url, refresh_s=0, cache_root=tmp_path / "other-cache")
    with pytest.raises(CorpusError, match="not found"):
        fresh.current()


def test_a_damaged_local_copy_is_downloaded_again(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    pointer = publish_files(url, "alpha")
    cache = tmp_path / "cache"
    held = published.Subscription(url, refresh_s=0, cache_root=cache).current()
    docs = held.folder / published.DOCS
    docs.write_text(docs.read_text().replace("alpha", "omega"))
    again = published.Subscription(url, refresh_s=0, cache_root=cache).current()
    assert again.version == pointer.version
    assert [d.text for d in again.corpus.docs] == ["alpha 0", "alpha 1", "alpha 2"]


def test_a_version_without_embeddings_says_so_to_vectors(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    publish_files(url, "alpha")
    held = published.Subscription(url, refresh_s=0, cache_root=tmp_path / "cache").current()
    with pytest.raises(CorpusError, match="has no embeddings: publish it with the vectors extra"):
        held.dense()
