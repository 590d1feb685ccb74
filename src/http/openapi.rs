//! `GET /openapi.json`: a hand-written OpenAPI 3.0 document of every route in
//! [`ROUTES`](super::ROUTES). A test checks the two agree both ways.

use axum::Json;
use serde_json::{json, Value};
use std::sync::LazyLock;

static DOCUMENT: LazyLock<Value> = LazyLock::new(|| with_auth(build()));

pub async fn serve() -> Json<Value> {
    Json(DOCUMENT.clone())
}

/// The OpenAPI document.
pub fn document() -> &'static Value {
    &DOCUMENT
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } }
    })
}

fn json_response(description: &str, schema: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } }
    })
}

fn topic_param() -> Value {
    json!({ "name": "topic", "in": "path", "required": true, "schema": { "type": "string" } })
}

fn partition_param() -> Value {
    json!({ "name": "partition", "in": "path", "required": true, "schema": { "type": "integer", "minimum": 0 } })
}

fn encoding_param() -> Value {
    json!({
        "name": "encoding", "in": "query", "required": false,
        "description": "`base64` makes keys, values and header values base64 (in requests and responses).",
        "schema": { "type": "string", "enum": ["utf8", "base64"], "default": "utf8" }
    })
}

/// `?headers=` of reads and subscriptions.
fn isolation_param() -> Value {
    json!({
        "name": "isolation", "in": "query", "required": false,
        "description": "`read_committed` (the default) reads up to the last stable offset and leaves out the records of aborted Kafka transactions and the transaction markers; `-1` as the offset is the last stable offset. `read_uncommitted` reads every stored record up to the high watermark, markers included.",
        "schema": { "type": "string", "enum": ["read_committed", "read_uncommitted"], "default": "read_committed" }
    })
}

/// `?consistency=` of reads.
fn consistency_param() -> Value {
    json!({
        "name": "consistency", "in": "query", "required": false,
        "description": "`local` (the default) answers with what the serving node knows, also while the metadata store is unreachable; a node fenced without knowing it yet may answer with an older end. `strong` is linearizable: after serving, the node reads the metadata log to its end and confirms that the stream is still placed where the read was served, else answers 503 (retry). Costs one metadata log read.",
        "schema": { "type": "string", "enum": ["local", "strong"], "default": "local" }
    })
}

fn headers_param() -> Value {
    json!({
        "name": "headers", "in": "query", "required": false,
        "description": "`list` writes each record's headers as `[[name, value], ...]`: every header in stored order, repeated names kept. `object` (the default) writes `{name: value}`, sorted by name, the last of a repeated name winning.",
        "schema": { "type": "string", "enum": ["object", "list"], "default": "object" }
    })
}

/// A record's headers: `{name: value}`, or the list form `[[name, value], ...]`.
fn headers_schema(bytes: &Value) -> Value {
    json!({ "oneOf": [
        { "type": "object", "additionalProperties": bytes },
        { "type": "array", "description": "every header in order, repeated names kept",
          "items": { "type": "array", "minItems": 2, "maxItems": 2, "prefixItems": [{ "type": "string" }, bytes] } }
    ] })
}

fn offset_param() -> Value {
    json!({
        "name": "offset", "in": "query", "required": false,
        "description": "First offset to read; absent = the start offset, -1 = the end (high watermark).",
        "schema": { "type": "integer", "minimum": -1 }
    })
}

fn append_body() -> Value {
    json!({
        "required": true,
        "content": {
            "application/json": { "schema": { "$ref": "#/components/schemas/AppendRequest" } },
            "application/octet-stream": {
                "schema": { "type": "string", "format": "binary" },
                "description": "One record whose value is the body; key from the Sluice-Key header."
            }
        }
    })
}

