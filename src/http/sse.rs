//! `GET .../partitions/{p}/subscribe`: a partition as server-sent events.
//!
//! Each record is one event (`id: <offset>`, `event: record`, `data: <record
//! JSON>`). The stream long-polls the engine; a `:` comment every
//! [`KEEP_ALIVE`] keeps idle connections open. When live reads end (shutdown)
//! or the stream becomes unavailable (moved, node fenced) it sends `event:
//! error` with `{"code": "unavailable", "retryable": true}` and ends; the
//! client reconnects with `Last-Event-ID`.

use super::error::{HttpError, HttpResult};
use super::records::{encoding, header_form, params, read_from, Encoding, Params};
use super::records_out::{record_text, HeaderForm};
use super::{checked_partition, Shared};
use crate::api::{ApiError, ErrorCode, ReadFrom, ReadRequest};
use crate::batch::Record;
use crate::ids::Offset;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde_json::json;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

/// Interval of keep-alive comments, and the long-poll wait of each read.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Records fetched per engine read.
const BATCH: usize = 500;
const BATCH_BYTES: usize = 1024 * 1024;

struct Subscription {
    state: Shared,
    topic: String,
    partition: u32,
    from: ReadFrom,
    /// See [`ReadRequest::committed`].
    committed: bool,
    enc: Encoding,
    form: HeaderForm,
    buffered: VecDeque<(Offset, Record)>,
    done: bool,
    /// Whether the subscription itself was forwarded here (then its reads
    /// are never forwarded again).
    forwarded: bool,
    /// The subscriber's token: checked again before each read, and passed
    /// on when a read is forwarded to the owner.
    token: Option<std::sync::Arc<crate::auth::Secret>>,
}

fn error_event(e: &ApiError) -> Event {
    let retryable = e.code.retryable();
    let data = json!({ "code": e.code.as_str(), "message": e.message, "retryable": retryable });
    Event::default().event("error").data(data.to_string())
}

impl Subscription {
    fn request(&self, wait: Duration) -> ReadRequest {
        ReadRequest {
            from: self.from,
            limit: BATCH,
            max_bytes: BATCH_BYTES.min(self.state.limits.max_read_bytes),
            wait,
            committed: self.committed,
            consistency: Default::default(),
        }
    }

    /// Whether the subscriber's token may still read the topic.
    fn still_allowed(&self) -> Result<(), ApiError> {
        let topic = [self.topic.as_str()];
        super::auth::still_allowed(self.state.engine.tokens.as_ref(), self.token.as_deref(), topic)
    }

    /// The next event, or `None` when the stream is over.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some((offset, record)) = self.buffered.pop_front() {
                let data = record_text(offset, &record, self.enc, self.form);
                return Some(Event::default().id(offset.get().to_string()).event("record").data(data));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.still_allowed() {
                self.done = true;
                return Some(error_event(&e));
            }
            let engine = self.state.engine.clone();
            let req = self.request(KEEP_ALIVE);
            // The body is polled outside the request's task-local scopes.
            let read = crate::api::CALLER_TOKEN.scope(
                self.token.clone(),
                crate::api::FORWARDED.scope(self.forwarded, engine.records.read(&self.topic, self.partition, req)),
            );
            let result = tokio::select! {
                _ = engine.cluster.live_reads_ended() => {
                    Err(ApiError::unavailable("the node is shutting down; reconnect with Last-Event-ID"))
                }
                r = read => r,
            };
            match result {
                Ok(r) => {
                    // The read may have waited: a token revoked meanwhile
                    // sends nothing more.
                    if !r.records.is_empty() {
                        if let Err(e) = self.still_allowed() {
                            self.done = true;
                            return Some(error_event(&e));
                        }
                    }
                    self.from = ReadFrom::At(r.next_offset);
                    self.buffered.extend(r.records);
                }
                Err(e) => {
                    self.done = true;
                    return Some(error_event(&e));
                }
            }
        }
    }
}

fn resume_point(headers: &HeaderMap, params: &Params) -> HttpResult<ReadFrom> {
    match headers.get("last-event-id") {
        None => read_from(params),
        Some(v) => {
            let id: u64 = v.to_str().ok().and_then(|s| s.trim().parse().ok()).ok_or_else(|| {
                HttpError::new(ErrorCode::InvalidOffset, "Last-Event-ID must be the offset of a record")
            })?;
            Ok(ReadFrom::At(Offset(id).next()))
        }
    }
}

pub async fn subscribe(
    State(state): State<Shared>,
    Path((topic, partition)): Path<(String, String)>,
    query: Result<Query<Params>, QueryRejection>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> HttpResult<axum::response::Response> {
    use axum::response::IntoResponse as _;
    let params = params(query)?;
    let enc = encoding(&params)?;
    let form = header_form(&params)?;
    let p = checked_partition(&state, &topic, &partition).await?;
    let from = resume_point(&headers, &params)?;
    let committed = super::records::committed(&params)?;
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    if let Some(relayed) = state
        .engine
        .records
        .relay_subscription(&topic, p, path, last_event_id)
        .await
    {
        return Ok(relay(state.engine.cluster.clone(), relayed?));
    }
    Ok(local(state, topic, p, (from, committed), (enc, form))
        .await?
        .into_response())
}

/// The owner's event stream, passed on as it arrives; when live reads end
/// here (shutdown) it ends with the same `error` event a local one sends.
fn relay(
    cluster: std::sync::Arc<dyn crate::api::Cluster>,
    upstream: crate::api::ByteStream,
) -> axum::response::Response {
    use futures::StreamExt as _;
    let stream = futures::stream::unfold(Some(upstream), move |upstream| {
        let cluster = cluster.clone();
        async move {
            let mut upstream = upstream?;
            tokio::select! {
                next = upstream.next() => next.map(|chunk| (chunk, Some(upstream))),
                _ = cluster.live_reads_ended() => {
                    let e = ApiError::unavailable("the node is shutting down; reconnect with Last-Event-ID");
                    let data = json!({ "code": e.code.as_str(), "message": e.message, "retryable": true });
                    let event = format!("event: error\ndata: {data}\n\n");
                    Some((Ok(axum::body::Bytes::from(event)), None))
                }
            }
        }
    });
    axum::response::Response::builder()
        .header(axum::http::header::CONTENT_TYPE, "text/event-stream")
        .header(axum::http::header::CACHE_CONTROL, "no-cache")
        .body(axum::body::Body::from_stream(stream))
        .expect("a valid response")
}

/// A subscription served from this node's reads.
async fn local(
    state: Shared,
    topic: String,
    p: u32,
    (from, committed): (ReadFrom, bool),
    (enc, form): (Encoding, HeaderForm),
) -> HttpResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let mut sub = Subscription {
        state,
        topic,
        partition: p,
        from,
        committed,
        enc,
        form,
        buffered: VecDeque::new(),
        done: false,
        forwarded: crate::api::is_forwarded(),
        token: crate::api::caller_token(),
    };
    // A first read without waiting, so a bad offset or an unavailable stream
    // is an ordinary HTTP error rather than an event.
    let first = sub
        .state
        .engine
        .records
        .read(&sub.topic, p, sub.request(Duration::ZERO))
        .await?;
    sub.from = ReadFrom::At(first.next_offset);
    sub.buffered.extend(first.records);

    let stream = futures::stream::unfold(sub, |mut sub| async move {
        let event = sub.next().await?;
        Some((Ok(event), sub))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}
