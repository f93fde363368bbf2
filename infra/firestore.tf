# Firestore (native mode): the task documents, their TTL policies, indexes and security rules.
# infra/firestore.indexes.json says the same for the Firebase CLI; tests check both agree.

# The (default) database: created here, or, with create_database = false, the project's existing
# one (a Firebase project already has it), used as it is.
resource "google_firestore_database" "main" {
  count = var.create_database ? 1 : 0

  name                              = "(default)"
  location_id                       = var.firestore_location
  type                              = "FIRESTORE_NATIVE"
  concurrency_mode                  = "PESSIMISTIC"
  app_engine_integration_mode       = "DISABLED"
  point_in_time_recovery_enablement = var.point_in_time_recovery ? "POINT_IN_TIME_RECOVERY_ENABLED" : "POINT_IN_TIME_RECOVERY_DISABLED"
  delete_protection_state           = var.deletion_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  # `terraform destroy` leaves the database (and its data) in place: deleting it is a
  # separate, deliberate `gcloud firestore databases delete` (docs/deploy.md, "Teardown").
  deletion_policy = "ABANDON"

  depends_on = [google_project_service.apis]
}

locals {
  database = var.create_database ? google_firestore_database.main[0].name : "(default)"
  # fanfuse releases its rules on the database it creates. On an existing database (a Firebase
  # project's) the release `cloud.firestore` already exists and holds the app's own rules: it is
  # left alone unless the operator imports it and lets fanfuse's rules replace the app's
  # (manage_firestore_rules = true; docs/deploy.md, "An existing database").
  manage_rules = var.manage_firestore_rules == null ? var.create_database : var.manage_firestore_rules
}

# The rules an app's reads go through (infra/firestore.rules: a user reads their own searches and
# nothing else; no client writes). A new database denies everything until a release names a
# ruleset; the release is replaced whenever the rules change.
resource "google_firebaserules_ruleset" "firestore" {
  count   = local.manage_rules ? 1 : 0
  project = var.project_id

  source {
    files {
      name    = "firestore.rules"
      content = file("${path.module}/firestore.rules")
    }
  }

  depends_on = [google_firestore_database.main, google_project_service.apis]
}

resource "google_firebaserules_release" "firestore" {
  count        = local.manage_rules ? 1 : 0
  project      = var.project_id
  name         = "cloud.firestore" # the (default) database's release
  ruleset_name = "projects/${var.project_id}/rulesets/${google_firebaserules_ruleset.firestore[0].name}"

  lifecycle {
    replace_triggered_by = [google_firebaserules_ruleset.firestore[0]]
  }
}

# TTL: a document is deleted some time (typically within a day) after its expires_at. Deleting a
# document does not delete its sub-collections, so platforms/ and contents/ documents carry
# expires_at too and get their own policy. The search cache (searches_cache, one document per
# platform, query and options) expires the same way, after its own, shorter TTL, and so does a
# caller's start-rate bucket (searches_quota, once it would be full again). No single-field
# index on a TTL timestamp: it would only cost writes and make a hotspot of monotonically
# increasing values.
resource "google_firestore_field" "ttl" {
  for_each = toset(["searches", "platforms", "contents", "searches_cache", "searches_quota"])

  database   = local.database
  collection = each.key
  field      = "expires_at"

  ttl_config {}
  index_config {}
}

# Large arrays and page text are never queried: exempt them from single-field indexing (a
# document has at most 40,000 index entries, and each entry costs on every write).
resource "google_firestore_field" "unindexed" {
  for_each = {
    "searches/results"          = { collection = "searches", field = "results" }
    "searches/results_by_query" = { collection = "searches", field = "results_by_query" }
    "platforms/results"         = { collection = "platforms", field = "results" }
    "platforms/calls"           = { collection = "platforms", field = "calls" }
    "contents/text"             = { collection = "contents", field = "text" }
    "searches_cache/hits"       = { collection = "searches_cache", field = "hits" }
  }

  database   = local.database
  collection = each.value.collection
  field      = each.value.field

  index_config {}

  # One index operation at a time per database: keep them in sequence after the TTL fields.
  depends_on = [google_firestore_field.ttl]
}

# An app lists its user's own searches, newest first (firestore.rules allows exactly that query).
resource "google_firestore_index" "searches_by_owner" {
  database    = local.database
  collection  = "searches"
  query_scope = "COLLECTION"

  fields {
    field_path = "owner"
    order      = "ASCENDING"
  }
  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }
}

# start_search counts a caller's searches in flight (owner, not terminal, before the deadline):
# a count() aggregation over this index (fanfuse.service.admission).
resource "google_firestore_index" "searches_in_flight" {
  database    = local.database
  collection  = "searches"
  query_scope = "COLLECTION"

  fields {
    field_path = "owner"
    order      = "ASCENDING"
  }
  fields {
    field_path = "status"
    order      = "ASCENDING"
  }
  fields {
    field_path = "deadline_at"
    order      = "ASCENDING"
  }

  # One index operation at a time per database.
  depends_on = [google_firestore_index.searches_by_owner]
}
