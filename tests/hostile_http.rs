//! Hostile and careless HTTP clients against a real `sluice serve` process
//! (issue 15, findings 3, 4 and the HTTP parts of 10): a read asking for
//! 2^64 bytes, tiny-record JSON appends of 8 MiB, a `Content-Length` over
//! the limit, a web page's cross-site POST, an endless `Stream-Seq`, an
//! unknown topic setting, a path that is not UTF-8. Each test has its
//! positive control: a normal client still gets what it asked for.
//!
//! Memory is the node's VmRSS from `/proc/PID/status`, sampled by a thread
//! while the attack runs; the tests print what they measured.

mod support;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::process::{free_port, Server};
use support::rss::{has_proc, RssPeak};

const MIB: u64 = 1024 * 1024;

fn start(dir: &tempfile::TempDir, extra: &[&str]) -> Server {
    let mut args = vec!["--metadata", "memory://"];
    args.extend_from_slice(extra);
    Server::start("n1", dir.path(), free_port(), &args)
}

/// One HTTP/1.1 exchange on a fresh connection: (status, headers, body).
fn exchange(port: u16, head: &str, body: &[u8]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = format!(
        "{head}Host: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    // The node may answer (and close) before it has read everything.
    let _ = s.write_all(body);
    read_answer(&mut s)
}

fn read_answer(s: &mut TcpStream) -> (u16, String, Vec<u8>) {
    read_answer_timed(s).0
}

/// [`read_answer`], and when its first byte arrived.
fn read_answer_timed(s: &mut TcpStream) -> ((u16, String, Vec<u8>), Option<Instant>) {
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut first = None;
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                first.get_or_insert_with(Instant::now);
                raw.extend_from_slice(&buf[..n])
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading the answer: {e}"),
        }
    }
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head[9..12].parse().unwrap();
    ((status, head, raw[split + 4..].to_vec()), first)
}

fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)))
}

fn create_topic(port: u16, name: &str) {
    let body = format!(r#"{{"name":"{name}","partitions":1}}"#);
    let (status, _, b) = exchange(
        port,
        "POST /v1/topics HTTP/1.1\r\nContent-Type: application/json\r\n",
        body.as_bytes(),
    );
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&b));
}

/// Finding 3: `max_bytes=2^64-1` over ~90 MB of data used to answer 88 MiB
/// and grow the node by 319 MiB. Now the answer is at most
/// `--http-max-read-bytes` (8 MiB by default) and memory stays flat.
#[test]
fn a_read_asking_for_every_byte_is_capped_and_memory_stays_flat() {
    if !has_proc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir, &["--object-store", "memory://"]);
    let port = server.port;
    create_topic(port, "big");
    // 90 records of about 1 MB each, as raw appends (no JSON to parse).
    let value = vec![b'x'; 1_000_000];
    for _ in 0..90 {
        let (status, _, b) = exchange(
            port,
            "POST /v1/topics/big/partitions/0/records HTTP/1.1\r\nContent-Type: application/octet-stream\r\n",
            &value,
        );
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&b));
    }
    let pid = server.child.id();
    let sampler = RssPeak::start(pid);
    let mut sizes = Vec::new();
    // Three at once, as an attacker would.
    let readers: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(move || {
                exchange(
                    port,
                    "GET /v1/topics/big/partitions/0/records?limit=10000&max_bytes=18446744073709551615 HTTP/1.1\r\n",
                    b"",
                )
            })
        })
        .collect();
    for r in readers {
        let (status, _, body) = r.join().unwrap();
        assert_eq!(status, 200);
        let v = json(&body);
        let n = v["records"].as_array().unwrap().len() as u64;
        assert!(
            n >= 1 && v["next_offset"] == n,
            "{n} records, next {}",
            v["next_offset"]
        );
        sizes.push(body.len() as u64);
    }
    let (before, peak) = sampler.finish();
    let growth = peak.saturating_sub(before) / 1024;
    eprintln!("huge max_bytes read: answers {sizes:?} bytes, VmRSS {before} KiB -> peak {peak} KiB (+{growth} MiB)");
    for size in &sizes {
        assert!(*size <= 8 * MIB, "an answer of {size} bytes passes the 8 MiB cap");
    }
    assert!(growth <= 128, "VmRSS grew by {growth} MiB");

    // Positive control: a normal paged read gets every record in order.
    let mut offset = 0u64;
    let mut seen = 0;
    while seen < 90 {
        let (status, _, body) = exchange(
            port,
            &format!("GET /v1/topics/big/partitions/0/records?offset={offset}&max_bytes=3000000 HTTP/1.1\r\n"),
            b"",
        );
        assert_eq!(status, 200);
        let v = json(&body);
        let records = v["records"].as_array().unwrap();
        assert!(!records.is_empty(), "stuck at {offset}");
        for r in records {
            assert_eq!(r["offset"], offset);
            assert_eq!(r["value"].as_str().unwrap().len(), 1_000_000);
            offset += 1;
            seen += 1;
        }
        assert_eq!(v["next_offset"], offset);
    }
    assert_eq!(v_high_watermark(port), 90);
}

