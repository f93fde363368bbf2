"""The network layer: every outbound HTTP request of fanfuse goes through here.

`policy` holds the one table of HTTP defaults, `runner` sends requests (timeouts, retries,
limits, call records), `codings` undoes a body's content coding under the size cap, `charsets`
turns bytes into text by the WHATWG labels only, `guard` decides which addresses a fetched URL
may reach and follows redirects one checked hop at a time. It sits below `platforms/` and
`content/`, and knows neither: a platform or a content stage hands it a request and a policy,
and gets a response.
"""
