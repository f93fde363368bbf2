# Log-based metrics over the event lines fanfuse's functions write (shared/fanfuse/service/
# events.py, one JSON line each, read as jsonPayload): the figures `fanfuse serve` exposes at
# GET /metrics, counted by Cloud Logging over every instance, with no process to scrape.
# Cloud Monitoring names them logging.googleapis.com/user/fanfuse/<name>.

locals {
  # Cloud Functions (2nd gen) run on Cloud Run: their lines are Cloud Run revisions' entries.
  event_lines = "resource.type=\"cloud_run_revision\" AND jsonPayload.logger=\"fanfuse.events\""
  latency_buckets = {
    # 0.05 s doubling to about 100 s: a local index to an LLM-backed search
    scale         = 0.05
    growth_factor = 2
    count         = 12
  }
  count_bounds = [0, 1, 2, 5, 10, 20, 50]
  usd_bounds   = [0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1]
}

resource "google_logging_metric" "searches" {
  name        = "fanfuse/searches"
  description = "Searches ended (finalized or cancelled), by final status."
  filter      = "${local.event_lines} AND jsonPayload.event=\"search\""
  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key        = "status"
      value_type = "STRING"
    }
  }
  label_extractors = {
    status = "EXTRACT(jsonPayload.status)"
  }
}

resource "google_logging_metric" "platform_runs" {
  name        = "fanfuse/platform_runs"
  description = "Platform runs ended, by platform, outcome and (failed runs) failure kind."
  filter      = "${local.event_lines} AND jsonPayload.event=\"platform_run\""
  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key        = "platform"
      value_type = "STRING"
    }
    labels {
      key        = "outcome"
      value_type = "STRING"
    }
    labels {
      key         = "kind"
      value_type  = "STRING"
      description = "captcha, rate_limited, denied, error, query, not_asked, internal; empty unless failed"
    }
  }
  label_extractors = {
    platform = "EXTRACT(jsonPayload.platform)"
    outcome  = "EXTRACT(jsonPayload.outcome)"
    kind     = "EXTRACT(jsonPayload.kind)"
  }
}

resource "google_logging_metric" "platform_latency" {
  name            = "fanfuse/platform_latency"
  description     = "The searching stage's seconds of runs that asked their provider and succeeded."
  filter          = "${local.event_lines} AND jsonPayload.event=\"platform_run\" AND jsonPayload.latency_s>=0"
  value_extractor = "EXTRACT(jsonPayload.latency_s)"
  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "s"
    labels {
      key        = "platform"
      value_type = "STRING"
    }
  }
  label_extractors = {
    platform = "EXTRACT(jsonPayload.platform)"
  }
  bucket_options {
    exponential_buckets {
      num_finite_buckets = local.latency_buckets.count
      growth_factor      = local.latency_buckets.growth_factor
      scale              = local.latency_buckets.scale
    }
  }
}

# A search's duration, start to final status (the `search` event's duration_s): the p95 alert's
# figure (alerts.tf).
resource "google_logging_metric" "search_latency" {
  name            = "fanfuse/search_latency"
  description     = "Seconds from a search's start to its final status."
  filter          = "${local.event_lines} AND jsonPayload.event=\"search\" AND jsonPayload.duration_s>=0"
  value_extractor = "EXTRACT(jsonPayload.duration_s)"
  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "s"
    labels {
      key        = "status"
      value_type = "STRING"
    }
  }
  label_extractors = {
    status = "EXTRACT(jsonPayload.status)"
  }
  bucket_options {
    exponential_buckets {
      num_finite_buckets = local.latency_buckets.count
      growth_factor      = local.latency_buckets.growth_factor
      scale              = local.latency_buckets.scale
    }
  }
}

# Sums of a field are distributions in Cloud Logging: the distribution's sum is the total
# (queries answered from the cache; dollars spent), its count the runs.
resource "google_logging_metric" "run_figures" {
  for_each = {
    cache_hits   = { field = "cache_hits", unit = "1", bounds = local.count_bounds, about = "Queries answered from the cache, per platform run." }
    cache_misses = { field = "cache_misses", unit = "1", bounds = local.count_bounds, about = "Queries the cache could not answer, per platform run." }
    cost_usd     = { field = "cost_usd", unit = "{USD}", bounds = local.usd_bounds, about = "What a platform run's provider calls cost, in USD." }
  }
  name            = "fanfuse/${each.key}"
  description     = each.value.about
  filter          = "${local.event_lines} AND jsonPayload.event=\"platform_run\""
  value_extractor = "EXTRACT(jsonPayload.${each.value.field})"
  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = each.value.unit
    labels {
      key        = "platform"
      value_type = "STRING"
    }
  }
  label_extractors = {
    platform = "EXTRACT(jsonPayload.platform)"
  }
  bucket_options {
    explicit_buckets {
      bounds = each.value.bounds
    }
  }
}

resource "google_logging_metric" "breaker_transitions" {
  name        = "fanfuse/breaker_transitions"
  description = "A platform's circuit breaker moved to another state (closed, open, half_open)."
  filter      = "${local.event_lines} AND jsonPayload.event=\"breaker\""
  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key        = "platform"
      value_type = "STRING"
    }
    labels {
      key        = "state"
      value_type = "STRING"
    }
    labels {
      key        = "reason"
      value_type = "STRING"
    }
  }
  label_extractors = {
    platform = "EXTRACT(jsonPayload.platform)"
    state    = "EXTRACT(jsonPayload.state)"
    reason   = "EXTRACT(jsonPayload.reason)"
  }
}