fn v_high_watermark(port: u16) -> u64 {
    let (_, _, body) = exchange(
        port,
        "GET /v1/topics/big/partitions/0/records?offset=-1 HTTP/1.1\r\n",
        b"",
    );
    json(&body)["high_watermark"].as_u64().unwrap()
}

/// `{"records":[{"value":null},...]}` of `n` records.
fn tiny_records(n: usize, value: &str) -> Vec<u8> {
    let one = format!(r#"{{"value":{value}}}"#);
    let mut body = Vec::with_capacity(16 + n * (one.len() + 1));
    body.extend_from_slice(b"{\"records\":[");
    for i in 0..n {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(one.as_bytes());
    }
    body.extend_from_slice(b"]}");
    body
}

/// Finding 4: four concurrent 8 MiB bodies of 559k `{"value":null}` records
/// used to peak at +942 MiB. Now each record counts 64 bytes against
/// `--max-request-bytes`, so they are 413 naming the limit, and memory
/// stays within 256 MiB; four concurrent 8 MiB appends of records a client
/// may send (100k each) succeed within the same bound.
#[test]
fn tiny_record_json_appends_are_bounded() {
    if !has_proc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir, &["--object-store", "memory://"]);
    let port = server.port;
    create_topic(port, "tiny");
    let pid = server.child.id();

    let attack = Arc::new(tiny_records(559_000, "null"));
    assert!(attack.len() <= 8 * MIB as usize, "{}", attack.len());
    let sampler = RssPeak::start(pid);
    let started = Instant::now();
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let body = attack.clone();
            std::thread::spawn(move || {
                exchange(
                    port,
                    "POST /v1/topics/tiny/records HTTP/1.1\r\nContent-Type: application/json\r\n",
                    &body,
                )
            })
        })
        .collect();
    for s in senders {
        let (status, _, body) = s.join().unwrap();
        let v = json(&body);
        assert_eq!(status, 413, "{v}");
        assert_eq!(v["error"]["code"], "request_too_large");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("--max-request-bytes"),
            "{v}"
        );
    }
    let (before, peak) = sampler.finish();
    let growth = peak.saturating_sub(before) / 1024;
    eprintln!(
        "4 x 8 MiB of 559k tiny records: 413 in {:?}, VmRSS {before} KiB -> peak {peak} KiB (+{growth} MiB)",
        started.elapsed()
    );
    assert!(growth <= 256, "VmRSS grew by {growth} MiB");

    // Positive control: four concurrent appends of 100k records (about
    // 7.3 MiB each) are accepted, answered with ranges, and stay bounded.
    let value = format!("\"{}\"", "v".repeat(60));
    let ok = Arc::new(tiny_records(100_000, &value));
    assert!(ok.len() <= 8 * MIB as usize);
    let sampler = RssPeak::start(pid);
    let started = Instant::now();
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let body = ok.clone();
            std::thread::spawn(move || {
                exchange(
                    port,
                    "POST /v1/topics/tiny/records HTTP/1.1\r\nContent-Type: application/json\r\n",
                    &body,
                )
            })
        })
        .collect();
    let mut bases = Vec::new();
    for s in senders {
        let (status, _, body) = s.join().unwrap();
        let v = json(&body);
        assert_eq!(status, 200, "{v}");
        assert!(v.get("offsets").is_none(), "no per-record list for 100k records");
        assert_eq!(v["ranges"][0]["count"], 100_000);
        assert!(body.len() < 200, "a compact answer: {} bytes", body.len());
        bases.push(v["ranges"][0]["base_offset"].as_u64().unwrap());
    }
    let (before, peak) = sampler.finish();
    let growth = peak.saturating_sub(before) / 1024;
    eprintln!(
        "4 x {} bytes of 100k records: 200 in {:?}, VmRSS {before} KiB -> peak {peak} KiB (+{growth} MiB)",
        ok.len(),
        started.elapsed()
    );
    assert!(growth <= 256, "VmRSS grew by {growth} MiB");
    bases.sort();
    assert_eq!(
        bases,
        [0, 100_000, 200_000, 300_000],
        "each request got its own consecutive range"
    );
}

