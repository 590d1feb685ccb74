//! A metadata outage on real processes: two `sluice serve` nodes on their own
//! DynamoDB Local, which the test freezes with `SIGSTOP` (a blackholed store:
//! requests are accepted by the kernel and never answered, unlike a refused
//! connection). While it is frozen, appends to open partitions go on being
//! acknowledged, topic creation answers 503 fast, and nobody is fenced; once
//! it thaws, every acknowledged record reads back.
//!
//! The DynamoDB Local here is the test's own process on its own port, so
//! freezing it disturbs no other test. It needs the jar that
//! `scripts/services.sh` installs, named by `SLUICE_TEST_DYNAMODB_JAR` (in
//! `.services/env`); without it the test skips, or fails under `CI`.

mod support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::process::{free_port, Server};

/// Seconds one request to the metadata log may take (the nodes' flag).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
const PARTITIONS: u64 = 4;

/// A DynamoDB Local process of this test's own; killed on drop (also when it
/// is stopped: SIGKILL ends a stopped process).
struct DynamoLocal {
    child: Child,
    endpoint: String,
}

impl DynamoLocal {
    fn start(jar: &str, dir: &Path) -> DynamoLocal {
        let port = free_port();
        let libdir = Path::new(jar).parent().unwrap().join("DynamoDBLocal_lib");
        let log = std::fs::File::create(dir.join("dynamodb.log")).unwrap();
        let child = Command::new("java")
            .arg(format!("-Djava.library.path={}", libdir.display()))
            .args([
                "-jar",
                jar,
                "-inMemory",
                "-disableTelemetry",
                "-port",
                &port.to_string(),
            ])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn java for DynamoDB Local");
        let ddb = DynamoLocal {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while support::process::http_status(port, "/").is_none() {
            assert!(
                Instant::now() < deadline,
                "DynamoDB Local did not come up on port {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        ddb
    }

    fn signal(&self, signal: i32) {
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, signal) }, 0);
    }
}

impl Drop for DynamoLocal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `POST /v1/topics`: its status and how long the answer took.
async fn create_topic(client: &reqwest::Client, url: &str, name: &str) -> (u16, Duration) {
    let started = Instant::now();
    let r = client
        .post(format!("{url}/v1/topics"))
        .json(&json!({"name": name, "partitions": 1}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), started.elapsed())
}

/// Append one record; its offset if acknowledged.
async fn append(client: &reqwest::Client, url: &str, p: u64, value: &str) -> Option<u64> {
    let r = client
        .post(format!("{url}/v1/topics/orders/partitions/{p}/records"))
        .json(&json!({"records": [{"value": value}]}))
        .send()
        .await
        .ok()?;
    if r.status() != 200 {
        return None;
    }
    r.json::<Value>().await.ok()?["base_offset"].as_u64()
}

