"""The budget rules at their edges: the UTC day at any time of day, a plan at its cap, the
refusal as a client reads it, a share under both budgets.

Found by mutation testing (`scripts/mutants budget`, docs/mutants.md): each test names the
mutants of rules/budget.py it kills. Figures are worked out by hand.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fanfuse.rules import budget
from fanfuse.wire.cost import Cost, CostBudget, PlatformCost

ORDER = ["docs", "cheap", "dear", "mid", "dear2"]
ESTIMATES = {"docs": 0.0, "cheap": 0.01, "dear": 0.03, "mid": 0.02, "dear2": 0.03}


@pytest.mark.parametrize(
    "now",
    [
        datetime(2026, 11, 25, 0, 0, tzinfo=UTC),
        datetime(2026, 11, 25, 13, 45, 30, 500_000, tzinfo=UTC),
        datetime(2026, 11, 25, 23, 59, 59, 999_999, tzinfo=UTC),
    ],
)
def test_a_day_ends_at_the_next_utc_midnight_whatever_the_time(now: datetime) -> None:
    """Kills `day_end` keeping the minute, the second or the microsecond of `now`."""
    assert budget.day_end(now) == datetime(2026, 11, 26, tzinfo=UTC)


def test_a_plan_that_costs_its_cap_fits_whatever_the_float_noise() -> None:
    """0.1 + 0.2 is 0.30000000000000004 in floats: a plan of those two fits a cap of 0.3, a
    plan a millionth of a dollar over does not. Kills `cap + EPSILON` -> `cap - EPSILON`."""
    assert budget.fits(0.1 + 0.2, 0.3)
    assert not budget.fits(0.300001, 0.3)
    assert budget.fits(1e9, None)


def test_a_refusal_is_one_message_with_each_way_to_fit() -> None:
    """The whole 400 as a client reads it: modes joined by "or", ways by "; ". Kills the
    joins and the `budget: "trim"` sentence misspelt."""
    by_mode = {"fast": 0.02, "balanced": 0.03, "comprehensive": 0.4}
    assert budget.refusal(ESTIMATES, ORDER, 0.035, by_mode) == (
        "the estimated cost $0.09 (dear $0.03, dear2 $0.03, mid $0.02, cheap $0.01) is over "
        "max_cost_usd $0.035; to fit: leave out dear2, dear ($0.03); mode fast ($0.02) or "
        'mode balanced ($0.03); send budget: "trim" to drop the dearest platforms'
    )


def test_under_a_daily_budget_a_share_is_what_was_reserved_even_below_a_larger_cap() -> None:
    """The day reserved each platform's estimate, not its part of the cap: with both a cap
    and a daily budget, a platform may spend its estimate. Kills `daily is not None or ...`
    -> `daily is not None and ...`."""
    cost = Cost(
        platforms={"a": PlatformCost(estimate_usd=0.01), "b": PlatformCost(estimate_usd=0.03)},
        estimate_usd=0.04,
        budget=CostBudget(max_cost_usd=0.08, daily_budget_usd=1.0),
    )
    assert budget.share(cost, "a") == pytest.approx(0.01)
    assert budget.share(cost, "b") == pytest.approx(0.03)


def test_a_refusal_says_how_its_fallback_chains_were_priced() -> None:
    """Kills `chain_note`'s chains joined or spelt otherwise, or its sentence misspelt."""
    assert budget.chain_note([["google", "brave"], ["exa", "tavily"]]) == (
        "a fallback chain (google|brave, exa|tavily) is estimated at its dearest plausible "
        "path, every member asked and charged (a hedge asks two at once)"
    )


def test_a_keys_day_is_its_owners_and_its_own() -> None:
    """`{owner}$key-{key_id}$spend-YYYYMMDD`: two keys of one owner keep two figures, and the
    same key id under two owners never shares one. Kills the key's part replacing the owner's
    instead of following it."""
    noon = datetime(2026, 11, 25, 12, tzinfo=UTC)
    assert budget.day_key("owner-a", noon, "k1") == "owner-a$key-k1$spend-20261125"
    assert budget.day_key("owner-b", noon, "k1") != budget.day_key("owner-a", noon, "k1")
