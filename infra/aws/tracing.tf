# Tracing (docs/tracing.md): each Lambda exports its spans over OTLP to the AWS Distro for
# OpenTelemetry collector, run beside it as a Lambda layer, which sends them to X-Ray; off by
# default (no OTEL_* variable: fanfuse's tracing is a no-op, fanfuse/tracing/setup.py).
#
# The spans use X-Ray's trace ids and propagation (OTEL_PYTHON_ID_GENERATOR=xray,
# OTEL_PROPAGATORS=xray,tracecontext: the package is built with the `aws-trace` extra), so X-Ray
# shows one search as one trace, its queue hops carried in the SQS messages' attributes. The
# functions already may write to X-Ray (iam.tf, statement "Tracing"), which is all the
# collector's X-Ray exporter needs. ADOT publishes its collector layer per region and
# architecture: its ARN is a variable, required when tracing is on.

variable "tracing" {
  description = "Export every Lambda's spans to X-Ray through the ADOT collector layer."
  type        = bool
  default     = false
}

variable "tracing_collector_layer_arn" {
  description = "The ADOT collector Lambda layer for this region and architecture (aws-otel-collector-*); required when tracing."
  type        = string
  default     = null
  validation {
    condition     = var.tracing_collector_layer_arn == null || can(regex("^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]+:[0-9]+$", var.tracing_collector_layer_arn))
    error_message = "tracing_collector_layer_arn is a Lambda layer version ARN."
  }
}

variable "tracing_sample_ratio" {
  description = "The share of searches traced (a caller's sampled trace header is always followed)."
  type        = number
  default     = 1.0
  validation {
    condition     = var.tracing_sample_ratio >= 0 && var.tracing_sample_ratio <= 1
    error_message = "tracing_sample_ratio is a share, from 0 to 1."
  }
}

locals {
  # OpenTelemetry's own variables (the SDK reads them). The collector layer listens on
  # localhost:4318 (OTLP/HTTP) inside the function's sandbox.
  tracing_env = var.tracing ? {
    OTEL_TRACES_EXPORTER               = "otlp"
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL = "http/protobuf"
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = "http://localhost:4318/v1/traces"
    OTEL_SERVICE_NAME                  = var.name_prefix
    OTEL_PROPAGATORS                   = "xray,tracecontext"
    OTEL_PYTHON_ID_GENERATOR           = "xray"
    OTEL_TRACES_SAMPLER                = "parentbased_traceidratio"
    OTEL_TRACES_SAMPLER_ARG            = tostring(var.tracing_sample_ratio)
  } : {}
  tracing_layers = var.tracing ? [var.tracing_collector_layer_arn] : []
}

check "tracing_has_a_collector" {
  assert {
    condition     = !var.tracing || var.tracing_collector_layer_arn != null
    error_message = "tracing is on: set tracing_collector_layer_arn to the ADOT collector layer of this region."
  }
}
