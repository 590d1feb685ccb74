//! Framing and bounds (fuzz-style), and each handler over a real in-memory node.

use super::versions::SUPPORTED;
use super::wire::{Reader, Writer};
use super::*;
use crate::api::*;
use crate::batch::{encode_batch, Record};
use crate::config::ServeArgs;
use crate::http::tests::fake::FakeEngine;
use crate::ids::Offset;
use crate::node::{Backends, Node};
use rand::{Rng, SeedableRng};
use tokio::io::AsyncWriteExt;

mod acls;
mod admin;
mod dataplane;
mod delete_records;
mod describe_producers;
mod group_codecs;
mod group_state;
mod log_dirs;
mod offset_delete;
mod txn;

const OPTS: Options = Options {
    max_frame_bytes: 1 << 20,
    ..Options::defaults()
};

fn request(key: i16, version: i16, corr: i32, body: &[u8]) -> Bytes {
    let mut w = Writer::default();
    w.i16(key);
    w.i16(version);
    w.i32(corr);
    w.nullable_string(Some("test"));
    if key == API_VERSIONS && version >= 3 {
        w.no_tagged_fields();
    }
    w.buf.extend_from_slice(body);
    w.buf.freeze()
}

fn produce_body(acks: i16, topic: &str, partition: i32, records: &[u8]) -> Vec<u8> {
    let mut w = Writer::default();
    w.nullable_string(None);
    w.i16(acks);
    w.i32(5000);
    w.array_len(1);
    w.string(topic);
    w.array_len(1);
    w.i32(partition);
    w.bytes_parts(&[Bytes::copy_from_slice(records)]);
    w.buf.to_vec()
}

/// A Fetch v11 body for one partition.
fn fetch_body(max_wait_ms: i32, topic: &str, partition: i32, offset: i64, max_bytes: i32) -> Vec<u8> {
    fetch_body_at(max_wait_ms, topic, partition, -1, offset, max_bytes)
}

fn fetch_body_at(max_wait_ms: i32, topic: &str, partition: i32, epoch: i32, offset: i64, max_bytes: i32) -> Vec<u8> {
    let mut w = Writer::default();
    w.i32(-1);
    w.i32(max_wait_ms);
    w.i32(1);
    w.i32(max_bytes);
    w.i8(0);
    w.i32(0);
    w.i32(-1);
    w.array_len(1);
    w.string(topic);
    w.array_len(1);
    w.i32(partition);
    w.i32(epoch);
    w.i64(offset);
    w.i64(-1);
    w.i32(max_bytes);
    w.array_len(0);
    w.string("");
    w.buf.to_vec()
}

/// A ListOffsets v5 body for one partition.
fn list_offsets_body(topic: &str, partition: i32, timestamp: i64) -> Vec<u8> {
    let mut w = Writer::default();
    w.i32(-1);
    w.i8(0);
    w.array_len(1);
    w.string(topic);
    w.array_len(1);
    w.i32(partition);
    w.i32(-1);
    w.i64(timestamp);
    w.buf.to_vec()
}

fn metadata_body(topics: &[&str], auto_create: bool) -> Vec<u8> {
    let mut w = Writer::default();
    w.array_len(topics.len());
    for t in topics {
        w.string(t);
    }
    w.bool(auto_create);
    w.bool(false);
    w.bool(false);
    w.buf.to_vec()
}

fn record(key: &str, value: &str, ts: i64) -> Record {
    Record {
        timestamp_ms: ts,
        key: Some(Bytes::copy_from_slice(key.as_bytes())),
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: vec![("h".into(), Some(Bytes::from_static(b"x")))],
    }
}

async fn call(engine: &Services, frame: Bytes) -> Reader {
    let resp = handle(engine, OPTS, frame).await.unwrap().expect("a response");
    let mut r = Reader::new(resp);
    r.i32().unwrap(); // correlation id
    r
}

/// Produce v8 response for one partition: (error, base offset).
fn produce_answer(mut r: Reader) -> (i16, i64) {
    assert_eq!(r.array_len(1).unwrap(), 1);
    r.string().unwrap();
    assert_eq!(r.array_len(1).unwrap(), 1);
    r.i32().unwrap();
    let error = r.i16().unwrap();
    let base = r.i64().unwrap();
    r.i64().unwrap();
    r.i64().unwrap();
    assert_eq!(r.array_len(1).unwrap(), 0);
    r.nullable_string().unwrap();
    r.i32().unwrap();
    r.expect_end().unwrap();
    (error, base)
}

/// Fetch v11 response for one partition: (error, high watermark, records).
fn fetch_answer(mut r: Reader) -> (i16, i64, Bytes) {
    r.i32().unwrap();
    assert_eq!(r.i16().unwrap(), 0);
    r.i32().unwrap();
    assert_eq!(r.array_len(1).unwrap(), 1);
    r.string().unwrap();
    assert_eq!(r.array_len(1).unwrap(), 1);
    r.i32().unwrap();
    let error = r.i16().unwrap();
    let hw = r.i64().unwrap();
    assert_eq!(r.i64().unwrap(), hw, "last stable offset");
    r.i64().unwrap();
    assert_eq!(r.array_len(1).unwrap(), 0);
    assert_eq!(r.i32().unwrap(), -1);
    let records = r.nullable_bytes().unwrap().unwrap();
    r.expect_end().unwrap();
    (error, hw, records)
}

/// ListOffsets v5 response for one partition: (error, timestamp, offset, epoch).
fn list_offsets_answer(mut r: Reader) -> (i16, i64, i64, i32) {
    r.i32().unwrap();
    assert_eq!(r.array_len(1).unwrap(), 1);
    r.string().unwrap();
    assert_eq!(r.array_len(1).unwrap(), 1);
    r.i32().unwrap();
    let a = (r.i16().unwrap(), r.i64().unwrap(), r.i64().unwrap(), r.i32().unwrap());
    r.expect_end().unwrap();
    a
}

/// Skips a Metadata v7+ response up to its topics.
fn skip_brokers(r: &mut Reader) {
    r.i32().unwrap(); // throttle
    for _ in 0..r.array_len(1).unwrap() {
        r.i32().unwrap();
        r.string().unwrap();
        r.i32().unwrap();
        r.nullable_string().unwrap();
    }
    r.nullable_string().unwrap(); // cluster id
    r.i32().unwrap(); // controller
}

async fn node() -> Arc<Node> {
    node_with(&[]).await
}

fn memory_backends() -> Backends {
    Backends {
        data: Arc::new(crate::store::MemoryStore::new()),
        wal: Arc::new(crate::store::MemoryStore::new()),
        log: Arc::new(crate::meta::memory_log::MemoryLog::new()),
    }
}

async fn node_with(extra: &[&str]) -> Arc<Node> {
    node_on("n1", memory_backends(), extra).await
}

async fn node_on(id: &str, backends: Backends, extra: &[&str]) -> Arc<Node> {
    let mut args = vec![
        "--node-id",
        id,
        "--heartbeat-interval-sec",
        "1",
        "--node-timeout-sec",
        "4",
        "--shutdown-drain-sec",
        "0",
        "--meta-poll-ms",
        "20",
        "--http-addr",
        "127.0.0.1:0",
        "--kafka-addr",
        "127.0.0.1:0",
        "--advertised-kafka-addr",
        "kafka.example:9093",
        "--max-record-bytes",
        "1000",
    ];
    args.extend_from_slice(extra);
    let config = ServeArgs::parse_from(args).unwrap().validate().unwrap();
    Node::start_with(config, backends).await.unwrap()
}

