//! `/v1/topics`: create, list, describe, delete.

use super::auth::Caller;
use super::error::{HttpError, HttpResult};
use super::Shared;
use crate::api::{ApiError, ErrorCode};
use crate::auth::Op;
use crate::meta::view::validate_topic_name;
use crate::meta::{ConfigUpdate, TopicConfig};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use serde_json::json;

pub const MAX_PARTITIONS: i64 = 10_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateTopic {
    name: String,
    #[serde(default)]
    partitions: Option<i64>,
    /// Read as an object first, so a key `TopicConfig` does not know is
    /// refused by name (the stored form ignores unknown keys, for entries
    /// written by newer nodes).
    #[serde(default)]
    config: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The keys of `config` a client may set.
const CONFIG_KEYS: [&str; 7] = [
    "retention_ms",
    "retention_bytes",
    "cleanup_policy",
    "min_compaction_lag_ms",
    "max_compaction_lag_ms",
    "min_cleanable_dirty_ratio",
    "delete_retention_ms",
];

/// Refuse a key a client may not set, by name.
fn check_config_keys(config: &serde_json::Map<String, serde_json::Value>) -> HttpResult<()> {
    if config.contains_key("durable") {
        return Err(HttpError::new(
            ErrorCode::InvalidRequest,
            "config.durable is set by the Durable Streams protocol (PUT /v1/stream/...), not here",
        ));
    }
    if let Some(k) = config.keys().find(|k| !CONFIG_KEYS.contains(&k.as_str())) {
        return Err(HttpError::new(
            ErrorCode::InvalidRequest,
            format!("config: unknown key {k:?}; expected {}", CONFIG_KEYS.join(", ")),
        ));
    }
    Ok(())
}

fn topic_config(config: Option<serde_json::Map<String, serde_json::Value>>) -> HttpResult<Option<TopicConfig>> {
    let Some(config) = config else {
        return Ok(None);
    };
    check_config_keys(&config)?;
    let config: TopicConfig = serde_json::from_value(serde_json::Value::Object(config)).map_err(json_error)?;
    config.validate().map_err(ApiError::invalid)?;
    Ok(Some(config))
}

/// The updates an alteration's body asks for, one per key it names
/// (`null`: back to the default), in the order named.
fn config_updates(config: serde_json::Map<String, serde_json::Value>) -> HttpResult<Vec<ConfigUpdate>> {
    check_config_keys(&config)?;
    let mut updates = Vec::with_capacity(config.len());
    for (key, value) in config {
        let one: TopicConfig = serde_json::from_value(json!({ key.as_str(): value })).map_err(json_error)?;
        updates.push(match key.as_str() {
            "retention_ms" => ConfigUpdate::RetentionMs(one.retention_ms),
            "retention_bytes" => ConfigUpdate::RetentionBytes(one.retention_bytes),
            "cleanup_policy" => ConfigUpdate::CleanupPolicy(one.cleanup_policy),
            "min_compaction_lag_ms" => ConfigUpdate::MinCompactionLagMs(one.min_compaction_lag_ms),
            "max_compaction_lag_ms" => ConfigUpdate::MaxCompactionLagMs(one.max_compaction_lag_ms),
            "min_cleanable_dirty_ratio" => ConfigUpdate::MinCleanableDirtyRatio(one.min_cleanable_dirty_ratio),
            _ => ConfigUpdate::DeleteRetentionMs(one.delete_retention_ms),
        });
    }
    for u in &updates {
        u.validate().map_err(|m| ApiError::invalid(format!("config.{m}")))?;
    }
    Ok(updates)
}

/// `PATCH /v1/topics/{topic}/config`: set the keys the body names (`null`
/// puts one back to its default), leave the others; all or nothing.
/// Answers the topic as `GET /v1/topics/{topic}` does.
pub async fn alter_config(
    State(state): State<Shared>,
    Path(topic): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> HttpResult<impl IntoResponse> {
    let body = body.map_err(body_error)?;
    let config: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&body).map_err(json_error)?;
    let updates = config_updates(config)?;
    state.engine.topics.alter_topic_config(&topic, updates).await?;
    let _ = state.engine.cluster.sync_metadata().await;
    Ok(Json(state.engine.topics.describe_topic(&topic)?))
}

/// Maps a body that could not be read (too large, broken connection).
pub(crate) fn body_error(r: BytesRejection) -> HttpError {
    if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
        HttpError::new(
            ErrorCode::RequestTooLarge,
            "request body exceeds the maximum request size",
        )
    } else {
        HttpError::new(
            ErrorCode::InvalidRequest,
            format!("could not read the request body: {}", r.body_text()),
        )
    }
}

