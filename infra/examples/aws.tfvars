# An example deployment on AWS (docs/deploy.md) that needs no provider key and fetches no page:
# `docs` searches the bundled corpus, `handbook` (BM25) and `handbook_vectors` (MiniLM on ONNX
# Runtime) a team's own documents, published to the corpus bucket this deployment creates
# (infra/aws/corpus.tf, docs/corpora.md). scripts/deploy-rehearsal aws applies exactly this to
# moto's server, publishes a handbook into that bucket, searches all three through what the apply
# created, plans again (nothing to change) and tears it down, with the commands docs/deploy.md
# gives:
#   scripts/package-functions aws build/lambda.zip infra/examples/aws.tfvars
#   terraform -chdir=infra/aws apply -var-file=../examples/aws.tfvars -var=lambda_s3_key=...
#   fanfuse index handbook --publish s3://fanfuse-corpora-ACCOUNT/handbook   (output corpus_urls)
# Corpus engines only: the zip needs no `web` extra (page content), and that is what lets
# `vectors` (its model and runtime) fit Lambda's 250 MB unzipped; web platforms beside `vectors`
# do not fit one zip (docs/deploy.md, "The clouds' limits"). Web providers: aws-web.tfvars.

platforms = ["docs", "handbook", "handbook_vectors"]

corpus_platforms = {
  handbook         = { engine = "docs", corpus = "handbook" }
  handbook_vectors = { engine = "vectors", corpus = "handbook" }
}

# Who may call (docs/deploy.md, "Who may call the API on AWS"). The default, api_access = "iam":
# SigV4-signed callers with the api_invoke policy, each its own owner (aws:<userArn>). For an app
# whose users sign in with Firebase:
# api_access       = "public"
# firebase_project = "my-firebase-project"