fn append_errors() -> Value {
    json!({
        "400": error_response("invalid_json, invalid_request"),
        "403": error_response("forbidden: a cross-site POST with a form or text/plain body (from a web page), or the token lacks write"),
        "404": error_response("topic_not_found, partition_not_found"),
        "413": error_response("record_too_large, request_too_large (the body passes --max-request-bytes, or holds more records than --max-request-bytes / 64)"),
        "429": error_response("throttled"),
        "503": error_response("unavailable")
    })
}

fn merge(mut a: Value, b: Value) -> Value {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}

fn build() -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Sluice HTTP API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Stream storage over an object store. Every error is {\"error\": {\"code\", \"message\", \"retryable\"}}; a failed request has no effect."
        },
        "paths": merge(merge(operations_paths(), topic_paths()), group_paths()),
        "components": { "schemas": schemas() }
    })
}

/// The consumer groups, as the console shows them.
fn group_paths() -> Value {
    let name = json!({ "name": "group", "in": "path", "required": true, "schema": { "type": "string" } });
    let assignment = json!({ "type": "array", "items": { "type": "object", "properties": {
        "topic": { "type": "string" }, "partitions": { "type": "array", "items": { "type": "integer" } } } } });
    json!({
        "/v1/groups": { "get": {
            "summary": "Consumer groups with a membership record or committed offsets",
            "responses": { "200": { "description": "groups", "content": { "application/json": { "schema": {
                "type": "object", "properties": { "groups": { "type": "array", "items": { "type": "object", "properties": {
                    "group": { "type": "string" },
                    "kind": { "type": "string", "enum": ["classic", "consumer", "offsets"] },
                    "state": { "type": "string" },
                    "members": { "type": "integer" }
                } } } } } } } } }
        } },
        "/v1/groups/{group}": { "get": {
            "summary": "A group's members and assignments (as last recorded), committed offsets and lag; offsets only of topics the caller may read",
            "parameters": [name],
            "responses": {
                "200": { "description": "the group", "content": { "application/json": { "schema": {
                    "type": "object", "properties": {
                        "group": { "type": "string" }, "kind": { "type": "string" }, "state": { "type": "string" },
                        "generation": { "type": "integer" },
                        "protocol": { "type": "string", "nullable": true },
                        "leader": { "type": "string", "nullable": true },
                        "members": { "type": "array", "items": { "type": "object", "properties": {
                            "member_id": { "type": "string" }, "instance_id": { "type": "string", "nullable": true },
                            "client_id": { "type": "string" }, "client_host": { "type": "string" },
                            "assignment": assignment } } },
                        "offsets": { "type": "array", "items": { "type": "object", "properties": {
                            "topic": { "type": "string" }, "partition": { "type": "integer" },
                            "committed": { "type": "integer" },
                            "end_offset": { "type": "integer", "nullable": true },
                            "lag": { "type": "integer", "nullable": true },
                            "error": { "type": "string" } } } }
                    } } } } },
                "404": error_response("group_not_found")
            }
        } }
    })
}

