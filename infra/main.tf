# Shared names and the APIs the stack needs.

locals {
  # The five Cloud Functions; their code is functions/main.py, one entry point each.
  functions = toset(["start_search", "search_status", "cancel_search", "run_platform", "aggregate"])

  # Queue id per platform (the application derives the same: fanfuse-{platform, _ as -}).
  queue_ids = { for platform in keys(var.platforms) : platform => "fanfuse-${replace(platform, "_", "-")}" }

  # Env name => secret id, for the deployed platforms only.
  secrets = merge([
    for platform, names in var.provider_secrets : {
      for name in names :
      "FANFUSE_${upper(platform)}_${upper(name)}" => "fanfuse-${replace(platform, "_", "-")}-${lower(replace(name, "_", "-"))}"
    } if contains(keys(var.platforms), platform)
  ]...)

  # Every function gets these; function URLs are added per function, only those it calls. The
  # OTEL_* ones only when tracing is on (tracing.tf); the corpus platforms' settings (corpus.tf).
  common_env = merge(local.tracing_env, local.corpus_env, {
    GOOGLE_CLOUD_PROJECT       = var.project_id
    FANFUSE_PROJECT            = var.project_id
    FANFUSE_REGION             = var.region
    FANFUSE_TTL_MINUTES        = tostring(var.ttl_minutes)
    FANFUSE_DEADLINE_SECONDS   = tostring(var.deadline_seconds)
    FANFUSE_DEPLOYED_PLATFORMS = jsonencode(sort(keys(var.platforms)))
    FANFUSE_CACHE_DIR          = "/tmp/fanfuse" # the docs index; an instance's disk is its memory
    LOG_EXECUTION_ID           = "true"
  })
}

resource "google_project_service" "apis" {
  for_each = toset([
    "artifactregistry.googleapis.com",
    "billingbudgets.googleapis.com", # the optional budget (alerts.tf)
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudresourcemanager.googleapis.com", # the project IAM grants (google_project_iam_member)
    "cloudtasks.googleapis.com",
    "firebaserules.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com", # the alert policies and their channels (alerts.tf)
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
  ])
  service            = each.key
  disable_on_destroy = false
}
