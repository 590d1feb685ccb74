//! Every accepted and refused transition of a transactional id's record.

use super::*;
use crate::ids::TopicId;

fn s(p: u32) -> StreamId {
    StreamId::new(TopicId(1), p)
}

struct World {
    txns: BTreeMap<String, TxnRow>,
    next_producer_id: i64,
    index: u64,
}

impl World {
    fn new() -> Self {
        Self {
            txns: BTreeMap::new(),
            next_producer_id: 1000,
            index: 0,
        }
    }
    fn apply(&mut self, id: &str, op: TxnOp) -> TxnApplied {
        self.index += 1;
        let before = self.txns.clone();
        let ctx = TxnContext {
            index: LogIndex(self.index),
            next_producer_id: &mut self.next_producer_id,
        };
        let r = apply(&mut self.txns, ctx, id, &op);
        if r.is_err() {
            assert_eq!(self.txns, before, "a refused {op:?} changed nothing");
        }
        r
    }
    fn refused(&mut self, id: &str, op: TxnOp) -> TxnRefusal {
        self.apply(id, op).expect_err("refused").0
    }
    fn init(&mut self, id: &str) -> (i64, i16) {
        match self
            .apply(
                id,
                TxnOp::Init {
                    timeout_ms: 60_000,
                    expected: None,
                },
            )
            .unwrap()
            .0
        {
            TxnDone::Producer { producer_id, epoch } => (producer_id, epoch),
            other => panic!("{other:?}"),
        }
    }
    fn row(&self, id: &str) -> &TxnRow {
        &self.txns[id]
    }
}

fn add(producer_id: i64, epoch: i16, ps: &[u32]) -> TxnOp {
    TxnOp::AddPartitions {
        producer_id,
        epoch,
        partitions: ps.iter().map(|&p| s(p)).collect(),
    }
}

fn group(producer_id: i64, epoch: i16, group: &str) -> TxnOp {
    TxnOp::AddGroup {
        producer_id,
        epoch,
        group: group.into(),
    }
}

fn offsets(producer_id: i64, epoch: i16, group: &str, offsets: &[(u32, i64)]) -> TxnOp {
    TxnOp::CommitOffsets {
        producer_id,
        epoch,
        group: group.into(),
        offsets: offsets.iter().map(|&(p, o)| (s(p), o, None)).collect(),
    }
}

fn end(producer_id: i64, epoch: i16, commit: bool) -> TxnOp {
    TxnOp::End {
        producer_id,
        epoch,
        commit,
    }
}

/// As entries written before `started_at` existed: whatever is ending.
fn complete(producer_id: i64, epoch: i16) -> TxnOp {
    TxnOp::Complete {
        producer_id,
        epoch,
        started_at: None,
    }
}

fn complete_begun_at(producer_id: i64, epoch: i16, started_at: u64) -> TxnOp {
    TxnOp::Complete {
        producer_id,
        epoch,
        started_at: Some(LogIndex(started_at)),
    }
}

/// Simulation seed 591: a coordinator finished transaction 1 late (its
/// ticker wrote the markers again), and its Complete, naming only the
/// producer and the epoch, completed transaction 2 of the same epoch, whose
/// one partition never got its marker: that partition's last stable offset
/// stayed below the open transaction forever.
#[test]
fn a_late_complete_of_a_finished_transaction_leaves_the_next_one_ending() {
    let mut w = World::new();
    let (pid, e) = w.init("t");
    w.apply("t", add(pid, e, &[0])).unwrap();
    let first = w.row("t").started_at.0;
    w.apply("t", end(pid, e, true)).unwrap();
    w.apply("t", complete_begun_at(pid, e, first)).unwrap();
    w.apply("t", add(pid, e, &[4])).unwrap();
    let second = w.row("t").started_at.0;
    assert_ne!(first, second);
    w.apply("t", end(pid, e, true)).unwrap();
    assert_eq!(
        w.refused("t", complete_begun_at(pid, e, first)),
        TxnRefusal::InvalidState,
        "the first transaction's late Complete"
    );
    assert_eq!(w.row("t").state, TxnState::PrepareCommit);
    w.apply("t", complete_begun_at(pid, e, second)).unwrap();
    assert_eq!(w.row("t").state, TxnState::CompleteCommit);
}

