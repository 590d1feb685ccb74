//! `GET`: catch-up reads (`offset`), long polls (`live=long-poll`), and the
//! hand-off to SSE (`live=sse`).

use super::access::Reader;
use super::headers::{self as h};
use super::offset::{self, token, Start};
use super::reply::{no_store, DsError, Reply};
use super::stream::{self, Found};
use super::{fork, json, sse, DsState};
use crate::api::Consistency;
use crate::api::{ReadFrom, ReadResult};
use crate::ids::Offset;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use std::time::Duration;

/// How long a long poll waits for data before answering 204. Short, so a
/// client behind a proxy with a low idle timeout keeps its connection (and
/// so the conformance suite's 5 s test timeout holds); clients poll again.
pub const LONG_POLL: Duration = Duration::from_secs(3);
/// Each engine wait of a long poll or SSE tail; between them the stream's
/// closure is checked.
pub const WAIT_SLICE: Duration = Duration::from_millis(250);
/// Records and bytes per read (the bytes never more than
/// `--http-max-read-bytes`; one record larger than that is still returned).
pub const READ_RECORDS: usize = 1000;
pub const READ_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Live {
    No,
    LongPoll,
    Sse,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// `None` when no `offset` was given (the beginning).
    pub offset: Option<Start>,
    pub live: Live,
    pub cursor: Option<String>,
    /// `consistency=strong`: a linearizable read (see [`Consistency`]);
    /// not with `live=sse`.
    pub consistency: Consistency,
}

fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = b.get(i + 1..i + 3).and_then(|x| std::str::from_utf8(x).ok());
                let v = hex
                    .and_then(|x| u8::from_str_radix(x, 16).ok())
                    .ok_or_else(|| format!("bad percent escape in {s:?}"))?;
                out.push(v);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} is not UTF-8"))
}

/// Parses the query string; unknown parameters are ignored.
pub fn parse_query(q: Option<&str>) -> Result<Query, String> {
    let (mut offsets, mut live, mut cursor, mut consistency) = (Vec::new(), None, None, None);
    for pair in q.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (percent_decode(k)?, percent_decode(v)?);
        match k.as_str() {
            "offset" => offsets.push(v),
            "live" => live = Some(v),
            "cursor" => cursor = Some(v),
            "consistency" => consistency = Some(v),
            _ => {}
        }
    }
    if offsets.len() > 1 {
        return Err("offset may be given once".into());
    }
    let offset = offsets.pop().map(|o| offset::parse(&o)).transpose()?;
    let live = match live.as_deref() {
        None => Live::No,
        Some("long-poll") => Live::LongPoll,
        Some("sse") => Live::Sse,
        Some(other) => return Err(format!("live must be long-poll or sse, got {other:?}")),
    };
    if live != Live::No && offset.is_none() {
        return Err("live reads need an offset".into());
    }
    let consistency = match consistency.as_deref() {
        None | Some("local") => Consistency::Local,
        Some("strong") if live == Live::Sse => {
            return Err("consistency=strong is for reads and long polls, not sse".into())
        }
        Some("strong") => Consistency::Strong,
        Some(other) => return Err(format!("consistency must be local or strong, got {other:?}")),
    };
    Ok(Query {
        offset,
        live,
        cursor,
        consistency,
    })
}

pub fn read_from(start: Option<Start>) -> ReadFrom {
    match start {
        None | Some(Start::Beginning) => ReadFrom::Start,
        Some(Start::Now) => ReadFrom::End,
        Some(Start::At(o)) => ReadFrom::At(o),
    }
}

/// Reads once (across a fork's segments) as `reader`, waiting up to
/// `wait`; an offset below the stream's start is 410 (retention removed it),
/// past its end 400. The reader must be allowed to read every segment's
/// topic before the read and again before its records are returned (the
/// token may have been revoked while the read waited).
pub async fn read_once(
    st: &DsState,
    reader: &Reader,
    found: &Found,
    from: ReadFrom,
    wait: Duration,
    consistency: Consistency,
) -> Result<ReadResult, DsError> {
    reader.check(st, found)?;
    let max_bytes = READ_BYTES.min(st.engine.limits.max_read_bytes);
    let r = reader
        .scoped(fork::read(
            st,
            &found.segments,
            from,
            wait,
            READ_RECORDS,
            max_bytes,
            consistency,
        ))
        .await?;
    if !r.records.is_empty() {
        reader.check(st, found)?;
    }
    Ok(r)
}

/// Whether a reader at `next` has reached the end of a closed stream.
pub fn at_closed_end(found: &Found, next: Offset) -> bool {
    found.meta.closed_at.is_some_and(|c| next >= c)
}

