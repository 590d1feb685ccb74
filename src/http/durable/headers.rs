//! Request headers of the protocol, parsed and checked before anything
//! changes.

use axum::http::HeaderMap;

pub const NEXT_OFFSET: &str = "stream-next-offset";
pub const UP_TO_DATE: &str = "stream-up-to-date";
pub const CURSOR: &str = "stream-cursor";
pub const CLOSED: &str = "stream-closed";
pub const SEQ: &str = "stream-seq";
pub const TTL: &str = "stream-ttl";
pub const EXPIRES_AT: &str = "stream-expires-at";
pub const SSE_ENCODING: &str = "stream-sse-data-encoding";
pub const PRODUCER_ID: &str = "producer-id";
pub const PRODUCER_EPOCH: &str = "producer-epoch";
pub const PRODUCER_SEQ: &str = "producer-seq";
pub const PRODUCER_EXPECTED_SEQ: &str = "producer-expected-seq";
pub const PRODUCER_RECEIVED_SEQ: &str = "producer-received-seq";

/// Content type of a stream created without one.
pub const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";

/// The media type of a content type: lower case, parameters dropped.
pub fn media_type(content_type: &str) -> String {
    content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

fn text<'a>(h: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, String> {
    match h.get(name) {
        None => Ok(None),
        Some(v) => v.to_str().map(Some).map_err(|_| format!("{name} is not visible ASCII")),
    }
}

/// A non-negative decimal integer with no sign, no leading zeros, no
/// fraction or exponent.
fn plain_integer(name: &str, s: &str) -> Result<u64, String> {
    let ok = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if !ok {
        return Err(format!("{name} must be a non-negative integer, got {s:?}"));
    }
    s.parse().map_err(|_| format!("{name} {s:?} is too large"))
}

pub fn content_type(h: &HeaderMap) -> Result<Option<String>, String> {
    Ok(text(h, "content-type")?
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string))
}

/// The lifetime asked for at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lifetime {
    pub ttl_secs: Option<u64>,
    pub expires_at_ms: Option<i64>,
}

pub fn lifetime(h: &HeaderMap) -> Result<Lifetime, String> {
    let ttl_secs = text(h, TTL)?
        .map(|s| plain_integer("Stream-TTL", s.trim()))
        .transpose()?;
    let expires_at_ms = text(h, EXPIRES_AT)?
        .map(|s| {
            super::time::parse_rfc3339(s.trim())
                .ok_or_else(|| format!("Stream-Expires-At must be an RFC 3339 timestamp, got {s:?}"))
        })
        .transpose()?;
    if ttl_secs.is_some() && expires_at_ms.is_some() {
        return Err("Stream-TTL and Stream-Expires-At cannot both be given".into());
    }
    Ok(Lifetime {
        ttl_secs,
        expires_at_ms,
    })
}

pub fn closed(h: &HeaderMap) -> Result<bool, String> {
    match text(h, CLOSED)? {
        None => Ok(false),
        Some(v) if v.trim().eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.trim().eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(format!("Stream-Closed must be true or false, got {v:?}")),
    }
}

/// Longest `Stream-Seq` accepted. The protocol leaves the value opaque
/// (compared as bytes); every stream keeps its last one in the metadata
/// log, so it is bounded: 128 bytes holds a timestamp and a UUID.
pub const MAX_SEQ_BYTES: usize = 128;

pub fn stream_seq(h: &HeaderMap) -> Result<Option<String>, String> {
    match text(h, SEQ)? {
        Some(s) if s.len() > MAX_SEQ_BYTES => Err(format!(
            "Stream-Seq is {} bytes; at most {MAX_SEQ_BYTES} are accepted",
            s.len()
        )),
        s => Ok(s.map(str::to_string)),
    }
}

/// The idempotent-producer headers of an append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Producer {
    pub id: String,
    pub epoch: u64,
    pub seq: u64,
}

