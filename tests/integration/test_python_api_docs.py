"""docs/python-api.md, executed: every ```python block runs as written, in order.

Only the offline `docs` platform is deployed here (FANFUSE_DEPLOYED_PLATFORMS), so the examples'
`all` never reaches a web platform and `fast` never loads the vectors model.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


@pytest.fixture(autouse=True)
def _embedded_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FANFUSE_DB_PATH", str(tmp_path / "api.db"))
    monkeypatch.setenv("FANFUSE_DEPLOYED_PLATFORMS", '["docs"]')


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_each_example_runs_and_prints(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    code = compile(BLOCKS[index], f"{PAGE.name}[python block {index + 1}]", "exec")
    exec(code, {"__name__": "__docs__"})
    assert capsys.readouterr().out.strip()


def test_search_inside_a_running_loop_points_to_the_runtime() -> None:
    import asyncio

    import fanfuse

    async def inside() -> None:
        fanfuse.search("laser", platform="docs")

    with pytest.raises(RuntimeError, match=r"async with fanfuse.Runtime\(\)"):
        asyncio.run(inside())


def test_keyword_fields_replace_the_bodys_and_a_bad_one_names_the_field() -> None:
    import fanfuse
    from fanfuse.wire.errors import InvalidRequest

    view = fanfuse.search({"query": "laser", "max_results": 9}, platform="docs", max_results=2)
    assert len(view.results) == 2
    with pytest.raises(InvalidRequest) as info:
        fanfuse.search("laser", platform="docs", max_results=0)
    assert [p.field for p in info.value.problems] == ["max_results"]


def test_a_request_model_keeps_what_its_caller_set_against_the_modes_defaults() -> None:
    from fanfuse.runtimes.embedded import request_payload
    from fanfuse.wire.models import SearchRequest

    explicit = SearchRequest(query="x", mode="comprehensive", include_content=False)
    assert request_payload(explicit, {})["include_content"] is False
    assert request_payload(SearchRequest(query="x", mode="comprehensive"), {})["include_content"]
    assert request_payload(SearchRequest(query="x"), {"max_results": 3}) == {
        "query": ["x"],
        "max_results": 3,
    }
