//! Kafka transactions with an unmodified client (confluent-kafka, on
//! librdkafka's transaction manager) against two in-process nodes: the
//! coordinator found by FindCoordinator key type 1, InitProducerId with a
//! transactional id, AddOffsetsToTxn, TxnOffsetCommit on the group's
//! coordinator, EndTxn commit and abort, and fencing by a second instance;
//! then transactions that write records over three partitions on three
//! nodes, read back read_committed and read_uncommitted, a zombie fenced,
//! and a transaction aborted by its timeout.

mod support;

use std::time::Duration;
use support::kafka::{python, python_module_installed, repo, run_steps, step, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_commits_and_aborts_transactional_offsets_and_is_fenced() {
    if !python_module_installed("confluent_kafka") {
        return;
    }
    let c = Cluster::start_with_topic(2, "t", 2).await;
    let mut cmd = python();
    cmd.arg(repo("tests/kafka/txn_offsets.py"))
        .args([c.bootstrap(), "t", "g"]);
    let steps = run_steps("txn_offsets.py", cmd, Duration::from_secs(120)).await;
    let step = |name: &str| step(&steps, name);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_transactions_commit_and_abort_records_over_three_partitions_on_three_nodes() {
    if !python_module_installed("confluent_kafka") {
        return;
    }
    let c = Cluster::start_with_topic(3, "tx", 3).await;
    let (rounds, per) = (20, 30);
    let mut cmd = python();
    cmd.arg(repo("tests/kafka/txn_data.py"))
        .args([c.bootstrap(), "tx", &rounds.to_string(), &per.to_string()]);
    let steps = run_steps("txn_data.py", cmd, Duration::from_secs(300)).await;
    let step = |name: &str| step(&steps, name);
    let half = rounds / 2 * per;
    assert_eq!(step("rounds")["committed"], half);
    let read = step("read");
    assert_eq!(read["committed_reached_end"], true, "{read}");
    assert_eq!(
        read["read_committed"], half,
        "read_committed sees exactly the committed records"
    );
    assert_eq!(read["read_committed_exact"], true);
    assert_eq!(read["read_committed_in_order"], true);
    assert_eq!(read["read_committed_aborted"], 0);
    assert_eq!(
        read["read_uncommitted"],
        2 * half,
        "read_uncommitted sees every data record"
    );
    assert_eq!(read["read_uncommitted_exact"], true);
    assert_eq!(read["strangers"], 0, "no control record surfaces as a message");
    let zombie = step("zombie");
    assert_eq!(zombie["commit_error"]["name"], "_FENCED", "{zombie}");
    assert_eq!(
        zombie["flush_error"]["name"], "_FENCED",
        "the partition leader refuses the zombie's batch at its old epoch: {zombie}"
    );
    assert_eq!(zombie["before_visible"], false, "the zombie's transaction was aborted");
    assert_eq!(
        zombie["after_visible"], false,
        "nothing the zombie wrote after the fence is visible"
    );
    assert_eq!(zombie["second_visible"], true);
    let timeout = step("timeout");
    assert!(
        timeout["plain_visible_after_s"].is_number(),
        "the timed-out transaction was never aborted: {timeout}"
    );
    assert_eq!(timeout["open_visible"], false);
    assert!(
        timeout["commit_error"].is_object(),
        "the timed-out producer cannot commit: {timeout}"
    );

    // HTTP reads of the same partitions, through every node (the owner's
    // and forwarded): committed by default, as a read_committed consumer
    // reads; read_uncommitted is every stored record, the markers too.
    let fin = step("final");
    let client = reqwest::Client::new();
    let mut markers = 0;
    for url in &c.urls {
        for p in 0..3u64 {
            let kafka_committed: Vec<String> =
                serde_json::from_value(fin["read_committed"][p.to_string()].clone()).unwrap();
            let kafka_all: Vec<String> =
                serde_json::from_value(fin["read_uncommitted"][p.to_string()].clone()).unwrap();
            let committed: Vec<String> = support::http::read_all(&client, url, "tx", p)
                .await
                .into_iter()
                .map(|(_, v)| v)
                .collect();
            assert_eq!(committed, kafka_committed, "HTTP's committed read of tx/{p} at {url}");
            let all: Vec<String> = support::http::read_all_with(&client, url, "tx", p, "&isolation=read_uncommitted")
                .await
                .into_iter()
                .map(|(_, v)| v)
                .collect();
            let (data, control): (Vec<String>, Vec<String>) = all
                .into_iter()
                .partition(|v| v.starts_with(|c: char| c.is_ascii_alphanumeric()));
            assert_eq!(data, kafka_all, "HTTP's uncommitted read of tx/{p} at {url}");
            assert!(!control.is_empty(), "the markers of tx/{p} are stored records");
            markers += control.len();
        }
    }
    eprintln!(
        "HTTP reads agree with Kafka's through {} nodes; {markers} marker records seen uncommitted",
        c.urls.len()
    );
    let bad = client
        .get(format!(
            "{}/v1/topics/tx/partitions/0/records?isolation=dirty",
            c.urls[0]
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}
