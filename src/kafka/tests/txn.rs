//! The transaction coordinator on a real node (memory backends): fencing
//! by InitProducerId, offsets that become the group's only on commit,
//! aborts, KIP-890 verification, the timeout, Describe/ListTransactions,
//! and a node that does not coordinate the id.

use super::*;
use crate::kafka::txn_coordinator::{self as tc, TxnTimers};
use crate::meta::txn::TxnState;

async fn txn_node() -> (Arc<Node>, Services) {
    let node = node().await;
    let engine = node.services();
    engine.topics.create_topic("t", 2, Default::default()).await.unwrap();
    wait_open(&engine, "t").await;
    (node, engine)
}

fn parts(ps: &[i32]) -> Vec<(String, Vec<i32>)> {
    vec![("t".to_string(), ps.to_vec())]
}

fn codes(answer: &[(String, Vec<(i32, i16)>)]) -> Vec<i16> {
    answer.iter().flat_map(|(_, ps)| ps.iter().map(|p| p.1)).collect()
}

fn state(engine: &Services, id: &str) -> TxnState {
    tc::describe(engine, &[id.to_string()])[0].1.clone().unwrap().state
}

fn offset(o: i64) -> GroupOffset {
    GroupOffset {
        topic: "t".into(),
        partition: 0,
        offset: o,
        metadata: None,
    }
}

#[tokio::test]
async fn a_new_instance_fences_the_old_one_and_aborts_what_it_left_open() {
    let (_node, engine) = txn_node().await;
    let (e, pid, epoch) = tc::init(&engine, "tx", 60_000, (-1, -1), 4).await;
    assert_eq!((e, epoch), (code::NONE, 0));
    assert_eq!(
        codes(&tc::add_partitions(&engine, "tx", (pid, 0), &parts(&[0, 1]), false, 3).await),
        vec![0, 0]
    );
    assert_eq!(state(&engine, "tx"), TxnState::Ongoing);

    // The second instance: the open transaction is aborted at a bumped
    // epoch, then the new instance gets the next one.
    let (e, pid2, epoch2) = tc::init(&engine, "tx", 60_000, (-1, -1), 4).await;
    assert_eq!((e, pid2, epoch2), (code::NONE, pid, 2));
    assert_eq!(state(&engine, "tx"), TxnState::Empty);

    // The old instance is fenced everywhere; old request versions get the
    // old code.
    assert_eq!(
        codes(&tc::add_partitions(&engine, "tx", (pid, 0), &parts(&[0]), false, 3).await),
        vec![tc::PRODUCER_FENCED]
    );
    assert_eq!(
        codes(&tc::add_partitions(&engine, "tx", (pid, 0), &parts(&[0]), false, 1).await),
        vec![code::INVALID_PRODUCER_EPOCH]
    );
    assert_eq!(tc::end(&engine, "tx", (pid, 0), true, 3).await, tc::PRODUCER_FENCED);
    assert_eq!(
        tc::add_offsets(&engine, "tx", (pid, 1), "g", 3).await,
        tc::PRODUCER_FENCED
    );
    assert_eq!(
        tc::end(&engine, "tx", (pid + 1, 2), true, 3).await,
        tc::INVALID_PRODUCER_ID_MAPPING
    );
    // KIP-360: a producer naming the current id and epoch keeps the id.
    assert_eq!(tc::init(&engine, "tx", 60_000, (pid, 2), 4).await, (code::NONE, pid, 3));
    assert_eq!(
        tc::init(&engine, "tx", 60_000, (pid, 1), 4).await.0,
        tc::PRODUCER_FENCED
    );
    assert_eq!(
        tc::init(&engine, "tx", 0, (-1, -1), 4).await.0,
        tc::INVALID_TRANSACTION_TIMEOUT
    );
    assert_eq!(
        tc::init(&engine, "tx", 900_001, (-1, -1), 4).await.0,
        tc::INVALID_TRANSACTION_TIMEOUT
    );
}

#[tokio::test]
async fn offsets_committed_in_a_transaction_reach_the_group_only_when_it_commits() {
    let (node, engine) = txn_node().await;
    let (_, pid, epoch) = tc::init(&engine, "tx", 60_000, (-1, -1), 4).await;
    let p = (pid, epoch);
    // TxnOffsetCommit for a group not added is refused.
    assert_eq!(
        tc::commit_offsets(&engine, "tx", p, "g", vec![offset(3)]).await,
        tc::INVALID_TXN_STATE
    );
    assert_eq!(tc::add_offsets(&engine, "tx", p, "g", 3).await, code::NONE);
    assert_eq!(
        tc::commit_offsets(&engine, "tx", p, "g", vec![offset(3)]).await,
        code::NONE
    );
    assert_eq!(
        tc::commit_offsets(&engine, "tx", p, "g", vec![offset(5)]).await,
        code::NONE
    );
    assert!(node.committed_offsets("g").is_empty(), "not before the commit");
    assert_eq!(tc::end(&engine, "tx", p, true, 3).await, code::NONE);
    assert_eq!(state(&engine, "tx"), TxnState::CompleteCommit);
    assert_eq!(
        node.committed_offsets("g")[0].offset,
        5,
        "the later commit of the partition"
    );
    // A retried EndTxn of the same outcome is answered as done.
    assert_eq!(tc::end(&engine, "tx", p, true, 3).await, code::NONE);
    assert_eq!(tc::end(&engine, "tx", p, false, 3).await, tc::INVALID_TXN_STATE);

    // An aborted transaction's offsets are dropped.
    assert_eq!(tc::add_offsets(&engine, "tx", p, "g", 3).await, code::NONE);
    assert_eq!(
        tc::commit_offsets(&engine, "tx", p, "g", vec![offset(9)]).await,
        code::NONE
    );
    assert_eq!(tc::end(&engine, "tx", p, false, 3).await, code::NONE);
    assert_eq!(state(&engine, "tx"), TxnState::CompleteAbort);
    assert_eq!(node.committed_offsets("g")[0].offset, 5);
    // Nothing to end now.
    assert_eq!(tc::end(&engine, "tx", p, true, 3).await, tc::INVALID_TXN_STATE);
}

