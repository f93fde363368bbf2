"""Corpora published to a bucket and searched by `docs` and `vectors`: on moto's S3, on a Cloud
Storage emulator (gcp-storage-emulator), and in a folder (`file://`), all on 127.0.0.1.

What each backend must show: a publication is found and searched through both platforms, each
hit naming the version that answered; a second publication is invisible until its pointer moves,
and no search mixes two versions; a tampered object is refused by its hash, failing its own
platform's run and no other; a corpus that is not there is named in the error.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fanfuse.platforms.contract import PlatformContext, SearchParams
from fanfuse.platforms.docs import DocsPlatform
from fanfuse.platforms.vectors import VectorsPlatform
from fanfuse.retrieval import published
from fanfuse.retrieval.bm25 import Bm25Index
from fanfuse.retrieval.buckets import BucketError, open_bucket
from fanfuse.retrieval.corpus import load_corpus
from fanfuse.retrieval.dense import DenseIndex
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.tools.devstack.moto_app import ThreadedMoto
from fanfuse.tools.devstack.storage import StorageEmulator
from fanfuse.tools.publishing import publish_index
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.instances import ExtraPlatform
from fanfuse.wire.models import Hit, PlatformState, TaskStatus

pytestmark = pytest.mark.slow

FIRST = {
    "expenses.md": "# Expense reports\n\nExpense reports are due on the fifth working day of "
    "each month; attach every receipt.",
    "laptops.md": "# Laptops\n\nEvery laptop is replaced after three years; ask the service "
    "desk for a new one.",
    "holidays.md": "# Holidays\n\nEach employee has twenty-five days of paid holiday a year, "
    "booked in the HR portal.",
    "security.md": "# Security\n\nBadges must be worn visibly; report a lost badge to security "
    "at once.",
}
SECOND = {
    **FIRST,
    "expenses.md": "# Expense reports\n\nExpense reports are due on the last Friday of each "
    "month; attach every receipt.",
    "travel.md": "# Travel\n\nBook trains and flights through the travel desk two weeks ahead.",
}
QUERY = "when are expense reports due"


def write_folder(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def storage_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StorageEmulator]:
    emulator = StorageEmulator(log_dir=tmp_path_factory.mktemp("storage-logs"))
    with emulator:
        yield emulator


@pytest.fixture(autouse=True)
def _fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An empty cache (a worker's cold /tmp) and no version held from another test."""
    monkeypatch.setenv("FANFUSE_CACHE_DIR", str(tmp_path / "cache"))
    published.clear_subscriptions()
    Bm25Index.clear_memo()
    DenseIndex.clear_memo()
    yield
    published.clear_subscriptions()


