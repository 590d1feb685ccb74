//! Hostile and careless Kafka clients against real `sluice serve`
//! processes, over raw TCP: frames that are huge before login, read-ahead
//! that would pile up requests, a Fetch that names one partition a
//! thousand times, sockets that never log in, many connections from one
//! address, a revoked token on a quiet connection, and a DeleteGroups the
//! token may not do. Memory is the node's `VmRSS`, sampled during each
//! attack. Each test ends with a positive control: a well-behaved client is
//! still served.

mod support;

use serde_json::{json, Value};
use sluice::kafka::wire::Writer;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::process::{free_port, Server};
use support::rss::{has_proc, RssPeak};

const ADMIN: &str = "hostile-kafka-admin-secret-7d41c2e9";
const MIB: u64 = 1024 * 1024;

// ------------------------------------------------------------ nodes

fn start(dir: &tempfile::TempDir, extra: &[&str]) -> Server {
    let mut args = vec!["--metadata", "memory://", "--object-store", "memory://"];
    args.extend_from_slice(extra);
    Server::start("n1", dir.path(), free_port(), &args)
}

fn start_secured(dir: &tempfile::TempDir, extra: &[&str]) -> Server {
    let admin = dir.path().join("admin-token");
    std::fs::write(&admin, ADMIN).unwrap();
    let admin = admin.to_str().unwrap().to_string();
    let mut args = vec!["--auth", "on", "--admin-token-file", &admin];
    args.extend_from_slice(extra);
    start(dir, &args)
}

