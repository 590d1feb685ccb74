//! The KIP-848 consumer protocol (`group.protocol=consumer`) with a real
//! client: confluent-kafka's librdkafka (≥ 2.10) against a 2-node
//! in-process cluster (two `Node`s on shared in-memory stores, each with
//! its own HTTP and Kafka listener), driven by `tests/kafka/kip848_client.py`.
//!
//! Skips when confluent-kafka is missing, and fails when `CI` is set.

mod support;

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use support::kafka::{installed, repo, Cluster};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

async fn create(c: &Cluster, topic: &str, partitions: u32) {
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{}/v1/topics", c.urls[0]))
        .json(&json!({"name": topic, "partitions": partitions}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    for url in &c.urls {
        assert!(support::http::wait_open(&client, url, topic).await);
    }
}

/// `n` records `{tag}-{i}`, spread over `partitions` partitions, over HTTP.
async fn append(c: &Cluster, topic: &str, tag: &str, n: usize, partitions: u32) -> Vec<String> {
    let values: Vec<String> = (0..n).map(|i| format!("{tag}-{i}")).collect();
    let records: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"key": v, "value": v, "partition": (i as u32) % partitions}))
        .collect();
    let r: Value = reqwest::Client::new()
        .post(format!("{}/v1/topics/{topic}/records", c.urls[0]))
        .json(&json!({ "records": records }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(r["offsets"].is_array(), "append failed: {r}");
    values
}

fn confluent_installed() -> bool {
    let mut probe = std::process::Command::new("python3");
    probe.env("PYTHONPATH", repo(".services/python")).args([
        "-c",
        "import confluent_kafka; assert confluent_kafka.libversion()[1] >= 0x020a0000",
    ]);
    installed("confluent-kafka (librdkafka >= 2.10)", &mut probe)
}

/// One member process and the events it printed so far.
struct MemberProc {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    events: Arc<std::sync::Mutex<Vec<Value>>>,
}

impl MemberProc {
    fn start(c: &Cluster, topic: &str, group: &str, name: &str) -> MemberProc {
        let mut child = tokio::process::Command::new("python3")
            .env("PYTHONPATH", repo(".services/python"))
            .arg(repo("tests/kafka/kip848_client.py"))
            .args(["member", &c.kafkas[0], topic, group, name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = child.stdout.take().unwrap();
        let events = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = events.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    sink.lock().unwrap().push(v);
                }
            }
        });
        MemberProc { child, stdin, events }
    }

    fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap().clone()
    }

    /// The partitions it holds now (assignments minus revocations).
    fn holds(&self) -> BTreeSet<u64> {
        let mut held = BTreeSet::new();
        for e in self.events() {
            let parts = e["partitions"].as_array().cloned().unwrap_or_default();
            let parts = parts.iter().filter_map(|p| p.as_u64());
            match e["event"].as_str() {
                Some("assigned") => held.extend(parts),
                Some("revoked") => {
                    for p in parts {
                        held.remove(&p);
                    }
                }
                _ => {}
            }
        }
        held
    }

    fn values(&self) -> Vec<String> {
        self.events()
            .iter()
            .filter(|e| e["event"] == "record")
            .map(|e| e["value"].as_str().unwrap().to_string())
            .collect()
    }

    /// Commit, leave, exit.
    async fn stop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"stop\n").await;
        }
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("member did not stop")
            .unwrap();
        assert!(status.success(), "member exited with {status}");
    }
}

async fn until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn all_values(members: &[&MemberProc]) -> Vec<String> {
    members.iter().flat_map(|m| m.values()).collect()
}

/// librdkafka names the assigned partitions by topic id and resolves them
/// through Metadata (v10+ carries the ids).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kip848_members_split_rebalance_commit_and_resume() {
    if !confluent_installed() {
        return;
    }
    let c = Cluster::start().await;
    let (topic, group) = ("kip848", "kip848-group");
    create(&c, topic, 4).await;
    let mut sent = append(&c, topic, "a", 40, 4).await;

    // Two members split the four partitions.
    let mut m1 = MemberProc::start(&c, topic, group, "m1");
    let mut m2 = MemberProc::start(&c, topic, group, "m2");
    until("m1 and m2 to hold two partitions each", 60, || {
        m1.holds().len() == 2 && m2.holds().len() == 2 && m1.holds().is_disjoint(&m2.holds())
    })
    .await;
    until("the first 40 records", 60, || {
        all_values(&[&m1, &m2]).iter().collect::<BTreeSet<_>>().len() >= 40
    })
    .await;

    // A third member joins: assignment moves to it.
    let m3 = MemberProc::start(&c, topic, group, "m3");
    until("m3 to get a partition", 60, || !m3.holds().is_empty()).await;
    sent.extend(append(&c, topic, "b", 40, 4).await);
    until("the next 40 records", 60, || {
        all_values(&[&m1, &m2, &m3]).iter().collect::<BTreeSet<_>>().len() >= 80
    })
    .await;

    // m1 leaves (committing everything it read): its partitions move.
    m1.stop().await;
    until("m2 and m3 to hold all four partitions", 60, || {
        let mut all = m2.holds();
        all.extend(m3.holds());
        all.len() == 4
    })
    .await;
    sent.extend(append(&c, topic, "c", 40, 4).await);
    until("all 120 records", 60, || {
        all_values(&[&m1, &m2, &m3]).iter().collect::<BTreeSet<_>>().len() >= 120
    })
    .await;

    // Every record was read; each commits before the next poll, so a
    // record is read again only if a commit of its reader was refused (a
    // rebalance moved its partition first).
    let seen = all_values(&[&m1, &m2, &m3]);
    let distinct: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(distinct.len(), sent.len(), "every record read");
    let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
    for v in &seen {
        *counts.entry(v).or_default() += 1;
    }
    let duplicates: usize = counts.values().map(|n| n - 1).sum();
    let refused = [&m1, &m2, &m3]
        .iter()
        .flat_map(|m| m.events())
        .filter(|e| e["event"] == "commit_failed")
        .count();
    eprintln!(
        "kip848: {} reads, {duplicates} duplicates, {refused} refused commits",
        seen.len()
    );
    assert!(
        duplicates <= refused,
        "{duplicates} duplicates but only {refused} refused commits"
    );

    // Everyone leaves; a new member resumes from the committed offsets.
    let mut m3 = m3;
    m2.stop().await;
    m3.stop().await;
    let fresh = append(&c, topic, "d", 8, 4).await;
    let mut m4 = MemberProc::start(&c, topic, group, "m4");
    until("m4 to read the 8 new records", 60, || m4.values().len() >= 8).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got: BTreeSet<String> = m4.values().into_iter().collect();
    assert_eq!(
        got,
        fresh.into_iter().collect::<BTreeSet<_>>(),
        "m4 resumed at the commits"
    );
    m4.stop().await;
}
