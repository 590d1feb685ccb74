//! A Durable Streams idempotent producer across a `kill -9` of the stream's
//! owner, on three real `sluice serve` processes sharing one data dir.
//!
//! The producer appends through the owner, the owner is killed, and the
//! producer retries the same `Producer-Seq` (and `Stream-Seq`) through
//! another node once the stream has moved: the record is stored exactly
//! once and the retry is answered as a duplicate, because the producer's
//! state is recovered with the stream (from the WAL and the data objects)
//! rather than kept by the node that took the request. Two cases: the
//! append was acknowledged before the kill, and the reply was never read
//! (the producer cannot know whether it landed). A new sequence after the
//! retry is stored (the positive control). Needs no services.

mod support;

use reqwest::{Client, StatusCode};
use serde_json::Value;
use std::io::Write as _;
use std::time::{Duration, Instant};
use support::process::{free_port, Server};

const PRODUCER: &str = "writer-1";

fn cluster(dir: &std::path::Path) -> Vec<Server> {
    ["n1", "n2", "n3"]
        .iter()
        .map(|id| Server::start(id, dir, free_port(), &["--flush-interval-sec", "1"]))
        .collect()
}

fn topic(path: &str) -> String {
    format!("ds.{path}")
}

async fn create(c: &Client, url: &str, path: &str) {
    let r = c
        .put(format!("{url}/v1/stream/{path}"))
        .header("content-type", "text/plain")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED, "{}", r.text().await.unwrap());
}

/// The stream's owner once it is placed, polled through `url`.
async fn wait_owner(c: &Client, url: &str, path: &str, not: Option<&str>) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(o) = support::http::owner_of(c, url, &topic(path), 0)
            .await
            .filter(|o| Some(o.as_str()) != not)
        {
            return o;
        }
        assert!(Instant::now() < deadline, "{path} was not (re)placed in time");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn append_req(c: &Client, url: &str, path: &str, seq: u64, body: &str) -> reqwest::RequestBuilder {
    c.post(format!("{url}/v1/stream/{path}"))
        .header("content-type", "text/plain")
        .header("producer-id", PRODUCER)
        .header("producer-epoch", "0")
        .header("producer-seq", seq.to_string())
        .header("stream-seq", format!("{seq:08}"))
        .body(body.to_string())
}

/// An answer to a producer append: status and the headers that matter.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    next: String,
    producer_seq: String,
}

