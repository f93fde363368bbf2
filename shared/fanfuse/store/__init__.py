"""The TaskStore port and its implementations: sqlite (embedded) and firestore (cloud)."""
