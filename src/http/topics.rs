//! `/v1/topics`: create, list, describe, delete.

use super::auth::Caller;
use super::error::{HttpError, HttpResult};
use super::Shared;
use crate::api::{ApiError, ErrorCode};
use crate::auth::Op;
use crate::meta::view::validate_topic_name;
use crate::meta::TopicConfig;
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
const CONFIG_KEYS: [&str; 3] = ["retention_ms", "retention_bytes", "cleanup_policy"];

fn topic_config(config: Option<serde_json::Map<String, serde_json::Value>>) -> HttpResult<Option<TopicConfig>> {
    let Some(config) = config else {
        return Ok(None);
    };
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
    serde_json::from_value(serde_json::Value::Object(config))
        .map(Some)
        .map_err(json_error)
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
    for (field, v) in [
        ("retention_ms", config.retention_ms),
        ("retention_bytes", config.retention_bytes),
    ] {
        if let Some(v) = v {
            if v == 0 || v < -1 {
                return Err(
                    ApiError::invalid(format!("config.{field} must be positive or -1 (unlimited), got {v}")).into(),
                );
            }
        }
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

pub async fn describe(State(state): State<Shared>, Path(topic): Path<String>) -> HttpResult<impl IntoResponse> {
    Ok(Json(state.engine.topics.describe_topic(&topic)?))
}

pub async fn delete(State(state): State<Shared>, Path(topic): Path<String>) -> HttpResult<StatusCode> {
    state.engine.topics.delete_topic(&topic).await?;
    Ok(StatusCode::NO_CONTENT)
}
