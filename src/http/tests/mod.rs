//! Tests of the HTTP layer against [`fake::FakeEngine`].

pub(crate) mod fake;

use super::router;
use crate::api::{ApiError, ErrorCode, Limits, Topics as _};
use crate::batch::partition_for_key;
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use base64::Engine as _;
use fake::FakeEngine;
use futures::StreamExt;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::ServiceExt;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

struct Resp {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Value,
}

impl Resp {
    fn code(&self) -> &str {
        self.body["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("not an error: {}", self.body))
    }

    fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap()
    }

    #[track_caller]
    fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "{}", self.body);
        assert_eq!(self.code(), code, "{}", self.body);
        assert_eq!(self.headers[header::CONTENT_TYPE], "application/json");
    }
}

struct Harness {
    engine: Arc<FakeEngine>,
    app: Router,
}

impl Harness {
    fn new() -> Self {
        Self::with_limits(FakeEngine::default_limits())
    }

    fn with_limits(limits: Limits) -> Self {
        let engine = FakeEngine::new(limits);
        let app = router(engine.clone());
        Self { engine, app }
    }

    async fn with_topic(name: &str, partitions: u32) -> Self {
        let h = Self::new();
        let r = h
            .post("/v1/topics", json!({ "name": name, "partitions": partitions }))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        h
    }

    async fn send(&self, req: Request<Body>) -> Resp {
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        Resp { status, headers, body }
    }

    async fn get(&self, uri: &str) -> Resp {
        self.send(Request::get(uri).body(Body::empty()).unwrap()).await
    }

    async fn post(&self, uri: &str, body: Value) -> Resp {
        self.post_raw(uri, "application/json", body.to_string().into_bytes())
            .await
    }

    async fn post_raw(&self, uri: &str, content_type: &str, body: Vec<u8>) -> Resp {
        let req = Request::post(uri)
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .unwrap();
        self.send(req).await
    }
}

fn records(values: &[&str]) -> Value {
    json!({ "records": values.iter().map(|v| json!({ "value": v })).collect::<Vec<_>>() })
}

// ---------------------------------------------------------------------------
// Topics

#[tokio::test]
async fn topics_are_created_listed_described_and_deleted() {
    let h = Harness::new();
    let r = h
        .post(
            "/v1/topics",
            json!({ "name": "orders", "partitions": 3, "config": { "retention_ms": 1000 } }),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(
        r.body,
        json!({ "name": "orders", "partitions": 3, "config": { "retention_ms": 1000, "retention_bytes": null } })
    );
    let r = h.post("/v1/topics", json!({ "name": "events" })).await;
    assert_eq!(r.body["partitions"], 1, "partitions default to 1");

    let r = h.get("/v1/topics").await;
    let id = |name: &str| crate::ids::TopicUuid::derive(crate::ids::TopicId(0), name).to_string();
    assert_eq!(
        r.body,
        json!({ "topics": [
            { "name": "events", "partitions": 1, "topic_id": id("events") },
            { "name": "orders", "partitions": 3, "topic_id": id("orders") },
        ] })
    );

    let r = h.get("/v1/topics/orders").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["partition_info"].as_array().unwrap().len(), 3);
    assert_eq!(r.body["config"]["retention_ms"], 1000);

    let r = h
        .send(Request::delete("/v1/topics/orders").body(Body::empty()).unwrap())
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    h.get("/v1/topics/orders").await.assert_error(404, "topic_not_found");
    let r = h
        .send(Request::delete("/v1/topics/orders").body(Body::empty()).unwrap())
        .await;
    r.assert_error(404, "topic_not_found");
}

#[tokio::test]
async fn bad_topic_creations_are_refused_and_create_nothing() {
    let h = Harness::with_topic("orders", 1).await;
    h.post("/v1/topics", json!({ "name": "orders" }))
        .await
        .assert_error(409, "topic_exists");
    for name in ["", ".", "..", "a/b", "sp ace", &"x".repeat(250)] {
        h.post("/v1/topics", json!({ "name": name }))
            .await
            .assert_error(400, "invalid_topic_name");
    }
    for n in [0, -1, 10_001] {
        h.post("/v1/topics", json!({ "name": "t", "partitions": n }))
            .await
            .assert_error(400, "invalid_partition_count");
    }
    h.post_raw("/v1/topics", "application/json", b"{\"name\":".to_vec())
        .await
        .assert_error(400, "invalid_json");
    h.post("/v1/topics", json!({ "name": 5 }))
        .await
        .assert_error(400, "invalid_request");
    h.post("/v1/topics", json!({ "name": "t", "partitons": 2 }))
        .await
        .assert_error(400, "invalid_request");
    h.post("/v1/topics", json!({ "partitions": 2 }))
        .await
        .assert_error(400, "invalid_request");
    assert_eq!(h.get("/v1/topics").await.body["topics"].as_array().unwrap().len(), 1);
}

// ---------------------------------------------------------------------------
// Appends

