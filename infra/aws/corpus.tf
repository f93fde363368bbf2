# Published corpora (docs/deploy.md, "Your own documents"): a team's documents searched by `docs`
# (BM25) and `vectors` (MiniLM) platforms on Lambda. An operator publishes a corpus with
#   fanfuse index ./handbook --publish s3://BUCKET/handbook
# (immutable versions, a pointer written last: fanfuse.retrieval.published) and names it here; the
# worker reads the current version at a cold start into /tmp, checks every hash and follows the
# pointer. Only the worker may read the bucket, and only read it.

variable "corpus_bucket" {
  type        = string
  description = "S3 bucket of the published corpora. Null: one is created (NAME_PREFIX-corpora-ACCOUNT) when corpus_platforms names any corpus. Give the name of an existing bucket to use it as it is (Terraform then only lets the worker read it; objects encrypted with another key need that key's grant too)."
  default     = null
}

variable "corpus_platforms" {
  type = map(object({
    engine = string
    corpus = string
  }))
  description = "Platforms that search a published corpus: name => { engine = \"docs\" | \"vectors\", corpus = the prefix it was published under (s3://BUCKET/<corpus>) }. Each name is also listed in `platforms` (its queue). A name other than the engine's is a named instance (FANFUSE_EXTRA_PLATFORMS), so one deployment serves several corpora: { handbook = { engine = \"docs\", corpus = \"handbook\" }, handbook_vectors = { engine = \"vectors\", corpus = \"handbook\" } }."
  default     = {}

  validation {
    condition     = alltrue([for p in values(var.corpus_platforms) : contains(["docs", "vectors"], p.engine)])
    error_message = "A corpus platform's engine is \"docs\" or \"vectors\"."
  }
}

variable "corpus_refresh_seconds" {
  type        = number
  description = "How long a worker keeps the corpus version it holds before it reads the corpus's pointer again (a new publication reaches every worker within this time)."
  default     = 30
}

locals {
  create_corpus_bucket = var.corpus_bucket == null && length(var.corpus_platforms) > 0
  corpus_bucket        = var.corpus_bucket != null ? var.corpus_bucket : "${var.name_prefix}-corpora-${data.aws_caller_identity.current.account_id}"
  # Every function that builds the platform registry learns the corpus platforms' names (http
  # validates them); the worker reads their corpora.
  corpus_env = length(var.corpus_platforms) == 0 ? {} : {
    FANFUSE_EXTRA_PLATFORMS = jsonencode({
      for name, platform in var.corpus_platforms : name => {
        engine = platform.engine
        settings = {
          corpus_url       = "s3://${local.corpus_bucket}/${platform.corpus}"
          corpus_refresh_s = var.corpus_refresh_seconds
        }
      }
    })
  }
}

resource "aws_s3_bucket" "corpora" {
  #checkov:skip=CKV_AWS_18:Holds the published corpora, written by the operator's `fanfuse index --publish` and read by the worker only; CloudTrail records both, server access logs would need a second bucket and add nothing.
  #checkov:skip=CKV_AWS_144:Each corpus is rebuilt and published from its source documents (fanfuse index --publish); a copy in a second region adds a second bucket, not a way to recover anything.
  #checkov:skip=CKV2_AWS_62:Nothing reacts to a publication: workers read the pointer on their own schedule (corpus_refresh_seconds).
  count  = local.create_corpus_bucket ? 1 : 0
  bucket = local.corpus_bucket
}

resource "aws_s3_bucket_public_access_block" "corpora" {
  count                   = local.create_corpus_bucket ? 1 : 0
  bucket                  = aws_s3_bucket.corpora[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# A version's objects are never rewritten; versioning keeps a replaced pointer too, so an earlier
# publication can be made current again. Replaced pointers are kept 90 days.
resource "aws_s3_bucket_versioning" "corpora" {
  count  = local.create_corpus_bucket ? 1 : 0
  bucket = aws_s3_bucket.corpora[0].id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "corpora" {
  count  = local.create_corpus_bucket ? 1 : 0
  bucket = aws_s3_bucket.corpora[0].id

  rule {
    id     = "replaced-pointers"
    status = "Enabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = 90
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }

  depends_on = [aws_s3_bucket_versioning.corpora]
}

resource "aws_s3_bucket_server_side_encryption_configuration" "corpora" {
  count  = local.create_corpus_bucket ? 1 : 0
  bucket = aws_s3_bucket.corpora[0].id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = aws_kms_key.fanfuse.arn
    }
    bucket_key_enabled = true
  }
}

# The worker reads the corpora (ListBucket only so that a missing corpus reads as missing, not as
# denied); no function writes them. The objects' key is the deployment's, which every function
# may already decrypt with (iam.tf).
data "aws_iam_policy_document" "worker_reads_corpora" {
  statement {
    sid       = "ReadCorpora"
    actions   = ["s3:GetObject"]
    resources = ["arn:aws:s3:::${local.corpus_bucket}/*"]
  }

  statement {
    sid       = "ListCorpora"
    actions   = ["s3:ListBucket"]
    resources = ["arn:aws:s3:::${local.corpus_bucket}"]
  }
}

resource "aws_iam_role_policy" "worker_reads_corpora" {
  count  = length(var.corpus_platforms) > 0 ? 1 : 0
  name   = "${var.name_prefix}-worker-reads-corpora"
  role   = aws_iam_role.function["worker"].id
  policy = data.aws_iam_policy_document.worker_reads_corpora.json

  lifecycle {
    precondition {
      condition     = alltrue([for name in keys(var.corpus_platforms) : contains(var.platforms, name)])
      error_message = "Every corpus platform must also be listed in `platforms` (its queue)."
    }
  }
}

output "corpus_urls" {
  description = "The corpus URL of each corpus platform: publish to it with `fanfuse index DIR --publish URL`."
  value       = { for name, platform in var.corpus_platforms : name => "s3://${local.corpus_bucket}/${platform.corpus}" }
}
