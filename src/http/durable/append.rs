//! `POST`: append a body (one record, or one per message in JSON mode),
//! close the stream (`Stream-Closed: true`, with or without a final body),
//! with `Stream-Seq` ordering and idempotent producers.
//!
//! Everything that can refuse the request is checked before the engine
//! sees a record, so a refused append has appended nothing. The producer
//! and `Stream-Seq` checks are the stream sequencer's
//! ([`crate::meta::writers`]): on the stream's owner, the check and the
//! append are one step, whichever node the request came through.

use super::headers::{self as h, media_type, Producer};
use super::offset::token;
use super::reply::{DsError, Reply};
use super::stream::{self, Found};
use super::{json, DsState};
use crate::batch::Record;
use crate::ids::Offset;
use crate::meta::durable::{DurableMeta, DurableUpdate, ProducerMark};
use crate::meta::writers::{DsAppend, DsVerdict, DsWrite, ProducerSeq, WriterState};
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

/// One record per message, stamped `ts` (now, by the node's clock).
pub fn to_records(messages: Vec<Bytes>, ts: i64) -> Vec<Record> {
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
    if let Some(at) = found.meta.closed_at {
        return closed(st, &found, &req, at).await;
    }
    let records = records_of(st, &found.meta, &req)?;
    if !found.open {
        stream::wait_open(st, &found.topic).await?;
    }
    let write = write_of(&found.meta, &req);
    // A retry of a closing append whose close was not recorded closes now.
    let mut duplicate = None;
    let next = if write.is_empty() {
        if records.is_empty() {
            stream::tail(st, &found).await?
        } else {
            let a = st
                .engine
                .records
                .append(&found.topic, 0, to_records(records, st.engine.clock.now_ms()))
                .await?;
            Offset(found.base() + a.base.get() + u64::from(a.count))
        }
    } else {
        let outcome = st
            .engine
            .records
            .append_durable(&found.topic, 0, write, to_records(records, st.engine.clock.now_ms()))
            .await?;
        match outcome {
            DsAppend::Stored { base, count } => Offset(found.base() + base.get() + u64::from(count)),
            DsAppend::Checked { end } => Offset(found.base() + end.get()),
            DsAppend::Declined(DsVerdict::Duplicate { epoch, last_seq, next })
                if req.close && req.producer.as_ref().is_some_and(|p| p.seq == last_seq) =>
            {
                duplicate = Some((epoch, last_seq));
                Offset(found.base() + next.get())
            }
            DsAppend::Declined(v) => return declined(&found, v, None),
        }
    };
    let mut updates = Vec::new();
    if req.close {
        updates.push(DurableUpdate::Close {
            at: next,
            by: req.producer.as_ref().map(mark),
        });
    }
    updates.extend(stream::touch(&found.meta, st.engine.clock.now_ms()));
    stream::update(st, &found.topic, updates).await?;
    if let Some((epoch, last_seq)) = duplicate {
        let r = Reply::new(StatusCode::NO_CONTENT)
            .header(h::NEXT_OFFSET, token(next))
            .header(h::CLOSED, "true");
        return Ok(producer_headers(r, epoch, last_seq).build());
    }
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

/// The records a request appends (none for a close without a body),
/// checked against the stream's content type.
fn records_of(st: &DsState, meta: &DurableMeta, req: &Request) -> Result<Vec<Bytes>, DsError> {
    if req.body.is_empty() {
        return Ok(Vec::new());
    }
    let ct = req.content_type.as_deref().unwrap_or_default();
    if media_type(ct) != media_type(&meta.content_type) {
        return Err(DsError::conflict(format!(
            "the stream's content type is {}, not {ct}",
            meta.content_type
        )));
    }
    if !json::is_json(&meta.content_type) {
        return Ok(vec![req.body.clone()]);
    }
    match json::messages(&req.body, json::max_messages(st)) {
        Ok(m) => Ok(m),
        Err(json::JsonError::EmptyArray) => Err(DsError::bad("an empty JSON array appends nothing")),
        Err(json::JsonError::TooMany(max)) => Err(json::too_many(max)),
        Err(json::JsonError::Invalid(e)) => Err(DsError::bad(format!("body is not JSON: {e}"))),
    }
}

/// The write to check, with what an older release kept in the stream's
/// metadata for it (see [`DsWrite::legacy_producer`]).
fn write_of(meta: &DurableMeta, req: &Request) -> DsWrite {
    let legacy = |p: &Producer| {
        meta.producers.get(&p.id).map(|s| WriterState {
            epoch: s.epoch,
            seq: s.seq,
            next: Offset(s.next_offset.get().saturating_sub(meta.base().get())),
        })
    };
    DsWrite {
        producer: req.producer.as_ref().map(|p| ProducerSeq {
            id: p.id.clone(),
            epoch: p.epoch,
            seq: p.seq,
        }),
        stream_seq: req.seq.clone(),
        legacy_producer: req.producer.as_ref().and_then(legacy),
        legacy_stream_seq: req.seq.as_ref().and(meta.last_seq.clone()),
    }
}

fn mark(p: &Producer) -> ProducerMark {
    ProducerMark {
        id: p.id.clone(),
        epoch: p.epoch,
        seq: p.seq,
    }
}

/// An append to a closed stream: a retry of the closing request or of an
/// earlier append of its producer is answered as a duplicate (the
/// producer's state is asked of the stream's owner), a close without data
/// again is idempotent, anything else is refused.
async fn closed(st: &DsState, found: &Found, req: &Request, at: Offset) -> Result<Response, DsError> {
    let Some(p) = &req.producer else {
        if req.close && req.body.is_empty() {
            let r = Reply::new(StatusCode::NO_CONTENT)
                .header(h::NEXT_OFFSET, token(at))
                .header(h::CLOSED, "true");
            return Ok(r.build());
        }
        return Err(closed_error(at));
    };
    let write = DsWrite {
        stream_seq: None,
        legacy_stream_seq: None,
        ..write_of(&found.meta, req)
    };
    match st
        .engine
        .records
        .append_durable(&found.topic, 0, write, Vec::new())
        .await?
    {
        DsAppend::Declined(v) => declined(found, v, Some(at)),
        _ if found.meta.closed_by.as_ref() == Some(&mark(p)) => {
            let r = Reply::new(StatusCode::NO_CONTENT)
                .header(h::NEXT_OFFSET, token(at))
                .header(h::CLOSED, "true");
            Ok(producer_headers(r, p.epoch, p.seq).build())
        }
        _ => Err(closed_error(at)),
    }
}

/// The answer to a write the stream's sequencer did not append.
fn declined(found: &Found, v: DsVerdict, closed_at: Option<Offset>) -> Result<Response, DsError> {
    match v {
        DsVerdict::Duplicate { epoch, last_seq, next } => {
            let at = closed_at.unwrap_or(Offset(found.base() + next.get()));
            let r = Reply::new(StatusCode::NO_CONTENT)
                .header(h::NEXT_OFFSET, token(at))
                .header_if(closed_at.is_some(), h::CLOSED, "true");
            Ok(producer_headers(r, epoch, last_seq).build())
        }
        DsVerdict::StaleEpoch { current } => {
            Err(DsError::new(StatusCode::FORBIDDEN, "producer epoch is stale").with(h::PRODUCER_EPOCH, current))
        }
        DsVerdict::EpochNotAtZero => Err(DsError::bad("a new producer epoch must start at Producer-Seq 0")),
        DsVerdict::Gap { expected, received } => Err(DsError::conflict("producer sequence gap")
            .with(h::PRODUCER_EXPECTED_SEQ, expected)
            .with(h::PRODUCER_RECEIVED_SEQ, received)),
        DsVerdict::SeqNotAfter { last } => Err(DsError::conflict(format!("Stream-Seq does not follow {last:?}"))),
        DsVerdict::Accept => Err(DsError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the sequencer declined an accepted write",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(producer: Option<Producer>, seq: Option<&str>) -> Request {
        Request {
            body: Bytes::from_static(b"x"),
            content_type: Some("text/plain".into()),
            close: false,
            seq: seq.map(str::to_string),
            producer,
        }
    }

    #[test]
    fn writer_rows_of_an_older_release_seed_the_write_in_own_offsets() {
        // A fork's DurableMeta as an older release wrote it, with the
        // producer's end in stream offsets (the fork's own start is 3).
        let meta: DurableMeta = serde_json::from_str(
            r#"{"path":"f","content_type":"text/plain","last_seq":"07",
                "producers":{"p":{"epoch":2,"seq":5,"next_offset":10,"at_ms":1}},
                "fork":{"source":"ds.s","offset":3}}"#,
        )
        .unwrap();
        let p = Producer {
            id: "p".into(),
            epoch: 2,
            seq: 5,
        };
        let w = write_of(&meta, &request(Some(p), Some("08")));
        assert_eq!(
            w.legacy_producer,
            Some(WriterState {
                epoch: 2,
                seq: 5,
                next: Offset(7)
            })
        );
        assert_eq!(w.legacy_stream_seq.as_deref(), Some("07"));
        assert!(matches!(
            crate::meta::writers::WriterTable::default().check(&w),
            DsVerdict::Duplicate { last_seq: 5, .. }
        ));
        // Nothing legacy for a producer the rows do not name, nor without a Stream-Seq.
        let other = Producer {
            id: "q".into(),
            epoch: 0,
            seq: 0,
        };
        let w = write_of(&meta, &request(Some(other), None));
        assert_eq!((w.legacy_producer, w.legacy_stream_seq), (None, None));
    }
}
