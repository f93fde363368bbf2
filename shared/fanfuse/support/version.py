"""fanfuse's version, written once: the package metadata (pyproject.toml reads it),
`fanfuse.__version__`, the OpenAPI document and the MCP server's handshake take it from here.

A leaf of its own so that any layer may name the version without importing the package root,
which is the public API and reaches the runtimes (tests/unit/test_layers.py).
"""

__version__ = "0.1.0"
