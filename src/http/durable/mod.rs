//! The Durable Streams protocol under `/v1/stream/{path}`.
//!
//! Every stream is a single-partition topic (see [`name`] for the mapping);
//! its protocol state (content type, lifetime, closure) is a
//! [`DurableMeta`](crate::meta::durable::DurableMeta) in the topic's
//! configuration, so it lives in the metadata log like any topic setting.
//! Writer positions (idempotent producers, `Stream-Seq`) live with the
//! stream's records instead: see [`crate::meta::writers`].
//! Records are appended and read through the
//! [`Records`](crate::api::Records) capability like any other, so
//! durability, routing from any node and failover are those of every
//! stream. User guide: `docs/durable-streams.md`.
//!
//! # Layout
//!
//! - [`name`]: stream paths ↔ topic names.
//! - `access`: the reader of a stream, checked before every batch it is sent.
//! - `auth`: the scope each method needs, and read access to a fork's source.
//! - [`offset`]: offset tokens, `-1` / `now`, long-poll cursors.
//! - [`headers`]: request headers, parsed and checked.
//! - [`json`]: JSON mode (arrays flattened into messages).
//! - [`time`]: RFC 3339 timestamps.
//! - [`fork`]: fork headers, the segments a fork is read from.
//! - `stream`: finding a stream, its tail, expiry and sliding TTL.
//! - `lifecycle`: PUT (create), HEAD, DELETE.
//! - `append`: POST (append, close); producer and `Stream-Seq` checks are
//!   made by the stream's sequencer (`crate::meta::writers`).
//! - `read`: GET catch-up and long-poll reads.
//! - `sse`: GET `live=sse`.
//! - `reply`: responses, errors, CORS and security headers.

mod access;
mod append;
mod auth;
pub mod fork;
pub mod headers;
pub mod json;
mod lifecycle;
pub mod name;
pub mod offset;
mod read;
mod reply;
mod sse;
mod stream;
pub mod time;

use crate::api::Services;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use axum::routing::any;
use axum::Router;
use reply::DsError;
use std::sync::Arc;

/// The path every protocol request is under.
pub const ROUTE: &str = "/v1/stream/{*path}";

/// What every handler works with. Appends need no lock of their own: the
/// producer and `Stream-Seq` checks run on the stream's owner, under the
/// stream's lock, in the same step as the append.
pub(crate) struct DsState {
    pub engine: Services,
}

type Ds = Arc<DsState>;

/// The protocol's routes over `engine`.
pub fn router(engine: Services) -> Router {
    let guard = axum::middleware::from_fn_with_state(engine.tokens.clone(), auth::authorize_durable);
    let state = Arc::new(DsState { engine });
    Router::new()
        .route(ROUTE, any(dispatch).layer(guard))
        .layer(axum::middleware::map_response(reply::common_headers))
        .with_state(state)
}

/// A protocol error answered before routing (see `http::guard`): plain
/// text, with the headers every protocol response carries.
pub(crate) fn text_error(status: axum::http::StatusCode, message: String) -> Response {
    reply::with_common_headers(DsError::new(status, message).into_response())
}

/// Bytes of an oversized body read (and dropped) before answering 413, so
/// a client still sending gets the answer instead of a reset connection.
const DRAIN_LIMIT: usize = 64 * 1024 * 1024;

/// The request body, at most `limit` bytes; a longer one is 413, answered
/// after reading it to its end (up to [`DRAIN_LIMIT`] more bytes).
async fn read_body(body: axum::body::Body, limit: usize) -> Result<axum::body::Bytes, DsError> {
    use futures::StreamExt;
    let mut data = body.into_data_stream();
    let mut buf = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = data.next().await {
        let chunk = chunk.map_err(|e| DsError::bad(format!("reading the request body: {e}")))?;
        seen = seen.saturating_add(chunk.len());
        if seen <= limit {
            buf.extend_from_slice(&chunk);
        } else {
            buf = Vec::new();
            if seen > limit.saturating_add(DRAIN_LIMIT) {
                break;
            }
        }
    }
    if seen > limit {
        return Err(DsError::new(
            axum::http::StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than {limit} bytes"),
        ));
    }
    Ok(buf.into())
}

async fn dispatch(
    State(st): State<Ds>,
    Path(path): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let body = match method {
        Method::PUT | Method::POST => read_body(body, st.engine.limits.max_request_bytes).await,
        _ => Ok(axum::body::Bytes::new()),
    };
    let result = match method {
        Method::OPTIONS => Ok(reply::preflight(&headers)),
        Method::PUT => lifecycle::create(&st, &path, &headers, body).await,
        Method::POST => append::append(&st, &path, &headers, body).await,
        Method::GET => read::get(&st, &path, uri.query(), &headers).await,
        Method::HEAD => lifecycle::head(&st, &path).await,
        Method::DELETE => lifecycle::delete(&st, &path).await,
        other => Err(DsError::new(
            axum::http::StatusCode::METHOD_NOT_ALLOWED,
            format!("method {other} is not part of the protocol"),
        )),
    };
    result.unwrap_or_else(DsError::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use futures::StreamExt;

    fn chunked(chunks: Vec<&'static [u8]>) -> Body {
        let s = futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(axum::body::Bytes::from(c))),
        );
        Body::from_stream(s)
    }

    #[tokio::test]
    async fn bodies_up_to_the_limit_are_read_whole() {
        let b = read_body(chunked(vec![b"ab", b"cd"]), 4).await.unwrap();
        assert_eq!(&b[..], b"abcd");
        assert!(read_body(Body::empty(), 0).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_longer_body_is_read_to_its_end_then_refused() {
        let consumed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = consumed.clone();
        let s = futures::stream::iter(0..10).map(move |_| {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b"xyz"))
        });
        let err = read_body(Body::from_stream(s), 4).await.unwrap_err();
        assert_eq!(err.status, axum::http::StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(consumed.load(std::sync::atomic::Ordering::Relaxed), 10, "drained");
    }
}
