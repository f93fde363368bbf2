# Provider pins. State lives in a GCS bucket given at init time:
#   terraform init -backend-config="bucket=<state bucket>" -backend-config="prefix=fanfuse"
terraform {
  required_version = ">= 1.6"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 6.14"
    }
  }

  backend "gcs" {}
}

provider "google" {
  project = var.project_id
  region  = var.region
}