/// Whether the node's log contains `needle` within 10 s.
fn logged(server: &Server, needle: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if server.log().contains(needle) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

// ------------------------------------------------------------ HTTP

/// One HTTP/1.0 exchange: (status, body).
fn http(port: u16, method: &str, path: &str, bearer: Option<&str>, body: Option<Value>) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let auth = bearer
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Create `topic` (one partition) and wait until it is open.
fn create_topic(server: &Server, bearer: Option<&str>, topic: &str) {
    let (status, body) = http(
        server.port,
        "POST",
        "/v1/topics",
        bearer,
        Some(json!({"name": topic, "partitions": 1})),
    );
    assert_eq!(status, 201, "{body}");
    for _ in 0..500 {
        let (_, body) = http(server.port, "GET", &format!("/v1/topics/{topic}"), bearer, None);
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        if v["partition_info"]
            .as_array()
            .is_some_and(|p| p.iter().all(|p| p["state"] == "open"))
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{topic} was not opened");
}

/// A token with `scopes`: (secret, id).
fn mint(server: &Server, name: &str, scopes: Value) -> (String, String) {
    let (status, body) = http(
        server.port,
        "POST",
        "/v1/tokens",
        Some(ADMIN),
        Some(json!({"name": name, "scopes": scopes})),
    );
    assert_eq!(status, 201, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    (v["token"].as_str().unwrap().into(), v["id"].as_str().unwrap().into())
}

// ------------------------------------------------------------ Kafka frames

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// A request frame: length, header v1 (client id "hostile"), body.
fn frame(key: i16, version: i16, correlation_id: i32, body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::default();
    w.i16(key);
    w.i16(version);
    w.i32(correlation_id);
    w.string("hostile");
    body(&mut w);
    let mut out = (w.buf.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&w.buf);
    out
}

/// The next response's body (correlation id first), or `None` once the
/// node has closed the connection.
fn response(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {
            panic!("no answer and no close: {e}")
        }
        Err(_) => return None,
    }
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

fn error_code(body: &[u8]) -> i16 {
    i16::from_be_bytes([body[4], body[5]])
}

/// ApiVersions v0 is answered with NONE.
fn api_versions_answered(s: &mut TcpStream, correlation_id: i32) -> bool {
    if s.write_all(&frame(18, 0, correlation_id, |_| {})).is_err() {
        return false;
    }
    match response(s) {
        Some(body) => {
            assert_eq!(&body[..4], &correlation_id.to_be_bytes());
            error_code(&body) == 0
        }
        None => false,
    }
}

/// SaslHandshake v1 (PLAIN) and SaslAuthenticate v1 with `token`.
fn login(s: &mut TcpStream, token: &str) {
    s.write_all(&frame(17, 1, 1, |w| w.string("PLAIN"))).unwrap();
    assert_eq!(error_code(&response(s).expect("handshake answered")), 0);
    let plain = sluice::kafka::sasl::plain_message("user", token);
    s.write_all(&frame(36, 1, 2, |w| w.bytes_parts(&[plain]))).unwrap();
    assert_eq!(error_code(&response(s).expect("authenticate answered")), 0, "login");
}

/// Reads until the node closes the connection; how long that took. Fails
/// the test if it stays open past `patience`.
fn closed_within(s: &mut TcpStream, patience: Duration) -> Duration {
    let started = Instant::now();
    s.set_read_timeout(Some(patience)).unwrap();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return started.elapsed(),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return started.elapsed(),
            Err(e) => panic!("the node kept the connection open for {:?}: {e}", started.elapsed()),
        }
    }
}

/// A record batch of `n` records of `value_bytes` each.
fn batch(n: usize, value_bytes: usize) -> bytes::Bytes {
    let value = bytes::Bytes::from(vec![b'v'; value_bytes]);
    let records: Vec<sluice::batch::Record> = (0..n)
        .map(|i| sluice::batch::Record {
            timestamp_ms: 1_000 + i as i64,
            key: None,
            value: Some(value.clone()),
            headers: vec![],
        })
        .collect();
    sluice::batch::encode_batch(sluice::ids::Offset(0), &records)
}

/// Produce v3, acks=-1, one partition.
fn produce(correlation_id: i32, topic: &str, records: &bytes::Bytes) -> Vec<u8> {
    frame(0, 3, correlation_id, |w| {
        w.nullable_string(None);
        w.i16(-1);
        w.i32(30_000);
        w.array_len(1);
        w.string(topic);
        w.array_len(1);
        w.i32(0);
        w.bytes_parts(std::slice::from_ref(records));
    })
}

/// The error code of a Produce v3 answer for one partition.
fn produce_error(body: &[u8]) -> i16 {
    let mut r = sluice::kafka::wire::Reader::new(bytes::Bytes::copy_from_slice(body));
    r.i32().unwrap();
    r.array_len(1).unwrap();
    r.string().unwrap();
    r.array_len(1).unwrap();
    r.i32().unwrap();
    r.i16().unwrap()
}

/// Fetch v4 naming `topic`/0 `times` times from `offset`, every max_bytes
/// field set to `max_bytes`.
fn fetch(correlation_id: i32, topic: &str, times: usize, offset: i64, max_bytes: i32, max_wait_ms: i32) -> Vec<u8> {
    frame(1, 4, correlation_id, |w| {
        w.i32(-1);
        w.i32(max_wait_ms);
        w.i32(1);
        w.i32(max_bytes);
        w.i8(0);
        w.array_len(1);
        w.string(topic);
        w.array_len(times);
        for _ in 0..times {
            w.i32(0);
            w.i64(offset);
            w.i32(max_bytes);
        }
    })
}

/// A Fetch v4 answer: (partition entries, error of the first, record bytes in all).
fn fetch_answer(body: &[u8]) -> (usize, i16, usize) {
    let mut r = sluice::kafka::wire::Reader::new(bytes::Bytes::copy_from_slice(body));
    r.i32().unwrap(); // correlation id
    r.i32().unwrap(); // throttle
    let topics = r.array_len(1).unwrap();
    let (mut entries, mut first_error, mut records) = (0, None, 0);
    for _ in 0..topics {
        r.string().unwrap();
        for _ in 0..r.array_len(1).unwrap() {
            entries += 1;
            r.i32().unwrap();
            let e = r.i16().unwrap();
            first_error.get_or_insert(e);
            r.i64().unwrap();
            r.i64().unwrap();
            r.array_len(0).unwrap(); // aborted transactions (null or empty)
            records += r.nullable_bytes().unwrap().map_or(0, |b| b.len());
        }
    }
    (entries, first_error.unwrap_or(-1), records)
}

// ------------------------------------------------------------ finding 1: frames before login

/// With auth on, three connections send the header of a 100 MiB frame and
/// start on its body without logging in. The old node buffered all of it
/// (+300 MiB); now the length alone closes each connection.
#[test]
fn unauthenticated_frames_over_512_kib_are_refused_on_their_length_and_memory_stays_flat() {
    if !has_proc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = start_secured(&dir, &[]);
    create_topic(&server, Some(ADMIN), "t");
    let rss = RssPeak::start(server.child.id());
    let attackers: Vec<_> = (0..3)
        .map(|_| {
            let addr = server.kafka_addr.clone();
            std::thread::spawn(move || {
                let mut s = connect(&addr);
                s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
                let started = Instant::now();
                let mut sent = 0u64;
                let mut head = (100u32 << 20).to_be_bytes().to_vec();
                head.extend_from_slice(&frame(18, 0, 1, |_| {})[4..]);
                let chunk = vec![0u8; 1 << 20];
                if s.write_all(&head).is_ok() {
                    // "Most of its body": 90 MiB, then stall.
                    while sent < 90 * MIB && s.write_all(&chunk).is_ok() {
                        sent += chunk.len() as u64;
                    }
                }
                let closed = closed_within(&mut s, Duration::from_secs(30));
                (sent, started.elapsed().max(closed))
            })
        })
        .collect();
    let results: Vec<(u64, Duration)> = attackers.into_iter().map(|t| t.join().unwrap()).collect();
    let (before, peak) = rss.finish();
    let growth = peak.saturating_sub(before);
    eprintln!(
        "three unauthenticated 100 MiB frames: VmRSS {before} KiB, peak growth {growth} KiB; (body bytes the client got out, time to close): {results:?}"
    );
    assert!(growth <= 64 * 1024, "VmRSS grew by {growth} KiB (bound 64 MiB)");
    for (sent, took) in &results {
        assert!(*sent < 90 * MIB, "the node read a 90 MiB body before login");
        assert!(*took < Duration::from_secs(10), "closed after {took:?}");
    }
    assert!(logged(&server, "before SASL authentication"), "the reason is logged");

    // Positive control: after login the cap is --kafka-max-frame-bytes, so a
    // 600 KiB Produce (over the 512 KiB pre-login cap) is served.
    let (token, _) = mint(&server, "w", json!([{"topics": "t", "ops": ["read", "write"]}]));
    let mut s = connect(&server.kafka_addr);
    assert!(api_versions_answered(&mut s, 3), "ApiVersions before login");
    login(&mut s, &token);
    let big = produce(4, "t", &batch(1, 600 * 1024));
    assert!(big.len() > 512 * 1024);
    s.write_all(&big).unwrap();
    assert_eq!(produce_error(&response(&mut s).expect("produce answered")), 0);
}

// ------------------------------------------------------------ finding 1: read-ahead and the node budget

/// Without auth, four connections each send a Fetch that waits and then six
/// 30 MiB frames behind it. The old node read four frames ahead of the
/// waiting Fetch on each connection (+600 MiB here); now a connection holds
/// at most --kafka-max-frame-bytes and all of them together at most
/// --kafka-max-request-memory-bytes.
#[test]
fn read_ahead_is_bounded_by_bytes_per_connection_and_for_the_node() {
    if !has_proc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        &dir,
        &[
            "--kafka-max-frame-bytes",
            &(32 * MIB).to_string(),
            "--kafka-max-request-memory-bytes",
            &(64 * MIB).to_string(),
            "--max-wait-ms",
            "6000",
        ],
    );
    create_topic(&server, None, "t");
    let rss = RssPeak::start(server.child.id());
    let started = Instant::now();
    let attackers: Vec<_> = (0..4)
        .map(|i| {
            let addr = server.kafka_addr.clone();
            std::thread::spawn(move || {
                let mut s = connect(&addr);
                s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
                // Waits the full 6 s: the partition is empty.
                s.write_all(&fetch(i, "t", 1, 0, 1 << 20, 6_000)).unwrap();
                // ApiVersions headers with 30 MiB of junk: each closes the
                // connection once it is handled, after the Fetch.
                let junk = frame(18, 0, 100 + i, |w| w.buf.extend_from_slice(&vec![0u8; 30 << 20]));
                // Read the Fetch's answer as it comes: the node closes the
                // connection right after, at the first junk frame.
                let mut rd = s.try_clone().unwrap();
                let answer = std::thread::spawn(move || {
                    let fetched = response(&mut rd).map(|b| fetch_answer(&b));
                    let closed = closed_within(&mut rd, Duration::from_secs(30));
                    (fetched, closed)
                });
                let mut sent = 0;
                for _ in 0..6 {
                    if s.write_all(&junk).is_err() {
                        break;
                    }
                    sent += 1;
                }
                let (fetched, closed) = answer.join().unwrap();
                (sent, fetched, closed)
            })
        })
        .collect();
    let results: Vec<_> = attackers.into_iter().map(|t| t.join().unwrap()).collect();
    let (before, peak) = rss.finish();
    let growth = peak.saturating_sub(before);
    eprintln!(
        "four connections, a waiting Fetch and six 30 MiB frames each: VmRSS {before} KiB, peak growth {growth} KiB in {:?}; (frames sent, fetch answer, close): {results:?}",
        started.elapsed()
    );
    assert!(
        growth <= (64 + 32) * 1024,
        "VmRSS grew by {growth} KiB (node budget 64 MiB + 32 MiB slack)"
    );
    for (_, fetched, _) in &results {
        assert_eq!(fetched.map(|f| f.1), Some(0), "each waiting Fetch was answered");
    }
    // Positive control: the budget is back; a new client produces and fetches.
    let mut s = connect(&server.kafka_addr);
    assert!(api_versions_answered(&mut s, 1));
    s.write_all(&produce(2, "t", &batch(3, 100))).unwrap();
    assert_eq!(produce_error(&response(&mut s).unwrap()), 0);
    s.write_all(&fetch(3, "t", 1, 0, 1 << 20, 0)).unwrap();
    let (entries, error, records) = fetch_answer(&response(&mut s).unwrap());
    assert_eq!((entries, error), (1, 0));
    assert!(records > 300, "the three records are read back");
}

