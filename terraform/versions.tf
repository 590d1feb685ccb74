terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.70"
    }
  }
}

provider "aws" {
  region = var.region
  default_tags {
    tags = merge({ "sluice:cluster" = var.name }, var.tags)
  }
}

data "aws_caller_identity" "current" {}
