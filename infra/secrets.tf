# Provider keys. The operator creates each secret with its first version before the first apply
# (docs/deploy.md), e.g.
#   printf %s "$KEY" | gcloud secrets create fanfuse-tavily-api-key --data-file=-
# and Terraform only reads the secret (never its value: nothing secret lands in the state) to
# grant run_platform access and mount it. This is what makes the first build converge: a Cloud
# Run revision cannot start on a secret with no version, so a secret Terraform created in the
# same run that deploys run_platform would fail that deploy; a missing secret now fails the plan,
# naming the secret, before anything is deployed.

data "google_secret_manager_secret" "provider" {
  for_each = local.secrets

  secret_id = each.value
}

# run_platform is the only function that calls providers, so the only one that reads keys; the
# grant is per secret, not project-wide.
resource "google_secret_manager_secret_iam_member" "run_platform_reads_keys" {
  for_each = data.google_secret_manager_secret.provider

  secret_id = each.value.id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.function["run_platform"].member
}
