//! Hostile clients against real `sluice serve` processes, on the paths where
//! credentials and trust are decided: tokens minted while auth is off, reads
//! of a Durable Streams fork whose source the token may not read, live reads
//! that outlive their token, forged forwarding marks, connection slots held
//! without finishing a request, and bodies that trickle in forever. Each
//! test has its positive control: a client that behaves is still served.

mod support;

use futures::StreamExt;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::http::{bearer_client, create_topic, issue_token, partition_owned_by};
use support::process::{free_port, http_status, Server};
use support::rss::rss_kib;

const ADMIN: &str = "hostile-auth-test-admin-secret-0b9d";

fn admin_file(dir: &tempfile::TempDir) -> String {
    let f = dir.path().join("admin-token");
    std::fs::write(&f, format!("{ADMIN}\n")).unwrap();
    f.to_str().unwrap().to_string()
}

fn auth_on(dir: &tempfile::TempDir) -> Vec<String> {
    vec![
        "--auth".into(),
        "on".into(),
        "--admin-token-file".into(),
        admin_file(dir),
    ]
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Issue a token with `scopes` through the admin; (id, secret).
async fn issue(url: &str, scopes: Value) -> (String, String) {
    issue_token(&bearer_client(ADMIN), url, json!({"name": "t", "scopes": scopes})).await
}

async fn append(c: &reqwest::Client, url: &str, topic: &str, partition: u32, value: &str) {
    let r = c
        .post(format!("{url}/v1/topics/{topic}/partitions/{partition}/records"))
        .json(&json!({"records": [{"value": value}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
}

/// Durable Streams: create `path` (text) holding `body`.
async fn ds_create(c: &reqwest::Client, url: &str, path: &str, headers: &[(&str, &str)], body: &'static str) {
    let mut req = c
        .put(format!("{url}/v1/stream/{path}"))
        .header("content-type", "text/plain")
        .body(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

async fn ds_append(c: &reqwest::Client, url: &str, path: &str, body: &'static str) {
    let r = c
        .post(format!("{url}/v1/stream/{path}"))
        .header("content-type", "text/plain")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204, "{}", r.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_is_issued_with_auth_off_and_none_carries_over_to_auth_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = Server::start("n1", dir.path(), free_port(), &[]);
    let c = reqwest::Client::new();
    let r = c
        .post(format!("{}/v1/tokens", node.url))
        .json(&json!({"name": "sneaky", "scopes": [{"topics": "*", "ops": ["admin"]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "auth_off", "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("--auth on"),
        "{body}"
    );
    node.terminate();

    // The same data directory under --auth on: nothing was issued, and the
    // admin can issue tokens that work (the positive control).
    let on = auth_on(&dir);
    let node = Server::start("n1", dir.path(), node.port, &args(&on));
    let admin = bearer_client(ADMIN);
    let listed: Value = admin
        .get(format!("{}/v1/tokens", node.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["tokens"], json!([]), "{listed}");
    let (_, token) = issue(&node.url, json!([{"topics": "*", "ops": ["admin"]}])).await;
    let r = bearer_client(&token)
        .get(format!("{}/admin/nodes", node.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_is_read_only_with_read_on_every_stream_of_its_chain() {
    let dir = tempfile::tempdir().unwrap();
    let on = auth_on(&dir);
    let node = Server::start("n1", dir.path(), free_port(), &args(&on));
    let url = node.url.clone();
    let admin = bearer_client(ADMIN);
    ds_create(&admin, &url, "secretds", &[], "top secret").await;
    ds_create(
        &admin,
        &url,
        "a-fork2",
        &[("stream-forked-from", "/v1/stream/secretds")],
        "",
    )
    .await;
    ds_append(&admin, &url, "a-fork2", " and more").await;
    // The positive control: a fork whose source the token may read.
    ds_create(&admin, &url, "a-src", &[], "open").await;
    ds_create(
        &admin,
        &url,
        "a-fork3",
        &[("stream-forked-from", "/v1/stream/a-src")],
        "",
    )
    .await;
    ds_append(&admin, &url, "a-fork3", " book").await;

    let (_, token) = issue(&url, json!([{"topics": "ds.a*", "ops": ["read"]}])).await;
    let reader = bearer_client(&token);
    let get = |path: &str, query: &str| reader.get(format!("{url}/v1/stream/{path}?{query}")).send();
    assert_eq!(get("secretds", "offset=-1").await.unwrap().status(), 403);
    for query in ["offset=-1", "offset=-1&live=long-poll", "offset=-1&live=sse"] {
        let r = get("a-fork2", query).await.unwrap();
        assert_eq!(r.status(), 403, "{query}");
        let text = r.text().await.unwrap();
        assert!(!text.contains("top secret"), "{query}: {text}");
        let r = get("a-fork3", query).await.unwrap();
        assert_eq!(r.status(), 200, "{query}");
        if query == "offset=-1" {
            assert_eq!(r.text().await.unwrap(), "open book");
        }
    }
    // With read on both streams of the chain, the fork reads in full.
    let (_, both) = issue(
        &url,
        json!([{"topics": "ds.a*", "ops": ["read"]}, {"topics": "ds.secretds", "ops": ["read"]}]),
    )
    .await;
    let r = bearer_client(&both)
        .get(format!("{url}/v1/stream/a-fork2?offset=-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "top secret and more");
}

/// Reads `resp` until `needle` appears (or fails after 10 s); returns the
/// response to go on reading.
async fn until_seen(
    resp: reqwest::Response,
    needle: &str,
) -> impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> {
    let mut body = Box::pin(resp.bytes_stream());
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen.contains(needle) {
        match tokio::time::timeout_at(deadline, body.next()).await {
            Ok(Some(Ok(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            other => panic!("{needle:?} never arrived ({other:?}); got {seen:?}"),
        }
    }
    body
}

async fn rest(
    mut body: impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin,
    within: Duration,
) -> String {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(deadline, body.next()).await {
        out.extend_from_slice(&chunk);
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_ends_its_open_live_reads() {
    let dir = tempfile::tempdir().unwrap();
    let on = auth_on(&dir);
    let node = Server::start("n1", dir.path(), free_port(), &args(&on));
    let url = node.url.clone();
    let admin = bearer_client(ADMIN);
    create_topic(&admin, &url, "t", 1).await;
    ds_create(&admin, &url, "live", &[], "").await;
    let (id, token) = issue(
        &url,
        json!([{"topics": "t", "ops": ["read"]}, {"topics": "ds.live", "ops": ["read"]}]),
    )
    .await;
    let reader = bearer_client(&token);
    let native = reader
        .get(format!("{url}/v1/topics/t/partitions/0/subscribe?offset=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(native.status(), 200);
    let ds = reader
        .get(format!("{url}/v1/stream/live?offset=-1&live=sse"))
        .send()
        .await
        .unwrap();
    assert_eq!(ds.status(), 200);

    // The positive control: both deliver while the token is valid.
    append(&admin, &url, "t", 0, "before-revoke").await;
    ds_append(&admin, &url, "live", "before-revoke").await;
    let native = until_seen(native, "before-revoke").await;
    let ds = until_seen(ds, "before-revoke").await;

    let r = admin.delete(format!("{url}/v1/tokens/{id}")).send().await.unwrap();
    assert_eq!(r.status(), 204);
    let r = reader.get(format!("{url}/v1/topics")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    append(&admin, &url, "t", 0, "after-revoke").await;
    ds_append(&admin, &url, "live", "after-revoke").await;

    // Past the native subscription's 15 s read wait: both must have ended.
    let (native, ds) = tokio::join!(rest(native, Duration::from_secs(20)), rest(ds, Duration::from_secs(20)));
    for (what, text) in [("native SSE", &native), ("Durable Streams SSE", &ds)] {
        assert!(
            !text.contains("after-revoke"),
            "{what} delivered a record after revocation: {text}"
        );
        assert!(
            text.contains("event: error"),
            "{what} did not end with an error event: {text:?}"
        );
    }
    assert!(native.contains("unauthenticated"), "{native}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarding_mark_from_a_client_is_ignored_and_peers_still_forward() {
    let dir = tempfile::tempdir().unwrap();
    let nodes: Vec<Server> = ["n1", "n2"]
        .iter()
        .map(|id| Server::start(id, dir.path(), free_port(), &[]))
        .collect();
    let c = reqwest::Client::new();
    create_topic(&c, &nodes[0].url, "fw", 4).await;
    // A partition n1 owns, asked of n2.
    let p = partition_owned_by(&c, &nodes[0].url, "fw", "n1")
        .await
        .expect("n1 owns a partition of 4");
    append(&c, &nodes[0].url, "fw", p, "hello").await;
    let via_n2 = format!("{}/v1/topics/fw/partitions/{p}/records", nodes[1].url);

    // The positive control: a plain request through the non-owner is
    // forwarded, and the owner accepts the forwarder's peer credential.
    let r: Value = c.get(&via_n2).send().await.unwrap().json().await.unwrap();
    assert_eq!(r["records"][0]["value"], "hello", "{r}");
    append(&c, &nodes[1].url, "fw", p, "again").await;

    // A client's mark: before, /health waited a second for the log and a
    // read through the non-owner was not forwarded (so refused); now the
    // mark is ignored.
    let started = Instant::now();
    for _ in 0..10 {
        let r = c
            .get(format!("{}/health", nodes[1].url))
            .header("sluice-forwarded", "18446744073709551615")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let ten_health = started.elapsed();
    assert!(
        ten_health < Duration::from_secs(5),
        "10 marked /health took {ten_health:?}"
    );
    for peer in [None, Some("guessed")] {
        let mut req = c.get(&via_n2).header("sluice-forwarded", "1");
        if let Some(p) = peer {
            req = req.header("sluice-peer", p);
        }
        let r: Value = req.send().await.unwrap().json().await.unwrap();
        assert_eq!(r["records"][1]["value"], "again", "a forged mark was honoured: {r}");
    }
    let metrics = |url: String| {
        let c = c.clone();
        async move {
            c.get(format!("{url}/metrics"))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let ignored = |text: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with("sluice_forward_marks_ignored_total"))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    };
    assert_eq!(ignored(&metrics(nodes[1].url.clone()).await), 12);
    assert_eq!(
        ignored(&metrics(nodes[0].url.clone()).await),
        0,
        "the owner refused a peer's forwarded request"
    );
    println!("10 /health with a forged mark: {ten_health:?} in all");
}

/// Opens a connection and sends half a request head.
fn half_head(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /v1/topics HTTP/1.1\r\nHost: x\r\n").unwrap();
    s
}

fn raw_get(port: u16, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out)
}

#[test]
fn health_and_ready_answer_while_idle_clients_hold_every_slot() {
    let dir = tempfile::tempdir().unwrap();
    let node = Server::start("n1", dir.path(), free_port(), &["--max-connections", "20"]);
    let held: Vec<TcpStream> = (0..20).map(|_| half_head(node.port)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    assert_eq!(http_status(node.port, "/health"), Some(200));
    assert_eq!(http_status(node.port, "/ready"), Some(200));
    let probes = started.elapsed();
    // Past the cap only probes are served; anything else is a clear 503.
    let (status, body) = raw_get(node.port, "/v1/topics");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("--max-connections"), "{body}");
    drop(held);
    // The positive control: once the slots are free, everything is served.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _) = raw_get(node.port, "/v1/topics");
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "slots not freed: {status}");
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("/health and /ready with every slot held: {probes:?}");
}

#[test]
fn a_body_trickled_in_forever_is_cut_off_at_the_body_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let node = Server::start("n1", dir.path(), free_port(), &["--request-body-timeout-sec", "3"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(create_topic(&reqwest::Client::new(), &node.url, "t", 1));
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
    s.write_all(
        b"POST /v1/topics/t/partitions/0/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_millis(900))).unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    // One byte a second: never a gap of --read-timeout-sec (30 s).
    let ended = loop {
        if s.write_all(b"1\r\n \r\n").is_err() {
            break started.elapsed();
        }
        let mut buf = [0u8; 1024];
        match s.read(&mut buf) {
            Ok(0) => break started.elapsed(),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break started.elapsed(),
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the trickled body is still open"
        );
    };
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 400"), "{answer}");
    // The positive control: a body sent at once is appended.
    rt.block_on(append(&reqwest::Client::new(), &node.url, "t", 0, "whole"));
    println!("a trickled body was cut off after {ended:?} (deadline 3 s)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_sse_subscribers_each_get_the_record_and_cost_little_memory() {
    const SUBSCRIBERS: usize = 2000;
    let dir = tempfile::tempdir().unwrap();
    // Every subscriber comes from 127.0.0.1: lift the per-address cap.
    let node = Server::start("n1", dir.path(), free_port(), &["--max-connections-per-ip", "4096"]);
    let c = reqwest::Client::new();
    create_topic(&c, &node.url, "fan", 1).await;
    let pid = node.child.id();
    let before = rss_kib(pid);
    let port = node.port;
    let mut subscribers = Vec::with_capacity(SUBSCRIBERS);
    for _ in 0..SUBSCRIBERS {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        tokio::io::AsyncWriteExt::write_all(
            &mut s,
            b"GET /v1/topics/fan/partitions/0/subscribe?offset=0 HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .await
        .unwrap();
        subscribers.push(s);
    }
    // Every subscription answered its head.
    let mut heads = Vec::with_capacity(SUBSCRIBERS);
    for mut s in subscribers {
        heads.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(30), tokio::io::AsyncReadExt::read(&mut s, &mut buf))
                .await
                .expect("head")
                .unwrap();
            assert!(
                buf[..n].starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&buf[..n])
            );
            s
        }));
    }
    let mut open = Vec::with_capacity(SUBSCRIBERS);
    for h in heads {
        open.push(h.await.unwrap());
    }
    let during = rss_kib(pid);
    append(&c, &node.url, "fan", 0, "to-everyone").await;
    let mut got = Vec::with_capacity(SUBSCRIBERS);
    for mut s in open {
        got.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut buf = vec![0u8; 4096];
            while !String::from_utf8_lossy(&seen).contains("to-everyone") {
                let n = tokio::time::timeout(Duration::from_secs(30), tokio::io::AsyncReadExt::read(&mut s, &mut buf))
                    .await
                    .expect("the record")
                    .unwrap();
                assert!(n > 0, "closed before the record");
                seen.extend_from_slice(&buf[..n]);
            }
        }));
    }
    for g in got {
        g.await.unwrap();
    }
    let per = (during.saturating_sub(before)) as f64 / SUBSCRIBERS as f64;
    println!(
        "{SUBSCRIBERS} SSE subscribers: RSS {before} KiB -> {during} KiB, {per:.1} KiB per subscriber; every one got the record"
    );
    assert!(per < 256.0, "{per:.1} KiB per subscriber");
}
