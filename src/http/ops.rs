//! Operations endpoints: `/health`, `/ready`, `/metrics`, `/admin/nodes`.

use super::Shared;
use axum::extract::State;
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
    let status = state.engine.ready();
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
    Json(state.engine.nodes())
}
