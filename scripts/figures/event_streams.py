"""The event-stream figures of issue 29 (item 2): 150 streams of one key on one running search.

Run from the repository root with the venv active: `python scripts/figures/event_streams.py`
(`fanfuse bench streams` prints the same). For the server of another commit:
`git archive COMMIT shared | tar -x -C /tmp/before && python scripts/figures/event_streams.py
--server-code /tmp/before/shared` (the measurement is this tree's, the server that commit's).
What it measures: fanfuse/tools/bench/streams.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fanfuse.tools.bench.streams import DEFAULT_SECONDS, DEFAULT_STREAMS, run_streams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streams", type=int, default=DEFAULT_STREAMS)
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS)
    parser.add_argument("--server-code", type=Path, default=None)
    args = parser.parse_args()
    report = run_streams(args.streams, args.seconds, server_code=args.server_code)
    print(report.render())


if __name__ == "__main__":
    main()
