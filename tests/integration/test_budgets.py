"""Budgets and receipts end to end, through the service and the embedded runtime, against a
SearXNG double on 127.0.0.1 that logs every request it gets: the per-request cap refuses before
anything is written or sent, `trim` drops the dearest platform and the receipt says so, a run
stops paging when its share of the money is spent, and a key's daily budget holds under 20
concurrent searches from two processes on one SQLite file, settled to what searches cost."""

from __future__ import annotations

import json
import multiprocessing
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.cli.search_view import render_results
from fanfuse.fronts.mcp.digest import digest, markdown
from fanfuse.http import api
from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry
from fanfuse.platforms.contract import PlatformContext, SearchParams
from fanfuse.platforms.searxng import SearxngPlatform
from fanfuse.queue.port import AggregateMessage, PlatformMessage
from fanfuse.rules.limits import Budget
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.cost import Price
from fanfuse.wire.errors import BudgetSpent, OverBudget
from fanfuse.wire.models import Caller, LimitCut, PlatformState
from tests.support.budget_checks import DAILY_USD, SEARCHES, spent, start_in_process
from tests.support.fakes import FakePlatform, HeldQueue

pytestmark = pytest.mark.timeout(120)

PRICES = {
    "cheap": Price(per_request_usd=0.01),
    "mid": Price(per_request_usd=0.02),
    "dear": Price(per_request_usd=0.03),
}
PER_PAGE = 10


@pytest.fixture
def provider(server: HTTPServer) -> Iterator[HTTPServer]:
    """`/{name}/search`: PER_PAGE results on every page up to the third, then none; `/bad/`
    answers 400 (a request the provider refuses, which it does not bill)."""

    def results(request: Request) -> Response:
        name = request.path.split("/")[1]
        query, page = request.args["q"], int(request.args.get("pageno", 1))
        items = [
            {"title": f"{query} {name} {page}.{i}", "url": f"https://{name}.test/{page}/{i}"}
            for i in range(PER_PAGE if page <= 3 else 0)
        ]
        return Response(json.dumps({"results": items}), content_type="application/json")

    server.expect_request("/bad/search").respond_with_json({"error": "bad query"}, status=400)
    server.expect_request(re.compile(r"^/\w+/search$")).respond_with_handler(results)
    yield server


def sent(server: HTTPServer, name: str) -> int:
    return sum(1 for request, _ in server.log if request.path.startswith(f"/{name}/"))


def registry(server: HTTPServer, *names: str) -> Registry:
    return Registry.of(
        [
            SearxngPlatform(
                name=n, overrides={"base_url": server.url_for(f"/{n}"), "max_attempts": 1}
            )
            for n in names
        ]
    )


def priced(settings: Settings, **more: object) -> Settings:
    return settings.model_copy(update={"prices": {**PRICES, "bad": PRICES["mid"]}, **more})


def stored(db: Path) -> int:
    store = SqliteStore(db)
    try:
        with store._lock:
            row = store._db.execute(
                "SELECT (SELECT COUNT(*) FROM tasks) + (SELECT COUNT(*) FROM platforms)"
            ).fetchone()
        return int(row[0])
    finally:
        store.close()


async def test_a_search_over_its_cap_is_refused_with_nothing_written_or_sent(
    provider: HTTPServer, runner: Runner, settings: Settings
) -> None:
    settings = priced(settings)
    reg = registry(provider, "cheap", "mid", "dear")
    async with EmbeddedRuntime(settings, registry=reg, runner=runner) as rt:
        with pytest.raises(OverBudget) as info:
            rt.service.start(
                {"query": "q", "platform": ["cheap", "mid", "dear"], "max_cost_usd": 0.05}
            )
    answer = api.error_answer(info.value)
    assert answer.status == 400 and answer.body["error"] == "over_budget"
    assert [p["field"] for p in answer.body["problems"]] == ["max_cost_usd"]
    message = answer.body["problems"][0]["problem"]
    assert "estimated cost $0.06 (dear $0.03, mid $0.02, cheap $0.01)" in message
    assert "leave out dear ($0.03)" in message and 'budget: "trim"' in message
    assert info.value.estimate_usd == pytest.approx(0.06)
    assert provider.log == []  # nothing sent to any provider
    assert stored(settings.db_path) == 0  # nothing written


