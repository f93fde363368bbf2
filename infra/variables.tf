variable "project_id" {
  description = "Google Cloud project that hosts fanfuse."
  type        = string
}

variable "region" {
  description = "Region of the functions and the Cloud Tasks queues."
  type        = string
  default     = "us-central1"
}

variable "firestore_location" {
  description = "Firestore location (a multi-region such as nam5, or a region)."
  type        = string
  default     = "nam5"
}

variable "function_source_object" {
  description = "Object name, in the function source bucket, of the zipped function source (uploaded by cloudbuild.yaml)."
  type        = string
}

variable "python_runtime" {
  description = "Cloud Functions runtime of every function."
  type        = string
  default     = "python312"
}

# The deployed platforms: one queue each, and exactly what `all` means (FANFUSE_DEPLOYED_PLATFORMS).
# List only the platforms you configured: each needs its settings (platform_settings) and keys
# (provider_secrets), which tests/infra check against the platforms' own settings. `rate` is the
# provider's quota in tasks per second (one task is one platform run of one search; the shared
# runner still limits calls inside a run), `concurrency` the dispatches in flight,
# `max_attempts` how often a failed delivery is retried. infra/examples/ has the providers'
# quotas. The default is `docs` alone: the bundled corpus, which needs no key and no network.
variable "platforms" {
  description = "Deployed platforms and their queue limits."
  type = map(object({
    rate         = number
    concurrency  = number
    max_attempts = number
  }))
  default = {
    docs = { rate = 50, concurrency = 20, max_attempts = 3 }
  }
}

# Provider keys, as setting names per platform: platform `tavily` with `API_KEY` is read from the
# Secret Manager secret `fanfuse-tavily-api-key`, given to run_platform only, as
# FANFUSE_TAVILY_API_KEY (the platform settings' FANFUSE_<NAME>_ prefix). Only platforms listed
# in `platforms` get theirs, and each of their secrets must exist, with a version, before the
# first apply (docs/deploy.md): Terraform reads the secret, never its value.
variable "provider_secrets" {
  description = "Secret settings per platform, read from Secret Manager."
  type        = map(list(string))
  default = {
    google     = ["API_KEY"]
    perplexity = ["API_KEY"]
    builtin    = ["API_KEY"]
    tavily     = ["API_KEY"]
    brave      = ["API_KEY"]
    linkup     = ["API_KEY"]
    exa        = ["API_KEY"]
  }
}

variable "platform_settings" {
  description = "Plain (non-secret) platform settings for run_platform, by environment name: FANFUSE_<PLATFORM>_<FIELD>, e.g. FANFUSE_GOOGLE_CX, FANFUSE_SEARXNG_BASE_URL, FANFUSE_WIKIPEDIA_USER_AGENT, FANFUSE_ARXIV_ENABLED = \"true\"."
  type        = map(string)
  default     = {}
}

# Who calls the HTTP API (docs/deploy.md, "Calling it"):
#   "public": anyone may reach start_search, search_status and cancel_search (Cloud Run's
#             allUsers invoker), and the functions authenticate every request themselves: a
#             Firebase ID token (apps with Firebase Auth call directly), a Google ID token, or
#             an API key. No credential: 401.
#   "iam":    Cloud Run IAM lets only api_invokers (or the gateway) through; the functions still
#             authenticate the caller (an invoker's own ID token, or an API key).
variable "api_access" {
  description = "Calling model of the HTTP API: \"public\" (authentication in the function only; apps with Firebase Auth call directly) or \"iam\" (Cloud Run IAM first: api_invokers or the gateway)."
  type        = string
  default     = "iam"

  validation {
    condition     = contains(["public", "iam"], var.api_access)
    error_message = "api_access must be \"public\" or \"iam\"."
  }
}

variable "create_database" {
  description = "Create the (default) Firestore database. False when the project already has one (a Firebase project does): Terraform then uses it as it is."
  type        = bool
  default     = true
}

