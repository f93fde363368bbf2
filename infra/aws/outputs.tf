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

output "artifact_bucket" {
  description = "Where each Lambda zip is uploaded (s3://{bucket}/{lambda_s3_key}) before the apply that deploys it."
  value       = aws_s3_bucket.artifacts.id
}

output "alert_topic_arn" {
  description = "The SNS topic every alarm (and the budget) publishes to: subscribe a pager, a chat hook or a queue to it."
  value       = aws_sns_topic.alerts.arn
}

output "functions" {
  description = "Each Lambda function's name (http, worker, aggregator)."
  value       = { for name, function in aws_lambda_function.fanfuse : name => function.function_name }
}
