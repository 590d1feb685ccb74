//! A compacted topic through unmodified Kafka clients: confluent-kafka
//! (librdkafka) creates it with `cleanup.policy=compact` and writes
//! rounds of keyed updates (the last round deleting some keys); the
//! owner compacts; then confluent-kafka, kafka-python and kafkajs read the
//! partition from the beginning across the gaps compaction left, and see
//! every live key exactly once, with its latest value, at the offset it
//! was written at, in offset order; so does an HTTP reader. A record without a key is refused.
//!
//! `SLUICE_COMPACTION_CLIENT_KEYS`, `..._ROUNDS` and `..._VALUE_BYTES`
//! scale it (default 50 keys, 6 rounds, short values); the issue's
//! workload is 10,000 keys, 100 rounds, 1,024-byte values.

mod support;

use sluice::ids::StreamId;
use std::collections::BTreeMap;
use std::time::Duration;
use support::kafka::{installed, python, python_module_installed, repo, run_steps, serve_node, step};
use support::{eventually, memory_backends};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_clients_read_a_compacted_topic_across_its_gaps() {
    if !python_module_installed("confluent_kafka") {
        return;
    }
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    let flags = [
        "--flush-interval-sec",
        "1",
        "--compaction-interval-sec",
        "1",
        "--compaction-bytes-per-sec",
        "1073741824",
    ];
    let (node, url, kafka) = serve_node("n1", &flags, memory_backends(), stop_rx).await;
    let env = |name: &str, default: u32| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let keys = env("SLUICE_COMPACTION_CLIENT_KEYS", 50);
    let rounds = env("SLUICE_COMPACTION_CLIENT_ROUNDS", 6);
    let value_bytes = env("SLUICE_COMPACTION_CLIENT_VALUE_BYTES", 0) as usize;
    // A minute per 100 MB of values on top of two minutes.
    let scale = Duration::from_secs(u64::from(keys * rounds) * value_bytes.max(16) as u64 / 1_600_000);
    let started = std::time::Instant::now();

    let mut cmd = python();
    cmd.arg(repo("tests/kafka/compacted.py")).args([
        &kafka,
        "kc",
        "produce",
        &keys.to_string(),
        &rounds.to_string(),
        &value_bytes.to_string(),
    ]);
    let steps = run_steps("compacted.py produce", cmd, Duration::from_secs(120) + scale).await;
    eprintln!(
        "produced {} updates over {keys} keys in {:.1} s",
        keys * rounds,
        started.elapsed().as_secs_f64()
    );
    let produced = step(&steps, "produced");
    assert_eq!(produced["sent"], keys * rounds);
    assert_eq!(produced["errors"], serde_json::json!([]), "{produced}");
    assert_eq!(
        produced["keyless"],
        serde_json::json!(["INVALID_RECORD"]),
        "a record without a key is refused: {produced}"
    );

    // Flushed and compacted up to the end.
    let stream = StreamId::new(node.meta.view().topics["kc"].id, 0);
    let end = u64::from(keys * rounds);
    let compacted = eventually(Duration::from_secs(30) + scale, || {
        let row = &node.meta.view().streams[&stream];
        row.committed_end.get() == end && row.compacted_end.get() == end
    })
    .await;
    assert!(compacted, "not compacted: {:?}", node.meta.view().streams[&stream]);
    eprintln!(
        "flushed and compacted to the end {:.1} s after the start",
        started.elapsed().as_secs_f64()
    );

    // What each key's latest record is: the offsets are the send order
    // (one producer, idempotent, one partition).
    let mut latest: BTreeMap<String, (u64, Option<String>)> = BTreeMap::new();
    for r in 0..rounds {
        for k in 0..keys {
            let offset = u64::from(r * keys + k);
            let value = (r != rounds - 1 || k % 5 != 0).then(|| format!("{:.<value_bytes$}", format!("v{r}-{k}")));
            latest.insert(format!("key{k}"), (offset, value));
        }
    }
    let mut want: Vec<serde_json::Value> = (latest.iter())
        .filter(|(_, (_, v))| v.is_some())
        .map(|(k, (o, v))| serde_json::json!([o, k, v]))
        .collect();
    want.sort_by_key(|v| v[0].as_u64());

    let mut cmd = python();
    cmd.arg(repo("tests/kafka/compacted.py"))
        .args([&kafka, "kc", "consume"]);
    let mut steps = run_steps("compacted.py consume", cmd, Duration::from_secs(120) + scale).await;
    let node_js = || {
        let mut cmd = std::process::Command::new("node");
        cmd.env("NODE_PATH", repo(".services/npm/node_modules"));
        cmd
    };
    if installed("kafkajs", node_js().args(["-e", "require('kafkajs')"])) {
        let mut cmd = node_js();
        cmd.arg(repo("tests/kafka/compacted_kafkajs.js")).args([&kafka, "kc"]);
        steps.extend(run_steps("compacted_kafkajs.js", cmd.into(), Duration::from_secs(120) + scale).await);
    }
    let clients: Vec<&serde_json::Value> = steps.iter().filter(|s| s["step"] == "consumed").collect();
    assert!(!clients.is_empty());
    // HTTP reads, page by page from offset 0 (limit 1000), the same.
    let http = support::http::read_all(&reqwest::Client::new(), &url, "kc", 0).await;
    let want_http: Vec<(u64, String)> = (want.iter())
        .map(|v| (v[0].as_u64().unwrap(), v[2].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(http, want_http, "HTTP reads each live key once, latest, in order");
    eprintln!("HTTP: {} records of {end} offsets", http.len());
    for c in clients {
        let records = c["records"].as_array().unwrap();
        eprintln!(
            "{}: {} records of {} offsets, high watermark {}",
            c["client"],
            records.len(),
            end,
            c["high"]
        );
        assert_eq!(c["high"], end, "{}", c["client"]);
        assert_eq!(
            records, &want,
            "{} reads each live key once, latest, in order",
            c["client"]
        );
    }
}
