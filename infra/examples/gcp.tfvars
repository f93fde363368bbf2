# An example deployment on Google Cloud (docs/deploy.md); scripts/deploy-rehearsal gcp renders
# and runs exactly this. Copy it, keep the platforms you configure, and pass it to the build:
#   gcloud builds submit --config cloudbuild.yaml \
#     --substitutions _TF_STATE_BUCKET=my-tf-state,_VAR_FILE=examples/gcp.tfvars
# Every listed platform needs its settings here and its keys in Secret Manager (tests/infra check).

platforms = {
  docs      = { rate = 50, concurrency = 20, max_attempts = 3 }
  wikipedia = { rate = 10, concurrency = 10, max_attempts = 3 }
  arxiv     = { rate = 0.33, concurrency = 1, max_attempts = 3 } # arXiv API: 1 request every 3 s
  tavily    = { rate = 1.5, concurrency = 5, max_attempts = 3 }  # ~100 requests/min
}

# Plain settings (keys go to Secret Manager: fanfuse-tavily-api-key, from provider_secrets).
platform_settings = {
  FANFUSE_WIKIPEDIA_USER_AGENT = "fanfuse-example/0.1 (ops@example.com)"
  FANFUSE_ARXIV_ENABLED        = "true"
}

# Who may call: Cloud Run IAM first (api_invokers), then the functions check the caller. Apps
# whose users sign in with Firebase call directly only with api_access = "public" (allUsers may
# invoke, the functions check every request), which an organisation policy restricting sharing to
# its own domain (iam.allowedPolicyMemberDomains) refuses half-way through an apply: check it
# first (docs/deploy.md, "Who may call the API").
api_access   = "iam"
api_invokers = ["serviceAccount:app-backend@my-project.iam.gserviceaccount.com"]
# api_access = "public"
# Which of the app's users may call (defaults: any sign-in provider, never anonymous users, no
# Google ID token); docs/deploy.md has the table:
# firebase_sign_in_providers = ["password", "google.com"]
# id_token_audiences         = ["https://fanfuse.example.com"]
# id_token_principals        = ["app-backend@my-project.iam.gserviceaccount.com"]
