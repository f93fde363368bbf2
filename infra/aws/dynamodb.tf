# The one table of the DynamoDB store (shared/fanfuse/store/dynamodb_codec.py: `ensure_table`
# makes the same one locally): `pk`/`sk`, the owner index, the TTL attribute `ttl`.
resource "aws_dynamodb_table" "fanfuse" {
  #checkov:skip=CKV_AWS_28:Point-in-time recovery is var.point_in_time_recovery, an optional cost off by default: the items live ttl_minutes (30) and are rebuilt by the next search; an API key's record is the one thing worth restoring (docs/deploy.md, "Optional costs").
  name         = var.name_prefix
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "pk"
  range_key    = "sk"
  # Lifted only to tear the deployment down (docs/deploy.md, "Teardown").
  deletion_protection_enabled = var.deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }
  attribute {
    name = "sk"
    type = "S"
  }
  attribute {
    name = "owner"
    type = "S"
  }
  attribute {
    name = "deadline"
    type = "N"
  }

  global_secondary_index {
    name               = "owner-deadline"
    hash_key           = "owner"
    range_key          = "deadline"
    projection_type    = "INCLUDE"
    non_key_attributes = ["status"]
  }

  # A search, its platform runs and its contents expire together (FANFUSE_TTL_MINUTES).
  ttl {
    attribute_name = "ttl"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = aws_kms_key.fanfuse.arn
  }
}
