# Alerts as code (Cloud Monitoring), each to the notification channels: the alert_emails' and
# alert_notification_channels. The conditions are PromQL over Cloud Monitoring's metrics
# (Cloud Run's, Cloud Tasks', and the log-based ones of monitoring.tf, whose distributions read as
# histograms: `_bucket`, `_sum`, `_count`):
#
# - deliveries failing (what a dead-letter queue holds on AWS: Cloud Tasks has none, a task
#   whose attempts all fail is dropped and its search finalized by the deadline): attempts on
#   fanfuse's queues answered other than OK;
# - a function's 5xx rate over alert_error_rate;
# - a search's p95 duration over alert_search_p95_seconds (fanfuse/search_latency);
# - spend per day over alert_spend_usd_per_day (fanfuse/cost_usd, the receipts' figures);
# - optionally, a billing budget on the project (billing_account).
locals {
  alert_channels = concat(
    [for channel in google_monitoring_notification_channel.email : channel.id],
    var.alert_notification_channels,
  )
  promql = {
    deliveries_failing = "sum by (queue_id) (rate(cloudtasks_googleapis_com:queue_task_attempt_count{monitored_resource=\"cloud_tasks_queue\",queue_id=~\"fanfuse-.*\",response_code!=\"OK\"}[5m])) > 0"
    error_rate         = "sum by (service_name) (rate(run_googleapis_com:request_count{monitored_resource=\"cloud_run_revision\",service_name=~\"fanfuse-.*\",response_code_class=\"5xx\"}[5m])) / sum by (service_name) (rate(run_googleapis_com:request_count{monitored_resource=\"cloud_run_revision\",service_name=~\"fanfuse-.*\"}[5m])) > ${var.alert_error_rate}"
    search_p95         = "histogram_quantile(0.95, sum by (le) (rate(logging_googleapis_com:user_fanfuse_search_latency_bucket[15m]))) > ${var.alert_search_p95_seconds}"
    spend_per_day      = "sum(increase(logging_googleapis_com:user_fanfuse_cost_usd_sum[1d])) > ${var.alert_spend_usd_per_day}"
  }
  alerts = {
    deliveries_failing = { name = "fanfuse: task deliveries failing", duration = "300s", about = "Cloud Tasks deliveries to fanfuse's functions are failing: a platform run or an aggregation is being retried, and dropped after max_attempts (the search then ends by its deadline)." }
    error_rate         = { name = "fanfuse: function error rate", duration = "300s", about = "More than alert_error_rate of a function's requests answered 5xx over 5 minutes." }
    search_p95         = { name = "fanfuse: search p95 latency", duration = "900s", about = "The 95th percentile of a search's duration (start to final status) over alert_search_p95_seconds for 15 minutes." }
    spend_per_day      = { name = "fanfuse: spend per day", duration = "0s", about = "The providers' calls cost more than alert_spend_usd_per_day over the last day (the receipts' cost_usd)." }
  }
}

resource "google_monitoring_notification_channel" "email" {
  for_each     = toset(var.alert_emails)
  display_name = "fanfuse alerts: ${each.value}"
  type         = "email"
  labels = {
    email_address = each.value
  }

  depends_on = [google_project_service.apis]
}

resource "google_monitoring_alert_policy" "fanfuse" {
  for_each              = local.alerts
  display_name          = each.value.name
  combiner              = "OR"
  notification_channels = local.alert_channels

  documentation {
    content   = "${each.value.about} See docs/deploy.md, \"Alerts\"."
    mime_type = "text/markdown"
  }

  conditions {
    display_name = each.value.name
    condition_prometheus_query_language {
      query               = local.promql[each.key]
      duration            = each.value.duration
      evaluation_interval = "60s"
    }
  }

  depends_on = [google_project_service.apis, google_logging_metric.search_latency, google_logging_metric.run_figures]
}

# The project's bill, not only fanfuse's figures: optional (billing_account).
resource "google_billing_budget" "monthly" {
  count           = var.billing_account == null ? 0 : 1
  billing_account = var.billing_account
  display_name    = "fanfuse monthly budget"

  budget_filter {
    projects = ["projects/${var.project_id}"]
  }

  amount {
    specified_amount {
      currency_code = "USD"
      units         = tostring(var.monthly_budget_usd)
    }
  }

  threshold_rules {
    threshold_percent = 0.8
  }
  threshold_rules {
    threshold_percent = 1.0
    spend_basis       = "FORECASTED_SPEND"
  }

  all_updates_rule {
    monitoring_notification_channels = local.alert_channels
    disable_default_iam_recipients   = length(local.alert_channels) > 0
  }

  depends_on = [google_project_service.apis]
}