/// Finding 10: a `Content-Length` over the limit used to wait for the body
/// (30 s, the read timeout); now it is 413 from the head alone.
#[test]
fn an_oversize_content_length_is_answered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        &dir,
        &[
            "--object-store",
            "memory://",
            "--max-request-bytes",
            "65536",
            "--max-record-bytes",
            "65536",
        ],
    );
    let port = server.port;
    create_topic(port, "t");
    for path in ["/v1/topics/t/records", "/v1/stream/s"] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let started = Instant::now();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{{\"records\":["
        )
        .unwrap();
        let ((status, _, body), first) = read_answer_timed(&mut s);
        let took = first.unwrap().duration_since(started);
        eprintln!(
            "{path}: Content-Length 100000000 answered {status} in {took:?} (connection closed after {:?})",
            started.elapsed()
        );
        assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));
        assert!(took < Duration::from_secs(2), "took {took:?}");
        assert!(String::from_utf8_lossy(&body).contains("--max-request-bytes"));
    }
    // Positive control: a body within the limit is appended.
    let (status, _, body) = exchange(
        port,
        "POST /v1/topics/t/records HTTP/1.1\r\nContent-Type: application/json\r\n",
        br#"{"records":[{"value":"fine"}]}"#,
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
}

/// Finding 10: with auth off any web page could create topics and append
/// with a `text/plain` form POST (no CORS preflight). Browsers mark such a
/// request with `Origin` and `Sec-Fetch-Site`; it is refused, and nothing
/// changes. Clients that are not browsers, and browsers on the node's own
/// origin, are served as before.
#[test]
fn simple_cross_site_posts_from_web_pages_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir, &["--object-store", "memory://"]);
    let port = server.port;
    let page =
        "Origin: https://evil.example\r\nSec-Fetch-Site: cross-site\r\nContent-Type: text/plain;charset=UTF-8\r\n";
    let (status, head, body) = exchange(
        port,
        &format!("POST /v1/topics HTTP/1.1\r\n{page}"),
        br#"{"name":"pwned","partitions":1}"#,
    );
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&body));
    assert!(
        head.to_ascii_lowercase().contains("content-type: application/json"),
        "{head}"
    );
    assert_eq!(json(&body)["error"]["code"], "forbidden");
    let (status, _, _) = exchange(port, "GET /v1/topics/pwned HTTP/1.1\r\n", b"");
    assert_eq!(status, 404, "nothing was created");

    // Durable Streams: a text stream, and the same page appending to it.
    let (status, _, body) = exchange(
        port,
        "PUT /v1/stream/notes HTTP/1.1\r\nContent-Type: text/plain\r\n",
        b"",
    );
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    let (status, _, body) = exchange(port, &format!("POST /v1/stream/notes HTTP/1.1\r\n{page}"), b"spam");
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&body));

    // Positive controls: curl-like clients (no Origin), the node's own
    // origin, and a preflighted browser append (it carries Stream-Seq).
    create_topic(port, "t");
    let (status, _, body) = exchange(
        port,
        "POST /v1/topics/t/records HTTP/1.1\r\nContent-Type: text/plain\r\n",
        br#"{"records":[{"value":"from curl"}]}"#,
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let (status, _, body) = exchange(
        port,
        &format!(
            "POST /v1/topics/t/records HTTP/1.1\r\nOrigin: http://127.0.0.1:{port}\r\nContent-Type: text/plain\r\n"
        ),
        br#"{"records":[{"value":"same origin"}]}"#,
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let (status, _, body) = exchange(
        port,
        "POST /v1/stream/notes HTTP/1.1\r\nOrigin: https://app.example\r\nContent-Type: text/plain\r\nStream-Seq: 0001\r\n",
        b"hello",
    );
    assert_eq!(status, 204, "{}", String::from_utf8_lossy(&body));
    let (_, _, body) = exchange(port, "GET /v1/stream/notes?offset=-1 HTTP/1.1\r\n", b"");
    assert_eq!(body, b"hello", "only the preflighted append landed");
}

/// Finding 10: `Stream-Seq` had no length limit (60 KB values went into
/// the metadata log); now more than 128 bytes is 400.
#[test]
fn an_endless_stream_seq_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir, &["--object-store", "memory://"]);
    let port = server.port;
    let (status, _, _) = exchange(port, "PUT /v1/stream/s HTTP/1.1\r\nContent-Type: text/plain\r\n", b"");
    assert_eq!(status, 201);
    let long = "9".repeat(60_000);
    let (status, _, body) = exchange(
        port,
        &format!("POST /v1/stream/s HTTP/1.1\r\nContent-Type: text/plain\r\nStream-Seq: {long}\r\n"),
        b"a",
    );
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("at most 128"));
    // Positive control: an ordinary sequence still orders appends.
    for (seq, want) in [("0001", 204), ("0002", 204), ("0001", 409)] {
        let (status, _, body) = exchange(
            port,
            &format!("POST /v1/stream/s HTTP/1.1\r\nContent-Type: text/plain\r\nStream-Seq: {seq}\r\n"),
            b"a",
        );
        assert_eq!(status, want, "seq {seq}: {}", String::from_utf8_lossy(&body));
    }
}

