"""The hostile-body figures of issue 19: what a 64 KB invalid body costs `fanfuse serve`.

Run from the repository root with the venv active: `python scripts/figures/hostile_bodies.py`
(for the code before a change: `PYTHONPATH=<that tree>/shared python scripts/figures/...`).
A real `fanfuse serve --port 0` on 127.0.0.1, its rate limit raised so that every body is
validated (the worst case: many tenants, each within its own rate). Figures printed:

- `one body`: the wall time of one POST /start_search whose `platform` lists 16,000 distinct
  names (64 KB, a 400 after validation), best and median of 5;
- `openapi alone`: GET /openapi.json's latency, median of 9;
- `openapi with N`: its latency while N such bodies are answered at once (sent together, the
  GET 20 ms later), median of 3 rounds, and the delay over `openapi alone`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import statistics
import string
import tempfile
import time
from collections.abc import Awaitable

import httpx

from fanfuse.tools.devstack.serve_process import ServeProcess

NAMES = 16_000


def hostile_body() -> bytes:
    """`{"query": "q", "platform": "aaa,aab,..."}`: 16,000 distinct names, just under 64 KiB."""
    letters = string.ascii_lowercase
    names = ("".join(t) for t in itertools.product(letters, repeat=3))
    body = json.dumps({"query": "q", "platform": ",".join(itertools.islice(names, NAMES))})
    raw = body.encode()
    assert len(raw) <= 64 * 1024, len(raw)
    return raw


async def timed(send: Awaitable[httpx.Response]) -> float:
    start = time.perf_counter()
    await send
    return time.perf_counter() - start


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


async def measure(url: str, key: str) -> None:
    raw = hostile_body()
    headers = {"X-Api-Key": key, "Content-Type": "application/json"}
    limits = httpx.Limits(max_connections=64)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def post() -> httpx.Response:
            return await client.post("/start_search", content=raw, headers=headers)

        first = await post()
        print(f"status {first.status_code}, {len(raw)} bytes: {first.json()['message']}")
        ones = [await timed(post()) for _ in range(5)]
        print(f"one body: best {ms(min(ones))}, median {ms(statistics.median(ones))}")
        alone = statistics.median([await timed(client.get("/openapi.json")) for _ in range(9)])
        print(f"openapi alone: {ms(alone)}")
        for n in (4, 20):
            rounds = []
            for _ in range(3):
                posts = [asyncio.ensure_future(post()) for _ in range(n)]
                await asyncio.sleep(0.02)
                rounds.append(await timed(client.get("/openapi.json")))
                answers = await asyncio.gather(*posts)
                assert {a.status_code for a in answers} == {400}, {a.status_code for a in answers}
            loaded = statistics.median(rounds)
            print(f"openapi with {n}: {ms(loaded)}, delay {ms(loaded - alone)}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
        env["FANFUSE_DB_PATH"] = f"{tmp}/hostile.db"
        env["FANFUSE_CACHE_DIR"] = f"{tmp}/cache"
        env["FANFUSE_RATE_PER_MINUTE"] = "1000000"
        env["FANFUSE_MAX_IN_FLIGHT"] = "1000"
        with ServeProcess("--warm", "none", env=env) as server:
            asyncio.run(measure(server.url, server.api_key))


if __name__ == "__main__":
    main()
