# One role per function, each allowed only what its handler does (least privilege):
# - every function: its own log group, X-Ray (when traced), the key, the table's item operations;
# - http: send to every task queue (start_search enqueues the platforms and the deadline), and
#   Scan the table (an operator's GET /search_status/stats reads every owner's recent searches:
#   store/recent.py; the TTL expires items, nothing else scans);
# - worker: consume the platform queues, send to the aggregate queue (the last fan-in);
# - aggregator: consume the aggregate queue and send to it (a deadline past SQS's 15-minute
#   delay is sent on, hop by hop: queue/sqs.py).
locals {
  platform_queue_arns = [for name in var.platforms : aws_sqs_queue.tasks[name].arn]
  all_queue_arns      = [for queue in aws_sqs_queue.tasks : queue.arn]
  consume             = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"]
  send                = ["sqs:SendMessage", "sqs:GetQueueUrl"]
  queue_access = {
    http = [{ actions = local.send, resources = local.all_queue_arns }]
    worker = [
      { actions = local.consume, resources = local.platform_queue_arns },
      { actions = local.send, resources = [aws_sqs_queue.tasks["aggregate"].arn] },
    ]
    aggregator = [
      { actions = concat(local.consume, ["sqs:SendMessage"]), resources = [aws_sqs_queue.tasks["aggregate"].arn] },
    ]
  }
}

data "aws_iam_policy_document" "assume_lambda" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "function" {
  for_each           = local.functions
  name               = "${var.name_prefix}-${each.key}"
  assume_role_policy = data.aws_iam_policy_document.assume_lambda.json
}

data "aws_iam_policy_document" "function" {
  for_each = local.functions

  statement {
    sid       = "OwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.functions[each.key].arn}:*"]
  }

  dynamic "statement" {
    for_each = var.xray_tracing ? ["Tracing"] : []
    content {
      sid       = statement.value
      actions   = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]
      resources = ["*"] # X-Ray has no resource-level permissions
    }
  }

  statement {
    sid       = "Key"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [aws_kms_key.fanfuse.arn]
  }

  statement {
    sid = "Table"
    actions = [
      "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem",
      "dynamodb:ConditionCheckItem", "dynamodb:BatchWriteItem", "dynamodb:Query",
    ]
    resources = [aws_dynamodb_table.fanfuse.arn, "${aws_dynamodb_table.fanfuse.arn}/index/*"]
  }

  dynamic "statement" {
    for_each = each.key == "http" ? ["OperatorStats"] : []
    content {
      sid       = statement.value
      actions   = ["dynamodb:Scan"]
      resources = [aws_dynamodb_table.fanfuse.arn]
    }
  }

  dynamic "statement" {
    for_each = local.queue_access[each.key]
    content {
      actions   = statement.value.actions
      resources = statement.value.resources
    }
  }
}

resource "aws_iam_role_policy" "function" {
  for_each = local.functions
  name     = "${var.name_prefix}-${each.key}"
  role     = aws_iam_role.function[each.key].id
  policy   = data.aws_iam_policy_document.function[each.key].json
}