/// Finding 10: unknown `config` keys were ignored; a non-UTF-8 path got a
/// plain-text 400; the OpenAPI document's global `security` covered the
/// open routes.
#[test]
fn careless_requests_get_precise_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir, &["--object-store", "memory://"]);
    let port = server.port;
    let (status, _, body) = exchange(
        port,
        "POST /v1/topics HTTP/1.1\r\nContent-Type: application/json\r\n",
        br#"{"name":"t","config":{"retention.ms":1000}}"#,
    );
    let v = json(&body);
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("\"retention.ms\""),
        "{v}"
    );
    let (status, _, _) = exchange(port, "GET /v1/topics/t HTTP/1.1\r\n", b"");
    assert_eq!(status, 404, "not created");
    let (status, _, body) = exchange(
        port,
        "POST /v1/topics HTTP/1.1\r\nContent-Type: application/json\r\n",
        br#"{"name":"t","config":{"retention_ms":1000}}"#,
    );
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));

    let (status, head, body) = exchange(port, "GET /v1/topics/%FF%FE HTTP/1.1\r\n", b"");
    assert_eq!(status, 400);
    assert!(
        head.to_ascii_lowercase().contains("content-type: application/json"),
        "{head}"
    );
    assert_eq!(json(&body)["error"]["code"], "invalid_request");
    let (status, _, body) = exchange(port, "GET /v1/topics/t HTTP/1.1\r\n", b"");
    assert_eq!(status, 200);
    assert_eq!(json(&body)["config"]["retention_ms"], 1000);

    let (_, _, body) = exchange(port, "GET /openapi.json HTTP/1.1\r\n", b"");
    let doc = json(&body);
    for path in ["/health", "/ready", "/metrics", "/openapi.json"] {
        assert_eq!(doc["paths"][path]["get"]["security"], serde_json::json!([]), "{path}");
    }
    assert!(doc["paths"]["/v1/topics"]["post"].get("security").is_none());
    assert_eq!(doc["security"], serde_json::json!([{ "bearer": [] }]));
}
