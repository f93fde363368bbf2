"""The TaskQueue port and its implementations: inprocess (embedded) and cloud_tasks (cloud)."""
