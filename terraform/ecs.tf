resource "aws_ecs_cluster" "this" {
  name = var.name
  setting {
    name  = "containerInsights"
    value = "enabled"
  }
}

resource "aws_cloudwatch_log_group" "nodes" {
  name              = "/ecs/${var.name}"
  retention_in_days = var.log_retention_days
}

locals {
  object_store = "s3://${aws_s3_bucket.data.bucket}/${var.object_prefix}"
  wal_store    = local.express ? "s3://${aws_s3_directory_bucket.wal[0].bucket}/" : local.object_store

  # Settings shared by every node (each is a flag of `sluice serve`, see
  # docs/configuration.md); var.environment may add or override any of them.
  common_environment = merge({
    SLUICE_OBJECT_STORE = local.object_store
    SLUICE_WAL_STORE    = local.wal_store
    SLUICE_METADATA     = "dynamodb://${aws_dynamodb_table.meta.name}"
    SLUICE_S3_REGION    = var.region
    SLUICE_HTTP_ADDR    = "0.0.0.0:${var.http_port}"
    SLUICE_KAFKA_ADDR   = "0.0.0.0:${var.kafka_port}"
    SLUICE_LOG_FORMAT   = "json"
    # The NLB does not preserve client IPs, so every client arrives from one
    # of its few addresses: the per-address cap must not be below the
    # listener's (--max-connections, 4096 by default).
    SLUICE_MAX_CONNECTIONS_PER_IP = "4096"
    AWS_REGION                    = var.region
  }, var.environment)
}

# One task definition and one service per node: each node keeps its id
# (node-<i>) across restarts and has its own advertised addresses on the
# load balancer.
resource "aws_ecs_task_definition" "node" {
  count                    = var.node_count
  family                   = "${var.name}-node-${count.index}"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.cpu
  memory                   = var.memory
  task_role_arn            = aws_iam_role.task.arn
  execution_role_arn       = aws_iam_role.execution.arn

  container_definitions = jsonencode([{
    name      = "sluice"
    image     = var.image
    essential = true
    command   = ["serve"]
    environment = [for k, v in merge(local.common_environment, {
      SLUICE_NODE_ID               = "node-${count.index}"
      SLUICE_ADVERTISED_HTTP_ADDR  = "${aws_lb.nlb.dns_name}:${var.node_http_port_base + count.index}"
      SLUICE_ADVERTISED_KAFKA_ADDR = "${aws_lb.nlb.dns_name}:${var.node_kafka_port_base + count.index}"
    }) : { name = k, value = v }]
    portMappings = [
      { containerPort = var.http_port, protocol = "tcp" },
      { containerPort = var.kafka_port, protocol = "tcp" },
    ]
    healthCheck = {
      command     = ["CMD-SHELL", "bash -c 'exec 3<>/dev/tcp/127.0.0.1/${var.http_port} && printf \"GET /ready HTTP/1.0\\r\\n\\r\\n\" >&3 && head -n1 <&3 | grep -q \" 200 \"'"]
      interval    = 10
      timeout     = 3
      retries     = 3
      startPeriod = 30
    }
    # Clean shutdown: fail readiness, drain reads, flush every stream, fence
    # itself (--shutdown-drain-sec + --shutdown-timeout-sec by default).
    stopTimeout = 60
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        awslogs-group         = aws_cloudwatch_log_group.nodes.name
        awslogs-region        = var.region
        awslogs-stream-prefix = "node-${count.index}"
      }
    }
  }])
}

resource "aws_ecs_service" "node" {
  count           = var.node_count
  name            = "${var.name}-node-${count.index}"
  cluster         = aws_ecs_cluster.this.id
  task_definition = aws_ecs_task_definition.node[count.index].arn
  desired_count   = 1
  launch_type     = "FARGATE"

  # Never two tasks of one node id at once: the old one stops before the new
  # one starts. (Two would be safe, since the newer epoch fences the older,
  # but pointless.) A task that exits, fenced or crashed, is replaced.
  deployment_minimum_healthy_percent = 0
  deployment_maximum_percent         = 100
  health_check_grace_period_seconds  = 30

  network_configuration {
    subnets          = var.subnet_ids
    security_groups  = [aws_security_group.nodes.id]
    assign_public_ip = false
  }

  load_balancer {
    target_group_arn = aws_lb_target_group.http.arn
    container_name   = "sluice"
    container_port   = var.http_port
  }

  load_balancer {
    target_group_arn = aws_lb_target_group.kafka.arn
    container_name   = "sluice"
    container_port   = var.kafka_port
  }

  load_balancer {
    target_group_arn = aws_lb_target_group.node_http[count.index].arn
    container_name   = "sluice"
    container_port   = var.http_port
  }

  load_balancer {
    target_group_arn = aws_lb_target_group.node_kafka[count.index].arn
    container_name   = "sluice"
    container_port   = var.kafka_port
  }

  depends_on = [
    aws_lb_listener.http,
    aws_lb_listener.kafka,
    aws_lb_listener.node_http,
    aws_lb_listener.node_kafka,
    aws_iam_role_policy.task,
  ]
}
