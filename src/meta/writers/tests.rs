use super::*;
use crate::batch::{compress_batch, encode_batch, with_producer};
use bytes::Bytes;

fn p(id: &str, epoch: u64, seq: u64) -> DsWrite {
    DsWrite {
        producer: Some(ProducerSeq {
            id: id.into(),
            epoch,
            seq,
        }),
        ..Default::default()
    }
}

fn seq(s: &str) -> DsWrite {
    DsWrite {
        stream_seq: Some(s.into()),
        ..Default::default()
    }
}

fn mark(w: DsWrite, end: u64) -> WriterMark {
    WriterMark {
        write: w,
        end: Offset(end),
    }
}

fn rec(v: &str) -> Record {
    Record {
        timestamp_ms: 1,
        key: None,
        value: Some(Bytes::from(v.to_string())),
        headers: vec![],
    }
}

#[test]
fn a_new_producer_starts_at_zero() {
    let t = WriterTable::default();
    assert_eq!(t.check(&p("a", 0, 0)), DsVerdict::Accept);
    assert_eq!(t.check(&p("a", 3, 0)), DsVerdict::Accept);
    assert_eq!(
        t.check(&p("a", 0, 2)),
        DsVerdict::Gap {
            expected: 0,
            received: 2
        }
    );
}

#[test]
fn retries_are_duplicates_with_the_last_position_and_gaps_are_refused() {
    let mut t = WriterTable::default();
    t.record(&mark(p("a", 0, 0), 3));
    t.record(&mark(p("a", 0, 1), 5));
    assert_eq!(t.check(&p("a", 0, 2)), DsVerdict::Accept);
    let dup = DsVerdict::Duplicate {
        epoch: 0,
        last_seq: 1,
        next: Offset(5),
    };
    assert_eq!(t.check(&p("a", 0, 1)), dup);
    assert_eq!(t.check(&p("a", 0, 0)), dup, "any sequence already accepted");
    assert_eq!(
        t.check(&p("a", 0, 4)),
        DsVerdict::Gap {
            expected: 2,
            received: 4
        }
    );
}

#[test]
fn epochs_fence_older_writers_and_restart_at_zero() {
    let mut t = WriterTable::default();
    t.record(&mark(p("a", 1, 4), 9));
    assert_eq!(t.check(&p("a", 0, 5)), DsVerdict::StaleEpoch { current: 1 });
    assert_eq!(t.check(&p("a", 2, 0)), DsVerdict::Accept);
    assert_eq!(t.check(&p("a", 2, 5)), DsVerdict::EpochNotAtZero);
}

#[test]
fn a_retry_is_a_duplicate_whatever_its_stream_seq_and_seqs_must_increase() {
    let mut t = WriterTable::default();
    let w = DsWrite {
        stream_seq: Some("0002".into()),
        ..p("a", 0, 0)
    };
    t.record(&mark(w.clone(), 1));
    assert!(matches!(t.check(&w), DsVerdict::Duplicate { .. }));
    assert_eq!(t.check(&seq("0002")), DsVerdict::SeqNotAfter { last: "0002".into() });
    assert_eq!(t.check(&seq("0001")), DsVerdict::SeqNotAfter { last: "0002".into() });
    assert_eq!(t.check(&seq("0003")), DsVerdict::Accept);
}

#[test]
fn recording_old_or_repeated_marks_changes_nothing() {
    let mut t = WriterTable::default();
    t.record(&mark(p("a", 0, 0), 1));
    t.record(&mark(p("a", 0, 1), 2));
    t.record(&mark(seq("b"), 2));
    let once = t.clone();
    t.record(&mark(p("a", 0, 1), 2));
    t.record(&mark(p("a", 0, 0), 1));
    t.record(&mark(seq("a"), 1));
    assert_eq!(t, once);
    let mut rebuilt = WriterTable::default();
    rebuilt.merge(&once);
    assert_eq!(rebuilt, once, "marks() rebuild the table");
}

#[test]
fn the_producer_whose_append_ended_first_is_forgotten_past_the_cap() {
    let mut t = WriterTable::default();
    for i in 0..=MAX_WRITERS as u64 {
        t.record(&mark(p(&format!("p{i}"), 0, 0), i + 1));
    }
    assert!(t.producer("p0").is_none());
    assert!(t.producer("p1").is_some());
    assert!(t.producer(&format!("p{MAX_WRITERS}")).is_some());
}

