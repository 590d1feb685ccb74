//! Appending (`POST .../records`, JSON or raw) and reading (`GET
//! .../partitions/{p}/records`, with long poll).
//!
//! An append request is checked whole — body size, topic, JSON shape, base64,
//! record sizes, partitions — before the engine sees any record, so a refused
//! request has appended nothing.

use super::error::{HttpError, HttpResult};
use super::topics::{body_error, json_error};
use super::{checked_partition, AppState, Shared};
use crate::api::{ApiError, ErrorCode, ReadFrom, ReadRequest, ReadResult};
use crate::ids::Offset;
use crate::stream::batch::{partition_for_key, Record};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::Json;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Header carrying the key of a raw (`application/octet-stream`) append.
pub const KEY_HEADER: &str = "sluice-key";
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 10_000;
pub const DEFAULT_MAX_BYTES: usize = 1024 * 1024;

/// Standard alphabet; padding optional on input, always written on output.
const B64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// How keys, values and header values are written in JSON bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// UTF-8 strings (the default).
    Utf8,
    /// `?encoding=base64`.
    Base64,
}

pub(crate) type Params = HashMap<String, String>;

pub(crate) fn params(q: Result<Query<Params>, QueryRejection>) -> HttpResult<Params> {
    q.map(|Query(p)| p).map_err(|r| {
        HttpError::new(
            ErrorCode::InvalidRequest,
            format!("bad query string: {}", r.body_text()),
        )
    })
}

pub(crate) fn encoding(params: &Params) -> HttpResult<Encoding> {
    match params.get("encoding").map(String::as_str) {
        None | Some("utf8") | Some("utf-8") => Ok(Encoding::Utf8),
        Some("base64") => Ok(Encoding::Base64),
        Some(other) => Err(ApiError::invalid(format!("encoding must be utf8 or base64, got {other:?}")).into()),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------
// Appends

/// One record of a request, validated but not yet placed.
#[derive(Debug)]
struct Incoming {
    partition: Option<u32>,
    record: Record,
}

fn invalid(msg: String) -> HttpError {
    HttpError::new(ErrorCode::InvalidRequest, msg)
}

fn decode_bytes(s: &str, enc: Encoding, what: &str) -> HttpResult<Bytes> {
    match enc {
        Encoding::Utf8 => Ok(Bytes::copy_from_slice(s.as_bytes())),
        Encoding::Base64 => B64
            .decode(s)
            .map(Bytes::from)
            .map_err(|e| invalid(format!("{what}: invalid base64: {e}"))),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `Some(bytes)` for a string, `None` for null or absent.
fn optional_bytes(v: Option<&Value>, enc: Encoding, what: &str) -> HttpResult<Option<Bytes>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => decode_bytes(s, enc, what).map(Some),
        Some(other) => Err(invalid(format!(
            "{what}: expected a string or null, got {}",
            type_name(other)
        ))),
    }
}

fn record_size(r: &Record) -> usize {
    let field = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len);
    field(&r.key) + field(&r.value) + r.headers.iter().map(|(k, v)| k.len() + field(v)).sum::<usize>()
}

/// Parses and checks a JSON append body: `{"records": [...]}`.
fn parse_json(body: &[u8], enc: Encoding, timestamp_ms: i64, max_record_bytes: usize) -> HttpResult<Vec<Incoming>> {
    let top: Value = serde_json::from_slice(body).map_err(json_error)?;
    let Value::Object(mut top) = top else {
        return Err(invalid(format!(
            "body must be an object {{\"records\": [...]}}, got {}",
            type_name(&top)
        )));
    };
    if let Some(k) = top.keys().find(|k| k.as_str() != "records") {
        return Err(invalid(format!(
            "unknown field {k:?} in body; expected only \"records\""
        )));
    }
    let records = match top.remove("records") {
        None => return Err(invalid("missing field \"records\"".into())),
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(invalid(format!(
                "\"records\" must be an array, got {}",
                type_name(&other)
            )))
        }
    };
    if records.is_empty() {
        return Err(invalid("\"records\" is empty; send at least one record".into()));
    }
    let mut out = Vec::with_capacity(records.len());
    for (i, r) in records.into_iter().enumerate() {
        let Value::Object(r) = r else {
            return Err(invalid(format!(
                "records[{i}] must be an object, got {}",
                type_name(&r)
            )));
        };
        if let Some(k) = r
            .keys()
            .find(|k| !matches!(k.as_str(), "key" | "value" | "headers" | "partition"))
        {
            return Err(invalid(format!(
                "records[{i}]: unknown field {k:?}; expected key, value, headers, partition"
            )));
        }
        let key = optional_bytes(r.get("key"), enc, &format!("records[{i}].key"))?;
        if !r.contains_key("value") {
            return Err(invalid(format!(
                "records[{i}]: missing field \"value\" (use null for a tombstone)"
            )));
        }
        let value = optional_bytes(r.get("value"), enc, &format!("records[{i}].value"))?;
        let headers = match r.get("headers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(h)) => {
                let mut headers = Vec::with_capacity(h.len());
                for (name, v) in h {
                    let v = optional_bytes(Some(v), enc, &format!("records[{i}].headers.{name}"))?;
                    headers.push((name.clone(), v));
                }
                headers
            }
            Some(other) => {
                return Err(invalid(format!(
                    "records[{i}].headers: expected an object of strings, got {}",
                    type_name(other)
                )))
            }
        };
        let partition = match r.get("partition") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => match n.as_u64().and_then(|p| u32::try_from(p).ok()) {
                Some(p) => Some(p),
                None => {
                    return Err(invalid(format!(
                        "records[{i}].partition: expected a partition number, got {n}"
                    )))
                }
            },
            Some(other) => {
                return Err(invalid(format!(
                    "records[{i}].partition: expected a partition number, got {}",
                    type_name(other)
                )))
            }
        };
        let record = Record {
            timestamp_ms,
            key,
            value,
            headers,
        };
        check_size(&record, max_record_bytes, &format!("records[{i}]"))?;
        out.push(Incoming { partition, record });
    }
    Ok(out)
}