#[test]
fn a_complete_logged_without_the_transactions_start_still_decodes() {
    let old = r#"{"Complete":{"producer_id":1,"epoch":2}}"#;
    let op: TxnOp = serde_json::from_str(old).unwrap();
    assert_eq!(op, complete(1, 2));
}

#[test]
fn init_gives_a_new_id_at_epoch_0_then_bumps_the_epoch() {
    let mut w = World::new();
    assert_eq!(w.init("a"), (1000, 0));
    assert_eq!(w.init("b"), (1001, 0), "each transactional id its own producer id");
    assert_eq!(w.init("a"), (1000, 1));
    assert_eq!(w.row("a").state, TxnState::Empty);
    assert_eq!(w.next_producer_id, 1002);
}

#[test]
fn a_commit_goes_ongoing_prepare_complete_and_hands_its_offsets_over() {
    let mut w = World::new();
    let (pid, e) = w.init("t");
    w.apply("t", add(pid, e, &[0, 1])).unwrap();
    assert_eq!(w.row("t").state, TxnState::Ongoing);
    assert_eq!(w.row("t").started_at, LogIndex(2));
    w.apply("t", add(pid, e, &[1, 2])).unwrap();
    assert_eq!(w.row("t").started_at, LogIndex(2), "still the same transaction");
    assert_eq!(w.row("t").partitions.len(), 3);
    w.apply("t", group(pid, e, "g")).unwrap();
    w.apply("t", offsets(pid, e, "g", &[(0, 5)])).unwrap();
    w.apply("t", offsets(pid, e, "g", &[(0, 7)])).unwrap();
    w.apply("t", end(pid, e, true)).unwrap();
    assert_eq!(w.row("t").state, TxnState::PrepareCommit);
    assert_eq!(w.refused("t", add(pid, e, &[3])), TxnRefusal::Concurrent);
    assert_eq!(w.refused("t", end(pid, e, true)), TxnRefusal::Concurrent);
    assert_eq!(w.refused("t", end(pid, e, false)), TxnRefusal::InvalidState);
    let (_, handed) = w.apply("t", complete(pid, e)).unwrap();
    assert_eq!(handed["g"], vec![(s(0), 7, None)], "the last offset per partition");
    let row = w.row("t");
    assert_eq!(row.state, TxnState::CompleteCommit);
    assert!(row.partitions.is_empty() && row.offsets.is_empty());
    // A retried EndTxn of the same outcome is answered, changing nothing.
    w.apply("t", end(pid, e, true)).unwrap();
    assert_eq!(w.refused("t", end(pid, e, false)), TxnRefusal::InvalidState);
    // The next transaction begins from CompleteCommit.
    w.apply("t", add(pid, e, &[0])).unwrap();
    assert_eq!(w.row("t").state, TxnState::Ongoing);
}

#[test]
fn an_abort_discards_the_offsets() {
    let mut w = World::new();
    let (pid, e) = w.init("t");
    w.apply("t", group(pid, e, "g")).unwrap();
    w.apply("t", offsets(pid, e, "g", &[(0, 3)])).unwrap();
    w.apply("t", end(pid, e, false)).unwrap();
    assert_eq!(w.row("t").state, TxnState::PrepareAbort);
    let (_, handed) = w.apply("t", complete(pid, e)).unwrap();
    assert!(handed.is_empty());
    assert_eq!(w.row("t").state, TxnState::CompleteAbort);
    w.apply("t", end(pid, e, false)).unwrap();
}

