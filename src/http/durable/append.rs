//! `POST`: append a body (one record, or one per message in JSON mode),
//! close the stream (`Stream-Closed: true`, with or without a final body),
//! with `Stream-Seq` ordering and idempotent producers.
//!
//! Everything that can refuse the request is checked before the engine
//! sees a record, so a refused append has appended nothing.

use super::headers::{self as h, media_type, Producer};
use super::offset::token;
use super::producer::{judge, Verdict};
use super::reply::{DsError, Reply};
use super::stream::{self, Found};
use super::time::now_ms;
use super::{json, DsState};
use crate::ids::Offset;
use crate::meta::durable::{DurableUpdate, ProducerMark, ProducerState};
use crate::stream::batch::Record;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

/// One record per message, stamped now.
pub fn to_records(messages: Vec<Bytes>) -> Vec<Record> {
    let ts = now_ms();
    messages
        .into_iter()
        .map(|v| Record {
            timestamp_ms: ts,
            key: None,
            value: Some(v),
            headers: Vec::new(),
        })
        .collect()
}

struct Request {
    body: Bytes,
    content_type: Option<String>,
    close: bool,
    seq: Option<String>,
    producer: Option<Producer>,
}

fn parse(headers: &HeaderMap, body: Bytes) -> Result<Request, DsError> {
    let req = Request {
        content_type: h::content_type(headers).map_err(DsError::bad)?,
        close: h::closed(headers).map_err(DsError::bad)?,
        seq: h::stream_seq(headers).map_err(DsError::bad)?,
        producer: h::producer(headers).map_err(DsError::bad)?,
        body,
    };
    if req.body.is_empty() && !req.close {
        return Err(DsError::bad(
            "an append needs a non-empty body (or Stream-Closed: true)",
        ));
    }
    if !req.body.is_empty() && req.content_type.is_none() {
        return Err(DsError::bad("an append needs a Content-Type"));
    }
    Ok(req)
}

fn producer_headers(r: Reply, epoch: u64, seq: u64) -> Reply {
    r.header(h::PRODUCER_EPOCH, epoch.to_string())
        .header(h::PRODUCER_SEQ, seq.to_string())
}

fn closed_error(at: Offset) -> DsError {
    DsError::conflict("the stream is closed")
        .with(h::CLOSED, "true")
        .with(h::NEXT_OFFSET, token(at))
}

pub async fn append(
    st: &DsState,
    path: &str,
    headers: &HeaderMap,
    body: Result<Bytes, DsError>,
) -> Result<Response, DsError> {
    let req = parse(headers, body?)?;
    let found = stream::find(st, path).await?;
    let lock = st.lock_for(&found.topic);
    let _guard = lock.lock().await;
    // Read the state again under the lock: the previous holder's changes
    // are in the view now.
    let found = stream::find(st, path).await?;
    append_locked(st, found, req).await
}

async fn append_locked(st: &DsState, found: Found, req: Request) -> Result<Response, DsError> {
    let meta = &found.meta;
    if let Some(p) = &req.producer {
        match judge(meta.producers.get(&p.id), p) {
            Verdict::Accept => {}
            Verdict::Duplicate { last_seq } => {
                let at = match meta.closed_at {
                    Some(at) => at,
                    None => meta.producers[&p.id].next_offset,
                };
                let r = Reply::new(StatusCode::NO_CONTENT)
                    .header(h::NEXT_OFFSET, token(at))
                    .header_if(meta.closed(), h::CLOSED, "true");
                return Ok(producer_headers(r, p.epoch, last_seq).build());
            }
            Verdict::StaleEpoch { current } => {
                return Err(
                    DsError::new(StatusCode::FORBIDDEN, "producer epoch is stale").with(h::PRODUCER_EPOCH, current)
                )
            }
            Verdict::EpochNotAtZero => return Err(DsError::bad("a new producer epoch must start at Producer-Seq 0")),
            Verdict::Gap { expected, received } => {
                return Err(DsError::conflict("producer sequence gap")
                    .with(h::PRODUCER_EXPECTED_SEQ, expected)
                    .with(h::PRODUCER_RECEIVED_SEQ, received))
            }
        }
    }
    if let Some(at) = meta.closed_at {
        // Closing again without data is idempotent; anything else is refused.
        if req.close && req.body.is_empty() && req.producer.is_none() {
            let r = Reply::new(StatusCode::NO_CONTENT)
                .header(h::NEXT_OFFSET, token(at))
                .header(h::CLOSED, "true");
            return Ok(r.build());
        }
        return Err(closed_error(at));
    }
    let mut records = Vec::new();
    if !req.body.is_empty() {
        let ct = req.content_type.as_deref().unwrap_or_default();
        if media_type(ct) != media_type(&meta.content_type) {
            return Err(DsError::conflict(format!(
                "the stream's content type is {}, not {ct}",
                meta.content_type
            )));
        }
        records = if json::is_json(&meta.content_type) {
            match json::messages(&req.body, json::max_messages(st)) {
                Ok(m) => m,
                Err(json::JsonError::EmptyArray) => return Err(DsError::bad("an empty JSON array appends nothing")),
                Err(json::JsonError::TooMany(max)) => return Err(json::too_many(max)),
                Err(json::JsonError::Invalid(e)) => return Err(DsError::bad(format!("body is not JSON: {e}"))),
            }
        } else {
            vec![req.body.clone()]
        };
    }
    if let (Some(seq), Some(last)) = (&req.seq, &meta.last_seq) {
        if seq <= last {
            return Err(DsError::conflict(format!(
                "Stream-Seq {seq:?} does not follow {last:?}"
            )));
        }
    }
    if !found.open {
        stream::wait_open(st, &found.topic).await?;
    }
    let next = if records.is_empty() {
        stream::tail(st, &found).await?
    } else {
        let a = st.engine.records.append(&found.topic, 0, to_records(records)).await?;
        Offset(found.base() + a.base.get() + u64::from(a.count))
    };
    let mut updates = Vec::new();
    if let Some(seq) = req.seq {
        updates.push(DurableUpdate::Seq(seq));
    }
    if let Some(p) = &req.producer {
        updates.push(DurableUpdate::Producer {
            id: p.id.clone(),
            state: ProducerState {
                epoch: p.epoch,
                seq: p.seq,
                next_offset: next,
                at_ms: now_ms(),
            },
        });
    }
    if req.close {
        updates.push(DurableUpdate::Close {
            at: next,
            by: req.producer.as_ref().map(|p| ProducerMark {
                id: p.id.clone(),
                epoch: p.epoch,
                seq: p.seq,
            }),
        });
    }
    updates.extend(stream::touch(meta));
    stream::update(st, &found.topic, updates).await?;
    let status = if req.producer.is_some() && !req.body.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::NO_CONTENT
    };
    let r = Reply::new(status)
        .header(h::NEXT_OFFSET, token(next))
        .header_if(req.close, h::CLOSED, "true");
    Ok(match &req.producer {
        Some(p) => producer_headers(r, p.epoch, p.seq),
        None => r,
    }
    .build())
}