/// The probes, the admin routes and this document.
fn operations_paths() -> Value {
    json!({
        "/health": { "get": {
            "summary": "Liveness: 200 while the process runs",
            "responses": { "200": { "description": "alive" } }
        }},
        "/ready": { "get": {
            "summary": "Readiness",
            "responses": {
                "200": json_response("ready", "Ready"),
                "503": json_response("not ready; `reason` says why", "Ready")
            }
        }},
        "/metrics": { "get": {
            "summary": "Prometheus metrics",
            "responses": { "200": { "description": "Prometheus text format",
                "content": { "text/plain": { "schema": { "type": "string" } } } } }
        }},
        "/admin/nodes": { "get": {
            "summary": "Cluster nodes and the lease holder",
            "responses": { "200": json_response("nodes", "Nodes") }
        }},
        "/admin/nodes/{node}/metrics": { "get": {
            "summary": "A node's Prometheus metrics, fetched through this node (the console shows every node from one page)",
            "parameters": [{ "name": "node", "in": "path", "required": true, "schema": { "type": "string" } }],
            "responses": {
                "200": { "description": "Prometheus text format", "content": { "text/plain": { "schema": { "type": "string" } } } },
                "404": error_response("not_found: no such node"),
                "503": error_response("unavailable: the node is fenced or did not answer within 2 s")
            }
        }},
        "/admin/nodes/{node}/drain": { "post": {
            "summary": "Drain a node: placement avoids it and its streams are transferred away",
            "parameters": [{ "name": "node", "in": "path", "required": true, "schema": { "type": "string" } }],
            "responses": {
                "202": { "description": "Draining" },
                "404": error_response("not_found"),
                "503": error_response("unavailable")
            }
        }},
        "/admin/streams/{topic}/{partition}/transfer": { "post": {
            "summary": "Move a partition to another node",
            "parameters": [topic_param(), { "name": "partition", "in": "path", "required": true, "schema": { "type": "integer" } }],
            "requestBody": { "required": true, "content": { "application/json": { "schema": {
                "type": "object", "required": ["to"], "properties": { "to": { "type": "string" } } } } } },
            "responses": {
                "202": { "description": "Transfer started" },
                "400": error_response("invalid_json, invalid_request"),
                "404": error_response("topic_not_found, partition_not_found, not_found"),
                "503": error_response("unavailable")
            }
        }},
        "/openapi.json": { "get": {
            "summary": "This document",
            "responses": { "200": { "description": "OpenAPI 3 document" } }
        }}
    })
}

