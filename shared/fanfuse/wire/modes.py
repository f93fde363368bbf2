"""Search modes: the one table that says what `fast`, `balanced` and `comprehensive` do.

It starts from the fusion module's table (`../shared/reference/search-fusion-module.md`):

| reference       | sources          | fusion | rerank    |
|-----------------|------------------|--------|-----------|
| `fast`          | one (LinkUp)     | none   | no        |
| `balanced`      | three            | RRF    | no        |
| `comprehensive` | all              | RRF    | yes (LLM) |

and departs from it where fanfuse differs:

- `fast` takes the *quickest* available platforms by measured latency (`health.py`), not a
  named one: which provider is quick depends on the deployment. It takes two, not one, because
  platforms run in parallel, so a second costs only its own latency, and two lists fused beat
  either alone on Vaswani (see `fanfuse eval`).
- `balanced` (the default) is what fanfuse always did: every available platform, in parallel,
  fused by the request's fuser; adding a platform costs at most the slowest one's latency, which
  the deadline bounds.
- `comprehensive` asks each platform for a deeper candidate pool, fetches page content, and
  reranks the fused pool before cutting it to `max_results`. The pool is at least 50 deep:
  on Vaswani, RRF over each platform's top 50 beats RRF over the top 10 in nDCG@10 (0.490
  against 0.466, 41 queries won and 35 lost, paired randomization p = 0.04), while the top 30
  is indistinguishable from the top 10 (`fanfuse eval`).

The table gives defaults: a field the request sets itself (`include_content`, a platform list)
wins over the mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MAX_DEPTH = 100
"""The most candidates a platform is asked for (the request's own `max_results` limit)."""


class Mode(StrEnum):
    FAST = "fast"
    BALANCED = "balanced"
    COMPREHENSIVE = "comprehensive"


@dataclass(frozen=True)
class ModeSpec:
    quickest: int | None
    """`all` means the quickest N available platforms, by measured latency; None: every one."""
    depth_factor: int
    min_depth: int
    """Each platform is asked for max(max_results * depth_factor, min_depth), at most MAX_DEPTH."""
    content: bool | None
    """Fetch page content: yes, no, or None for the request's `include_content` (default no)."""
    rerank: bool
    """Rerank the fused candidate pool before cutting it to `max_results` (see rerank/)."""

    def depth(self, max_results: int) -> int:
        return min(MAX_DEPTH, max(max_results * self.depth_factor, self.min_depth))


MODES: dict[Mode, ModeSpec] = {
    Mode.FAST: ModeSpec(quickest=2, depth_factor=1, min_depth=0, content=False, rerank=False),
    Mode.BALANCED: ModeSpec(quickest=None, depth_factor=1, min_depth=0, content=None, rerank=False),
    Mode.COMPREHENSIVE: ModeSpec(
        quickest=None, depth_factor=3, min_depth=50, content=True, rerank=True
    ),
}

DEFAULT_MODE = Mode.BALANCED
