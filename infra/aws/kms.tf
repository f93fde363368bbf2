# One customer-managed key for everything fanfuse keeps: the table, the queues, the functions'
# environment (it holds the task secret) and their logs.
data "aws_caller_identity" "current" {}

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
      test     = "ArnLike"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = ["arn:aws:logs:${var.region}:${data.aws_caller_identity.current.account_id}:log-group:/aws/lambda/${var.name_prefix}-*"]
    }
  }
}

resource "aws_kms_key" "fanfuse" {
  description             = "fanfuse: table, queues, function environment and logs"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.kms.json
}

resource "aws_kms_alias" "fanfuse" {
  name          = "alias/${var.name_prefix}"
  target_key_id = aws_kms_key.fanfuse.key_id
}
