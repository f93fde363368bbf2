# The Lambda zips. Lambda takes a direct upload only up to 50 MB zipped, and the zip of a
# deployment with its dependencies is larger: the functions load theirs from this bucket (up to
# Lambda's 250 MB unzipped, which scripts/package-functions checks). Each build is uploaded under
# a key of its own (docs/deploy.md, "Upgrade"), so the previous artifacts stay here: a rollback
# is an apply with an earlier lambda_s3_key, nothing rebuilt. They expire after
# artifact_retention_days (a running function keeps its own copy of its code).
resource "aws_s3_bucket" "artifacts" {
  #checkov:skip=CKV_AWS_18:Holds only the deployment's own zips, written by the deploy and read by Lambda at deploy time; CloudTrail records those calls, a second bucket of access logs adds nothing.
  #checkov:skip=CKV_AWS_144:The zips are rebuilt from the repository in any region (docs/deploy.md); replicating them would only double their storage.
  #checkov:skip=CKV2_AWS_62:Nothing reacts to an upload: the deploy's apply names the key it uploaded.
  bucket = "${var.name_prefix}-artifacts-${data.aws_caller_identity.current.account_id}-${var.region}"
  # Emptied with the rest on teardown only (deletion_protection = false; docs/deploy.md).
  force_destroy = !var.deletion_protection
}

resource "aws_s3_bucket_public_access_block" "artifacts" {
  bucket                  = aws_s3_bucket.artifacts.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "artifacts" {
  bucket = aws_s3_bucket.artifacts.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "artifacts" {
  bucket = aws_s3_bucket.artifacts.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = aws_kms_key.fanfuse.arn
    }
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_versioning" "artifacts" {
  bucket = aws_s3_bucket.artifacts.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "artifacts" {
  bucket = aws_s3_bucket.artifacts.id

  rule {
    id     = "expire-artifacts"
    status = "Enabled"
    filter {}
    expiration {
      days = var.artifact_retention_days
    }
    noncurrent_version_expiration {
      noncurrent_days = 7
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }

  depends_on = [aws_s3_bucket_versioning.artifacts]
}
