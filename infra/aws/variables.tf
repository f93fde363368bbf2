variable "region" {
  type        = string
  description = "AWS region of every resource (FANFUSE_AWS_REGION)."
  default     = "us-east-1"
}

variable "name_prefix" {
  type        = string
  description = "Prefix of every name: the table, the queues (FANFUSE_QUEUE_PREFIX), the functions."
  default     = "fanfuse"
}

variable "platforms" {
  type        = list(string)
  description = "The deployed platforms: one queue, and one event source mapping, each (FANFUSE_DEPLOYED_PLATFORMS)."
  default     = ["docs", "arxiv", "wikipedia", "sec_edgar"]
}

variable "lambda_package" {
  type        = string
  description = "Path of the Lambda zip: functions/aws_lambda.py at its root, beside the fanfuse package and the `lambda` extra's dependencies (docs/aws.md)."
}

variable "deadline_seconds" {
  type        = number
  description = "A search's time budget (FANFUSE_DEADLINE_SECONDS); the worker's timeout and the queues' visibility timeout are set above it."
  default     = 120
}

variable "platform_concurrency" {
  type        = number
  description = "Concurrent worker invocations per platform queue (the mapping's maximum concurrency, at least 2): the provider's quota."
  default     = 5
}

variable "max_receives" {
  type        = number
  description = "Deliveries of one message before SQS moves it to its dead-letter queue."
  default     = 5
}

variable "api_throttle_rate" {
  type        = number
  description = "Steady requests per second the HTTP API accepts (per-caller quotas are the function's own)."
  default     = 50
}

variable "log_retention_days" {
  type        = number
  description = "CloudWatch Logs retention of the functions' logs."
  default     = 365
}

variable "reserved_concurrency" {
  type        = number
  description = "Reserved concurrency of each function: a ceiling on what one deployment can run (and spend)."
  default     = 50
}
