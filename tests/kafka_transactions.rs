//! Kafka transactions with an unmodified client (confluent-kafka, on
//! librdkafka's transaction manager) against two in-process nodes: the
//! coordinator found by FindCoordinator key type 1, InitProducerId with a
//! transactional id, AddOffsetsToTxn, TxnOffsetCommit on the group's
//! coordinator, EndTxn commit and abort, and fencing by a second instance.
//! Transactional batches are not accepted yet, so these transactions write
//! only offsets (see docs/design/transactions.md).

mod support;

use serde_json::Value;
use support::kafka::{python, python_module_installed, repo, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_commits_and_aborts_transactional_offsets_and_is_fenced() {
    if !python_module_installed("confluent_kafka") {
        return;
    }
    let c = Cluster::start().await;
    let engine = c.nodes[0].services();
    engine.topics.create_topic("t", 2, Default::default()).await.unwrap();
    support::eventually(std::time::Duration::from_secs(10), || {
        c.nodes.iter().all(|n| n.services().topics.partitions("t").is_ok())
    })
    .await;
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        python()
            .arg(repo("tests/kafka/txn_offsets.py"))
            .args([c.bootstrap(), "t", "g"])
            .stderr(std::process::Stdio::inherit())
            .output(),
    )
    .await
    .expect("the client finished within 120 s")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(out.status.success(), "txn_offsets.py failed: {}", out.status);
    let steps: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let step = |name: &str| {
        steps
            .iter()
            .find(|s| s["step"] == name)
            .unwrap_or_else(|| panic!("no step {name}"))
    };
    // -1001: librdkafka's "no committed offset".
    assert_eq!(
        step("sent")["before_commit"]["0"],
        -1001,
        "offsets are not the group's before the commit"
    );
    assert_eq!(step("committed")["offsets"]["0"], 5);
    assert_eq!(step("committed")["offsets"]["1"], 7);
    assert_eq!(
        step("aborted")["offsets"]["0"],
        5,
        "an aborted transaction's offsets are dropped"
    );
    assert_eq!(
        step("fenced")["error"],
        "_FENCED",
        "the first instance is fenced: {}",
        step("fenced")
    );
    assert_eq!(step("second")["offsets"]["0"], 12, "the new instance commits");
}
