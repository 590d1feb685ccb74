# ---- security groups -------------------------------------------------------
resource "aws_security_group" "nlb" {
  name        = "${var.name}-nlb"
  description = "Sluice load balancer: HTTP and Kafka from clients and from the nodes"
  vpc_id      = var.vpc_id
}

resource "aws_security_group" "nodes" {
  name        = "${var.name}-nodes"
  description = "Sluice nodes: HTTP and Kafka from the load balancer only"
  vpc_id      = var.vpc_id
}

locals {
  # Every port the load balancer listens on, with who may use it: clients,
  # and the nodes themselves (they forward requests to each other through
  # their advertised addresses, which are load balancer ports).
  nlb_ports = concat(
    [var.http_port, var.kafka_port],
    [for i in range(var.node_count) : var.node_http_port_base + i],
    [for i in range(var.node_count) : var.node_kafka_port_base + i],
  )
}

resource "aws_vpc_security_group_ingress_rule" "nlb_clients" {
  for_each          = { for pair in setproduct(local.nlb_ports, var.client_cidr_blocks) : "${pair[0]}-${pair[1]}" => pair }
  security_group_id = aws_security_group.nlb.id
  ip_protocol       = "tcp"
  from_port         = each.value[0]
  to_port           = each.value[0]
  cidr_ipv4         = each.value[1]
}

resource "aws_vpc_security_group_ingress_rule" "nlb_nodes" {
  for_each                     = toset([for p in local.nlb_ports : tostring(p)])
  security_group_id            = aws_security_group.nlb.id
  ip_protocol                  = "tcp"
  from_port                    = tonumber(each.value)
  to_port                      = tonumber(each.value)
  referenced_security_group_id = aws_security_group.nodes.id
}

resource "aws_vpc_security_group_egress_rule" "nlb_to_nodes" {
  for_each                     = toset([tostring(var.http_port), tostring(var.kafka_port)])
  security_group_id            = aws_security_group.nlb.id
  ip_protocol                  = "tcp"
  from_port                    = tonumber(each.value)
  to_port                      = tonumber(each.value)
  referenced_security_group_id = aws_security_group.nodes.id
}

resource "aws_vpc_security_group_ingress_rule" "nodes_from_nlb" {
  for_each                     = toset([tostring(var.http_port), tostring(var.kafka_port)])
  security_group_id            = aws_security_group.nodes.id
  ip_protocol                  = "tcp"
  from_port                    = tonumber(each.value)
  to_port                      = tonumber(each.value)
  referenced_security_group_id = aws_security_group.nlb.id
}

# S3, DynamoDB, ECR, CloudWatch Logs and the load balancer.
resource "aws_vpc_security_group_egress_rule" "nodes_out" {
  security_group_id = aws_security_group.nodes.id
  ip_protocol       = "-1"
  cidr_ipv4         = "0.0.0.0/0"
}

# ---- the internal network load balancer ------------------------------------
# Shared listeners (http_port, kafka_port) spread new connections over every
# ready node: the HTTP API and the Kafka bootstrap. Per-node listeners give
# each node a stable advertised address, which Kafka clients need once the
# metadata response tells them which node leads a partition.
resource "aws_lb" "nlb" {
  name                             = "${var.name}-nlb"
  internal                         = true
  load_balancer_type               = "network"
  subnets                          = var.subnet_ids
  security_groups                  = [aws_security_group.nlb.id]
  enable_cross_zone_load_balancing = true
}

locals {
  ready_check = {
    protocol            = "HTTP"
    path                = "/ready"
    port                = tostring(var.http_port)
    matcher             = "200"
    interval            = 10
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }
}

resource "aws_lb_target_group" "http" {
  name                 = "${var.name}-http"
  port                 = var.http_port
  protocol             = "TCP"
  target_type          = "ip"
  vpc_id               = var.vpc_id
  preserve_client_ip   = "false"
  deregistration_delay = 10
  health_check {
    protocol            = local.ready_check.protocol
    path                = local.ready_check.path
    port                = local.ready_check.port
    matcher             = local.ready_check.matcher
    interval            = local.ready_check.interval
    healthy_threshold   = local.ready_check.healthy_threshold
    unhealthy_threshold = local.ready_check.unhealthy_threshold
  }
}

resource "aws_lb_target_group" "kafka" {
  name                 = "${var.name}-kafka"
  port                 = var.kafka_port
  protocol             = "TCP"
  target_type          = "ip"
  vpc_id               = var.vpc_id
  preserve_client_ip   = "false"
  deregistration_delay = 10
  health_check {
    protocol            = local.ready_check.protocol
    path                = local.ready_check.path
    port                = local.ready_check.port
    matcher             = local.ready_check.matcher
    interval            = local.ready_check.interval
    healthy_threshold   = local.ready_check.healthy_threshold
    unhealthy_threshold = local.ready_check.unhealthy_threshold
  }
}

# One target group per node, for its advertised addresses. With a single
# target, an unhealthy check does not cut the node off: a load balancer whose
# targets are all unhealthy still forwards to them.
resource "aws_lb_target_group" "node_http" {
  count                = var.node_count
  name                 = "${var.name}-h${count.index}"
  port                 = var.http_port
  protocol             = "TCP"
  target_type          = "ip"
  vpc_id               = var.vpc_id
  preserve_client_ip   = "false"
  deregistration_delay = 10
  health_check {
    protocol            = local.ready_check.protocol
    path                = local.ready_check.path
    port                = local.ready_check.port
    matcher             = local.ready_check.matcher
    interval            = local.ready_check.interval
    healthy_threshold   = local.ready_check.healthy_threshold
    unhealthy_threshold = local.ready_check.unhealthy_threshold
  }
}

resource "aws_lb_target_group" "node_kafka" {
  count                = var.node_count
  name                 = "${var.name}-k${count.index}"
  port                 = var.kafka_port
  protocol             = "TCP"
  target_type          = "ip"
  vpc_id               = var.vpc_id
  preserve_client_ip   = "false"
  deregistration_delay = 10
  health_check {
    protocol            = local.ready_check.protocol
    path                = local.ready_check.path
    port                = local.ready_check.port
    matcher             = local.ready_check.matcher
    interval            = local.ready_check.interval
    healthy_threshold   = local.ready_check.healthy_threshold
    unhealthy_threshold = local.ready_check.unhealthy_threshold
  }
}

resource "aws_lb_listener" "http" {
  load_balancer_arn = aws_lb.nlb.arn
  port              = var.http_port
  protocol          = "TCP"
  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.http.arn
  }
}

resource "aws_lb_listener" "kafka" {
  load_balancer_arn = aws_lb.nlb.arn
  port              = var.kafka_port
  protocol          = "TCP"
  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.kafka.arn
  }
}

resource "aws_lb_listener" "node_http" {
  count             = var.node_count
  load_balancer_arn = aws_lb.nlb.arn
  port              = var.node_http_port_base + count.index
  protocol          = "TCP"
  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.node_http[count.index].arn
  }
}

resource "aws_lb_listener" "node_kafka" {
  count             = var.node_count
  load_balancer_arn = aws_lb.nlb.arn
  port              = var.node_kafka_port_base + count.index
  protocol          = "TCP"
  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.node_kafka[count.index].arn
  }
}