// ------------------------------------------------------------ finding 2: Fetch amplification

/// ~100 MB in one partition; one Fetch names it 1,000 times with
/// max_bytes = i32::MAX. The old node answered 1,953 MiB (+1.9 GiB RSS).
#[test]
fn a_fetch_naming_one_partition_1000_times_is_answered_once_within_the_cap() {
    if !has_proc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // File stores, so the stored records are not in the node's RSS; a
    // small read cache, so the growth measured is the Fetch's.
    let server = Server::start(
        "n1",
        dir.path(),
        free_port(),
        &[
            "--read-cache-bytes",
            &(16 * MIB).to_string(),
            "--flush-interval-sec",
            "1",
        ],
    );
    create_topic(&server, None, "big");
    let started = Instant::now();
    let one = batch(4, 1000 * 1000);
    let mut s = connect(&server.kafka_addr);
    let mut produced = 0;
    for i in 0..25 {
        s.write_all(&produce(i, "big", &one)).unwrap();
        assert_eq!(produce_error(&response(&mut s).unwrap()), 0);
        produced += one.len();
    }
    eprintln!("produced {produced} bytes in {:?}", started.elapsed());
    // Let the tail flush to data objects and memory settle.
    std::thread::sleep(Duration::from_secs(3));

    let cap = 57_671_680usize;
    let rss = RssPeak::start(server.child.id());
    let started = Instant::now();
    s.write_all(&fetch(99, "big", 1_000, 0, i32::MAX, 0)).unwrap();
    let answer = response(&mut s).expect("the Fetch is answered");
    let took = started.elapsed();
    let (before, peak) = rss.finish();
    let growth = peak.saturating_sub(before);
    let (entries, error, records) = fetch_answer(&answer);
    eprintln!(
        "Fetch of one partition x1000, max_bytes=i32::MAX over {produced} bytes: answer {} bytes ({records} of records, {entries} partition entry) in {took:?}; VmRSS {before} KiB, peak growth {growth} KiB",
        answer.len()
    );
    assert_eq!((entries, error), (1, 0), "the partition is answered once");
    assert!(records <= cap, "{records} bytes of records over the {cap}-byte cap");
    assert!(answer.len() <= cap + 4096, "{} bytes in all", answer.len());
    assert!(records >= cap - one.len(), "as much as fits: {records}");
    assert!(growth <= 128 * 1024, "VmRSS grew by {growth} KiB (bound 128 MiB)");

    // Positive control: an ordinary Fetch gets what it asks for.
    s.write_all(&fetch(100, "big", 1, 4, 1 << 20, 0)).unwrap();
    let (entries, error, records) = fetch_answer(&response(&mut s).unwrap());
    assert_eq!((entries, error), (1, 0));
    assert_eq!(records, one.len(), "one batch (the first is returned whole)");
}

