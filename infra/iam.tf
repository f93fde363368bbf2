# Identities and least-privilege grants.
#
#   function        Firestore        Cloud Tasks enqueuer           secrets            acts as tasks SA
#   start_search    datastore.user   every platform queue+aggregate  -                  yes (OIDC tokens)
#   search_status   datastore.viewer -                               -                  -
#   cancel_search   datastore.user   -                               -                  -
#   run_platform    datastore.user   aggregate queue                 provider keys      yes (OIDC tokens)
#   aggregate       datastore.user   -                               -                  -
#   tasks           -                -                               -                  (is it) run.invoker on run_platform and aggregate only

resource "google_service_account" "function" {
  for_each = local.functions

  account_id   = "fanfuse-${replace(each.key, "_", "-")}"
  display_name = "fanfuse ${each.key} function"
  description  = "Runtime identity of the ${each.key} Cloud Function."

  depends_on = [google_project_service.apis]
}

# The identity Cloud Tasks signs OIDC tokens as; the only caller of the task targets.
resource "google_service_account" "tasks" {
  account_id   = "fanfuse-tasks"
  display_name = "fanfuse Cloud Tasks invoker"
  description  = "OIDC identity of fanfuse's Cloud Tasks; may invoke run_platform and aggregate only."

  depends_on = [google_project_service.apis]
}

# Builds the functions' containers (instead of the broad default build identity).
resource "google_service_account" "build" {
  account_id   = "fanfuse-build"
  display_name = "fanfuse function builds"
  description  = "Builds fanfuse's function images from the uploaded source."

  depends_on = [google_project_service.apis]
}

# -- Firestore -----------------------------------------------------------------------------------

resource "google_project_iam_member" "firestore_user" {
  for_each = toset(["start_search", "cancel_search", "run_platform", "aggregate"])

  project = var.project_id
  role    = "roles/datastore.user"
  member  = google_service_account.function[each.key].member
}

resource "google_project_iam_member" "firestore_viewer" {
  project = var.project_id
  role    = "roles/datastore.viewer"
  member  = google_service_account.function["search_status"].member
}

# -- Cloud Tasks: who may enqueue where ----------------------------------------------------------

resource "google_cloud_tasks_queue_iam_member" "start_search_enqueues_platforms" {
  for_each = google_cloud_tasks_queue.platform

  name     = each.value.name
  location = each.value.location
  role     = "roles/cloudtasks.enqueuer"
  member   = google_service_account.function["start_search"].member
}

resource "google_cloud_tasks_queue_iam_member" "aggregate_enqueuers" {
  # start_search enqueues the deadline task, run_platform the fan-in task.
  for_each = toset(["start_search", "run_platform"])

  name     = google_cloud_tasks_queue.aggregate.name
  location = google_cloud_tasks_queue.aggregate.location
  role     = "roles/cloudtasks.enqueuer"
  member   = google_service_account.function[each.key].member
}

# Creating a task with an OIDC token for the tasks SA requires actAs on it.
resource "google_service_account_iam_member" "enqueuers_act_as_tasks" {
  for_each = toset(["start_search", "run_platform"])

  service_account_id = google_service_account.tasks.name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.function[each.key].member
}

# -- Invocation ----------------------------------------------------------------------------------

# The task targets: only the tasks SA (its OIDC tokens) may invoke them.
resource "google_cloud_run_v2_service_iam_member" "tasks_invoke_run_platform" {
  name     = google_cloudfunctions2_function.run_platform.service_config[0].service
  location = var.region
  role     = "roles/run.invoker"
  member   = google_service_account.tasks.member
}

resource "google_cloud_run_v2_service_iam_member" "tasks_invoke_aggregate" {
  name     = google_cloudfunctions2_function.aggregate.service_config[0].service
  location = var.region
  role     = "roles/run.invoker"
  member   = google_service_account.tasks.member
}

# The HTTP API: authenticated; only the listed members (an app backend) may call it, or, behind
# API Gateway, the gateway's service account alone (then the functions trust its forwarded claims).
locals {
  api_invoker_members = local.trust_gateway ? ["serviceAccount:${var.gateway_service_account}"] : var.api_invokers

  api_services = {
    start_search  = google_cloudfunctions2_function.start_search.service_config[0].service
    search_status = google_cloudfunctions2_function.search_status.service_config[0].service
    cancel_search = google_cloudfunctions2_function.cancel_search.service_config[0].service
  }
}

resource "google_cloud_run_v2_service_iam_member" "api_invokers" {
  for_each = {
    for pair in setproduct(keys(local.api_services), local.api_invoker_members) :
    "${pair[0]} ${pair[1]}" => { function = pair[0], member = pair[1] }
  }

  name     = local.api_services[each.value.function]
  location = var.region
  role     = "roles/run.invoker"
  member   = each.value.member
}

# api_access = "public": anyone reaches the three API functions, which authenticate every request
# themselves (FANFUSE_AUTH_REQUIRED: a Firebase or Google ID token, or an API key; none is a 401).
# The model for apps whose users sign in with Firebase Auth and call the API directly: Cloud Run
# IAM cannot check a Firebase ID token. The task targets stay IAM-only whatever this says.
resource "google_cloud_run_v2_service_iam_member" "api_public" {
  for_each = var.api_access == "public" ? local.api_services : {}

  name     = each.value
  location = var.region
  role     = "roles/run.invoker"
  member   = "allUsers"
}

# -- Builds --------------------------------------------------------------------------------------

resource "google_project_iam_member" "build" {
  for_each = toset(["roles/logging.logWriter", "roles/artifactregistry.writer"])

  project = var.project_id
  role    = each.key
  member  = google_service_account.build.member
}

resource "google_storage_bucket_iam_member" "build_reads_source" {
  bucket = google_storage_bucket.function_source.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.build.member
}
