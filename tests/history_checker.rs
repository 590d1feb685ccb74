//! The history checker (`tests/support/history.rs`) on handmade histories:
//! a good one passes, and each kind of anomaly is caught.

mod support;

use support::history::{Anomaly, FinalState, History, Session};

fn final_state(partitions: &[(u32, &[&str])]) -> FinalState {
    partitions
        .iter()
        .map(|(p, values)| {
            let records = values
                .iter()
                .enumerate()
                .map(|(o, v)| (o as u64, v.to_string()))
                .collect();
            (*p, records)
        })
        .collect()
}

fn idempotent(h: &History, name: &str) -> support::history::SessionId {
    h.session(Session {
        name: name.into(),
        idempotent: true,
        ordered: true,
        real_time: false,
    })
}

/// Three clients, every kind of outcome, reads of the tail and of old data.
fn good_history() -> History {
    let h = History::new();
    let a = h.invoke("c1", None, Some(0), "a");
    h.ack(a, 0, 0);
    let b = h.invoke("c2", None, Some(0), "b");
    let c = h.invoke("c1", None, Some(1), "c");
    h.ack(c, 1, 0);
    // b timed out: it may have landed (it did).
    h.indeterminate(b, "timeout");
    let d = h.invoke("c1", None, Some(0), "d");
    h.indeterminate(d, "503 after the write started");
    let e = h.invoke("c2", None, Some(0), "e");
    h.fail(e, "connection refused");
    h.read("r", 0, vec![(0, "a".into()), (1, "b".into())], Some(2));
    let k = idempotent(&h, "kafka");
    for (i, v) in ["k0", "k1", "k2"].iter().enumerate() {
        let op = h.invoke("kafka", Some(k), None, v);
        h.ack(op, 1, 1 + i as u64);
    }
    h.read("r", 1, vec![(1, "k0".into())], Some(4));
    h
}

#[test]
fn a_good_history_passes() {
    let h = good_history();
    let report = h.check(&final_state(&[(0, &["a", "b"]), (1, &["c", "k0", "k1", "k2"])]));
    assert!(report.is_clean(), "{report}");
    let s = &report.stats;
    assert_eq!((s.invoked, s.acked, s.failed, s.indeterminate), (8, 5, 1, 2));
    assert_eq!(s.indeterminate_stored, 1);
    assert_eq!(s.indeterminate_stored_by.get("timeout"), Some(&1));
    assert_eq!((s.reads, s.records_read, s.final_records), (2, 3, 6));
}

#[test]
fn a_lost_acknowledged_record_is_caught() {
    let h = good_history();
    // Partition 1 lost its tail: k2 was acknowledged at 1@3.
    let report = h.check(&final_state(&[(0, &["a", "b"]), (1, &["c", "k0", "k1"])]));
    assert_eq!(
        report.anomalies,
        vec![Anomaly::AckLost {
            partition: 1,
            offset: 3,
            value: "k2".into()
        }],
        "{report}"
    );
}

#[test]
fn a_changed_acknowledged_record_is_caught() {
    let h = History::new();
    let a = h.invoke("c1", None, Some(0), "a");
    h.ack(a, 0, 0);
    let b = h.invoke("c2", None, Some(0), "b");
    h.indeterminate(b, "timeout");
    // After a failover, the new owner wrote b where a was acknowledged.
    let report = h.check(&final_state(&[(0, &["b"])]));
    assert!(
        report.anomalies.contains(&Anomaly::AckChanged {
            partition: 0,
            offset: 0,
            acked: "a".into(),
            found: "b".into()
        }),
        "{report}"
    );
    assert_eq!(report.of_kind("conflict").len(), 1, "{report}");
}

#[test]
fn two_records_at_one_offset_are_caught_even_if_neither_was_acknowledged() {
    let h = History::new();
    let a = h.invoke("c1", None, Some(0), "a");
    let b = h.invoke("c2", None, Some(0), "b");
    h.indeterminate(a, "timeout");
    h.indeterminate(b, "timeout");
    // Two readers saw different records at 0@0 (two writers at one epoch).
    h.read("r1", 0, vec![(0, "a".into())], Some(1));
    h.read("r2", 0, vec![(0, "b".into())], Some(1));
    let report = h.check(&final_state(&[(0, &["b"])]));
    let conflicts = report.of_kind("conflict");
    assert_eq!(conflicts.len(), 1, "{report}");
    let Anomaly::Conflict {
        partition,
        offset,
        values,
    } = conflicts[0]
    else {
        unreachable!()
    };
    assert_eq!((*partition, *offset), (0, 0));
    assert_eq!(values.len(), 2);
    assert!(report.anomalies.iter().all(|a| a.kind() == "conflict"), "{report}");
}

