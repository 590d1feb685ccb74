//! Transaction markers on one node in process, through the coordinator's
//! own calls: a late marker of a completed transaction (a second finisher
//! whose view was behind) appends nothing, so the producer's next
//! transaction in the partition stays open until its own marker.

mod support;

use bytes::Bytes;
use sluice::api::{MarkerOf, Records, Topics};
use sluice::batch::marker::{encode_marker, Marker};
use sluice::batch::{encode_batch, transactional, with_producer};
use sluice::ids::{Offset, StreamId};
use sluice::kafka::txn_coordinator as tc;
use sluice::node::Node;
use std::sync::Arc;
use std::time::Duration;
use support::{config, eventually, memory_backends, rec};

const ID: &str = "late-marker";
/// The InitProducerId / AddPartitionsToTxn / EndTxn versions asked for.
const VERSION: i16 = 4;

fn txn_batch(pid: i64, epoch: i16, seq: i32, value: &str) -> Bytes {
    transactional(
        &with_producer(&encode_batch(Offset(0), &[rec(value)]), pid, epoch, seq),
        false,
    )
}

async fn begin(node: &Arc<Node>, producer: (i64, i16)) -> u64 {
    let added = tc::add_partitions(
        &node.services(),
        ID,
        producer,
        &[("t".to_string(), vec![0])],
        false,
        VERSION,
    )
    .await;
    assert_eq!(added[0].1[0].1, 0, "AddPartitionsToTxn: {added:?}");
    node.services().producer_ids.txn(ID).expect("the record").started_at
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_marker_of_a_completed_transaction_leaves_the_next_one_open() {
    let node = Node::start_with(config("n1", &[]), memory_backends()).await.unwrap();
    node.create_topic("t", 1, Default::default()).await.unwrap();
    let stream = StreamId::new(node.meta.view().topics["t"].id, 0);
    assert!(eventually(Duration::from_secs(10), || node.open_stream(stream).is_some()).await);
    let services = node.services();
    let (code, pid, epoch) = tc::init(&services, ID, 60_000, (-1, -1), VERSION).await;
    assert_eq!(code, 0);

    // The first transaction writes one record and commits.
    let first = begin(&node, (pid, epoch)).await;
    node.append_batch("t", 0, txn_batch(pid, epoch, 0, "one"))
        .await
        .unwrap();
    assert_eq!(tc::end(&services, ID, (pid, epoch), true, VERSION).await, 0);
    let s = node.open_stream(stream).unwrap();
    assert_eq!((s.high_watermark(), s.last_stable()), (Offset(2), Offset(2)));

    // The next one writes to the same partition and is still open.
    let second = begin(&node, (pid, epoch)).await;
    assert!(second > first);
    node.append_batch("t", 0, txn_batch(pid, epoch, 1, "two"))
        .await
        .unwrap();
    assert_eq!((s.high_watermark(), s.last_stable()), (Offset(3), Offset(2)));

    // A late commit marker of the first transaction appends nothing.
    let late = encode_marker(pid, epoch, Marker::Commit, 0, 0);
    let of = |started_at| MarkerOf {
        transactional_id: ID.to_string(),
        started_at,
    };
    let a = node.append_marker("t", 0, late.clone(), Some(of(first))).await.unwrap();
    assert_eq!(a.count, 0, "a late marker was appended at {}", a.base);
    assert_eq!(
        (s.high_watermark(), s.last_stable()),
        (Offset(3), Offset(2)),
        "the second transaction is still open"
    );
    // So does a marker of a transaction still ongoing (not yet ending).
    let early = node.append_marker("t", 0, late, Some(of(second))).await.unwrap();
    assert_eq!(early.count, 0);

    // The second transaction's own finisher ends it.
    assert_eq!(tc::end(&services, ID, (pid, epoch), false, VERSION).await, 0);
    assert_eq!((s.high_watermark(), s.last_stable()), (Offset(4), Offset(4)));
    let aborted = s.aborted_in(Offset(0), Offset(4));
    assert_eq!(aborted.len(), 1);
    assert_eq!((aborted[0].first, aborted[0].marker), (Offset(2), Offset(3)));
}