async fn admin_nodes(client: &reqwest::Client, url: &str) -> Vec<Value> {
    let v: Value = client
        .get(format!("{url}/admin/nodes"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["nodes"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_dynamodb_fails_metadata_changes_fast_while_appends_go_on_and_nobody_is_fenced() {
    let Some(jar) = support::service("SLUICE_TEST_DYNAMODB_JAR") else {
        return;
    };
    // DynamoDB Local takes any credentials, but the SDK must find some
    // without probing instance metadata.
    for (k, v) in [("AWS_ACCESS_KEY_ID", "sluice"), ("AWS_SECRET_ACCESS_KEY", "sluice")] {
        if std::env::var_os(k).is_none() {
            std::env::set_var(k, v);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let ddb = DynamoLocal::start(&jar, dir.path());
    let metadata = format!("dynamodb://{}", support::unique("sluice-outage-"));
    let timeout = REQUEST_TIMEOUT.as_secs().to_string();
    let flags = [
        "--metadata",
        &metadata,
        "--dynamodb-endpoint",
        &ddb.endpoint,
        "--metadata-request-timeout-sec",
        &timeout,
        "--flush-interval-sec",
        "2",
    ];
    let init = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("init")
        .args(["--node-id", "init", "--data-dir", dir.path().to_str().unwrap()])
        .args(flags)
        .output()
        .unwrap();
    assert!(init.status.success(), "init: {}", String::from_utf8_lossy(&init.stderr));
    let nodes = [
        Server::start("a", dir.path(), free_port(), &flags),
        Server::start("b", dir.path(), free_port(), &flags),
    ];
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let (status, _) = create_topic(&client, &nodes[0].url, "orders-probe").await;
    assert_eq!(status, 201);
    let r = client
        .post(format!("{}/v1/topics", nodes[0].url))
        .json(&json!({"name": "orders", "partitions": PARTITIONS}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert!(support::http::wait_open(&client, &nodes[0].url, "orders").await);
    let mut acked = BTreeMap::new();
    for i in 0..PARTITIONS * 4 {
        let value = format!("before-{i}");
        let offset = append(&client, &nodes[(i % 2) as usize].url, i % PARTITIONS, &value)
            .await
            .expect("appends are acknowledged before the outage");
        acked.insert((i % PARTITIONS, offset), value);
    }

    // Freeze the store. The first metadata change after a healthy period
    // waits at most one request timeout, the later ones not at all.
    ddb.signal(libc::SIGSTOP);
    let frozen = Instant::now();
    let (status, first) = create_topic(&client, &nodes[0].url, "during-0").await;
    assert_eq!(status, 503, "topic creation with the store frozen");
    assert!(
        first < REQUEST_TIMEOUT + Duration::from_secs(1),
        "the first topic creation answered after {first:?}"
    );
    let mut later = Vec::new();
    let mut during = 0usize;
    let mut refused = 0usize;
    let mut i = 0u64;
    // Two node timeouts (4 s each) and more: nobody may be fenced.
    while frozen.elapsed() < Duration::from_secs(10) {
        let p = i % PARTITIONS;
        let value = format!("during-{i}");
        match append(&client, &nodes[(i % 2) as usize].url, p, &value).await {
            Some(offset) => {
                acked.insert((p, offset), value);
                during += 1;
            }
            None => refused += 1,
        }
        if i.is_multiple_of(20) {
            let (status, took) = create_topic(&client, &nodes[(i % 2) as usize].url, &format!("during-{i}")).await;
            assert_eq!(status, 503, "topic creation with the store frozen");
            later.push(took);
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let slowest_later = later.iter().max().copied().unwrap_or_default();
    assert!(
        slowest_later < Duration::from_secs(2),
        "a topic creation answered after {slowest_later:?} with the outage known"
    );
    assert_eq!(refused, 0, "appends to open partitions were refused during the outage");

    ddb.signal(libc::SIGCONT);
    let thawed = Instant::now();
    loop {
        let (status, _) = create_topic(&client, &nodes[0].url, "after").await;
        if status == 201 {
            break;
        }
        assert!(
            thawed.elapsed() < Duration::from_secs(30),
            "topic creation never recovered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let recovered = thawed.elapsed();
    // Past a node timeout after the thaw too: the heartbeats that land first
    // must not make anyone look silent.
    tokio::time::sleep(Duration::from_secs(6)).await;
    for n in &nodes {
        assert_eq!(
            support::process::http_status(n.port, "/ready"),
            Some(200),
            "node {}",
            n.node_id
        );
    }
    let rows = admin_nodes(&client, &nodes[0].url).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r["fenced"] == false), "nobody is fenced: {rows:?}");

    let mut read_back = 0;
    for p in 0..PARTITIONS {
        let stored: BTreeMap<u64, String> = support::http::read_all(&client, &nodes[1].url, "orders", p)
            .await
            .into_iter()
            .collect();
        for ((_, offset), value) in acked.range((p, 0)..(p + 1, 0)) {
            assert_eq!(stored.get(offset), Some(value), "partition {p} offset {offset}");
            read_back += 1;
        }
    }
    assert_eq!(read_back, acked.len());
    eprintln!(
        "metadata outage (DynamoDB Local frozen {:?}): first topic creation 503 after {first:?}, \
         {} later ones 503 after at most {slowest_later:?}; {during} appends acknowledged during the freeze, \
         none refused; topic creation back {recovered:?} after the thaw; nobody fenced; \
         {read_back} acknowledged records read back",
        thawed - frozen,
        later.len(),
    );
}
