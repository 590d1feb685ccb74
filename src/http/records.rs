//! Appending (`POST .../records`, JSON or raw) and reading (`GET
//! .../partitions/{p}/records`, with long poll).
//!
//! An append request is checked whole — body size, topic, JSON shape, base64,
//! record sizes, partitions — before the engine sees any record, so a refused
//! request has appended nothing.

use super::error::{HttpError, HttpResult};
use super::records_in::{check_size, parse_json, BodyLimits, Incoming};
use super::records_out::{read_answer, HeaderForm};
use super::topics::body_error;
use super::{checked_partition, AppState, Shared};
use crate::api::{ApiError, Consistency, ErrorCode, ReadFrom, ReadRequest};
use crate::batch::{partition_for_key, Record};
use crate::ids::Offset;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::Json;
use base64::Engine as _;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Header carrying the key of a raw (`application/octet-stream`) append.
pub const KEY_HEADER: &str = "sluice-key";
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 10_000;
pub const DEFAULT_MAX_BYTES: usize = 1024 * 1024;

pub(crate) use super::encoding::{Encoding, B64};

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

/// `headers=object` (the default) or `headers=list`: how a read answer
/// writes each record's headers.
pub(crate) fn header_form(params: &Params) -> HttpResult<HeaderForm> {
    match params.get("headers").map(String::as_str) {
        None | Some("object") => Ok(HeaderForm::Object),
        Some("list") => Ok(HeaderForm::List),
        Some(other) => Err(ApiError::invalid(format!("headers must be object or list, got {other:?}")).into()),
    }
}

// ---------------------------------------------------------------------------
// Appends

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
    let ts = state.engine.clock.now_ms();
    let max = state.limits.max_record_bytes;
    if is_raw(headers) {
        Ok(vec![parse_raw(body, headers, enc, ts, max)?])
    } else {
        let limits = BodyLimits {
            max_record_bytes: max,
            max_request_bytes: state.limits.max_request_bytes,
        };
        parse_json(&body, enc, ts, limits)
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
        let result = state.engine.records.append(topic, p, records).await;
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

/// A compacted topic keeps the latest record of each key, so a record
/// without one is refused (as Kafka refuses it with `INVALID_RECORD`) and
/// nothing of the request is appended.
fn require_keys<'a>(state: &Shared, topic: &str, records: impl IntoIterator<Item = &'a Record>) -> HttpResult<()> {
    if !state.engine.topics.config(topic).is_ok_and(|c| c.compacts()) {
        return Ok(());
    }
    match records.into_iter().position(|r| r.key.is_none()) {
        Some(i) => Err(invalid(format!(
            "records[{i}] has no key: topic {topic} is compacted (cleanup_policy) and keeps the latest record of each key"
        ))),
        None => Ok(()),
    }
}

pub async fn append_to_topic(
    State(state): State<Shared>,
    Path(topic): Path<String>,
    query: Result<Query<Params>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> HttpResult<axum::response::Response> {
    let body = body.map_err(body_error)?;
    let params = params(query)?;
    let enc = encoding(&params)?;
    let partitions = state.engine.topics.partitions_current(&topic).await?;
    let incoming = parse_body(&state, &headers, body, enc)?;
    require_keys(&state, &topic, incoming.iter().map(|r| &r.record))?;

    // Place every record before appending any, grouping them by partition
    // and remembering each one's place in its group (for `offsets`).
    let listed = incoming.len() <= OFFSETS_LISTED;
    let unplaced = incoming
        .iter()
        .filter(|r| r.partition.is_none() && r.record.key.is_none())
        .count() as u64;
    let mut next_rr = state.round_robin.fetch_add(unplaced, Ordering::Relaxed);
    let mut groups: BTreeMap<u32, Vec<Record>> = BTreeMap::new();
    let mut positions = Vec::with_capacity(if listed { incoming.len() } else { 0 });
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
        let group = groups.entry(p).or_default();
        if listed {
            positions.push((p, group.len() as u64));
        }
        group.push(r.record);
    }
    let counts: BTreeMap<u32, usize> = groups.iter().map(|(p, g)| (*p, g.len())).collect();
    let bases = append_groups(&state, &topic, groups).await?;
    Ok(append_answer(&bases, &counts, listed.then_some(&positions[..])))
}

/// Requests of at most this many records are also answered with one
/// `offsets` entry per record; larger ones only with `ranges`.
pub const OFFSETS_LISTED: usize = 1000;

/// `{"offsets": [...], "ranges": [...]}`, written without a value tree:
/// `ranges` has one `{"partition", "base_offset", "count"}` per partition
/// (its records got consecutive offsets in request order), `offsets` one
/// `{"partition", "offset"}` per record in request order when `positions`
/// (each record's partition and place among that partition's records) is
/// given.
fn append_answer(
    bases: &BTreeMap<u32, Offset>,
    counts: &BTreeMap<u32, usize>,
    positions: Option<&[(u32, u64)]>,
) -> axum::response::Response {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(64 + 48 * (counts.len() + positions.map_or(0, <[_]>::len)));
    out.push('{');
    if let Some(positions) = positions {
        out.push_str("\"offsets\":[");
        for (i, (p, at)) in positions.iter().enumerate() {
            let sep = if i > 0 { "," } else { "" };
            let _ = write!(
                out,
                "{sep}{{\"offset\":{},\"partition\":{p}}}",
                bases[p].plus(*at).get()
            );
        }
        out.push_str("],");
    }
    out.push_str("\"ranges\":[");
    for (i, (p, count)) in counts.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let _ = write!(
            out,
            "{sep}{{\"base_offset\":{},\"count\":{count},\"partition\":{p}}}",
            bases[p].get()
        );
    }
    out.push_str("]}");
    json_bytes(Bytes::from(out))
}

