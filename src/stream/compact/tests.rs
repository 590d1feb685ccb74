use super::*;
use crate::batch::marker::{encode_marker, Marker};
use crate::batch::{encode_batch, parse_batch, transactional, with_producer};

fn rec(key: &str, value: Option<&str>, ts: i64) -> Record {
    Record {
        timestamp_ms: ts,
        key: Some(Bytes::copy_from_slice(key.as_bytes())),
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers: vec![],
    }
}

/// Every kept record with its offset, in order.
fn records_of(r: &Rewrite) -> Vec<(u64, String, Option<String>)> {
    (r.batches.iter())
        .filter(|b| !parse_batch("t", b).unwrap().is_control)
        .flat_map(|b| decode_records("t", b).unwrap())
        .map(|(o, r)| {
            let s = |b: Option<Bytes>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
            (o.get(), s(r.key).unwrap(), s(r.value))
        })
        .collect()
}

fn concat(batches: &[Bytes]) -> Bytes {
    batches.concat().into()
}

#[test]
fn each_key_keeps_its_latest_record_at_its_offset() {
    let data = concat(&[
        encode_batch(
            Offset(0),
            &[rec("a", Some("1"), 1), rec("b", Some("1"), 1), rec("a", Some("2"), 2)],
        ),
        encode_batch(Offset(3), &[rec("c", Some("1"), 3), rec("b", Some("2"), 3)]),
        encode_batch(Offset(5), &[rec("a", Some("3"), 4)]),
    ]);
    let r = rewrite("t", std::slice::from_ref(&data), &Rules::default()).unwrap();
    assert_eq!(
        records_of(&r),
        [
            (3, "c".into(), Some("1".into())),
            (4, "b".into(), Some("2".into())),
            (5, "a".into(), Some("3".into())),
        ]
    );
    assert_eq!((r.records_in, r.records_out), (6, 3));
    assert_eq!(r.bytes_in, data.len() as u64);
    assert!(r.bytes_out < r.bytes_in);
    // The first batch lost every record and went; the second is whole and
    // kept byte for byte, as is the third.
    assert_eq!(r.batches.len(), 2);
    assert_eq!(
        r.batches[0],
        data.slice(data.len() - r.bytes_out as usize..data.len() - r.batches[1].len())
    );
    // Compacting again changes nothing.
    let again = rewrite("t", &[concat(&r.batches)], &Rules::default()).unwrap();
    assert_eq!(again.batches, r.batches);
}

#[test]
fn a_partly_kept_batch_keeps_its_producer_epoch_and_end() {
    let b = with_producer(
        &encode_batch(
            Offset(10),
            &[rec("a", Some("1"), 1), rec("b", Some("1"), 1), rec("a", Some("2"), 2)],
        ),
        7,
        3,
        100,
    );
    let mut b = b.to_vec();
    crate::batch::set_leader_epoch(&mut b, 4);
    let r = rewrite("t", &[Bytes::from(b)], &Rules::default()).unwrap();
    assert_eq!(r.batches.len(), 1);
    let info = parse_batch("t", &r.batches[0]).unwrap();
    assert_eq!(
        (info.base_offset, info.end_offset()),
        (Offset(11), Offset(13)),
        "starts at b, ends where it did"
    );
    assert_eq!((info.producer_id, info.producer_epoch, info.base_sequence), (7, 3, 100));
    assert_eq!(leader_epoch(&r.batches[0]), 4);
    assert_eq!(
        records_of(&r),
        [(11, "b".into(), Some("1".into())), (12, "a".into(), Some("2".into()))]
    );
}

