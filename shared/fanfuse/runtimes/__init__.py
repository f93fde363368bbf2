"""The composition roots: the embedded runtime (SQLite, asyncio) and the cloud one (GCP or AWS)."""
