//! The log linearizability checker (`tests/support/linearizable.rs`) on
//! handmade histories: good ones pass, and each mutation that breaks
//! linearizability (a read served past the high watermark, an acknowledged
//! append dropped, a stale read after an acknowledgement, a read going
//! backwards, offsets against real-time order) is reported.

mod support;

use support::linearizable::{check, Append, FinalLog, Outcome, Read, Violation};

fn acked(invoked: u64, completed: u64, offset: u64, value: &str) -> Append {
    Append {
        invoked,
        value: value.into(),
        outcome: Outcome::Acked { offset, completed },
    }
}

fn read(who: &str, invoked: u64, completed: u64, from: u64, values: &[&str], hw: u64) -> Read {
    Read {
        who: who.into(),
        invoked,
        completed,
        from,
        records: values
            .iter()
            .enumerate()
            .map(|(i, v)| (from + i as u64, v.to_string()))
            .collect(),
        high_watermark: hw,
    }
}

fn log(values: &[&str]) -> FinalLog {
    FinalLog {
        start: 0,
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

fn kinds(v: &[Violation]) -> Vec<&'static str> {
    v.iter().map(Violation::kind).collect()
}

/// Concurrent appends (one acknowledged late, one of unknown outcome that
/// landed, one that failed and did not), and reads that overlap them.
fn good() -> (Vec<Append>, Vec<Read>, FinalLog) {
    let appends = vec![
        acked(1, 4, 0, "a"),
        acked(2, 20, 1, "b"), // acknowledged long after it took effect
        Append {
            invoked: 3,
            value: "c".into(),
            outcome: Outcome::Unknown,
        },
        Append {
            invoked: 5,
            value: "x".into(),
            outcome: Outcome::Failed,
        },
        acked(8, 9, 3, "d"),
    ];
    let reads = vec![
        read("r1", 0, 2, 0, &[], 0),
        read("r2", 5, 6, 0, &["a"], 1),       // b not yet in effect
        read("r3", 7, 10, 1, &["b", "c"], 3), // b and c took effect, d not yet
        read("r4", 11, 12, 0, &["a", "b", "c", "d"], 4),
        read("r5", 13, 14, 2, &["c"], 4), // a limit: one record of two
    ];
    (appends, reads, log(&["a", "b", "c", "d"]))
}

#[test]
fn a_linearizable_history_passes() {
    let (a, r, l) = good();
    let (found, sizes) = check(&a, &r, &l);
    assert!(found.is_empty(), "{found:?}");
    assert_eq!((sizes.appends, sizes.acked, sizes.reads, sizes.offsets), (5, 3, 5, 4));
}

#[test]
fn a_read_past_the_high_watermark_is_caught() {
    let (a, mut r, l) = good();
    // A read saw "x", which was never stored, past what the log holds.
    r.push(read("rx", 15, 16, 3, &["d", "x"], 5));
    let (found, _) = check(&a, &r, &l);
    assert_eq!(kinds(&found), ["read-past-end"], "{found:?}");
    // ... or a record at or past the high watermark it reported (a read
    // concurrent with d, so that its end of 3 is not stale in itself).
    let (a, mut r, l) = good();
    r.push(read("ry", 8, 16, 2, &["c", "d"], 3));
    let (found, _) = check(&a, &r, &l);
    assert_eq!(kinds(&found), ["read-shape"], "{found:?}");
    // ... or a value the log does not hold there.
    let (a, mut r, l) = good();
    r.push(read("rz", 15, 16, 2, &["x"], 4));
    let (found, _) = check(&a, &r, &l);
    assert_eq!(kinds(&found), ["read-wrong-value"], "{found:?}");
}

#[test]
fn a_dropped_acknowledged_append_is_caught() {
    let (a, r, _) = good();
    // d (acknowledged at 3) is missing from the final log; r4 and r5 saw
    // an end the log no longer reaches.
    let (found, _) = check(&a, &r, &log(&["a", "b", "c"]));
    assert_eq!(
        kinds(&found),
        ["ack-lost", "read-past-end", "read-past-end"],
        "{found:?}"
    );
}

#[test]
fn a_stale_read_after_an_acknowledgement_is_caught() {
    let (a, mut r, l) = good();
    // d was acknowledged at 9; a read invoked at 10 sees the end at 3.
    r.push(read("stale", 10, 11, 0, &["a", "b", "c"], 3));
    let (found, _) = check(&a, &r, &l);
    assert_eq!(kinds(&found), ["not-linearizable"], "{found:?}");
    assert!(found[0].to_string().contains("stale"), "{}", found[0]);
}

#[test]
fn a_read_that_goes_backwards_is_caught() {
    let (a, mut r, l) = good();
    // r3 (completed at 10) saw the end at 3; a later read sees it at 2,
    // though nothing at offset 2 was acknowledged.
    r.push(read("back", 10, 11, 0, &["a", "b"], 2));
    let (found, _) = check(&a, &r, &l);
    // No point fits both reads: the search reports where it ran out (here
    // at r3 and at d, which r3 had to see after "back" did not).
    assert!(!found.is_empty(), "{found:?}");
    assert!(found.iter().all(|v| v.kind() == "not-linearizable"), "{found:?}");
}

#[test]
fn a_read_of_the_future_is_caught() {
    let (a, mut r, l) = good();
    // d was invoked at 8; a read completed at 7 saw it.
    r.push(read("oracle", 6, 7, 3, &["d"], 4));
    let (found, _) = check(&a, &r, &l);
    assert_eq!(kinds(&found), ["not-linearizable"], "{found:?}");
}

#[test]
fn offsets_against_real_time_order_are_caught() {
    // "late" was invoked after "early" was acknowledged, yet sits before it.
    let appends = vec![acked(1, 2, 1, "early"), acked(3, 4, 0, "late")];
    let (found, _) = check(&appends, &[], &log(&["late", "early"]));
    assert_eq!(kinds(&found), ["not-linearizable"], "{found:?}");
    // Concurrent, either order is fine.
    let appends = vec![acked(1, 4, 1, "early"), acked(2, 3, 0, "late")];
    let (found, _) = check(&appends, &[], &log(&["late", "early"]));
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_refused_append_that_was_stored_is_caught() {
    let (mut a, r, _) = good();
    a.push(Append {
        invoked: 15,
        value: "y".into(),
        outcome: Outcome::Failed,
    });
    let (found, _) = check(&a, &r, &log(&["a", "b", "c", "d", "y"]));
    assert_eq!(kinds(&found), ["failed-stored"], "{found:?}");
}