#[tokio::test]
async fn appends_return_offsets_in_request_order() {
    let h = Harness::with_topic("t", 3).await;
    let body = json!({ "records": [
        { "value": "a", "partition": 2 },
        { "value": "b", "partition": 0 },
        { "value": "c", "partition": 2, "headers": { "h": "v", "n": null } },
        { "value": null, "key": "k", "partition": 1 },
    ]});
    let r = h.post("/v1/topics/t/records", body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.body["offsets"],
        json!([
            { "partition": 2, "offset": 0 },
            { "partition": 0, "offset": 0 },
            { "partition": 2, "offset": 1 },
            { "partition": 1, "offset": 0 },
        ])
    );
    // One append per partition, each atomic.
    assert_eq!(h.engine.append_calls.load(std::sync::atomic::Ordering::Relaxed), 3);
    let p2 = h.engine.records("t", 2);
    assert_eq!(p2[0].value.as_deref(), Some(&b"a"[..]));
    assert_eq!(p2[1].headers, vec![("h".into(), Some("v".into())), ("n".into(), None)]);
    assert_eq!(h.engine.records("t", 1)[0].value, None, "null is a tombstone");
    let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock::default());
    assert!((now - p2[0].timestamp_ms).abs() < 60_000);

    let r = h
        .post(
            "/v1/topics/t/records",
            json!({ "records": [{ "value": "d", "partition": 2 }] }),
        )
        .await;
    assert_eq!(r.body["offsets"], json!([{ "partition": 2, "offset": 2 }]));
}

#[tokio::test]
async fn keyed_records_go_where_kafka_would_put_them() {
    let h = Harness::with_topic("t", 7).await;
    let keys: Vec<String> = (0..40).map(|i| format!("key-{i}")).collect();
    let body = json!({ "records": keys.iter().map(|k| json!({ "key": k, "value": k })).collect::<Vec<_>>() });
    let r = h.post("/v1/topics/t/records", body).await;
    assert_eq!(r.status, StatusCode::OK);
    for (i, k) in keys.iter().enumerate() {
        let expected = partition_for_key(k.as_bytes(), 7);
        assert_eq!(r.body["offsets"][i]["partition"], expected, "{k}");
        let stored = h.engine.records("t", expected);
        assert!(stored.iter().any(|rec| rec.key.as_deref() == Some(k.as_bytes())));
    }
}

#[tokio::test]
async fn unkeyed_records_without_a_partition_are_spread_round_robin() {
    let h = Harness::with_topic("t", 3).await;
    let r = h
        .post("/v1/topics/t/records", records(&["a", "b", "c", "d", "e", "f"]))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    for p in 0..3 {
        assert_eq!(h.engine.records("t", p).len(), 2, "partition {p}");
    }
}

