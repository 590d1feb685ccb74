variable "region" {
  description = "AWS region of the cluster."
  type        = string
}

variable "name" {
  description = "Prefix of every resource name (ECS cluster, services, roles, log group)."
  type        = string
  default     = "sluice"
}

variable "tags" {
  description = "Extra tags on every resource."
  type        = map(string)
  default     = {}
}

variable "vpc_id" {
  description = "VPC the nodes and the load balancer run in."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets for the nodes and the internal load balancer (one per availability zone you use). They need a route to S3, DynamoDB, ECR and CloudWatch Logs (NAT or VPC endpoints)."
  type        = list(string)
}

variable "client_cidr_blocks" {
  description = "Networks allowed to reach the load balancer's HTTP and Kafka ports."
  type        = list(string)
}

variable "image" {
  description = "Container image of Sluice (built from the repository's Dockerfile and pushed to a registry the tasks can pull from)."
  type        = string
}

variable "node_count" {
  description = "Number of nodes. Each is its own ECS service with a stable node id (node-0, node-1, ...)."
  type        = number
  default     = 3
  validation {
    condition     = var.node_count >= 1 && var.node_count <= 20
    error_message = "node_count must be between 1 and 20 (two load balancer listeners per node)."
  }
}

variable "cpu" {
  description = "Fargate CPU units per node (1024 = 1 vCPU)."
  type        = number
  default     = 1024
}

variable "memory" {
  description = "Fargate memory per node, MiB. Leave room above --max-buffered-bytes plus --read-cache-bytes."
  type        = number
  default     = 2048
}

variable "bucket_name" {
  description = "S3 bucket for data objects, the WAL (unless wal_express_zone_id is set) and metadata snapshots. Default: <name>-<account id>-<region>."
  type        = string
  default     = null
}

variable "object_prefix" {
  description = "Key prefix inside the bucket, ending with '/' (or empty)."
  type        = string
  default     = "cluster/"
  validation {
    condition     = var.object_prefix == "" || endswith(var.object_prefix, "/")
    error_message = "object_prefix must be empty or end with '/'."
  }
}

variable "wal_express_zone_id" {
  description = "Availability-zone id (e.g. use1-az4) for an S3 Express One Zone directory bucket holding the WAL; null keeps the WAL in the main bucket. Place the nodes' subnets in that zone for the latency to pay off."
  type        = string
  default     = null
}

variable "table_name" {
  description = "DynamoDB table of the metadata log. Default: <name>-meta."
  type        = string
  default     = null
}

variable "http_port" {
  description = "HTTP port of the nodes and of the load balancer's shared HTTP listener."
  type        = number
  default     = 8080
}

variable "kafka_port" {
  description = "Kafka port of the nodes and of the load balancer's bootstrap listener."
  type        = number
  default     = 9092
}

variable "node_http_port_base" {
  description = "Node i is reachable through the load balancer at HTTP port node_http_port_base + i (its advertised HTTP address)."
  type        = number
  default     = 8100
}

variable "node_kafka_port_base" {
  description = "Node i is reachable through the load balancer at Kafka port node_kafka_port_base + i (its advertised Kafka address)."
  type        = number
  default     = 9100
}

variable "log_retention_days" {
  description = "CloudWatch Logs retention."
  type        = number
  default     = 30
}

variable "environment" {
  description = "Extra SLUICE_* settings for every node, e.g. { SLUICE_FLUSH_BYTES = \"16777216\" } (see docs/configuration.md)."
  type        = map(string)
  default     = {}
}

variable "force_destroy" {
  description = "Let `terraform destroy` delete non-empty buckets and the table (for test clusters only)."
  type        = bool
  default     = false
}