fn check_size(record: &Record, max: usize, what: &str) -> HttpResult<()> {
    let size = record_size(record);
    if size > max {
        return Err(HttpError::new(
            ErrorCode::RecordTooLarge,
            format!("{what} is {size} bytes (key + value + headers); the limit is {max}"),
        ));
    }
    Ok(())
}

fn is_raw(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.trim().to_ascii_lowercase().starts_with("application/octet-stream"))
}

/// The raw form: the body is one record's value, the key comes from `Sluice-Key`.
fn parse_raw(body: Bytes, headers: &HeaderMap, enc: Encoding, timestamp_ms: i64, max: usize) -> HttpResult<Incoming> {
    let key = match headers.get(KEY_HEADER) {
        None => None,
        Some(v) => {
            let s = v
                .to_str()
                .map_err(|_| invalid("Sluice-Key header must be visible ASCII (use ?encoding=base64)".into()))?;
            Some(decode_bytes(s, enc, "Sluice-Key header")?)
        }
    };
    let record = Record {
        timestamp_ms,
        key,
        value: Some(body),
        headers: Vec::new(),
    };
    check_size(&record, max, "the record")?;
    Ok(Incoming {
        partition: None,
        record,
    })
}

fn parse_body(state: &AppState, headers: &HeaderMap, body: Bytes, enc: Encoding) -> HttpResult<Vec<Incoming>> {
    let ts = now_ms();
    let max = state.limits.max_record_bytes;
    if is_raw(headers) {
        Ok(vec![parse_raw(body, headers, enc, ts, max)?])
    } else {
        parse_json(&body, enc, ts, max)
    }
}

