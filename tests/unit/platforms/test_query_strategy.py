"""Query strategy: shaping by language, supplemental queries when a platform finds too few."""

from __future__ import annotations

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.net.runner import Runner
from fanfuse.platforms.strategy import shape_query, supplemental_queries
from tests.support.platforms import cases
from tests.support.platforms.harness import fixture, run_search


def test_cjk_queries_lose_spaces_and_question_marks() -> None:
    assert shape_query("注意力 机制 是什么？") == "注意力机制是什么"  # noqa: RUF001
    assert shape_query("  what is   attention? ") == "what is attention"
    assert shape_query("attention", "zh-CN") == "attention"


def test_supplemental_queries_broaden() -> None:
    assert supplemental_queries('"rust async" runtime site:tokio.rs performance') == [
        "rust async runtime performance",
        "rust async runtime",
    ]
    assert supplemental_queries("注意力机制是什么") == ["注意力机制"]
    assert supplemental_queries("rust") == []


async def test_weixin_tops_up_a_short_list_with_a_broader_query(
    server: HTTPServer, runner: Runner
) -> None:
    def answer(request: Request) -> Response:
        name = "results" if request.args["query"] == "注意力机制" else "empty"
        return Response(fixture(f"weixin/{name}.html"), content_type="text/html; charset=utf-8")

    server.expect_request("/weixin").respond_with_handler(answer)
    platform = cases._weixin(server.url_for("/").rstrip("/"), max_pages=1)
    lists, _ = await run_search(platform, runner, ["注意力 机制 是什么？"], limit=5)  # noqa: RUF001
    assert [r.args["query"] for r, _ in server.log] == ["注意力机制是什么", "注意力机制"]
    assert len(lists[0]) == 2
    assert all(h.metadata["supplemental_query"] == "注意力机制" for h in lists[0])
