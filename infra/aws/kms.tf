# One customer-managed key for everything fanfuse keeps: the table, the queues, the functions'
# environment (it holds the task secret), the secrets, the artifacts, the alert topic and the logs.
data "aws_caller_identity" "current" {}

locals {
  # Every log group the key encrypts, by owner. CloudWatch Logs may use the key for exactly these
  # (the key policy below names each one): a group encrypted with a key whose policy does not
  # allow it is refused at creation, and with it the stage that logs there.
  log_groups = merge(
    { for name in keys(local.functions) : name => "/aws/lambda/${var.name_prefix}-${name}" },
    { api = "/aws/apigateway/${var.name_prefix}-api" },
  )
  log_group_arn = "arn:aws:logs:${var.region}:${data.aws_caller_identity.current.account_id}:log-group"
}

data "aws_iam_policy_document" "kms" {
  #checkov:skip=CKV_AWS_111:A key policy's "*" resource means this key alone (KMS key policies name no other resource); write access is the account's, as AWS's default key policy grants.
  #checkov:skip=CKV_AWS_356:A key policy's "*" resource means this key alone; it cannot name its own ARN before the key exists.
  #checkov:skip=CKV_AWS_109:The account root administers its own key (AWS's default key policy), so IAM policies decide who else may; without it the key could become unmanageable.
  statement {
    sid       = "AccountAdministers"
    actions   = ["kms:*"]
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = ["arn:aws:iam::${data.aws_caller_identity.current.account_id}:root"]
    }
  }

  statement {
    sid       = "CloudWatchLogsEncrypt"
    actions   = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["logs.${var.region}.amazonaws.com"]
    }
    condition {
      test     = "ArnEquals"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = [for name in values(local.log_groups) : "${local.log_group_arn}:${name}"]
    }
  }

  # The alarms publish to the encrypted alert topic (alerts.tf); budgets do too, when one is set.
  statement {
    sid       = "AlertsPublish"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com", "budgets.amazonaws.com"]
    }
  }
}

resource "aws_kms_key" "fanfuse" {
  description             = "fanfuse: table, queues, secrets, artifacts, function environment and logs"
  enable_key_rotation     = true
  deletion_window_in_days = var.kms_deletion_window_days
  policy                  = data.aws_iam_policy_document.kms.json
}

resource "aws_kms_alias" "fanfuse" {
  name          = "alias/${var.name_prefix}"
  target_key_id = aws_kms_key.fanfuse.key_id
}
