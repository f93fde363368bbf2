"""The meta-refresh scan: the target of a `<meta http-equiv=refresh>` page, in one linear pass.

The regex it replaces backtracked: 25 KB of `<meta http-equiv=refresh content=0 ` without a
`>` took 11 s of CPU on the event loop (tests/support/hostile_pages.py prints the figures).
"""

from __future__ import annotations

import pytest

from fanfuse.content import resolve
from fanfuse.content.resolve import meta_refresh_target
from fanfuse.net.policy import RESOLVE_MAX_BYTES
from tests.support.hostile_pages import refresh_traps

TARGET = "https://a.example/article?id=7"


@pytest.mark.parametrize(
    ("page", "target"),
    [
        (f'<meta http-equiv="refresh" content="0;url={TARGET}">', TARGET),
        (f"<META HTTP-EQUIV=Refresh CONTENT='3; URL={TARGET}'>", TARGET),
        (f'<meta content="0; url={TARGET}" http-equiv="refresh"/>', TARGET),  # any order
        (f'<meta http-equiv="refresh" content="0;url=\'{TARGET}\'">', TARGET),  # quoted URL
        (f'<meta http-equiv="refresh" content=" 0 , {TARGET} ">', TARGET),  # no `url=`
        (f'<meta http-equiv="refresh" content="0.5;URL = {TARGET}">', TARGET),
        ('<meta http-equiv="refresh" content="0;url=/a?x=1&amp;y=2">', "/a?x=1&y=2"),
        (f'<meta name="x"><p>text</p><meta http-equiv="refresh" content="0;url={TARGET}">', TARGET),
        ('<meta http-equiv="refresh" content="30">', None),  # a reload, no target
        (f'<meta http-equiv="refresh" content="url={TARGET}">', None),  # no delay
        (f'<meta http-equiv="content-type" content="0;url={TARGET}">', None),
        (f'<meta name="refresh" content="0;url={TARGET}">', None),
        (f'<meta http-equiv="refresh" content="0;url={TARGET}"', None),  # never closed
        ("<html><p>no redirect here, refresh the page</p></html>", None),
        ("", None),
    ],
)
def test_the_target_of_a_refresh_page(page: str, target: str | None) -> None:
    assert meta_refresh_target(page.encode()) == target


def test_only_the_first_bytes_are_read() -> None:
    tag = f'<meta http-equiv="refresh" content="0;url={TARGET}">'.encode()
    assert meta_refresh_target(b" " * (RESOLVE_MAX_BYTES - len(tag)) + tag) == TARGET
    assert meta_refresh_target(b" " * RESOLVE_MAX_BYTES + tag) is None


@pytest.mark.parametrize("size", [25_000, 100_000, RESOLVE_MAX_BYTES])
def test_hostile_pages_are_scanned_in_linear_time(
    size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every trap shape, up to the whole window the scan reads (the old regex took 11 s on 25 KB
    of the first shape and grew with the cube of the size). Measured as work, not time: the
    bytes of the tags the scan hands to the attribute reader, each at most once, in all no more
    than the window."""
    read = resolve._attributes
    handed: list[int] = []

    def counted(tag: bytes) -> dict[bytes, bytes]:
        handed.append(len(tag))
        return read(tag)

    monkeypatch.setattr(resolve, "_attributes", counted)
    for shape, body in refresh_traps(size).items():
        handed.clear()
        assert meta_refresh_target(body) is None
        assert sum(handed) <= min(len(body), RESOLVE_MAX_BYTES), shape
