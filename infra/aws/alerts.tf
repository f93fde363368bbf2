# Alerts as code: an SNS topic every alarm (and the optional budget) publishes to, with e-mail
# subscriptions (alert_emails; subscribe any other endpoint to the `alert_topic_arn` output).
#
# - a dead-letter queue not empty: a platform run or an aggregation failed max_receives times;
# - a function's error rate over alert_error_rate (errors / invocations over 5 minutes);
# - a search's p95 duration over alert_search_p95_seconds (the `search` event lines);
# - spend per day over alert_spend_usd_per_day (the `platform_run` event lines' cost_usd, what
#   the receipts count: service/events.py);
# - optionally, a monthly budget (monthly_budget_usd) alerting at 80% actual and 100% forecast.
#
# The two figures fanfuse computes come from its JSON event lines (`logger = "fanfuse.events"`,
# one per finished search or platform run, by whichever function finished it) through metric
# filters on every function's log group, into the namespace local.metrics_namespace.
locals {
  metrics_namespace = "fanfuse/${var.name_prefix}"
  event_filters = {
    search_seconds = { pattern = "{ ($.logger = \"fanfuse.events\") && ($.event = \"search\") && ($.duration_s >= 0) }", value = "$.duration_s", unit = "Seconds" }
    spend_usd      = { pattern = "{ ($.logger = \"fanfuse.events\") && ($.event = \"platform_run\") && ($.cost_usd >= 0) }", value = "$.cost_usd", unit = "None" }
  }
  # Each filter on each function's log group.
  function_filters = {
    for pair in setproduct(keys(local.functions), keys(local.event_filters)) :
    "${pair[0]}/${pair[1]}" => { function = pair[0], metric = pair[1] }
  }
}

resource "aws_sns_topic" "alerts" {
  name              = "${var.name_prefix}-alerts"
  kms_master_key_id = aws_kms_key.fanfuse.arn
}

resource "aws_sns_topic_subscription" "alert_emails" {
  for_each  = toset(var.alert_emails)
  topic_arn = aws_sns_topic.alerts.arn
  protocol  = "email"
  endpoint  = each.value
}

# Budgets publish to the topic only if its policy lets them.
data "aws_iam_policy_document" "alerts_topic" {
  statement {
    sid       = "AccountPublishes"
    actions   = ["sns:Publish"]
    resources = [aws_sns_topic.alerts.arn]
    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com", "budgets.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }
  }
}

resource "aws_sns_topic_policy" "alerts" {
  arn    = aws_sns_topic.alerts.arn
  policy = data.aws_iam_policy_document.alerts_topic.json
}

resource "aws_cloudwatch_log_metric_filter" "events" {
  for_each       = local.function_filters
  name           = "${var.name_prefix}-${each.value.function}-${each.value.metric}"
  log_group_name = aws_cloudwatch_log_group.functions[each.value.function].name
  pattern        = local.event_filters[each.value.metric].pattern

  metric_transformation {
    namespace = local.metrics_namespace
    name      = each.value.metric
    value     = local.event_filters[each.value.metric].value
    unit      = local.event_filters[each.value.metric].unit
  }
}

resource "aws_cloudwatch_metric_alarm" "dead_letters" {
  for_each            = aws_sqs_queue.dead_letter
  alarm_name          = "${each.value.name}-not-empty"
  alarm_description   = "Messages in ${each.value.name}: a ${each.key} delivery failed max_receives times (docs/deploy.md, \"Alerts\")."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = each.value.name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alerts.arn]
  ok_actions          = [aws_sns_topic.alerts.arn]
}

resource "aws_cloudwatch_metric_alarm" "function_errors" {
  for_each            = local.functions
  alarm_name          = "${var.name_prefix}-${each.key}-error-rate"
  alarm_description   = "More than ${var.alert_error_rate * 100}% of ${var.name_prefix}-${each.key}'s invocations failed over 5 minutes."
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.alert_error_rate
  evaluation_periods  = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alerts.arn]
  ok_actions          = [aws_sns_topic.alerts.arn]

  metric_query {
    id          = "rate"
    expression  = "errors / MAX([errors, invocations])"
    label       = "error rate"
    return_data = true
  }
  metric_query {
    id = "errors"
    metric {
      namespace   = "AWS/Lambda"
      metric_name = "Errors"
      dimensions  = { FunctionName = aws_lambda_function.fanfuse[each.key].function_name }
      stat        = "Sum"
      period      = 300
    }
  }
  metric_query {
    id = "invocations"
    metric {
      namespace   = "AWS/Lambda"
      metric_name = "Invocations"
      dimensions  = { FunctionName = aws_lambda_function.fanfuse[each.key].function_name }
      stat        = "Sum"
      period      = 300
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "search_latency" {
  alarm_name          = "${var.name_prefix}-search-p95"
  alarm_description   = "The 95th percentile of a search's duration (start to final status) over ${var.alert_search_p95_seconds} s for 15 minutes."
  namespace           = local.metrics_namespace
  metric_name         = "search_seconds"
  extended_statistic  = "p95"
  period              = 300
  evaluation_periods  = 3
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.alert_search_p95_seconds
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alerts.arn]
  ok_actions          = [aws_sns_topic.alerts.arn]
  depends_on          = [aws_cloudwatch_log_metric_filter.events]
}

resource "aws_cloudwatch_metric_alarm" "daily_spend" {
  alarm_name          = "${var.name_prefix}-spend-per-day"
  alarm_description   = "Providers' calls cost more than ${var.alert_spend_usd_per_day} USD over one day (the receipts' cost_usd)."
  namespace           = local.metrics_namespace
  metric_name         = "spend_usd"
  statistic           = "Sum"
  period              = 86400
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.alert_spend_usd_per_day
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alerts.arn]
  depends_on          = [aws_cloudwatch_log_metric_filter.events]
}

# The account's bill, not only fanfuse's figures: optional (monthly_budget_usd).
resource "aws_budgets_budget" "monthly" {
  count        = var.monthly_budget_usd == null ? 0 : 1
  account_id   = data.aws_caller_identity.current.account_id
  name         = "${var.name_prefix}-monthly"
  budget_type  = "COST"
  limit_amount = tostring(var.monthly_budget_usd)
  limit_unit   = "USD"
  time_unit    = "MONTHLY"

  notification {
    comparison_operator        = "GREATER_THAN"
    threshold                  = 80
    threshold_type             = "PERCENTAGE"
    notification_type          = "ACTUAL"
    subscriber_email_addresses = var.alert_emails
    subscriber_sns_topic_arns  = [aws_sns_topic.alerts.arn]
  }

  notification {
    comparison_operator        = "GREATER_THAN"
    threshold                  = 100
    threshold_type             = "PERCENTAGE"
    notification_type          = "FORECASTED"
    subscriber_email_addresses = var.alert_emails
    subscriber_sns_topic_arns  = [aws_sns_topic.alerts.arn]
  }
}