// ------------------------------------------------------------ finding 9: slots held without logging in

/// With --max-connections 20, twenty sockets that never log in used to
/// lock new Kafka clients out until the 600 s idle timeout.
#[test]
fn sockets_that_never_log_in_are_closed_at_the_deadline_and_free_their_slots() {
    let dir = tempfile::tempdir().unwrap();
    let deadline = Duration::from_secs(2);
    let server = start_secured(&dir, &["--max-connections", "20", "--kafka-auth-deadline-sec", "2"]);
    create_topic(&server, Some(ADMIN), "t");
    let (token, _) = mint(&server, "w", json!([{"topics": "t", "ops": ["read", "write"]}]));
    // A client that logged in before the attack stays past the deadline.
    let mut early = connect(&server.kafka_addr);
    login(&mut early, &token);

    let started = Instant::now();
    let mut idle: Vec<TcpStream> = Vec::new();
    for _ in 0..200 {
        if idle.len() == 19 {
            break;
        }
        let mut s = connect(&server.kafka_addr);
        // An accepted socket answers ApiVersions; a refused one is closed.
        if api_versions_answered(&mut s, 1) {
            idle.push(s);
        }
    }
    assert_eq!(idle.len(), 19, "19 idle sockets (with the early client: the cap)");
    // A new client is locked out now ...
    let mut locked = connect(&server.kafka_addr);
    assert!(!api_versions_answered(&mut locked, 2), "the 21st connection is refused");
    // ... and gets in once the idle sockets reach the login deadline.
    let got_in = loop {
        let mut s = connect(&server.kafka_addr);
        if api_versions_answered(&mut s, 3) {
            login(&mut s, &token);
            break started.elapsed();
        }
        assert!(
            started.elapsed() < deadline + Duration::from_secs(8),
            "still locked out after {:?}",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let closes: Vec<Duration> = idle
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_secs(10)))
        .collect();
    eprintln!(
        "20 connection slots, 19 idle unauthenticated sockets + 1 logged in: a new client got in after {got_in:?} (deadline {deadline:?})"
    );
    assert!(
        got_in <= deadline + Duration::from_secs(3),
        "locked out for {got_in:?}, over the {deadline:?} deadline + 3 s"
    );
    assert!(closes.iter().all(|c| *c < Duration::from_secs(5)));
    assert!(logged(&server, "not authenticated"), "the reason is logged");
    // Positive control: the client that logged in first is still served.
    early.write_all(&produce(5, "t", &batch(1, 10))).unwrap();
    assert_eq!(
        produce_error(&response(&mut early).unwrap()),
        0,
        "a logged-in client outlives the deadline"
    );
}

