# The three Lambda functions, from one zip (functions/aws_lambda.py and the fanfuse package):
# `http` behind the HTTP API (api.tf), `worker` on every platform queue, `aggregator` on the
# aggregate queue. All run the same service on DynamoDB and SQS (FANFUSE_CLOUD=aws).
#
# The task secret: every message is signed with it (queue/sqs.py) and every handler checks it
# (auth/task_deliveries.py), on top of IAM (only these roles may send to the queues). Secrets Manager draws
# it once (GetRandomPassword) and keeps it, encrypted with the deployment's key; a later plan
# draws another value and ignore_changes discards it, so the functions keep theirs. Rotate it
# with `terraform apply -replace=aws_secretsmanager_secret_version.tasks` (docs/deploy.md).
data "aws_secretsmanager_random_password" "tasks_secret" {
  password_length     = 48
  exclude_punctuation = true
}

resource "aws_secretsmanager_secret" "tasks" {
  #checkov:skip=CKV2_AWS_57:An HMAC key shared by the deployment's own three functions, not a credential of another system: rotated by replacing its version with Terraform (docs/deploy.md), which redeploys the functions with it; a rotation Lambda could not update their environment.
  name        = "${var.name_prefix}/tasks-hmac-secret"
  description = "fanfuse: signs and checks every queue message (FANFUSE_TASKS_HMAC_SECRET)."
  kms_key_id  = aws_kms_key.fanfuse.arn
  # Deleted at once on teardown: a recovery window would hold the name, and a new deployment
  # draws a new value anyway.
  recovery_window_in_days = 0
}

resource "aws_secretsmanager_secret_version" "tasks" {
  secret_id     = aws_secretsmanager_secret.tasks.id
  secret_string = data.aws_secretsmanager_random_password.tasks_secret.random_password

  lifecycle {
    ignore_changes = [secret_string]
  }
}

locals {
  worker_timeout = var.deadline_seconds + 30
  public_urls    = { for target in ["start_search", "search_status", "cancel_search"] : target => "${aws_apigatewayv2_api.http.api_endpoint}/${target}" }
  # (and the corpus platforms' settings: corpus.tf)
  common_env = merge(local.corpus_env, {
    FANFUSE_CLOUD              = "aws"
    FANFUSE_AWS_REGION         = var.region
    FANFUSE_DYNAMODB_TABLE     = aws_dynamodb_table.fanfuse.name
    FANFUSE_QUEUE_PREFIX       = var.name_prefix
    FANFUSE_DEPLOYED_PLATFORMS = jsonencode(var.platforms)
    FANFUSE_DEADLINE_SECONDS   = tostring(var.deadline_seconds)
    FANFUSE_FUNCTION_URLS      = jsonencode(local.public_urls)
    FANFUSE_TASKS_HMAC_SECRET  = aws_secretsmanager_secret_version.tasks.secret_string
    FANFUSE_CACHE_DIR          = "/tmp/fanfuse" # the docs index: /tmp is a Lambda's only writable place
  })
  # Who may call (fanfuse.auth.callers): only `http` has callers, so only it is told. The
  # principal API Gateway verified is trusted exactly when every route is AWS_IAM (api.tf).
  caller_env = {
    FANFUSE_AUTH_REQUIRED              = "true"
    FANFUSE_TRUST_IAM_AUTHORIZER       = tostring(var.api_access == "iam")
    FANFUSE_FIREBASE_PROJECT           = var.firebase_project == null ? "" : var.firebase_project
    FANFUSE_ID_TOKEN_AUDIENCES         = jsonencode(var.id_token_audiences)
    FANFUSE_ID_TOKEN_PRINCIPALS        = jsonencode(var.id_token_principals)
    FANFUSE_FIREBASE_SIGN_IN_PROVIDERS = jsonencode(var.firebase_sign_in_providers)
    FANFUSE_FIREBASE_ALLOW_ANONYMOUS   = tostring(var.firebase_allow_anonymous)
    # Who reads every owner's GET /search_status/stats (fanfuse.http.stats_route); others their own.
    FANFUSE_OPERATORS = jsonencode(var.operators)
    # Browser apps on these origins call the API directly (the gateway answers their preflight:
    # api.tf); the function answers with the same origins behind any other front.
    FANFUSE_CORS_ORIGINS = jsonencode(var.cors_origins)
  }
  # Only the worker calls providers, so only it gets their settings and keys.
  worker_env = merge(var.platform_settings, {
    for env, secret in data.aws_secretsmanager_secret_version.provider : env => secret.secret_string
  })
  functions = {
    http       = { handler = "aws_lambda.http", timeout = 30, memory = 512 }
    worker     = { handler = "aws_lambda.worker", timeout = local.worker_timeout, memory = 1024 }
    aggregator = { handler = "aws_lambda.aggregator", timeout = 60, memory = 512 }
  }
}

# Provider keys, created by the operator before the apply (docs/deploy.md): a missing one fails
# the plan, naming it.
data "aws_secretsmanager_secret_version" "provider" {
  for_each  = var.provider_secrets
  secret_id = each.value
}

resource "aws_cloudwatch_log_group" "functions" {
  #checkov:skip=CKV_AWS_338:Retention is log_retention_days, an optional cost chosen by the operator (docs/deploy.md, "Optional costs"); searches live 30 minutes, so their lines are kept 30 days by default.
  for_each          = local.functions
  name              = local.log_groups[each.key]
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.fanfuse.arn
}

