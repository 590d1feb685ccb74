//! `Txn` commands in the view: the proposer checks every command gets, the
//! streams a transaction names, its offsets reaching the group on commit,
//! and the records in snapshots. The transitions themselves are
//! `meta::txn`'s tests.

use super::*;
use crate::meta::txn::{TxnDone, TxnOp, TxnRefusal, TxnState};

fn txn(h: &mut Harness, e: NodeEpoch, op: TxnOp) -> Outcome {
    h.apply_as("n1", Some(e.0), Command::Txn { id: "tx".into(), op })
}

fn init(h: &mut Harness, e: NodeEpoch) -> (i64, i16) {
    match txn(
        h,
        e,
        TxnOp::Init {
            timeout_ms: 60_000,
            expected: None,
        },
    ) {
        Outcome::Txn(TxnDone::Producer { producer_id, epoch }) => (producer_id, epoch),
        o => panic!("{o:?}"),
    }
}

#[test]
fn a_committed_transactions_offsets_become_the_groups() {
    let (mut h, e, s) = Harness::with_open_stream();
    let (pid, pe) = init(&mut h, e);
    let ops = [
        TxnOp::AddPartitions {
            producer_id: pid,
            epoch: pe,
            partitions: vec![s],
        },
        TxnOp::AddGroup {
            producer_id: pid,
            epoch: pe,
            group: "g".into(),
        },
        TxnOp::CommitOffsets {
            producer_id: pid,
            epoch: pe,
            group: "g".into(),
            offsets: vec![(s, 42, None)],
        },
        TxnOp::End {
            producer_id: pid,
            epoch: pe,
            commit: true,
        },
    ];
    for op in ops {
        assert_eq!(txn(&mut h, e, op), Outcome::Txn(TxnDone::Changed));
    }
    assert!(!h.view.groups.contains_key("g"), "not before the transaction completes");
    assert_eq!(h.view.txns["tx"].state, TxnState::PrepareCommit);
    assert_eq!(
        txn(
            &mut h,
            e,
            TxnOp::Complete {
                producer_id: pid,
                epoch: pe,
                started_at: None,
            }
        ),
        Outcome::Txn(TxnDone::Changed)
    );
    assert_eq!(h.view.groups["g"][&s], (42, None));
}

#[test]
fn a_transaction_names_only_streams_that_exist() {
    let (mut h, e, s) = Harness::with_open_stream();
    let (pid, pe) = init(&mut h, e);
    let ghost = StreamId::new(s.topic, 99);
    let out = txn(
        &mut h,
        e,
        TxnOp::AddPartitions {
            producer_id: pid,
            epoch: pe,
            partitions: vec![s, ghost],
        },
    );
    assert!(
        matches!(out, Outcome::Rejected(Rejection::Txn(TxnRefusal::Invalid, _))),
        "{out:?}"
    );
    assert_eq!(h.view.txns["tx"].state, TxnState::Empty);
}

#[test]
fn txn_commands_from_a_fenced_or_replaced_node_change_nothing() {
    let (mut h, e, _) = Harness::with_open_stream();
    init(&mut h, e);
    let e2 = h.register("n1");
    assert!(matches!(
        txn(
            &mut h,
            e,
            TxnOp::Init {
                timeout_ms: 1000,
                expected: None
            }
        ),
        Outcome::Rejected(Rejection::ProposerStale(_))
    ));
    h.apply_as(
        "n1",
        Some(e2.0),
        Command::FenceSelf {
            node: n("n1"),
            epoch: e2,
        },
    );
    assert!(matches!(
        txn(
            &mut h,
            e2,
            TxnOp::Init {
                timeout_ms: 1000,
                expected: None
            }
        ),
        Outcome::Rejected(Rejection::ProposerFenced(_))
    ));
    assert_eq!(h.view.txns["tx"].producer_epoch, 0, "still the first instance");
}

#[test]
fn transactional_producer_ids_are_taken_from_the_same_counter_as_blocks() {
    let (mut h, e, _) = Harness::with_open_stream();
    let first = match h.apply_as("n1", Some(e.0), Command::AllocateProducerIds { count: 10 }) {
        Outcome::ProducerIds { first } => first,
        o => panic!("{o:?}"),
    };
    let (pid, _) = init(&mut h, e);
    assert_eq!(pid, first + 10, "never an id a node was given for idempotent producers");
}

#[test]
fn snapshots_carry_txn_records_and_omit_them_when_there_are_none() {
    let (mut h, e, _) = Harness::with_open_stream();
    let json = serde_json::to_string(&h.view).unwrap();
    assert!(
        !json.contains("\"txns\""),
        "older nodes read snapshots without transactions"
    );
    init(&mut h, e);
    let json = serde_json::to_string(&h.view).unwrap();
    let back: View = serde_json::from_str(&json).unwrap();
    assert_eq!(back.txns, h.view.txns);
}
