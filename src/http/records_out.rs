//! Read answers written straight into one byte buffer, never as a
//! `serde_json::Value` tree, and bounded by `--http-max-read-bytes`.
//!
//! The bytes are those a `Value` tree would have printed: keys in sorted
//! order (serde_json's map without `preserve_order`), strings escaped by
//! serde_json itself, a header name given twice keeping its last value.

use super::encoding::{Encoding, B64};
use crate::api::ReadResult;
use crate::batch::Record;
use crate::ids::Offset;
use axum::body::Bytes;
use base64::Engine as _;

/// Room kept at the front of the buffer for `{"high_watermark":H,"next_offset":N,"records":`
/// (84 bytes at most), written once the records are.
const HEAD_ROOM: usize = 96;
/// `],"start_offset":S}`: 38 bytes at most.
const TAIL_ROOM: usize = 40;

fn push_u64(out: &mut Vec<u8>, n: u64) {
    use std::io::Write as _;
    let _ = write!(out, "{n}");
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail");
}

/// `"key":` (keys are constant and need no escaping).
fn push_key(out: &mut Vec<u8>, key: &str) {
    out.push(b'"');
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

/// Bytes as a JSON string: UTF-8 unless base64 was asked for or the bytes
/// are not UTF-8. Returns whether base64 was used.
fn push_bytes(out: &mut Vec<u8>, b: &[u8], enc: Encoding) -> bool {
    match (enc, std::str::from_utf8(b)) {
        (Encoding::Utf8, Ok(s)) => {
            push_str(out, s);
            false
        }
        _ => {
            out.push(b'"');
            let start = out.len();
            out.resize(start + base64::encoded_len(b.len(), true).unwrap_or(0), 0);
            let n = B64.encode_slice(b, &mut out[start..]).expect("sized for the encoding");
            out.truncate(start + n);
            out.push(b'"');
            true
        }
    }
}

/// How a read answer writes a record's headers (`?headers=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeaderForm {
    /// `{"name": value}` (the default): sorted by name, a repeated name
    /// keeping its last value.
    Object,
    /// `[["name", value], ...]`: every header, in stored order.
    List,
}

/// Every header as `["name", value]`, in order.
fn push_header_list(out: &mut Vec<u8>, r: &Record, enc: Encoding) {
    out.push(b'[');
    for (i, (name, value)) in r.headers.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        push_str(out, name);
        out.push(b',');
        match value {
            None => out.extend_from_slice(b"null"),
            Some(v) => {
                push_bytes(out, v, enc);
            }
        }
        out.push(b']');
    }
    out.push(b']');
}

/// A record as JSON: `{"headers", "key", "offset", "timestamp", "value"}`.
///
/// Without `?encoding=base64`, a key, value or set of header values that is
/// not UTF-8 is written in base64 and flagged with `"key_encoding"`,
/// `"value_encoding"` or `"headers_encoding": "base64"`.
pub(crate) fn write_record(out: &mut Vec<u8>, offset: Offset, r: &Record, enc: Encoding, form: HeaderForm) {
    let header_b64 = enc == Encoding::Utf8
        && r.headers
            .iter()
            .any(|(_, v)| v.as_ref().is_some_and(|v| std::str::from_utf8(v).is_err()));
    let header_enc = if header_b64 { Encoding::Base64 } else { enc };
    out.push(b'{');
    push_key(out, "headers");
    if form == HeaderForm::List {
        push_header_list(out, r, header_enc);
    } else {
        push_header_object(out, r, header_enc);
    }
    if header_b64 {
        out.extend_from_slice(b",\"headers_encoding\":\"base64\"");
    }
    write_fields(out, offset, r, enc);
}

/// `{"name": value}`, sorted by name, the last of a repeated name winning.
fn push_header_object(out: &mut Vec<u8>, r: &Record, header_enc: Encoding) {
    out.push(b'{');
    // Sorted by name, the last of a repeated name winning (as a JSON object
    // built by inserting each header in turn would have it).
    let mut order: Vec<usize> = (0..r.headers.len()).collect();
    order.sort_by(|a, b| r.headers[*a].0.cmp(&r.headers[*b].0));
    let mut first = true;
    for (i, &h) in order.iter().enumerate() {
        let (name, value) = &r.headers[h];
        if order.get(i + 1).is_some_and(|&next| r.headers[next].0 == *name) {
            continue;
        }
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        push_str(out, name);
        out.push(b':');
        match value {
            None => out.extend_from_slice(b"null"),
            Some(v) => {
                push_bytes(out, v, header_enc);
            }
        }
    }
    out.push(b'}');
}