/// Append through `url` until it is answered with anything but 503 or a
/// connection error (the stream is moving): returns the answer and the
/// number of tries.
async fn append_retrying(c: &Client, url: &str, path: &str, seq: u64, body: &str) -> (Answer, u32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tries = 0;
    loop {
        tries += 1;
        match append_req(c, url, path, seq, body).send().await {
            Ok(r) if r.status() != StatusCode::SERVICE_UNAVAILABLE => {
                let h = |k: &str| {
                    r.headers()
                        .get(k)
                        .map_or(String::new(), |v| v.to_str().unwrap().to_string())
                };
                let a = Answer {
                    status: r.status(),
                    next: h("stream-next-offset"),
                    producer_seq: h("producer-seq"),
                };
                return (a, tries);
            }
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "append seq {seq} through {url} never answered"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The stream's whole content, read through `url`.
async fn content(c: &Client, url: &str, path: &str) -> String {
    let r = c.get(format!("{url}/v1/stream/{path}?offset=-1")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.text().await.unwrap()
}

/// Sends an append to `port` over a raw connection and returns without
/// reading the reply (the connection is kept open so the request is not
/// cancelled by a close).
fn append_unread(port: u16, path: &str, seq: u64, body: &str) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST /v1/stream/{path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\n\
         Producer-Id: {PRODUCER}\r\nProducer-Epoch: 0\r\nProducer-Seq: {seq}\r\n\
         Stream-Seq: {seq:08}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

fn index_of(nodes: &[Server], id: &str) -> usize {
    nodes.iter().position(|n| n.node_id == id).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn retries_through_another_node_after_kill_9_of_the_owner_store_each_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = cluster(dir.path());
    let c = Client::builder().timeout(Duration::from_secs(20)).build().unwrap();

    // Case 1: acknowledged, then the owner is killed.
    let path = "idem-acked";
    create(&c, &nodes[0].url, path).await;
    let a = index_of(&nodes, &wait_owner(&c, &nodes[0].url, path, None).await);
    let b = (a + 1) % nodes.len();
    let first = append_req(&c, &nodes[a].url, path, 0, "r0;").send().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    // Long enough for a flush: seq 0 is recovered from a data object.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let acked = append_req(&c, &nodes[a].url, path, 1, "r1;").send().await.unwrap();
    assert_eq!(acked.status(), StatusCode::OK);
    let acked_next = acked.headers()["stream-next-offset"].to_str().unwrap().to_string();
    let killed = nodes[a].node_id.clone();
    nodes[a].kill9();
    let moved_to = index_of(&nodes, &wait_owner(&c, &nodes[b].url, path, Some(&killed)).await);
    // The retry goes through the node that does not own the stream now (it
    // is forwarded), the older retry through the new owner.
    let other = (0..nodes.len()).find(|i| *i != a && *i != moved_to).unwrap();
    let (retry1, tries1) = append_retrying(&c, &nodes[other].url, path, 1, "r1;").await;
    let (retry0, tries0) = append_retrying(&c, &nodes[moved_to].url, path, 0, "r0;").await;
    eprintln!(
        "acked case: owner {killed} killed, stream moved to {}; retry of seq 1 through {}: {retry1:?} after {tries1} tries; retry of seq 0 through the new owner: {retry0:?} after {tries0} tries",
        nodes[moved_to].node_id, nodes[other].node_id
    );
    assert_eq!(retry1.status, StatusCode::NO_CONTENT, "the retry is a duplicate");
    assert_eq!(retry1.producer_seq, "1");
    assert_eq!(retry1.next, acked_next, "the duplicate names the original end");
    assert_eq!(
        retry0.status,
        StatusCode::NO_CONTENT,
        "an older retry is a duplicate too"
    );
    assert_eq!(retry0.producer_seq, "1", "answered with the highest sequence accepted");
    let (control, _) = append_retrying(&c, &nodes[b].url, path, 2, "r2;").await;
    assert_eq!(control.status, StatusCode::OK, "a new sequence is stored: {control:?}");
    let got = content(&c, &nodes[b].url, path).await;
    eprintln!("acked case: stream content {got:?}");
    for n in &nodes {
        for line in n.log().lines().filter(|l| l.contains("WAL takeover finished")) {
            eprintln!("acked case: {}: {line}", n.node_id);
        }
    }
    assert_eq!(got, "r0;r1;r2;", "each record stored exactly once");

    let durable = describe(&c, &nodes[b].url, "idem-acked").await;
    assert!(
        durable.get("producers").is_none() && durable.get("last_seq").is_none(),
        "no writer state in the metadata: {durable}"
    );

    // Case 2: the reply is never read; the owner is killed right after.
    nodes[a] = nodes[a].restart();
    let path = "idem-unread";
    create(&c, &nodes[0].url, path).await;
    let a2 = index_of(&nodes, &wait_owner(&c, &nodes[0].url, path, None).await);
    let first = append_req(&c, &nodes[a2].url, path, 0, "u0;").send().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let conn = append_unread(nodes[a2].port, path, 1, "u1;");
    // Give the append a moment to reach the WAL (or not: either way the
    // retry must leave exactly one copy).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = nodes[a2].node_id.clone();
    nodes[a2].kill9();
    drop(conn);
    let moved_to = wait_owner(&c, &nodes[(a2 + 1) % 3].url, path, Some(&killed)).await;
    let b2 = (0..nodes.len())
        .find(|i| *i != a2 && nodes[*i].node_id != moved_to)
        .unwrap();
    let (retry, tries) = append_retrying(&c, &nodes[b2].url, path, 1, "u1;").await;
    eprintln!(
        "unread case: owner {killed} killed, stream moved to {moved_to}; retry of seq 1 through {}: {retry:?} after {tries} tries ({})",
        nodes[b2].node_id,
        if retry.status == StatusCode::NO_CONTENT {
            "it had landed"
        } else {
            "it had not landed"
        }
    );
    assert!(
        matches!(retry.status, StatusCode::OK | StatusCode::NO_CONTENT),
        "stored now or a duplicate: {retry:?}"
    );
    assert_eq!(retry.producer_seq, "1");
    let (again, _) = append_retrying(&c, &nodes[b2].url, path, 1, "u1;").await;
    assert_eq!(again.status, StatusCode::NO_CONTENT, "a second retry is a duplicate");
    let (control, _) = append_retrying(&c, &nodes[b2].url, path, 2, "u2;").await;
    assert_eq!(control.status, StatusCode::OK, "{control:?}");
    let got = content(&c, &nodes[b2].url, path).await;
    eprintln!("unread case: stream content {got:?}");
    assert_eq!(got, "u0;u1;u2;", "each record stored exactly once");
    // A Stream-Seq retry without the producer is refused, not stored.
    let r = c
        .post(format!("{}/v1/stream/{path}", nodes[b2].url))
        .header("content-type", "text/plain")
        .header("stream-seq", format!("{:08}", 2))
        .body("dup")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::CONFLICT,
        "Stream-Seq state moved with the stream"
    );
    assert_eq!(content(&c, &nodes[b2].url, path).await, "u0;u1;u2;");

    // Case 3: the same append sent through both live nodes at once, ten
    // times each: one is stored, the others are duplicates.
    let live: Vec<usize> = (0..nodes.len()).filter(|i| *i != a2).collect();
    let sends = (0..20).map(|i| {
        let url = nodes[live[i % live.len()]].url.clone();
        let c = c.clone();
        async move { append_retrying(&c, &url, path, 3, "u3;").await.0.status }
    });
    let statuses = futures::future::join_all(sends).await;
    let stored = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    let dups = statuses.iter().filter(|s| **s == StatusCode::NO_CONTENT).count();
    eprintln!("concurrent case: 20 sends through 2 nodes: {stored} stored, {dups} duplicates");
    assert_eq!((stored, dups), (1, 19), "{statuses:?}");
    assert_eq!(content(&c, &nodes[live[0]].url, path).await, "u0;u1;u2;u3;");
}

/// The stream's `config.durable`, as `url` sees it.
async fn describe(c: &Client, url: &str, path: &str) -> Value {
    let d: Value = c
        .get(format!("{url}/v1/topics/{}", topic(path)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    d["config"]["durable"].clone()
}