/// All three `Producer-*` headers, or none.
pub fn producer(h: &HeaderMap) -> Result<Option<Producer>, String> {
    let (id, epoch, seq) = (text(h, PRODUCER_ID)?, text(h, PRODUCER_EPOCH)?, text(h, PRODUCER_SEQ)?);
    match (id, epoch, seq) {
        (None, None, None) => Ok(None),
        (Some(id), Some(epoch), Some(seq)) => {
            if id.is_empty() {
                return Err("Producer-Id must not be empty".into());
            }
            Ok(Some(Producer {
                id: id.to_string(),
                epoch: plain_integer("Producer-Epoch", epoch.trim())?,
                seq: plain_integer("Producer-Seq", seq.trim())?,
            }))
        }
        _ => Err("Producer-Id, Producer-Epoch and Producer-Seq must be given together".into()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use axum::http::HeaderValue;

    /// A header map of `(name, value)` pairs, for tests.
    pub(crate) fn map(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn ttl_is_a_plain_integer() {
        assert_eq!(lifetime(&map(&[(TTL, "3600")])).unwrap().ttl_secs, Some(3600));
        assert_eq!(lifetime(&map(&[(TTL, "0")])).unwrap().ttl_secs, Some(0));
        for bad in ["abc", "-1", "00060", "+60", "60.5", "1e3", ""] {
            assert!(lifetime(&map(&[(TTL, bad)])).is_err(), "{bad}");
        }
    }

    #[test]
    fn ttl_and_expires_at_exclude_each_other() {
        let at = "2030-01-01T00:00:00Z";
        assert!(lifetime(&map(&[(EXPIRES_AT, at)])).unwrap().expires_at_ms.is_some());
        assert!(lifetime(&map(&[(TTL, "1"), (EXPIRES_AT, at)])).is_err());
        assert!(lifetime(&map(&[(EXPIRES_AT, "not-a-timestamp")])).is_err());
    }

    #[test]
    fn producer_headers_come_together_and_are_integers() {
        let ok = map(&[(PRODUCER_ID, "p"), (PRODUCER_EPOCH, "1"), (PRODUCER_SEQ, "0")]);
        assert_eq!(
            producer(&ok).unwrap(),
            Some(Producer {
                id: "p".into(),
                epoch: 1,
                seq: 0
            })
        );
        assert_eq!(producer(&HeaderMap::new()).unwrap(), None);
        assert!(producer(&map(&[(PRODUCER_ID, "p")])).is_err());
        assert!(producer(&map(&[(PRODUCER_ID, "p"), (PRODUCER_EPOCH, "0")])).is_err());
        assert!(producer(&map(&[(PRODUCER_ID, ""), (PRODUCER_EPOCH, "0"), (PRODUCER_SEQ, "0")])).is_err());
        for bad in ["1abc", "0xyz", "1e3", "-1"] {
            let h = map(&[(PRODUCER_ID, "p"), (PRODUCER_EPOCH, bad), (PRODUCER_SEQ, "0")]);
            assert!(producer(&h).is_err(), "{bad}");
        }
    }

    #[test]
    fn stream_seq_is_bounded() {
        let at_limit = "s".repeat(MAX_SEQ_BYTES);
        assert_eq!(stream_seq(&map(&[(SEQ, &at_limit)])).unwrap(), Some(at_limit.clone()));
        let err = stream_seq(&map(&[(SEQ, &format!("{at_limit}x"))])).unwrap_err();
        assert!(err.contains("at most 128"), "{err}");
        assert_eq!(stream_seq(&HeaderMap::new()).unwrap(), None);
    }

    #[test]
    fn media_types_ignore_case_and_parameters() {
        assert_eq!(media_type(" Application/JSON ; charset=utf-8"), "application/json");
        assert!(closed(&map(&[(CLOSED, "TRUE")])).unwrap());
        assert!(closed(&map(&[(CLOSED, "maybe")])).is_err());
    }
}