variable "api_invokers" {
  description = "Members allowed to call start_search, search_status and cancel_search (e.g. serviceAccount:app-backend@PROJECT.iam.gserviceaccount.com), when no gateway_service_account is set. The API is authenticated: nobody else can call it."
  type        = list(string)
  default     = []
}

variable "status_url_base" {
  description = "Public base of the status_url that start_search returns (e.g. the API Gateway's /status); the search_status function's own URL when null."
  type        = string
  default     = null
}

variable "ttl_minutes" {
  description = "How long a search (and its sub-documents) lives before the TTL policy deletes it."
  type        = number
  default     = 30
}

variable "deadline_seconds" {
  description = "Time after which the deadline task finalizes a search whatever its platforms did."
  type        = number
  default     = 120
}

variable "max_instances" {
  description = "Maximum instances per function."
  type        = map(number)
  default = {
    start_search  = 20
    search_status = 20
    cancel_search = 5
    run_platform  = 50
    aggregate     = 20
  }
}

variable "kms_key_name" {
  description = "Optional Cloud KMS key for the function source bucket (CMEK); Google-managed keys when null."
  type        = string
  default     = null
}

# -- Who may call the HTTP API (fanfuse.auth.callers; docs/security.md) -------------------------

variable "gateway_service_account" {
  description = "Email of the service account API Gateway calls the HTTP API as, when the API sits behind API Gateway. It then becomes the only invoker of start_search, search_status and cancel_search (api_invokers must be empty), so they are reachable solely through the gateway and read the caller's claims it forwards (FANFUSE_TRUST_GATEWAY=true). Null: no gateway, and that header is ignored (anyone could set it)."
  type        = string
  default     = null
}

variable "firebase_project" {
  description = "Project whose Firebase ID tokens (Authorization: Bearer) the HTTP API accepts: null means this project, \"\" refuses Firebase ID tokens."
  type        = string
  default     = null
}

variable "id_token_audiences" {
  description = "`aud` values accepted in Google-signed ID tokens (Authorization: Bearer), e.g. an OAuth client id; empty: Google ID tokens are refused. Behind Cloud Run IAM the invoker's own token is one (its audience is the function's URL), so listing a function URL makes each invoker listed in id_token_principals a caller in its own name."
  type        = list(string)
  default     = []
}

# The audience says whom a token is for, never who may call: any Google account, every service
# account of every project included, can mint an ID token naming any audience. So a Google ID
# token is accepted only from a listed principal, and none is listed by default.
variable "id_token_principals" {
  description = "The accounts whose Google ID tokens the HTTP API accepts (FANFUSE_ID_TOKEN_PRINCIPALS): a service account's email (verified) or a `sub`. Empty: no Google ID token is accepted, whatever id_token_audiences lists."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for p in var.id_token_principals : length(p) > 0 && length(regexall("\\s", p)) == 0])
    error_message = "id_token_principals: each entry is an email or a sub, not empty, without spaces."
  }
}

variable "firebase_sign_in_providers" {
  description = "Firebase sign-in providers whose users may call (FANFUSE_FIREBASE_SIGN_IN_PROVIDERS), e.g. [\"password\", \"google.com\"]; null: any provider. Anonymous users are decided by firebase_allow_anonymous alone."
  type        = list(string)
  default     = null

  validation {
    condition     = var.firebase_sign_in_providers == null ? true : !contains(var.firebase_sign_in_providers, "anonymous")
    error_message = "firebase_sign_in_providers: leave out \"anonymous\"; firebase_allow_anonymous decides it."
  }
}

variable "firebase_allow_anonymous" {
  description = "Accept Firebase users signed in anonymously (FANFUSE_FIREBASE_ALLOW_ANONYMOUS): everyone who opens the app is then a caller with a quota of its own. Off by default."
  type        = bool
  default     = false
}

variable "cors_origins" {
  description = "Browser origins whose web apps may call start_search, search_status and cancel_search directly (FANFUSE_CORS_ORIGINS), e.g. [\"https://app.example.com\"]: a Firebase app with api_access = \"public\" (examples/web-app). Empty: no CORS header, browsers refuse cross-origin calls."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for o in var.cors_origins : can(regex("^https?://[^/*\\s]+$", o))])
    error_message = "cors_origins: each an origin as browsers send it (scheme://host[:port], no path, no trailing slash, no wildcard)."
  }
}