#[tokio::test]
async fn base64_encoding_applies_to_keys_values_and_headers() {
    let h = Harness::with_topic("t", 1).await;
    let value = [0xffu8, 0x00, 0xfe];
    let body = json!({ "records": [{
        "key": B64.encode(b"k\x01"),
        "value": B64.encode(value),
        "headers": { "h": B64.encode(b"\x80") },
    }]});
    let r = h.post("/v1/topics/t/records?encoding=base64", body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let stored = &h.engine.records("t", 0)[0];
    assert_eq!(stored.key.as_deref(), Some(&b"k\x01"[..]));
    assert_eq!(stored.value.as_deref(), Some(&value[..]));
    assert_eq!(stored.headers[0].1.as_deref(), Some(&b"\x80"[..]));

    let r = h.get("/v1/topics/t/partitions/0/records?encoding=base64").await;
    let rec = &r.body["records"][0];
    assert_eq!(rec["value"], B64.encode(value));
    assert_eq!(rec["key"], B64.encode(b"k\x01"));
    assert!(rec.get("value_encoding").is_none());

    // Without base64: UTF-8 stays text, the rest is base64 and flagged.
    let r = h.get("/v1/topics/t/partitions/0/records").await;
    let rec = &r.body["records"][0];
    assert_eq!(rec["key"], "k\u{1}");
    assert!(rec.get("key_encoding").is_none());
    assert_eq!(rec["value"], B64.encode(value));
    assert_eq!(rec["value_encoding"], "base64");
    assert_eq!(rec["headers"]["h"], B64.encode(b"\x80"));
    assert_eq!(rec["headers_encoding"], "base64");
}

#[tokio::test]
async fn client_timestamps_and_list_headers_are_stored_and_read_back_as_sent() {
    let h = Harness::with_topic("t", 1).await;
    let body = json!({ "records": [{
        "value": "v",
        "timestamp": 1_234_567,
        "headers": [["b", "1"], ["a", null], ["b", "2"]],
    }, { "value": "w", "headers": {"b": "1", "a": "x"} }]});
    let r = h.post("/v1/topics/t/partitions/0/records", body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let stored = h.engine.records("t", 0);
    assert_eq!(stored[0].timestamp_ms, 1_234_567);
    let names: Vec<&str> = stored[0].headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["b", "a", "b"], "order and repeats kept");
    assert_ne!(stored[1].timestamp_ms, 1_234_567, "no timestamp: the arrival time");

    let r = h.get("/v1/topics/t/partitions/0/records?headers=list").await;
    assert_eq!(
        r.body["records"][0]["headers"],
        json!([["b", "1"], ["a", null], ["b", "2"]])
    );
    assert_eq!(r.body["records"][0]["timestamp"], 1_234_567);
    assert_eq!(
        r.body["records"][1]["headers"],
        json!([["a", "x"], ["b", "1"]]),
        "the object form, sorted"
    );
    let r = h.get("/v1/topics/t/partitions/0/records").await;
    assert_eq!(
        r.body["records"][0]["headers"],
        json!({"a": null, "b": "2"}),
        "the default object form"
    );
    h.get("/v1/topics/t/partitions/0/records?headers=map")
        .await
        .assert_error(400, "invalid_request");
}

#[tokio::test]
async fn internal_routes_refuse_a_caller_that_is_not_a_peer() {
    let h = Harness::with_topic("t", 1).await;
    let batch = crate::batch::encode_batch(
        crate::ids::Offset(0),
        &[crate::batch::Record {
            timestamp_ms: 1,
            key: None,
            value: None,
            headers: vec![],
        }],
    );
    let req = Request::post("/internal/v1/topics/t/partitions/0/batch")
        .header("sluice-forwarded", "1")
        .header("sluice-peer", "a guess")
        .body(Body::from(batch))
        .unwrap();
    h.send(req).await.assert_error(403, "forbidden");
    h.get("/internal/v1/topics/t/partitions/0/batches?from=0")
        .await
        .assert_error(403, "forbidden");
    assert!(h.engine.records("t", 0).is_empty(), "nothing appended");
}

/// Found by the chaos test: a forwarded append reached a node whose peer
/// key finished loading between the check that marks a request forwarded
/// and the internal routes' own; it was refused with 403, which the
/// forwarder passed on to its client. It is a retryable 503 now.
#[tokio::test]
async fn a_peer_key_that_loads_during_a_request_is_answered_as_retryable() {
    let h = Harness::with_topic("t", 1).await;
    let append = |peer: &str| {
        let batch = crate::batch::encode_batch(
            crate::ids::Offset(0),
            &[crate::batch::Record {
                timestamp_ms: 1,
                key: None,
                value: None,
                headers: vec![],
            }],
        );
        Request::post("/internal/v1/topics/t/partitions/0/batch")
            .header(crate::api::FORWARDED_HEADER, "1")
            .header(crate::api::PEER_HEADER, peer)
            .body(Body::from(batch))
            .unwrap()
    };
    h.engine.peer_loads_after.store(1, std::sync::atomic::Ordering::Relaxed);
    h.send(append(fake::PEER)).await.assert_error(503, "unavailable");
    // Sent again, it passes the gate and reaches the handler (which the
    // fake engine answers with its own 404: it keeps no raw batches).
    let r = h.send(append(fake::PEER)).await;
    assert_eq!(
        r.body["error"]["message"], "raw batch appends are not supported here",
        "{:?}",
        r.body
    );
    // A wrong credential is still forbidden.
    h.send(append("a guess")).await.assert_error(403, "forbidden");
}

#[tokio::test]
async fn per_partition_appends_report_the_base_offset() {
    let h = Harness::with_topic("t", 2).await;
    let r = h.post("/v1/topics/t/partitions/1/records", records(&["a", "b"])).await;
    assert_eq!(r.body, json!({ "partition": 1, "base_offset": 0, "count": 2 }));
    let r = h.post("/v1/topics/t/partitions/1/records", records(&["c"])).await;
    assert_eq!(r.body, json!({ "partition": 1, "base_offset": 2, "count": 1 }));
    assert_eq!(h.engine.records("t", 0).len(), 0);
    h.post(
        "/v1/topics/t/partitions/1/records",
        json!({ "records": [{ "value": "x", "partition": 0 }] }),
    )
    .await
    .assert_error(400, "invalid_request");
    h.post("/v1/topics/t/partitions/2/records", records(&["x"]))
        .await
        .assert_error(404, "partition_not_found");
    h.post("/v1/topics/t/partitions/x/records", records(&["x"]))
        .await
        .assert_error(404, "partition_not_found");
    h.post("/v1/topics/nope/partitions/0/records", records(&["x"]))
        .await
        .assert_error(404, "topic_not_found");
    assert_eq!(h.engine.total_records("t"), 3);
}

#[tokio::test]
async fn raw_bodies_are_one_record_keyed_by_the_sluice_key_header() {
    let h = Harness::with_topic("t", 5).await;
    let req = Request::post("/v1/topics/t/records")
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header("Sluice-Key", "user-7")
        .body(Body::from(vec![0u8, 1, 2, 255]))
        .unwrap();
    let r = h.send(req).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let p = partition_for_key(b"user-7", 5);
    assert_eq!(r.body["offsets"], json!([{ "partition": p, "offset": 0 }]));
    let stored = &h.engine.records("t", p)[0];
    assert_eq!(stored.value.as_deref(), Some(&[0u8, 1, 2, 255][..]));
    assert_eq!(stored.key.as_deref(), Some(&b"user-7"[..]));

    let r = h
        .post_raw(
            "/v1/topics/t/partitions/3/records",
            "application/octet-stream",
            b"{not json".to_vec(),
        )
        .await;
    assert_eq!(r.body, json!({ "partition": 3, "base_offset": 0, "count": 1 }));
}

/// Each bad request gets its error and appends nothing, even where earlier
/// records in it were fine.
#[tokio::test]
async fn refused_appends_append_nothing() {
    let h = Harness::with_topic("t", 2).await;
    let ok = json!({ "value": "fine", "partition": 0 });
    let big = "x".repeat(1025);
    let cases: Vec<(&str, Vec<u8>, u16, &str, &str)> = vec![
        (
            "/v1/topics/t/records",
            b"{\"records\": [".to_vec(),
            400,
            "invalid_json",
            "JSON",
        ),
        ("/v1/topics/t/records", b"".to_vec(), 400, "invalid_json", "JSON"),
        (
            "/v1/topics/t/records",
            b"[1]".to_vec(),
            400,
            "invalid_request",
            "object",
        ),
        (
            "/v1/topics/t/records",
            json!({}).to_string().into(),
            400,
            "invalid_request",
            "records",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [] }).to_string().into(),
            400,
            "invalid_request",
            "empty",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": {} }).to_string().into(),
            400,
            "invalid_request",
            "array",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [ok, 5] }).to_string().into(),
            400,
            "invalid_request",
            "records[1]",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [ok, { "value": 5 }] }).to_string().into(),
            400,
            "invalid_request",
            "records[1].value",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [ok, { "key": "k" }] }).to_string().into(),
            400,
            "invalid_request",
            "records[1]: missing field \"value\"",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [ok, { "value": "v", "key": [] }] })
                .to_string()
                .into(),
            400,
            "invalid_request",
            "records[1].key",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [ok, { "value": "v", "headers": ["h"] }] })
                .to_string()
                .into(),
            400,
            "invalid_request",
            "records[1].headers",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [ok, { "value": "v", "headers": { "h": 1 } }] })
                .to_string()
                .into(),
            400,
            "invalid_request",
            "records[1].headers.h",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [ok, { "value": "v", "partition": -1 }] })
                .to_string()
                .into(),
            400,
            "invalid_request",
            "records[1].partition",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [ok, { "value": "v", "partition": "0" }] })
                .to_string()
                .into(),
            400,
            "invalid_request",
            "records[1].partition",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [ok, { "value": "v", "vaule": "v" }] })
                .to_string()
                .into(),
            400,
            "invalid_request",
            "vaule",
        ),
        (
            "/v1/topics/t/records?encoding=base64",
            json!({ "records": [{ "value": "aGk=" }, { "value": "not base64!" }] })
                .to_string()
                .into(),
            400,
            "invalid_request",
            "records[1].value: invalid base64",
        ),
        (
            "/v1/topics/t/records?encoding=rot13",
            json!({ "records": [ok] }).to_string().into(),
            400,
            "invalid_request",
            "encoding",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [ok, { "value": "v", "partition": 2 }] })
                .to_string()
                .into(),
            404,
            "partition_not_found",
            "records[1].partition",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [ok, { "value": big }] }).to_string().into(),
            413,
            "record_too_large",
            "records[1]",
        ),
        (
            "/v1/topics/t/records",
            json!({ "records": [ok, { "value": "v", "key": "k".repeat(600), "headers": { "h": "x".repeat(600) } }] })
                .to_string()
                .into(),
            413,
            "record_too_large",
            "records[1]",
        ),
        (
            "/v1/topics/t/partitions/0/records",
            json!({ "records": [ok, { "value": big }] }).to_string().into(),
            413,
            "record_too_large",
            "records[1]",
        ),
        (
            "/v1/topics/nope/records",
            json!({ "records": [ok] }).to_string().into(),
            404,
            "topic_not_found",
            "nope",
        ),
    ];
    for (uri, body, status, code, needle) in cases {
        let r = h.post_raw(uri, "application/json", body.clone()).await;
        r.assert_error(status, code);
        assert!(
            r.message().contains(needle),
            "{uri} {}: message {:?} lacks {needle:?}",
            String::from_utf8_lossy(&body),
            r.message()
        );
        assert_eq!(r.body["error"]["retryable"], false);
        assert_eq!(
            h.engine.total_records("t"),
            0,
            "{uri} {}",
            String::from_utf8_lossy(&body)
        );
    }
    // A raw record over the limit.
    let r = h
        .post_raw("/v1/topics/t/records", "application/octet-stream", vec![0; 1025])
        .await;
    r.assert_error(413, "record_too_large");
    assert_eq!(h.engine.total_records("t"), 0);
    assert_eq!(h.engine.append_calls.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[tokio::test]
async fn oversized_bodies_get_a_json_413_without_being_read_whole() {
    let h = Harness::with_topic("t", 1).await;
    // With a Content-Length over the limit.
    let body = json!({ "records": (0..200).map(|_| json!({ "value": "y".repeat(500) })).collect::<Vec<_>>() });
    let r = h.post("/v1/topics/t/records", body).await;
    r.assert_error(413, "request_too_large");

    // Chunked, without a length: refused once the limit is passed, while the
    // rest of the (endless) body has not been produced.
    let produced = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = produced.clone();
    let chunks = futures::stream::iter(0..).map(move |_| {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok::<_, std::io::Error>(axum::body::Bytes::from(vec![b' '; 4096]))
    });
    let req = Request::post("/v1/topics/t/partitions/0/records")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(chunks))
        .unwrap();
    let r = h.send(req).await;
    r.assert_error(413, "request_too_large");
    assert!(produced.load(std::sync::atomic::Ordering::Relaxed) <= 64 * 1024 / 4096 + 2);
    assert_eq!(h.engine.total_records("t"), 0);
}