/// Two nodes on shared in-memory stores, once each sees both.
async fn two_nodes() -> (Arc<Node>, Arc<Node>) {
    let backends = memory_backends();
    let n1 = node_on("n1", backends.clone(), &[]).await;
    let n2 = node_on("n2", backends, &[]).await;
    for _ in 0..400 {
        if n1.nodes().nodes.len() == 2 && n2.nodes().nodes.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    (n1, n2)
}

async fn wait_open(engine: &Services, topic: &str) {
    for _ in 0..300 {
        if let Ok(d) = engine.topics.describe_topic(topic) {
            if d.partition_info.iter().all(|p| p.state == "open") {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{topic} was not placed");
}

// ------------------------------------------------------------ framing

/// A 26-byte Produce v8 frame whose topic array claims 2^31-1 elements.
fn lying_produce() -> Vec<u8> {
    let mut w = Writer::default();
    w.i32(22);
    w.i16(PRODUCE);
    w.i16(8);
    w.i32(7);
    w.i16(-1); // client id
    w.i16(-1); // transactional id
    w.i16(1);
    w.i32(1000);
    w.i32(i32::MAX); // topics
    assert_eq!(w.buf.len(), 26);
    w.buf.to_vec()
}

#[tokio::test]
async fn random_and_lying_frames_never_panic() {
    let limits = Limits {
        max_wait: Duration::from_millis(1),
        ..FakeEngine::default_limits()
    };
    let engine = FakeEngine::new(limits);
    fuzz(&Services::from(engine.clone()), 20_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_frames_against_a_real_node_never_panic() {
    let node = node_with(&["--max-wait-ms", "1"]).await;
    node.create_topic("t", 1, Default::default()).await.unwrap();
    wait_open(&node.services(), "t").await;
    fuzz(&node.services(), 3_000).await;
    assert!(node.ready().ready, "the node is still serving");
}

/// Feeds random, byte-flipped and truncated frames (and a lying Produce)
/// to `handle`: errors are expected, panics are not.
async fn fuzz(engine: &Services, rounds: u32) {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let lying = Bytes::from(lying_produce()[4..].to_vec());
    assert!(handle(engine, OPTS, lying).await.is_err());
    let valid: Vec<Bytes> = [
        request(API_VERSIONS, 3, 1, &[3, b'r', b's', 2, b'1', 0]),
        request(METADATA, 8, 2, &metadata_body(&["t"], false)),
        request(
            PRODUCE,
            8,
            3,
            &produce_body(1, "t", 0, &encode_batch(Offset(0), &[record("k", "v", 1)])),
        ),
        request(FETCH, 11, 4, &fetch_body(0, "t", 0, 0, 1000)),
        request(LIST_OFFSETS, 5, 5, &list_offsets_body("t", 0, -2)),
    ]
    .into_iter()
    .chain(group_bodies().into_iter().map(|(k, v, b)| request(k, v, 6, &b)))
    .collect();
    for i in 0..rounds {
        let frame: Vec<u8> = match i % 4 {
            // Pure noise with a supported key and version.
            0 => {
                let (key, _, max) = SUPPORTED[rng.random_range(0..SUPPORTED.len())];
                let mut f = request(key, rng.random_range(0..=max), 1, &[]).to_vec();
                let n = rng.random_range(0..64);
                f.extend((0..n).map(|_| rng.random::<u8>()));
                f
            }
            // A valid request with some bytes flipped to extremes.
            1 | 2 => {
                let mut f = valid[rng.random_range(0..valid.len())].to_vec();
                for _ in 0..rng.random_range(1..4) {
                    let at = rng.random_range(8..f.len());
                    f[at] = [0x00, 0x7f, 0x80, 0xff][rng.random_range(0..4)];
                }
                f
            }
            // A valid request cut short.
            _ => {
                let f = &valid[rng.random_range(0..valid.len())];
                f[..rng.random_range(8..f.len())].to_vec()
            }
        };
        // Errors are fine (the connection closes); panics and aborts are not.
        let _ = tokio::time::timeout(Duration::from_secs(1), handle(engine, OPTS, Bytes::from(frame))).await;
    }
}

#[tokio::test]
async fn a_lying_frame_closes_only_its_own_connection() {
    let engine = FakeEngine::new(FakeEngine::default_limits());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = watch::channel(false);
    let server = tokio::spawn(serve(engine, listener, OPTS, stop_rx));

    let mut good = tokio::net::TcpStream::connect(addr).await.unwrap();
    let api_versions = |corr| {
        let body = request(API_VERSIONS, 2, corr, &[]);
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(&body);
        f
    };
    async fn answer(s: &mut tokio::net::TcpStream) -> std::io::Result<Bytes> {
        use tokio::io::AsyncReadExt;
        let len = s.read_u32().await?;
        let mut b = vec![0; len as usize];
        s.read_exact(&mut b).await?;
        Ok(b.into())
    }
    good.write_all(&api_versions(1)).await.unwrap();
    assert_eq!(&answer(&mut good).await.unwrap()[..4], &1i32.to_be_bytes());

    for bad in [
        lying_produce(),
        vec![0x7f, 0xff, 0xff, 0xff, 0, 0],               // over the frame limit
        vec![0, 0, 0, 2, 0, 0],                           // under the header minimum
        vec![0, 0, 0, 12, 0, 18, 0, 3, 0, 0, 0, 9, 0xff], // ApiVersions v3, truncated
    ] {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(&bad).await.unwrap();
        let _ = s.shutdown().await;
        assert!(answer(&mut s).await.is_err(), "{bad:?} closes its connection");
    }

    // An unsupported ApiVersions version is answered in v0, the
    // connection kept.
    let body = request(API_VERSIONS, 99, 2, &[]);
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&body);
    good.write_all(&f).await.unwrap();
    let a = answer(&mut good).await.unwrap();
    assert_eq!(&a[..6], &[0, 0, 0, 2, 0, code::UNSUPPORTED_VERSION as u8]);
    // Pipelined requests are answered in order.
    let mut two = api_versions(3);
    two.extend(api_versions(4));
    good.write_all(&two).await.unwrap();
    assert_eq!(&answer(&mut good).await.unwrap()[..4], &3i32.to_be_bytes());
    assert_eq!(&answer(&mut good).await.unwrap()[..4], &4i32.to_be_bytes());

    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap();
    assert!(answer(&mut good).await.is_err(), "closed on shutdown");
}

// ------------------------------------------------------------ handlers

/// Frames `body` for a socket.
fn framed(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

async fn read_answer(s: &mut tokio::net::TcpStream) -> std::io::Result<Bytes> {
    use tokio::io::AsyncReadExt;
    let len = s.read_u32().await?;
    let mut b = vec![0; len as usize];
    s.read_exact(&mut b).await?;
    Ok(b.into())
}

/// An ApiVersions v3+ request naming its client software, encoded by
/// kafka-protocol (header v2 included).
fn api_versions_v3(version: i16, corr: i32, name: &str, software_version: &str) -> Bytes {
    use kafka_protocol::messages::{ApiVersionsRequest, RequestHeader};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let mut b = bytes::BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(API_VERSIONS)
        .with_request_api_version(version)
        .with_correlation_id(corr)
        .with_client_id(Some(StrBytes::from_static_str("versions-test")))
        .encode(&mut b, 2)
        .unwrap();
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_string(name.into()))
        .with_client_software_version(StrBytes::from_string(software_version.into()))
        .encode(&mut b, version)
        .unwrap();
    b.freeze()
}

#[tokio::test]
async fn an_unsupported_request_version_closes_the_connection_and_api_versions_still_answers() {
    let engine = FakeEngine::new(FakeEngine::default_limits());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = watch::channel(false);
    let server = tokio::spawn(serve(engine, listener, OPTS, stop_rx));

    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(&framed(&api_versions_v3(3, 1, "sluice-test", "9.9")))
        .await
        .unwrap();
    assert_eq!(&read_answer(&mut s).await.unwrap()[..4], &1i32.to_be_bytes());
    // Fetch v99: no body a client could read exists, so the connection closes.
    s.write_all(&framed(&request(FETCH, 99, 2, &[]))).await.unwrap();
    assert!(read_answer(&mut s).await.is_err(), "closed, nothing answered");

    // An unknown key closes too.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(&framed(&request(9_999, 0, 3, &[]))).await.unwrap();
    assert!(read_answer(&mut s).await.is_err());

    // ApiVersions too new: v0 UNSUPPORTED_VERSION with the table; still open.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(&framed(&request(API_VERSIONS, 9, 4, &[]))).await.unwrap();
    let a = read_answer(&mut s).await.unwrap();
    let v0 = decode_api_versions_response(a.slice(4..), 0);
    assert_eq!(v0.error_code, code::UNSUPPORTED_VERSION);
    assert_eq!(v0.api_keys.len(), SUPPORTED.len());
    s.write_all(&framed(&api_versions_v3(4, 5, "x", "1"))).await.unwrap();
    assert_eq!(&read_answer(&mut s).await.unwrap()[..4], &5i32.to_be_bytes());

    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn an_unsupported_version_is_an_error_not_a_one_field_body() {
    let engine = Services::from(FakeEngine::new(FakeEngine::default_limits()));
    for (key, version) in [
        (FETCH, 99),
        (METADATA, -1),
        (9_999, 0),
        (super::admin_proto::CREATE_TOPICS, 99),
    ] {
        let e = handle(&engine, OPTS, request(key, version, 1, &[])).await.unwrap_err();
        assert!(e.message.contains("not supported"), "{e}");
    }
}

fn decode_api_versions_response(b: Bytes, version: i16) -> kafka_protocol::messages::ApiVersionsResponse {
    use kafka_protocol::protocol::Decodable;
    let mut b = b;
    let resp = kafka_protocol::messages::ApiVersionsResponse::decode(&mut b, version).unwrap();
    assert!(b.is_empty(), "v{version}: {} bytes left", b.len());
    resp
}

#[tokio::test]
async fn api_versions_over_the_wire_advertises_exactly_supported() {
    let engine = FakeEngine::new(FakeEngine::default_limits());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = watch::channel(false);
    let server = tokio::spawn(serve(engine, listener, OPTS, stop_rx));
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    for version in 0..=4 {
        let req = if version >= 3 {
            api_versions_v3(version, version.into(), "sluice-test", "1.0")
        } else {
            request(API_VERSIONS, version, version.into(), &[])
        };
        s.write_all(&framed(&req)).await.unwrap();
        let a = read_answer(&mut s).await.unwrap();
        assert_eq!(&a[..4], &i32::from(version).to_be_bytes());
        // ApiVersions always answers with response header v0.
        let resp = decode_api_versions_response(a.slice(4..), version);
        assert_eq!(resp.error_code, 0);
        let got: Vec<_> = resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        assert_eq!(got, SUPPORTED.to_vec(), "v{version}");
        if version >= 3 {
            assert!(resp.supported_features.is_empty() && resp.finalized_features.is_empty());
            assert_eq!(resp.finalized_features_epoch, -1);
        }
    }
    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap();
}

#[test]
fn every_supported_range_is_one_kafka_defines() {
    use kafka_protocol::messages::ApiKey;
    let mut keys = std::collections::HashSet::new();
    for (key, min, max) in SUPPORTED {
        assert!(keys.insert(key), "key {key} listed twice");
        let k = ApiKey::try_from(key).unwrap_or_else(|_| panic!("key {key} is not a Kafka API"));
        let valid = k.valid_versions();
        assert!(0 <= min && min <= max, "{k:?} {min}-{max}");
        // No version beyond what Kafka 4 defines. Floors may be lower than
        // Kafka 4's: those versions were defined by earlier Kafkas and old
        // clients (kcat, librdkafka 2.0) still use them.
        assert!(max <= valid.max, "{k:?} v{max} is beyond Kafka's {}", valid.max);
    }
}

/// docs/kafka.md carries [`versions::markdown`] between two markers; run
/// with `SLUICE_BLESS=1` to rewrite it there.
#[test]
fn the_version_table_in_docs_is_generated_from_supported() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/kafka.md");
    let (begin, end) = (
        "<!-- versions:begin (generated: SLUICE_BLESS=1 cargo test --lib version_table) -->\n",
        "<!-- versions:end -->",
    );
    let doc = std::fs::read_to_string(path).unwrap();
    let table = versions::markdown();
    let (Some(b), Some(e)) = (doc.find(begin), doc.find(end)) else {
        panic!("docs/kafka.md lacks the markers {begin:?} … {end:?}");
    };
    let current = &doc[b + begin.len()..e];
    if current != table {
        if std::env::var_os("SLUICE_BLESS").is_some() {
            let blessed = format!("{}{table}{}", &doc[..b + begin.len()], &doc[e..]);
            std::fs::write(path, blessed).unwrap();
        } else {
            panic!(
                "docs/kafka.md's version table is stale; run SLUICE_BLESS=1 cargo test --lib version_table\n{table}"
            );
        }
    }
}

#[tokio::test]
async fn api_versions_advertises_exactly_what_is_implemented() {
    let engine = FakeEngine::new(FakeEngine::default_limits());
    for version in 0..=2 {
        let body: &[u8] = if version == 3 { &[1, 1, 0] } else { &[] };
        let mut r = call(&Services::from(engine.clone()), request(API_VERSIONS, version, 1, body)).await;
        assert_eq!(r.i16().unwrap(), 0);
        let n = if version >= 3 {
            r.uvarint().unwrap() as usize - 1
        } else {
            r.array_len(6).unwrap()
        };
        let mut got = Vec::new();
        for _ in 0..n {
            got.push((r.i16().unwrap(), r.i16().unwrap(), r.i16().unwrap()));
            if version >= 3 {
                r.tagged_fields().unwrap();
            }
        }
        assert_eq!(got, SUPPORTED.to_vec());
        if version >= 1 {
            assert_eq!(r.i32().unwrap(), 0);
        }
        if version >= 3 {
            r.tagged_fields().unwrap();
        }
        r.expect_end().unwrap();
    }
    // Too new: answered in v0 with UNSUPPORTED_VERSION and the table.
    let mut r = call(&Services::from(engine.clone()), request(API_VERSIONS, 5, 1, &[])).await;
    assert_eq!(r.i16().unwrap(), code::UNSUPPORTED_VERSION);
    assert_eq!(r.array_len(6).unwrap(), SUPPORTED.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_refuses_a_batch_with_a_record_without_a_key() {
    let node = node().await;
    let engine = &node.services();
    let config = crate::meta::TopicConfig {
        cleanup_policy: Some(crate::meta::CleanupPolicy::Compact),
        ..Default::default()
    };
    engine.topics.create_topic("kc", 1, config).await.unwrap();
    wait_open(engine, "kc").await;
    let produce = |batch: &[u8]| request(PRODUCE, 8, 2, &produce_body(-1, "kc", 0, batch));
    let keyless = Record {
        key: None,
        ..record("", "v", 1)
    };
    let mixed = encode_batch(Offset(0), &[record("a", "1", 1), keyless]);
    assert_eq!(
        produce_answer(call(engine, produce(&mixed)).await).0,
        code::INVALID_RECORD
    );
    let end = || engine.topics.describe_topic("kc").unwrap().partition_info[0].end_offset;
    assert_eq!(end(), Offset(0), "nothing of the batch appended");
    // An empty key is a key; a tombstone (no value) is fine.
    let tombstone = Record {
        value: None,
        ..record("", "", 2)
    };
    let keyed = encode_batch(Offset(0), &[record("a", "1", 1), tombstone]);
    assert_eq!(produce_answer(call(engine, produce(&keyed)).await), (0, 0));
    assert_eq!(end(), Offset(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_produce_fetch_and_list_offsets_over_a_node() {
    let node = node().await;
    let engine = &node.services();

    // Metadata auto-creates a named topic; leaders appear once it is placed.
    let mut r = call(engine, request(METADATA, 8, 1, &metadata_body(&["auto"], true))).await;
    r.i32().unwrap();
    assert_eq!(r.array_len(1).unwrap(), 1);
    assert_eq!(r.i32().unwrap(), broker_id("n1"));
    assert_eq!(r.string().unwrap(), "kafka.example");
    assert_eq!(r.i32().unwrap(), 9093);
    assert!(engine.topics.describe_topic("auto").is_ok(), "auto-created");
    let mut r = call(engine, request(METADATA, 8, 1, &metadata_body(&["nope"], false))).await;
    skip_brokers(&mut r);
    assert_eq!(r.array_len(1).unwrap(), 1);
    assert_eq!(r.i16().unwrap(), code::UNKNOWN_TOPIC_OR_PARTITION);
    wait_open(engine, "auto").await;
    let mut r = call(engine, request(METADATA, 7, 1, &metadata_body(&["auto"], false)[..11])).await;
    skip_brokers(&mut r);
    r.array_len(1).unwrap();
    assert_eq!(r.i16().unwrap(), 0);
    assert_eq!(r.string().unwrap(), "auto");
    r.bool().unwrap();
    assert_eq!(r.array_len(1).unwrap(), 1);
    assert_eq!(r.i16().unwrap(), 0, "partition has a leader");
    assert_eq!(r.i32().unwrap(), 0);
    assert_eq!(r.i32().unwrap(), broker_id("n1"));
    assert!(r.i32().unwrap() >= 1, "leader epoch = stream epoch");

    // Produce: two batches at 0 and 2; the stored bytes come back from Fetch.
    let b1 = encode_batch(Offset(99), &[record("a", "1", 1000), record("b", "2", 2000)]);
    let produce = |batch: &[u8], acks| request(PRODUCE, 8, 2, &produce_body(acks, "auto", 0, batch));
    assert_eq!(produce_answer(call(engine, produce(&b1, -1)).await), (0, 0));
    let b2 = encode_batch(Offset(0), &[record("c", "3", 3000)]);
    assert_eq!(produce_answer(call(engine, produce(&b2, 1)).await), (0, 2));
    // acks=0: appended, no response.
    let b3 = encode_batch(Offset(0), &[record("d", "4", 4000)]);
    assert!(handle(engine, OPTS, produce(&b3, 0)).await.unwrap().is_none());
    let hw = engine.topics.describe_topic("auto").unwrap().partition_info[0].end_offset;
    assert_eq!(hw, Offset(4));

    // Bad batches: nothing appended.
    let mut corrupt = b2.to_vec();
    *corrupt.last_mut().unwrap() ^= 1;
    assert_eq!(
        produce_answer(call(engine, produce(&corrupt, 1)).await).0,
        code::CORRUPT_MESSAGE
    );
    let big = encode_batch(Offset(0), &[record("k", &"x".repeat(2000), 1)]);
    assert_eq!(
        produce_answer(call(engine, produce(&big, 1)).await).0,
        code::MESSAGE_TOO_LARGE
    );
    let mut gzip = b2.to_vec();
    gzip[21..23].copy_from_slice(&1i16.to_be_bytes());
    let crc = crc32c::crc32c(&gzip[21..]);
    gzip[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(
        produce_answer(call(engine, produce(&gzip, 1)).await).0,
        code::CORRUPT_MESSAGE,
        "flagged gzip, holds plain records"
    );
    let unknown = request(PRODUCE, 8, 2, &produce_body(1, "nope", 0, &b2));
    assert_eq!(
        produce_answer(call(engine, unknown).await).0,
        code::UNKNOWN_TOPIC_OR_PARTITION
    );
    let bad_acks = request(PRODUCE, 8, 2, &produce_body(2, "auto", 0, &b2));
    assert_eq!(
        produce_answer(call(engine, bad_acks).await).0,
        code::INVALID_REQUIRED_ACKS
    );
    assert_eq!(
        engine.topics.describe_topic("auto").unwrap().partition_info[0].end_offset,
        Offset(4)
    );

    // Fetch from 1: the first batch (0..2) comes back as stored, base offset
    // rewritten; then the rest; then nothing past the high watermark.
    let (error, hw, records) =
        fetch_answer(call(engine, request(FETCH, 11, 3, &fetch_body(0, "auto", 0, 1, 1 << 20))).await);
    assert_eq!((error, hw), (0, 4));
    let stored: Vec<_> = crate::batch::batches("f", &records).map(|b| b.unwrap().0).collect();
    assert_eq!(
        stored.iter().map(|i| i.base_offset.get()).collect::<Vec<_>>(),
        vec![0, 2, 3]
    );
    let leader_epoch = i32::from_be_bytes(records[12..16].try_into().unwrap());
    assert!(leader_epoch >= 1, "partition leader epoch = stream epoch");
    assert_eq!(
        &records[16..b1.len()],
        &b1[16..],
        "bytes after the leader epoch are as sent"
    );
    // max_bytes below one batch still returns the first batch.
    let (_, _, one) = fetch_answer(call(engine, request(FETCH, 11, 3, &fetch_body(0, "auto", 0, 2, 1))).await);
    assert_eq!(one.len(), b2.len());
    let (error, _, none) = fetch_answer(call(engine, request(FETCH, 11, 3, &fetch_body(0, "auto", 0, 4, 1000))).await);
    assert_eq!((error, none.len()), (0, 0));
    let (error, _, _) = fetch_answer(call(engine, request(FETCH, 11, 3, &fetch_body(0, "auto", 0, 5, 1000))).await);
    assert_eq!(error, code::OFFSET_OUT_OF_RANGE);

    // Long poll: a fetch at the end answers soon after an append.
    let waiting = {
        let node = node.clone();
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let a = fetch_answer(
                call(
                    &node.services(),
                    request(FETCH, 11, 3, &fetch_body(10_000, "auto", 0, 4, 1000)),
                )
                .await,
            );
            (a, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(produce_answer(call(engine, produce(&b2, 1)).await), (0, 4));
    let ((error, hw, records), took) = waiting.await.unwrap();
    assert_eq!((error, hw, records.len()), (0, 5, b2.len()));
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    // min_bytes 0 answers at once even with nothing to return.
    let mut zero = fetch_body(10_000, "auto", 0, 5, 1000);
    zero[8..12].copy_from_slice(&0i32.to_be_bytes());
    let started = tokio::time::Instant::now();
    let (_, _, none) = fetch_answer(call(engine, request(FETCH, 11, 3, &zero)).await);
    assert!(none.is_empty() && started.elapsed() < Duration::from_secs(2));
    // And one with nothing arriving waits max_wait_ms.
    let started = tokio::time::Instant::now();
    let (_, _, none) = fetch_answer(call(engine, request(FETCH, 11, 3, &fetch_body(300, "auto", 0, 5, 1000))).await);
    assert!(none.is_empty() && started.elapsed() >= Duration::from_millis(250));

    // ListOffsets: earliest, latest, by timestamp.
    let lo = |ts| request(LIST_OFFSETS, 5, 4, &list_offsets_body("auto", 0, ts));
    let epoch = list_offsets_answer(call(engine, lo(-2)).await).3;
    assert!(epoch >= 1);
    assert_eq!(list_offsets_answer(call(engine, lo(-2)).await), (0, -1, 0, epoch));
    assert_eq!(list_offsets_answer(call(engine, lo(-1)).await), (0, -1, 5, epoch));
    assert_eq!(list_offsets_answer(call(engine, lo(1500)).await), (0, 2000, 1, epoch));
    assert_eq!(list_offsets_answer(call(engine, lo(3500)).await), (0, 4000, 3, epoch));
    assert_eq!(list_offsets_answer(call(engine, lo(9999)).await), (0, -1, -1, epoch));
    // Leader epochs: the current one is accepted, older is fenced, newer unknown.
    let at = |e| request(FETCH, 11, 3, &fetch_body_at(0, "auto", 0, e, 0, 1000));
    assert_eq!(fetch_answer(call(engine, at(epoch)).await).0, 0);
    assert_eq!(
        fetch_answer(call(engine, at(epoch - 1)).await).0,
        code::FENCED_LEADER_EPOCH
    );
    assert_eq!(
        fetch_answer(call(engine, at(epoch + 1)).await).0,
        code::UNKNOWN_LEADER_EPOCH
    );
    let mut w = Writer::default();
    w.i32(-1);
    w.i8(0);
    w.array_len(1);
    w.string("auto");
    w.array_len(1);
    w.i32(0);
    w.i32(epoch + 1);
    w.i64(-1);
    let lo_epoch = request(LIST_OFFSETS, 5, 4, &w.buf);
    assert_eq!(
        list_offsets_answer(call(engine, lo_epoch).await).0,
        code::UNKNOWN_LEADER_EPOCH
    );
    let unknown = request(LIST_OFFSETS, 5, 4, &list_offsets_body("nope", 0, -1));
    assert_eq!(
        list_offsets_answer(call(engine, unknown).await).0,
        code::UNKNOWN_TOPIC_OR_PARTITION
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_reads_flushed_data_objects_then_the_tail() {
    let node = node_with(&["--flush-bytes", "1"]).await;
    let engine = &node.services();
    engine.topics.create_topic("f", 1, Default::default()).await.unwrap();
    wait_open(engine, "f").await;
    let produce = |i: i64| {
        let batch = encode_batch(Offset(0), &[record(&format!("k{i}"), &format!("v{i}"), 1000 * i)]);
        request(PRODUCE, 8, 1, &produce_body(-1, "f", 0, &batch))
    };
    for i in 0..5 {
        assert_eq!(produce_answer(call(engine, produce(i)).await), (0, i));
    }
    let stream = node.open_streams().into_iter().find(|s| s.topic == "f").unwrap();
    for _ in 0..400 {
        if stream.committed_end() == Offset(5) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(stream.committed_end(), Offset(5), "flushed to a data object");
    assert_eq!(produce_answer(call(engine, produce(5)).await), (0, 5));

    let fetch = |from, max| request(FETCH, 11, 2, &fetch_body(0, "f", 0, from, max));
    let (error, hw, records) = fetch_answer(call(engine, fetch(1, 1 << 20)).await);
    assert_eq!((error, hw), (0, 6));
    let batches: Vec<_> = crate::batch::batches("f", &records).map(|b| b.unwrap()).collect();
    let bases: Vec<u64> = batches.iter().map(|(i, _)| i.base_offset.get()).collect();
    assert_eq!(bases, vec![1, 2, 3, 4, 5], "chunks, then the tail");
    let values: Vec<_> = batches
        .iter()
        .flat_map(|(_, raw)| crate::batch::decode_records("f", raw).unwrap())
        .map(|(_, r)| r.value.unwrap())
        .collect();
    assert_eq!(values[0], Bytes::from_static(b"v1"));
    assert_eq!(values[4], Bytes::from_static(b"v5"));
    let (_, _, one) = fetch_answer(call(engine, fetch(2, 1)).await);
    assert_eq!(
        crate::batch::batches("f", &one).count(),
        1,
        "max_bytes bounds chunk reads"
    );
    let lo = request(LIST_OFFSETS, 5, 3, &list_offsets_body("f", 0, 2500));
    assert_eq!(
        list_offsets_answer(call(engine, lo).await).2,
        3,
        "timestamp lookup in a chunk"
    );
}

#[tokio::test]
async fn metadata_without_auto_create_reports_unknown_topics() {
    let engine = FakeEngine::new(FakeEngine::default_limits());
    let opts = Options {
        auto_create_topics: false,
        ..OPTS
    };
    let resp = handle(
        &Services::from(engine.clone()),
        opts,
        request(METADATA, 8, 1, &metadata_body(&["new"], true)),
    )
    .await
    .unwrap()
    .unwrap();
    let mut r = Reader::new(resp);
    r.i32().unwrap();
    skip_brokers(&mut r);
    assert_eq!(r.array_len(1).unwrap(), 1);
    assert_eq!(r.i16().unwrap(), code::UNKNOWN_TOPIC_OR_PARTITION);
    assert!(engine.describe_topic("new").is_err(), "not created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_is_not_the_leader_says_so_and_metadata_names_the_owner() {
    let backends = memory_backends();
    let n1 = node_on("n1", backends.clone(), &[]).await;
    let n2 = node_on("n2", backends, &[]).await;
    for _ in 0..400 {
        if n1.nodes().nodes.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    n1.create_topic("two", 2, Default::default()).await.unwrap();
    wait_open(&n1.services(), "two").await;
    wait_open(&n2.services(), "two").await;
    let batch = encode_batch(Offset(0), &[record("k", "v", 1)]);
    for p in n1.describe_topic("two").unwrap().partition_info {
        let owner = p.owner.unwrap();
        let (owner_node, other) = if owner == "n1" { (&n1, &n2) } else { (&n2, &n1) };
        let partition = p.partition as i32;
        let produce = request(PRODUCE, 8, 1, &produce_body(1, "two", partition, &batch));
        assert_eq!(
            produce_answer(call(&other.services(), produce.clone()).await).0,
            code::NOT_LEADER_OR_FOLLOWER
        );
        assert_eq!(produce_answer(call(&owner_node.services(), produce).await), (0, 0));
        let fetch = request(FETCH, 11, 2, &fetch_body(0, "two", partition, 0, 1000));
        assert_eq!(
            fetch_answer(call(&other.services(), fetch).await).0,
            code::NOT_LEADER_OR_FOLLOWER
        );
        let lo = request(LIST_OFFSETS, 5, 3, &list_offsets_body("two", partition, -1));
        assert_eq!(
            list_offsets_answer(call(&other.services(), lo).await).0,
            code::NOT_LEADER_OR_FOLLOWER
        );

        // Either node's metadata names both brokers and the owner as leader.
        let mut r = call(
            &other.services(),
            request(METADATA, 8, 4, &metadata_body(&["two"], false)),
        )
        .await;
        r.i32().unwrap();
        let mut brokers = Vec::new();
        for _ in 0..r.array_len(1).unwrap() {
            brokers.push(r.i32().unwrap());
            r.string().unwrap();
            r.i32().unwrap();
            r.nullable_string().unwrap();
        }
        brokers.sort();
        let mut want = vec![broker_id("n1"), broker_id("n2")];
        want.sort();
        assert_eq!(brokers, want);
        r.nullable_string().unwrap();
        r.i32().unwrap();
        assert_eq!(r.array_len(1).unwrap(), 1);
        assert_eq!(r.i16().unwrap(), 0);
        r.string().unwrap();
        r.bool().unwrap();
        let n = r.array_len(1).unwrap();
        let mut leaders = Vec::new();
        for _ in 0..n {
            r.i16().unwrap();
            let idx = r.i32().unwrap();
            leaders.push((idx, r.i32().unwrap()));
            let epoch = r.i32().unwrap();
            assert!(epoch >= 1);
            for _ in 0..3 {
                for _ in 0..r.array_len(4).unwrap() {
                    r.i32().unwrap();
                }
            }
        }
        r.i32().unwrap(); // topic authorized operations
        assert!(leaders.contains(&(partition, broker_id(&owner))), "{leaders:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_fetch_does_not_block_produce_on_another_connection() {
    use tokio::io::AsyncReadExt;
    let node = node().await;
    node.create_topic("lp", 1, Default::default()).await.unwrap();
    wait_open(&node.services(), "lp").await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_stop, stop_rx) = watch::channel(false);
    tokio::spawn(serve(node.clone(), listener, OPTS, stop_rx));
    async fn send(s: &mut tokio::net::TcpStream, frame: Bytes) {
        s.write_all(&(frame.len() as u32).to_be_bytes()).await.unwrap();
        s.write_all(&frame).await.unwrap();
    }
    async fn answer(s: &mut tokio::net::TcpStream) -> Reader {
        let len = s.read_u32().await.unwrap();
        let mut b = vec![0; len as usize];
        s.read_exact(&mut b).await.unwrap();
        let mut r = Reader::new(b.into());
        r.i32().unwrap();
        r
    }
    let mut consumer = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut producer = tokio::net::TcpStream::connect(addr).await.unwrap();
    let started = tokio::time::Instant::now();
    send(
        &mut consumer,
        request(FETCH, 11, 1, &fetch_body(20_000, "lp", 0, 0, 1 << 20)),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let batch = encode_batch(Offset(0), &[record("k", "v", 1)]);
    // acks=0 gets no response; the next request on the connection is answered.
    send(&mut producer, request(PRODUCE, 8, 2, &produce_body(0, "lp", 0, &batch))).await;
    send(
        &mut producer,
        request(PRODUCE, 8, 3, &produce_body(-1, "lp", 0, &batch)),
    )
    .await;
    assert_eq!(produce_answer(answer(&mut producer).await), (0, 1));
    let (error, hw, records) = fetch_answer(answer(&mut consumer).await);
    assert_eq!(error, 0);
    assert!(hw >= 1 && !records.is_empty());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the fetch ended on the append"
    );
}

// ------------------------------------------------------------ consumer groups

fn group_bodies() -> Vec<(i16, i16, Vec<u8>)> {
    let mut out = Vec::new();
    let mut w = Writer::default();
    w.string("g");
    w.i8(0);
    out.push((FIND_COORDINATOR, 2, w.buf.to_vec()));
    let mut w = Writer::default();
    w.string("g");
    w.i32(10_000);
    w.i32(10_000);
    w.string("");
    w.nullable_string(None);
    w.string("consumer");
    w.array_len(1);
    w.string("range");
    w.bytes_parts(&[Bytes::from_static(b"meta")]);
    out.push((JOIN_GROUP, 5, w.buf.to_vec()));
    let mut w = Writer::default();
    w.string("g");
    w.i32(1);
    w.string("m");
    w.nullable_string(None);
    w.array_len(1);
    w.string("m");
    w.bytes_parts(&[Bytes::from_static(b"a")]);
    out.push((SYNC_GROUP, 3, w.buf.to_vec()));
    let mut w = Writer::default();
    w.string("g");
    w.i32(1);
    w.string("m");
    w.nullable_string(None);
    out.push((HEARTBEAT, 3, w.buf.to_vec()));
    let mut w = Writer::default();
    w.string("g");
    w.array_len(1);
    w.string("m");
    w.nullable_string(None);
    out.push((LEAVE_GROUP, 3, w.buf.to_vec()));
    out.push((OFFSET_COMMIT, 7, offset_commit_body("g", "t", 0, 5)));
    out.push((OFFSET_FETCH, 5, offset_fetch_body("g", "t", 0)));
    out.push((LIST_GROUPS, 2, Vec::new()));
    let mut w = Writer::default();
    w.array_len(1);
    w.string("g");
    w.bool(false);
    out.push((DESCRIBE_GROUPS, 4, w.buf.to_vec()));
    let mut w = Writer::default();
    w.array_len(1);
    w.string("g");
    out.push((DELETE_GROUPS, 1, w.buf.to_vec()));
    out
}

/// OffsetCommit v7 (generation -1: a simple commit).
fn offset_commit_body(group: &str, topic: &str, partition: i32, offset: i64) -> Vec<u8> {
    let mut w = Writer::default();
    w.string(group);
    w.i32(-1);
    w.string("");
    w.nullable_string(None);
    w.array_len(1);
    w.string(topic);
    w.array_len(1);
    w.i32(partition);
    w.i64(offset);
    w.i32(-1);
    w.nullable_string(Some("md"));
    w.buf.to_vec()
}

/// OffsetFetch v5.
fn offset_fetch_body(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut w = Writer::default();
    w.string(group);
    w.array_len(1);
    w.string(topic);
    w.array_len(1);
    w.i32(partition);
    w.buf.to_vec()
}

/// A few thousand random, byte-flipped and truncated frames per group API
/// decoder: errors are fine, panics and oversized allocations are not.
#[test]
fn group_decoders_are_bounded_under_random_frames() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
    for (key, version, valid) in group_bodies() {
        for v in 0..=version {
            let _ = decode_group(key, v, &valid);
        }
        decode_group(key, version, &valid).unwrap_or_else(|e| panic!("key {key}: {e}"));
        for i in 0..3_000 {
            let frame: Vec<u8> = match i % 3 {
                0 => (0..rng.random_range(0..64)).map(|_| rng.random::<u8>()).collect(),
                1 => {
                    let mut f = valid.clone();
                    if !f.is_empty() {
                        for _ in 0..rng.random_range(1..4) {
                            let at = rng.random_range(0..f.len());
                            f[at] = [0x00, 0x7f, 0x80, 0xff][rng.random_range(0..4)];
                        }
                    }
                    f
                }
                _ => valid[..rng.random_range(0..=valid.len())].to_vec(),
            };
            let _ = decode_group(key, rng.random_range(0..=version), &frame);
        }
    }
    // Counts that cannot fit are refused before allocating.
    let mut w = Writer::default();
    w.array_len(i32::MAX as usize);
    assert!(decode_group(DELETE_GROUPS, 1, &w.buf).is_err());
}

fn decode_group(key: i16, version: i16, body: &[u8]) -> Result<(), super::wire::DecodeError> {
    let mut r = Reader::new(Bytes::copy_from_slice(body));
    match key {
        FIND_COORDINATOR => decode_find_coordinator(&mut r, version).map(drop),
        JOIN_GROUP => decode_join_group(&mut r, version).map(drop),
        SYNC_GROUP => decode_sync_group(&mut r, version).map(drop),
        HEARTBEAT => decode_heartbeat(&mut r, version).map(drop),
        LEAVE_GROUP => decode_leave_group(&mut r, version).map(drop),
        OFFSET_COMMIT => decode_offset_commit(&mut r, version).map(drop),
        OFFSET_FETCH => decode_offset_fetch(&mut r, version).map(drop),
        LIST_GROUPS => decode_list_groups(&mut r, version).map(drop),
        _ => decode_group_ids(&mut r, version, key).map(drop),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_frames_against_a_real_node_never_panic() {
    let node = node().await;
    node.create_topic("t", 1, Default::default()).await.unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(13);
    let groups = Groups::new();
    for (key, version, valid) in group_bodies() {
        for _ in 0..300 {
            let mut f = valid.clone();
            if !f.is_empty() {
                let at = rng.random_range(0..f.len());
                f[at] = [0x00, 0x7f, 0x80, 0xff][rng.random_range(0..4)];
            }
            let frame = request(key, version, 1, &f);
            let _ = tokio::time::timeout(
                Duration::from_millis(200),
                handle_in(&node.services(), &groups, OPTS, frame, "peer"),
            )
            .await;
        }
    }
    assert!(node.ready().ready);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_commit_through_the_metadata_log_and_fetch_from_the_view() {
    let node = node().await;
    node.create_topic("t", 1, Default::default()).await.unwrap();
    let groups = Groups::new();
    let call_in = |key, version, body: Vec<u8>| {
        let node = node.clone();
        let groups = &groups;
        async move {
            let resp = handle_in(&node.services(), groups, OPTS, request(key, version, 9, &body), "peer")
                .await
                .unwrap()
                .unwrap();
            let mut r = Reader::new(resp);
            assert_eq!(r.i32().unwrap(), 9);
            r
        }
    };
    // FindCoordinator names this node.
    let mut r = call_in(FIND_COORDINATOR, 0, group_bodies()[0].2[..3].to_vec()).await;
    assert_eq!(r.i16().unwrap(), code::NONE);
    assert_eq!(r.i32().unwrap(), broker_id(&node.ready().node_id));
    // Commit: one known partition, one unknown.
    let mut r = call_in(OFFSET_COMMIT, 7, offset_commit_body("g", "t", 0, 5)).await;
    r.i32().unwrap();
    assert_eq!(r.array_len(1).unwrap(), 1);
    r.string().unwrap();
    r.array_len(1).unwrap();
    assert_eq!((r.i32().unwrap(), r.i16().unwrap()), (0, code::NONE));
    let mut r = call_in(OFFSET_COMMIT, 7, offset_commit_body("g", "t", 3, 5)).await;
    r.i32().unwrap();
    r.array_len(1).unwrap();
    r.string().unwrap();
    r.array_len(1).unwrap();
    assert_eq!(
        (r.i32().unwrap(), r.i16().unwrap()),
        (3, code::UNKNOWN_TOPIC_OR_PARTITION)
    );
    // The view holds it.
    let committed = node.committed_offsets("g");
    assert_eq!(committed.len(), 1);
    assert_eq!((committed[0].offset, committed[0].metadata.as_deref()), (5, Some("md")));
    let mut r = call_in(OFFSET_FETCH, 5, offset_fetch_body("g", "t", 0)).await;
    r.i32().unwrap();
    r.array_len(1).unwrap();
    assert_eq!(r.string().unwrap(), "t");
    r.array_len(1).unwrap();
    assert_eq!((r.i32().unwrap(), r.i64().unwrap(), r.i32().unwrap()), (0, 5, -1));
    assert_eq!(r.nullable_string().unwrap().as_deref(), Some("md"));
    assert_eq!(r.i16().unwrap(), code::NONE);
    assert_eq!(r.i16().unwrap(), code::NONE);
    r.expect_end().unwrap();
    // DeleteGroups forgets the offsets; a second delete finds nothing.
    let del = group_bodies().pop().unwrap().2;
    let mut r = call_in(DELETE_GROUPS, 1, del.clone()).await;
    r.i32().unwrap();
    r.array_len(1).unwrap();
    assert_eq!((r.string().unwrap(), r.i16().unwrap()), ("g".into(), code::NONE));
    assert!(node.committed_offsets("g").is_empty());
    let mut r = call_in(DELETE_GROUPS, 1, del).await;
    r.i32().unwrap();
    r.array_len(1).unwrap();
    assert_eq!(
        (r.string().unwrap(), r.i16().unwrap()),
        ("g".into(), groups::code::GROUP_ID_NOT_FOUND)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_agree_on_the_coordinator_and_committed_offsets_are_in_every_view() {
    let (n1, n2) = two_nodes().await;
    n1.create_topic("t", 1, Default::default()).await.unwrap();
    wait_open(&n2.services(), "t").await;
    // Groups hashed to each node: every node computes the same coordinator.
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..20 {
        let group = format!("g{i}");
        let c1 = coordinator::coordinator_of(&n1.services(), &group).unwrap();
        assert_eq!(Some(&c1), coordinator::coordinator_of(&n2.services(), &group).as_ref());
        seen.insert(c1.0.clone());
        let (coord, other) = if c1.0 == "n1" { (&n1, &n2) } else { (&n2, &n1) };
        let mut w = Writer::default();
        w.string(&group);
        w.i32(1);
        w.string("m");
        let heartbeat = request(HEARTBEAT, 1, 1, &w.buf);
        let mut r = call(&other.services(), heartbeat.clone()).await;
        r.i32().unwrap();
        assert_eq!(r.i16().unwrap(), groups::code::NOT_COORDINATOR);
        let mut r = call(&coord.services(), heartbeat).await;
        r.i32().unwrap();
        assert_eq!(r.i16().unwrap(), groups::code::UNKNOWN_MEMBER_ID);
        if i == 0 {
            // A commit through the coordinator is in the other node's view too.
            call(
                &coord.services(),
                request(OFFSET_COMMIT, 7, 2, &offset_commit_body(&group, "t", 0, 42)),
            )
            .await;
            for _ in 0..200 {
                if !other.committed_offsets(&group).is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            assert_eq!(other.committed_offsets(&group)[0].offset, 42);
        }
    }
    assert_eq!(seen.len(), 2, "groups spread over both nodes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_commit_says_coordinator_not_available_while_the_metadata_store_is_down() {
    use crate::store::{FaultConfig, FaultyStore};
    let log_store = FaultyStore::new(Arc::new(crate::store::MemoryStore::new()), FaultConfig::default());
    let backends = Backends {
        log: Arc::new(crate::meta::store_log::StoreLog::new(Arc::new(log_store.clone()), "")),
        ..memory_backends()
    };
    let node = node_on("n1", backends, &[]).await;
    node.create_topic("t", 1, Default::default()).await.unwrap();
    let commit = |offset| request(OFFSET_COMMIT, 7, 1, &offset_commit_body("g", "t", 0, offset));
    let error = |mut r: Reader| {
        r.i32().unwrap();
        r.array_len(1).unwrap();
        r.string().unwrap();
        r.array_len(1).unwrap();
        r.i32().unwrap();
        r.i16().unwrap()
    };
    assert_eq!(error(call(&node.services(), commit(1)).await), code::NONE);
    log_store.set_unavailable(true);
    // Up to 60 s of wall time (a loaded machine runs the whole suite beside
    // this test); the failure says which way it went wrong.
    let mut noticed = None;
    for i in 0..2_400u64 {
        if !node.meta.reachable() {
            noticed = Some(i);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        noticed.is_some(),
        "the node still took the metadata store for reachable after 60 s"
    );
    assert!(
        !node.meta.reachable(),
        "the node took the store for unreachable after {} ms, then for reachable again",
        noticed.unwrap_or(0) * 25
    );
    assert_eq!(
        error(call(&node.services(), commit(2)).await),
        groups::code::COORDINATOR_NOT_AVAILABLE
    );
    assert_eq!(node.committed_offsets("g")[0].offset, 1, "still readable from the view");
    log_store.set_unavailable(false);
}

// ------------------------------------------------------------ idempotence

fn init_producer_id(r: &mut Reader) -> (i16, i64, i16) {
    r.i32().unwrap(); // throttle
    let out = (r.i16().unwrap(), r.i64().unwrap(), r.i16().unwrap());
    r.expect_end().unwrap();
    out
}

fn init_producer_id_request(transactional_id: Option<&str>) -> Bytes {
    let mut w = Writer::default();
    w.nullable_string(transactional_id);
    w.i32(60_000);
    request(producer_ids::INIT_PRODUCER_ID, 1, 9, &w.buf)
}

fn idempotent_batch(pid: i64, seq: i32, values: &[&str]) -> Bytes {
    let records: Vec<Record> = values.iter().map(|v| record("k", v, 1_000)).collect();
    crate::batch::with_producer(&encode_batch(crate::ids::Offset(0), &records), pid, 0, seq)
}

async fn produce_idempotent(engine: &Services, topic: &str, pid: i64, seq: i32, values: &[&str]) -> (i16, i64) {
    let body = produce_body(-1, topic, 0, &idempotent_batch(pid, seq, values));
    produce_answer(call(engine, request(PRODUCE, 8, 3, &body)).await)
}

/// OffsetForLeaderEpoch v3 for partition 0: (error, leader epoch, end offset).
async fn epoch_end(engine: &Services, topic: &str, current: i32, asked: i32) -> (i16, i32, i64) {
    let mut w = Writer::default();
    w.i32(-1);
    w.array_len(1);
    w.string(topic);
    w.array_len(1);
    w.i32(0);
    w.i32(current);
    w.i32(asked);
    let mut r = call(engine, request(leader_epoch::OFFSET_FOR_LEADER_EPOCH, 3, 4, &w.buf)).await;
    r.i32().unwrap();
    assert_eq!(r.array_len(1).unwrap(), 1);
    assert_eq!(r.string().unwrap(), topic);
    assert_eq!(r.array_len(1).unwrap(), 1);
    let error = r.i16().unwrap();
    assert_eq!(r.i32().unwrap(), 0);
    (error, r.i32().unwrap(), r.i64().unwrap())
}

#[tokio::test]
async fn idempotent_produce_dedups_retries_and_refuses_gaps() {
    let node = node().await;
    let engine = &node.services();
    engine.topics.create_topic("idem", 1, Default::default()).await.unwrap();
    wait_open(engine, "idem").await;
    let (error, pid, epoch) = init_producer_id(&mut call(engine, init_producer_id_request(None)).await);
    assert_eq!((error, epoch), (code::NONE, 0));
    let (_, other, _) = init_producer_id(&mut call(engine, init_producer_id_request(None)).await);
    assert_ne!(pid, other, "every InitProducerId gets a new id");
    let (error, txn_pid, epoch) = init_producer_id(&mut call(engine, init_producer_id_request(Some("tx"))).await);
    assert_eq!((error, epoch), (code::NONE, 0), "a transactional id's first producer");
    let again = init_producer_id(&mut call(engine, init_producer_id_request(Some("tx"))).await);
    assert_eq!(again, (code::NONE, txn_pid, 1), "the same id, the epoch bumped");

    assert_eq!(
        produce_idempotent(engine, "idem", pid, 0, &["a", "b"]).await,
        (code::NONE, 0)
    );
    assert_eq!(
        produce_idempotent(engine, "idem", pid, 2, &["c"]).await,
        (code::NONE, 2)
    );
    assert_eq!(
        produce_idempotent(engine, "idem", pid, 0, &["a", "b"]).await,
        (code::NONE, 0)
    );
    assert_eq!(
        produce_idempotent(engine, "idem", pid, 7, &["x"]).await.0,
        code::OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(
        produce_idempotent(engine, "idem", other, 0, &["d"]).await,
        (code::NONE, 3)
    );
    assert_eq!(
        engine.topics.describe_topic("idem").unwrap().partition_info[0]
            .end_offset
            .get(),
        4
    );
}

#[tokio::test]
async fn producer_state_and_epoch_history_survive_a_crash_of_the_owner() {
    let backends = memory_backends();
    let n1 = node_on("n1", backends.clone(), &[]).await;
    n1.create_topic("idem", 1, Default::default()).await.unwrap();
    wait_open(&n1.services(), "idem").await;
    let n2 = node_on("n2", backends, &[]).await;
    let (_, pid, _) = init_producer_id(&mut call(&n1.services(), init_producer_id_request(None)).await);
    assert_eq!(
        produce_idempotent(&n1.services(), "idem", pid, 0, &["a", "b"]).await,
        (code::NONE, 0)
    );
    assert_eq!(
        produce_idempotent(&n1.services(), "idem", pid, 2, &["c"]).await,
        (code::NONE, 2)
    );
    assert_eq!(epoch_end(&n1.services(), "idem", -1, 1).await, (code::NONE, 1, 3));

    // The owner dies with both batches only in its WAL; n2 takes over.
    n1.crash();
    let mut moved = false;
    for _ in 0..600 {
        let d = n2.describe_topic("idem").unwrap();
        if d.partition_info[0].owner.as_deref() == Some("n2") && d.partition_info[0].state == "open" {
            moved = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(moved, "n2 took the stream over");
    let engine = &n2.services();
    // The producer retries its last batch on the new owner: same offsets.
    assert_eq!(
        produce_idempotent(engine, "idem", pid, 2, &["c"]).await,
        (code::NONE, 2)
    );
    assert_eq!(
        produce_idempotent(engine, "idem", pid, 5, &["x"]).await.0,
        code::OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(
        produce_idempotent(engine, "idem", pid, 3, &["d"]).await,
        (code::NONE, 3)
    );
    // Producer ids stay unique across nodes.
    let (_, fresh, _) = init_producer_id(&mut call(engine, init_producer_id_request(None)).await);
    assert_ne!(fresh, pid);
    // Epoch 1 ended where epoch 2 began; epoch 2 ends at the high watermark.
    assert_eq!(epoch_end(engine, "idem", -1, 1).await, (code::NONE, 1, 3));
    assert_eq!(epoch_end(engine, "idem", 2, 2).await, (code::NONE, 2, 4));
    // An epoch this node's view has not reached yet: retry, never "undefined"
    // (which clients read as truncation and answer by resetting to earliest).
    assert_eq!(epoch_end(engine, "idem", -1, 3).await.0, code::UNKNOWN_LEADER_EPOCH);
    assert_eq!(epoch_end(engine, "idem", 1, 1).await.0, code::FENCED_LEADER_EPOCH);
    assert_eq!(epoch_end(engine, "idem", 3, 1).await.0, code::UNKNOWN_LEADER_EPOCH);
}

#[tokio::test]
async fn pipelined_produce_requests_are_assigned_and_answered_in_order() {
    use tokio::io::AsyncReadExt;
    let node = node().await;
    node.create_topic("pipe", 2, Default::default()).await.unwrap();
    wait_open(&node.services(), "pipe").await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_stop, stop_rx) = watch::channel(false);
    tokio::spawn(serve(node.clone(), listener, OPTS, stop_rx));
    let (_, pid, _) = init_producer_id(&mut call(&node.services(), init_producer_id_request(None)).await);
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    // 100 requests written back to back, without waiting for any answer:
    // idempotent batches with consecutive sequences, then a Metadata
    // request, which must be answered after all of them.
    let mut out = Vec::new();
    for i in 0..100i32 {
        let body = produce_body(-1, "pipe", i % 2, &idempotent_batch(pid, i / 2, &["v"]));
        let frame = request(PRODUCE, 8, i, &body);
        out.extend_from_slice(&(frame.len() as u32).to_be_bytes());
        out.extend_from_slice(&frame);
    }
    let meta = request(METADATA, 8, 1000, &metadata_body(&["pipe"], false));
    out.extend_from_slice(&(meta.len() as u32).to_be_bytes());
    out.extend_from_slice(&meta);
    s.write_all(&out).await.unwrap();
    for i in 0..100i32 {
        let len = s.read_u32().await.unwrap();
        let mut b = vec![0; len as usize];
        s.read_exact(&mut b).await.unwrap();
        let mut r = Reader::new(b.into());
        assert_eq!(r.i32().unwrap(), i, "answers come in request order");
        assert_eq!(produce_answer(r), (code::NONE, i64::from(i / 2)), "request {i}");
    }
    let len = s.read_u32().await.unwrap();
    let mut b = vec![0; len as usize];
    s.read_exact(&mut b).await.unwrap();
    assert_eq!(Reader::new(b.into()).i32().unwrap(), 1000);
    for p in 0..2 {
        let d = node.describe_topic("pipe").unwrap();
        assert_eq!(d.partition_info[p].end_offset.get(), 50);
    }
}

// ------------------------------------------------------------ hostile Fetch and DeleteGroups

fn fetch_partition(partition: i32, fetch_offset: i64, partition_max_bytes: i32) -> FetchPartition {
    FetchPartition {
        partition,
        current_leader_epoch: -1,
        fetch_offset,
        partition_max_bytes,
    }
}

#[test]
fn a_partition_named_twice_is_fetched_once_with_its_last_fields_at_its_first_place() {
    let req = FetchRequest {
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: 100,
        isolation_level: 0,
        topics: vec![
            (
                "a".into(),
                vec![
                    fetch_partition(0, 1, 10),
                    fetch_partition(1, 5, 10),
                    fetch_partition(0, 2, 20),
                ],
            ),
            ("b".into(), vec![fetch_partition(0, 7, 10)]),
            ("a".into(), vec![fetch_partition(2, 0, 10), fetch_partition(1, 6, 30)]),
        ],
        ..Default::default()
    }
    .merge_duplicates();
    assert_eq!(
        req.topics,
        vec![
            (
                "a".to_string(),
                vec![
                    fetch_partition(0, 2, 20),
                    fetch_partition(1, 6, 30),
                    fetch_partition(2, 0, 10)
                ]
            ),
            ("b".to_string(), vec![fetch_partition(0, 7, 10)]),
        ]
    );
}

/// A Fetch v11 body naming `topic`/`partition` `times` times, all with `max_bytes`.
fn repeated_fetch_body(topic: &str, partition: i32, times: usize, max_bytes: i32) -> Vec<u8> {
    let mut w = Writer::default();
    w.i32(-1);
    w.i32(0);
    w.i32(1);
    w.i32(max_bytes);
    w.i8(0);
    w.i32(0);
    w.i32(-1);
    w.array_len(1);
    w.string(topic);
    w.array_len(times);
    for _ in 0..times {
        w.i32(partition);
        w.i32(-1);
        w.i64(0);
        w.i64(-1);
        w.i32(max_bytes);
    }
    w.array_len(0);
    w.string("");
    w.buf.to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_answer_is_capped_and_names_a_repeated_partition_once() {
    let node = node().await;
    let engine = &node.services();
    engine.topics.create_topic("f", 1, Default::default()).await.unwrap();
    wait_open(engine, "f").await;
    let value = "v".repeat(600);
    for i in 0..20 {
        let batch = encode_batch(Offset(0), &[record("k", &value, i)]);
        let produced = call(engine, request(PRODUCE, 8, 1, &produce_body(-1, "f", 0, &batch))).await;
        assert_eq!(produce_answer(produced).0, 0);
    }
    let opts = Options {
        fetch_max_bytes: 10_000,
        ..OPTS
    };
    let frame = request(FETCH, 11, 2, &repeated_fetch_body("f", 0, 1000, i32::MAX));
    let resp = handle(engine, opts, frame).await.unwrap().unwrap();
    let mut r = Reader::new(resp);
    r.i32().unwrap();
    let (error, hw, records) = fetch_answer(r);
    assert_eq!((error, hw), (0, 20), "one answer for the partition named 1000 times");
    let n = crate::batch::batches("f", &records).count();
    assert!(
        records.len() <= 10_000,
        "{} bytes over the 10 000-byte cap",
        records.len()
    );
    assert!(n >= 5, "as many whole batches as fit: {n}");
    // The request's own max_bytes still applies under the cap.
    let frame = request(FETCH, 11, 2, &repeated_fetch_body("f", 0, 3, 4000));
    let resp = handle(engine, opts, frame).await.unwrap().unwrap();
    let mut r = Reader::new(resp);
    r.i32().unwrap();
    assert!(fetch_answer(r).2.len() <= 4000);
    // A first batch larger than the cap is still returned (progress).
    let opts = Options {
        fetch_max_bytes: 100,
        ..OPTS
    };
    let frame = request(FETCH, 11, 2, &repeated_fetch_body("f", 0, 1, i32::MAX));
    let resp = handle(engine, opts, frame).await.unwrap().unwrap();
    let mut r = Reader::new(resp);
    r.i32().unwrap();
    assert_eq!(crate::batch::batches("f", &fetch_answer(r).2).count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fetch_cap_holds_across_partitions_and_only_the_first_batch_may_exceed_it() {
    let node = node().await;
    let engine = &node.services();
    engine.topics.create_topic("m", 3, Default::default()).await.unwrap();
    wait_open(engine, "m").await;
    let value = "v".repeat(600);
    for p in 0..3 {
        let batch = encode_batch(Offset(0), &[record("k", &value, 1)]);
        let produced = call(engine, request(PRODUCE, 8, 1, &produce_body(-1, "m", p, &batch))).await;
        assert_eq!(produce_answer(produced).0, 0);
    }
    // Fetch v11 of partitions 0, 1, 2 with room for about one batch.
    let mut w = Writer::default();
    for v in [-1, 0, 1, i32::MAX] {
        w.i32(v); // replica, max wait, min bytes, max bytes
    }
    w.i8(0);
    w.i32(0);
    w.i32(-1);
    w.array_len(1);
    w.string("m");
    w.array_len(3);
    for p in 0..3 {
        w.i32(p);
        w.i32(-1);
        w.i64(0);
        w.i64(-1);
        w.i32(i32::MAX);
    }
    w.array_len(0);
    w.string("");
    let opts = Options {
        fetch_max_bytes: 1000,
        ..OPTS
    };
    for (cap, want) in [(1000, [1, 0, 0]), (100, [1, 0, 0]), (10_000, [1, 1, 1])] {
        let opts = Options {
            fetch_max_bytes: cap,
            ..opts
        };
        let resp = handle(engine, opts, request(FETCH, 11, 2, &w.buf))
            .await
            .unwrap()
            .unwrap();
        let mut r = Reader::new(resp);
        r.i32().unwrap();
        r.i32().unwrap();
        r.i16().unwrap();
        r.i32().unwrap();
        r.array_len(1).unwrap();
        r.string().unwrap();
        assert_eq!(r.array_len(1).unwrap(), 3);
        let mut got = [0; 3];
        for slot in got.iter_mut() {
            r.i32().unwrap();
            assert_eq!(r.i16().unwrap(), 0);
            r.i64().unwrap();
            r.i64().unwrap();
            r.i64().unwrap();
            r.array_len(0).unwrap();
            r.i32().unwrap();
            let records = r.nullable_bytes().unwrap().unwrap_or_default();
            *slot = crate::batch::batches("m", &records).count();
        }
        assert_eq!(got, want, "batches per partition under a {cap}-byte cap");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthorized_delete_groups_is_refused_per_group_and_changes_nothing() {
    use crate::auth::{Op, Principal, Scope};
    let node = node().await;
    node.create_topic("t", 1, Default::default()).await.unwrap();
    wait_open(&node.services(), "t").await;
    let groups = Groups::new();
    let as_principal =
        |scopes: Vec<Scope>| authz::scoped(&node.services(), Arc::new(Principal { id: "p".into(), scopes }));
    let reader = as_principal(vec![Scope::new("t", &[Op::Read])]);
    let admin = as_principal(vec![Scope::new("t", &[Op::Admin, Op::Read])]);
    async fn call_as(engine: &Services, groups: &Groups, key: i16, version: i16, body: Vec<u8>) -> Reader {
        let frame = request(key, version, 9, &body);
        let resp = handle_in(engine, groups, OPTS, frame, "peer").await.unwrap().unwrap();
        let mut r = Reader::new(resp);
        assert_eq!(r.i32().unwrap(), 9);
        r
    }
    // The reader commits offsets of "g" on t (read suffices), but may not
    // delete the group: that needs admin on t.
    let mut r = call_as(&reader, &groups, OFFSET_COMMIT, 7, offset_commit_body("g", "t", 0, 5)).await;
    r.i32().unwrap();
    r.array_len(1).unwrap();
    r.string().unwrap();
    r.array_len(1).unwrap();
    assert_eq!((r.i32().unwrap(), r.i16().unwrap()), (0, code::NONE));
    let del = group_bodies().pop().unwrap().2;
    let mut r = call_as(&reader, &groups, DELETE_GROUPS, 1, del.clone()).await;
    r.i32().unwrap();
    r.array_len(1).unwrap();
    assert_eq!(
        (r.string().unwrap(), r.i16().unwrap()),
        ("g".into(), groups::code::GROUP_AUTHORIZATION_FAILED)
    );
    assert_eq!(node.committed_offsets("g").len(), 1, "the offsets are kept");
    // An admin of t may delete it.
    let mut r = call_as(&admin, &groups, DELETE_GROUPS, 1, del).await;
    r.i32().unwrap();
    r.array_len(1).unwrap();
    assert_eq!((r.string().unwrap(), r.i16().unwrap()), ("g".into(), code::NONE));
    assert!(node.committed_offsets("g").is_empty());
}
