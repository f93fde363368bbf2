# Provider pins. State lives in an S3 bucket given at init time:
#   terraform init -backend-config="bucket=<state bucket>" -backend-config="key=fanfuse" \
#     -backend-config="region=<region>"
terraform {
  required_version = ">= 1.6"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.80"
    }
    random = {
      source  = "hashicorp/random"
      version = "~> 3.6"
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
