# Provider keys. Terraform creates the secrets, never their values: add a version out of band
#   printf %s "$KEY" | gcloud secrets versions add fanfuse-tavily-api-key --data-file=-
# before the first deploy of run_platform (a function cannot start on a secret with no version).

resource "google_secret_manager_secret" "provider" {
  for_each = local.secrets

  secret_id = each.value
  labels = {
    app = "fanfuse"
  }

  replication {
    auto {}
  }

  depends_on = [google_project_service.apis]
}

# run_platform is the only function that calls providers, so the only one that reads keys; the
# grant is per secret, not project-wide.
resource "google_secret_manager_secret_iam_member" "run_platform_reads_keys" {
  for_each = google_secret_manager_secret.provider

  secret_id = each.value.id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.function["run_platform"].member
}
