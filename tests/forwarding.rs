//! Forwarding through a non-owner, on real `sluice serve` processes sharing
//! one data dir: records appended over HTTP through node B for a partition
//! node A owns — client timestamps, binary and null keys and values,
//! repeated and null headers — come back byte-for-byte equal, at the same
//! offsets, over HTTP through B and from A, and over Kafka Fetch from A.
//! Kafka Produce and Fetch are not forwarded (clients go to the leader):
//! B answers NOT_LEADER_OR_FOLLOWER, and a batch produced to A reads back
//! unchanged through B. A long poll and a subscription through B receive a
//! record appended later.

mod support;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};
use sluice::batch::Record;
use sluice::kafka::wire::{Reader, Writer};
use std::io::{Read, Write};
use std::time::{Duration, Instant};
use support::process::{free_port, Server};

const TOPIC: &str = "fwd";

fn b64(b: &Option<Bytes>) -> Value {
    b.as_ref().map_or(Value::Null, |b| Value::String(B64.encode(b)))
}

fn unb64(v: &Value) -> Option<Bytes> {
    v.as_str()
        .map(|s| Bytes::from(B64.decode(s).expect("base64 from the node")))
}

/// Record `i` of the test: every shape a record can take.
fn record(i: usize) -> Record {
    let binary = |tag: u8| Bytes::from(vec![0xff, 0x00, tag, 0x80, b'"', b'\\', i as u8]);
    Record {
        // Client-given, far from now: a replaced timestamp cannot match.
        timestamp_ms: 1_500_000_000_000 + (i as i64) * 7919,
        key: match i % 3 {
            0 => None,
            1 => Some(Bytes::from(format!("key-{i}"))),
            _ => Some(binary(b'k')),
        },
        value: match i % 5 {
            0 => None, // a tombstone
            1 => Some(Bytes::new()),
            2 => Some(binary(b'v')),
            _ => Some(Bytes::from(format!("value {i} \u{e9}"))),
        },
        headers: vec![
            ("trace".into(), Some(Bytes::from(format!("t{i}")))),
            ("dup".into(), Some(Bytes::from_static(b"first"))),
            ("nul".into(), None),
            ("dup".into(), Some(binary(b'h'))),
            ("".into(), Some(Bytes::new())),
            ("dup".into(), None),
        ],
    }
}

fn record_json(r: &Record) -> Value {
    let headers: Vec<Value> = r.headers.iter().map(|(k, v)| json!([k, b64(v)])).collect();
    json!({"key": b64(&r.key), "value": b64(&r.value), "timestamp": r.timestamp_ms, "headers": headers})
}

/// A record of a `?encoding=base64&headers=list` answer.
fn parse_record(v: &Value) -> (u64, Record) {
    let headers = v["headers"]
        .as_array()
        .expect("headers as a list")
        .iter()
        .map(|h| (h[0].as_str().unwrap().to_string(), unb64(&h[1])))
        .collect();
    let r = Record {
        timestamp_ms: v["timestamp"].as_i64().unwrap(),
        key: unb64(&v["key"]),
        value: unb64(&v["value"]),
        headers,
    };
    (v["offset"].as_u64().unwrap(), r)
}

async fn append_via(client: &reqwest::Client, url: &str, p: u32, records: &[Record]) -> (u64, u64) {
    let body = json!({"records": records.iter().map(record_json).collect::<Vec<_>>()});
    let r = client
        .post(format!(
            "{url}/v1/topics/{TOPIC}/partitions/{p}/records?encoding=base64"
        ))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{v}");
    (v["base_offset"].as_u64().unwrap(), v["count"].as_u64().unwrap())
}