#[test]
fn legacy_state_is_used_only_for_a_writer_the_table_does_not_know() {
    let legacy = DsWrite {
        legacy_producer: Some(WriterState {
            epoch: 0,
            seq: 4,
            next: Offset(7),
        }),
        legacy_stream_seq: Some("m".into()),
        ..p("a", 0, 5)
    };
    let mut t = WriterTable::default();
    assert_eq!(t.check(&legacy), DsVerdict::Accept);
    let retry = DsWrite {
        producer: Some(ProducerSeq {
            id: "a".into(),
            epoch: 0,
            seq: 4,
        }),
        ..legacy.clone()
    };
    assert!(matches!(t.check(&retry), DsVerdict::Duplicate { last_seq: 4, .. }));
    let old_seq = DsWrite {
        producer: None,
        stream_seq: Some("l".into()),
        ..legacy.clone()
    };
    assert_eq!(t.check(&old_seq), DsVerdict::SeqNotAfter { last: "m".into() });
    // Once the table knows the producer, its own state wins.
    t.record(&mark(p("a", 0, 9), 20));
    assert!(matches!(t.check(&legacy), DsVerdict::Duplicate { last_seq: 9, .. }));
}

#[test]
fn a_stamped_batch_names_its_write_and_is_read_back() {
    let w = DsWrite {
        stream_seq: Some("s1".into()),
        legacy_stream_seq: Some("not stored".into()),
        ..p("writer-1", 2, 7)
    };
    let records = stamp(&[rec("x"), rec("y")], &w);
    assert_eq!(records[0].headers.len(), 1);
    assert!(records[1].headers.is_empty(), "only the first record is marked");
    assert_eq!(read_mark(&records[0]), Some(w.stored()));
    let batch = encode_batch(Offset(40), &records);
    assert_eq!(
        WriterTable::of_batch(&batch),
        Some(WriterMark {
            write: w.stored(),
            end: Offset(42)
        })
    );
}

#[test]
fn unmarked_compressed_and_kafka_producer_batches_carry_no_mark() {
    let plain = encode_batch(Offset(0), &[rec("x")]);
    assert_eq!(WriterTable::of_batch(&plain), None);
    let marked = encode_batch(Offset(0), &stamp(&[rec("x")], &p("a", 0, 0)));
    assert_eq!(WriterTable::of_batch(&compress_batch(&marked, 1)), None);
    assert_eq!(WriterTable::of_batch(&with_producer(&marked, 5, 0, 0)), None);
    assert_eq!(WriterTable::of_batch(b"garbage"), None);
}

#[test]
fn replayed_batches_rebuild_the_writer_state() {
    let a0 = encode_batch(Offset(0), &stamp(&[rec("x")], &p("a", 0, 0)));
    let plain = encode_batch(Offset(1), &[rec("k")]);
    let a1 = encode_batch(Offset(2), &stamp(&[rec("y"), rec("z")], &p("a", 0, 1)));
    let s = encode_batch(Offset(4), &stamp(&[rec("q")], &seq("0009")));
    // Two batches in one WAL entry, as Kafka appends may store them.
    let joined: Vec<u8> = [&plain[..], &a1[..]].concat();
    let t = WriterTable::of_batches([&a0[..], &joined[..], &s[..]]);
    assert_eq!(
        t.producer("a"),
        Some(&WriterState {
            epoch: 0,
            seq: 1,
            next: Offset(4)
        })
    );
    assert_eq!(t.stream_seq(), Some("0009"));
    assert!(matches!(t.check(&p("a", 0, 1)), DsVerdict::Duplicate { .. }));
    assert_eq!(t.check(&p("a", 0, 2)), DsVerdict::Accept);
}

#[test]
fn the_table_round_trips_and_an_empty_one_is_not_written() {
    let mut t = WriterTable::default();
    assert_eq!(serde_json::to_string(&t).unwrap(), "{}");
    t.record(&mark(p("a", 1, 2), 3));
    t.record(&mark(seq("z"), 3));
    let json = serde_json::to_string(&t).unwrap();
    assert_eq!(serde_json::from_str::<WriterTable>(&json).unwrap(), t);
}
