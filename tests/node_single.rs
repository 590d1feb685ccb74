//! One node in process on shared in-memory stores: appends, reads, flushes,
//! and recovery of a crashed incarnation's WAL by the next one.

mod support;

use bytes::Bytes;
use sluice::api::{ErrorCode, ReadFrom, ReadRequest, Records, Topics};
use sluice::ids::{NodeEpoch, Offset};
use sluice::node::Node;
use std::sync::Arc;
use std::time::Duration;
use support::{config, eventually, memory_backends, rec};

async fn wait_placed(node: &Arc<Node>, topic: &str, partitions: u32) {
    let ok = eventually(Duration::from_secs(10), || {
        (0..partitions).all(|p| {
            let id = sluice::ids::StreamId::new(node.meta.view().topics[topic].id, p);
            node.open_stream(id).is_some()
        })
    })
    .await;
    assert!(ok, "streams of {topic} were not placed");
}

fn read_all(from: Offset) -> ReadRequest {
    ReadRequest {
        from: ReadFrom::At(from),
        limit: 10_000,
        max_bytes: usize::MAX,
        wait: Duration::ZERO,
        committed: false,
        consistency: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_are_read_back_at_their_offsets_before_and_after_a_flush() {
    let node = Node::start_with(config("n1", &["--flush-interval-sec", "1"]), memory_backends())
        .await
        .unwrap();
    node.create_topic("t", 2, Default::default()).await.unwrap();
    wait_placed(&node, "t", 2).await;
    let a = node.append("t", 0, vec![rec("a"), rec("b")]).await.unwrap();
    let b = node.append("t", 0, vec![rec("c")]).await.unwrap();
    assert_eq!((a.base, b.base), (Offset(0), Offset(2)));
    let r = node.read("t", 0, read_all(Offset(1))).await.unwrap();
    assert_eq!(r.records.len(), 2);
    assert_eq!((r.next_offset, r.high_watermark), (Offset(3), Offset(3)));
    // After the flush interval the records live in a data object.
    let stream = sluice::ids::StreamId::new(node.meta.view().topics["t"].id, 0);
    assert!(
        eventually(Duration::from_secs(5), || node.meta.view().streams[&stream]
            .committed_end
            == Offset(3))
        .await
    );
    let r = node.read("t", 0, read_all(Offset(0))).await.unwrap();
    let values: Vec<Bytes> = r.records.into_iter().map(|(_, r)| r.value.unwrap()).collect();
    assert_eq!(values, vec![Bytes::from("a"), Bytes::from("b"), Bytes::from("c")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_precise_errors() {
    let node = Node::start_with(config("n1", &[]), memory_backends()).await.unwrap();
    let err = node.append("nope", 0, vec![rec("x")]).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::TopicNotFound);
    node.create_topic("t", 1, Default::default()).await.unwrap();
    assert_eq!(
        node.create_topic("t", 1, Default::default()).await.unwrap_err().code,
        ErrorCode::TopicExists
    );
    assert_eq!(
        node.create_topic("a/b", 1, Default::default()).await.unwrap_err().code,
        ErrorCode::InvalidTopicName
    );
    assert_eq!(
        node.create_topic("u", 0, Default::default()).await.unwrap_err().code,
        ErrorCode::InvalidPartitionCount
    );
    assert_eq!(
        node.append("t", 1, vec![rec("x")]).await.unwrap_err().code,
        ErrorCode::PartitionNotFound
    );
    wait_placed(&node, "t", 1).await;
    let err = node.read("t", 0, read_all(Offset(5))).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::OffsetOutOfRange);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_returns_when_a_record_arrives() {
    let node = Node::start_with(config("n1", &[]), memory_backends()).await.unwrap();
    node.create_topic("t", 1, Default::default()).await.unwrap();
    wait_placed(&node, "t", 1).await;
    let reader = node.clone();
    let poll = tokio::spawn(async move {
        let req = ReadRequest {
            from: ReadFrom::End,
            limit: 10,
            max_bytes: 1 << 20,
            wait: Duration::from_secs(10),
            committed: false,
            consistency: Default::default(),
        };
        let started = tokio::time::Instant::now();
        let r = reader.read("t", 0, req).await.unwrap();
        (r.records.len(), started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    node.append("t", 0, vec![rec("x")]).await.unwrap();
    let (n, waited) = poll.await.unwrap();
    assert_eq!(n, 1);
    assert!(waited < Duration::from_secs(5), "the poll waited {waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_recovers_its_previous_incarnations_wal() {
    let backends = memory_backends();
    // Flushes effectively never happen: everything stays in the WAL.
    let cfg = config("n1", &["--flush-interval-sec", "3600"]);
    let first = Node::start_with(cfg.clone(), backends.clone()).await.unwrap();
    first.create_topic("t", 3, Default::default()).await.unwrap();
    wait_placed(&first, "t", 3).await;
    let mut acked = Vec::new();
    for i in 0..30u32 {
        let a = first.append("t", i % 3, vec![rec(format!("v{i}"))]).await.unwrap();
        acked.push((i % 3, a.base, format!("v{i}")));
    }
    // Crash: the process is gone, nothing is flushed or closed.
    first.crash();
    drop(first);
    let second = Node::start_with(cfg, backends).await.unwrap();
    assert_eq!(second.epoch, NodeEpoch(2));
    wait_placed(&second, "t", 3).await;
    for (p, offset, value) in acked {
        let r = second.read("t", p, read_all(offset)).await.unwrap();
        assert_eq!(r.records[0].0, offset);
        assert_eq!(r.records[0].1.value.as_deref(), Some(value.as_bytes()));
    }
    // And the stream goes on densely.
    let next = second.append("t", 0, vec![rec("after")]).await.unwrap();
    assert_eq!(next.base, Offset(10));
}
