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

variable "lambda_s3_key" {
  type        = string
  description = "Key, in the artifacts bucket (output artifact_bucket), of the Lambda zip scripts/package-functions built and the deploy uploaded (docs/deploy.md): functions/aws_lambda.py at its root, beside the fanfuse package and its dependencies. An earlier key rolls back."
}

variable "artifact_retention_days" {
  type        = number
  description = "Days an uploaded Lambda zip stays in the artifacts bucket (how far back a rollback can go)."
  default     = 90
}

variable "deadline_seconds" {
  type        = number
  description = "A search's time budget (FANFUSE_DEADLINE_SECONDS); the worker's timeout and the queues' visibility timeout are set above it."
  default     = 120
}

variable "platform_concurrency" {
  type        = number
  description = "Concurrent worker invocations per platform queue (the mapping's maximum concurrency, at least 2): the provider's quota. All platforms' together must fit the worker's concurrency (the plan checks it)."
  default     = 5

  validation {
    condition     = var.platform_concurrency >= 2 && var.platform_concurrency <= 1000 && floor(var.platform_concurrency) == var.platform_concurrency
    error_message = "platform_concurrency: a whole number from 2 to 1000 (an event source mapping's maximum concurrency)."
  }
}

variable "aggregate_concurrency" {
  type        = number
  description = "Concurrent aggregator invocations on the aggregate queue (its mapping's maximum concurrency)."
  default     = 5

  validation {
    condition     = var.aggregate_concurrency >= 2 && var.aggregate_concurrency <= 1000 && floor(var.aggregate_concurrency) == var.aggregate_concurrency
    error_message = "aggregate_concurrency: a whole number from 2 to 1000 (an event source mapping's maximum concurrency)."
  }
}

variable "account_concurrency" {
  type        = number
  description = "The account's Lambda concurrent executions quota in this region (`aws lambda get-account-settings`: AccountLimit.ConcurrentExecutions; 1000 by default, often 10 in a new account). The plan fails when the queues' pollers would need more."
  default     = 1000
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

# -- Optional costs, off (or small) by default (docs/deploy.md, "Optional costs") ----------------

variable "log_retention_days" {
  type        = number
  description = "CloudWatch Logs retention of the functions' and the API's logs. Searches live ttl_minutes; 30 days of lines is enough to investigate one."
  default     = 30
}

variable "point_in_time_recovery" {
  type        = bool
  description = "DynamoDB point-in-time recovery of the table (billed per GB-month): the searches expire within the hour, only the API keys' records would be worth restoring."
  default     = false
}

variable "xray_tracing" {
  type        = bool
  description = "X-Ray active tracing of the functions (billed per trace recorded)."
  default     = false
}

variable "reserved_concurrency" {
  type        = map(number)
  description = "Reserved concurrency per function (http, worker, aggregator), e.g. { worker = 50 }: a ceiling on what that function can run (and spend), taken from the account's quota. None by default: a new account may not have enough to reserve (AWS keeps 100 unreserved)."
  default     = {}

  validation {
    condition     = alltrue([for name, count in var.reserved_concurrency : contains(["http", "worker", "aggregator"], name) && count >= 1])
    error_message = "reserved_concurrency: keys among http, worker, aggregator; each at least 1."
  }
}

# -- Protection and teardown (docs/deploy.md, "Teardown") ------------------------------------------

variable "deletion_protection" {
  type        = bool
  description = "Refuse to delete the table and to empty the artifacts bucket. Set to false, and apply, only to tear the deployment down."
  default     = true
}

variable "kms_deletion_window_days" {
  type        = number
  description = "Days a destroyed key stays pending deletion (and can be restored) before KMS deletes it, and everything it encrypted becomes unreadable: 7 to 30."
  default     = 30

  validation {
    condition     = var.kms_deletion_window_days >= 7 && var.kms_deletion_window_days <= 30
    error_message = "kms_deletion_window_days: from 7 to 30."
  }
}

# -- Alerts (alerts.tf) ----------------------------------------------------------------------------

variable "alert_emails" {
  type        = list(string)
  description = "Addresses subscribed to the alert topic (each confirms by e-mail) and told by the budget. Other channels subscribe to the alert_topic_arn output."
  default     = []
}

variable "alert_error_rate" {
  type        = number
  description = "A function's failed invocations over its invocations, over 5 minutes, above which its alarm fires."
  default     = 0.05
}

variable "alert_search_p95_seconds" {
  type        = number
  description = "The 95th percentile of a search's duration, in seconds, above which the latency alarm fires (for 15 minutes)."
  default     = 60
}

variable "alert_spend_usd_per_day" {
  type        = number
  description = "What the providers' calls may cost in one day (the receipts' cost_usd) before the spend alarm fires."
  default     = 50
}

variable "monthly_budget_usd" {
  type        = number
  description = "An AWS budget on the account's monthly cost, alerting at 80% actual and 100% forecast (alert_emails and the topic); null: no budget."
  default     = null
}

# -- Who may call the HTTP API (fanfuse.auth.callers; docs/security.md "Callers") ----------------

# "iam":    every route is AWS_IAM-authorized: API Gateway lets through only SigV4-signed requests
#           of principals allowed execute-api:Invoke (attach the api_invoke policy), and hands the
#           function the principal it verified, which is then the caller (`aws:<userArn>`,
#           FANFUSE_TRUST_IAM_AUTHORIZER), unless the request also carries an API key.
# "public": the routes have no authorization, so an app whose users sign in with Firebase calls
#           the API directly; the function verifies every caller itself (an API key, a Firebase
#           or a Google ID token) and answers 401 without one. The stage's throttling still holds.
variable "api_access" {
  type        = string
  description = "Calling model of the HTTP API: \"iam\" (routes AWS_IAM-authorized; the SigV4 signer is the caller) or \"public\" (no gateway authorization; the function authenticates every request: API key, Firebase or Google ID token)."
  default     = "iam"

  validation {
    condition     = contains(["iam", "public"], var.api_access)
    error_message = "api_access must be \"iam\" or \"public\"."
  }
}

variable "firebase_project" {
  type        = string
  description = "Firebase project whose ID tokens (Authorization: Bearer) the HTTP API accepts (FANFUSE_FIREBASE_PROJECT); null: Firebase ID tokens are refused. Behind api_access = \"iam\" the Authorization header carries the SigV4 signature, so Firebase users need \"public\"."
  default     = null

  validation {
    condition     = var.firebase_project == null ? true : can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.firebase_project))
    error_message = "firebase_project must be a Google Cloud project id (6-30 lowercase letters, digits, hyphens) or null."
  }
}