async def test_trim_drops_the_dearest_platform_and_the_receipt_shows_it(
    provider: HTTPServer, runner: Runner, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = priced(settings)
    reg = registry(provider, "cheap", "mid", "dear")
    async with EmbeddedRuntime(settings, registry=reg, runner=runner) as rt:
        view = await rt.search(
            {
                "query": "q",
                "platform": ["cheap", "mid", "dear"],
                "max_cost_usd": 0.035,
                "budget": "trim",
            }
        )
    assert view.platforms == ["cheap", "mid"] and sent(provider, "dear") == 0
    cost = view.cost
    assert cost.trimmed == ["dear"]
    assert {n: (p.calls, p.usd) for n, p in cost.platforms.items()} == {
        "cheap": (1, 0.01),
        "mid": (1, 0.02),
    }
    assert cost.total_usd == pytest.approx(0.03) and cost.estimate_usd == pytest.approx(0.03)
    assert cost.budget.max_cost_usd == 0.035 and cost.budget.source == "request"
    assert cost.budget.policy == "trim"
    for run in view.platform_runs:
        assert [c.cost_usd for c in run.calls] == [PRICES[run.name].per_request_usd]
        assert run.limits == {}  # a plan that fits its cap is not cut by its money shares
    # The receipt is the stored document's, not only the view's.
    async with EmbeddedRuntime(settings, registry=reg, runner=runner) as rt:
        task = rt.service.store.get_task(view.task_id)
    assert task is not None and task.cost == cost
    receipt = (
        "ost $0.03: mid 1 call $0.02, cheap 1 call $0.01 "
        "(estimate $0.03; cap $0.035 from the request, trim: dropped dear)"
    )
    assert f"C{receipt} (task_id {view.task_id})" in markdown(digest(view))  # the MCP tools'
    capsys.readouterr()
    render_results(view)  # `fanfuse search`'s, wrapped at the terminal's width
    assert f"c{receipt}" in " ".join(capsys.readouterr().out.split())


async def test_the_deployments_default_cap_applies_when_the_request_sets_none(
    provider: HTTPServer, runner: Runner, settings: Settings
) -> None:
    settings = priced(settings, max_cost_usd=0.015)
    reg = registry(provider, "cheap", "mid")
    async with EmbeddedRuntime(settings, registry=reg, runner=runner) as rt:
        with pytest.raises(OverBudget, match=r"over max_cost_usd \$0.015"):
            rt.service.start({"query": "q", "platform": ["cheap", "mid"]})
        view = await rt.search({"query": "q", "platform": ["cheap", "mid"], "max_cost_usd": 1})
    assert view.cost.budget.source == "request" and view.cost.total_usd == pytest.approx(0.03)
    assert provider.log and all(r.path != "/dear/search" for r, _ in provider.log)


async def test_a_run_stops_paging_when_its_share_of_the_money_is_spent(
    provider: HTTPServer, runner: Runner
) -> None:
    """Two calls' worth of money: pages 1 and 2 of the query, no third page; each call record
    carries its price; the share's cut is what the document reports."""
    platform = SearxngPlatform(name="cheap", overrides={"base_url": provider.url_for("/cheap")})
    money = Budget(2)
    ctx = PlatformContext(
        settings=platform.settings(), runner=runner, price=PRICES["cheap"], cost_budget=money
    )
    params = SearchParams(queries=["q"], limit=30)
    [found] = await platform.search(ctx, params)
    assert len(found) == 2 * PER_PAGE and sent(provider, "cheap") == 2
    assert [c.cost_usd for c in ctx.record.calls] == [0.01, 0.01]
    cut = money.cut()
    assert cut is not None and cut.skipped == 1


async def test_a_worker_that_pays_more_than_the_start_priced_stops_at_the_share(
    provider: HTTPServer, runner: Runner, settings: Settings
) -> None:
    """The start prices `cheap` at a cent: 3 pages for depth 30, 3 cents, within the cap. Its
    worker (another deployment's settings) pays 2 cents a call: its share affords one call, so
    it asks page 1 only, the cut is on its document, and the search stays within its cap."""
    store = SqliteStore(settings.db_path)
    reg = registry(provider, "cheap")
    starter = SearchService(store, HeldQueue(), reg, priced(settings), runner=runner)
    dearer = {"cheap": Price(per_request_usd=0.02)}
    worker = SearchService(
        store, HeldQueue(), reg, settings.model_copy(update={"prices": dearer}), runner=runner
    )
    payload = {"query": "q", "platform": "cheap", "max_results": 30, "max_cost_usd": 0.03}
    task_id = starter.start(payload).task_id
    await worker.run_platform(PlatformMessage(task_id=task_id, platform="cheap"))
    await worker.aggregate(AggregateMessage(task_id=task_id))
    view = worker.status(task_id)
    store.close()
    assert view.cost.estimate_usd == pytest.approx(0.03) and sent(provider, "cheap") == 1
    [run] = view.platform_runs
    assert run.limits["cost"] == LimitCut(cap=1, used=1, skipped=1)
    assert view.cost.total_usd == pytest.approx(0.02)  # within the 3 cents of its cap


async def test_a_keys_daily_spend_is_settled_to_what_the_search_cost(
    provider: HTTPServer, runner: Runner, settings: Settings
) -> None:
    """Reserved at start: the estimate (3 cents); the provider refused `bad`'s request (not
    billed), so the day is settled to the 1 cent `cheap` cost."""
    settings = priced(settings)
    key = Caller(subject="key:team", via="api_key", key_id="k1", daily_budget_usd=DAILY_USD)
    async with EmbeddedRuntime(
        settings, registry=registry(provider, "cheap", "bad"), runner=runner
    ) as rt:
        accepted = rt.service.start({"query": "q", "platform": ["cheap", "bad"]}, caller=key)
        reserved = spent(rt.service.store, key.subject, datetime.now(UTC), key.key_id)
        view = await rt.wait(accepted.task_id)
        after = spent(rt.service.store, key.subject, datetime.now(UTC), key.key_id)
    assert reserved == pytest.approx(0.03)
    assert {r.name: r.state for r in view.platform_runs} == {
        "cheap": PlatformState.SUCCEEDED,
        "bad": PlatformState.FAILED,
    }
    assert view.cost.platforms["bad"].usd == 0 and view.cost.total_usd == pytest.approx(0.01)
    assert view.cost.budget.daily_budget_usd == DAILY_USD
    assert view.cost.budget.daily_spent_usd == 0
    assert after == pytest.approx(0.01)


def test_a_keys_daily_budget_holds_under_20_searches_from_two_processes(tmp_path: Path) -> None:
    """Two processes, ten concurrent starts each, one key with 5 cents a day, each search a
    cent: exactly five start (and are written), fifteen get 429, the day holds 5 cents."""
    db = tmp_path / "fanfuse.db"
    SqliteStore(db).close()  # the schema, before two processes race to make it
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    workers = [
        spawn.Process(target=start_in_process, args=(db, SEARCHES // 2, results)) for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=90) for _ in workers]
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    assert sum(a for a, _ in outcomes) == 5 and sum(r for _, r in outcomes) == 15
    store = SqliteStore(db)
    try:
        assert spent(store, "key:team", key_id="k1") == pytest.approx(DAILY_USD)
        with store._lock:
            tasks = store._db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
        assert tasks == 5  # a refused start wrote nothing
    finally:
        store.close()


def test_no_budget_left_and_no_plan_that_fits_are_refused_writing_nothing(
    settings: Settings,
) -> None:
    """A key whose daily budget is 0 may run free platforms only; a cap under the cheapest paid
    platform leaves nothing to trim to, so `trim` is refused too, quoting the whole plan."""
    prices = {"paid": Price(per_request_usd=0.01), "dearer": Price(per_request_usd=0.02)}
    store = SqliteStore(settings.db_path)
    registry_ = Registry.of([FakePlatform(n) for n in ("free", "paid", "dearer")])
    service = SearchService(
        store, HeldQueue(), registry_, settings.model_copy(update={"prices": prices})
    )
    broke = Caller(subject="key:broke", via="api_key", key_id="k0", daily_budget_usd=0.0)
    with pytest.raises(BudgetSpent, match=r"over what is left of this key's daily budget of \$0"):
        service.start({"query": "q", "platform": "paid"}, caller=broke)
    assert stored(settings.db_path) == 0
    free = service.start({"query": "q", "platform": "free"}, caller=broke)
    assert service.status(free.task_id).cost.budget.daily_budget_usd == 0
    with pytest.raises(OverBudget) as info:
        service.start(
            {"query": "q", "platform": ["paid", "dearer"], "max_cost_usd": 0.005, "budget": "trim"}
        )
    assert "the estimated cost $0.03 (dearer $0.02, paid $0.01)" in str(info.value)
    assert stored(settings.db_path) == 2  # the free search and its platform document only
    store.close()


def test_two_keys_of_one_owner_keep_their_own_daily_budgets(settings: Settings) -> None:
    """A budget is its key's (docs/security.md): the owner's key with 2 cents a day spends
    them and is refused; the same owner's key with 5 cents still has its 5 (two figures, not
    one shared), and its refusal quotes its own budget."""
    prices = {"paid": Price(per_request_usd=0.01)}
    store = SqliteStore(settings.db_path)
    service = SearchService(
        store,
        HeldQueue(),
        Registry.of([FakePlatform("paid")]),
        settings.model_copy(update={"prices": prices}),
    )
    small = Caller(subject="key:team", via="api_key", key_id="k2", daily_budget_usd=0.02)
    large = Caller(subject="key:team", via="api_key", key_id="k5", daily_budget_usd=0.05)
    payload = {"query": "q", "platform": "paid", "max_results": 1}

    def starts(key: Caller) -> int:
        for n in range(10):  # bounded: more than either budget affords
            try:
                service.start(payload, caller=key)
            except BudgetSpent as exc:
                assert f"daily budget of ${key.daily_budget_usd:g}" in str(exc)
                return n
        return 10

    assert starts(small) == 2
    assert starts(large) == 5
    today = datetime.now(UTC)
    assert spent(store, "key:team", today, "k2") == pytest.approx(0.02)
    assert spent(store, "key:team", today, "k5") == pytest.approx(0.05)
    store.close()
