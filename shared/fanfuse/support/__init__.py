"""Stdlib-only helpers: log lines, redaction, Retry-After; the version string. Imports no other
part of fanfuse."""
