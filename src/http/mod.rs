//! The HTTP front door: an axum [`Router`] over a node's [`Services`].
//!
//! The contract is `design/http-api.md` (user guide: `docs/http-api.md`).
//!
//! # Layout
//!
//! - [`error`]: [`ApiError`](crate::api::ApiError) → status + JSON body.
//! - `guard`: before routing: an oversize `Content-Length`, a simple
//!   cross-site `POST`, a path that is not UTF-8.
//! - `topics`: create, list, describe, delete, alter a topic's config.
//! - `records`: appends (JSON and raw) and reads with long poll; `records_in`
//!   parses a JSON append body, `records_out` writes read answers; `encoding`:
//!   record bytes in JSON as UTF-8 or base64.
//! - `sse`: `subscribe`, records as server-sent events.
//! - `ops`: `/health`, `/ready`, `/metrics`, `/admin/nodes` (and each
//!   node's metrics through this one).
//! - [`auth`]: who may call each route (`--auth on`), checked before the handler.
//! - `tokens`: `/v1/tokens`, issue, list, revoke.
//! - `groups`: `/v1/groups`, consumer groups with members, assignments and
//!   lag (decoded by [`crate::kafka::groups::view`]).
//! - `ui`: `GET /ui`, the console: a page and its assets embedded in the
//!   binary, calling the routes above from the browser.
//! - [`openapi`]: `GET /openapi.json`, checked against [`ROUTES`] by a test.
//! - [`durable`]: the Durable Streams protocol under `/v1/stream/` (its own
//!   routes, outside [`ROUTES`] and the OpenAPI document).
//! - `internal`: the owner's end of the node-to-node call (`/internal/v1/`,
//!   peers only, outside [`ROUTES`] and the OpenAPI document; see
//!   [`crate::route`]).
//!
//! Every route is listed once in [`ROUTES`]; [`router`] builds the router from
//! that list, so the list, the router and the OpenAPI document cannot drift.

pub mod auth;
pub mod durable;
mod encoding;
pub mod error;
mod groups;
mod guard;
mod internal;
pub mod openapi;
mod ops;
mod records;
mod records_in;
mod records_out;
mod sse;
mod tokens;
mod topics;
mod ui;

#[cfg(test)]
pub(crate) mod tests;

use crate::api::{ApiError, ErrorCode, Limits, Services};
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, patch, post, MethodRouter};
use axum::Router;
use error::HttpError;
pub use records_in::RECORD_OVERHEAD;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// What every handler shares.
pub(crate) struct AppState {
    pub engine: Services,
    pub limits: Limits,
    /// Next partition for records with neither a partition nor a key.
    pub round_robin: AtomicU64,
}

pub(crate) type Shared = Arc<AppState>;

/// Every route: (method, path in axum / OpenAPI syntax).
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/health"),
    ("GET", "/ready"),
    ("GET", "/metrics"),
    ("GET", "/admin/nodes"),
    ("GET", "/admin/nodes/{node}/metrics"),
    ("POST", "/admin/nodes/{node}/drain"),
    ("POST", "/admin/streams/{topic}/{partition}/transfer"),
    ("GET", "/openapi.json"),
    ("GET", "/v1/topics"),
    ("POST", "/v1/topics"),
    ("GET", "/v1/topics/{topic}"),
    ("DELETE", "/v1/topics/{topic}"),
    ("PATCH", "/v1/topics/{topic}/config"),
    ("POST", "/v1/topics/{topic}/records"),
    ("POST", "/v1/topics/{topic}/partitions/{partition}/records"),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/records"),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/subscribe"),
    ("GET", "/v1/tokens"),
    ("POST", "/v1/tokens"),
    ("DELETE", "/v1/tokens/{id}"),
    ("GET", "/v1/groups"),
    ("GET", "/v1/groups/{group}"),
];

fn handler(method: &str, path: &str) -> MethodRouter<Shared> {
    match (method, path) {
        ("GET", "/health") => get(ops::health),
        ("GET", "/ready") => get(ops::ready),
        ("GET", "/metrics") => get(ops::metrics),
        ("GET", "/admin/nodes") => get(ops::nodes),
        ("GET", "/admin/nodes/{node}/metrics") => get(ops::node_metrics),
        ("POST", "/admin/nodes/{node}/drain") => post(ops::drain),
        ("POST", "/admin/streams/{topic}/{partition}/transfer") => post(ops::transfer),
        ("GET", "/openapi.json") => get(openapi::serve),
        ("GET", "/v1/topics") => get(topics::list),
        ("POST", "/v1/topics") => post(topics::create),
        ("GET", "/v1/topics/{topic}") => get(topics::describe),
        ("DELETE", "/v1/topics/{topic}") => delete(topics::delete),
        ("PATCH", "/v1/topics/{topic}/config") => patch(topics::alter_config),
        ("POST", "/v1/topics/{topic}/records") => post(records::append_to_topic),
        ("POST", "/v1/topics/{topic}/partitions/{partition}/records") => post(records::append_to_partition),
        ("GET", "/v1/topics/{topic}/partitions/{partition}/records") => get(records::read),
        ("GET", "/v1/topics/{topic}/partitions/{partition}/subscribe") => get(sse::subscribe),
        ("GET", "/v1/tokens") => get(tokens::list),
        ("POST", "/v1/tokens") => post(tokens::create),
        ("DELETE", "/v1/tokens/{id}") => delete(tokens::revoke),
        ("GET", "/v1/groups") => get(groups::list),
        ("GET", "/v1/groups/{group}") => get(groups::describe_one),
        _ => unreachable!("route {method} {path} is in ROUTES but has no handler"),
    }
}