#[tokio::test]
async fn engine_errors_map_to_statuses_and_retry_after() {
    let h = Harness::with_topic("t", 2).await;
    h.engine
        .fail_appends(None, Some(ApiError::unavailable("stream moving")));
    let r = h.post("/v1/topics/t/records", records(&["a"])).await;
    r.assert_error(503, "unavailable");
    assert_eq!(r.body["error"]["retryable"], true);
    assert_eq!(r.headers[header::RETRY_AFTER], "1");

    h.engine
        .fail_appends(None, Some(ApiError::new(ErrorCode::Throttled, "buffer full")));
    let r = h.post("/v1/topics/t/records", records(&["a"])).await;
    r.assert_error(429, "throttled");
    assert_eq!(r.headers[header::RETRY_AFTER], "1");

    // Only one partition fails: the error says what did land.
    h.engine
        .fail_appends(Some(1), Some(ApiError::unavailable("stream moving")));
    let body = json!({ "records": [{ "value": "a", "partition": 0 }, { "value": "b", "partition": 1 }] });
    let r = h.post("/v1/topics/t/records", body).await;
    r.assert_error(503, "unavailable");
    assert!(r.message().contains("partition 0 at 0"), "{}", r.message());
}

// ---------------------------------------------------------------------------
// Reads

async fn seed(h: &Harness, topic: &str, p: u32, n: usize) {
    let values: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    let r = h
        .post(&format!("/v1/topics/{topic}/partitions/{p}/records"), records(&refs))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
}