/// Appends each partition's records (in request order) concurrently. Returns
/// the base offset per partition, or the first error.
async fn append_groups(
    state: &AppState,
    topic: &str,
    groups: BTreeMap<u32, Vec<Record>>,
) -> HttpResult<BTreeMap<u32, Offset>> {
    let appends = groups.into_iter().map(|(p, records)| async move {
        let count = records.len();
        let result = state.engine.append(topic, p, records).await;
        (p, count, result)
    });
    let results = futures::future::join_all(appends).await;
    let mut bases = BTreeMap::new();
    let mut first_error: Option<ApiError> = None;
    for (p, count, result) in results {
        match result {
            Ok(a) => {
                debug_assert_eq!(a.count as usize, count);
                bases.insert(p, a.base);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        None => Ok(bases),
        Some(mut e) => {
            if !bases.is_empty() {
                // Appends are atomic per partition only: say what did land, so
                // a client can avoid duplicating it on retry.
                let landed: Vec<String> = bases
                    .iter()
                    .map(|(p, o)| format!("partition {p} at {}", o.get()))
                    .collect();
                e.message = format!("{} (records for {} were appended)", e.message, landed.join(", "));
            }
            Err(e.into())
        }
    }
}

pub async fn append_to_topic(
    State(state): State<Shared>,
    Path(topic): Path<String>,
    query: Result<Query<Params>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> HttpResult<Json<Value>> {
    let body = body.map_err(body_error)?;
    let params = params(query)?;
    let enc = encoding(&params)?;
    let partitions = state.engine.partitions_current(&topic).await?;
    let incoming = parse_body(&state, &headers, body, enc)?;

    // Place every record before appending any.
    let unplaced = incoming
        .iter()
        .filter(|r| r.partition.is_none() && r.record.key.is_none())
        .count() as u64;
    let mut next_rr = state.round_robin.fetch_add(unplaced, Ordering::Relaxed);
    let mut placed = Vec::with_capacity(incoming.len());
    for (i, r) in incoming.into_iter().enumerate() {
        let p = match (r.partition, &r.record.key) {
            (Some(p), _) => {
                if p >= partitions {
                    return Err(HttpError::new(
                        ErrorCode::PartitionNotFound,
                        format!("records[{i}].partition: topic {topic} has partitions 0..{partitions}, not {p}"),
                    ));
                }
                p
            }
            (None, Some(key)) => partition_for_key(key, partitions),
            (None, None) => {
                let p = (next_rr % u64::from(partitions)) as u32;
                next_rr = next_rr.wrapping_add(1);
                p
            }
        };
        placed.push((p, r.record));
    }

    // Group by partition, remembering each record's index within its group.
    let mut groups: BTreeMap<u32, Vec<Record>> = BTreeMap::new();
    let mut positions = Vec::with_capacity(placed.len());
    for (p, record) in placed {
        let group = groups.entry(p).or_default();
        positions.push((p, group.len() as u64));
        group.push(record);
    }
    let bases = append_groups(&state, &topic, groups).await?;
    let offsets: Vec<Value> = positions
        .into_iter()
        .map(|(p, i)| json!({ "partition": p, "offset": bases[&p].plus(i).get() }))
        .collect();
    Ok(Json(json!({ "offsets": offsets })))
}

pub async fn append_to_partition(
    State(state): State<Shared>,
    Path((topic, partition)): Path<(String, String)>,
    query: Result<Query<Params>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> HttpResult<Json<Value>> {
    let body = body.map_err(body_error)?;
    let params = params(query)?;
    let enc = encoding(&params)?;
    let p = checked_partition(&state, &topic, &partition).await?;
    let incoming = parse_body(&state, &headers, body, enc)?;
    let mut records = Vec::with_capacity(incoming.len());
    for (i, r) in incoming.into_iter().enumerate() {
        if let Some(other) = r.partition.filter(|other| *other != p) {
            return Err(invalid(format!(
                "records[{i}].partition is {other} but the path names partition {p}; omit it"
            )));
        }
        records.push(r.record);
    }
    let count = records.len();
    let appended = state.engine.append(&topic, p, records).await?;
    debug_assert_eq!(appended.count as usize, count);
    Ok(Json(
        json!({ "partition": p, "base_offset": appended.base.get(), "count": appended.count }),
    ))
}

// ---------------------------------------------------------------------------
// Reads

fn parse_param<T: std::str::FromStr>(params: &Params, name: &str, code: ErrorCode) -> HttpResult<Option<T>> {
    match params.get(name) {
        None => Ok(None),
        Some(s) => s
            .parse()
            .map(Some)
            .map_err(|_| HttpError::new(code, format!("{name} must be an integer, got {s:?}"))),
    }
}

/// `offset`: absent = the start, `-1` = the end.
pub(crate) fn read_from(params: &Params) -> HttpResult<ReadFrom> {
    match parse_param::<i64>(params, "offset", ErrorCode::InvalidOffset)? {
        None => Ok(ReadFrom::Start),
        Some(-1) => Ok(ReadFrom::End),
        Some(o) if o < 0 => Err(HttpError::new(
            ErrorCode::InvalidOffset,
            format!("offset must be 0 or more, or -1 for the end; got {o}"),
        )),
        Some(o) => Ok(ReadFrom::At(Offset(o as u64))),
    }
}

fn read_request(state: &AppState, params: &Params) -> HttpResult<ReadRequest> {
    let from = read_from(params)?;
    let limit = parse_param::<i64>(params, "limit", ErrorCode::InvalidRequest)?.unwrap_or(DEFAULT_LIMIT as i64);
    if !(1..=MAX_LIMIT as i64).contains(&limit) {
        return Err(invalid(format!("limit must be 1-{MAX_LIMIT}, got {limit}")));
    }
    let max_bytes =
        parse_param::<u64>(params, "max_bytes", ErrorCode::InvalidRequest)?.unwrap_or(DEFAULT_MAX_BYTES as u64);
    if max_bytes == 0 {
        return Err(invalid("max_bytes must be at least 1".into()));
    }
    let wait_ms = parse_param::<u64>(params, "wait_ms", ErrorCode::InvalidRequest)?.unwrap_or(0);
    Ok(ReadRequest {
        from,
        limit: limit as usize,
        max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
        wait: Duration::from_millis(wait_ms).min(state.limits.max_wait),
    })
}

/// Bytes as a JSON string: UTF-8 unless base64 was asked for or the bytes
/// are not UTF-8. Returns whether base64 was used.
fn bytes_json(b: &[u8], enc: Encoding) -> (Value, bool) {
    match (enc, std::str::from_utf8(b)) {
        (Encoding::Utf8, Ok(s)) => (Value::String(s.to_string()), false),
        _ => (Value::String(B64.encode(b)), true),
    }
}

/// A record as JSON: `{"offset", "timestamp", "key", "value", "headers"}`.
///
/// Without `?encoding=base64`, a key, value or set of header values that is not
/// UTF-8 is written in base64 and flagged with `"key_encoding"`,
/// `"value_encoding"` or `"headers_encoding": "base64"`.
pub(crate) fn record_json(offset: Offset, r: &Record, enc: Encoding) -> Value {
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

pub(crate) fn read_result_json(result: &ReadResult, enc: Encoding) -> Value {
    let records: Vec<Value> = result.records.iter().map(|(o, r)| record_json(*o, r, enc)).collect();
    json!({
        "records": records,
        "next_offset": result.next_offset.get(),
        "high_watermark": result.high_watermark.get(),
        "start_offset": result.start_offset.get(),
    })
}

pub async fn read(
    State(state): State<Shared>,
    Path((topic, partition)): Path<(String, String)>,
    query: Result<Query<Params>, QueryRejection>,
) -> HttpResult<Json<Value>> {
    let params = params(query)?;
    let enc = encoding(&params)?;
    let p = checked_partition(&state, &topic, &partition).await?;
    let req = read_request(&state, &params)?;
    let result = state.engine.read(&topic, p, req).await?;
    Ok(Json(read_result_json(&result, enc)))
}
