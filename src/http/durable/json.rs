//! JSON mode: a body is one JSON value; a top-level array is a batch whose
//! elements are the messages (flattened one level), anything else is one
//! message. Messages are stored as the exact bytes the client sent, so a
//! read returns them unchanged, joined into one array.

use bytes::Bytes;

/// Why a JSON body was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum JsonError {
    Invalid(String),
    EmptyArray,
    /// More messages than the request may hold (413).
    TooMany(usize),
}

/// Whether a content type is JSON mode (`application/json`, any case,
/// parameters ignored).
pub fn is_json(content_type: &str) -> bool {
    super::headers::media_type(content_type) == "application/json"
}

/// The messages of a JSON body, each as the bytes of its value; at most
/// `max` of them (each costs a record in memory, so a body of tiny values
/// is refused rather than turned into millions of records).
pub fn messages(body: &Bytes, max: usize) -> Result<Vec<Bytes>, JsonError> {
    serde_json::from_slice::<serde::de::IgnoredAny>(body).map_err(|e| JsonError::Invalid(e.to_string()))?;
    let start = body.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(0);
    if body[start] != b'[' {
        return Ok(vec![trimmed(body, start, body.len())]);
    }
    // A valid array: split its elements at top-level commas.
    let mut out = Vec::new();
    let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
    let mut from = start + 1;
    for (i, &b) in body.iter().enumerate().skip(start) {
        if in_str {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    let last = trimmed(body, from, i);
                    if !last.is_empty() && out.len() >= max {
                        return Err(JsonError::TooMany(max));
                    }
                    if !last.is_empty() {
                        out.push(last);
                    }
                    break;
                }
            }
            b',' if depth == 1 => {
                if out.len() >= max {
                    return Err(JsonError::TooMany(max));
                }
                out.push(trimmed(body, from, i));
                from = i + 1;
            }
            _ => {}
        }
    }
    if out.is_empty() {
        return Err(JsonError::EmptyArray);
    }
    Ok(out)
}

fn trimmed(body: &Bytes, mut from: usize, mut to: usize) -> Bytes {
    while from < to && body[from].is_ascii_whitespace() {
        from += 1;
    }
    while to > from && body[to - 1].is_ascii_whitespace() {
        to -= 1;
    }
    body.slice(from..to)
}

/// Most messages one JSON-mode request may hold: each counts
/// [`RECORD_OVERHEAD`](crate::http::RECORD_OVERHEAD) bytes against
/// `--max-request-bytes`, like a record of a native JSON append.
pub(crate) fn max_messages(st: &super::DsState) -> usize {
    (st.engine.limits.max_request_bytes / crate::http::RECORD_OVERHEAD).max(1)
}

/// The 413 for a body of more than `max` messages.
pub(crate) fn too_many(max: usize) -> super::reply::DsError {
    super::reply::DsError::new(
        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the body holds more than {max} JSON messages: each counts {} bytes against --max-request-bytes",
            crate::http::RECORD_OVERHEAD
        ),
    )
}

/// Messages as one JSON array.
pub fn array<'a>(messages: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = vec![b'['];
    for (i, m) in messages.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(m);
    }
    out.push(b']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(s: &str) -> Result<Vec<String>, JsonError> {
        messages(&Bytes::from(s.to_string()), 100)
            .map(|v| v.into_iter().map(|b| String::from_utf8(b.to_vec()).unwrap()).collect())
    }

    #[test]
    fn a_single_value_is_one_message() {
        assert_eq!(msgs(r#" {"a": [1, 2]} "#).unwrap(), vec![r#"{"a": [1, 2]}"#]);
        assert_eq!(msgs("42").unwrap(), vec!["42"]);
        assert_eq!(msgs("null").unwrap(), vec!["null"]);
    }

    #[test]
    fn arrays_are_flattened_one_level_byte_exactly() {
        assert_eq!(
            msgs(r#"[{"id":1}, [1,2] ,"a,]\"}", 1.50e3 ]"#).unwrap(),
            vec![r#"{"id":1}"#, "[1,2]", r#""a,]\"}""#, "1.50e3"]
        );
        assert_eq!(msgs("[[[1,2,3]]]").unwrap(), vec!["[[1,2,3]]"]);
    }

    #[test]
    fn invalid_json_and_empty_arrays_are_refused() {
        assert!(matches!(msgs("{ invalid json }"), Err(JsonError::Invalid(_))));
        assert!(matches!(msgs(""), Err(JsonError::Invalid(_))));
        assert!(matches!(msgs("[1,]"), Err(JsonError::Invalid(_))));
        assert_eq!(msgs(" [ ] "), Err(JsonError::EmptyArray));
    }

    #[test]
    fn more_messages_than_the_limit_are_refused() {
        assert_eq!(messages(&Bytes::from_static(b"[1,2,3]"), 3).unwrap().len(), 3);
        assert_eq!(messages(&Bytes::from_static(b"[1,2,3]"), 2), Err(JsonError::TooMany(2)));
        assert_eq!(
            messages(&Bytes::from_static(b"[1,2,3,4]"), 2),
            Err(JsonError::TooMany(2))
        );
        assert_eq!(messages(&Bytes::from_static(b"7"), 1).unwrap().len(), 1);
    }

    #[test]
    fn messages_join_into_an_array() {
        let parts: [&[u8]; 2] = [b"{\"a\":1}", b"2"];
        assert_eq!(array(parts), b"[{\"a\":1},2]");
        assert_eq!(array(std::iter::empty()), b"[]");
    }

    #[test]
    fn json_mode_ignores_case_and_parameters() {
        assert!(is_json("application/json"));
        assert!(is_json("APPLICATION/JSON; charset=utf-8"));
        assert!(!is_json("text/plain"));
    }
}
