//! Kafka transactions with two more unmodified clients, each with its own
//! transaction manager: kafkajs and kafka-python. Against three
//! in-process nodes, each runs transactions that write records over three
//! partitions, committed and aborted alternately, reads them back
//! read_committed and read_uncommitted, and has a zombie fenced by a second
//! instance with the same transactional id (see `tests/kafka/txn_kafkajs.js`
//! and `tests/kafka/txn_kafka_python.py`; `tests/kafka_transactions.rs`
//! does the same with confluent-kafka).

mod support;

use serde_json::Value;
use std::time::Duration;
use support::kafka::{installed, python, python_module_installed, repo, run_steps, step, Cluster};

const ROUNDS: usize = 20;
const PER_ROUND: usize = 30;

/// Run a client script (given the bootstrap, topic, rounds and records
/// per round) against `c`; its steps.
async fn run_client(what: &str, mut cmd: tokio::process::Command, c: &Cluster, topic: &str) -> Vec<Value> {
    cmd.args([c.bootstrap(), topic, &ROUNDS.to_string(), &PER_ROUND.to_string()]);
    run_steps(what, cmd, Duration::from_secs(300)).await
}

/// What both clients must have seen: exactly the committed records
/// read_committed, every data record read_uncommitted, no control record
/// surfacing, and the zombie's writes after the fence invisible.
fn check(steps: &[Value]) {
    let half = ROUNDS / 2 * PER_ROUND;
    let rounds = step(steps, "rounds");
    assert_eq!(rounds["committed"], half, "{rounds}");
    assert_eq!(rounds["aborted"], half, "{rounds}");
    eprintln!(
        "commit latency: p50 {} ms, max {} ms",
        rounds["commit_ms_p50"], rounds["commit_ms_max"]
    );
    let read = step(steps, "read");
    assert_eq!(read["committed_reached_end"], true, "{read}");
    assert_eq!(read["uncommitted_reached_end"], true, "{read}");
    assert_eq!(
        read["read_committed"], half,
        "read_committed sees exactly the committed records: {read}"
    );
    assert_eq!(read["read_committed_exact"], true, "{read}");
    assert_eq!(read["read_committed_in_order"], true, "{read}");
    assert_eq!(read["read_committed_aborted"], 0, "{read}");
    assert_eq!(
        read["read_uncommitted"],
        2 * half,
        "read_uncommitted sees every data record: {read}"
    );
    assert_eq!(read["read_uncommitted_exact"], true, "{read}");
    assert_eq!(read["read_uncommitted_in_order"], true, "{read}");
    assert_eq!(read["strangers"], 0, "no control record surfaces as a message: {read}");
    let zombie = step(steps, "zombie");
    assert!(
        zombie["produce_error"].is_object(),
        "the partition leader refuses the zombie's batch at its old epoch: {zombie}"
    );
    assert!(zombie["commit_error"].is_object(), "the zombie cannot commit: {zombie}");
    assert_eq!(zombie["reached_end"], true, "{zombie}");
    assert_eq!(
        zombie["before_visible"], false,
        "the zombie's transaction was aborted: {zombie}"
    );
    assert_eq!(
        zombie["after_visible"], false,
        "nothing the zombie wrote after the fence is visible: {zombie}"
    );
    assert_eq!(zombie["second_visible"], true, "{zombie}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafkajs_transactions_commit_and_abort_records_over_three_partitions_on_three_nodes() {
    let node = || {
        let mut cmd = std::process::Command::new("node");
        cmd.env("NODE_PATH", repo(".services/npm/node_modules"));
        cmd
    };
    if !installed("kafkajs", node().args(["-e", "require('kafkajs')"])) {
        return;
    }
    let c = Cluster::start_with_topic(3, "tx", 3).await;
    let mut cmd = node();
    cmd.arg(repo("tests/kafka/txn_kafkajs.js"));
    let steps = run_client("txn_kafkajs.js", cmd.into(), &c, "tx").await;
    check(&steps);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_transactions_commit_and_abort_records_over_three_partitions_on_three_nodes() {
    if !python_module_installed("kafka") {
        return;
    }
    let c = Cluster::start_with_topic(3, "tx", 3).await;
    let mut cmd = python();
    cmd.arg(repo("tests/kafka/txn_kafka_python.py"));
    let steps = run_client("txn_kafka_python.py", cmd, &c, "tx").await;
    check(&steps);
    // The zombie, refused at its old epoch, tries a KIP-360 epoch bump
    // (InitProducerId with its producer id and epoch): refused with
    // PRODUCER_FENCED, it ends in kafka-python's fatal state.
    let zombie = step(&steps, "zombie");
    let last = zombie["final_error"]["message"].as_str().unwrap_or_default();
    assert!(
        last.contains("error state") && last.contains("ProducerFencedError"),
        "the zombie's epoch bump is refused as fenced: {zombie}"
    );
}