#[test]
fn unacknowledged_data_served_and_then_lost_is_caught() {
    let h = History::new();
    let a = h.invoke("c1", None, Some(0), "a");
    h.ack(a, 0, 0);
    let b = h.invoke("c1", None, Some(0), "b");
    h.indeterminate(b, "timeout");
    // A reader saw b before it was durable; the owner died and b is gone.
    h.read("r", 0, vec![(0, "a".into()), (1, "b".into())], Some(2));
    let report = h.check(&final_state(&[(0, &["a"])]));
    assert_eq!(
        report.anomalies,
        vec![Anomaly::ReadLost {
            partition: 0,
            offset: 1,
            value: "b".into(),
            reader: "r (read #1)".into()
        }],
        "{report}"
    );
}

#[test]
fn a_read_past_its_own_high_watermark_is_caught() {
    let h = History::new();
    let a = h.invoke("c1", None, Some(0), "a");
    let b = h.invoke("c1", None, Some(0), "b");
    h.ack(a, 0, 0);
    h.ack(b, 0, 1);
    h.read("r", 0, vec![(0, "a".into()), (1, "b".into())], Some(1));
    let report = h.check(&final_state(&[(0, &["a", "b"])]));
    assert_eq!(report.of_kind("read-past-high-watermark").len(), 1, "{report}");
    assert_eq!(report.anomalies.len(), 1, "{report}");
}

#[test]
fn a_read_that_skips_offsets_is_caught() {
    let h = History::new();
    for (i, v) in ["a", "b", "c"].iter().enumerate() {
        let op = h.invoke("c1", None, Some(0), v);
        h.ack(op, 0, i as u64);
    }
    h.read("r", 0, vec![(0, "a".into()), (2, "c".into())], Some(3));
    let report = h.check(&final_state(&[(0, &["a", "b", "c"])]));
    assert_eq!(
        report.anomalies,
        vec![Anomaly::ReadGap {
            partition: 0,
            after: 0,
            next: 2,
            reader: "r (read #1)".into()
        }],
        "{report}"
    );
}

#[test]
fn a_hole_in_the_offsets_is_caught() {
    let h = History::new();
    let a = h.invoke("c1", None, Some(0), "a");
    let c = h.invoke("c1", None, Some(0), "c");
    h.ack(a, 0, 0);
    h.ack(c, 0, 2);
    let mut state = FinalState::new();
    state.insert(0, vec![(0, "a".into()), (2, "c".into())]);
    let report = h.check(&state);
    assert_eq!(
        report.anomalies,
        vec![Anomaly::Hole {
            partition: 0,
            expected: 1,
            found: 2
        }],
        "{report}"
    );
    // A partition that does not start at 0 has a hole too.
    let h = History::new();
    let b = h.invoke("c1", None, Some(0), "b");
    h.ack(b, 0, 1);
    let mut state = FinalState::new();
    state.insert(0, vec![(1, "b".into())]);
    assert_eq!(h.check(&state).of_kind("hole").len(), 1);
}

#[test]
fn an_idempotent_session_storing_a_retry_twice_is_caught() {
    let h = History::new();
    let k = idempotent(&h, "kafka-1");
    let m0 = h.invoke("kafka", Some(k), None, "m0");
    let m1 = h.invoke("kafka", Some(k), None, "m1");
    h.ack(m0, 0, 0);
    h.ack(m1, 0, 2);
    // librdkafka retried m0 after a failover and the new owner stored it again.
    let report = h.check(&final_state(&[(0, &["m0", "m0", "m1"])]));
    assert_eq!(
        report.anomalies,
        vec![Anomaly::Duplicate {
            value: "m0".into(),
            at: vec![(0, 0), (0, 1)],
            session: Some("kafka-1".into())
        }],
        "{report}"
    );
}