#[tokio::test]
async fn reads_page_through_a_partition() {
    let h = Harness::with_topic("t", 1).await;
    seed(&h, "t", 0, 5).await;
    let r = h.get("/v1/topics/t/partitions/0/records?limit=2").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["records"][0]["offset"], 0);
    assert_eq!(r.body["records"][0]["value"], "v0");
    assert_eq!(r.body["records"][0]["key"], Value::Null);
    assert_eq!(r.body["records"][0]["headers"], json!({}));
    assert!(r.body["records"][0]["timestamp"].as_i64().unwrap() > 0);
    assert_eq!(r.body["next_offset"], 2);
    assert_eq!(r.body["high_watermark"], 5);
    assert_eq!(r.body["start_offset"], 0);

    let r = h.get("/v1/topics/t/partitions/0/records?offset=2&limit=100").await;
    let values: Vec<&str> = r.body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["v2", "v3", "v4"]);
    assert_eq!(r.body["next_offset"], 5);

    let r = h.get("/v1/topics/t/partitions/0/records?offset=-1").await;
    assert_eq!(r.body["records"], json!([]));
    assert_eq!(r.body["next_offset"], 5);
}

#[tokio::test]
async fn bad_read_parameters_are_refused() {
    let h = Harness::with_topic("t", 1).await;
    seed(&h, "t", 0, 3).await;
    let base = "/v1/topics/t/partitions/0/records";
    h.get(&format!("{base}?offset=-2"))
        .await
        .assert_error(400, "invalid_offset");
    h.get(&format!("{base}?offset=abc"))
        .await
        .assert_error(400, "invalid_offset");
    h.get(&format!("{base}?limit=0"))
        .await
        .assert_error(400, "invalid_request");
    h.get(&format!("{base}?limit=10001"))
        .await
        .assert_error(400, "invalid_request");
    h.get(&format!("{base}?limit=ten"))
        .await
        .assert_error(400, "invalid_request");
    h.get(&format!("{base}?max_bytes=0"))
        .await
        .assert_error(400, "invalid_request");
    h.get(&format!("{base}?wait_ms=-5"))
        .await
        .assert_error(400, "invalid_request");
    h.get(&format!("{base}?encoding=hex"))
        .await
        .assert_error(400, "invalid_request");
    h.get("/v1/topics/t/partitions/1/records")
        .await
        .assert_error(404, "partition_not_found");
    h.get("/v1/topics/nope/partitions/0/records")
        .await
        .assert_error(404, "topic_not_found");
    let r = h.get(&format!("{base}?offset=4")).await;
    r.assert_error(416, "offset_out_of_range");

    h.engine.truncate("t", 0, 2);
    let r = h.get(&format!("{base}?offset=1")).await;
    r.assert_error(416, "offset_out_of_range");
    assert_eq!(r.body["error"]["start_offset"], 2);
    let r = h.get(base).await;
    assert_eq!(r.body["records"][0]["offset"], 2, "the default offset is the start");
}

#[tokio::test]
async fn a_long_poll_returns_as_soon_as_a_record_arrives() {
    let h = Harness::with_topic("t", 1).await;
    let app = h.app.clone();
    let started = Instant::now();
    let poll = tokio::spawn(async move {
        let req = Request::get("/v1/topics/t/partitions/0/records?offset=0&wait_ms=20000")
            .body(Body::empty())
            .unwrap();
        let resp = app.oneshot(req).await.unwrap();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        serde_json::from_slice::<Value>(&bytes).unwrap()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!poll.is_finished(), "the poll waits while there is nothing to read");
    seed(&h, "t", 0, 1).await;
    let body = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(body["records"][0]["value"], "v0");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_long_poll_times_out_empty_and_is_capped_by_max_wait() {
    let h = Harness::with_limits(Limits {
        max_wait: Duration::from_millis(300),
        ..FakeEngine::default_limits()
    });
    h.post("/v1/topics", json!({ "name": "t" })).await;
    let started = Instant::now();
    let r = h.get("/v1/topics/t/partitions/0/records?wait_ms=600000").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["records"], json!([]));
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(250) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
}

// ---------------------------------------------------------------------------
// SSE

/// Reads SSE text from a response body until `done` says enough.
async fn sse_until(body: Body, done: impl Fn(&str) -> bool) -> String {
    let mut stream = body.into_data_stream();
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done(&text) {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(chunk)) => text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap()),
            Ok(None) => break,
            Err(_) => panic!("timed out; got so far:\n{text}"),
        }
    }
    text
}

fn event_ids(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("id: ").or(l.strip_prefix("id:")))
        .map(|s| s.trim().parse().unwrap())
        .collect()
}

async fn subscribe(h: &Harness, uri: &str, last_event_id: Option<&str>) -> axum::response::Response {
    let mut req = Request::get(uri);
    if let Some(id) = last_event_id {
        req = req.header("Last-Event-ID", id);
    }
    h.app.clone().oneshot(req.body(Body::empty()).unwrap()).await.unwrap()
}

#[tokio::test]
async fn sse_streams_records_with_offsets_as_ids_and_follows_new_ones() {
    let h = Harness::with_topic("t", 1).await;
    seed(&h, "t", 0, 3).await;
    let resp = subscribe(&h, "/v1/topics/t/partitions/0/subscribe?offset=1", None).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "text/event-stream");
    let body = resp.into_body();
    let h2_engine = h.engine.clone();
    let appender = tokio::spawn({
        let h = Harness {
            engine: h2_engine,
            app: h.app.clone(),
        };
        async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            seed(&h, "t", 0, 2).await;
        }
    });
    let text = sse_until(body, |t| event_ids(t).len() >= 4).await;
    appender.await.unwrap();
    assert_eq!(event_ids(&text), [1, 2, 3, 4]);
    assert!(text.contains("event: record"));
    let data: Value = serde_json::from_str(
        text.lines()
            .find_map(|l| l.strip_prefix("data: ").or(l.strip_prefix("data:")))
            .unwrap()
            .trim(),
    )
    .unwrap();
    assert_eq!(data["offset"], 1);
    assert_eq!(data["value"], "v1");
}