# -- Quotas per caller (fanfuse.rules.quota), kept in Firestore so they hold across instances ---

variable "rate_per_minute" {
  description = "Searches one caller may start per minute (start_search answers 429 with Retry-After beyond it); an API key may carry its own."
  type        = number
  default     = 30

  validation {
    condition     = var.rate_per_minute >= 1 && floor(var.rate_per_minute) == var.rate_per_minute
    error_message = "rate_per_minute must be a whole number, at least 1."
  }
}

variable "max_in_flight" {
  description = "Searches one caller may have unfinished at once; an API key may carry its own."
  type        = number
  default     = 10

  validation {
    condition     = var.max_in_flight >= 1 && floor(var.max_in_flight) == var.max_in_flight
    error_message = "max_in_flight must be a whole number, at least 1."
  }
}

variable "operators" {
  description = "Caller subjects (key:<owner>, google:<sub>, firebase:<uid>, gateway:<sub>) that read every owner's GET {search_status}/stats (FANFUSE_OPERATORS); any other caller reads the figures of its own searches only."
  type        = list(string)
  default     = []
}

# -- An existing database, protection and teardown (docs/deploy.md) -------------------------------

variable "manage_firestore_rules" {
  description = "Release infra/firestore.rules as the database's rules (`cloud.firestore`). Null: only on a database this configuration creates. On an existing one (create_database = false) the release exists and holds the app's own rules: set true only after importing it, knowing fanfuse's rules then replace the app's (docs/deploy.md, \"An existing database\")."
  type        = bool
  default     = null
}

variable "deletion_protection" {
  description = "Refuse to delete the Firestore database and to empty the source bucket. Set to false, and apply, only to tear the deployment down."
  type        = bool
  default     = true
}

variable "artifact_retention_days" {
  description = "Days each build's function source stays in the source bucket (how far back a rollback can go)."
  type        = number
  default     = 90
}

# -- Optional costs, off by default (docs/deploy.md, "Optional costs") ----------------------------

variable "point_in_time_recovery" {
  description = "Firestore point-in-time recovery (7 days of versions, billed as storage): the searches expire within the hour; only the API keys' documents would be worth restoring."
  type        = bool
  default     = false
}

variable "tasks_log_sampling" {
  description = "Share of Cloud Tasks' delivery attempts logged to Cloud Logging (0 to 1; billed per GiB ingested)."
  type        = number
  default     = 0

  validation {
    condition     = var.tasks_log_sampling >= 0 && var.tasks_log_sampling <= 1
    error_message = "tasks_log_sampling: from 0 to 1."
  }
}

# -- Alerts (alerts.tf) ----------------------------------------------------------------------------

variable "alert_emails" {
  description = "Addresses that get every alert (an e-mail notification channel each)."
  type        = list(string)
  default     = []
}

variable "alert_notification_channels" {
  description = "Existing Cloud Monitoring notification channels (projects/P/notificationChannels/ID: a pager, a chat) that get every alert too."
  type        = list(string)
  default     = []
}

variable "alert_error_rate" {
  description = "Share of a function's requests answered 5xx, over 5 minutes, above which its alert fires."
  type        = number
  default     = 0.05
}

variable "alert_search_p95_seconds" {
  description = "The 95th percentile of a search's duration, in seconds, above which the latency alert fires (for 15 minutes)."
  type        = number
  default     = 60
}

variable "alert_spend_usd_per_day" {
  description = "What the providers' calls may cost in one day (the receipts' cost_usd) before the spend alert fires."
  type        = number
  default     = 50
}

variable "billing_account" {
  description = "Billing account id (XXXXXX-XXXXXX-XXXXXX) of the project, for the optional monthly budget; null: no budget."
  type        = string
  default     = null
}

variable "monthly_budget_usd" {
  description = "The project's monthly budget in USD, alerting at 80% actual and 100% forecast (needs billing_account)."
  type        = number
  default     = 200
}