#[test]
fn a_record_sent_once_and_stored_twice_is_caught_but_a_resent_one_is_allowed() {
    let h = History::new();
    let a = h.invoke("c1", None, Some(0), "a");
    h.ack(a, 0, 0);
    let report = h.check(&final_state(&[(0, &["a", "a"])]));
    assert_eq!(report.of_kind("duplicate").len(), 1, "{report}");
    // The same value sent twice by a plain (not idempotent) client may be stored twice.
    let h = History::new();
    let a1 = h.invoke("c1", None, Some(0), "a");
    h.indeterminate(a1, "timeout");
    let a2 = h.invoke("c1", None, Some(0), "a");
    h.ack(a2, 0, 1);
    let report = h.check(&final_state(&[(0, &["a", "a"])]));
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.stats.allowed_duplicates, 1);
}

#[test]
fn a_failed_append_that_is_stored_is_caught() {
    let h = History::new();
    let a = h.invoke("c1", None, Some(0), "a");
    h.fail(a, "400 invalid_request");
    let report = h.check(&final_state(&[(0, &["a"])]));
    assert_eq!(
        report.anomalies,
        vec![Anomaly::FailedPresent {
            value: "a".into(),
            at: (0, 0),
            why: "400 invalid_request".into()
        }],
        "{report}"
    );
}

#[test]
fn a_record_nobody_sent_is_caught() {
    let h = History::new();
    let a = h.invoke("c1", None, Some(0), "a");
    h.ack(a, 0, 0);
    let report = h.check(&final_state(&[(0, &["a", "garbage"])]));
    assert_eq!(report.of_kind("phantom").len(), 1, "{report}");
    assert_eq!(report.anomalies.len(), 1, "{report}");
}

#[test]
fn an_ordered_session_stored_out_of_order_is_caught() {
    let h = History::new();
    let k = idempotent(&h, "kafka-1");
    let m0 = h.invoke("kafka", Some(k), None, "m0");
    let m1 = h.invoke("kafka", Some(k), None, "m1");
    h.ack(m1, 0, 0);
    h.ack(m0, 0, 1);
    let report = h.check(&final_state(&[(0, &["m1", "m0"])]));
    assert_eq!(
        report.anomalies,
        vec![Anomaly::Reordered {
            session: "kafka-1".into(),
            partition: 0,
            first: (1, "m0".into()),
            then: (0, "m1".into())
        }],
        "{report}"
    );
}

#[test]
fn an_append_acknowledged_below_an_earlier_acknowledged_one_is_caught() {
    let h = History::new();
    let a = h.invoke("c1", None, Some(0), "a");
    h.ack(a, 0, 1);
    // b is sent after a was acknowledged, yet lands below it.
    let b = h.invoke("c2", None, Some(0), "b");
    h.ack(b, 0, 0);
    let report = h.check(&final_state(&[(0, &["b", "a"])]));
    assert_eq!(
        report.anomalies,
        vec![Anomaly::RealTime {
            partition: 0,
            earlier: (1, "a".into()),
            later: (0, "b".into())
        }],
        "{report}"
    );
    // Concurrent appends may land in either order.
    let h = History::new();
    let a = h.invoke("c1", None, Some(0), "a");
    let b = h.invoke("c2", None, Some(0), "b");
    h.ack(a, 0, 1);
    h.ack(b, 0, 0);
    assert!(h.check(&final_state(&[(0, &["b", "a"])])).is_clean());
}

#[test]
fn an_inconsistent_history_is_reported_as_malformed() {
    let h = History::new();
    let a = h.invoke("c1", None, Some(0), "a");
    h.ack(a, 0, 0);
    h.fail(a, "late");
    let b = h.invoke("c1", None, Some(1), "b");
    h.ack(b, 0, 1);
    let report = h.check(&final_state(&[(0, &["a", "b"])]));
    assert_eq!(report.of_kind("malformed").len(), 2, "{report}");
}

#[test]
fn the_report_says_what_happened() {
    let h = good_history();
    let report = h.check(&final_state(&[(0, &["a"]), (1, &["c", "k0", "k1", "k2"])]));
    let text = report.to_string();
    assert!(
        text.contains("8 appends invoked: 5 acknowledged, 1 failed, 2 indeterminate"),
        "{text}"
    );
    assert!(text.contains("read-lost: r (read #1) read \"b\" at 0@1"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    h.dump(&dir.path().join("history.jsonl")).unwrap();
    let dumped = std::fs::read_to_string(dir.path().join("history.jsonl")).unwrap();
    assert_eq!(dumped.lines().count(), 1 + h.events().len());
}
