"""Write accounting for the cloud stores: committed document writes, counted per path.

Its own module so the store stays about documents; tests read the log of several function
processes through `WriteLog.read`.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Iterable
from pathlib import Path


def patch_op(fields: Iterable[str]) -> str:
    """The log's name for a `patch_run`: "renew" for a lease renewal alone (heartbeat.py), whose
    count depends on how long the run took, "patch" for a progress write."""
    return "renew" if set(fields) == {"lease_until"} else "patch"


class WriteLog:
    """Counts committed document writes per document path.

    The design budgets writes per document (about one per second sustained; the task document is
    written at start, once per platform at fan-in, and at finalization). `counts` holds this
    process's writes; with a `path`, each write is also appended as one JSON line so a test can
    add up the writes of several function processes (O_APPEND keeps short lines whole).
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def record(self, op: str, paths: Iterable[str]) -> None:
        paths = list(paths)
        if not paths:
            return
        with self._lock:
            self.counts.update(paths)
        if self.path is not None:
            lines = "".join(
                json.dumps({"op": op, "doc": p, "pid": os.getpid()}) + "\n" for p in paths
            )
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, lines.encode())
            finally:
                os.close(fd)

    @staticmethod
    def read(path: Path, prefix: str = "") -> Counter[str]:
        """Writes per document path from a log file, for paths starting with `prefix`."""
        counts: Counter[str] = Counter()
        for (doc, _), n in WriteLog.read_ops(path, prefix).items():
            counts[doc] += n
        return counts

    @staticmethod
    def read_ops(path: Path, prefix: str = "") -> Counter[tuple[str, str]]:
        """Writes per (document path, operation): create, transact or patch."""
        counts: Counter[tuple[str, str]] = Counter()
        if not path.exists():
            return counts
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry["doc"].startswith(prefix):
                counts[entry["doc"], entry["op"]] += 1
        return counts