variable "id_token_audiences" {
  type        = list(string)
  description = "`aud` values accepted in Google-signed ID tokens (FANFUSE_ID_TOKEN_AUDIENCES), e.g. the API's endpoint; empty: Google ID tokens are refused. An audience accepts no one until id_token_principals lists who may call."
  default     = []
}

# The audience says whom a token is for, never who may call: any Google account, every service
# account of every project included, can mint an ID token naming any audience.
variable "id_token_principals" {
  type        = list(string)
  description = "The accounts whose Google ID tokens the HTTP API accepts (FANFUSE_ID_TOKEN_PRINCIPALS): a service account's email (verified) or a `sub`. Empty: no Google ID token is accepted, whatever id_token_audiences lists."
  default     = []

  validation {
    condition     = alltrue([for p in var.id_token_principals : length(p) > 0 && length(regexall("\\s", p)) == 0])
    error_message = "id_token_principals: each entry is an email or a sub, not empty, without spaces."
  }
}

variable "firebase_sign_in_providers" {
  type        = list(string)
  description = "Firebase sign-in providers whose users may call (FANFUSE_FIREBASE_SIGN_IN_PROVIDERS), e.g. [\"password\", \"google.com\"]; null: any provider. Anonymous users are decided by firebase_allow_anonymous alone."
  default     = null

  validation {
    condition     = var.firebase_sign_in_providers == null ? true : !contains(var.firebase_sign_in_providers, "anonymous")
    error_message = "firebase_sign_in_providers: leave out \"anonymous\"; firebase_allow_anonymous decides it."
  }
}

variable "firebase_allow_anonymous" {
  type        = bool
  description = "Accept Firebase users signed in anonymously (FANFUSE_FIREBASE_ALLOW_ANONYMOUS): everyone who opens the app is then a caller with a quota of its own. Off by default."
  default     = false
}

variable "cors_origins" {
  type        = list(string)
  description = "Browser origins whose web apps may call the API directly (FANFUSE_CORS_ORIGINS and the gateway's CORS configuration), e.g. [\"https://app.example.com\"]: a Firebase app with api_access = \"public\" (examples/web-app). Empty: no CORS."
  default     = []

  validation {
    condition     = alltrue([for o in var.cors_origins : can(regex("^https?://[^/*\\s]+$", o))])
    error_message = "cors_origins: each an origin as browsers send it (scheme://host[:port], no path, no trailing slash, no wildcard)."
  }
}

variable "operators" {
  description = "Caller subjects (key:<owner>, aws:<userArn>, firebase:<uid>) that read every owner's GET {endpoint}/search_status/stats (FANFUSE_OPERATORS); any other caller reads the figures of its own searches only."
  type        = list(string)
  default     = []
}
