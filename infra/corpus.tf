# Published corpora (docs/deploy.md, "Your own documents"): a team's documents searched by `docs`
# (BM25) and `vectors` (MiniLM) platforms in the cloud. An operator publishes a corpus with
#   fanfuse index ./handbook --publish gs://BUCKET/handbook
# (immutable versions, a pointer written last: fanfuse.retrieval.published) and names it here; each
# named platform reads the current version at a worker's cold start, checks every hash and follows
# the pointer. Only run_platform may read the bucket, and only read it.

variable "corpus_bucket" {
  description = "Cloud Storage bucket of the published corpora. Null: one is created (PROJECT-fanfuse-corpora) when corpus_platforms names any corpus. Give the name of an existing bucket to use it as it is (Terraform then only grants run_platform read access to it)."
  type        = string
  default     = null
}

variable "corpus_platforms" {
  description = "Platforms that search a published corpus: name => { engine = \"docs\" | \"vectors\", corpus = the prefix it was published under (gs://BUCKET/<corpus>) }. Each name is also listed in `platforms` (its queue). A name other than the engine's is a named instance (FANFUSE_EXTRA_PLATFORMS), so one deployment serves several corpora: { handbook = { engine = \"docs\", corpus = \"handbook\" }, handbook_vectors = { engine = \"vectors\", corpus = \"handbook\" } }."
  type = map(object({
    engine = string
    corpus = string
  }))
  default = {}

  validation {
    condition     = alltrue([for p in values(var.corpus_platforms) : contains(["docs", "vectors"], p.engine)])
    error_message = "A corpus platform's engine is \"docs\" or \"vectors\"."
  }
}

variable "corpus_refresh_seconds" {
  description = "How long a worker keeps the corpus version it holds before it reads the corpus's pointer again (a new publication reaches every worker within this time)."
  type        = number
  default     = 30
}

resource "google_storage_bucket" "corpora" {
  #checkov:skip=CKV_GCP_62:Holds the published corpora, written by the operator's `fanfuse index --publish` and read by run_platform only; Cloud Audit Logs record both, a second bucket for legacy usage logs adds nothing.
  count = var.corpus_bucket == null && length(var.corpus_platforms) > 0 ? 1 : 0

  name                        = "${var.project_id}-fanfuse-corpora"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false

  # A version's objects are never rewritten; object versioning keeps a replaced pointer too, so
  # an earlier publication can be made current again.
  versioning {
    enabled = true
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }

  depends_on = [google_project_service.apis]
}

locals {
  corpus_bucket = var.corpus_bucket != null ? var.corpus_bucket : "${var.project_id}-fanfuse-corpora"
  # Every function that builds the platform registry learns the corpus platforms' names
  # (start_search validates them); their corpus URLs are read by run_platform only.
  corpus_env = length(var.corpus_platforms) == 0 ? {} : {
    FANFUSE_EXTRA_PLATFORMS = jsonencode({
      for name, platform in var.corpus_platforms : name => {
        engine = platform.engine
        settings = {
          corpus_url       = "gs://${local.corpus_bucket}/${platform.corpus}"
          corpus_refresh_s = var.corpus_refresh_seconds
        }
      }
    })
  }
}

# run_platform reads the corpora, nothing else does, and nothing in the deployment writes them.
resource "google_storage_bucket_iam_member" "run_platform_reads_corpora" {
  count = length(var.corpus_platforms) > 0 ? 1 : 0

  bucket = var.corpus_bucket != null ? var.corpus_bucket : google_storage_bucket.corpora[0].name
  role   = "roles/storage.objectViewer"
  member = google_service_account.function["run_platform"].member

  lifecycle {
    precondition {
      condition     = alltrue([for name in keys(var.corpus_platforms) : contains(keys(var.platforms), name)])
      error_message = "Every corpus platform must also be listed in `platforms` (its queue)."
    }
  }
}

output "corpus_urls" {
  description = "The corpus URL of each corpus platform: publish to it with `fanfuse index DIR --publish URL`."
  value       = { for name, platform in var.corpus_platforms : name => "gs://${local.corpus_bucket}/${platform.corpus}" }
}