/// A TCP connection from `local` (a loopback address) to `addr`.
fn connect_from(local: &str, addr: &str) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{local}:0").parse().unwrap()).unwrap();
        socket.connect(addr.parse().unwrap()).await.unwrap()
    });
    let s = s.into_std().unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

fn http_ready_on(s: &mut TcpStream) -> bool {
    let mut head = [0u8; 12];
    if s.write_all(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n").is_err() || s.read_exact(&mut head).is_err() {
        return false;
    }
    // Drain the rest of this small response.
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut rest = [0u8; 4096];
    let n = s.read(&mut rest).unwrap_or(0);
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // A connection past a cap may still be answered on the probe lane,
    // once, and closed: that is no slot of its own.
    let probe_lane = String::from_utf8_lossy(&rest[..n])
        .to_ascii_lowercase()
        .contains("connection: close");
    &head == b"HTTP/1.1 200" && !probe_lane
}

/// One address may hold at most --max-connections-per-ip connections per
/// listener; another address still gets in.
#[test]
fn one_address_may_hold_only_its_share_of_connections_on_both_listeners() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir, &["--max-connections-per-ip", "3"]);
    let http = format!("127.0.0.1:{}", server.port);
    for (listener, addr) in [("kafka", server.kafka_addr.clone()), ("http", http.clone())] {
        let served = |s: &mut TcpStream| {
            if listener == "kafka" {
                api_versions_answered(s, 1)
            } else {
                http_ready_on(s)
            }
        };
        // The start-up probes may hold a slot of 127.0.0.1 for a moment.
        let mut open = Vec::new();
        for _ in 0..200 {
            if open.len() == 3 {
                break;
            }
            let mut s = connect_from("127.0.0.1", &addr);
            if served(&mut s) {
                open.push(s);
            } else {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        assert_eq!(open.len(), 3, "{listener}: three from 127.0.0.1");
        let mut fourth = connect_from("127.0.0.1", &addr);
        assert!(!served(&mut fourth), "{listener}: the fourth from 127.0.0.1 is refused");
        let mut other = connect_from("127.0.0.2", &addr);
        assert!(served(&mut other), "{listener}: 127.0.0.2 still gets in");
        for s in open.iter_mut() {
            assert!(served(s), "{listener}: open connections keep working");
        }
        drop(open.pop());
        let freed = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            let mut s = connect_from("127.0.0.1", &addr);
            served(&mut s)
        });
        assert!(freed, "{listener}: a closed connection gives the address its slot back");
    }
}