#[test]
fn tombstones_stay_until_the_horizon_and_then_take_their_key() {
    let data = encode_batch(
        Offset(0),
        &[
            rec("a", Some("1"), 10),
            rec("b", Some("1"), 10),
            rec("a", None, 20),
            rec("b", None, 40),
        ],
    );
    let at = |horizon| {
        let rules = Rules {
            tombstones_before_ms: horizon,
            ..Rules::default()
        };
        records_of(&rewrite("t", std::slice::from_ref(&data), &rules).unwrap())
    };
    assert_eq!(
        at(0),
        [(2, "a".into(), None), (3, "b".into(), None)],
        "both tombstones kept"
    );
    assert_eq!(at(30), [(3, "b".into(), None)], "a's tombstone is past the horizon");
    assert_eq!(
        at(41),
        [(3, "b".into(), None)],
        "b's is too, but the run's last record always stays"
    );
    // Past the horizon and not last: gone with its key.
    let more = concat(&[data.clone(), encode_batch(Offset(4), &[rec("c", Some("1"), 50)])]);
    let rules = Rules {
        tombstones_before_ms: 41,
        ..Rules::default()
    };
    assert_eq!(
        records_of(&rewrite("t", &[more], &rules).unwrap()),
        [(4, "c".into(), Some("1".into()))]
    );
}

#[test]
fn aborted_records_go_and_markers_stay() {
    let txn = |base: u64, values: &[(&str, &str)], pid: i64| {
        let records: Vec<Record> = values.iter().map(|(k, v)| rec(k, Some(v), 1)).collect();
        transactional(&with_producer(&encode_batch(Offset(base), &records), pid, 0, 0), false)
    };
    let mut commit = encode_marker(1, 0, Marker::Commit, 0, 1).to_vec();
    crate::batch::set_base_offset(&mut commit, Offset(2));
    let mut abort = encode_marker(2, 0, Marker::Abort, 0, 1).to_vec();
    crate::batch::set_base_offset(&mut abort, Offset(4));
    let data = concat(&[
        txn(0, &[("a", "committed"), ("b", "committed")], 1),
        Bytes::from(commit.clone()),
        txn(3, &[("a", "aborted")], 2),
        Bytes::from(abort.clone()),
    ]);
    let rules = Rules {
        aborted: vec![Aborted {
            producer_id: 2,
            first: Offset(3),
            marker: Offset(4),
        }],
        ..Rules::default()
    };
    let r = rewrite("t", &[data], &rules).unwrap();
    assert_eq!(
        records_of(&r),
        [
            (0, "a".into(), Some("committed".into())),
            (1, "b".into(), Some("committed".into()))
        ],
        "the aborted value of a does not supersede the committed one"
    );
    let controls: Vec<Bytes> = (r.batches.iter())
        .filter(|b| parse_batch("t", b).unwrap().is_control)
        .cloned()
        .collect();
    assert_eq!(controls, [Bytes::from(commit), Bytes::from(abort)]);
}

#[test]
fn the_runs_last_record_stays_so_it_still_ends_at_its_last_offset() {
    // The run's last record is an aborted one: it stays (read_committed
    // readers skip it by the aborted list), and supersedes nothing.
    let data = concat(&[
        encode_batch(Offset(0), &[rec("a", Some("1"), 1), rec("b", Some("1"), 1)]),
        transactional(
            &with_producer(&encode_batch(Offset(2), &[rec("a", Some("x"), 1)]), 5, 0, 0),
            false,
        ),
    ]);
    let rules = Rules {
        aborted: vec![Aborted {
            producer_id: 5,
            first: Offset(2),
            marker: Offset(3),
        }],
        ..Rules::default()
    };
    let r = rewrite("t", &[data], &rules).unwrap();
    assert_eq!(
        records_of(&r),
        [
            (0, "a".into(), Some("1".into())),
            (1, "b".into(), Some("1".into())),
            (2, "a".into(), Some("x".into())),
        ],
        "the aborted record stays as the run's last; the committed a is not superseded by it"
    );
    let last = parse_batch("t", r.batches.last().unwrap()).unwrap();
    assert_eq!(last.end_offset(), Offset(3));
}

#[test]
fn a_run_spanning_chunks_is_compacted_as_one_and_bad_data_is_an_error() {
    let one = encode_batch(Offset(0), &[rec("a", Some("1"), 1)]);
    let two = encode_batch(Offset(1), &[rec("a", Some("2"), 2)]);
    let r = rewrite("t", &[one, two.clone()], &Rules::default()).unwrap();
    assert_eq!(r.batches, std::slice::from_ref(&two));
    let mut broken = two.to_vec();
    *broken.last_mut().unwrap() ^= 1;
    assert!(rewrite("t", &[Bytes::from(broken)], &Rules::default()).is_err());
}

