# Tracing (docs/tracing.md): each function exports its spans to Cloud Trace when `tracing` is on,
# through OpenTelemetry's Cloud Trace exporter (the function source is built with the
# `gcp-trace` extra: scripts/package-functions). Off by default: no OTEL_* variable is set, and
# fanfuse's tracing is then a no-op (fanfuse/tracing/setup.py).
#
# What it needs: the Cloud Trace API, and each function's own service account allowed to write
# traces (roles/cloudtrace.agent: cloudtrace.traces.patch, nothing to read). The trace context
# crosses the queue hops in the tasks' own headers (traceparent), so one search is one trace, and
# each log line names its span (logging.googleapis.com/trace, spanId), grouped under it.

variable "tracing" {
  description = "Export every function's spans to Cloud Trace (OpenTelemetry, OTEL_TRACES_EXPORTER=gcp_trace)."
  type        = bool
  default     = false
}

variable "tracing_sample_ratio" {
  description = "The share of searches traced (a caller's sampled traceparent is always followed)."
  type        = number
  default     = 1.0
  validation {
    condition     = var.tracing_sample_ratio >= 0 && var.tracing_sample_ratio <= 1
    error_message = "tracing_sample_ratio is a share, from 0 to 1."
  }
}

locals {
  # OpenTelemetry's own variables (the SDK reads them; fanfuse has no setting of its own here).
  tracing_env = var.tracing ? {
    OTEL_TRACES_EXPORTER    = "gcp_trace"
    OTEL_SERVICE_NAME       = "fanfuse"
    OTEL_TRACES_SAMPLER     = "parentbased_traceidratio"
    OTEL_TRACES_SAMPLER_ARG = tostring(var.tracing_sample_ratio)
    OTEL_PROPAGATORS        = "tracecontext"
  } : {}
}

resource "google_project_service" "cloudtrace" {
  count              = var.tracing ? 1 : 0
  service            = "cloudtrace.googleapis.com"
  disable_on_destroy = false
}

resource "google_project_iam_member" "trace_writer" {
  for_each = var.tracing ? local.functions : toset([])
  project  = var.project_id
  role     = "roles/cloudtrace.agent"
  member   = "serviceAccount:${google_service_account.function[each.key].email}"

  depends_on = [google_project_service.cloudtrace]
}
