//! Operations endpoints: `/health`, `/ready`, `/metrics`, `/admin/nodes`.

use super::error::HttpResult;
use super::Shared;
use crate::api::{ApiError, ErrorCode};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;

/// 200 while the process runs.
pub async fn health() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// 200 with the node's status when ready, 503 (with `reason`) otherwise.
pub async fn ready(State(state): State<Shared>) -> impl IntoResponse {
    let status = state.engine.cluster.ready();
    let code = if status.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(status))
}

pub async fn metrics() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        crate::telemetry::render(),
    )
}

pub async fn nodes(State(state): State<Shared>) -> impl IntoResponse {
    Json(state.engine.cluster.nodes())
}

/// `GET /admin/nodes/{node}/metrics`: any node's Prometheus text through
/// this one, so a page served here can show every node without calling
/// another origin.
pub async fn node_metrics(State(state): State<Shared>, Path(node): Path<String>) -> HttpResult<impl IntoResponse> {
    let text = state.engine.cluster.node_metrics(&node).await?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        text,
    ))
}

/// `POST /admin/nodes/{node}/drain` → 202: placement avoids the node and its
/// streams are transferred away.
pub async fn drain(State(state): State<Shared>, Path(node): Path<String>) -> HttpResult<StatusCode> {
    state.engine.cluster.drain(&node).await?;
    Ok(StatusCode::ACCEPTED)
}

/// `POST /admin/streams/{topic}/{partition}/transfer` `{"to": "n2"}` → 202.
pub async fn transfer(
    State(state): State<Shared>,
    Path((topic, partition)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> HttpResult<StatusCode> {
    let value: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::new(ErrorCode::InvalidJson, format!("body is not JSON: {e}")))?;
    let to = value["to"]
        .as_str()
        .ok_or_else(|| ApiError::invalid("body must be {\"to\": \"<node id>\"}"))?;
    let partition: u32 = partition.parse().map_err(|_| {
        ApiError::new(
            ErrorCode::PartitionNotFound,
            format!("partition {partition:?} is not a number"),
        )
    })?;
    state.engine.cluster.transfer(&topic, partition, to).await?;
    Ok(StatusCode::ACCEPTED)
}
