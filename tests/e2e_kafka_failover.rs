//! An idempotent librdkafka producer (confluent-kafka) writes through a
//! `kill -9` of a partition owner, across two real `sluice serve` processes
//! sharing one data dir: every delivered message is read back exactly once,
//! at the offset it was acknowledged with, in production order per partition.
//!
//! Skips when confluent-kafka is not installed in `.services/python`
//! (`scripts/services.sh install`) — and fails when `CI` is set.

mod support;

use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::process::{free_port, Server};
use tokio::io::{AsyncBufReadExt, BufReader};

const TOPIC: &str = "events";
const PARTITIONS: u64 = 2;
const MESSAGES: u64 = 6000;
const RATE: u64 = 800;

fn python_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".services/python")
}

fn have_confluent_kafka() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import confluent_kafka"])
        .env("PYTHONPATH", python_path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("confluent-kafka is missing but CI is set: run scripts/services.sh install");
        }
        eprintln!("skipping: confluent-kafka is missing (scripts/services.sh install installs it)");
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_producer_writes_through_a_kill_9_exactly_once() {
    if !have_confluent_kafka() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut nodes: Vec<Server> = ["n1", "n2"]
        .iter()
        .map(|id| Server::start(id, dir.path(), free_port(), &["--flush-interval-sec", "1"]))
        .collect();
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{}/v1/topics", nodes[0].url))
        .json(&json!({"name": TOPIC, "partitions": PARTITIONS}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert!(support::http::wait_open(&client, &nodes[0].url, TOPIC).await);

    let bootstrap = nodes.iter().map(|n| n.kafka_addr.clone()).collect::<Vec<_>>().join(",");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/idempotent_failover.py");
    let mut child = tokio::process::Command::new("python3")
        .arg(script)
        .args([&bootstrap, TOPIC, &MESSAGES.to_string(), &RATE.to_string()])
        .env("PYTHONPATH", python_path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();

    // Kill the owner of partition 0 once a third of the messages are in.
    let mut killed: Option<(String, Instant)> = None;
    let mut result: Option<Value> = None;
    let deadline = Instant::now() + Duration::from_secs(240);
    while let Some(line) = tokio::time::timeout_at(deadline.into(), lines.next_line())
        .await
        .expect("the producer finished in time")
        .unwrap()
    {
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}"));
        if let Some(n) = v["progress"].as_u64() {
            if killed.is_none() && n >= MESSAGES / 3 {
                let owner = support::http::owner_of(&client, &nodes[0].url, TOPIC, 0)
                    .await
                    .expect("partition 0 is open");
                let victim = nodes.iter_mut().find(|s| s.node_id == owner).unwrap();
                victim.kill9();
                eprintln!("killed {owner} (owner of partition 0) after {n} deliveries");
                killed = Some((owner, Instant::now()));
            }
        } else {
            result = Some(v);
        }
    }
    assert!(child.wait().await.unwrap().success(), "the producer script failed");
    let (victim, killed_at) = killed.expect("the owner was killed mid-run");
    let result = result.expect("the producer printed its deliveries");
    assert_eq!(result["failed"], json!([]), "librdkafka gave up on messages");
    assert_eq!(result["unflushed"], 0);
    let delivered = result["delivered"].as_array().unwrap();
    assert_eq!(delivered.len() as u64, MESSAGES, "every message was delivered");
    eprintln!(
        "all {MESSAGES} delivered; {:.1} s after the kill",
        killed_at.elapsed().as_secs_f64()
    );

    // Read back through the survivor.
    let survivor = nodes.iter().find(|s| s.node_id != victim).unwrap();
    assert!(support::http::wait_open(&client, &survivor.url, TOPIC).await);
    let mut acked: BTreeMap<(u64, u64), String> = BTreeMap::new();
    for d in delivered {
        let key = (d[0].as_u64().unwrap(), d[1].as_u64().unwrap());
        let prev = acked.insert(key, d[2].as_str().unwrap().to_string());
        assert!(prev.is_none(), "offset {key:?} acknowledged twice");
    }
    let mut seen = HashSet::new();
    for p in 0..PARTITIONS {
        let records = support::http::read_all(&client, &survivor.url, TOPIC, p).await;
        let mut last: Option<u64> = None;
        for (offset, value) in &records {
            assert!(
                seen.insert(value.clone()),
                "{value} stored twice (again at {p}/{offset})"
            );
            let i: u64 = value.trim_start_matches('m').parse().unwrap();
            assert!(last.is_none_or(|l| l < i), "{value} at {p}/{offset} is out of order");
            last = Some(i);
            if let Some(expected) = acked.get(&(p, *offset)) {
                assert_eq!(expected, value, "acknowledged offset {p}/{offset} holds another record");
            }
        }
        for ((ap, offset), value) in acked.range((p, 0)..(p + 1, 0)) {
            assert!(
                records.iter().any(|(o, v)| o == offset && v == value),
                "acknowledged {value} at {ap}/{offset} is missing"
            );
        }
    }
    assert_eq!(seen.len() as u64, MESSAGES, "exactly the delivered messages are stored");
    let metrics = client
        .get(format!("{}/metrics", survivor.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let duplicates = metrics
        .lines()
        .find(|l| l.starts_with("sluice_producer_duplicates_total"))
        .unwrap_or("sluice_producer_duplicates_total 0 (none retried)");
    eprintln!("survivor: {duplicates}");
}
