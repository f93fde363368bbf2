# One SQS queue per platform and one for aggregation (shared/fanfuse/queue/sqs.py: names from
# queue_id, `{prefix}-{platform, _ as -}`), each with a dead-letter queue after max_receives.
locals {
  queue_names = concat(var.platforms, ["aggregate"])
  queue_ids   = { for name in local.queue_names : name => "${var.name_prefix}-${replace(name, "_", "-")}" }
  # A received message stays hidden while its handler may still run (SQS requires at least the
  # function's timeout).
  visibility_timeout = local.worker_timeout + 30
}

resource "aws_sqs_queue" "dead_letter" {
  for_each                  = local.queue_ids
  name                      = "${each.value}-dlq"
  message_retention_seconds = 1209600
  kms_master_key_id         = aws_kms_key.fanfuse.arn
}

resource "aws_sqs_queue" "tasks" {
  for_each                   = local.queue_ids
  name                       = each.value
  visibility_timeout_seconds = local.visibility_timeout
  message_retention_seconds  = 86400
  kms_master_key_id          = aws_kms_key.fanfuse.arn
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dead_letter[each.key].arn
    maxReceiveCount     = var.max_receives
  })
}

resource "aws_sqs_queue_redrive_allow_policy" "dead_letter" {
  for_each  = local.queue_ids
  queue_url = aws_sqs_queue.dead_letter[each.key].id
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.tasks[each.key].arn]
  })
}
