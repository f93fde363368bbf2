"""Any JSON a user can send: accepted, or refused with field-named problems, never a crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fanfuse.platforms import Registry
from fanfuse.queue.port import AggregateMessage, PlatformMessage, TaskQueue
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.errors import InvalidRequest
from tests.support.fakes import FakePlatform

FIELDS = ["query", "platform", "max_results", "include_content", "fusion", "language", "weights"]
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=7) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
plausible = st.fixed_dictionaries(
    {},
    optional={
        "query": st.text(max_size=40) | st.lists(st.text(max_size=20), max_size=7) | json_values,
        "platform": st.sampled_from(["all", "docs", "Docs, web", "nope", "", "all,docs"])
        | st.lists(st.sampled_from(["docs", "web", "x"]), max_size=3)
        | json_values,
        "max_results": st.integers(-5, 120) | json_values,
        "include_content": st.booleans() | json_values,
        "fusion": st.sampled_from(["rrf", "score", "concat", "borda"]) | json_values,
        "language": st.sampled_from(["en", "zh-CN", "english!", ""]) | json_values,
        "weights": st.dictionaries(st.sampled_from(["docs", "web", "zz"]), st.floats())
        | json_values,
    },
)
words = st.text(alphabet=st.characters(categories=["L", "N", "Zs"]), min_size=1, max_size=40)
valid = st.fixed_dictionaries(
    {"query": words.filter(str.strip) | st.lists(words.filter(str.strip), min_size=1, max_size=5)},
    optional={
        "platform": st.sampled_from(["all", "docs", "WEB", " docs , web ", "docs,docs"]),
        "max_results": st.integers(1, 100),
        "include_content": st.booleans(),
        "fusion": st.sampled_from(["rrf", "score", "concat"]),
        "language": st.sampled_from(["en", "zh-CN", "pt_BR"]),
    },
)
payloads = valid | plausible | json_values | st.dictionaries(st.text(max_size=10), json_values)


class CountingQueue(TaskQueue):
    def __init__(self) -> None:
        self.sent = 0

    def enqueue_platform(self, message: PlatformMessage) -> None:
        self.sent += 1

    def enqueue_aggregate(self, message: AggregateMessage, at: Any = None) -> None:
        self.sent += 1


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=payloads)
def test_any_payload_is_accepted_or_refused_with_named_fields(
    payload: Any, tmp_path_factory: Any
) -> None:
    db: Path = tmp_path_factory.mktemp("fuzz") / "f.db"
    store = SqliteStore(db)
    queue = CountingQueue()
    registry = Registry.of([FakePlatform("docs"), FakePlatform("web")])
    service = SearchService(store, queue, registry, Settings(db_path=db))
    try:
        accepted = service.start(payload)
    except InvalidRequest as exc:
        event("refused")
        assert exc.problems, "a refusal names at least one problem"
        for problem in exc.problems:
            # a top-level field, or a path under a key the payload has
            keys = [*payload] if isinstance(payload, dict) else []
            named = problem.field.split(".")[0] in FIELDS or any(
                problem.field == k or problem.field.startswith(f"{k}.") for k in keys
            )
            assert named or problem.field == "body", problem
            assert problem.problem
        assert store.recoverable() == [] and queue.sent == 0  # nothing half-written
    else:
        event("accepted")
        task = store.get_task(accepted.task_id)
        assert task is not None and 1 <= len(task.queries) <= 5
        assert set(task.platforms) <= {"docs", "web"} and task.platforms
        assert queue.sent == len(task.platforms) + 1  # one per platform + the deadline
    finally:
        store.close()