/// Maps a serde_json error: bad syntax is `invalid_json`, a well-formed body of
/// the wrong shape is `invalid_request`.
pub(crate) fn json_error(e: serde_json::Error) -> HttpError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => {
            HttpError::new(ErrorCode::InvalidJson, format!("body is not valid JSON: {e}"))
        }
        Category::Data => HttpError::new(ErrorCode::InvalidRequest, format!("invalid request body: {e}")),
    }
}

pub async fn create(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    body: Result<Bytes, BytesRejection>,
) -> HttpResult<impl IntoResponse> {
    let body = body.map_err(body_error)?;
    let req: CreateTopic = serde_json::from_slice(&body).map_err(json_error)?;
    validate_topic_name(&req.name).map_err(|m| HttpError::new(ErrorCode::InvalidTopicName, m))?;
    caller.require(Op::Admin, &req.name)?;
    let config = topic_config(req.config)?;
    let partitions = req.partitions.unwrap_or(1);
    if !(1..=MAX_PARTITIONS).contains(&partitions) {
        return Err(HttpError::new(
            ErrorCode::InvalidPartitionCount,
            format!("partitions must be 1-{MAX_PARTITIONS}, got {partitions}"),
        ));
    }
    let config = config.unwrap_or_default();
    for u in [
        ConfigUpdate::RetentionMs(config.retention_ms),
        ConfigUpdate::RetentionBytes(config.retention_bytes),
    ] {
        u.validate().map_err(|m| ApiError::invalid(format!("config.{m}")))?;
    }
    let created = state
        .engine
        .topics
        .create_topic(&req.name, partitions as u32, config.clone())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "name": created.name, "partitions": created.partitions, "config": config })),
    ))
}

/// Lists the topics the caller has any scope on (all of them with auth off).
pub async fn list(State(state): State<Shared>, Extension(caller): Extension<Caller>) -> impl IntoResponse {
    let mut topics = state.engine.topics.list_topics();
    topics.retain(|t| caller.sees(&t.name));
    Json(json!({ "topics": topics }))
}

/// The topic as this node's view has it, each partition with the bytes it
/// holds (`bytes`: indexed data objects plus the unflushed tail where this
/// node owns the partition).
pub async fn describe(State(state): State<Shared>, Path(topic): Path<String>) -> HttpResult<impl IntoResponse> {
    let d = state.engine.topics.describe_topic(&topic)?;
    let mut v = serde_json::to_value(&d).map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    let sizes = match state.engine.topics.partition_bytes(&topic) {
        Ok(sizes) => sizes,
        Err(e) => {
            tracing::warn!(%topic, error = %e.message, "partition sizes unknown");
            v["bytes_error"] = json!(e.message);
            Vec::new()
        }
    };
    if let Some(parts) = v["partition_info"].as_array_mut() {
        for (i, p) in parts.iter_mut().enumerate() {
            p["bytes"] = json!(sizes.get(i).copied());
        }
    }
    Ok(Json(v))
}

pub async fn delete(State(state): State<Shared>, Path(topic): Path<String>) -> HttpResult<StatusCode> {
    state.engine.topics.delete_topic(&topic).await?;
    Ok(StatusCode::NO_CONTENT)
}
