# A deployment on AWS of the bundled corpus and three web search providers, each with its key in
# Secrets Manager, plus optional parts: CORS for a browser app, alert e-mails, a reservation for
# the worker (docs/deploy.md). scripts/deploy-rehearsal aws
# infra/examples/aws-web.tfvars applies it to moto, searches, plans again and tears it down.

platforms = ["docs", "tavily", "brave", "exa"]

# Created before the apply, one per key (docs/deploy.md, "Secrets"):
#   aws secretsmanager create-secret --name fanfuse/tavily-api-key --secret-string "$KEY"
provider_secrets = {
  FANFUSE_TAVILY_API_KEY = "fanfuse/tavily-api-key"
  FANFUSE_BRAVE_API_KEY  = "fanfuse/brave-api-key"
  FANFUSE_EXA_API_KEY    = "fanfuse/exa-api-key"
}

# The providers' quotas: a worker invocation per platform and search, at most 3 at a time each.
platform_concurrency = 3

# The worker may run 4 x 3 = 12 pollers' invocations: reserve 20 for it (the plan checks that the
# pollers fit, and that 100 stay unreserved in the account).
reserved_concurrency = { worker = 20 }

# A browser app on this origin calls the API directly with its users' Firebase ID tokens.
api_access       = "public"
firebase_project = "my-firebase-project"
cors_origins     = ["https://app.example.com"]

alert_emails = ["ops@example.com"]

# A monthly budget alerting at 80% actual and 100% forecast. Left out of this example because the
# rehearsal applies it to moto, whose Budgets lacks the calls the provider reads a budget back with
# (DescribeSubscribersForNotification, ListTagsForResource); tests/infra/test_aws_items.py checks
# the resource statically.
# monthly_budget_usd = 200
