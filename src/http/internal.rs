//! The owner's end of the internal node-to-node call (`route::wire`):
//! `/internal/v1/...`, outside [`ROUTES`](super::ROUTES) and the OpenAPI
//! document. Served only to a request that carries this cluster's peer
//! credential and the forwarded mark (so it is never forwarded again);
//! the caller's own token, passed on by the forwarding node, is
//! authorized as for the public routes.

use super::auth::{authorize, Policy};
use super::error::{HttpError, HttpResult};
use super::records::{params, Params};
use super::{checked_partition, Shared};
use crate::api::{ErrorCode, ReadFrom};
use crate::auth::Op;
use crate::route::wire;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::time::Duration;

/// The internal routes, each behind the peer check and its auth policy.
pub(crate) fn router(state: Shared) -> Router {
    let guarded = |policy: Policy| axum::middleware::from_fn_with_state((state.clone(), policy), authorize);
    Router::new()
        .route(
            wire::APPEND_ROUTE,
            post(append).route_layer(guarded(Policy::Topic(Op::Write))),
        )
        .route(wire::MARKER_ROUTE, post(marker).route_layer(guarded(Policy::Open)))
        .route(
            wire::READ_ROUTE,
            get(read).route_layer(guarded(Policy::Topic(Op::Read))),
        )
        .layer(axum::middleware::from_fn_with_state(state.clone(), peers_only))
        .with_state(state)
}

/// Refuses a request that is not a forwarded one from a peer: 403, or the
/// retryable 503 while this node has not loaded the peer key it would
/// check the credential against (it restarted with its store unreachable).
/// A credential that verifies now was checked, when the request was marked,
/// before the key had loaded: also 503, so the peer simply sends it again.
async fn peers_only(State(state): State<Shared>, req: Request, next: Next) -> Response {
    if !crate::api::is_forwarded() {
        let presented = req
            .headers()
            .get(crate::api::PEER_HEADER)
            .map(|v| v.to_str().unwrap_or_default());
        let cluster = &state.engine.cluster;
        if presented.is_some_and(|p| !cluster.peer_key_loaded() || cluster.is_peer(p)) {
            return HttpError::new(
                ErrorCode::Unavailable,
                "this node has not loaded the cluster's peer key yet (its object store has not answered)",
            )
            .into_response();
        }
        crate::telemetry::count("sluice_internal_refused_total", &[]);
        return HttpError::new(
            ErrorCode::Forbidden,
            format!(
                "{} is for node-to-node calls and needs the cluster's peer credential",
                req.uri().path()
            ),
        )
        .into_response();
    }
    next.run(req).await
}

/// One RecordBatch v2, appended as the entry node encoded it; with a
/// Durable Streams write, checked by the stream's sequencer in the same step.
async fn append(
    State(state): State<Shared>,
    Path((topic, partition)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> HttpResult<Response> {
    let p = checked_partition(&state, &topic, &partition).await?;
    if let Some(write) = headers.get(wire::DS_WRITE) {
        let write = wire::decode_ds_write(write.to_str().unwrap_or(""))?;
        let records = wire::body_records(&body)?;
        let outcome = state.engine.records.append_durable(&topic, p, write, records).await?;
        return Ok(axum::Json(serde_json::json!({ "partition": p, "durable": outcome })).into_response());
    }
    let a = state.engine.records.append_batch(&topic, p, body).await?;
    Ok((
        [
            (wire::BASE_OFFSET, a.base.get().to_string()),
            (wire::COUNT, a.count.to_string()),
        ],
        (),
    )
        .into_response())
}

/// A transaction marker, appended where the stream is open.
async fn marker(
    State(state): State<Shared>,
    Path((topic, partition)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> HttpResult<Response> {
    let p = checked_partition(&state, &topic, &partition).await?;
    let of = match headers.get(wire::MARKER_OF) {
        Some(v) => Some(wire::decode_marker_of(v.to_str().unwrap_or(""))?),
        None => None,
    };
    let a = state.engine.records.append_marker(&topic, p, body, of).await?;
    Ok((
        [
            (wire::BASE_OFFSET, a.base.get().to_string()),
            (wire::COUNT, a.count.to_string()),
        ],
        (),
    )
        .into_response())
}

fn number(params: &Params, name: &str) -> HttpResult<u64> {
    let v = params.get(name).map_or("0", String::as_str);
    v.parse()
        .map_err(|_| HttpError::new(ErrorCode::InvalidRequest, format!("{name}={v:?} is not a number")))
}

/// Stored batches from `from`, waiting up to `wait_ms` at the end.
async fn read(
    State(state): State<Shared>,
    Path((topic, partition)): Path<(String, String)>,
    query: Result<Query<Params>, QueryRejection>,
) -> HttpResult<Response> {
    let params = params(query)?;
    let p = checked_partition(&state, &topic, &partition).await?;
    let from = wire::parse_from(params.get("from").map_or("start", String::as_str))?;
    let max_bytes = usize::try_from(number(&params, "max_bytes")?)
        .unwrap_or(usize::MAX)
        .clamp(1, state.limits.max_read_bytes.max(1));
    let wait = Duration::from_millis(number(&params, "wait_ms")?).min(state.limits.max_wait);
    // A committed read (`committed=1`): up to the last stable offset, what
    // a read_committed reader does not see left out.
    let committed = params.get("committed").is_some_and(|v| v == "1");
    let from = match from {
        ReadFrom::At(o) => o,
        start_or_end => {
            let d = state.engine.topics.describe_topic(&topic)?;
            let info =
                d.partition_info.iter().find(|i| i.partition == p).ok_or_else(|| {
                    HttpError::new(ErrorCode::PartitionNotFound, format!("{topic} has no partition {p}"))
                })?;
            if start_or_end == ReadFrom::Start {
                info.start_offset
            } else if committed {
                // The end of a committed reader is the last stable offset.
                let records = state.engine.records.as_ref();
                crate::api::last_stable(records, &topic, p, info.end_offset).await?
            } else {
                info.end_offset
            }
        }
    };
    let r = state
        .engine
        .records
        .read_batches(&topic, p, from, max_bytes, wait, committed)
        .await?;
    let scanned_end = r.batches.last().map_or(from, |b| crate::batch::end_offset(b));
    let batches = match committed {
        true => crate::meta::txn_index::committed_data(r.batches, &r.aborted),
        false => r.batches,
    };
    let body = Body::from_stream(futures::stream::iter(
        batches.into_iter().map(Ok::<_, std::convert::Infallible>),
    ));
    Ok((
        [
            (axum::http::header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (wire::FROM.parse().expect("a header name"), from.get().to_string()),
            (
                wire::HIGH_WATERMARK.parse().expect("a header name"),
                r.high_watermark.get().to_string(),
            ),
            (
                wire::START_OFFSET.parse().expect("a header name"),
                r.start_offset.get().to_string(),
            ),
            (
                wire::SCANNED_END.parse().expect("a header name"),
                scanned_end.get().to_string(),
            ),
        ],
        body,
    )
        .into_response())
}