#[test]
fn a_new_instance_fences_the_old_and_aborts_what_it_left_open() {
    let mut w = World::new();
    let (pid, e) = w.init("t");
    w.apply("t", add(pid, e, &[0])).unwrap();
    let (done, _) = w
        .apply(
            "t",
            TxnOp::Init {
                timeout_ms: 60_000,
                expected: None,
            },
        )
        .unwrap();
    assert_eq!(done, TxnDone::Fencing);
    assert_eq!(
        (w.row("t").state, w.row("t").producer_epoch),
        (TxnState::PrepareAbort, e + 1)
    );
    // The old instance is fenced in everything it tries.
    assert_eq!(w.refused("t", add(pid, e, &[1])), TxnRefusal::Fenced);
    assert_eq!(w.refused("t", end(pid, e, true)), TxnRefusal::Fenced);
    assert_eq!(w.refused("t", complete(pid, e)), TxnRefusal::Fenced);
    // The new one retries while the abort is under way, then gets epoch + 2.
    assert_eq!(
        w.refused(
            "t",
            TxnOp::Init {
                timeout_ms: 60_000,
                expected: None
            }
        ),
        TxnRefusal::Concurrent
    );
    w.apply("t", complete(pid, e + 1)).unwrap();
    assert_eq!(w.row("t").state, TxnState::CompleteAbort);
    assert_eq!(w.init("t"), (pid, e + 2));
}

#[test]
fn the_coordinator_times_out_an_ongoing_transaction_and_fences_its_producer() {
    let mut w = World::new();
    let (pid, e) = w.init("t");
    assert_eq!(
        w.refused(
            "t",
            TxnOp::Abort {
                producer_id: pid,
                epoch: e
            }
        ),
        TxnRefusal::InvalidState,
        "nothing ongoing"
    );
    w.apply("t", add(pid, e, &[0])).unwrap();
    w.apply(
        "t",
        TxnOp::Abort {
            producer_id: pid,
            epoch: e,
        },
    )
    .unwrap();
    assert_eq!(
        (w.row("t").state, w.row("t").producer_epoch),
        (TxnState::PrepareAbort, e + 1)
    );
    assert_eq!(w.refused("t", end(pid, e, true)), TxnRefusal::Fenced);
    // A timeout decided on an older view (the epoch moved on) does nothing.
    assert_eq!(
        w.refused(
            "t",
            TxnOp::Abort {
                producer_id: pid,
                epoch: e
            }
        ),
        TxnRefusal::Fenced
    );
}

#[test]
fn ops_for_another_producer_or_no_record_are_refused() {
    let mut w = World::new();
    assert_eq!(w.refused("t", add(1, 0, &[0])), TxnRefusal::UnknownProducer);
    let (pid, e) = w.init("t");
    assert_eq!(w.refused("t", add(pid + 1, e, &[0])), TxnRefusal::UnknownProducer);
    assert_eq!(w.refused("t", add(pid, e + 1, &[0])), TxnRefusal::Fenced);
    assert_eq!(w.refused("t", end(pid, e, true)), TxnRefusal::InvalidState, "Empty");
    assert_eq!(w.refused("t", complete(pid, e)), TxnRefusal::InvalidState);
    assert_eq!(
        w.refused(
            "t",
            TxnOp::CommitOffsets {
                producer_id: pid,
                epoch: e,
                group: "g".into(),
                offsets: vec![(s(0), 1, None)]
            }
        ),
        TxnRefusal::InvalidState,
        "the group was not added"
    );
}

#[test]
fn init_with_the_expected_producer_recovers_and_a_wrong_one_is_refused() {
    let mut w = World::new();
    let init = |expected| TxnOp::Init {
        timeout_ms: 1000,
        expected: Some(expected),
    };
    assert_eq!(w.refused("t", init((5, 0))), TxnRefusal::UnknownProducer);
    let (pid, e) = w.init("t");
    assert_eq!(w.refused("t", init((pid, e + 3))), TxnRefusal::Fenced);
    assert_eq!(w.refused("t", init((pid + 1, e))), TxnRefusal::UnknownProducer);
    let (done, _) = w.apply("t", init((pid, e))).unwrap();
    assert_eq!(
        done,
        TxnDone::Producer {
            producer_id: pid,
            epoch: e + 1
        }
    );
}

