//! Routing: a node that does not own a stream forwards appends and reads to
//! the owner's advertised HTTP address, one hop, marked so the owner never
//! forwards again. The mark is the metadata log index the forwarder has
//! applied: the owner catches up to it first, so it knows every topic the
//! forwarder knows (read-your-writes across nodes). Bytes travel
//! base64-encoded so any record round-trips.

use crate::api::{
    ApiError, ApiResult, Appended, ErrorCode, ReadFrom, ReadRequest, ReadResult, DS_WRITE_HEADER, FORWARDED_HEADER,
    PEER_HEADER,
};
use crate::batch::Record;
use crate::ids::Offset;
use crate::meta::writers::{DsAppend, DsWrite};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Map, Value};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Forwarder {
    client: forward_http::Client,
    /// Sent with every forwarded request, so the owner honours the mark.
    peer: std::sync::Arc<super::peer::PeerKey>,
    /// `http` or, when this node serves TLS, `https`: a cluster runs TLS on
    /// every node or on none.
    scheme: &'static str,
}

impl Forwarder {
    /// A forwarder speaking TLS with `tls` (the node's client config, which
    /// trusts `--tls-ca` or the node's own certificate), or plaintext.
    pub fn new(tls: Option<&crate::net::Tls>, peer: std::sync::Arc<super::peer::PeerKey>) -> Self {
        let mut builder = forward_http::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            // Under the peers' idle keep-alive timeout (--read-timeout-sec, 30 s by
            // default), so a pooled connection is not reused as the peer closes it.
            .pool_idle_timeout(Duration::from_secs(10));
        if let Some(tls) = tls {
            builder = builder.tls_backend_preconfigured((*tls.client).clone());
        }
        let client = builder.build().expect("HTTP client");
        Self {
            client,
            peer,
            scheme: if tls.is_some() { "https" } else { "http" },
        }
    }
}

fn b64(b: &Option<Bytes>) -> Value {
    b.as_ref().map_or(Value::Null, |b| Value::String(B64.encode(b)))
}

fn unb64(v: &Value, what: &str) -> ApiResult<Option<Bytes>> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => B64
            .decode(s)
            .map(|b| Some(Bytes::from(b)))
            .map_err(|e| ApiError::new(ErrorCode::Internal, format!("owner sent bad base64 in {what}: {e}"))),
        other => Err(ApiError::new(
            ErrorCode::Internal,
            format!("owner sent {what} = {other}"),
        )),
    }
}

/// Records as the owner's records API reads them (`encoding=base64`).
fn records_json(records: &[Record]) -> Vec<Value> {
    records
        .iter()
        .map(|r| {
            let headers: Map<String, Value> = r.headers.iter().map(|(k, v)| (k.clone(), b64(v))).collect();
            json!({"key": b64(&r.key), "value": b64(&r.value), "headers": headers})
        })
        .collect()
}

/// The owner's answer did not have the shape of our own API: never guess a value.
fn malformed(addr: &str, what: &str) -> ApiError {
    ApiError::new(ErrorCode::Internal, format!("owner at {addr} sent {what}"))
}

fn field_u64(addr: &str, v: &Value, key: &str) -> ApiResult<u64> {
    v[key]
        .as_u64()
        .ok_or_else(|| malformed(addr, &format!("no numeric {key:?}")))
}

fn unreachable_owner(addr: &str, e: impl std::fmt::Display) -> ApiError {
    ApiError::unavailable(format!("owner at {addr} unreachable: {e}"))
}

/// Turn the owner's error answer into ours.
async fn error_from(addr: &str, resp: forward_http::Response) -> ApiError {
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let err = &body["error"];
    let code = err["code"]
        .as_str()
        .and_then(ErrorCode::from_wire)
        .unwrap_or(ErrorCode::Unavailable);
    let mut e = ApiError::new(code, err["message"].as_str().unwrap_or("").to_string());
    if e.message.is_empty() {
        e.message = format!("owner at {addr} answered {status}");
    }
    e.start_offset = err["start_offset"].as_u64().map(Offset);
    e
}

impl Forwarder {
    /// The marks of a forwarded request: the index this node has applied,
    /// and the peer credential (503 until it is loaded).
    fn marks(&self, addr: &str, applied: u64) -> ApiResult<reqwest::header::HeaderMap> {
        let credential = self.peer.credential().ok_or_else(|| {
            ApiError::unavailable(format!(
                "cannot forward to {addr} yet: this node has not loaded the cluster's peer key"
            ))
        })?;
        let mut h = caller_credentials();
        let mut peer = reqwest::header::HeaderValue::from_str(credential)
            .map_err(|e| ApiError::new(ErrorCode::Internal, format!("peer credential: {e}")))?;
        peer.set_sensitive(true);
        h.insert(PEER_HEADER, peer);
        h.insert(FORWARDED_HEADER, reqwest::header::HeaderValue::from(applied));
        Ok(h)
    }
}

