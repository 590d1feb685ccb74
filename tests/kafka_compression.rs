//! Compressed batches from a real client: confluent-kafka (librdkafka)
//! produces with gzip, snappy, lz4 and zstd against a real `sluice serve`;
//! a Kafka consumer reads the stored batches back, and the HTTP API reads
//! the same records decompressed, with keys, values and headers intact.
//!
//! Skips when confluent-kafka is not installed in `.services/python`
//! (`scripts/services.sh install`) — and fails when `CI` is set.

mod support;

use serde_json::Value;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use support::process::{free_port, Server};

const COUNT: usize = 300;

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

#[tokio::test]
async fn every_librdkafka_codec_round_trips_over_kafka_and_http() {
    if !have_confluent_kafka() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let node = Server::start("n1", dir.path(), free_port(), &["--auto-create-topics", "true"]);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/compressed_roundtrip.py");
    let run = tokio::process::Command::new("python3")
        .arg(script)
        .args([&node.kafka_addr, &COUNT.to_string()])
        .env("PYTHONPATH", python_path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the client finished in time")
        .unwrap();
    assert!(
        out.status.success(),
        "client failed: {}\nnode log: {}",
        String::from_utf8_lossy(&out.stderr),
        node.log()
    );
    let consumed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let client = reqwest::Client::new();
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let got = consumed[codec].as_array().unwrap();
        assert_eq!(got.len(), COUNT, "{codec}: Kafka consumer read every record");
        for (i, rec) in got.iter().enumerate() {
            assert_eq!(rec[0], i as u64, "{codec}: offsets are dense");
            assert_eq!(rec[1], format!("k{i}"));
            assert_eq!(rec[3], format!("v{i}"));
        }
        let topic = format!("z-{codec}");
        let r: Value = client
            .get(format!(
                "{}/v1/topics/{topic}/partitions/0/records?offset=0&limit={COUNT}",
                node.url
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let records = r["records"].as_array().unwrap_or_else(|| panic!("{codec}: {r}"));
        assert_eq!(records.len(), COUNT, "{codec}: HTTP read every record");
        for (rec, kafka) in records.iter().zip(got) {
            assert_eq!(rec["offset"], kafka[0], "{codec}");
            assert_eq!(rec["key"], kafka[1], "{codec}");
            assert_eq!(rec["value"], kafka[2], "{codec}");
            assert_eq!(rec["headers"]["h"], kafka[3], "{codec}: {rec}");
        }
    }
}
