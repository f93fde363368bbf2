# The three Lambda functions, from one zip (functions/aws_lambda.py and the fanfuse package):
# `http` behind the HTTP API (api.tf), `worker` on every platform queue, `aggregator` on the
# aggregate queue. All run the same service on DynamoDB and SQS (FANFUSE_CLOUD=aws).
#
# The task secret: every message is signed with it (queue/sqs.py) and every handler checks it
# (auth/tasks.py), on top of IAM (only these roles may send to the queues). It lives in the
# functions' environment, encrypted with the customer-managed key.
resource "random_password" "tasks_secret" {
  length  = 48
  special = false
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
    FANFUSE_TASKS_HMAC_SECRET  = random_password.tasks_secret.result
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
    # Who reads every owner's GET /search_status/stats (fanfuse.http.stats); others their own.
    FANFUSE_OPERATORS = jsonencode(var.operators)
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
  for_each          = local.functions
  name              = "/aws/lambda/${var.name_prefix}-${each.key}"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.fanfuse.arn
}

resource "aws_sqs_queue" "function_failures" {
  name                      = "${var.name_prefix}-function-failures"
  message_retention_seconds = 1209600
  kms_master_key_id         = aws_kms_key.fanfuse.arn
}

resource "aws_lambda_function" "fanfuse" {
  #checkov:skip=CKV_AWS_117:The functions call public search providers and AWS APIs only; no private resource needs a VPC, and one would add NAT gateways between every worker and its provider.
  #checkov:skip=CKV_AWS_272:The zip is built and deployed by this repository's own pipeline from reviewed source; Lambda code signing would add a Signer profile without changing who can publish code (the deploy role).
  for_each                       = local.functions
  function_name                  = "${var.name_prefix}-${each.key}"
  role                           = aws_iam_role.function[each.key].arn
  runtime                        = var.python_runtime
  handler                        = each.value.handler
  filename                       = var.lambda_package
  source_code_hash               = filebase64sha256(var.lambda_package)
  timeout                        = each.value.timeout
  memory_size                    = each.value.memory
  reserved_concurrent_executions = var.reserved_concurrency
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
    mode = "Active"
  }

  # Only asynchronous invocations use it (none are made: HTTP is synchronous, SQS mappings
  # retry through the queues' own dead-letter queues); kept so nothing is ever lost silently.
  dead_letter_config {
    target_arn = aws_sqs_queue.function_failures.arn
  }

  depends_on = [aws_cloudwatch_log_group.functions]
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
}

resource "aws_lambda_event_source_mapping" "aggregate" {
  event_source_arn        = aws_sqs_queue.tasks["aggregate"].arn
  function_name           = aws_lambda_function.fanfuse["aggregator"].arn
  batch_size              = 1
  function_response_types = ["ReportBatchItemFailures"]
}