#[tokio::test]
async fn sse_resumes_after_last_event_id() {
    let h = Harness::with_topic("t", 1).await;
    seed(&h, "t", 0, 5).await;
    // Last-Event-ID overrides offset.
    let resp = subscribe(&h, "/v1/topics/t/partitions/0/subscribe?offset=0", Some("2")).await;
    let text = sse_until(resp.into_body(), |t| event_ids(t).len() >= 2).await;
    assert_eq!(event_ids(&text), [3, 4]);

    let resp = subscribe(&h, "/v1/topics/t/partitions/0/subscribe", Some("x")).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let resp = subscribe(&h, "/v1/topics/t/partitions/0/subscribe?offset=-3", None).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let resp = subscribe(&h, "/v1/topics/t/partitions/9/subscribe", None).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let resp = subscribe(&h, "/v1/topics/t/partitions/0/subscribe?offset=99", None).await;
    assert_eq!(resp.status(), StatusCode::RANGE_NOT_SATISFIABLE);
}

#[tokio::test]
async fn sse_ends_with_an_unavailable_error_event_at_shutdown() {
    let h = Harness::with_topic("t", 1).await;
    seed(&h, "t", 0, 1).await;
    let resp = subscribe(&h, "/v1/topics/t/partitions/0/subscribe", None).await;
    let engine = h.engine.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        engine.end_live_reads();
    });
    let text = sse_until(resp.into_body(), |_| false).await; // until the stream ends
    assert_eq!(event_ids(&text), [0]);
    assert!(text.contains("event: error"), "{text}");
    let data = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("data: ").or(l.strip_prefix("data:")))
        .unwrap();
    let data: Value = serde_json::from_str(data.trim()).unwrap();
    assert_eq!(data["code"], "unavailable");
    assert_eq!(data["retryable"], true);
}

#[tokio::test]
async fn sse_ends_with_an_error_event_when_the_stream_becomes_unavailable() {
    let h = Harness::with_topic("t", 1).await;
    let resp = subscribe(&h, "/v1/topics/t/partitions/0/subscribe", None).await;
    h.engine.fail_reads(Some(ApiError::unavailable("moved")));
    seed(&h, "t", 0, 1).await; // wakes the long poll, which then sees the failure
    let text = sse_until(resp.into_body(), |_| false).await;
    assert!(
        text.contains("event: error") && text.contains("\"unavailable\""),
        "{text}"
    );
}

// ---------------------------------------------------------------------------
// Operations and routing

#[tokio::test]
async fn health_ready_metrics_and_nodes() {
    let h = Harness::new();
    assert_eq!(h.get("/health").await.status, StatusCode::OK);
    let r = h.get("/ready").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.body,
        json!({ "ready": true, "node_id": "n1", "epoch": 3, "fenced": false, "lease_holder": true })
    );
    h.engine.set_ready(false, Some("draining"));
    let r = h.get("/ready").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.body["ready"], false);
    assert_eq!(r.body["reason"], "draining");

    crate::telemetry::count("sluice_http_test_total", &[("op", "test")]);
    let r = h.get("/metrics").await;
    assert!(r.headers[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    assert!(r.body.as_str().unwrap().contains("sluice_http_test_total"));

    let r = h.get("/admin/nodes").await;
    assert_eq!(r.body["lease_holder"], "n1");
    assert_eq!(r.body["nodes"][0]["open_streams"], 2);
}

#[tokio::test]
async fn a_forwarded_request_first_catches_up_with_the_forwarders_metadata() {
    let h = Harness::with_topic("t", 1).await;
    h.engine.applied.store(7, std::sync::atomic::Ordering::Relaxed);
    let read = |mark: &'static str| {
        Request::get("/v1/topics/t/partitions/0/records")
            .header(crate::api::FORWARDED_HEADER, mark)
            .header(crate::api::PEER_HEADER, fake::PEER)
            .body(Body::empty())
            .unwrap()
    };
    // Without the peer credential the mark is ignored: no catching up.
    for peer in [None, Some("not-the-credential")] {
        let mut req = Request::get("/v1/topics/t/partitions/0/records").header(crate::api::FORWARDED_HEADER, "9");
        if let Some(p) = peer {
            req = req.header(crate::api::PEER_HEADER, p);
        }
        assert_eq!(h.send(req.body(Body::empty()).unwrap()).await.status, StatusCode::OK);
    }
    assert!(
        h.engine.caught_up_to.lock().unwrap().is_empty(),
        "a client's mark made the node catch up"
    );
    assert_eq!(h.send(read("7")).await.status, StatusCode::OK);
    // An older node's plain mark.
    assert_eq!(h.send(read("1")).await.status, StatusCode::OK);
    // Past what this node could reach: served from the view it has.
    assert_eq!(h.send(read("8")).await.status, StatusCode::OK);
    // Not forwarded: nothing to catch up with.
    assert_eq!(h.get("/v1/topics/t/partitions/0/records").await.status, StatusCode::OK);
    assert_eq!(*h.engine.caught_up_to.lock().unwrap(), vec![7, 1, 8]);
}