resource "aws_lambda_function" "fanfuse" {
  #checkov:skip=CKV_AWS_117:The functions call public search providers and AWS APIs only; no private resource needs a VPC, and one would add NAT gateways between every worker and its provider.
  #checkov:skip=CKV_AWS_272:The zip is built and deployed by this repository's own pipeline from reviewed source; Lambda code signing would add a Signer profile without changing who can publish code (the deploy role).
  #checkov:skip=CKV_AWS_116:A function dead-letter queue only receives failed asynchronous invocations, and none is ever made: the HTTP API invokes `http` synchronously, and the queues' mappings retry a failed message until it moves to that queue's own dead-letter queue (queues.tf), where an alarm watches it (alerts.tf).
  #checkov:skip=CKV_AWS_115:Reserved concurrency is off by default (var.reserved_concurrency): a new account's quota may be too low to reserve any, and AWS keeps 100 unreserved; the pollers are held to what the functions can run by the mappings' precondition and maximum concurrency.
  #checkov:skip=CKV_AWS_50:X-Ray active tracing is var.xray_tracing, an optional cost, off by default (docs/deploy.md, "Optional costs").
  for_each      = local.functions
  function_name = "${var.name_prefix}-${each.key}"
  role          = aws_iam_role.function[each.key].arn
  runtime       = var.python_runtime
  handler       = each.value.handler
  # Through S3 (artifacts.tf): Lambda takes a direct upload only up to 50 MB zipped.
  s3_bucket                      = aws_s3_bucket.artifacts.id
  s3_key                         = var.lambda_s3_key
  timeout                        = each.value.timeout
  memory_size                    = each.value.memory
  reserved_concurrent_executions = lookup(var.reserved_concurrency, each.key, -1)
  kms_key_arn                    = aws_kms_key.fanfuse.arn
  layers                         = local.tracing_layers # the ADOT collector (tracing.tf)

  environment {
    variables = merge(
      local.common_env,
      local.tracing_env,
      each.key == "http" ? local.caller_env : {},
      each.key == "worker" ? local.worker_env : {},
    )
  }

  tracing_config {
    mode = var.xray_tracing ? "Active" : "PassThrough"
  }

  depends_on = [aws_cloudwatch_log_group.functions]
}

# How many invocations the mappings can start at once, against what each function may run. A
# throttled invocation returns its message to the queue and spends one of its max_receives, so a
# deployment whose pollers outnumber the function's concurrency moves searches to the dead-letter
# queues under load: the plan fails instead (the precondition below, tests/infra).
locals {
  pollers = {
    worker     = length(var.platforms) * var.platform_concurrency
    aggregator = var.aggregate_concurrency
  }
  reserved_total = sum(concat([0], values(var.reserved_concurrency)))
  # What functions without a reservation share: the account's quota less every reservation.
  unreserved_pool = var.account_concurrency - local.reserved_total
  pollers_in_pool = sum(concat([0], [for name, count in local.pollers : count if !contains(keys(var.reserved_concurrency), name)]))
  # Every mapping's pollers fit what its function may run.
  pollers_fit = alltrue([for name, count in local.pollers : count <= lookup(var.reserved_concurrency, name, local.unreserved_pool)]) && local.pollers_in_pool <= local.unreserved_pool
}

# Each platform queue feeds the worker, one message per invocation (a slow platform run never
# holds another search's message), at most platform_concurrency at a time: the provider's quota.
# ReportBatchItemFailures: a held lease or an infrastructure error leaves the message for SQS to
# deliver again (aws/front.py), while a done or hopeless one is deleted.
resource "aws_lambda_event_source_mapping" "platforms" {
  for_each                = toset(var.platforms)
  event_source_arn        = aws_sqs_queue.tasks[each.key].arn
  function_name           = aws_lambda_function.fanfuse["worker"].arn
  batch_size              = 1
  function_response_types = ["ReportBatchItemFailures"]

  scaling_config {
    maximum_concurrency = var.platform_concurrency
  }

  lifecycle {
    precondition {
      condition     = local.reserved_total == 0 || local.reserved_total <= var.account_concurrency - 100
      error_message = "reserved_concurrency reserves ${local.reserved_total} of the account's ${var.account_concurrency}: AWS keeps 100 unreserved."
    }
    precondition {
      condition     = local.pollers_fit
      error_message = "The queues' pollers (worker: ${local.pollers.worker} = ${length(var.platforms)} platforms x platform_concurrency ${var.platform_concurrency}; aggregator: ${local.pollers.aggregator}) exceed what the functions may run (reserved: ${jsonencode(var.reserved_concurrency)}; unreserved pool: ${local.unreserved_pool} of account_concurrency ${var.account_concurrency}): throttled messages would spend their max_receives and land in the dead-letter queues. Lower platform_concurrency, or raise the reservation or the account's quota."
    }
  }
}

# The aggregate queue's deliveries are quick (a fan-in that finds the search final, a deadline):
# aggregate_concurrency at a time.
resource "aws_lambda_event_source_mapping" "aggregate" {
  event_source_arn        = aws_sqs_queue.tasks["aggregate"].arn
  function_name           = aws_lambda_function.fanfuse["aggregator"].arn
  batch_size              = 1
  function_response_types = ["ReportBatchItemFailures"]

  scaling_config {
    maximum_concurrency = var.aggregate_concurrency
  }
}