/// The topic and record routes.
fn topic_paths() -> Value {
    let key_header = json!({
        "name": "Sluice-Key", "in": "header", "required": false,
        "description": "Key of a raw (application/octet-stream) append.",
        "schema": { "type": "string" }
    });
    json!({
        "/v1/topics": {
            "get": {
                "summary": "List topics",
                "responses": { "200": json_response("topics", "TopicList") }
            },
            "post": {
                "summary": "Create a topic",
                "requestBody": { "required": true, "content": { "application/json": {
                    "schema": { "$ref": "#/components/schemas/CreateTopic" } } } },
                "responses": {
                    "201": json_response("created", "Topic"),
                    "400": error_response("invalid_json, invalid_request (also an unknown config key, named), invalid_topic_name, invalid_partition_count"),
                    "403": error_response("forbidden: a cross-site POST with a form or text/plain body (from a web page), or the token lacks admin"),
                    "409": error_response("topic_exists"),
                    "503": error_response("unavailable")
                }
            }
        },
        "/v1/topics/{topic}": {
            "parameters": [topic_param()],
            "get": {
                "summary": "Describe a topic and its partitions",
                "responses": {
                    "200": json_response("the topic", "TopicDescription"),
                    "404": error_response("topic_not_found")
                }
            },
            "delete": {
                "summary": "Delete a topic",
                "responses": {
                    "204": { "description": "deleted" },
                    "404": error_response("topic_not_found"),
                    "503": error_response("unavailable")
                }
            }
        },
        "/v1/topics/{topic}/config": {
            "parameters": [topic_param()],
            "patch": {
                "summary": "Set some of a topic's config keys (null: back to the default), all or nothing",
                "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/TopicConfig" } } } },
                "responses": {
                    "200": json_response("the topic with its new config", "TopicDescription"),
                    "400": error_response("invalid_request"),
                    "404": error_response("topic_not_found"),
                    "503": error_response("unavailable")
                }
            }
        },
        "/v1/topics/{topic}/records": {
            "parameters": [topic_param()],
            "post": {
                "summary": "Append records; each goes to its explicit partition, else by key (Kafka murmur2), else round-robin",
                "parameters": [encoding_param(), key_header.clone()],
                "requestBody": append_body(),
                "responses": merge(json!({ "200": json_response("durable; one range per partition, and offsets in request order for up to 1000 records", "AppendResponse") }), append_errors())
            }
        },
        "/v1/topics/{topic}/partitions/{partition}/records": {
            "parameters": [topic_param(), partition_param()],
            "post": {
                "summary": "Append records to one partition atomically (consecutive offsets)",
                "parameters": [encoding_param(), key_header],
                "requestBody": append_body(),
                "responses": merge(json!({ "200": json_response("durable", "PartitionAppendResponse") }), append_errors())
            },
            "get": {
                "summary": "Read records, optionally long-polling",
                "parameters": [
                    offset_param(),
                    { "name": "timestamp", "in": "query", "required": false,
                      "description": "Instead of offset: start at the first record whose timestamp (ms since the Unix epoch) is at or after this; past the last one, at the end.",
                      "schema": { "type": "integer" } },
                    { "name": "limit", "in": "query", "schema": { "type": "integer", "minimum": 1, "maximum": 10000, "default": 100 } },
                    { "name": "max_bytes", "in": "query", "description": "About this many bytes of keys, values and headers. A larger value is clamped to the server's --http-max-read-bytes (default 8 MiB), which also bounds the JSON answer; the first record is returned even if larger.",
                      "schema": { "type": "integer", "minimum": 1, "default": 1048576 } },
                    { "name": "wait_ms", "in": "query", "description": "Long poll: wait up to this long (capped by the server's --max-wait-ms) when no records are available.",
                      "schema": { "type": "integer", "minimum": 0, "default": 0 } },
                    encoding_param(), headers_param(), isolation_param(), consistency_param()
                ],
                "responses": {
                    "200": json_response("records (empty on long-poll timeout)", "ReadResponse"),
                    "400": error_response("invalid_offset, invalid_request"),
                    "404": error_response("topic_not_found, partition_not_found"),
                    "416": error_response("offset_out_of_range; the error carries start_offset"),
                    "503": error_response("unavailable")
                }
            }
        },
        "/v1/topics/{topic}/partitions/{partition}/subscribe": {
            "parameters": [topic_param(), partition_param()],
            "get": {
                "summary": "Follow a partition as server-sent events",
                "description": "Each record is an event with `id: <offset>`, `event: record` and `data: <Record JSON>`. A `:` comment every 15 s keeps the connection open. The stream ends with `event: error`, `data: {\"code\": \"unavailable\", \"retryable\": true}` on shutdown or a move; reconnect with Last-Event-ID.",
                "parameters": [
                    offset_param(),
                    encoding_param(), headers_param(), isolation_param(),
                    { "name": "Last-Event-ID", "in": "header", "required": false,
                      "description": "Resume after this offset (overrides `offset`).",
                      "schema": { "type": "integer", "minimum": 0 } }
                ],
                "responses": {
                    "200": { "description": "event stream", "content": { "text/event-stream": { "schema": { "type": "string" } } } },
                    "400": error_response("invalid_offset, invalid_request"),
                    "404": error_response("topic_not_found, partition_not_found"),
                    "416": error_response("offset_out_of_range"),
                    "503": error_response("unavailable")
                }
            }
        }
    })
}

