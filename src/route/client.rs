//! The forwarding client: the node-to-node calls of [`super::wire`], sent
//! to a stream's owner with the peer credential, the forwarded mark and
//! the caller's own token (the owner authorizes the caller again; a node
//! holds no privilege of its own).

use super::wire;
use super::{with_retry, Failure, Placement};
use crate::api::{
    ApiError, ApiResult, Appended, ByteStream, ErrorCode, ReadRequest, ReadResult, FORWARDED_HEADER, PEER_HEADER,
};
use crate::batch::Record;
use crate::ids::{Offset, StreamId};
use crate::meta::writers::{DsAppend, DsWrite};
use bytes::Bytes;
use forward_http::header::{HeaderMap, HeaderValue};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Sends forwarded requests to owners, over one connection pool.
#[derive(Debug, Clone)]
pub struct Forwarder {
    client: forward_http::Client,
    /// Sent with every forwarded request, so the owner honours the mark.
    peer: Arc<super::peer::PeerKey>,
    /// `http` or, when this node serves TLS, `https`: a cluster runs TLS on
    /// every node or on none.
    scheme: &'static str,
}

impl Forwarder {
    /// A forwarder speaking TLS with `tls` (the node's client config, which
    /// trusts `--tls-ca` or the node's own certificate), or plaintext.
    pub fn new(tls: Option<&crate::net::Tls>, peer: Arc<super::peer::PeerKey>) -> Self {
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

    /// Forward an append of `records` to the owner of `stream`, if another
    /// node owns it: the records are encoded here, once, into the batch the
    /// owner stores. `None` when the stream is not forwarded.
    pub async fn append(
        &self,
        at: &dyn Placement,
        stream: StreamId,
        topic: &str,
        partition: u32,
        records: &[Record],
    ) -> Option<ApiResult<Appended>> {
        if records.is_empty() {
            return Some(Err(ApiError::invalid("no records to append")));
        }
        let batch = crate::batch::encode_batch(Offset(0), records);
        with_retry("append", at, stream, false, |addr, applied| {
            self.append_batch(
                addr,
                applied,
                (wire::APPEND_ROUTE, None),
                topic,
                partition,
                batch.clone(),
            )
        })
        .await
    }

    /// Forward a transaction marker to the owner of `stream`, if another
    /// node owns it, with the transaction it ends (`of`). Safe to retry: a
    /// marker that landed ends the transaction, and the same marker again
    /// appends nothing.
    pub async fn append_marker(
        &self,
        at: &dyn Placement,
        stream: StreamId,
        topic: &str,
        partition: u32,
        marker: Bytes,
        of: Option<&crate::api::MarkerOf>,
    ) -> Option<ApiResult<Appended>> {
        let of = of.map(wire::encode_marker_of);
        with_retry("marker", at, stream, true, |addr, applied| {
            let route = (wire::MARKER_ROUTE, of.as_deref().map(|v| (wire::MARKER_OF, v)));
            self.append_batch(addr, applied, route, topic, partition, marker.clone())
        })
        .await
    }

    /// Forward a Durable Streams append (no records: a check only): the
    /// owner's sequencer checks `write` and appends the records, encoded
    /// here once, in one step. `None` when the stream is not forwarded.
    pub async fn append_durable(
        &self,
        at: &dyn Placement,
        stream: StreamId,
        topic: &str,
        partition: u32,
        write: &DsWrite,
        records: &[Record],
    ) -> Option<ApiResult<DsAppend>> {
        let batch = if records.is_empty() {
            Bytes::new()
        } else {
            crate::batch::encode_batch(Offset(0), records)
        };
        let write = wire::encode_ds_write(write);
        with_retry("append_durable", at, stream, false, |addr, applied| {
            self.append_durable_batch(addr, applied, topic, partition, &write, batch.clone())
        })
        .await
    }

    /// Forward a read (a long poll included: one request that waits at the
    /// owner). `None` when the stream is not forwarded.
    pub async fn read(
        &self,
        at: &dyn Placement,
        stream: StreamId,
        topic: &str,
        partition: u32,
        req: &ReadRequest,
    ) -> Option<ApiResult<ReadResult>> {
        with_retry("read", at, stream, true, |addr, applied| {
            self.read_batches(addr, applied, topic, partition, req)
        })
        .await
    }

    /// Relay a subscription: the owner's event stream for `path_and_query`
    /// (the subscriber's own request path), passed on as it arrives.
    /// `None` when the stream is not forwarded.
    pub async fn relay(
        &self,
        at: &dyn Placement,
        stream: StreamId,
        path_and_query: &str,
        last_event_id: Option<&str>,
    ) -> Option<ApiResult<ByteStream>> {
        with_retry("subscribe", at, stream, true, |addr, applied| {
            self.subscribe(addr, applied, path_and_query, last_event_id)
        })
        .await
    }
}

/// Most bytes of another node's `/metrics` read for the console.
pub const MAX_METRICS_BYTES: usize = 4 << 20;

impl Forwarder {
    /// Another node's `/metrics` text (an open route: no credential), within
    /// 2 s and [`MAX_METRICS_BYTES`]; `unavailable` otherwise.
    pub async fn metrics(&self, addr: &str) -> ApiResult<String> {
        let down = |e: String| ApiError::unavailable(format!("node at {addr}: {e}"));
        let mut resp = self
            .client
            .get(self.url(addr, "/metrics"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .map_err(|e| down(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(down(format!("/metrics answered {}", resp.status())));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| down(e.to_string()))? {
            if body.len() + chunk.len() > MAX_METRICS_BYTES {
                return Err(down(format!("/metrics is over {MAX_METRICS_BYTES} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        String::from_utf8(body).map_err(|_| down("/metrics is not UTF-8".into()))
    }

    fn url(&self, addr: &str, path: &str) -> String {
        format!("{}://{addr}{path}", self.scheme)
    }

    /// The marks of a forwarded request: the index this node has applied,
    /// the peer credential (503 until it is loaded), the caller's token.
    fn marks(&self, addr: &str, applied: u64) -> Result<HeaderMap, Failure> {
        let credential = self.peer.credential().ok_or_else(|| {
            Failure::Refused(ApiError::unavailable(format!(
                "cannot forward to {addr} yet: this node has not loaded the cluster's peer key"
            )))
        })?;
        let mut h = HeaderMap::new();
        if let Some(token) = crate::api::caller_token() {
            if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", token.expose())) {
                v.set_sensitive(true);
                h.insert(forward_http::header::AUTHORIZATION, v);
            }
        }
        let mut peer = HeaderValue::from_str(credential)
            .map_err(|e| Failure::Refused(ApiError::new(ErrorCode::Internal, format!("peer credential: {e}"))))?;
        peer.set_sensitive(true);
        h.insert(PEER_HEADER, peer);
        h.insert(FORWARDED_HEADER, HeaderValue::from(applied));
        Ok(h)
    }

    /// Send `req`; an answer that is not a success becomes the owner's error.
    async fn send(&self, addr: &str, req: forward_http::RequestBuilder) -> Result<forward_http::Response, Failure> {
        let resp = req.send().await.map_err(|e| {
            let err = ApiError::unavailable(format!("owner at {addr} unreachable: {e}"));
            if e.is_connect() {
                Failure::Refused(err)
            } else {
                Failure::Indeterminate(err)
            }
        })?;
        if resp.status().is_success() {
            Ok(resp)
        } else {
            Err(Failure::Refused(error_from(addr, resp).await))
        }
    }

    async fn append_batch(
        &self,
        addr: String,
        applied: u64,
        (route, extra): (&str, Option<(&str, &str)>),
        topic: &str,
        partition: u32,
        batch: Bytes,
    ) -> Result<Appended, Failure> {
        let path = route
            .replace("{topic}", topic)
            .replace("{partition}", &partition.to_string());
        let mut req = self
            .client
            .post(self.url(&addr, &path))
            .headers(self.marks(&addr, applied)?)
            .header(forward_http::header::CONTENT_TYPE, "application/octet-stream");
        if let Some((name, value)) = extra {
            req = req.header(name, value);
        }
        let req = req.body(batch);
        let resp = self.send(&addr, req).await?;
        let base = header_u64(&addr, &resp, wire::BASE_OFFSET).map_err(Failure::Indeterminate)?;
        let count = header_u64(&addr, &resp, wire::COUNT).map_err(Failure::Indeterminate)?;
        Ok(Appended {
            base: Offset(base),
            count: u32::try_from(count).map_err(|_| Failure::Indeterminate(malformed(&addr, "a count past u32")))?,
        })
    }

    async fn append_durable_batch(
        &self,
        addr: String,
        applied: u64,
        topic: &str,
        partition: u32,
        write: &str,
        batch: Bytes,
    ) -> Result<DsAppend, Failure> {
        let path = wire::APPEND_ROUTE
            .replace("{topic}", topic)
            .replace("{partition}", &partition.to_string());
        let req = self
            .client
            .post(self.url(&addr, &path))
            .headers(self.marks(&addr, applied)?)
            .header(wire::DS_WRITE, write)
            .header(forward_http::header::CONTENT_TYPE, "application/octet-stream")
            .body(batch);
        let resp = self.send(&addr, req).await?;
        let lost = |e: String| Failure::Indeterminate(ApiError::unavailable(format!("owner at {addr}: {e}")));
        let body: Value = resp.json().await.map_err(|e| lost(e.to_string()))?;
        serde_json::from_value(body["durable"].clone())
            .map_err(|_| Failure::Indeterminate(malformed(&addr, &format!("{body} for a Durable Streams append"))))
    }

    async fn read_batches(
        &self,
        addr: String,
        applied: u64,
        topic: &str,
        partition: u32,
        req: &ReadRequest,
    ) -> Result<ReadResult, Failure> {
        let path = wire::READ_ROUTE
            .replace("{topic}", topic)
            .replace("{partition}", &partition.to_string());
        let url = format!(
            "{}?from={}&max_bytes={}&wait_ms={}{}",
            self.url(&addr, &path),
            wire::from_param(req.from),
            req.max_bytes,
            req.wait.as_millis(),
            if req.committed { "&committed=1" } else { "" }
        );
        let call = self
            .client
            .get(url)
            .headers(self.marks(&addr, applied)?)
            .timeout(req.wait + Duration::from_secs(10));
        let resp = self.send(&addr, call).await?;
        // A read has no effect: every failure from here on is safe to retry.
        let lost = Failure::Indeterminate;
        let from = Offset(header_u64(&addr, &resp, wire::FROM).map_err(lost)?);
        let high_watermark = Offset(header_u64(&addr, &resp, wire::HIGH_WATERMARK).map_err(lost)?);
        let start_offset = Offset(header_u64(&addr, &resp, wire::START_OFFSET).map_err(lost)?);
        let scanned_end = match req.committed {
            true => Some(Offset(header_u64(&addr, &resp, wire::SCANNED_END).map_err(lost)?)),
            false => None,
        };
        let body = resp
            .bytes()
            .await
            .map_err(|e| lost(ApiError::unavailable(format!("owner at {addr}: {e}"))))?;
        let batches = wire::split_batches(&body).map_err(Failure::Refused)?;
        let (records, next_offset) = if let Some(scanned_end) = scanned_end {
            // The owner left out what a committed reader does not see.
            wire::committed_records(&batches, from, scanned_end, req.limit.max(1), req.max_bytes)
                .map_err(Failure::Refused)?
        } else {
            let records =
                wire::records_from(&batches, from, req.limit.max(1), req.max_bytes).map_err(Failure::Refused)?;
            let next = records.last().map_or(from, |(o, _)| o.next());
            (records, next)
        };
        Ok(ReadResult {
            records,
            next_offset,
            high_watermark,
            start_offset,
        })
    }

    async fn subscribe(
        &self,
        addr: String,
        applied: u64,
        path_and_query: &str,
        last_event_id: Option<&str>,
    ) -> Result<ByteStream, Failure> {
        let mut call = self
            .client
            .get(self.url(&addr, path_and_query))
            .headers(self.marks(&addr, applied)?);
        if let Some(id) = last_event_id {
            call = call.header("last-event-id", id);
        }
        let resp = self.send(&addr, call).await?;
        let stream = futures::stream::unfold(Some(resp), |resp| async move {
            let mut resp = resp?;
            match resp.chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk), Some(resp))),
                Ok(None) => None,
                Err(e) => Some((Err(std::io::Error::other(e)), None)),
            }
        });
        Ok(Box::pin(stream))
    }
}

/// The owner's answer did not have the shape of the internal call.
fn malformed(addr: &str, what: &str) -> ApiError {
    ApiError::new(ErrorCode::Internal, format!("owner at {addr} sent {what}"))
}

fn header_u64(addr: &str, resp: &forward_http::Response, name: &str) -> ApiResult<u64> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| malformed(addr, &format!("no numeric {name} header")))
}

/// Turn the owner's error answer into the same error here.
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