/// The HTTP API over `engine` (a node's [`Services`], or anything that
/// converts into them, like `Arc<Node>`). Bodies above
/// `limits.max_request_bytes` are refused while being read (413
/// `request_too_large`), never buffered whole.
pub fn router(engine: impl Into<Services>) -> Router {
    let engine: Services = engine.into();
    let limits = engine.limits;
    let me = engine.cluster.ready();
    let span = crate::telemetry::node_span(&me.node_id, me.epoch);
    let durable = durable::router(engine.clone());
    let forwarded_engine = engine.cluster.clone();
    let state = Arc::new(AppState {
        engine,
        limits,
        round_robin: AtomicU64::new(0),
    });
    let mut router = Router::new();
    for (method, path) in ROUTES {
        // A route without an auth policy cannot be served (a test checks them all).
        let policy = auth::policy(method, path).unwrap_or_else(|| panic!("{method} {path} has no auth policy"));
        let guard = axum::middleware::from_fn_with_state((state.clone(), policy), auth::authorize);
        router = router.route(path, handler(method, path).route_layer(guard));
    }
    let internal = internal::router(state.clone());
    router
        .with_state(state)
        .merge(durable)
        .merge(internal)
        .merge(ui::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limits.max_request_bytes))
        .layer(axum::middleware::from_fn_with_state(
            limits.max_request_bytes,
            guard::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(forwarded_engine, mark_forwarded))
        .layer(axum::middleware::from_fn(observe))
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                use tracing::Instrument as _;
                let span = tracing::info_span!(parent: &span, "http", method = %req.method(), path = %req.uri().path());
                next.run(req).instrument(span)
            },
        ))
}

/// Requests another node forwarded are served with `api::FORWARDED` set,
/// so they are never forwarded again, once this node's metadata view has
/// caught up with the forwarder's (so a topic created through the forwarder
/// a moment ago is known here). If it cannot catch up in time (the log is
/// unreachable, say) the request is served from the view it has: the owner
/// of a stream can still append and read, and what the view does not know
/// is answered as for any request (503 for a topic it could not confirm).
///
/// Only a request with the cluster's peer credential ([`crate::api::PEER_HEADER`])
/// is a forwarded one: from anyone else the mark is ignored (counted in
/// `sluice_forward_marks_ignored_total`), so a client can neither make a
/// node wait for the log nor read its store, nor skip routing.
async fn mark_forwarded(
    axum::extract::State(cluster): axum::extract::State<Arc<dyn crate::api::Cluster>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let mark = req.headers().get(crate::api::FORWARDED_HEADER);
    let peer = req
        .headers()
        .get(crate::api::PEER_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| cluster.is_peer(v));
    if mark.is_some() && !peer {
        crate::telemetry::count("sluice_forward_marks_ignored_total", &[]);
    }
    let forwarded = mark.is_some() && peer;
    let index = mark
        .filter(|_| forwarded)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(i) = index {
        if !cluster.catch_up_to(i).await {
            tracing::debug!(index = i, "forwarded request served from a view behind the forwarder's");
        }
    }
    crate::api::FORWARDED.scope(forwarded, next.run(req)).await
}

/// Counts every request by method and status and times it (until the
/// response head; an SSE stream's lifetime is not included).
async fn observe(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let method = req.method().as_str().to_string();
    let started = std::time::Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    crate::telemetry::count(
        "sluice_http_requests_total",
        &[("method", &method), ("status", &status)],
    );
    crate::telemetry::observe("sluice_http_request_seconds", &[("method", &method)], started.elapsed());
    resp
}

async fn not_found(uri: axum::http::Uri) -> HttpError {
    HttpError::new(ErrorCode::NotFound, format!("no route for {}", uri.path()))
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut resp = HttpError(ApiError::invalid(format!(
        "method {method} is not allowed on {}",
        uri.path()
    )))
    .into_response();
    *resp.status_mut() = axum::http::StatusCode::METHOD_NOT_ALLOWED;
    resp
}

/// Parses the `{partition}` path segment and checks it against the topic.
pub(crate) async fn checked_partition(state: &AppState, topic: &str, partition: &str) -> Result<u32, HttpError> {
    let count = state.engine.topics.partitions_current(topic).await?;
    let p: u32 = partition.parse().map_err(|_| {
        HttpError::new(
            ErrorCode::PartitionNotFound,
            format!("partition {partition:?} is not a partition number"),
        )
    })?;
    if p >= count {
        return Err(HttpError::new(
            ErrorCode::PartitionNotFound,
            format!("topic {topic} has partitions 0..{count}, not {p}"),
        ));
    }
    Ok(p)
}
