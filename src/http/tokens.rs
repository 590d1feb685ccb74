//! `/v1/tokens`: issue, list and revoke tokens (cluster admin only; see
//! `auth.rs`). A token's secret appears once, in the answer that issues it.

use super::error::HttpResult;
use super::topics::{body_error, json_error};
use super::Shared;
use crate::auth::NewToken;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;

/// `POST /v1/tokens` `{"name", "scopes": [{"topics", "ops"}], "expires_in_sec"}`
/// → `201 {"id", "token", "expires_at"}`.
pub async fn create(State(state): State<Shared>, body: Result<Bytes, BytesRejection>) -> HttpResult<impl IntoResponse> {
    let body = body.map_err(body_error)?;
    let req: NewToken = serde_json::from_slice(&body).map_err(json_error)?;
    let issued = state.engine.tokens.create_token(req).await?;
    Ok((StatusCode::CREATED, Json(issued)))
}

/// `GET /v1/tokens` → `200 {"tokens": [{"id", "name", "scopes", "created_at", "expires_at", "expired"}]}`.
pub async fn list(State(state): State<Shared>) -> HttpResult<impl IntoResponse> {
    Ok(Json(json!({ "tokens": state.engine.tokens.list_tokens()? })))
}

/// `DELETE /v1/tokens/{id}` → 204, or 404 `token_not_found`.
pub async fn revoke(State(state): State<Shared>, Path(id): Path<String>) -> HttpResult<StatusCode> {
    state.engine.tokens.revoke_token(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}