#[test]
fn an_exhausted_epoch_gets_a_new_producer_id() {
    let mut w = World::new();
    let (pid, _) = w.init("t");
    w.txns.get_mut("t").unwrap().producer_epoch = i16::MAX - 1;
    let (fresh, e) = w.init("t");
    assert_ne!(fresh, pid);
    assert_eq!(e, 0);
}

#[test]
fn bad_input_is_refused_and_sizes_are_bounded() {
    let mut w = World::new();
    let init = |timeout_ms| TxnOp::Init {
        timeout_ms,
        expected: None,
    };
    assert_eq!(w.refused("", init(1000)), TxnRefusal::Invalid);
    assert_eq!(
        w.refused(&"x".repeat(MAX_TXN_ID_BYTES + 1), init(1000)),
        TxnRefusal::Invalid
    );
    assert_eq!(w.refused("t", init(0)), TxnRefusal::Invalid);
    assert_eq!(w.refused("t", init(MAX_TXN_TIMEOUT_MS + 1)), TxnRefusal::Invalid);
    let (pid, e) = w.init("t");
    assert_eq!(w.refused("t", add(pid, e, &[])), TxnRefusal::Invalid);
    let many: Vec<u32> = (0..=MAX_TXN_PARTITIONS as u32).collect();
    assert_eq!(w.refused("t", add(pid, e, &many)), TxnRefusal::Invalid);
    assert_eq!(
        w.refused(
            "t",
            TxnOp::AddGroup {
                producer_id: pid,
                epoch: e,
                group: String::new()
            }
        ),
        TxnRefusal::Invalid
    );
    for g in 0..MAX_TXN_GROUPS {
        w.apply("t", group(pid, e, &format!("g{g}"))).unwrap();
    }
    assert_eq!(
        w.refused(
            "t",
            TxnOp::AddGroup {
                producer_id: pid,
                epoch: e,
                group: "one-more".into()
            }
        ),
        TxnRefusal::Invalid
    );
    let offsets: Vec<TxnOffset> = (0..=MAX_TXN_OFFSETS as u32).map(|p| (s(p), 1, None)).collect();
    assert_eq!(
        w.refused(
            "t",
            TxnOp::CommitOffsets {
                producer_id: pid,
                epoch: e,
                group: "g0".into(),
                offsets
            }
        ),
        TxnRefusal::Invalid
    );
    // The number of transactional ids is bounded too.
    let mut w = World::new();
    for i in 0..MAX_TXNS {
        w.init(&format!("t{i}"));
    }
    assert_eq!(w.refused("one-more", init(1000)), TxnRefusal::Invalid);
}

#[test]
fn records_and_ops_round_trip_through_json() {
    let mut w = World::new();
    let (pid, e) = w.init("t");
    w.apply("t", add(pid, e, &[0, 3])).unwrap();
    let json = serde_json::to_string(&w.txns).unwrap();
    let back: BTreeMap<String, TxnRow> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, w.txns);
    for op in [
        TxnOp::Init {
            timeout_ms: 5,
            expected: Some((1, 2)),
        },
        add(1, 2, &[4]),
        TxnOp::CommitOffsets {
            producer_id: 1,
            epoch: 2,
            group: "g".into(),
            offsets: vec![(s(1), 9, Some("m".into()))],
        },
        end(1, 2, false),
        TxnOp::Abort {
            producer_id: 1,
            epoch: 2,
        },
        complete(1, 2),
        complete_begun_at(1, 2, 7),
    ] {
        let back: TxnOp = serde_json::from_str(&serde_json::to_string(&op).unwrap()).unwrap();
        assert_eq!(back, op);
    }
}