@pytest.fixture(params=["s3", "gs", "file"])
def corpus_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A fresh bucket on the backend, and the URL of a corpus prefix in it."""
    bucket = f"corpora-{uuid.uuid4().hex[:12]}"
    if request.param == "s3":
        import boto3

        moto: ThreadedMoto = request.getfixturevalue("moto_server")
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto.endpoint)
        boto3.client("s3").create_bucket(Bucket=bucket)
        return f"s3://{bucket}/team/handbook"
    if request.param == "gs":
        emulator: StorageEmulator = request.getfixturevalue("storage_emulator")
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.host)
        emulator.create_bucket(bucket)
        return f"gs://{bucket}/team/handbook"
    return f"file://{tmp_path / bucket / 'handbook'}"


def publish_folder(tmp_path: Path, files: dict[str, str], url: str, name: str) -> str:
    folder = write_folder(tmp_path / name / "handbook", files)
    return publish_index(folder, url, dense=True, say=lambda line: None).version


def platforms(url: str, refresh_s: float = 0.0) -> dict[str, ExtraPlatform]:
    settings = {"corpus_url": url, "corpus_refresh_s": refresh_s}
    return {
        "handbook": ExtraPlatform(engine="docs", settings=settings),
        "handbook_vectors": ExtraPlatform(engine="vectors", settings=settings),
    }


def search_docs(platform: DocsPlatform | VectorsPlatform, query: str = QUERY) -> list[Hit]:
    import asyncio

    settings = platform.load_settings()
    params = SearchParams(queries=[query], limit=5)
    [hits] = asyncio.run(platform.search(PlatformContext(settings=settings), params))  # type: ignore[arg-type]
    return hits


def versions(hits: list[Hit]) -> set[str]:
    return {str(hit.metadata["corpus_version"]) for hit in hits}


async def test_a_published_corpus_is_searched_by_docs_and_vectors(
    corpus_url: str, tmp_path: Path, settings: Settings
) -> None:
    version = publish_folder(tmp_path, FIRST, corpus_url, "v1")
    settings = settings.model_copy(update={"extra_platforms": platforms(corpus_url)})
    async with EmbeddedRuntime(settings) as runtime:
        view = await runtime.search(
            QUERY, platform=["handbook", "handbook_vectors"], cache="bypass"
        )
    assert view.status == TaskStatus.COMPLETED, [r.error for r in view.platform_runs]
    for run in view.platform_runs:
        assert run.state == PlatformState.SUCCEEDED
        assert run.results[0].metadata["doc_id"] == "expenses.md", run.name
        assert versions(run.results) == {version}
        assert {hit.metadata["corpus_url"] for hit in run.results} == {corpus_url}
    assert view.results[0].title == "Expense reports"
    assert "fifth working day" in view.results[0].snippet
    held = tmp_path / "cache" / "published"
    assert [p.name for p in next(held.iterdir()).iterdir()] == [version]  # downloaded to the cache


def test_a_second_publication_is_served_only_once_its_pointer_moves(
    corpus_url: str, tmp_path: Path
) -> None:
    first = publish_folder(tmp_path, FIRST, corpus_url, "v1")
    docs = DocsPlatform("handbook", {"corpus_url": corpus_url, "corpus_refresh_s": 0})
    vectors = VectorsPlatform("handbook_vectors", {"corpus_url": corpus_url, "corpus_refresh_s": 0})
    assert versions(search_docs(docs)) == versions(search_docs(vectors)) == {first}

    # The second version's objects and manifest, but not yet its pointer: nothing changes.
    corpus = load_corpus(write_folder(tmp_path / "v2" / "handbook", SECOND))
    bm25 = Bm25Index.load_or_build(corpus)
    dense = DenseIndex.load_or_build(corpus, show_progress=False)
    files = published.version_files(corpus, bm25, dense)
    from fanfuse.retrieval.minilm import model_hash

    pointer = published.upload_version(corpus, corpus_url, files, model_hash())
    for platform in (docs, vectors):
        hits = search_docs(platform)
        assert versions(hits) == {first}
        assert "fifth working day" in hits[0].snippet
        assert "travel.md" not in {h.metadata["doc_id"] for h in search_docs(platform, "travel")}

    # The pointer moves while searches run: each one answers from one version, whole.
    results: list[list[Hit]] = []
    failures: list[BaseException] = []

    def keep_searching(rounds: int) -> None:
        for _ in range(rounds):
            try:
                results.append(search_docs(docs))
            except BaseException as exc:
                failures.append(exc)

    threads = [threading.Thread(target=keep_searching, args=(6,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    published.move_pointer(corpus_url, pointer)
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    assert len(results) == 18
    for hits in results:
        [version] = versions(hits)  # never two versions in one answer
        due = "last Friday" if version == pointer.version else "fifth working day"
        assert due in hits[0].snippet, (version, hits[0].snippet)
    for platform in (docs, vectors):
        hits = search_docs(platform)
        assert versions(hits) == {pointer.version}
        assert "last Friday" in hits[0].snippet
        assert "travel.md" in {h.metadata["doc_id"] for h in search_docs(platform, "book a train")}


def test_a_worker_keeps_its_version_until_the_refresh_period_ends(
    corpus_url: str, tmp_path: Path
) -> None:
    first = publish_folder(tmp_path, FIRST, corpus_url, "v1")
    docs = DocsPlatform("handbook", {"corpus_url": corpus_url, "corpus_refresh_s": 3600})
    assert versions(search_docs(docs)) == {first}
    publish_folder(tmp_path, SECOND, corpus_url, "v2")
    assert versions(search_docs(docs)) == {first}  # the pointer is not read again for an hour


def tamper(url: str, key: str) -> None:
    """Rewrite one object behind the publisher's back, as a broken copy or an attacker would."""
    bucket, prefix = open_bucket(url)
    data = bucket.read(f"{prefix}/{key}".lstrip("/"))
    bucket.replace(f"{prefix}/{key}".lstrip("/"), data.replace(b"fifth", b"sixth"))


