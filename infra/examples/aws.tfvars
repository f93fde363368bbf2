# An example deployment on AWS (docs/deploy.md); scripts/deploy-rehearsal aws applies exactly this
# to moto's server, searches through what it created, plans again (nothing to change) and tears
# it down, with the commands docs/deploy.md gives:
#   scripts/package-functions aws build/lambda.zip infra/examples/aws.tfvars
#   terraform -chdir=infra/aws apply -var-file=../examples/aws.tfvars -var=lambda_s3_key=...
# Every listed platform needs its settings here and its keys in Secrets Manager (tests/infra check).

platforms = ["docs", "wikipedia", "tavily"]

platform_settings = {
  FANFUSE_WIKIPEDIA_USER_AGENT = "fanfuse-example/0.1 (ops@example.com)"
}

# Created before the apply: aws secretsmanager create-secret --name fanfuse/tavily-api-key ...
provider_secrets = {
  FANFUSE_TAVILY_API_KEY = "fanfuse/tavily-api-key"
}

# Who may call (docs/deploy.md, "Who may call the API on AWS"). The default, api_access = "iam":
# SigV4-signed callers with the api_invoke policy, each its own owner (aws:<userArn>). For an app
# whose users sign in with Firebase:
# api_access       = "public"
# firebase_project = "my-firebase-project"
