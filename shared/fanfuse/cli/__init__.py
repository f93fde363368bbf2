"""The `fanfuse` command."""