async def test_a_tampered_object_fails_its_platforms_run_and_no_other(
    corpus_url: str, tmp_path: Path, settings: Settings
) -> None:
    version = publish_folder(tmp_path, FIRST, corpus_url, "v1")
    tamper(corpus_url, f"versions/{version}/docs.jsonl")
    local = write_folder(tmp_path / "local" / "notes", SECOND)
    extra = {
        **platforms(corpus_url),
        "notes": ExtraPlatform(engine="docs", settings={"corpus": str(local)}),
    }
    settings = settings.model_copy(update={"extra_platforms": extra})
    async with EmbeddedRuntime(settings) as runtime:
        view = await runtime.search(
            QUERY, platform=["handbook", "handbook_vectors", "notes"], cache="bypass"
        )
    runs = {run.name: run for run in view.platform_runs}
    assert view.status == TaskStatus.PARTIAL
    assert runs["notes"].state == PlatformState.SUCCEEDED and runs["notes"].results
    for name in ("handbook", "handbook_vectors"):
        error = runs[name].error or ""
        assert runs[name].state == PlatformState.FAILED
        assert f"versions/{version}/docs.jsonl" in error and "does not match" in error, error
        assert "refusing version" in error
    assert all(r.platform == "notes" for r in view.results)


def test_a_tampered_manifest_is_refused_by_the_pointers_hash(
    corpus_url: str, tmp_path: Path
) -> None:
    version = publish_folder(tmp_path, FIRST, corpus_url, "v1")
    tamper(corpus_url, f"versions/{version}/manifest.json")  # no "fifth" in it: append instead
    bucket, prefix = open_bucket(corpus_url)
    key = f"{prefix}/versions/{version}/manifest.json".lstrip("/")
    bucket.replace(key, bucket.read(key) + b"\n")
    with pytest.raises(ProviderError, match="is not the pointer's"):
        search_docs(DocsPlatform("handbook", {"corpus_url": corpus_url}))


def test_a_missing_corpus_is_named_in_the_error(corpus_url: str) -> None:
    missing = corpus_url.rsplit("/", 1)[0] + "/no-such-corpus"
    with pytest.raises(ProviderError) as raised:
        search_docs(DocsPlatform("handbook", {"corpus_url": missing}))
    message = str(raised.value)
    assert f"corpus {missing} not found" in message
    assert f"fanfuse index DIR --publish {missing}" in message


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_a_missing_bucket_is_named_in_the_error(
    scheme: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if scheme == "s3":
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", request.getfixturevalue("moto_server").endpoint)
    else:
        monkeypatch.setenv(
            "STORAGE_EMULATOR_HOST", request.getfixturevalue("storage_emulator").host
        )
    url = f"{scheme}://no-such-bucket-{uuid.uuid4().hex[:8]}/handbook"
    with pytest.raises(ProviderError, match=f"corpus {url} not found"):
        search_docs(DocsPlatform("handbook", {"corpus_url": url}))


@pytest.mark.parametrize("backend", ["s3", "file"])
def test_a_versions_objects_are_never_rewritten(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S3 refuses by its write precondition and a folder by an exclusive link; the Cloud Storage
    emulator ignores preconditions (Cloud Storage itself answers 412), so it is not asked here."""
    if backend == "s3":
        import boto3

        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", request.getfixturevalue("moto_server").endpoint)
        boto3.client("s3").create_bucket(Bucket="write-once")
        url = "s3://write-once/corpus"
    else:
        url = f"file://{tmp_path / 'write-once'}"
    bucket, prefix = open_bucket(url)
    key = f"{prefix}/versions/v/docs.jsonl".lstrip("/")
    bucket.create(key, b"first")
    with pytest.raises(BucketError, match="exists already"):
        bucket.create(key, b"second")
    assert bucket.read(key) == b"first"


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_fanfuse_index_publish_names_the_version_it_made_current(
    scheme: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = f"cli-{uuid.uuid4().hex[:8]}"
    if scheme == "s3":
        import boto3

        moto: ThreadedMoto = request.getfixturevalue("moto_server")
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto.endpoint)
        boto3.client("s3").create_bucket(Bucket=bucket)
    else:
        emulator: StorageEmulator = request.getfixturevalue("storage_emulator")
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.host)
        emulator.create_bucket(bucket)
    url = f"{scheme}://{bucket}/handbook"
    folder = write_folder(tmp_path / "handbook", FIRST)
    done = subprocess.run(
        [sys.executable, "-m", "fanfuse.cli.main", "index", str(folder), "--publish", url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "corpus handbook: 4 documents" in done.stdout
    assert f"{url}/versions/" in done.stdout and "manifest.json" in done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(f"{url}: version ") and last.endswith(" is current")
    bucket_, prefix = open_bucket(url)
    pointer = published.Pointer.model_validate_json(bucket_.read(f"{prefix}/CURRENT"))
    assert last == f"{url}: version {pointer.version} is current"
