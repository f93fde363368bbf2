"""Quotas as SearchService.start applies them: a verified caller's start rate and searches in
flight (429, Retry-After, nothing written), and the deployment's limits on what one request may
ask for (400 naming the field)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fanfuse.http import api
from fanfuse.platforms import Registry
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.errors import InvalidRequest, RateLimited
from fanfuse.wire.models import Caller, Hit
from tests.support.fakes import Clock, ContentFakePlatform, FakePlatform, HeldQueue

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Caller(subject="alice", via="api_key", key_id="k1")


Make = Callable[..., SearchService]


@pytest.fixture
def make(settings: Settings) -> Iterator[Make]:
    stores: list[SqliteStore] = []

    def build(**limits: Any) -> SearchService:
        store = SqliteStore(settings.db_path)
        stores.append(store)
        registry = Registry.of([FakePlatform(n) for n in ("docs", "vectors", "web")])
        custom = settings.model_copy(update=limits)
        return SearchService(store, HeldQueue(), registry, custom, clock=Clock(T0))

    yield build
    for store in stores:
        store.close()


def written(service: SearchService) -> int:
    assert isinstance(service.store, SqliteStore)
    with service.store._lock:
        row = service.store._db.execute(
            "SELECT (SELECT COUNT(*) FROM tasks) + (SELECT COUNT(*) FROM platforms)"
        ).fetchone()
    return int(row[0])


def buckets(service: SearchService) -> list[str]:
    assert isinstance(service.store, SqliteStore)
    with service.store._lock:
        return [r[0] for r in service.store._db.execute("SELECT doc FROM quota ORDER BY key")]


def test_the_31st_start_in_a_minute_is_a_429_with_retry_after_and_writes_nothing(
    make: Make,
) -> None:
    service = make(max_in_flight=1000)
    for _ in range(30):
        service.start({"query": "q", "platform": "docs"}, caller=ALICE)
    before, quota_before = written(service), buckets(service)
    with pytest.raises(RateLimited) as info:
        service.start({"query": "q", "platform": "docs"}, caller=ALICE)
    assert info.value.retry_after_s == pytest.approx(2.0)  # one token at 30/min
    assert "30 searches a minute" in str(info.value)
    answer = api.error_answer(info.value)
    assert answer.status == 429 and answer.headers == {"Retry-After": "2"}
    assert answer.body["error"] == "rate_limited"
    assert written(service) == before and buckets(service) == quota_before
    assert isinstance(service.clock, Clock)
    service.clock.now += timedelta(seconds=2)  # the Retry-After it was told
    service.start({"query": "q", "platform": "docs"}, caller=ALICE)
    other = Caller(subject="bob", via="id_token")  # a bucket of its own
    service.start({"query": "q", "platform": "docs"}, caller=other)


def test_in_process_callers_are_not_limited(make: Make) -> None:
    service = make(rate_per_minute=1, max_in_flight=1)
    for _ in range(5):
        service.start({"query": "q", "platform": "docs"})
    assert buckets(service) == []


def test_a_keys_own_limits_override_the_deployments(make: Make) -> None:
    service = make(rate_per_minute=30, max_in_flight=1000)
    slow = Caller(subject="carol", via="api_key", key_id="k2", rate_per_minute=3)
    for _ in range(3):
        service.start({"query": "q"}, caller=slow)
    with pytest.raises(RateLimited) as info:
        service.start({"query": "q"}, caller=slow)
    assert info.value.retry_after_s == pytest.approx(20.0)  # one token at 3/min
    fast = Caller(subject="dan", via="api_key", rate_per_minute=90)  # 3 shards, all tried
    for _ in range(90):
        service.start({"query": "q"}, caller=fast)
    with pytest.raises(RateLimited):
        service.start({"query": "q"}, caller=fast)
    wide = Caller(subject="erin", via="api_key", max_in_flight=2)
    narrow = make(max_in_flight=50)
    for _ in range(2):
        narrow.start({"query": "q"}, caller=wide)
    with pytest.raises(RateLimited):
        narrow.start({"query": "q"}, caller=wide)


def test_at_the_in_flight_cap_a_start_is_refused_until_one_ends(make: Make) -> None:
    service = make(max_in_flight=2, deadline_seconds=30)
    first = service.start({"query": "q"}, caller=ALICE).task_id
    service.start({"query": "q"}, caller=ALICE)
    before, quota_before = written(service), buckets(service)
    with pytest.raises(RateLimited) as info:
        service.start({"query": "q"}, caller=ALICE)
    assert info.value.retry_after_s == 5.0 and "at most 2 at once" in str(info.value)
    assert written(service) == before
    assert buckets(service) == quota_before  # refused before the rate take: no token spent
    service.cancel(first)
    service.start({"query": "q"}, caller=ALICE)  # a cancelled search is no longer in flight
    with pytest.raises(RateLimited):
        service.start({"query": "q"}, caller=ALICE)
    assert isinstance(service.clock, Clock)
    service.clock.now += timedelta(seconds=31)  # past their deadline: being finalized
    service.start({"query": "q"}, caller=ALICE)


@pytest.mark.parametrize(
    ("limits", "payload", "field", "words"),
    [
        ({"max_queries": 2}, {"query": ["a", "b", "c"]}, "query", "at most 2 queries"),
        (
            {"max_platforms": 1},
            {"query": "q", "platform": "docs,web"},
            "platform",
            "at most 1 platforms",
        ),
    ],
)
def test_deployment_limits_are_a_400_naming_the_field_and_the_limit(
    make: Make, limits: dict[str, int], payload: dict[str, Any], field: str, words: str
) -> None:
    service = make(**limits)
    with pytest.raises(InvalidRequest) as info:
        service.start(payload, caller=ALICE)
    assert [p.field for p in info.value.problems] == [field]
    assert words in info.value.problems[0].problem
    assert written(service) == 0  # refused before anything is written...
    assert buckets(service) != []  # ...but after the caller was admitted: a token spent


def test_all_means_at_most_max_platforms_of_them(make: Make) -> None:
    accepted = make(max_platforms=2).start({"query": "q"})
    view = make().status(accepted.task_id)
    assert len(view.platforms) == 2
    assert len(make().validate({"query": "q"}).platforms) == 3


async def test_page_text_kept_per_result_is_cut_to_max_content_chars(settings: Settings) -> None:
    text = "First sentence here. " * 20
    found = [Hit(title="t", url="https://example.com/a", snippet="s", content=text)]
    registry = Registry.of([ContentFakePlatform("docs", found)])
    capped = settings.model_copy(update={"max_content_chars": 50})
    async with EmbeddedRuntime(capped, registry=registry) as runtime:
        view = await runtime.search({"query": "q", "include_content": True})
    result = view.results[0]
    assert result.content == "First sentence here. First sentence here."
    assert result.metadata["original_chars"] == len(text)
