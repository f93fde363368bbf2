output "api_endpoint" {
  description = "The HTTP API: POST {endpoint}/start_search, GET {endpoint}/search_status/{task_id}, POST {endpoint}/cancel_search, GET {endpoint}/search_status/stats (SigV4-signed when api_access is \"iam\")."
  value       = aws_apigatewayv2_api.http.api_endpoint
}

output "api_invoke_policy_arn" {
  description = "Attach to a caller's role to let it call the HTTP API (api_access \"iam\")."
  value       = aws_iam_policy.api_invoke.arn
}

output "table" {
  value = aws_dynamodb_table.fanfuse.name
}

output "queues" {
  description = "Each platform's queue (and aggregate's) URL."
  value       = { for name, queue in aws_sqs_queue.tasks : name => queue.id }
}

output "dead_letter_queues" {
  description = "Where a message lands after max_receives failed deliveries (a forged, unsigned one too)."
  value       = { for name, queue in aws_sqs_queue.dead_letter : name => queue.id }
}
