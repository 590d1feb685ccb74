//! Records cross between the Durable Streams protocol, Kafka and the native
//! HTTP API on one stream, on a real `sluice serve` process:
//!
//! - appended with the Durable Streams client (`@durable-streams/client`,
//!   both plain appends and its idempotent producer) → read by a Kafka
//!   consumer (kafka-python) and over the native API;
//! - produced by a Kafka producer and appended over the native API → read
//!   with the Durable Streams client.
//!
//! Skips (with an eprintln) when node, the client or kafka-python is not
//! installed (`scripts/services.sh install`), and fails when `CI` is set.

mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::process::{free_port, Server};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn missing(what: &str) -> bool {
    if std::env::var_os("CI").is_some() {
        panic!("{what} is not installed but CI is set: run scripts/services.sh install");
    }
    eprintln!("skipping: {what} is not installed (scripts/services.sh install)");
    true
}

fn node_modules() -> PathBuf {
    root().join(".services/npm/node_modules")
}

fn python_path() -> String {
    let ours = root().join(".services/python");
    match std::env::var("PYTHONPATH") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", ours.display()),
        _ => ours.display().to_string(),
    }
}

fn clients_installed() -> bool {
    if !node_modules().join("@durable-streams/client/package.json").is_file() {
        return !missing("@durable-streams/client");
    }
    let kafka = Command::new("python3")
        .args(["-c", "import kafka"])
        .env("PYTHONPATH", python_path())
        .status();
    if !kafka.is_ok_and(|s| s.success()) {
        return !missing("kafka-python");
    }
    true
}

/// Runs the Durable Streams client script; returns its stdout.
fn ds(args: &[&str]) -> String {
    let out = Command::new("node")
        .arg(root().join("tests/durable/ds_client.cjs"))
        .args(args)
        .env("NODE_PATH", node_modules())
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "ds_client {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// kafka-python: produce `values` to partition 0 of `topic`, or (with no
/// values) consume partition 0 from the beginning and print the values as
/// a JSON list.
fn kafka(bootstrap: &str, topic: &str, values: &[&str]) -> Vec<String> {
    const SCRIPT: &str = r#"
import json, sys
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
bootstrap, topic, values = sys.argv[1], sys.argv[2], sys.argv[3:]
if values:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for v in values:
        p.send(topic, value=v.encode(), partition=0).get(timeout=30)
    p.close()
    print("[]")
else:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    end = c.end_offsets([tp])[tp]
    out = []
    while c.position(tp) < end:
        for batch in c.poll(timeout_ms=1000).values():
            out.extend(r.value.decode() for r in batch)
    c.close()
    print(json.dumps(out))
"#;
    let out = Command::new("python3")
        .args(["-c", SCRIPT, bootstrap, topic])
        .args(values)
        .env("PYTHONPATH", python_path())
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "kafka-python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn records_cross_between_durable_streams_kafka_and_the_native_api() {
    if !clients_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let node = Server::start("n1", dir.path(), free_port(), &[]);
    let client = reqwest::Client::new();
    let stream = format!("{}/v1/stream/cross/orders", node.url);
    // The documented mapping: `/` is escaped, `ds.` prefixed.
    let topic = "ds.cross_2Forders";

    // Durable Streams → Kafka and native.
    ds(&["create", &stream, "application/json"]);
    ds(&["append", &stream, r#"{"n":1}"#, r#"{"n":2}"#]);
    ds(&["produce", &stream, "writer-1", r#"{"n":3}"#]);
    let expected = vec![r#"{"n":1}"#, r#"{"n":2}"#, r#"{"n":3}"#];
    let kafka_in = tokio::task::block_in_place(|| kafka(&node.kafka_addr, topic, &[]));
    assert_eq!(kafka_in, expected, "read by a Kafka consumer");
    assert_eq!(
        support::http::values(&client, &node.url, topic).await,
        expected,
        "read over the native API"
    );

    // Kafka and native → Durable Streams.
    tokio::task::block_in_place(|| kafka(&node.kafka_addr, topic, &[r#"{"from":"kafka"}"#]));
    let r = client
        .post(format!("{}/v1/topics/{topic}/partitions/0/records", node.url))
        .json(&json!({"records": [{"value": r#"{"from":"native"}"#}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let read: Value = serde_json::from_str(&tokio::task::block_in_place(|| ds(&["read", &stream]))).unwrap();
    assert_eq!(
        read,
        json!([{"n": 1}, {"n": 2}, {"n": 3}, {"from": "kafka"}, {"from": "native"}]),
        "read with the Durable Streams client"
    );
}