#[tokio::test]
async fn verify_only_changes_nothing_and_unknown_partitions_are_refused() {
    let (_node, engine) = txn_node().await;
    let (_, pid, epoch) = tc::init(&engine, "tx", 60_000, (-1, -1), 4).await;
    let p = (pid, epoch);
    assert_eq!(
        codes(&tc::add_partitions(&engine, "tx", p, &parts(&[0]), true, 5).await),
        vec![tc::INVALID_TXN_STATE],
        "nothing added yet"
    );
    assert_eq!(state(&engine, "tx"), TxnState::Empty, "verification added nothing");
    assert_eq!(
        codes(&tc::add_partitions(&engine, "tx", p, &parts(&[0]), false, 5).await),
        vec![0]
    );
    assert_eq!(
        codes(&tc::add_partitions(&engine, "tx", p, &parts(&[0, 1]), true, 5).await),
        vec![code::NONE, tc::INVALID_TXN_STATE]
    );
    let unknown = vec![("nope".to_string(), vec![0])];
    assert_eq!(
        codes(&tc::add_partitions(&engine, "tx", p, &unknown, false, 5).await),
        vec![code::UNKNOWN_TOPIC_OR_PARTITION]
    );
    assert_eq!(
        codes(&tc::add_partitions(&engine, "tx", p, &parts(&[7]), false, 5).await),
        vec![code::UNKNOWN_TOPIC_OR_PARTITION]
    );
}

#[tokio::test]
async fn the_coordinator_aborts_a_transaction_past_its_timeout_and_fences_its_producer() {
    let (_node, engine) = txn_node().await;
    let (_, pid, epoch) = tc::init(&engine, "slow", 1_000, (-1, -1), 4).await;
    let p = (pid, epoch);
    assert_eq!(
        codes(&tc::add_partitions(&engine, "slow", p, &parts(&[0]), false, 3).await),
        vec![0]
    );
    let timers = TxnTimers::default();
    let t0 = tokio::time::Instant::now();
    tc::tick(&engine, &timers, t0).await;
    tc::tick(&engine, &timers, t0 + Duration::from_millis(900)).await;
    assert_eq!(state(&engine, "slow"), TxnState::Ongoing);
    tc::tick(&engine, &timers, t0 + Duration::from_millis(1_000)).await;
    assert_eq!(state(&engine, "slow"), TxnState::CompleteAbort);
    assert_eq!(tc::end(&engine, "slow", p, true, 3).await, tc::PRODUCER_FENCED);
    let (listed, unknown) = tc::list(&engine, &["CompleteAbort".into(), "Bogus".into()], &[]);
    assert_eq!(listed, vec![("slow".to_string(), pid, "CompleteAbort")]);
    assert_eq!(unknown, vec!["Bogus".to_string()]);
    assert!(tc::list(&engine, &[], &[pid + 1]).0.is_empty());
    let d = tc::describe(&engine, &["slow".into(), "none".into()]);
    assert_eq!(d[0].1.as_ref().unwrap().producer_epoch, epoch + 1);
    assert_eq!(d[1].1, Err(tc::TRANSACTIONAL_ID_NOT_FOUND));
}

#[tokio::test]
async fn a_node_that_does_not_coordinate_the_id_says_so() {
    let (a, b) = two_nodes().await;
    let (ea, eb) = (a.services(), b.services());
    // An id each node places on the other.
    let id = (0..100)
        .map(|i| format!("tx-{i}"))
        .find(|id| crate::kafka::group_placement::coordinator_of(&ea, id).map(|c| c.0) == Some(b.id.to_string()))
        .expect("some id is b's");
    assert_eq!(
        crate::kafka::group_placement::coordinator_of(&eb, &id).unwrap().0,
        b.id.to_string()
    );
    assert_eq!(
        tc::init(&ea, &id, 60_000, (-1, -1), 4).await.0,
        groups::code::NOT_COORDINATOR
    );
    let (e, _, epoch) = tc::init(&eb, &id, 60_000, (-1, -1), 4).await;
    assert_eq!((e, epoch), (code::NONE, 0));
    assert_eq!(
        tc::describe(&ea, std::slice::from_ref(&id))[0].1,
        Err(groups::code::NOT_COORDINATOR)
    );
}
