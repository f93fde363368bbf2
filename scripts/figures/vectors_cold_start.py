"""The cold-start figure of issue 33: a `vectors` worker's first search, before and after ONNX.

Run from the repository root with the venv active:
    git archive 873bc36 shared | tar -x -C /tmp/before      # the torch version's sources
    python scripts/figures/vectors_cold_start.py --before /tmp/before/shared --runs 3

Each run is a fresh interpreter with an empty cache (a worker's cold /tmp): it imports the
platform, runs its first search on the bundled Vaswani corpus (the model loaded, the shipped
embeddings read), then a warm one. The two versions alternate, so the machine's load falls on
both alike; the medians are printed last. `--before` needs torch and sentence-transformers in
this venv (the `convert` extra has them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PROBE = """
import asyncio, json, sys, time
started = time.perf_counter()
from fanfuse.platforms.contract import PlatformContext, SearchParams
from fanfuse.platforms.vectors import VectorsPlatform
imported = time.perf_counter()
platform = VectorsPlatform()
def search(query):
    ctx = PlatformContext(settings=platform.load_settings())
    [hits] = asyncio.run(platform.search(ctx, SearchParams(queries=[query], limit=10)))
    return ctx, hits
ctx, hits = search("measurement of dielectric constant of liquids")
first = time.perf_counter()
search("electron plasma waves")
warm = time.perf_counter()
print(json.dumps({
    "import_s": imported - started, "first_search_s": first - imported,
    "cold_total_s": first - started, "warm_search_s": warm - first,
    "answered_by": ctx.record.provider or "vectors", "top": hits[0].metadata["doc_id"],
    "torch_imported": "torch" in sys.modules,
}))
"""


def run(source: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": str(source), "FANFUSE_CACHE_DIR": cache}
        done = subprocess.run(
            [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600
        )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(prog="scripts/figures/vectors_cold_start.py")
    parser.add_argument("--before", type=Path, help="another version's `shared` folder")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    versions = {"after": Path(__file__).resolve().parents[2] / "shared"}
    if args.before is not None:
        versions = {"before": args.before, **versions}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in versions}
    for _ in range(args.runs):
        for name, source in versions.items():
            figures = run(source)
            results[name].append(figures)
            print(name, json.dumps({k: round(v, 3) if isinstance(v, float) else v
                                    for k, v in figures.items()}), flush=True)  # fmt: skip
    for name, runs in results.items():
        medians = {
            key: round(statistics.median(r[key] for r in runs), 3)
            for key in ("import_s", "first_search_s", "cold_total_s", "warm_search_s")
        }
        print(f"{name} medians over {len(runs)} runs: {json.dumps(medians)}")


if __name__ == "__main__":
    main()
