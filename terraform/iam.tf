# The task role grants exactly the S3 and DynamoDB actions `sluice serve`
# performs (tests/deploy_static.rs compares this list with the calls in
# src/store/s3.rs and src/meta/dynamo_log.rs):
#   PutObject (create-if-absent with If-None-Match), GetObject (GET, ranged
#   GET, HEAD), DeleteObject, ListBucket (LIST); PutItem (conditional append),
#   Query (tail and truncation), DeleteItem (truncation behind a snapshot).
# `sluice init` also calls CreateTable and DescribeTable; Terraform creates the
# table instead, so the nodes never need them.
data "aws_iam_policy_document" "task" {
  statement {
    sid       = "Objects"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
    resources = ["${aws_s3_bucket.data.arn}/*"]
  }

  statement {
    sid       = "List"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.data.arn]
  }

  statement {
    sid       = "MetadataLog"
    actions   = ["dynamodb:PutItem", "dynamodb:Query", "dynamodb:DeleteItem"]
    resources = [aws_dynamodb_table.meta.arn]
  }

  # Directory buckets authorise every object request through a session.
  dynamic "statement" {
    for_each = aws_s3_directory_bucket.wal
    content {
      sid       = "WalExpress"
      actions   = ["s3express:CreateSession"]
      resources = [statement.value.arn]
    }
  }
}

data "aws_iam_policy_document" "ecs_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "task" {
  name               = "${var.name}-task"
  assume_role_policy = data.aws_iam_policy_document.ecs_assume.json
}

resource "aws_iam_role_policy" "task" {
  name   = "${var.name}-storage"
  role   = aws_iam_role.task.id
  policy = data.aws_iam_policy_document.task.json
}

# The execution role lets ECS pull the image and write the container logs.
resource "aws_iam_role" "execution" {
  name               = "${var.name}-execution"
  assume_role_policy = data.aws_iam_policy_document.ecs_assume.json
}

resource "aws_iam_role_policy_attachment" "execution" {
  role       = aws_iam_role.execution.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
}