/// The body of a read: values back to back, or a JSON array of messages.
pub fn body(found: &Found, r: &ReadResult) -> Vec<u8> {
    let values = r
        .records
        .iter()
        .map(|(_, rec)| rec.value.as_deref().unwrap_or_default());
    if json::is_json(&found.meta.content_type) {
        json::array(values)
    } else {
        values.flatten().copied().collect()
    }
}

fn etag(from: ReadFrom, r: &ReadResult, closed: bool) -> String {
    let start = match from {
        ReadFrom::At(o) => token(o),
        ReadFrom::Start => "s".into(),
        ReadFrom::End => "e".into(),
    };
    format!("\"{start}-{}{}\"", token(r.next_offset), if closed { "-c" } else { "" })
}

fn now_secs(st: &DsState) -> u64 {
    (st.engine.clock.now_ms() / 1000).max(0) as u64
}

pub async fn get(
    st: &std::sync::Arc<DsState>,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, DsError> {
    let q = parse_query(query).map_err(DsError::bad)?;
    let found = stream::find(st, path).await?;
    let reader = Reader::current();
    // Before anything is touched: a fork's reader needs read on its sources too.
    reader.check(st, &found)?;
    stream::touch_for_read(st, &found).await;
    if q.live == Live::Sse {
        return sse::serve(st, reader, found, &q).await;
    }
    let from = read_from(q.offset);
    let mut r = read_once(st, &reader, &found, from, Duration::ZERO, q.consistency).await?;
    let mut found = found;
    let live = q.live == Live::LongPoll;
    if live && r.records.is_empty() && !at_closed_end(&found, r.next_offset) {
        // Long poll: wait for data or the stream's closure.
        let deadline = tokio::time::Instant::now() + LONG_POLL;
        let at = ReadFrom::At(r.next_offset);
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            r = read_once(st, &reader, &found, at, left.min(WAIT_SLICE), q.consistency).await?;
            if !r.records.is_empty() {
                break;
            }
            found = stream::find(st, path).await?;
            if at_closed_end(&found, r.next_offset) {
                break;
            }
        }
    }
    let up_to_date = r.next_offset >= r.high_watermark;
    let closed = up_to_date && at_closed_end(&found, r.next_offset);
    let tag = etag(from, &r, closed);
    let base = |status| {
        let reply = Reply::new(status)
            .header(h::NEXT_OFFSET, token(r.next_offset))
            .header_if(up_to_date, h::UP_TO_DATE, "true")
            .header_if(closed, h::CLOSED, "true");
        if live {
            let c = offset::cursor(now_secs(st), q.cursor.as_deref());
            reply.header(h::CURSOR, c.to_string())
        } else {
            reply
        }
    };
    if live && r.records.is_empty() {
        return Ok(no_store(base(StatusCode::NO_CONTENT)).build());
    }
    let matches = headers
        .get("if-none-match")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
    if matches {
        return Ok(base(StatusCode::NOT_MODIFIED).header("etag", &tag).build());
    }
    let reply = base(StatusCode::OK)
        .header("content-type", &found.meta.content_type)
        .header("etag", &tag);
    let reply = if up_to_date || live || q.offset == Some(Start::Now) {
        no_store(reply)
    } else {
        reply.header("cache-control", "public, max-age=60, stale-while-revalidate=300")
    };
    Ok(reply.body(body(&found, &r)).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse() {
        let q = parse_query(Some("offset=-1&live=long-poll&cursor=7&foo=bar")).unwrap();
        assert_eq!(q.offset, Some(Start::Beginning));
        assert_eq!(q.live, Live::LongPoll);
        assert_eq!(q.cursor.as_deref(), Some("7"));
        assert_eq!(parse_query(None).unwrap().offset, None);
        assert_eq!(parse_query(Some("offset=now&live=sse")).unwrap().live, Live::Sse);
        assert_eq!(parse_query(None).unwrap().consistency, Consistency::Local);
        let strong = parse_query(Some("offset=-1&live=long-poll&consistency=strong")).unwrap();
        assert_eq!(strong.consistency, Consistency::Strong);
        assert!(parse_query(Some("consistency=eventual")).is_err());
        assert!(parse_query(Some("offset=now&live=sse&consistency=strong")).is_err());
    }

    #[test]
    fn bad_queries_are_refused() {
        for bad in [
            "offset=",
            "offset=a&offset=b",
            "offset=0%2C1",
            "offset=0%201",
            "live=sse",
            "live=long-poll",
            "offset=-1&live=push",
            "offset=%zz",
        ] {
            assert!(parse_query(Some(bad)).is_err(), "{bad}");
        }
    }
}