/// Every record of `p` from `from`, as the node at `url` answers: (body, records).
async fn read_via(client: &reqwest::Client, url: &str, p: u32, from: u64) -> (Bytes, Vec<(u64, Record)>) {
    let r = client
        .get(format!(
            "{url}/v1/topics/{TOPIC}/partitions/{p}/records?offset={from}&limit=10000&encoding=base64&headers=list"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body = r.bytes().await.unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    (
        body,
        v["records"].as_array().unwrap().iter().map(parse_record).collect(),
    )
}

fn kafka_call(addr: &str, frame: Vec<u8>) -> Bytes {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&frame).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    Bytes::from(body)
}

fn frame(key: i16, version: i16, body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::default();
    w.i16(key);
    w.i16(version);
    w.i32(1);
    w.string("forwarding-test");
    body(&mut w);
    let buf = w.finish().into_bytes();
    let mut out = (buf.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&buf);
    out
}

/// Produce v3 (acks=-1) of one batch to `p`: (error code, base offset).
fn kafka_produce(addr: &str, p: u32, batch: Bytes) -> (i16, i64) {
    let body = kafka_call(
        addr,
        frame(0, 3, |w| {
            w.nullable_string(None);
            w.i16(-1);
            w.i32(30_000);
            w.array_len(1);
            w.string(TOPIC);
            w.array_len(1);
            w.i32(p as i32);
            w.bytes_parts(&[batch]);
        }),
    );
    let mut r = Reader::new(body);
    r.i32().unwrap();
    r.array_len(1).unwrap();
    r.string().unwrap();
    r.array_len(1).unwrap();
    r.i32().unwrap();
    (r.i16().unwrap(), r.i64().unwrap())
}

/// Fetch v4 of `p` from `offset`: (error code, records bytes).
fn kafka_fetch(addr: &str, p: u32, offset: i64) -> (i16, Bytes) {
    let body = kafka_call(
        addr,
        frame(1, 4, |w| {
            w.i32(-1);
            w.i32(100);
            w.i32(1);
            w.i32(64 << 20);
            w.i8(0);
            w.array_len(1);
            w.string(TOPIC);
            w.array_len(1);
            w.i32(p as i32);
            w.i64(offset);
            w.i32(64 << 20);
        }),
    );
    let mut r = Reader::new(body);
    r.i32().unwrap(); // correlation id
    r.i32().unwrap(); // throttle
    r.array_len(1).unwrap();
    r.string().unwrap();
    r.array_len(1).unwrap();
    r.i32().unwrap();
    let error = r.i16().unwrap();
    r.i64().unwrap(); // high watermark
    r.i64().unwrap(); // last stable offset
    r.nullable_array_len(0).unwrap(); // aborted transactions
    (error, r.nullable_bytes().unwrap().unwrap_or_default())
}

/// The records of a Fetch answer's bytes, decoded batch by batch.
fn fetched_records(bytes: &Bytes) -> Vec<(u64, Record)> {
    let mut out = Vec::new();
    for b in sluice::batch::batches("fetch", bytes) {
        let (_, batch) = b.unwrap();
        for (o, r) in sluice::batch::decode_records("fetch", batch).unwrap() {
            out.push((o.get(), r));
        }
    }
    out
}

/// `got` is exactly `sent` at offsets `base..`: every field, byte for byte.
fn same(sent: &[Record], base: u64, got: &[(u64, Record)]) -> bool {
    got.len() == sent.len()
        && got
            .iter()
            .zip(sent)
            .enumerate()
            .all(|(i, ((o, g), s))| *o == base + i as u64 && g == s)
}

/// The topic's partition owned by `a`, the nodes agreeing on it.
async fn partition_of(client: &reqwest::Client, a: &Server, b: &Server) -> u32 {
    let p = support::http::partition_owned_by(client, &a.url, TOPIC, &a.node_id)
        .await
        .expect("placement gives each node a partition");
    // B's view follows the metadata log within its poll interval.
    let deadline = Instant::now() + Duration::from_secs(10);
    while support::http::partition_owned_by(client, &b.url, TOPIC, &a.node_id).await != Some(p) {
        assert!(Instant::now() < deadline, "B does not see A own partition {p}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_forwarded_through_a_non_owner_are_byte_for_byte_the_clients() {
    let dir = tempfile::tempdir().unwrap();
    let a = Server::start("a", dir.path(), free_port(), &[]);
    let b = Server::start("b", dir.path(), free_port(), &[]);
    let client = reqwest::Client::new();
    support::http::create_topic(&client, &a.url, TOPIC, 2).await;
    let p = partition_of(&client, &a, &b).await;

    // Positive control: the comparison sees a one-byte difference, and the
    // records carry what a lossy forwarder would lose.
    let sent: Vec<Record> = (0..60).map(record).collect();
    let mut off_by_one = sent.clone();
    off_by_one[17].headers[3].1 = Some(Bytes::from_static(b"x"));
    let as_read: Vec<(u64, Record)> = sent.iter().cloned().enumerate().map(|(i, r)| (i as u64, r)).collect();
    assert!(same(&sent, 0, &as_read) && !same(&off_by_one, 0, &as_read));
    assert!(sent
        .iter()
        .all(|r| r.headers.iter().filter(|h| h.0 == "dup").count() == 3));

    // Appended through B in three requests.
    let mut base = None;
    for chunk in sent.chunks(20) {
        let (at, count) = append_via(&client, &b.url, p, chunk).await;
        assert_eq!(count, chunk.len() as u64);
        base.get_or_insert(at);
    }
    let base = base.unwrap();
    assert_eq!(base, 0, "a new partition starts at 0");

    // HTTP through B and from A: the same records, the same answer bytes.
    let (via_b, records_b) = read_via(&client, &b.url, p, base).await;
    let (from_a, records_a) = read_via(&client, &a.url, p, base).await;
    assert!(same(&sent, base, &records_b), "through B: {:?}", records_b.first());
    assert!(same(&sent, base, &records_a), "from A");
    assert_eq!(via_b, from_a, "B relays what A answers, byte for byte");
    let bytes: usize = sent.iter().map(sluice::stream::partition::record_size).sum();
    eprintln!(
        "compared {} records ({bytes} bytes of keys, values and headers; answer {} bytes) via B, from A and over Kafka",
        sent.len(),
        via_b.len()
    );

    // Kafka: Fetch from the owner gives the same records; B is not the leader.
    let (error, fetched) = kafka_fetch(&a.kafka_addr, p, base as i64);
    assert_eq!(error, 0);
    assert!(same(&sent, base, &fetched_records(&fetched)), "Kafka Fetch from A");
    assert_eq!(
        kafka_fetch(&b.kafka_addr, p, 0).0,
        6,
        "Fetch from B: NOT_LEADER_OR_FOLLOWER"
    );

    // Kafka Produce goes to the leader; through B it is refused, and what A
    // stored reads back unchanged through B.
    let produced: Vec<Record> = (100..110).map(record).collect();
    let batch = sluice::batch::encode_batch(sluice::ids::Offset(0), &produced);
    assert_eq!(kafka_produce(&b.kafka_addr, p, batch.clone()).0, 6, "Produce to B");
    let (error, at) = kafka_produce(&a.kafka_addr, p, batch);
    assert_eq!((error, at), (0, sent.len() as i64));
    let (_, tail) = read_via(&client, &b.url, p, at as u64).await;
    assert!(same(&produced, at as u64, &tail), "a Kafka batch read through B");
    let (_, fetched) = kafka_fetch(&a.kafka_addr, p, 0);
    assert_eq!(fetched_records(&fetched).len(), sent.len() + produced.len());

    // The owner's errors come back as the same code and details.
    let past = |url: &str| {
        client
            .get(format!("{url}/v1/topics/{TOPIC}/partitions/{p}/records?offset=1000000"))
            .send()
    };
    let (via_b, from_a) = (past(&b.url).await.unwrap(), past(&a.url).await.unwrap());
    assert_eq!(
        (via_b.status(), from_a.status()),
        (416.try_into().unwrap(), 416.try_into().unwrap())
    );
    let (eb, ea): (Value, Value) = (via_b.json().await.unwrap(), from_a.json().await.unwrap());
    assert_eq!(eb["error"]["code"], "offset_out_of_range");
    assert_eq!(eb["error"]["start_offset"], ea["error"]["start_offset"]);

    internal_calls_need_the_peer_credential(&client, &a, p).await;
    latency(&client, &a, &b, p).await;
}

/// A client cannot use the internal call: without the peer credential (a
/// forged mark included) it is refused and nothing is appended; and it is
/// not in the public OpenAPI document.
async fn internal_calls_need_the_peer_credential(client: &reqwest::Client, a: &Server, p: u32) {
    let (before, _) = read_via(client, &a.url, p, 0).await;
    let batch = sluice::batch::encode_batch(sluice::ids::Offset(0), &[record(7)]);
    let url = format!("{}/internal/v1/topics/{TOPIC}/partitions/{p}/batch", a.url);
    for forged in [None, Some("1")] {
        let mut req = client.post(&url).body(batch.clone());
        if let Some(mark) = forged {
            req = req.header("sluice-forwarded", mark).header("sluice-peer", "guess");
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 403, "{}", r.text().await.unwrap());
    }
    let r = client
        .get(format!(
            "{}/internal/v1/topics/{TOPIC}/partitions/{p}/batches?from=0",
            a.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let (after, _) = read_via(client, &a.url, p, 0).await;
    assert_eq!(before, after, "nothing appended");
    let doc = client
        .get(format!("{}/openapi.json", a.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(doc.contains("/v1/topics") && !doc.contains("/internal/"));
}

/// Median time of 30 appends of one record through `url`.
async fn median_append(client: &reqwest::Client, url: &str, p: u32) -> Duration {
    let mut took = Vec::new();
    for i in 0..30 {
        let started = Instant::now();
        append_via(client, url, p, &[record(i)]).await;
        took.push(started.elapsed());
    }
    took.sort();
    took[took.len() / 2]
}

/// Forwarded vs local appends of one small record, printed (not asserted).
async fn latency(client: &reqwest::Client, a: &Server, b: &Server, p: u32) {
    let local = median_append(client, &a.url, p).await;
    let forwarded = median_append(client, &b.url, p).await;
    eprintln!("median append of one record: local {local:?}, forwarded {forwarded:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_and_a_subscription_through_a_non_owner_get_a_later_record() {
    let dir = tempfile::tempdir().unwrap();
    let a = Server::start("a", dir.path(), free_port(), &[]);
    let b = Server::start("b", dir.path(), free_port(), &[]);
    let client = reqwest::Client::new();
    support::http::create_topic(&client, &a.url, TOPIC, 2).await;
    let p = partition_of(&client, &a, &b).await;
    append_via(&client, &a.url, p, &[record(1)]).await;

    // A long poll at the end, through B.
    let poll = {
        let (client, url) = (client.clone(), b.url.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let r = client
                .get(format!(
                    "{url}/v1/topics/{TOPIC}/partitions/{p}/records?offset=1&wait_ms=20000&encoding=base64&headers=list"
                ))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            (r.json::<Value>().await.unwrap(), started.elapsed())
        })
    };
    // A subscription at the end, through B.
    let mut sse = client
        .get(format!(
            "{}/v1/topics/{TOPIC}/partitions/{p}/subscribe?offset=1&encoding=base64&headers=list",
            b.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status(), 200);
    assert!(sse.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!poll.is_finished(), "the long poll waits for a record");
    let later = record(42);
    let (at, _) = append_via(&client, &b.url, p, std::slice::from_ref(&later)).await;
    assert_eq!(at, 1);

    let (answer, waited) = poll.await.unwrap();
    let records: Vec<(u64, Record)> = answer["records"].as_array().unwrap().iter().map(parse_record).collect();
    assert!(same(std::slice::from_ref(&later), 1, &records), "{answer}");
    eprintln!("the long poll through B answered {waited:?} after it was sent");

    // The subscription through B is one request at A, relayed: A has served
    // no read for it, only the subscribe (and the /metrics read before).
    let gets_before = gets_served(&client, &a).await;
    let later2 = record(43);
    append_via(&client, &a.url, p, std::slice::from_ref(&later2)).await;
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let event = loop {
        if let Some(data) = text
            .split("\n\n")
            .find(|e| e.contains("event: record"))
            .and_then(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        {
            break data.to_string();
        }
        assert!(Instant::now() < deadline, "no record event: {text:?}");
        let chunk = tokio::time::timeout(Duration::from_secs(20), sse.chunk())
            .await
            .expect("an event in time")
            .unwrap()
            .expect("the stream stays open");
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    };
    let got = parse_record(&serde_json::from_str(&event).unwrap());
    assert!(same(std::slice::from_ref(&later), 1, &[got]), "{event}");
    assert!(text.contains("id: 1\n"), "{text}");
    // And the record appended at A after it, on the same response.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !text.contains("id: 2\n") {
        assert!(Instant::now() < deadline, "no second record event: {text:?}");
        let chunk = tokio::time::timeout(Duration::from_secs(20), sse.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let second = text.split("\n\n").find(|e| e.contains("id: 2\n")).unwrap();
    let data = second.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
    assert!(same(
        std::slice::from_ref(&later2),
        2,
        &[parse_record(&serde_json::from_str(data).unwrap())]
    ));
    assert_eq!(
        gets_served(&client, &a).await - gets_before,
        1,
        "A served nothing for the subscription but the /metrics read: the relay is one response"
    );
}

/// GET requests `node` has answered (`sluice_http_requests_total`), each
/// counted once its answer's head is written.
async fn gets_served(client: &reqwest::Client, node: &Server) -> u64 {
    let text = client
        .get(format!("{}/metrics", node.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let n: f64 = text
        .lines()
        .filter(|l| l.starts_with("sluice_http_requests_total{") && l.contains("method=\"GET\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(n > 0.0, "no GET counted: {text}");
    n as u64
}
