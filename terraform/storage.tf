locals {
  bucket_name = coalesce(var.bucket_name, "${var.name}-${data.aws_caller_identity.current.account_id}-${var.region}")
  table_name  = coalesce(var.table_name, "${var.name}-meta")
  express     = var.wal_express_zone_id != null
}

# ---- the object store ------------------------------------------------------
# Versioning stays off: Sluice deletes WAL segments and old snapshots once
# they are committed, and with versioning those bytes would be kept forever.
resource "aws_s3_bucket" "data" {
  bucket        = local.bucket_name
  force_destroy = var.force_destroy
}

resource "aws_s3_bucket_ownership_controls" "data" {
  bucket = aws_s3_bucket.data.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "data" {
  bucket                  = aws_s3_bucket.data.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "data" {
  bucket = aws_s3_bucket.data.id
  rule {
    apply_server_side_encryption_by_default {
      # SSE-S3: no KMS key policy or kms:* permission to manage.
      sse_algorithm = "AES256"
    }
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "data" {
  bucket = aws_s3_bucket.data.id
  rule {
    id     = "abort-abandoned-multipart-uploads"
    status = "Enabled"
    filter {}
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

# ---- optional: the WAL on S3 Express One Zone ---------------------------------
# Directory-bucket names end in --<zone id>--x-s3; Sluice recognises the
# suffix and talks to the zonal endpoint with CreateSession credentials.
resource "aws_s3_directory_bucket" "wal" {
  count         = local.express ? 1 : 0
  bucket        = "${var.name}-wal--${var.wal_express_zone_id}--x-s3"
  force_destroy = var.force_destroy
  location {
    name = var.wal_express_zone_id
    type = "AvailabilityZone"
  }
}

# ---- the metadata log ------------------------------------------------------
# Entry N of the log is the item (pk = "<cluster>#log", sk = N), created with a
# conditional PutItem; see docs/metadata.md.
resource "aws_dynamodb_table" "meta" {
  name                        = local.table_name
  billing_mode                = "PAY_PER_REQUEST"
  hash_key                    = "pk"
  range_key                   = "sk"
  deletion_protection_enabled = !var.force_destroy

  attribute {
    name = "pk"
    type = "S"
  }

  attribute {
    name = "sk"
    type = "N"
  }

  point_in_time_recovery {
    enabled = true
  }

  server_side_encryption {
    enabled = true
  }
}
