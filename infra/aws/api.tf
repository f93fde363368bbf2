# The public HTTP API: an API Gateway HTTP API (payload format 2.0) in front of the `http`
# function. Its endpoint is known before the function exists, so the function is told its own
# public URLs (status_url, cancel_url) without a cycle, which a function URL would not allow.
# api_access "iam" (the default): every route is AWS_IAM-authorized, callers sign with SigV4
# (attach `api_invoke` to their role), and the function takes the principal the gateway
# verified as the caller (FANFUSE_TRUST_IAM_AUTHORIZER), or the API key a request carries.
# api_access "public": no gateway authorization, and the function verifies every caller itself
# (API key, Firebase or Google ID token: 401 without one); the stage's throttling holds either way.
resource "aws_apigatewayv2_api" "http" {
  name          = "${var.name_prefix}-api"
  protocol_type = "HTTP"

  # Browser apps on cors_origins call the API directly (examples/web-app, api_access "public"):
  # the gateway answers their preflight itself, before any authorization, and adds the headers
  # to every answer. None listed: no CORS, browsers refuse cross-origin calls.
  dynamic "cors_configuration" {
    for_each = length(var.cors_origins) == 0 ? [] : [var.cors_origins]
    content {
      allow_origins = cors_configuration.value
      allow_methods = ["GET", "POST", "OPTIONS"]
      allow_headers = ["authorization", "content-type", "x-api-key", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"]
      max_age       = 600
    }
  }
}

resource "aws_apigatewayv2_integration" "http" {
  api_id                 = aws_apigatewayv2_api.http.id
  integration_type       = "AWS_PROXY"
  integration_uri        = aws_lambda_function.fanfuse["http"].invoke_arn
  payload_format_version = "2.0"
}

resource "aws_apigatewayv2_route" "targets" {
  #checkov:skip=CKV_AWS_309:Only with api_access = "public", chosen so apps whose users sign in with Firebase call directly: the function then authenticates every request itself (API key, Firebase or Google ID token; 401 without one) and the stage throttles. The default "iam" makes every route AWS_IAM.
  for_each           = toset(["ANY /{target}", "ANY /{target}/{proxy+}"])
  api_id             = aws_apigatewayv2_api.http.id
  route_key          = each.value
  target             = "integrations/${aws_apigatewayv2_integration.http.id}"
  authorization_type = var.api_access == "iam" ? "AWS_IAM" : "NONE"
}

resource "aws_cloudwatch_log_group" "api" {
  #checkov:skip=CKV_AWS_338:Retention is log_retention_days, an optional cost chosen by the operator (docs/deploy.md, "Optional costs").
  name              = local.log_groups["api"]
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.fanfuse.arn
}

resource "aws_apigatewayv2_stage" "default" {
  api_id      = aws_apigatewayv2_api.http.id
  name        = "$default"
  auto_deploy = true

  default_route_settings {
    throttling_rate_limit  = var.api_throttle_rate
    throttling_burst_limit = var.api_throttle_rate * 2
  }

  access_log_settings {
    destination_arn = aws_cloudwatch_log_group.api.arn
    format = jsonencode({
      requestId = "$context.requestId", ip = "$context.identity.sourceIp",
      caller    = "$context.identity.caller", route = "$context.routeKey",
      status    = "$context.status", latency = "$context.integrationLatency"
    })
  }
}

resource "aws_lambda_permission" "api" {
  statement_id  = "AllowHttpApi"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.fanfuse["http"].function_name
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_apigatewayv2_api.http.execution_arn}/*/*"
}

data "aws_iam_policy_document" "api_invoke" {
  statement {
    actions   = ["execute-api:Invoke"]
    resources = ["${aws_apigatewayv2_api.http.execution_arn}/*/*"]
  }
}

resource "aws_iam_policy" "api_invoke" {
  name        = "${var.name_prefix}-api-invoke"
  description = "Attach to the roles of the apps that call fanfuse's HTTP API."
  policy      = data.aws_iam_policy_document.api_invoke.json
}
