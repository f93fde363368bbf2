"""Claims of rules/ that its other unit tests left unasserted, each with the mutant it kills.

Found by mutation testing (`scripts/mutants rules`, docs/mutants.md): every test here names the
one-line change of the product code that made no other unit test fail (docs/contributing.md).
"""

from __future__ import annotations

from fanfuse.rules import limits
from fanfuse.rules.limits import Budget
from fanfuse.wire.models import Hit, LimitCut


def test_a_share_is_an_equal_part_of_the_cap_and_never_nothing() -> None:
    assert [limits.share(10, n) for n in (1, 3, 10, 20)] == [10, 3, 1, 1]
    assert limits.share(10, 0) == 10


def test_a_budget_spends_its_share_then_counts_what_it_refused() -> None:
    """Kills `take`'s `used >= cap` -> `>`, `skipped += 1` -> `= 1` or `+= 2`, `used += 1`
    dropped or changed, and the True/False answers swapped."""
    budget = Budget(2)
    assert [budget.take() for _ in range(5)] == [True, True, False, False, False]
    assert (budget.used, budget.skipped) == (2, 3)
    assert budget.cut() == LimitCut(cap=2, used=2, skipped=3)
    assert Budget(2).cut() is None


def test_a_budget_chooses_every_querys_best_ranked_pages_first() -> None:
    """Four pages of two queries, a share of three: both queries' first results, then the
    better second one by query order; the indices come back in their own order. Kills
    `choose`'s sort key changed (rank, query, index) and `sorted(chosen)` dropped."""
    hits = [
        Hit(url="https://x.org/q0-2", rank=2, query_index=0),
        Hit(url="https://x.org/q1-1", rank=1, query_index=1),
        Hit(url="https://x.org/q0-1", rank=1, query_index=0),
        Hit(url="https://x.org/q1-2", rank=2, query_index=1),
    ]
    budget = Budget(3)
    assert budget.choose(hits, [0, 1, 2, 3]) == [0, 1, 2]
    assert (budget.used, budget.skipped) == (3, 1)
    assert budget.choose(hits, []) == [] and budget.skipped == 1


def test_only_the_caps_that_cut_are_reported() -> None:
    spent, unused = Budget(1), Budget(5)
    spent.take(), spent.take(), unused.take()
    assert limits.cuts({"provider_calls": spent, "page_fetches": unused, "cost": None}) == {
        "provider_calls": LimitCut(cap=1, used=1, skipped=1)
    }