/// The token routes and the bearer scheme (`--auth on`; see `auth.rs`).
fn with_auth(mut doc: Value) -> Value {
    let auth_errors = json!({
        "401": error_response("unauthenticated (with WWW-Authenticate: Bearer)"),
        "403": error_response("forbidden: the token lacks admin on \"*\"")
    });
    let scope = json!({
        "type": "object", "required": ["topics", "ops"],
        "properties": {
            "topics": { "type": "string", "description": "Topic glob: * any run of characters, ? one character" },
            "ops": { "type": "array", "items": { "type": "string", "enum": ["read", "write", "admin"] } }
        }
    });
    doc["paths"]["/v1/tokens"] = json!({
        "get": {
            "summary": "List tokens (never their secrets)",
            "responses": merge(json!({ "200": { "description": "tokens", "content": { "application/json": { "schema": {
                "type": "object", "properties": { "tokens": { "type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "id": { "type": "string" }, "name": { "type": "string" },
                        "scopes": { "type": "array", "items": scope.clone() },
                        "created_at": { "type": "integer", "description": "ms since the Unix epoch" },
                        "expires_at": { "type": "integer", "nullable": true, "description": "ms since the Unix epoch" },
                        "expired": { "type": "boolean" }
                    }
                } } } } } } } }), auth_errors.clone())
        },
        "post": {
            "summary": "Issue a token; its secret is in this answer only",
            "requestBody": { "required": true, "content": { "application/json": { "schema": {
                "type": "object", "required": ["name", "scopes"],
                "properties": {
                    "name": { "type": "string" },
                    "scopes": { "type": "array", "items": scope },
                    "expires_in_sec": { "type": "integer", "minimum": 1 }
                }
            } } } },
            "responses": merge(json!({
                "201": { "description": "issued", "content": { "application/json": { "schema": {
                    "type": "object", "properties": {
                        "id": { "type": "string" },
                        "token": { "type": "string", "description": "the secret, shown once" },
                        "expires_at": { "type": "integer", "nullable": true }
                    } } } } },
                "400": error_response("invalid_json, invalid_request"),
                "409": error_response("auth_off"),
                "503": error_response("unavailable")
            }), auth_errors.clone())
        }
    });
    doc["paths"]["/v1/tokens/{id}"] = json!({
        "delete": {
            "summary": "Revoke a token: every node refuses it once it applies the revocation",
            "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
            "responses": merge(json!({
                "204": { "description": "revoked" },
                "404": error_response("token_not_found"),
                "503": error_response("unavailable")
            }), auth_errors)
        }
    });
    doc["components"]["securitySchemes"] = json!({
        "bearer": { "type": "http", "scheme": "bearer",
            "description": "With --auth on every route but /health, /ready, /metrics and /openapi.json needs a token." }
    });
    doc["security"] = json!([{ "bearer": [] }]);
    // The routes open to anyone say so: an empty requirement overrides the
    // global one (the same table as the router's auth policy).
    for (method, path) in super::ROUTES {
        if super::auth::policy(method, path) == Some(super::auth::Policy::Open) {
            doc["paths"][*path][method.to_ascii_lowercase()]["security"] = json!([]);
        }
    }
    doc
}

fn schemas() -> Value {
    merge(merge(topic_schemas(), record_schemas()), node_schemas())
}

