# The five gen2 Cloud Functions, built from one zipped source (functions/main.py + the fanfuse
# package) that cloudbuild.yaml uploads to the source bucket. Each runs as its own service account.
# FANFUSE_FUNCTION_URLS holds only the URLs a function calls or hands out (Cloud Run URLs: they
# are also the OIDC audiences of the task targets).

resource "google_storage_bucket" "function_source" {
  #checkov:skip=CKV_GCP_62:Holds only the zipped function source that Cloud Build uploads (no user data); reads and writes are audited by Cloud Audit Logs, so a second bucket for legacy usage logs adds nothing.
  name                        = "${var.project_id}-fanfuse-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  # Emptied with the rest on teardown only (deletion_protection = false; docs/deploy.md).
  force_destroy = !var.deletion_protection

  versioning {
    enabled = true
  }

  # Each build's source stays for a rollback (an apply with an earlier function_source_object).
  lifecycle_rule {
    condition {
      age = var.artifact_retention_days
    }
    action {
      type = "Delete"
    }
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
  build_source = {
    bucket = google_storage_bucket.function_source.name
    object = var.function_source_object
  }
  status_url_env = var.status_url_base == null ? {} : { FANFUSE_STATUS_URL_BASE = var.status_url_base }

  # The public functions verify their callers themselves (fanfuse.auth.callers), whatever IAM or
  # a gateway did before them. The gateway's forwarded claims are trusted only when the gateway
  # is the one invoker iam.tf lets through; a missing credential is always a 401.
  trust_gateway = var.gateway_service_account != null
  # Google ID tokens only from the listed principals; Firebase users of the listed providers
  # (null, rendered "null": any), anonymous ones only when allowed (fanfuse.auth.tokens).
  caller_env = {
    FANFUSE_AUTH_REQUIRED              = "true"
    FANFUSE_TRUST_GATEWAY              = tostring(local.trust_gateway)
    FANFUSE_FIREBASE_PROJECT           = var.firebase_project == null ? var.project_id : var.firebase_project
    FANFUSE_ID_TOKEN_AUDIENCES         = jsonencode(var.id_token_audiences)
    FANFUSE_ID_TOKEN_PRINCIPALS        = jsonencode(var.id_token_principals)
    FANFUSE_FIREBASE_SIGN_IN_PROVIDERS = jsonencode(var.firebase_sign_in_providers)
    FANFUSE_FIREBASE_ALLOW_ANONYMOUS   = tostring(var.firebase_allow_anonymous)
    # Browser apps on these origins may call the API directly (examples/web-app); none: no CORS.
    FANFUSE_CORS_ORIGINS = jsonencode(var.cors_origins)
  }
  # Who reads every owner's GET {search_status}/stats (fanfuse.http.stats_route); others their own.
  operators_env = { FANFUSE_OPERATORS = jsonencode(var.operators) }
  # What start_search holds each caller to (fanfuse.rules.quota).
  quota_env = {
    FANFUSE_RATE_PER_MINUTE = tostring(var.rate_per_minute)
    FANFUSE_MAX_IN_FLIGHT   = tostring(var.max_in_flight)
  }
}

resource "google_cloudfunctions2_function" "aggregate" {
  name        = "fanfuse-aggregate"
  location    = var.region
  description = "Cloud Tasks target: fuses the platforms' results and finalizes a search exactly once."

  build_config {
    runtime         = var.python_runtime
    entry_point     = "aggregate"
    service_account = google_service_account.build.id
    source {
      storage_source {
        bucket = local.build_source.bucket
        object = local.build_source.object
      }
    }
  }

  service_config {
    service_account_email            = google_service_account.function["aggregate"].email
    ingress_settings                 = "ALLOW_INTERNAL_ONLY" # Cloud Tasks counts as internal
    all_traffic_on_latest_revision   = true
    available_memory                 = "1Gi"
    available_cpu                    = "1"
    timeout_seconds                  = 120
    max_instance_count               = var.max_instances["aggregate"]
    max_instance_request_concurrency = 10
    environment_variables = merge(local.common_env, {
      # Whose OIDC token a delivery must carry (fanfuse.auth.task_deliveries): without it, all are refused.
      FANFUSE_TASKS_SERVICE_ACCOUNT = google_service_account.tasks.email
    })
  }

  depends_on = [google_project_iam_member.build, google_storage_bucket_iam_member.build_reads_source]
}

resource "google_cloudfunctions2_function" "run_platform" {
  name        = "fanfuse-run-platform"
  location    = var.region
  description = "Cloud Tasks target: runs one platform of one search, then the fan-in."

  build_config {
    runtime         = var.python_runtime
    entry_point     = "run_platform"
    service_account = google_service_account.build.id
    source {
      storage_source {
        bucket = local.build_source.bucket
        object = local.build_source.object
      }
    }
  }

  service_config {
    service_account_email            = google_service_account.function["run_platform"].email
    ingress_settings                 = "ALLOW_INTERNAL_ONLY" # Cloud Tasks counts as internal
    all_traffic_on_latest_revision   = true
    available_memory                 = "2Gi"
    available_cpu                    = "1"
    timeout_seconds                  = var.deadline_seconds + 60
    max_instance_count               = var.max_instances["run_platform"]
    max_instance_request_concurrency = 4
    environment_variables = merge(local.common_env, var.platform_settings, {
      FANFUSE_FUNCTION_URLS = jsonencode({
        aggregate = google_cloudfunctions2_function.aggregate.service_config[0].uri
      })
      FANFUSE_TASKS_SERVICE_ACCOUNT = google_service_account.tasks.email
    })

    dynamic "secret_environment_variables" {
      for_each = data.google_secret_manager_secret.provider
      content {
        key        = secret_environment_variables.key
        project_id = var.project_id
        secret     = secret_environment_variables.value.secret_id
        version    = "latest"
      }
    }
  }

  depends_on = [
    google_project_iam_member.build,
    google_storage_bucket_iam_member.build_reads_source,
    google_secret_manager_secret_iam_member.run_platform_reads_keys,
  ]
}

resource "google_cloudfunctions2_function" "search_status" {
  #checkov:skip=CKV_GCP_124:The public HTTP API of fanfuse, called by apps from outside Google Cloud; access is authenticated by IAM (run.invoker only for var.api_invokers, or the gateway's service account alone), not by network origin; the function verifies its caller itself.
  name        = "fanfuse-search-status"
  location    = var.region
  description = "HTTP GET: the merged progress and results of one search."

  build_config {
    runtime         = var.python_runtime
    entry_point     = "search_status"
    service_account = google_service_account.build.id
    source {
      storage_source {
        bucket = local.build_source.bucket
        object = local.build_source.object
      }
    }
  }

  service_config {
    service_account_email            = google_service_account.function["search_status"].email
    ingress_settings                 = "ALLOW_ALL" # the HTTP API; authenticated (see iam.tf)
    all_traffic_on_latest_revision   = true
    available_memory                 = "512Mi"
    available_cpu                    = "1"
    timeout_seconds                  = 30
    max_instance_count               = var.max_instances["search_status"]
    max_instance_request_concurrency = 20
    environment_variables            = merge(local.common_env, local.caller_env, local.operators_env)
  }

  depends_on = [google_project_iam_member.build, google_storage_bucket_iam_member.build_reads_source]
}

resource "google_cloudfunctions2_function" "cancel_search" {
  #checkov:skip=CKV_GCP_124:The public HTTP API of fanfuse, called by apps from outside Google Cloud; access is authenticated by IAM (run.invoker only for var.api_invokers, or the gateway's service account alone), not by network origin; the function verifies its caller itself.
  name        = "fanfuse-cancel-search"
  location    = var.region
  description = "HTTP POST: cancels a running search."

  build_config {
    runtime         = var.python_runtime
    entry_point     = "cancel_search"
    service_account = google_service_account.build.id
    source {
      storage_source {
        bucket = local.build_source.bucket
        object = local.build_source.object
      }
    }
  }

  service_config {
    service_account_email            = google_service_account.function["cancel_search"].email
    ingress_settings                 = "ALLOW_ALL" # the HTTP API; authenticated (see iam.tf)
    all_traffic_on_latest_revision   = true
    available_memory                 = "512Mi"
    available_cpu                    = "1"
    timeout_seconds                  = 30
    max_instance_count               = var.max_instances["cancel_search"]
    max_instance_request_concurrency = 20
    environment_variables = merge(local.common_env, local.caller_env, {
      FANFUSE_FUNCTION_URLS = jsonencode({
        search_status = google_cloudfunctions2_function.search_status.service_config[0].uri
      })
    })
  }

  depends_on = [google_project_iam_member.build, google_storage_bucket_iam_member.build_reads_source]
}

resource "google_cloudfunctions2_function" "start_search" {
  #checkov:skip=CKV_GCP_124:The public HTTP API of fanfuse, called by apps from outside Google Cloud; access is authenticated by IAM (run.invoker only for var.api_invokers, or the gateway's service account alone), not by network origin; the function verifies its caller itself.
  name        = "fanfuse-start-search"
  location    = var.region
  description = "HTTP POST: validates a search, writes it, enqueues one task per platform and the deadline."

  build_config {
    runtime         = var.python_runtime
    entry_point     = "start_search"
    service_account = google_service_account.build.id
    source {
      storage_source {
        bucket = local.build_source.bucket
        object = local.build_source.object
      }
    }
  }

  service_config {
    service_account_email            = google_service_account.function["start_search"].email
    ingress_settings                 = "ALLOW_ALL" # the HTTP API; authenticated (see iam.tf)
    all_traffic_on_latest_revision   = true
    available_memory                 = "512Mi"
    available_cpu                    = "1"
    timeout_seconds                  = 60
    max_instance_count               = var.max_instances["start_search"]
    max_instance_request_concurrency = 20
    environment_variables = merge(local.common_env, local.status_url_env, local.caller_env, local.quota_env, {
      FANFUSE_FUNCTION_URLS = jsonencode({
        search_status = google_cloudfunctions2_function.search_status.service_config[0].uri
        cancel_search = google_cloudfunctions2_function.cancel_search.service_config[0].uri
        run_platform  = google_cloudfunctions2_function.run_platform.service_config[0].uri
        aggregate     = google_cloudfunctions2_function.aggregate.service_config[0].uri
      })
      FANFUSE_TASKS_SERVICE_ACCOUNT = google_service_account.tasks.email
    })
  }

  lifecycle {
    precondition {
      # Trusting the gateway's header is safe only if nothing but the gateway can call the API.
      condition     = var.gateway_service_account == null || length(var.api_invokers) == 0
      error_message = "With gateway_service_account set, the gateway must be the only invoker: leave api_invokers empty."
    }
    precondition {
      # A public API would let anyone forge the gateway's header.
      condition     = var.gateway_service_account == null || var.api_access == "iam"
      error_message = "With gateway_service_account set, api_access must be \"iam\"."
    }
    precondition {
      # Audiences alone accept nobody (fanfuse.auth.tokens): say so at plan time, not as 403s.
      condition     = length(var.id_token_audiences) == 0 || length(var.id_token_principals) > 0
      error_message = "id_token_audiences accepts no Google ID token until id_token_principals lists the accounts that may call."
    }
  }

  depends_on = [google_project_iam_member.build, google_storage_bucket_iam_member.build_reads_source]
}
