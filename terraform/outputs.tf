output "http_url" {
  description = "HTTP API through the internal load balancer (any node serves any request)."
  value       = "http://${aws_lb.nlb.dns_name}:${var.http_port}"
}

output "kafka_bootstrap" {
  description = "Kafka bootstrap servers."
  value       = "${aws_lb.nlb.dns_name}:${var.kafka_port}"
}

output "node_addresses" {
  description = "Advertised HTTP and Kafka address of each node."
  value = {
    for i in range(var.node_count) : "node-${i}" => {
      http  = "${aws_lb.nlb.dns_name}:${var.node_http_port_base + i}"
      kafka = "${aws_lb.nlb.dns_name}:${var.node_kafka_port_base + i}"
    }
  }
}

output "bucket" {
  description = "S3 bucket of data objects (and of the WAL unless it is on S3 Express)."
  value       = aws_s3_bucket.data.bucket
}

output "wal_bucket" {
  description = "S3 Express One Zone bucket of the WAL, or null."
  value       = local.express ? aws_s3_directory_bucket.wal[0].bucket : null
}

output "table" {
  description = "DynamoDB table of the metadata log."
  value       = aws_dynamodb_table.meta.name
}

output "log_group" {
  description = "CloudWatch Logs group of the nodes (JSON lines)."
  value       = aws_cloudwatch_log_group.nodes.name
}

output "ecs_cluster" {
  description = "ECS cluster name."
  value       = aws_ecs_cluster.this.name
}