#[tokio::test]
async fn unknown_routes_and_methods_get_json_errors() {
    let h = Harness::new();
    h.get("/nope").await.assert_error(404, "not_found");
    h.get("/v1/topics/t/partitions/0/nope")
        .await
        .assert_error(404, "not_found");
    let r = h.send(Request::put("/v1/topics").body(Body::empty()).unwrap()).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.code(), "invalid_request");
}

#[tokio::test]
async fn every_route_is_served_and_openapi_is_published() {
    let h = Harness::with_topic("t", 1).await;
    seed(&h, "t", 0, 1).await;
    for (method, path) in super::ROUTES {
        let uri = path.replace("{topic}", "t").replace("{partition}", "0");
        let req = Request::builder()
            .method(*method)
            .uri(&uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from("{}"))
            .unwrap();
        let resp = h.app.clone().oneshot(req).await.unwrap();
        assert_ne!(resp.status(), StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        if resp.status() == StatusCode::NOT_FOUND {
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains("\"not_found\""),
                "{method} {path} is not routed"
            );
        }
    }
    let r = h.get("/openapi.json").await;
    assert_eq!(r.body["openapi"], "3.0.3");
    assert!(r.body["paths"]["/v1/topics/{topic}/records"]["post"].is_object());
}

// ---------------------------------------------------------------------------
// Hostile and careless clients (issue 15)

#[tokio::test]
async fn appends_answer_ranges_and_list_offsets_only_for_small_requests() {
    let h = Harness::with_limits(Limits {
        max_request_bytes: 1 << 20,
        ..FakeEngine::default_limits()
    });
    h.post("/v1/topics", json!({ "name": "t", "partitions": 2 })).await;
    let body = json!({ "records": [
        { "value": "a", "partition": 1 }, { "value": "b", "partition": 0 }, { "value": "c", "partition": 1 },
    ]});
    let r = h.post("/v1/topics/t/records", body).await;
    assert_eq!(
        r.body,
        json!({
            "offsets": [{ "partition": 1, "offset": 0 }, { "partition": 0, "offset": 0 }, { "partition": 1, "offset": 1 }],
            "ranges": [{ "partition": 0, "base_offset": 0, "count": 1 }, { "partition": 1, "base_offset": 0, "count": 2 }],
        })
    );
    let many = (0..super::records::OFFSETS_LISTED + 1)
        .map(|_| json!({ "value": null, "partition": 0 }))
        .collect::<Vec<_>>();
    let r = h.post("/v1/topics/t/records", json!({ "records": many })).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body.get("offsets").is_none(), "no per-record list past the threshold");
    assert_eq!(
        r.body["ranges"],
        json!([{ "partition": 0, "base_offset": 1, "count": 1001 }])
    );
}

