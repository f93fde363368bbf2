"""The budget rules (rules/budget.py) and the pricing of a plan (platforms/pricing.py): pure
functions, checked on figures worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fanfuse.platforms import load_engine
from fanfuse.platforms.pricing import cost_budget, dearest_call, estimate, price_of, results_charge
from fanfuse.rules import budget
from fanfuse.wire.cost import Cost, CostBudget, PlatformCost, Price
from fanfuse.wire.models import Hit, QuotaBucket

NOON = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
ORDER = ["docs", "cheap", "dear", "mid", "dear2"]
ESTIMATES = {"docs": 0.0, "cheap": 0.01, "dear": 0.03, "mid": 0.02, "dear2": 0.03}


def test_trim_drops_the_dearest_first_and_never_a_free_platform() -> None:
    fit = budget.trim(ESTIMATES, ORDER, 0.035)
    # 0.09 in all: drop dear2 (as dear as dear, later in the request), then dear: 0.03 fits
    assert fit.trimmed == ["dear2", "dear"]
    assert fit.kept == ["docs", "cheap", "mid"]
    assert fit.estimate_usd == pytest.approx(0.03)
    assert budget.trim(ESTIMATES, ORDER, 0.0).kept == ["docs"]  # only the free one fits
    assert budget.trim(ESTIMATES, ORDER, 1.0).trimmed == []


def test_a_refusal_states_the_estimate_and_each_way_to_fit() -> None:
    message = budget.refusal(ESTIMATES, ORDER, 0.035, {"fast": 0.02, "comprehensive": 0.4})
    assert message.startswith("the estimated cost $0.09 (dear $0.03, dear2 $0.03, mid $0.02,")
    assert "over max_cost_usd $0.035" in message
    assert "leave out dear2, dear ($0.03)" in message
    assert "mode fast ($0.02)" in message and "comprehensive" not in message
    assert 'budget: "trim"' in message
    nothing = budget.refusal({"a": 0.5}, ["a"], 0.1, {"fast": 0.5})
    assert nothing.endswith("to fit: raise max_cost_usd, or choose free platforms")


def test_a_platforms_share_of_the_money() -> None:
    cost = Cost(
        platforms={"a": PlatformCost(estimate_usd=0.01), "b": PlatformCost(estimate_usd=0.03)},
        estimate_usd=0.04,
        budget=CostBudget(max_cost_usd=0.08),
    )
    assert budget.share(cost, "a") == pytest.approx(0.02)  # a quarter of the cap
    assert budget.share(cost, "b") == pytest.approx(0.06)
    assert budget.share(cost, "free") is None
    daily = cost.model_copy(update={"budget": CostBudget(daily_budget_usd=1.0)})
    assert budget.share(daily, "b") == pytest.approx(0.03)  # what was reserved for it
    assert budget.share(cost.model_copy(update={"budget": CostBudget()}), "a") is None


def test_the_daily_reservation_fits_or_writes_nothing_and_says_what_is_left() -> None:
    written, left = budget.reserve(0.02, 0.05, NOON)(None)
    assert left is None and written is not None and written.tokens == pytest.approx(0.02)
    assert written.expires_at == datetime(2026, 11, 27, tzinfo=UTC)  # a day after its day
    full = QuotaBucket(tokens=0.04, updated_at=NOON, expires_at=NOON + timedelta(days=1))
    grown, _ = budget.reserve(0.01, 0.05, NOON)(full)
    assert grown is not None and grown.tokens == pytest.approx(0.05)
    refused, left = budget.reserve(0.02, 0.05, NOON)(full)
    assert refused is None and left == pytest.approx(0.01)
    settled, _ = budget.adjust(-0.03, NOON)(full)
    assert settled is not None and settled.tokens == pytest.approx(0.01)
    floored, _ = budget.adjust(-1.0, NOON)(full)
    assert floored is not None and floored.tokens == 0
    assert budget.day_key("key:a/b", NOON) == "key%3Aa%2Fb$spend-20261125"
    assert budget.day_end(NOON) == datetime(2026, 11, 26, tzinfo=UTC)


def test_a_plan_is_priced_by_pages_queries_and_results() -> None:
    google = load_engine("google")
    price = price_of(google, {})
    assert price == Price(per_request_usd=0.005)
    # depth 50 at 10 a page: 5 pages a query, 2 queries; capped by the call share
    assert (
        estimate(google, price, None, queries=2, depth=50, include_content=False, call_cap=50).calls
        == 10
    )
    assert (
        estimate(google, price, None, queries=2, depth=50, include_content=False, call_cap=4).calls
        == 4
    )
    perplexity = load_engine("perplexity")  # several queries in one call
    assert (
        estimate(
            perplexity,
            price_of(perplexity, {}),
            None,
            queries=3,
            depth=10,
            include_content=False,
            call_cap=9,
        ).calls
        == 1
    )
    exa = load_engine("exa")
    exa_price = price_of(exa, {})
    plan = estimate(exa, exa_price, None, queries=1, depth=50, include_content=True, call_cap=9)
    assert plan.per_call_usd == pytest.approx(0.007 + 40 * 0.001)  # 40 results past the 10
    hits = [Hit(url=f"https://e.test/{i}") for i in range(12)]
    assert results_charge(exa_price, hits, False) == pytest.approx(0.002)
    docs = load_engine("docs")
    assert (
        estimate(
            docs, price_of(docs, {}), None, queries=5, depth=100, include_content=True, call_cap=9
        ).usd
        == 0
    )


def test_a_deployment_overrides_the_fields_it_names() -> None:
    brave = load_engine("brave")
    cheaper = price_of(brave, {"brave": Price.model_validate({"per_request_usd": 0.003})})
    assert cheaper.per_request_usd == 0.003
    tavily = load_engine("tavily", overrides={"api_key": "tvly-x", "search_depth": "advanced"})
    assert price_of(tavily, {}).per_request_usd == pytest.approx(0.016)  # two credits
    priced = price_of(
        load_engine("searxng"), {"searxng": Price.model_validate({"per_content_usd": 0.001})}
    )
    assert priced.per_content_usd == 0.001 and priced.per_request_usd == 0
    assert dearest_call(priced, 10, include_content=True) == pytest.approx(0.01)


def test_a_share_becomes_the_calls_it_affords() -> None:
    two, three = cost_budget(0.025, 0.01), cost_budget(0.03, 0.01)
    assert two is not None and two.cap == 2
    assert three is not None and three.cap == 3  # not 2.9999
    assert cost_budget(None, 0.01) is None and cost_budget(1.0, 0.0) is None