/// The caller's own `Authorization` header, if the request had a token:
/// the owner authenticates and authorizes the caller, not this node.
fn caller_credentials() -> reqwest::header::HeaderMap {
    let mut h = reqwest::header::HeaderMap::new();
    if let Some(token) = crate::api::caller_token() {
        if let Ok(mut v) = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", token.expose())) {
            v.set_sensitive(true);
            h.insert(reqwest::header::AUTHORIZATION, v);
        }
    }
    h
}

impl Forwarder {
    pub async fn append(
        &self,
        addr: &str,
        applied: u64,
        topic: &str,
        partition: u32,
        records: &[Record],
    ) -> ApiResult<Appended> {
        let records = records_json(records);
        let url = format!(
            "{}://{addr}/v1/topics/{topic}/partitions/{partition}/records?encoding=base64",
            self.scheme
        );
        let resp = self
            .client
            .post(url)
            .headers(self.marks(addr, applied)?)
            .json(&json!({ "records": records }))
            .send()
            .await
            .map_err(|e| unreachable_owner(addr, e))?;
        if !resp.status().is_success() {
            return Err(error_from(addr, resp).await);
        }
        let body: Value = resp.json().await.map_err(|e| unreachable_owner(addr, e))?;
        match (body["base_offset"].as_u64(), body["count"].as_u64()) {
            (Some(base), Some(count)) => Ok(Appended {
                base: Offset(base),
                count: count as u32,
            }),
            _ => Err(ApiError::new(
                ErrorCode::Internal,
                format!("owner at {addr} answered {body}"),
            )),
        }
    }

    /// A Durable Streams append, checked and appended on the owner: the
    /// write travels in the [`DS_WRITE_HEADER`] header, the records as in
    /// [`Forwarder::append`] (none: an empty body).
    pub async fn append_durable(
        &self,
        addr: &str,
        applied: u64,
        topic: &str,
        partition: u32,
        write: &DsWrite,
        records: &[Record],
    ) -> ApiResult<DsAppend> {
        let url = format!(
            "{}://{addr}/v1/topics/{topic}/partitions/{partition}/records?encoding=base64",
            self.scheme
        );
        let write = serde_json::to_string(write).expect("a write serializes");
        let mut marks = self.marks(addr, applied)?;
        let value = reqwest::header::HeaderValue::from_str(&write)
            .map_err(|e| ApiError::invalid(format!("Durable Streams write not sendable: {e}")))?;
        marks.insert(DS_WRITE_HEADER, value);
        let req = self.client.post(url).headers(marks);
        let req = if records.is_empty() {
            req
        } else {
            req.json(&json!({ "records": records_json(records) }))
        };
        let resp = req.send().await.map_err(|e| unreachable_owner(addr, e))?;
        if !resp.status().is_success() {
            return Err(error_from(addr, resp).await);
        }
        let body: Value = resp.json().await.map_err(|e| unreachable_owner(addr, e))?;
        serde_json::from_value(body["durable"].clone()).map_err(|_| malformed(addr, &format!("{body}")))
    }

    pub async fn read(
        &self,
        addr: &str,
        applied: u64,
        topic: &str,
        partition: u32,
        req: &ReadRequest,
    ) -> ApiResult<ReadResult> {
        let mut url = format!(
            "{}://{addr}/v1/topics/{topic}/partitions/{partition}/records?encoding=base64&limit={}&max_bytes={}&wait_ms={}",
            self.scheme,
            req.limit.min(10_000),
            req.max_bytes,
            req.wait.as_millis()
        );
        match req.from {
            ReadFrom::Start => {}
            ReadFrom::End => url.push_str("&offset=-1"),
            ReadFrom::At(o) => url.push_str(&format!("&offset={}", o.0)),
        }
        let resp = self
            .client
            .get(url)
            .headers(self.marks(addr, applied)?)
            .timeout(req.wait + Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| unreachable_owner(addr, e))?;
        if !resp.status().is_success() {
            return Err(error_from(addr, resp).await);
        }
        let body: Value = resp.json().await.map_err(|e| unreachable_owner(addr, e))?;
        let mut records = Vec::new();
        for r in body["records"].as_array().into_iter().flatten() {
            let headers = match r["headers"].as_object() {
                Some(h) => h
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), unb64(v, "a header")?)))
                    .collect::<ApiResult<Vec<_>>>()?,
                None => Vec::new(),
            };
            records.push((
                field_u64(addr, r, "offset").map(Offset)?,
                Record {
                    timestamp_ms: r["timestamp"]
                        .as_i64()
                        .ok_or_else(|| malformed(addr, "a record without a timestamp"))?,
                    key: unb64(&r["key"], "a key")?,
                    value: unb64(&r["value"], "a value")?,
                    headers,
                },
            ));
        }
        Ok(ReadResult {
            records,
            next_offset: Offset(field_u64(addr, &body, "next_offset")?),
            high_watermark: Offset(field_u64(addr, &body, "high_watermark")?),
            start_offset: Offset(field_u64(addr, &body, "start_offset")?),
        })
    }
}
