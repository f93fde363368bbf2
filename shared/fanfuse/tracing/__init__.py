"""OpenTelemetry tracing: one trace per search, across every hop (see docs/tracing.md).

- `spans`: what the call sites use (a span, an event, the search a span belongs to), a no-op
  until `setup.configure` turned tracing on: no OpenTelemetry import, no measurable cost.
- `setup`: tracing on the standard `OTEL_*` variables (exporter, endpoint, sampler,
  propagators, id generator, service name), done once per process by its composition root.
- `delivery`: what a queued task carries besides its body (the trace context and when it was
  enqueued), written by each queue and read back where the delivery is handled.
"""