/// A JSON body written by hand, as a response.
pub(crate) fn json_bytes(body: Bytes) -> axum::response::Response {
    use axum::response::IntoResponse;
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
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
    if let Some(write) = headers.get(crate::api::DS_WRITE_HEADER) {
        return append_durable_forwarded(&state, &topic, p, write, &headers, body, enc).await;
    }
    let incoming = parse_body(&state, &headers, body, enc)?;
    require_keys(&state, &topic, incoming.iter().map(|r| &r.record))?;
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
    let appended = state.engine.records.append(&topic, p, records).await?;
    debug_assert_eq!(appended.count as usize, count);
    Ok(Json(
        json!({ "partition": p, "base_offset": appended.base.get(), "count": appended.count }),
    ))
}

/// A Durable Streams append forwarded by another node: its write in the
/// header, its records (none for a check only) in the body, as that node's
/// `Forwarder` sends them. Answered with the sequencer's outcome.
async fn append_durable_forwarded(
    state: &AppState,
    topic: &str,
    p: u32,
    write: &axum::http::HeaderValue,
    headers: &HeaderMap,
    body: Bytes,
    enc: Encoding,
) -> HttpResult<Json<Value>> {
    if !crate::api::is_forwarded() {
        return Err(invalid(format!(
            "{} is only accepted from another node of the cluster",
            crate::api::DS_WRITE_HEADER
        )));
    }
    let write: crate::meta::writers::DsWrite = write
        .to_str()
        .ok()
        .and_then(|w| serde_json::from_str(w).ok())
        .ok_or_else(|| {
            invalid(format!(
                "{} is not a Durable Streams write",
                crate::api::DS_WRITE_HEADER
            ))
        })?;
    let records = if body.is_empty() {
        Vec::new()
    } else {
        parse_body(state, headers, body, enc)?
            .into_iter()
            .map(|r| r.record)
            .collect()
    };
    let outcome = state.engine.records.append_durable(topic, p, write, records).await?;
    Ok(Json(json!({ "partition": p, "durable": outcome })))
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

/// `consistency`: `local` (the default: what the serving node knows, also
/// during a metadata outage) or `strong` (linearizable: confirmed through
/// the metadata log after serving; see [`Consistency`]).
pub(crate) fn consistency(params: &Params) -> HttpResult<Consistency> {
    match params.get("consistency").map(String::as_str) {
        None | Some("local") => Ok(Consistency::Local),
        Some("strong") => Ok(Consistency::Strong),
        Some(other) => Err(invalid(format!("consistency must be local or strong, got {other:?}"))),
    }
}

/// `isolation`: `read_committed` (the default: nothing of open or aborted
/// Kafka transactions, no transaction markers) or `read_uncommitted`
/// (every stored record).
pub(crate) fn committed(params: &Params) -> HttpResult<bool> {
    match params.get("isolation").map(String::as_str) {
        None | Some("read_committed") => Ok(true),
        Some("read_uncommitted") => Ok(false),
        Some(other) => Err(invalid(format!(
            "isolation must be read_committed or read_uncommitted, got {other:?}"
        ))),
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
        // Clamped, not refused: a client asking for more gets at most the cap.
        max_bytes: usize::try_from(max_bytes)
            .unwrap_or(usize::MAX)
            .min(state.limits.max_read_bytes),
        wait: Duration::from_millis(wait_ms).min(state.limits.max_wait),
        committed: committed(params)?,
        consistency: consistency(params)?,
    })
}

pub async fn read(
    State(state): State<Shared>,
    Path((topic, partition)): Path<(String, String)>,
    query: Result<Query<Params>, QueryRejection>,
) -> HttpResult<axum::response::Response> {
    let params = params(query)?;
    let enc = encoding(&params)?;
    let form = header_form(&params)?;
    let p = checked_partition(&state, &topic, &partition).await?;
    let mut req = read_request(&state, &params)?;
    if let Some(ts) = parse_param::<i64>(&params, "timestamp", ErrorCode::InvalidRequest)? {
        if params.contains_key("offset") {
            return Err(invalid("give offset or timestamp, not both".into()));
        }
        req.from = offset_at_time(&state, &topic, p, ts).await?;
    }
    let result = state.engine.records.read(&topic, p, req).await?;
    Ok(json_bytes(read_answer(&result, enc, form, state.limits.max_read_bytes)))
}

/// Where a read by time starts: the first record at or after `ts` (Kafka's
/// ListOffsets by timestamp, the same scan of batch headers), or the end.
async fn offset_at_time(state: &AppState, topic: &str, p: u32, ts: i64) -> HttpResult<ReadFrom> {
    let start = state
        .engine
        .topics
        .describe_topic(topic)?
        .partition_info
        .get(p as usize)
        .map_or(Offset(0), |i| i.start_offset);
    let (_, offset) = crate::api::offset_for_timestamp(state.engine.records.as_ref(), topic, p, start, ts).await?;
    Ok(u64::try_from(offset).map_or(ReadFrom::End, |o| ReadFrom::At(Offset(o))))
}
