"""`fanfuse serve`: the embedded runtime as a resident HTTP server.

One process keeps one EmbeddedRuntime (SQLite store, in-process queue, the service) and its
platforms' models and indexes loaded for its whole life, and answers the Cloud Functions' public
calls under their names (`/start_search`, `/search_status/{task_id}`, `/cancel_search`), so
`fanfuse search --endpoint http://HOST:PORT/start_search` and any app written against the
functions work unchanged. It adds what only a resident process can offer: `POST /search` (start
and wait, one call), `GET /search_status/{task_id}/events` (Server-Sent Events of the progress),
`GET /platforms`, and `GET /openapi.json` (the one document of `fanfuse.http.openapi`).

Why this stack. Starlette is the small ASGI toolkit FastAPI itself is built on, and the mcp SDK
already depends on it, so the MCP server's streamable HTTP transport and `serve` share one
stack; uvicorn is the reference ASGI server; sse-starlette is the maintained SSE response, with
client-disconnect handling and keep-alive pings. FastAPI is not used: it would bring a second
schema generator, while the API's OpenAPI document is generated from our own pydantic models and
shared with the functions. The HTTP rules themselves (body limit, task ids, error bodies) are
`fanfuse.http.api`'s, the same the functions use.

- `app.py`: the Starlette application, its routes and its lifespan (one runtime, warmed);
- `watch.py`: waiting on a search, bounded: the sync cap of `/search` and the event stream;
- `server.py`: binding (port 0 = a free port), the `url`/`ready` lines, clean stops.
"""