// ------------------------------------------------------------ finding 6: revocation

/// A logged-in connection that sends nothing, and one in a Fetch long poll,
/// are closed soon after their token is revoked. The old node closed them
/// only at their next request.
#[test]
fn a_revoked_token_closes_quiet_and_long_polling_connections() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_secured(&dir, &["--max-wait-ms", "20000"]);
    create_topic(&server, Some(ADMIN), "t");
    let (doomed, id) = mint(&server, "doomed", json!([{"topics": "t", "ops": ["read"]}]));
    let (kept, _) = mint(&server, "kept", json!([{"topics": "t", "ops": ["read", "write"]}]));
    let mut quiet = connect(&server.kafka_addr);
    login(&mut quiet, &doomed);
    let mut polling = connect(&server.kafka_addr);
    login(&mut polling, &doomed);
    // Waits up to 20 s: the partition is empty.
    polling.write_all(&fetch(7, "t", 1, 0, 1 << 20, 20_000)).unwrap();
    let mut other = connect(&server.kafka_addr);
    login(&mut other, &kept);
    std::thread::sleep(Duration::from_millis(300));

    let (status, body) = http(server.port, "DELETE", &format!("/v1/tokens/{id}"), Some(ADMIN), None);
    assert_eq!(status, 204, "{body}");
    let revoked = Instant::now();
    let quiet_closed = closed_within(&mut quiet, Duration::from_secs(10));
    let mut got = Vec::new();
    polling.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let poll_closed = match polling.read_to_end(&mut got) {
        Ok(_) => revoked.elapsed(),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => revoked.elapsed(),
        Err(e) => panic!("the long poll stayed open: {e}"),
    };
    eprintln!("after revocation: quiet connection closed in {quiet_closed:?}, long-polling one in {poll_closed:?}");
    assert!(quiet_closed < Duration::from_secs(4), "{quiet_closed:?}");
    assert!(poll_closed < Duration::from_secs(4), "{poll_closed:?}");
    assert!(got.is_empty(), "the long poll was answered after revocation");
    // Positive control: a connection with another token is still served.
    other.write_all(&produce(8, "t", &batch(1, 10))).unwrap();
    assert_eq!(produce_error(&response(&mut other).unwrap()), 0);
}

