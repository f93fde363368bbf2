output "function_urls" {
  description = "Cloud Run URL of each function (also the OIDC audience of the task targets)."
  value = {
    start_search  = google_cloudfunctions2_function.start_search.service_config[0].uri
    search_status = google_cloudfunctions2_function.search_status.service_config[0].uri
    cancel_search = google_cloudfunctions2_function.cancel_search.service_config[0].uri
    run_platform  = google_cloudfunctions2_function.run_platform.service_config[0].uri
    aggregate     = google_cloudfunctions2_function.aggregate.service_config[0].uri
  }
}

output "queues" {
  description = "Cloud Tasks queue of each platform, and of aggregation."
  value = merge(
    { for platform, queue in google_cloud_tasks_queue.platform : platform => queue.name },
    { aggregate = google_cloud_tasks_queue.aggregate.name },
  )
}

output "service_accounts" {
  description = "Runtime identity of each function, and the tasks invoker identity."
  value = merge(
    { for name, sa in google_service_account.function : name => sa.email },
    { tasks = google_service_account.tasks.email },
  )
}

output "provider_secrets" {
  description = "Secret id of each provider key run_platform mounts (created, with a version, before the first apply)."
  value       = local.secrets
}

output "function_source_bucket" {
  description = "Bucket that receives the zipped function source."
  value       = google_storage_bucket.function_source.name
}