/// Errors, topics and their configuration.
fn topic_schemas() -> Value {
    json!({
        "Error": {
            "type": "object", "required": ["error"],
            "properties": { "error": {
                "type": "object", "required": ["code", "message", "retryable"],
                "properties": {
                    "code": { "type": "string", "enum": [
                        "invalid_request", "invalid_topic_name", "invalid_partition_count", "invalid_offset",
                        "invalid_json", "unauthenticated", "forbidden", "topic_not_found", "partition_not_found",
                        "token_not_found", "group_not_found", "not_found", "topic_exists", "auth_off", "record_too_large", "request_too_large",
                        "offset_out_of_range", "throttled", "unavailable", "internal"] },
                    "message": { "type": "string" },
                    "retryable": { "type": "boolean" },
                    "start_offset": { "type": "integer", "description": "only for offset_out_of_range" }
                }
            }}
        },
        "TopicConfig": {
            "type": "object",
            "properties": {
                "retention_ms": { "type": "integer", "nullable": true },
                "retention_bytes": { "type": "integer", "nullable": true },
                "cleanup_policy": { "type": "string", "enum": ["delete", "compact", "compact,delete"], "nullable": true,
                    "description": "omitted when not set (delete); a compacted topic refuses records without a key" },
                "min_compaction_lag_ms": { "type": "integer", "minimum": 0, "nullable": true },
                "max_compaction_lag_ms": { "type": "integer", "minimum": 1, "nullable": true },
                "min_cleanable_dirty_ratio": { "type": "number", "minimum": 0, "maximum": 1, "nullable": true },
                "delete_retention_ms": { "type": "integer", "minimum": 0, "nullable": true }
            }
        },
        "CreateTopic": {
            "type": "object", "required": ["name"],
            "properties": {
                "name": { "type": "string", "pattern": "^[a-zA-Z0-9._-]{1,249}$" },
                "partitions": { "type": "integer", "minimum": 1, "maximum": 10000, "default": 1 },
                "config": { "$ref": "#/components/schemas/TopicConfig" }
            }
        },
        "Topic": {
            "type": "object",
            "properties": {
                "name": { "type": "string" },
                "partitions": { "type": "integer" },
                "config": { "$ref": "#/components/schemas/TopicConfig" }
            }
        },
        "TopicList": {
            "type": "object",
            "properties": { "topics": { "type": "array", "items": { "type": "object", "properties": {
                "name": { "type": "string" }, "partitions": { "type": "integer" } } } } }
        },
        "TopicDescription": {
            "type": "object",
            "properties": {
                "name": { "type": "string" },
                "partitions": { "type": "integer" },
                "config": { "$ref": "#/components/schemas/TopicConfig" },
                "partition_info": { "type": "array", "items": { "type": "object", "properties": {
                    "partition": { "type": "integer" },
                    "owner": { "type": "string", "nullable": true },
                    "stream_epoch": { "type": "integer" },
                    "state": { "type": "string" },
                    "start_offset": { "type": "integer" },
                    "end_offset": { "type": "integer" },
                    "compacted_end": { "type": "integer" },
                    "bytes": { "type": "integer", "nullable": true, "description": "stored bytes: indexed data objects, plus the unflushed tail where this node owns the partition" }
                } } }
            }
        }
    })
}

/// Appends, records and reads.
fn record_schemas() -> Value {
    let bytes = json!({ "type": "string", "nullable": true,
        "description": "UTF-8 text, or base64 with ?encoding=base64" });
    json!({
        "AppendRecord": {
            "type": "object", "required": ["value"],
            "properties": {
                "key": bytes.clone(),
                "value": merge(bytes.clone(), json!({ "description": "null for a tombstone" })),
                "headers": headers_schema(&bytes),
                "timestamp": { "type": "integer", "minimum": 0, "description": "milliseconds since the Unix epoch; absent or null: when the request arrived" },
                "partition": { "type": "integer", "minimum": 0 }
            }
        },
        "AppendRequest": {
            "type": "object", "required": ["records"],
            "properties": { "records": { "type": "array", "minItems": 1,
                "items": { "$ref": "#/components/schemas/AppendRecord" } } }
        },
        "AppendResponse": {
            "type": "object", "required": ["ranges"],
            "properties": {
                "offsets": { "type": "array",
                    "description": "One entry per record, in request order; only when the request had at most 1000 records",
                    "items": { "type": "object", "properties": {
                        "partition": { "type": "integer" }, "offset": { "type": "integer" } } } },
                "ranges": { "type": "array",
                    "description": "One entry per partition written: its records of this request got offsets base_offset .. base_offset + count - 1, in request order",
                    "items": { "type": "object", "properties": {
                        "partition": { "type": "integer" }, "base_offset": { "type": "integer" }, "count": { "type": "integer" } } } }
            }
        },
        "PartitionAppendResponse": {
            "type": "object",
            "properties": {
                "partition": { "type": "integer" },
                "base_offset": { "type": "integer" },
                "count": { "type": "integer" }
            }
        },
        "Record": {
            "type": "object",
            "properties": {
                "offset": { "type": "integer" },
                "timestamp": { "type": "integer", "description": "milliseconds since the Unix epoch" },
                "key": bytes.clone(),
                "value": bytes.clone(),
                "headers": headers_schema(&bytes),
                "key_encoding": { "type": "string", "enum": ["base64"], "description": "present when the key is not UTF-8 and was sent in base64" },
                "value_encoding": { "type": "string", "enum": ["base64"], "description": "present when the value is not UTF-8 and was sent in base64" },
                "headers_encoding": { "type": "string", "enum": ["base64"], "description": "present when some header value is not UTF-8; all header values are then base64" }
            }
        },
        "ReadResponse": {
            "type": "object",
            "properties": {
                "records": { "type": "array", "items": { "$ref": "#/components/schemas/Record" } },
                "next_offset": { "type": "integer" },
                "high_watermark": { "type": "integer" },
                "start_offset": { "type": "integer" }
            }
        }
    })
}

