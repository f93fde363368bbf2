# The one table of the DynamoDB store (shared/fanfuse/store/dynamodb_codec.py: `ensure_table`
# makes the same one locally): `pk`/`sk`, the owner index, the TTL attribute `ttl`.
resource "aws_dynamodb_table" "fanfuse" {
  name                        = var.name_prefix
  billing_mode                = "PAY_PER_REQUEST"
  hash_key                    = "pk"
  range_key                   = "sk"
  deletion_protection_enabled = true

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
    enabled = true
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = aws_kms_key.fanfuse.arn
  }
}
