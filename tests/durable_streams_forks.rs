//! Durable Streams forks on a real `sluice serve` process: a fork reads its
//! source's prefix (here with a binary sub-offset) and then its own records;
//! its topic holds only its own records (what Kafka and the native API
//! see); a source deleted while a fork reads it answers 410; and all of it
//! survives a crash and restart, because it lives in the metadata log and
//! the WAL like any stream. Needs no services.

mod support;

use reqwest::{Client, StatusCode};
use support::process::{free_port, Server};

async fn put(c: &Client, url: &str, headers: &[(&str, &str)], body: &'static str) -> reqwest::Response {
    let mut req = c.put(url).header("content-type", "text/plain").body(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

async fn post(c: &Client, url: &str, body: &'static str) -> reqwest::Response {
    let r = c
        .post(url)
        .header("content-type", "text/plain")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    r
}

async fn read(c: &Client, url: &str) -> (StatusCode, String) {
    let r = c.get(format!("{url}?offset=-1")).send().await.unwrap();
    (r.status(), r.text().await.unwrap())
}

async fn head(c: &Client, url: &str) -> StatusCode {
    c.head(url).send().await.unwrap().status()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_reads_its_source_prefix_and_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = Server::start("n1", dir.path(), free_port(), &[]);
    let c = Client::new();
    let src = format!("{}/v1/stream/forks/src", node.url);
    let fork = format!("{}/v1/stream/forks/fork", node.url);

    let r = put(&c, &src, &[], "abc").await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let after_abc = r.headers()["stream-next-offset"].to_str().unwrap().to_string();
    post(&c, &src, "def").await;
    // The fork: "abc", then the first 2 bytes of "def", then its own.
    let r = put(
        &c,
        &fork,
        &[
            ("stream-forked-from", "/v1/stream/forks/src"),
            ("stream-fork-offset", &after_abc),
            ("stream-fork-sub-offset", "2"),
        ],
        "",
    )
    .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    post(&c, &fork, "XY").await;
    post(&c, &src, "ghi").await;
    assert_eq!(read(&c, &fork).await, (StatusCode::OK, "abcdeXY".to_string()));
    assert_eq!(read(&c, &src).await, (StatusCode::OK, "abcdefghi".to_string()));
    // Its topic holds only what was appended to it.
    assert_eq!(
        support::http::values(&c, &node.url, "ds.forks_2Ffork").await,
        vec!["XY"]
    );

    // Deleting the source only marks it while the fork reads it.
    let r = c.delete(&src).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(head(&c, &src).await, StatusCode::GONE);

    node.kill9();
    let node = node.restart();
    // Its streams reopen after the restart (503, retry-after, meanwhile).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut r = read(&c, &fork).await;
    while r.0 == StatusCode::SERVICE_UNAVAILABLE && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        r = read(&c, &fork).await;
    }
    assert_eq!(r, (StatusCode::OK, "abcdeXY".to_string()));
    assert_eq!(head(&c, &src).await, StatusCode::GONE);
    let r = put(&c, &src, &[], "").await;
    assert_eq!(r.status(), StatusCode::CONFLICT, "a marked stream is not created again");

    // Its last fork gone, the source goes too.
    let r = c.delete(&fork).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(head(&c, &fork).await, StatusCode::NOT_FOUND);
    assert_eq!(head(&c, &src).await, StatusCode::NOT_FOUND);
    drop(node);
}