/// Readiness and the cluster's nodes.
fn node_schemas() -> Value {
    json!({
        "Ready": {
            "type": "object",
            "properties": {
                "ready": { "type": "boolean" },
                "node_id": { "type": "string" },
                "epoch": { "type": "integer" },
                "fenced": { "type": "boolean" },
                "lease_holder": { "type": "boolean" },
                "reason": { "type": "string", "enum": ["starting", "draining", "fenced", "shutting_down"] }
            }
        },
        "Nodes": {
            "type": "object",
            "properties": {
                "lease_holder": { "type": "string", "nullable": true },
                "nodes": { "type": "array", "items": { "type": "object", "properties": {
                    "node_id": { "type": "string" }, "epoch": { "type": "integer" },
                    "heartbeats": { "type": "integer" }, "fenced": { "type": "boolean" },
                    "live": { "type": "boolean" }, "draining": { "type": "boolean" },
                    "http_addr": { "type": "string" }, "kafka_addr": { "type": "string" },
                    "open_streams": { "type": "integer" }
                } } }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::ROUTES;

    const METHODS: [&str; 5] = ["get", "post", "put", "delete", "patch"];

    #[test]
    fn every_route_is_documented_and_every_documented_route_exists() {
        let doc = document();
        let paths = doc["paths"].as_object().unwrap();
        for (method, path) in ROUTES {
            let op = &paths
                .get(*path)
                .unwrap_or_else(|| panic!("{path} missing from openapi.json"))[method.to_ascii_lowercase()];
            assert!(op.is_object(), "{method} {path} missing from openapi.json");
            assert!(op["responses"].is_object(), "{method} {path} has no responses");
        }
        for (path, item) in paths {
            for m in METHODS {
                if item.get(m).is_some() {
                    assert!(
                        ROUTES.iter().any(|(rm, rp)| rm.eq_ignore_ascii_case(m) && rp == path),
                        "openapi.json documents {m} {path}, which is not a route"
                    );
                }
            }
        }
    }

    #[test]
    fn only_the_open_routes_waive_the_bearer_requirement() {
        let doc = document();
        assert_eq!(doc["security"], json!([{ "bearer": [] }]));
        for (method, path) in ROUTES {
            let op = &doc["paths"][*path][method.to_ascii_lowercase()];
            let open = matches!(*path, "/health" | "/ready" | "/metrics" | "/openapi.json");
            assert_eq!(op.get("security") == Some(&json!([])), open, "{method} {path}");
        }
    }

    #[test]
    fn every_reference_resolves() {
        fn walk(v: &Value, schemas: &serde_json::Map<String, Value>) {
            match v {
                Value::Object(o) => {
                    if let Some(Value::String(r)) = o.get("$ref") {
                        let name = r.strip_prefix("#/components/schemas/").expect("local ref");
                        assert!(schemas.contains_key(name), "dangling $ref {r}");
                    }
                    o.values().for_each(|v| walk(v, schemas));
                }
                Value::Array(a) => a.iter().for_each(|v| walk(v, schemas)),
                _ => {}
            }
        }
        let doc = document();
        walk(doc, doc["components"]["schemas"].as_object().unwrap());
    }
}