// ------------------------------------------------------------ finding 10: DeleteGroups

/// OffsetCommit v2 (a simple commit, generation -1) of `group` at `offset`.
fn offset_commit(correlation_id: i32, group: &str, topic: &str, offset: i64) -> Vec<u8> {
    frame(8, 2, correlation_id, |w| {
        w.string(group);
        w.i32(-1);
        w.string("");
        w.i64(-1);
        w.array_len(1);
        w.string(topic);
        w.array_len(1);
        w.i32(0);
        w.i64(offset);
        w.nullable_string(None);
    })
}

/// OffsetFetch v1 of `group` for `topic`/0: the committed offset.
fn committed(s: &mut TcpStream, group: &str, topic: &str) -> i64 {
    s.write_all(&frame(9, 1, 11, |w| {
        w.string(group);
        w.array_len(1);
        w.string(topic);
        w.array_len(1);
        w.i32(0);
    }))
    .unwrap();
    let body = response(s).unwrap();
    let mut r = sluice::kafka::wire::Reader::new(bytes::Bytes::from(body));
    r.i32().unwrap();
    r.array_len(1).unwrap();
    r.string().unwrap();
    r.array_len(1).unwrap();
    r.i32().unwrap();
    r.i64().unwrap()
}

/// DeleteGroups v1 of one group: its error code.
fn delete_group(s: &mut TcpStream, group: &str) -> i16 {
    s.write_all(&frame(42, 1, 12, |w| {
        w.array_len(1);
        w.string(group);
    }))
    .unwrap();
    let body = response(s).unwrap();
    let mut r = sluice::kafka::wire::Reader::new(bytes::Bytes::from(body));
    r.i32().unwrap();
    r.i32().unwrap();
    r.array_len(1).unwrap();
    assert_eq!(r.string().unwrap(), group);
    r.i16().unwrap()
}

/// DeleteGroups needs admin on every topic the group has offsets for; a
/// token without it used to get -1 after the group's state was cleared.
#[test]
fn an_unauthorized_delete_groups_answers_group_authorization_failed_and_keeps_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_secured(&dir, &[]);
    create_topic(&server, Some(ADMIN), "t");
    let (reader, _) = mint(&server, "r", json!([{"topics": "t", "ops": ["read"]}]));
    let mut s = connect(&server.kafka_addr);
    login(&mut s, &reader);
    s.write_all(&offset_commit(10, "g", "t", 0)).unwrap();
    let body = response(&mut s).unwrap();
    assert_eq!(
        i16::from_be_bytes([body[body.len() - 2], body[body.len() - 1]]),
        0,
        "committed"
    );
    assert_eq!(committed(&mut s, "g", "t"), 0);
    assert_eq!(delete_group(&mut s, "g"), 30, "GROUP_AUTHORIZATION_FAILED");
    assert_eq!(committed(&mut s, "g", "t"), 0, "the offsets are kept");
    // Positive control: the admin may delete it.
    let mut a = connect(&server.kafka_addr);
    login(&mut a, ADMIN);
    assert_eq!(delete_group(&mut a, "g"), 0);
    assert_eq!(committed(&mut a, "g", "t"), -1, "gone");
}