fn chunk(base: u64, end: u64, bytes: u64, max_timestamp: i64) -> IndexedChunk {
    IndexedChunk {
        base: Offset(base),
        end: Offset(end),
        key: format!("data/{base}.obj"),
        byte_start: 0,
        byte_end: bytes,
        max_timestamp,
        crc: 0,
    }
}

fn compacted(config: impl FnOnce(&mut TopicConfig)) -> TopicConfig {
    let mut c = TopicConfig {
        cleanup_policy: Some(crate::meta::CleanupPolicy::Compact),
        ..TopicConfig::default()
    };
    config(&mut c);
    c
}

#[test]
fn a_run_is_planned_by_dirty_ratio_lag_and_the_stable_end() {
    let chunks = [chunk(0, 10, 100, 10), chunk(10, 20, 100, 20), chunk(20, 30, 100, 30)];
    let due = |stable: u64, compacted: u64, now: i64| Due {
        stable_end: Offset(stable),
        compacted_end: Offset(compacted),
        now_ms: now,
    };
    let ends = |run: Option<Vec<IndexedChunk>>| run.map(|r| (r[0].base.get(), r[r.len() - 1].end.get()));
    let default = compacted(|_| {});
    // Never compacted: all dirty, the whole run.
    assert_eq!(ends(plan(&chunks, &default, due(30, 0, 100))), Some((0, 30)));
    // Not past the stable end (an open transaction at 25).
    assert_eq!(ends(plan(&chunks, &default, due(25, 0, 100))), Some((0, 20)));
    // Dirty 1 of 3 chunks: below the default ratio 0.5.
    assert_eq!(ends(plan(&chunks, &default, due(30, 20, 100))), None);
    let low = compacted(|c| c.min_cleanable_dirty_ratio = crate::meta::Ratio::new(0.3));
    assert_eq!(ends(plan(&chunks, &low, due(30, 20, 100))), Some((0, 30)));
    // Nothing dirty: nothing to do, whatever the ratio.
    let zero = compacted(|c| c.min_cleanable_dirty_ratio = crate::meta::Ratio::new(0.0));
    assert_eq!(ends(plan(&chunks, &zero, due(30, 30, 100))), None);
    // min.compaction.lag.ms: the last chunk's newest record is too young.
    let lag = compacted(|c| c.min_compaction_lag_ms = Some(75));
    assert_eq!(ends(plan(&chunks, &lag, due(30, 0, 100))), Some((0, 20)));
    // max.compaction.lag.ms: a dirty chunk overdue forces the run.
    let max = compacted(|c| c.max_compaction_lag_ms = Some(50));
    assert_eq!(ends(plan(&chunks, &max, due(30, 20, 100))), Some((0, 30)));
    assert_eq!(ends(plan(&chunks, &max, due(30, 20, 60))), None, "not overdue yet");
    // The run stops before MAX_RUN_BYTES (but takes at least one chunk).
    let big = [chunk(0, 10, MAX_RUN_BYTES, 1), chunk(10, 20, 1, 1)];
    assert_eq!(ends(plan(&big, &default, due(20, 0, 100))), Some((0, 10)));
    assert_eq!(dirty_ratio(&chunks, Offset(10)), 2.0 / 3.0);
    assert_eq!(dirty_ratio(&[], Offset(0)), 0.0);
}

#[test]
fn the_lag_is_the_wait_of_the_first_dirty_chunk() {
    let chunks = [chunk(0, 10, 100, 10), chunk(10, 20, 100, 20), chunk(20, 30, 100, 30)];
    assert_eq!(lag_ms(&chunks, Offset(0), 100), 90);
    assert_eq!(lag_ms(&chunks, Offset(10), 100), 80);
    assert_eq!(lag_ms(&chunks, Offset(30), 100), 0, "nothing dirty");
    assert_eq!(lag_ms(&chunks, Offset(0), 5), 0, "a timestamp ahead of the clock");
    assert_eq!(lag_ms(&[], Offset(0), 100), 0);
}