#[tokio::test]
async fn a_request_of_more_records_than_its_overhead_allows_is_413() {
    let h = Harness::with_topic("t", 1).await;
    let max = FakeEngine::default_limits().max_request_bytes / super::RECORD_OVERHEAD;
    let body = |n: usize| format!(r#"{{"records":[{}]}}"#, vec![r#"{"value":null}"#; n].join(","));
    let r = h
        .post_raw("/v1/topics/t/records", "application/json", body(max).into())
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = h
        .post_raw("/v1/topics/t/records", "application/json", body(max + 1).into())
        .await;
    r.assert_error(413, "request_too_large");
    assert!(r.message().contains("--max-request-bytes"), "{}", r.message());
    assert_eq!(h.engine.total_records("t"), max);
}

#[tokio::test]
async fn reads_are_capped_by_max_read_bytes_whatever_max_bytes_asks() {
    let h = Harness::with_topic("t", 1).await;
    let value = "v".repeat(900);
    for _ in 0..4 {
        let body = json!({ "records": (0..20).map(|_| json!({ "value": value })).collect::<Vec<_>>() });
        assert_eq!(h.post("/v1/topics/t/records", body).await.status, StatusCode::OK);
    }
    let cap = FakeEngine::default_limits().max_read_bytes;
    let resp = h
        .app
        .clone()
        .oneshot(
            Request::get("/v1/topics/t/partitions/0/records?limit=10000&max_bytes=18446744073709551615")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    assert!(bytes.len() <= cap, "{} bytes > cap {cap}", bytes.len());
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    let n = v["records"].as_array().unwrap().len();
    assert!(n > 10 && n < 80, "{n} records");
    assert_eq!(
        v["next_offset"], n,
        "the next read starts after the last record returned"
    );
}

#[tokio::test]
async fn unknown_topic_config_keys_are_refused_by_name() {
    let h = Harness::new();
    let r = h
        .post(
            "/v1/topics",
            json!({ "name": "t", "config": { "retention_ms": 1000, "retension_bytes": 5 } }),
        )
        .await;
    r.assert_error(400, "invalid_request");
    assert!(r.message().contains("\"retension_bytes\""), "{}", r.message());
    let r = h
        .post(
            "/v1/topics",
            json!({ "name": "t", "config": { "retention_ms": 1000, "cleanup_policy": "delete" } }),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["config"]["retention_ms"], 1000);
}

#[tokio::test]
async fn a_compacted_topic_is_configured_over_http_and_refuses_records_without_keys() {
    let h = Harness::new();
    let bad = [
        json!({ "cleanup_policy": "keep" }),
        json!({ "min_cleanable_dirty_ratio": 2.0 }),
        json!({ "min_compaction_lag_ms": 10, "max_compaction_lag_ms": 5 }),
        json!({ "delete_retention_ms": -1 }),
    ];
    for config in &bad {
        let r = h.post("/v1/topics", json!({ "name": "k", "config": config })).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{config}: {}", r.body);
    }
    let r = h
        .post(
            "/v1/topics",
            json!({ "name": "k", "partitions": 2, "config": { "cleanup_policy": "compact,delete", "delete_retention_ms": 0 } }),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["config"]["cleanup_policy"], "compact,delete");
    // One record without a key: nothing of the request is appended.
    let mixed = json!({ "records": [{ "key": "a", "value": "1" }, { "value": "2" }] });
    for uri in ["/v1/topics/k/records", "/v1/topics/k/partitions/0/records"] {
        let r = h.post(uri, mixed.clone()).await;
        r.assert_error(400, "invalid_request");
        assert!(r.message().contains("records[1] has no key"), "{}", r.message());
    }
    let read = h
        .get("/v1/topics/k/partitions/0/records?isolation=read_uncommitted")
        .await;
    assert_eq!(read.body["records"], json!([]), "{}", read.body);
    // Reads may ask to be current; anything else is refused up front.
    let strong = h.get("/v1/topics/k/partitions/0/records?consistency=strong").await;
    assert_eq!(strong.status, StatusCode::OK, "{}", strong.body);
    h.get("/v1/topics/k/partitions/0/records?consistency=eventual")
        .await
        .assert_error(400, "invalid_request");
    let keyed = json!({ "records": [{ "key": "a", "value": "1" }, { "key": "b", "value": null }] });
    assert_eq!(
        h.post("/v1/topics/k/partitions/0/records", keyed).await.status,
        StatusCode::OK
    );

    // PATCH: set some keys, reset one, leave the rest; all or nothing.
    let patch = |body: Value| {
        Request::patch("/v1/topics/k/config")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let r = h
        .send(patch(
            json!({ "min_cleanable_dirty_ratio": 0.2, "delete_retention_ms": null }),
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["config"]["min_cleanable_dirty_ratio"], 0.2);
    assert_eq!(r.body["config"]["cleanup_policy"], "compact,delete", "kept");
    assert!(r.body["config"].get("delete_retention_ms").is_none(), "{}", r.body);
    for body in [
        json!({ "cleanup_policy": "delete", "retention_ms": 0 }),
        json!({ "compaction": true }),
        json!({ "durable": {} }),
        json!({ "min_compaction_lag_ms": "soon" }),
    ] {
        assert_eq!(
            h.send(patch(body.clone())).await.status,
            StatusCode::BAD_REQUEST,
            "{body}"
        );
    }
    let r = h.get("/v1/topics/k").await;
    assert_eq!(r.body["config"]["cleanup_policy"], "compact,delete", "nothing changed");
    // Back to delete: records without keys are taken again.
    let r = h.send(patch(json!({ "cleanup_policy": "delete" }))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        h.post("/v1/topics/k/records", records(&["x"])).await.status,
        StatusCode::OK
    );
    let r = h
        .send(
            Request::patch("/v1/topics/nope/config")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from("{}"))
                .unwrap(),
        )
        .await;
    r.assert_error(404, "topic_not_found");
}

#[tokio::test]
async fn simple_cross_site_posts_are_refused_and_real_clients_pass() {
    let h = Harness::new();
    let post = |ct: &str, origin: Option<&str>| {
        let mut b = Request::post("/v1/topics").header(header::CONTENT_TYPE, ct);
        if let Some(o) = origin {
            b = b.header(header::ORIGIN, o);
        }
        b.body(Body::from(r#"{"name":"t"}"#)).unwrap()
    };
    let r = h.send(post("text/plain", Some("https://evil.example"))).await;
    r.assert_error(403, "forbidden");
    assert!(h.engine.list_topics().is_empty(), "nothing created");
    let r = h.send(post("text/plain", None)).await;
    assert_eq!(r.status, StatusCode::CREATED, "no Origin: not a browser: {}", r.body);
    let r = h.send(post("application/json", Some("https://app.example"))).await;
    assert_eq!(
        r.status,
        StatusCode::CONFLICT,
        "JSON needs a preflight, so it passes the guard: {}",
        r.body
    );
}

#[tokio::test]
async fn an_oversize_content_length_is_413_before_the_body_is_read() {
    let h = Harness::with_topic("t", 1).await;
    // The body never arrives: only the declared length can have decided.
    let never = futures::stream::pending::<Result<axum::body::Bytes, std::io::Error>>();
    let req = Request::post("/v1/topics/t/records")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, "100000000")
        .body(Body::from_stream(never))
        .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), h.send(req))
        .await
        .expect("answered at once");
    r.assert_error(413, "request_too_large");
    assert!(r.message().contains("--max-request-bytes"), "{}", r.message());
}

#[tokio::test]
async fn a_path_that_is_not_utf8_gets_a_json_400() {
    let h = Harness::new();
    h.get("/v1/topics/%FF%FE").await.assert_error(400, "invalid_request");
    h.get("/v1/topics/caf%C3%A9").await.assert_error(404, "topic_not_found");
}

#[tokio::test]
async fn a_durable_streams_write_header_from_a_client_is_refused_and_appends_nothing() {
    let h = Harness::with_topic("t", 1).await;
    let req = Request::post("/v1/topics/t/partitions/0/records")
        .header(header::CONTENT_TYPE, "application/json")
        .header(crate::api::DS_WRITE_HEADER, r#"{"stream_seq":"1"}"#)
        .body(Body::from(records(&["a"]).to_string()))
        .unwrap();
    let r = h.send(req).await;
    r.assert_error(400, "invalid_request");
    assert!(r.message().contains("only accepted from another node"), "{}", r.body);
    assert!(h.engine.records("t", 0).is_empty());
}