/// The fields after `headers`, and the record's closing brace.
fn write_fields(out: &mut Vec<u8>, offset: Offset, r: &Record, enc: Encoding) {
    let field = |out: &mut Vec<u8>, name: &str, value: &Option<Bytes>| {
        out.push(b',');
        push_key(out, name);
        match value {
            None => out.extend_from_slice(b"null"),
            Some(b) => {
                if push_bytes(out, b, enc) && enc == Encoding::Utf8 {
                    out.extend_from_slice(format!(",\"{name}_encoding\":\"base64\"").as_bytes());
                }
            }
        }
    };
    field(out, "key", &r.key);
    out.push(b',');
    push_key(out, "offset");
    push_u64(out, offset.get());
    out.push(b',');
    push_key(out, "timestamp");
    {
        use std::io::Write as _;
        let _ = write!(out, "{}", r.timestamp_ms);
    }
    field(out, "value", &r.value);
    out.push(b'}');
}

/// One record's JSON (an SSE event's `data`).
pub(crate) fn record_text(offset: Offset, r: &Record, enc: Encoding, form: HeaderForm) -> String {
    let mut out = Vec::with_capacity(96 + crate::stream::partition::record_size(r) * 4 / 3);
    write_record(&mut out, offset, r, enc, form);
    String::from_utf8(out).expect("JSON written from str and base64 is UTF-8")
}

