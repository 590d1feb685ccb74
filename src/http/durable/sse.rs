//! `GET ?live=sse`: the stream as server-sent events.
//!
//! Every batch of records is one `data` event followed by one `control`
//! event carrying the next offset (`streamNextOffset`), a cursor, and
//! `upToDate` once caught up. Text streams send their bytes as `data:`
//! lines (split at every CR, LF or CRLF, so a payload can never end an
//! event early); JSON streams send an array of messages; every other
//! content type is base64 (announced by `Stream-SSE-Data-Encoding`). When a
//! closed stream's end is reached the last control event says
//! `streamClosed` and the response ends.

use super::access::Reader;
use super::headers as h;
use super::offset::{self, token};
use super::read::{at_closed_end, body, read_from, read_once, Query, WAIT_SLICE};
use super::reply::{DsError, Reply};
use super::stream::{self, Found};
use super::DsState;
use crate::api::Consistency;
use crate::api::ReadFrom;
use crate::ids::Offset;
use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine as _;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// A comment line after this long without events keeps the connection open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// After a batch, the next waits are this short, this many times: a close
/// often follows the last append at once (it is recorded just after the
/// data), and the reader should see it without a full [`WAIT_SLICE`].
const QUICK_SLICE: Duration = Duration::from_millis(25);
const QUICK_SLICES: u32 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Text,
    Json,
    Base64,
}

pub fn encoding_for(content_type: &str) -> Encoding {
    let mt = h::media_type(content_type);
    if mt == "application/json" {
        Encoding::Json
    } else if mt.starts_with("text/") {
        Encoding::Text
    } else {
        Encoding::Base64
    }
}

/// One `data` event holding `payload` (already rendered for the encoding).
pub fn data_event(enc: Encoding, payload: &[u8]) -> Vec<u8> {
    let mut out = b"event: data\n".to_vec();
    let text;
    let payload: &[u8] = match enc {
        Encoding::Base64 => {
            text = base64::engine::general_purpose::STANDARD.encode(payload);
            text.as_bytes()
        }
        Encoding::Text | Encoding::Json => payload,
    };
    let mut line_start = 0;
    let mut i = 0;
    let push_line = |out: &mut Vec<u8>, line: &[u8]| {
        // A line starting with a space keeps it: readers drop one.
        out.extend_from_slice(if line.first() == Some(&b' ') {
            b"data: "
        } else {
            b"data:"
        });
        out.extend_from_slice(line);
        out.push(b'\n');
    };
    while i < payload.len() {
        match payload[i] {
            b'\r' => {
                push_line(&mut out, &payload[line_start..i]);
                i += if payload.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
                line_start = i;
            }
            b'\n' => {
                push_line(&mut out, &payload[line_start..i]);
                i += 1;
                line_start = i;
            }
            _ => i += 1,
        }
    }
    push_line(&mut out, &payload[line_start..]);
    out.push(b'\n');
    out
}

/// A `control` event.
pub fn control_event(next: Offset, cursor: u64, up_to_date: bool, closed: bool) -> Vec<u8> {
    let mut v = serde_json::Map::new();
    v.insert("streamNextOffset".into(), token(next).into());
    if closed {
        v.insert("streamClosed".into(), true.into());
    } else {
        v.insert("streamCursor".into(), cursor.to_string().into());
    }
    if up_to_date {
        v.insert("upToDate".into(), true.into());
    }
    format!("event: control\ndata:{}\n\n", serde_json::Value::Object(v)).into_bytes()
}

/// An `error` event: why the tail ended (`{"status", "message"}`).
pub fn error_event(e: &DsError) -> Vec<u8> {
    let data = serde_json::json!({ "status": e.status.as_u16(), "message": e.message });
    format!("event: error\ndata:{data}\n\n").into_bytes()
}

struct Tail {
    path: String,
    reader: Reader,
    found: Found,
    enc: Encoding,
    from: ReadFrom,
    cursor: u64,
    done: bool,
    first: bool,
    /// Short waits left (see [`QUICK_SLICE`]).
    quick: u32,
}

