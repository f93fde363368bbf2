"""`fanfuse mcp`: the search service as an MCP server, for agents.

`backend.py` is the port the tools are written against (the embedded runtime, or a deployed
stack's HTTP API), `render.py` turns a search into what a model reads (markdown and a trimmed
structured document), `tools.py` declares and runs the tools, `serve.py` speaks stdio or
streamable HTTP. Named `agent`, not `mcp`, so it never shadows the SDK.
"""