/// `{"high_watermark", "next_offset", "records", "start_offset"}`, at most
/// `cap` bytes: records that would pass it are left for the next read (and
/// `next_offset` points at the first of them), except that the first
/// record is always written.
pub(crate) fn read_answer(result: &ReadResult, enc: Encoding, form: HeaderForm, cap: usize) -> Bytes {
    let budget = cap.saturating_sub(HEAD_ROOM + TAIL_ROOM);
    let mut out = vec![0u8; HEAD_ROOM];
    out.push(b'[');
    let mut next = result.next_offset;
    for (i, (offset, record)) in result.records.iter().enumerate() {
        let mark = out.len();
        if i > 0 {
            out.push(b',');
        }
        write_record(&mut out, *offset, record, enc, form);
        if i > 0 && out.len() - HEAD_ROOM > budget {
            out.truncate(mark);
            next = *offset;
            break;
        }
    }
    out.extend_from_slice(b"],\"start_offset\":");
    push_u64(&mut out, result.start_offset.get());
    out.push(b'}');
    let head = format!(
        "{{\"high_watermark\":{},\"next_offset\":{},\"records\":",
        result.high_watermark.get(),
        next.get()
    );
    let start = HEAD_ROOM - head.len();
    out[start..HEAD_ROOM].copy_from_slice(head.as_bytes());
    Bytes::from(out).slice(start..)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map, Value};

    /// The tree the answers were built as before: the reference they must
    /// match byte for byte.
    fn tree(offset: Offset, r: &Record, enc: Encoding) -> Value {
        fn bytes_json(b: &[u8], enc: Encoding) -> (Value, bool) {
            match (enc, std::str::from_utf8(b)) {
                (Encoding::Utf8, Ok(s)) => (Value::String(s.to_string()), false),
                _ => (Value::String(B64.encode(b)), true),
            }
        }
        let mut obj = Map::new();
        obj.insert("offset".into(), json!(offset.get()));
        obj.insert("timestamp".into(), json!(r.timestamp_ms));
        for (name, field) in [("key", &r.key), ("value", &r.value)] {
            match field {
                None => {
                    obj.insert(name.into(), Value::Null);
                }
                Some(b) => {
                    let (v, b64) = bytes_json(b, enc);
                    obj.insert(name.into(), v);
                    if b64 && enc == Encoding::Utf8 {
                        obj.insert(format!("{name}_encoding"), json!("base64"));
                    }
                }
            }
        }
        let header_enc = if enc == Encoding::Utf8
            && r.headers
                .iter()
                .any(|(_, v)| v.as_ref().is_some_and(|v| std::str::from_utf8(v).is_err()))
        {
            obj.insert("headers_encoding".into(), json!("base64"));
            Encoding::Base64
        } else {
            enc
        };
        let headers: Map<String, Value> = r
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_ref().map_or(Value::Null, |v| bytes_json(v, header_enc).0),
                )
            })
            .collect();
        obj.insert("headers".into(), Value::Object(headers));
        Value::Object(obj)
    }

    fn rec(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[(&str, Option<&[u8]>)]) -> Record {
        Record {
            timestamp_ms: -3,
            key: key.map(Bytes::copy_from_slice),
            value: value.map(Bytes::copy_from_slice),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(Bytes::copy_from_slice)))
                .collect(),
        }
    }

    fn samples() -> Vec<Record> {
        vec![
            rec(None, None, &[]),
            rec(
                Some(b"k"),
                Some(b"v \"q\" \\ \n\t\x01 \xc3\xa9 \xf0\x9f\x98\x80 </"),
                &[],
            ),
            rec(Some(b"\xff\x00"), Some(b"\x80"), &[("b", Some(b"2")), ("a", None)]),
            rec(None, Some(b""), &[("h", Some(b"\xfe")), ("g", Some(b"ok"))]),
            rec(
                Some(b""),
                Some(b"x"),
                &[("d", Some(b"1")), ("c", Some(b"x")), ("d", Some(b"2"))],
            ),
            rec(None, Some(b"v"), &[("\u{1}\"", Some(b"\""))]),
        ]
    }

    #[test]
    fn records_are_written_as_the_value_tree_printed_them() {
        for enc in [Encoding::Utf8, Encoding::Base64] {
            for (i, r) in samples().iter().enumerate() {
                let expected = tree(Offset(i as u64 * 1000), r, enc).to_string();
                assert_eq!(
                    record_text(Offset(i as u64 * 1000), r, enc, HeaderForm::Object),
                    expected,
                    "{enc:?} {r:?}"
                );
            }
        }
    }

    fn result(records: Vec<Record>) -> ReadResult {
        let n = records.len() as u64;
        ReadResult {
            records: records
                .into_iter()
                .enumerate()
                .map(|(i, r)| (Offset(10 + i as u64), r))
                .collect(),
            next_offset: Offset(10 + n),
            high_watermark: Offset(u64::MAX),
            start_offset: Offset(3),
        }
    }

    #[test]
    fn an_answer_matches_the_tree_when_it_fits() {
        let r = result(samples());
        for enc in [Encoding::Utf8, Encoding::Base64] {
            let records: Vec<Value> = r.records.iter().map(|(o, rec)| tree(*o, rec, enc)).collect();
            let expected = json!({
                "records": records,
                "next_offset": r.next_offset.get(),
                "high_watermark": r.high_watermark.get(),
                "start_offset": r.start_offset.get(),
            })
            .to_string();
            assert_eq!(
                &read_answer(&r, enc, HeaderForm::Object, usize::MAX)[..],
                expected.as_bytes()
            );
        }
        let empty = read_answer(&result(Vec::new()), Encoding::Utf8, HeaderForm::Object, 1);
        assert_eq!(
            &empty[..],
            format!(
                r#"{{"high_watermark":{},"next_offset":10,"records":[],"start_offset":3}}"#,
                u64::MAX
            )
            .as_bytes()
        );
    }

    #[test]
    fn the_list_form_keeps_every_header_in_order() {
        let r = rec(
            None,
            Some(b"x"),
            &[("d", Some(b"1")), ("c", None), ("d", Some(b"\xff"))],
        );
        let v: Value = serde_json::from_str(&record_text(Offset(5), &r, Encoding::Utf8, HeaderForm::List)).unwrap();
        assert_eq!(v["headers"], json!([["d", "MQ=="], ["c", null], ["d", "/w=="]]));
        assert_eq!(
            v["headers_encoding"], "base64",
            "one header is not UTF-8: all are base64"
        );
        let v: Value = serde_json::from_str(&record_text(Offset(5), &r, Encoding::Base64, HeaderForm::List)).unwrap();
        assert_eq!(v["headers"], json!([["d", "MQ=="], ["c", null], ["d", "/w=="]]));
        let plain = rec(None, None, &[("b", Some(b"2")), ("a", Some(b"1")), ("b", Some(b"3"))]);
        let v: Value = serde_json::from_str(&record_text(Offset(5), &plain, Encoding::Utf8, HeaderForm::List)).unwrap();
        assert_eq!(v["headers"], json!([["b", "2"], ["a", "1"], ["b", "3"]]));
        assert_eq!(v["value"], Value::Null);
        let v: Value =
            serde_json::from_str(&record_text(Offset(5), &plain, Encoding::Utf8, HeaderForm::Object)).unwrap();
        assert_eq!(v["headers"], json!({"a": "1", "b": "3"}), "the object form as before");
    }

    #[test]
    fn an_answer_stops_before_the_cap_but_always_has_one_record() {
        let big = |c: u8| rec(None, Some(&vec![c; 1000]), &[]);
        let r = result(vec![big(b'a'), big(b'b'), big(b'c'), big(b'd')]);
        let cap = 2500;
        let body = read_answer(&r, Encoding::Utf8, HeaderForm::Object, cap);
        assert!(body.len() <= cap, "{}", body.len());
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["records"].as_array().unwrap().len(), 2);
        assert_eq!(v["next_offset"], 12, "the first record left out is next");
        let one = read_answer(&r, Encoding::Utf8, HeaderForm::Object, 10);
        let v: Value = serde_json::from_slice(&one).unwrap();
        assert_eq!(
            v["records"].as_array().unwrap().len(),
            1,
            "one record even over the cap"
        );
        assert_eq!(v["next_offset"], 11);
    }
}
