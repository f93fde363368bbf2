"""The TaskStore port and its implementations: sqlite (embedded) and firestore (cloud)."""

from fanfuse.store.base import Snapshot, TaskStore, Writes

__all__ = ["Snapshot", "TaskStore", "Writes"]
