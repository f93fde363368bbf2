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
  description = "The deployed platforms: one queue, and one event source mapping, each (FANFUSE_DEPLOYED_PLATFORMS); exactly what `all` means. List only the platforms you configured (platform_settings, provider_secrets): tests/infra check each one's required settings are given. Default: docs, the bundled corpus (no key, no network)."
  default     = ["docs"]
}

variable "platform_settings" {
  type        = map(string)
  description = "Plain platform settings for the worker, by environment name (FANFUSE_<PLATFORM>_<FIELD>), e.g. FANFUSE_WIKIPEDIA_USER_AGENT, FANFUSE_ARXIV_ENABLED = \"true\"."
  default     = {}
}

variable "provider_secrets" {
  type        = map(string)
  description = "Provider keys for the worker: environment name (FANFUSE_<PLATFORM>_API_KEY) => name of a Secrets Manager secret created before the apply (docs/deploy.md). The value reaches the worker's environment, encrypted with the deployment's key; it is also in the Terraform state, which must be as protected as the secret."
  default     = {}
}

variable "python_runtime" {
  type        = string
  description = "Lambda runtime of every function; scripts/package-functions aws builds the zip's wheels for it."
  default     = "python3.12"
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