impl Tail {
    async fn next_chunk(&mut self, st: &DsState) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut idle = Duration::ZERO;
        loop {
            let wait = if self.first {
                Duration::ZERO
            } else if self.quick > 0 {
                self.quick -= 1;
                QUICK_SLICE
            } else {
                WAIT_SLICE
            };
            let first = std::mem::replace(&mut self.first, false);
            let r = match read_once(st, &self.reader, &self.found, self.from, wait, Consistency::Local).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!(topic = %self.found.topic, error = %e.message, "SSE tail ended");
                    self.done = true;
                    // Refused credentials end the tail with a reason; other
                    // errors (the stream moved or was deleted) just end it,
                    // and the client reconnects.
                    let refused = matches!(e.status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
                    return refused.then(|| Bytes::from(error_event(&e)));
                }
            };
            self.from = ReadFrom::At(r.next_offset);
            let up_to_date = r.next_offset >= r.high_watermark;
            if r.records.is_empty() && !first && !self.found.meta.closed() {
                // Nothing new: see whether the stream was closed meanwhile.
                match stream::find(st, &self.path).await {
                    Ok(f) => self.found = f,
                    Err(_) => {
                        self.done = true;
                        return None;
                    }
                }
            }
            let closed = up_to_date && at_closed_end(&self.found, r.next_offset);
            let mut out = Vec::new();
            if !r.records.is_empty() {
                out.extend(data_event(self.enc, &body(&self.found, &r)));
            }
            if !r.records.is_empty() {
                self.quick = QUICK_SLICES;
            }
            if !r.records.is_empty() || closed || first {
                out.extend(control_event(r.next_offset, self.cursor, up_to_date, closed));
                self.done = closed;
                return Some(Bytes::from(out));
            }
            idle += wait;
            if idle >= KEEP_ALIVE {
                return Some(Bytes::from_static(b": keep-alive\n\n"));
            }
        }
    }
}

pub async fn serve(st: &Arc<DsState>, reader: Reader, found: Found, q: &Query) -> Result<Response, DsError> {
    let enc = encoding_for(&found.meta.content_type);
    let from = read_from(q.offset);
    // A first read here, so a bad offset is an HTTP error, not an event.
    read_once(st, &reader, &found, from, Duration::ZERO, Consistency::Local).await?;
    let now_secs = (st.engine.clock.now_ms() / 1000).max(0) as u64;
    let tail = Tail {
        path: found.meta.path.clone(),
        reader,
        found,
        enc,
        from,
        cursor: offset::cursor(now_secs, q.cursor.as_deref()),
        done: false,
        first: true,
        quick: 0,
    };
    let st = st.clone();
    let body = futures::stream::unfold((tail, st), |(mut tail, st)| async move {
        let chunk = tail.next_chunk(&st).await?;
        Some((Ok::<_, Infallible>(chunk), (tail, st)))
    });
    let r = Reply::new(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .header_if(enc == Encoding::Base64, h::SSE_ENCODING, "base64");
    Ok(r.body(Body::from_stream(body)).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_lines_never_end_an_event() {
        let e = String::from_utf8(data_event(Encoding::Text, b"a\r\n\r\nevent: x\rb\n c")).unwrap();
        assert_eq!(e, "event: data\ndata:a\ndata:\ndata:event: x\ndata:b\ndata:  c\n\n");
    }

    #[test]
    fn binary_is_base64_on_one_line() {
        let e = String::from_utf8(data_event(Encoding::Base64, b"Hello")).unwrap();
        assert_eq!(e, "event: data\ndata:SGVsbG8=\n\n");
        assert_eq!(encoding_for("application/octet-stream"), Encoding::Base64);
        assert_eq!(encoding_for("Text/Plain; charset=utf-8"), Encoding::Text);
        assert_eq!(encoding_for("application/json"), Encoding::Json);
    }

    #[test]
    fn control_events_carry_a_cursor_until_closed() {
        let open = String::from_utf8(control_event(Offset(3), 9, true, false)).unwrap();
        assert_eq!(
            open,
            "event: control\ndata:{\"streamCursor\":\"9\",\"streamNextOffset\":\"0000000000000000_0000000000000003\",\"upToDate\":true}\n\n"
        );
        let closed = String::from_utf8(control_event(Offset(3), 9, true, true)).unwrap();
        assert!(closed.contains("\"streamClosed\":true") && !closed.contains("streamCursor"));
    }
}
