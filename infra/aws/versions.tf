# Provider pins: the AWS provider alone (the tasks secret comes from Secrets Manager, not from the
# random provider), so a machine with only hashicorp/aws in its mirror can init (the rehearsal's).
# State lives in an S3 bucket created before the first init (docs/deploy.md, "State"):
#   terraform -chdir=infra/aws init -input=false -backend-config=bucket=<state bucket> \
#     -backend-config=key=fanfuse.tfstate -backend-config=region=<region> \
#     -backend-config=use_lockfile=true
terraform {
  required_version = ">= 1.10"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.80"
    }
  }

  backend "s3" {}
}

provider "aws" {
  region = var.region

  default_tags {
    tags = { application = "fanfuse" }
  }
}
