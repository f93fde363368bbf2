# Cloud Tasks: one queue per platform (its rate limit is that provider's quota, and one queue per
# platform keeps the fan-out parallel) plus fanfuse-aggregate for the fan-in and deadline tasks.
# Each queue pins its target: whatever URL a task names, it is delivered to its function, with an
# OIDC token of the tasks service account for that function's URL.

resource "google_cloud_tasks_queue" "platform" {
  for_each = var.platforms

  name     = local.queue_ids[each.key]
  location = var.region

  rate_limits {
    max_dispatches_per_second = each.value.rate
    max_concurrent_dispatches = each.value.concurrency
  }

  retry_config {
    max_attempts       = each.value.max_attempts
    max_retry_duration = "${var.deadline_seconds}s"
    min_backoff        = "1s"
    max_backoff        = "30s"
    max_doublings      = 4
  }

  http_target {
    http_method = "POST"

    uri_override {
      scheme                    = "HTTPS"
      host                      = trimprefix(google_cloudfunctions2_function.run_platform.service_config[0].uri, "https://")
      uri_override_enforce_mode = "ALWAYS"

      path_override {
        path = "/"
      }
    }

    oidc_token {
      service_account_email = google_service_account.tasks.email
      audience              = google_cloudfunctions2_function.run_platform.service_config[0].uri
    }
  }

  # Every attempt logged costs Cloud Logging ingestion: off by default (an optional cost).
  stackdriver_logging_config {
    sampling_ratio = var.tasks_log_sampling
  }

  depends_on = [google_project_service.apis]
}

# Fan-in and deadline tasks. Finalization must happen, so more attempts than a platform run; a
# delivery that finds platforms still running before the deadline is a cheap no-op.
resource "google_cloud_tasks_queue" "aggregate" {
  name     = "fanfuse-aggregate"
  location = var.region

  rate_limits {
    max_dispatches_per_second = 50
    max_concurrent_dispatches = 20
  }

  retry_config {
    max_attempts       = 10
    max_retry_duration = "3600s"
    min_backoff        = "1s"
    max_backoff        = "60s"
    max_doublings      = 5
  }

  http_target {
    http_method = "POST"

    uri_override {
      scheme                    = "HTTPS"
      host                      = trimprefix(google_cloudfunctions2_function.aggregate.service_config[0].uri, "https://")
      uri_override_enforce_mode = "ALWAYS"

      path_override {
        path = "/"
      }
    }

    oidc_token {
      service_account_email = google_service_account.tasks.email
      audience              = google_cloudfunctions2_function.aggregate.service_config[0].uri
    }
  }

  # Every attempt logged costs Cloud Logging ingestion: off by default (an optional cost).
  stackdriver_logging_config {
    sampling_ratio = var.tasks_log_sampling
  }

  depends_on = [google_project_service.apis]
}
