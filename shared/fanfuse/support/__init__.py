"""Stdlib-only helpers: log lines, redaction, Retry-After. Imports no other part of fanfuse."""
