use super::*;
use crate::batch::encode_batch;
use crate::ids::{NodeEpoch, NodeId, TopicId};
use crate::store::MemoryStore;
use crate::wal::WalConfig;

fn rec(v: &str) -> Record {
    Record {
        timestamp_ms: 10,
        key: None,
        value: Some(Bytes::from(v.to_string())),
        headers: vec![],
    }
}

fn setup(limit: usize) -> (OpenStream, WalWriter, Arc<Budget>) {
    let budget = Arc::new(Budget::new(limit));
    let wal = WalWriter::start(
        Arc::new(MemoryStore::new()),
        NodeId::new("n"),
        NodeEpoch(1),
        WalConfig::default(),
    );
    let s = OpenStream::open(
        StreamId::new(TopicId(1), 0),
        "t".into(),
        StreamEpoch(1),
        Offset(5),
        ProducerTable::default(),
        budget.clone(),
    );
    (s, wal, budget)
}

#[tokio::test]
async fn appends_get_dense_offsets_from_the_committed_end() {
    let (s, wal, _) = setup(1 << 20);
    let a = s.append(&wal, &[rec("a"), rec("b")]).await.unwrap();
    let b = s.append(&wal, &[rec("c")]).await.unwrap();
    assert_eq!((a.base, a.count, b.base), (Offset(5), 2, Offset(7)));
    assert_eq!(s.high_watermark(), Offset(8));
    let read = s.read_tail(Offset(6), Offset(u64::MAX), 10, 1 << 20).unwrap().unwrap();
    let got: Vec<(u64, Bytes)> = read.into_iter().map(|(o, r)| (o.0, r.value.unwrap())).collect();
    assert_eq!(got, vec![(6, Bytes::from("b")), (7, Bytes::from("c"))]);
    assert!(
        s.read_tail(Offset(4), Offset(u64::MAX), 10, 1 << 20).is_none(),
        "older than the tail"
    );
}

#[tokio::test]
async fn reads_respect_limit_and_max_bytes_but_return_at_least_one_record() {
    let (s, wal, _) = setup(1 << 20);
    s.append(&wal, &[rec("aaaa"), rec("bbbb"), rec("cccc")]).await.unwrap();
    assert_eq!(
        s.read_tail(Offset(5), Offset(u64::MAX), 2, 1 << 20)
            .unwrap()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        s.read_tail(Offset(5), Offset(u64::MAX), 10, 5).unwrap().unwrap().len(),
        1
    );
    assert_eq!(
        s.read_tail(Offset(5), Offset(u64::MAX), 10, 1).unwrap().unwrap().len(),
        1
    );
}

#[tokio::test]
async fn appends_past_the_budget_are_throttled_and_change_nothing() {
    let (s, wal, budget) = setup(200);
    s.append(&wal, &[rec("x")]).await.unwrap();
    let big = "y".repeat(300);
    let err = s.append(&wal, &[rec(&big)]).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Throttled);
    assert_eq!(s.high_watermark(), Offset(6));
    let used = budget.used();
    assert!(used > 0 && used <= 200);
}

#[tokio::test]
async fn a_committed_flush_leaves_the_tail_and_frees_the_budget() {
    let (s, wal, budget) = setup(1 << 20);
    s.append(&wal, &[rec("a")]).await.unwrap();
    s.append(&wal, &[rec("b"), rec("c")]).await.unwrap();
    let f = s.begin_flush(1 << 20).unwrap();
    assert_eq!((f.base, f.end, f.parts.len()), (Offset(5), Offset(8), 2));
    assert!(s.begin_flush(1 << 20).is_none(), "one flush at a time");
    s.finish_flush(f.end);
    assert_eq!(budget.used(), 0);
    assert_eq!(s.committed_end(), Offset(8));
    assert!(s.read_tail(Offset(5), Offset(u64::MAX), 10, 100).is_none());
    assert!(s
        .read_tail(Offset(8), Offset(u64::MAX), 10, 100)
        .unwrap()
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_stream_that_stopped_accepting_refuses_appends() {
    let (s, wal, _) = setup(1 << 20);
    s.stop_accepting();
    assert_eq!(
        s.append(&wal, &[rec("a")]).await.unwrap_err().code,
        ErrorCode::Unavailable
    );
}

#[tokio::test]
async fn the_watermark_advances_even_if_the_caller_stops_waiting() {
    use crate::store::{FaultConfig, FaultyStore};
    let budget = Arc::new(Budget::new(1 << 20));
    let slow = FaultyStore::new(
        Arc::new(MemoryStore::new()),
        FaultConfig {
            latency_ms: (50, 50),
            ..FaultConfig::default()
        },
    );
    let wal = WalWriter::start(Arc::new(slow), NodeId::new("n"), NodeEpoch(1), WalConfig::default());
    let s = OpenStream::open(
        StreamId::new(TopicId(1), 0),
        "t".into(),
        StreamEpoch(1),
        Offset(0),
        ProducerTable::default(),
        budget,
    );
    // A client that gives up before the ack (its future is dropped).
    let gave_up = tokio::time::timeout(std::time::Duration::from_millis(5), s.append(&wal, &[rec("a")])).await;
    assert!(gave_up.is_err());
    let mut hw = s.watch_high_watermark();
    tokio::time::timeout(std::time::Duration::from_secs(5), hw.wait_for(|h| *h == Offset(1)))
        .await
        .unwrap()
        .unwrap();
    assert!(s.quiescent(), "a stream can be closed after an abandoned append");
}

fn idempotent(pid: i64, epoch: i16, seq: i32, values: &[&str]) -> Bytes {
    let records: Vec<Record> = values.iter().map(|v| rec(v)).collect();
    crate::batch::with_producer(&encode_batch(Offset(0), &records), pid, epoch, seq)
}

#[tokio::test]
async fn a_retried_idempotent_batch_gets_its_original_offsets_and_is_not_stored_twice() {
    let (s, wal, _) = setup(1 << 20);
    let first = s.append_batch(&wal, &idempotent(9, 0, 0, &["a", "b"])).await.unwrap();
    let second = s.append_batch(&wal, &idempotent(9, 0, 2, &["c"])).await.unwrap();
    let retry = s.append_batch(&wal, &idempotent(9, 0, 0, &["a", "b"])).await.unwrap();
    assert_eq!((first.base, first.count), (Offset(5), 2));
    assert_eq!(second.base, Offset(7));
    assert_eq!(retry, first, "the retry is answered with the first write's offsets");
    assert_eq!(s.high_watermark(), Offset(8), "nothing appended for the retry");
}

#[tokio::test]
async fn sequence_gaps_and_old_epochs_are_refused_and_append_nothing() {
    let (s, wal, _) = setup(1 << 20);
    s.append_batch(&wal, &idempotent(9, 1, 0, &["a"])).await.unwrap();
    let gap = s.append_batch(&wal, &idempotent(9, 1, 5, &["x"])).await.unwrap_err();
    assert_eq!(gap.code, ErrorCode::OutOfOrderSequence);
    let old = s.append_batch(&wal, &idempotent(9, 0, 1, &["x"])).await.unwrap_err();
    assert_eq!(old.code, ErrorCode::InvalidProducerEpoch);
    assert_eq!(s.high_watermark(), Offset(6));
    // The next sequence and a new epoch starting at 0 are fine.
    assert_eq!(
        s.append_batch(&wal, &idempotent(9, 1, 1, &["b"])).await.unwrap().base,
        Offset(6)
    );
    assert_eq!(
        s.append_batch(&wal, &idempotent(9, 2, 0, &["c"])).await.unwrap().base,
        Offset(7)
    );
}

#[tokio::test]
async fn producer_state_opened_from_the_view_catches_retries_of_flushed_batches() {
    let (s, wal, _) = setup(1 << 20);
    let written = s.append_batch(&wal, &idempotent(9, 0, 0, &["a"])).await.unwrap();
    s.append_batch(&wal, &idempotent(10, 3, 7, &["b"])).await.unwrap();
    let f = s.begin_flush(1 << 20).unwrap();
    assert_eq!(f.producers.len(), 2, "the flush carries both producers' batches");
    // A new owner opens with what the view recorded from the flush.
    let mut table = ProducerTable::default();
    f.producers.iter().for_each(|b| table.record(*b));
    let budget = Arc::new(Budget::new(1 << 20));
    let next = OpenStream::open(s.id, "t".into(), StreamEpoch(2), f.end, table, budget);
    let retry = next.append_batch(&wal, &idempotent(9, 0, 0, &["a"])).await.unwrap();
    assert_eq!(retry, written);
    let gap = next
        .append_batch(&wal, &idempotent(10, 3, 9, &["c"]))
        .await
        .unwrap_err();
    assert_eq!(gap.code, ErrorCode::OutOfOrderSequence);
    assert_eq!(next.high_watermark(), f.end);
}

#[tokio::test]
async fn producers_are_described_by_their_last_batch_with_its_timestamp_while_in_the_tail() {
    use crate::api::ProducerState;
    let (s, wal, _) = setup(1 << 20);
    assert!(s.producers().is_empty());
    s.append(&wal, &[rec("plain")]).await.unwrap();
    s.append_batch(&wal, &idempotent(9, 0, 0, &["a", "b"])).await.unwrap();
    s.append_batch(&wal, &idempotent(4, 2, 7, &["c"])).await.unwrap();
    s.append_batch(&wal, &idempotent(9, 0, 2, &["d", "e", "f"]))
        .await
        .unwrap();
    let state = |pid, producer_epoch, last_sequence, last_timestamp| ProducerState {
        producer_id: pid,
        producer_epoch,
        last_sequence,
        last_timestamp,
    };
    assert_eq!(
        s.producers(),
        vec![state(4, 2, 7, Some(10)), state(9, 0, 4, Some(10))],
        "by producer id; a plain append is no producer"
    );
    let f = s.begin_flush(1 << 20).unwrap();
    s.finish_flush(f.end);
    assert_eq!(
        s.producers(),
        vec![state(4, 2, 7, None), state(9, 0, 4, None)],
        "flushed: the sequence is kept, the timestamp is not"
    );
    // A new owner opened from what the view recorded knows the same.
    let mut table = ProducerTable::default();
    f.producers.iter().for_each(|b| table.record(*b));
    let next = OpenStream::open(
        s.id,
        "t".into(),
        StreamEpoch(2),
        f.end,
        table,
        Arc::new(Budget::new(1 << 20)),
    );
    assert_eq!(next.producers(), s.producers());
}

#[tokio::test]
async fn idempotent_batches_carry_their_producer_into_the_wal() {
    let store = Arc::new(MemoryStore::new());
    let wal = WalWriter::start(store.clone(), NodeId::new("n"), NodeEpoch(1), WalConfig::default());
    let budget = Arc::new(Budget::new(1 << 20));
    let s = OpenStream::open(
        StreamId::new(TopicId(1), 0),
        "t".into(),
        StreamEpoch(1),
        Offset(0),
        ProducerTable::default(),
        budget,
    );
    s.append_batch(&wal, &idempotent(42, 1, 3, &["a", "b"])).await.unwrap();
    let keys = crate::store::ObjectStore::list(store.as_ref(), "").await.unwrap();
    assert_eq!(keys.len(), 1, "one WAL segment: {keys:?}");
    let body = crate::store::ObjectStore::get(store.as_ref(), &keys[0].key, None)
        .await
        .unwrap()
        .unwrap();
    let segment = crate::wal::segment::decode_segment(&keys[0].key, &body).unwrap();
    assert_eq!(
        segment.entries[0].producer,
        Some(ProducerInfo {
            producer_id: 42,
            producer_epoch: 1,
            base_sequence: 3
        })
    );
}

mod durable_writers {
    use super::*;
    use crate::meta::writers::{DsAppend, DsVerdict, DsWrite, ProducerSeq, WriterTable};

    fn w(id: &str, epoch: u64, seq: u64) -> DsWrite {
        DsWrite {
            producer: Some(ProducerSeq {
                id: id.into(),
                epoch,
                seq,
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_retried_write_is_declined_as_a_duplicate_and_stored_once() {
        let (s, wal, _) = setup(1 << 20);
        let first = s
            .append_durable(&wal, &w("a", 0, 0), &[rec("x"), rec("y")])
            .await
            .unwrap();
        assert_eq!(
            first,
            DsAppend::Stored {
                base: Offset(5),
                count: 2
            }
        );
        let retry = s
            .append_durable(&wal, &w("a", 0, 0), &[rec("x"), rec("y")])
            .await
            .unwrap();
        assert_eq!(
            retry,
            DsAppend::Declined(DsVerdict::Duplicate {
                epoch: 0,
                last_seq: 0,
                next: Offset(7)
            })
        );
        assert_eq!(s.high_watermark(), Offset(7), "nothing appended for the retry");
        let next = s.append_durable(&wal, &w("a", 0, 1), &[rec("z")]).await.unwrap();
        assert_eq!(
            next,
            DsAppend::Stored {
                base: Offset(7),
                count: 1
            }
        );
    }

    #[tokio::test]
    async fn refused_writes_append_nothing() {
        let (s, wal, _) = setup(1 << 20);
        s.append_durable(&wal, &w("a", 1, 0), &[rec("x")]).await.unwrap();
        let cases = [
            (
                w("a", 1, 3),
                DsVerdict::Gap {
                    expected: 1,
                    received: 3,
                },
            ),
            (w("a", 0, 1), DsVerdict::StaleEpoch { current: 1 }),
            (w("a", 2, 1), DsVerdict::EpochNotAtZero),
            (
                w("b", 0, 1),
                DsVerdict::Gap {
                    expected: 0,
                    received: 1,
                },
            ),
        ];
        for (write, verdict) in cases {
            let got = s.append_durable(&wal, &write, &[rec("no")]).await.unwrap();
            assert_eq!(got, DsAppend::Declined(verdict));
        }
        let seq = |q: &str| DsWrite {
            stream_seq: Some(q.into()),
            ..Default::default()
        };
        s.append_durable(&wal, &seq("b"), &[rec("x")]).await.unwrap();
        let stale = s.append_durable(&wal, &seq("a"), &[rec("no")]).await.unwrap();
        assert_eq!(stale, DsAppend::Declined(DsVerdict::SeqNotAfter { last: "b".into() }));
        assert_eq!(s.high_watermark(), Offset(7), "only the two accepted writes");
    }

    #[tokio::test]
    async fn a_check_without_records_appends_nothing_and_says_where_the_stream_ends() {
        let (s, wal, _) = setup(1 << 20);
        s.append_durable(&wal, &w("a", 0, 0), &[rec("x")]).await.unwrap();
        assert_eq!(
            s.append_durable(&wal, &w("a", 0, 1), &[]).await.unwrap(),
            DsAppend::Checked { end: Offset(6) }
        );
        assert!(matches!(
            s.append_durable(&wal, &w("a", 0, 0), &[]).await.unwrap(),
            DsAppend::Declined(DsVerdict::Duplicate { .. })
        ));
        assert_eq!(s.high_watermark(), Offset(6));
    }

    #[tokio::test]
    async fn concurrent_retries_of_one_write_store_it_once() {
        let (s, wal, _) = setup(1 << 20);
        let s = Arc::new(s);
        let wal = Arc::new(wal);
        let tries = (0..8).map(|_| {
            let (s, wal) = (s.clone(), wal.clone());
            tokio::spawn(async move { s.append_durable(&wal, &w("a", 0, 0), &[rec("x")]).await.unwrap() })
        });
        let results = futures::future::join_all(tries).await;
        let stored = results
            .iter()
            .filter(|r| matches!(r.as_ref().unwrap(), DsAppend::Stored { .. }))
            .count();
        assert_eq!(stored, 1, "{results:?}");
        assert_eq!(s.high_watermark(), Offset(6));
    }

    #[tokio::test]
    async fn the_flush_carries_the_writer_state_and_a_new_owner_recognises_retries() {
        let (s, wal, _) = setup(1 << 20);
        s.append_durable(&wal, &w("a", 0, 0), &[rec("x")]).await.unwrap();
        s.append(&wal, &[rec("plain")]).await.unwrap();
        s.append_durable(&wal, &w("a", 0, 1), &[rec("y")]).await.unwrap();
        let f = s.begin_flush(1 << 20).unwrap();
        assert_eq!(f.writers.producer("a").map(|p| (p.seq, p.next)), Some((1, Offset(8))));
        // As the view would: the chunk's writer state merged into the row's.
        let mut table = ProducerTable::default();
        table.writers_mut().merge(&f.writers);
        let budget = Arc::new(Budget::new(1 << 20));
        let next = OpenStream::open(s.id, "t".into(), StreamEpoch(2), f.end, table, budget);
        let retry = next.append_durable(&wal, &w("a", 0, 1), &[rec("y")]).await.unwrap();
        assert!(matches!(
            retry,
            DsAppend::Declined(DsVerdict::Duplicate { last_seq: 1, .. })
        ));
        assert_eq!(next.high_watermark(), f.end, "the retry appended nothing");
    }

    #[tokio::test]
    async fn the_wal_entries_of_a_write_rebuild_its_state_on_replay() {
        let store = Arc::new(MemoryStore::new());
        let wal = WalWriter::start(store.clone(), NodeId::new("n"), NodeEpoch(1), WalConfig::default());
        let s = OpenStream::open(
            StreamId::new(TopicId(1), 0),
            "t".into(),
            StreamEpoch(1),
            Offset(0),
            ProducerTable::default(),
            Arc::new(Budget::new(1 << 20)),
        );
        s.append_durable(&wal, &w("a", 3, 0), &[rec("x"), rec("y")])
            .await
            .unwrap();
        s.append_durable(&wal, &w("a", 3, 1), &[rec("z")]).await.unwrap();
        let mut entries = Vec::new();
        for k in crate::store::ObjectStore::list(store.as_ref(), "").await.unwrap() {
            let body = crate::store::ObjectStore::get(store.as_ref(), &k.key, None)
                .await
                .unwrap()
                .unwrap();
            entries.extend(crate::wal::segment::decode_segment(&k.key, &body).unwrap().entries);
        }
        assert_eq!(entries.len(), 2);
        assert!(entries.iter().all(|e| e.producer.is_none()), "not a Kafka producer");
        // What a WAL takeover computes for the chunk it commits.
        let t = WriterTable::of_batches(entries.iter().map(|e| &e.batch[..]));
        let state = t.producer("a").unwrap();
        assert_eq!((state.epoch, state.seq, state.next), (3, 1, Offset(3)));
        let mut table = ProducerTable::default();
        table.writers_mut().merge(&t);
        let next = OpenStream::open(
            s.id,
            "t".into(),
            StreamEpoch(2),
            Offset(3),
            table,
            Arc::new(Budget::new(1 << 20)),
        );
        let retry = next.append_durable(&wal, &w("a", 3, 1), &[rec("z")]).await.unwrap();
        assert!(matches!(retry, DsAppend::Declined(DsVerdict::Duplicate { .. })));
        let stale = next.append_durable(&wal, &w("a", 2, 9), &[rec("z")]).await.unwrap();
        assert_eq!(stale, DsAppend::Declined(DsVerdict::StaleEpoch { current: 3 }));
    }
}

fn txn_data(pid: i64, epoch: i16, seq: i32, values: &[&str]) -> Bytes {
    crate::batch::transactional(&idempotent(pid, epoch, seq, values), false)
}

fn marker(pid: i64, epoch: i16, commit: bool) -> Bytes {
    use crate::batch::marker::{encode_marker, Marker};
    let m = if commit { Marker::Commit } else { Marker::Abort };
    encode_marker(pid, epoch, m, 0, 10)
}

#[tokio::test]
async fn the_last_stable_offset_waits_for_each_open_transaction_to_end() {
    let (s, wal, _) = setup(1 << 20);
    s.append_batch(&wal, &txn_data(3, 0, 0, &["a", "b"])).await.unwrap();
    s.append(&wal, &[rec("plain")]).await.unwrap();
    s.append_batch(&wal, &txn_data(4, 0, 0, &["c"])).await.unwrap();
    s.append_batch(&wal, &txn_data(3, 0, 2, &["d"])).await.unwrap();
    assert_eq!(s.high_watermark(), Offset(10));
    assert_eq!(s.last_stable(), Offset(5), "producer 3 opened at 5");
    let commit = s.append_batch(&wal, &marker(3, 0, true)).await.unwrap();
    assert_eq!((commit.base, commit.count), (Offset(10), 1));
    assert_eq!(s.last_stable(), Offset(8), "producer 4 is still open");
    let abort = s.append_batch(&wal, &marker(4, 0, false)).await.unwrap();
    assert_eq!(s.last_stable(), Offset(12));
    let aborted = s.aborted_in(Offset(0), Offset(12));
    assert_eq!(aborted.len(), 1);
    assert_eq!(
        (aborted[0].producer_id, aborted[0].first, aborted[0].marker),
        (4, Offset(8), abort.base)
    );
    // A retried marker (the coordinator did not hear the first answer)
    // appends nothing.
    let again = s.append_batch(&wal, &marker(4, 0, false)).await.unwrap();
    assert_eq!(again.count, 0);
    assert_eq!(s.high_watermark(), Offset(12));
    // The flush carries what the view's index needs.
    let f = s.begin_flush(1 << 20).unwrap();
    let kinds: Vec<(i64, bool)> = f
        .txns
        .iter()
        .map(|t| match t {
            TxnBatch::Data { producer_id, .. } => (*producer_id, false),
            TxnBatch::Marker { producer_id, .. } => (*producer_id, true),
        })
        .collect();
    assert_eq!(kinds, vec![(3, false), (4, false), (3, true), (4, true)]);
}

#[tokio::test]
async fn a_marker_at_a_bumped_epoch_fences_the_zombie_and_a_stale_marker_is_refused() {
    let (s, wal, _) = setup(1 << 20);
    s.append_batch(&wal, &txn_data(3, 0, 0, &["a"])).await.unwrap();
    // The coordinator aborted on a timeout and bumped the epoch to 1.
    s.append_batch(&wal, &marker(3, 1, false)).await.unwrap();
    let zombie = s.append_batch(&wal, &txn_data(3, 0, 1, &["late"])).await.unwrap_err();
    assert_eq!(zombie.code, ErrorCode::InvalidProducerEpoch);
    assert_eq!(s.high_watermark(), Offset(7), "nothing of the zombie appended");
    assert_eq!(s.last_stable(), Offset(7));
    // The next instance writes at epoch 2; an epoch-1 marker is stale.
    s.append_batch(&wal, &txn_data(3, 2, 0, &["b"])).await.unwrap();
    let stale = s.append_batch(&wal, &marker(3, 1, true)).await.unwrap_err();
    assert_eq!(stale.code, ErrorCode::InvalidProducerEpoch);
    assert_eq!(s.last_stable(), Offset(7), "the epoch-2 transaction is still open");
}

#[tokio::test]
async fn a_marker_reaching_a_partition_before_any_batch_of_its_transaction_is_written_and_fences() {
    // The coordinator aborted an expired transaction before its batch for
    // this partition arrived (found by the simulation, seed 16): the marker
    // must still fence the epoch here, or the late batch would open a
    // transaction that the producer's next one ends.
    let (s, wal, _) = setup(1 << 20);
    let at = s.high_watermark();
    let fence = s.append_batch(&wal, &marker(3, 1, false)).await.unwrap();
    assert_eq!((fence.base, fence.count), (at, 1), "written, though nothing is open");
    let late = s.append_batch(&wal, &txn_data(3, 0, 0, &["late"])).await.unwrap_err();
    assert_eq!(late.code, ErrorCode::InvalidProducerEpoch);
    assert_eq!((s.high_watermark(), s.last_stable()), (at.next(), at.next()));
    assert!(
        s.aborted_in(Offset(0), at.next()).is_empty(),
        "no transaction was aborted here"
    );
    // The same marker again, or an older one, appends nothing.
    assert_eq!(s.append_batch(&wal, &marker(3, 1, false)).await.unwrap().count, 0);
    assert_eq!(s.append_batch(&wal, &marker(3, 0, false)).await.unwrap().count, 0);
    // The producer's next instance (epoch 2) is accepted.
    s.append_batch(&wal, &txn_data(3, 2, 0, &["b"])).await.unwrap();
    assert_eq!(s.last_stable(), at.next());
}

#[tokio::test]
async fn a_judged_marker_is_appended_only_while_the_open_transaction_is_the_one_judged() {
    let (s, wal, _) = setup(1 << 20);
    let at = s.high_watermark();
    assert_eq!(s.open_txn(3), None);
    s.append_batch(&wal, &txn_data(3, 0, 0, &["a"])).await.unwrap();
    let open = s.open_txn(3);
    assert_eq!(open, Some(at));
    // Judged while nothing was open: the batch that opened one since
    // sends it back, and nothing is appended.
    assert_eq!(s.append_marker(&wal, &marker(3, 0, true), None).await.unwrap(), None);
    assert_eq!((s.high_watermark(), s.last_stable()), (at.next(), at));
    // Judged against the open transaction: it ends it.
    let ended = s.append_marker(&wal, &marker(3, 0, true), open).await.unwrap().unwrap();
    assert_eq!((ended.base, ended.count), (at.next(), 1));
    assert_eq!((s.open_txn(3), s.last_stable()), (None, at.next().next()));
    // Judged against a transaction another finisher's marker ended.
    assert_eq!(s.append_marker(&wal, &marker(3, 0, true), open).await.unwrap(), None);
    // Only a marker may be judged.
    let data = s
        .append_marker(&wal, &txn_data(3, 0, 1, &["b"]), None)
        .await
        .unwrap_err();
    assert_eq!(data.code, ErrorCode::InvalidRequest);
    assert_eq!(s.high_watermark(), at.next().next());
}

#[tokio::test]
async fn a_control_batch_that_is_not_a_marker_and_a_transactional_batch_without_a_sequence_are_refused() {
    let (s, wal, _) = setup(1 << 20);
    let not_marker = crate::batch::transactional(&idempotent(3, 0, -1, &["x"]), true);
    assert_eq!(
        s.append_batch(&wal, &not_marker).await.unwrap_err().code,
        ErrorCode::InvalidRequest
    );
    let unsequenced = crate::batch::transactional(&encode_batch(Offset(0), &[rec("x")]), false);
    assert_eq!(
        s.append_batch(&wal, &unsequenced).await.unwrap_err().code,
        ErrorCode::InvalidRequest
    );
    assert_eq!(s.high_watermark(), Offset(5));
}

/// Every stored batch carries the stream epoch as its partition leader
/// epoch, whatever wrote it: a Kafka consumer validating its position after
/// a leader change asks for the end of the epoch its records carry, and the
/// HTTP path once stored 0 there, which librdkafka took for a truncation to
/// offset 0 (it re-read whole partitions).
#[tokio::test]
async fn every_stored_batch_carries_the_stream_epoch_as_its_leader_epoch() {
    let (s, wal, _) = setup(1 << 20);
    s.append(&wal, &[rec("http")]).await.unwrap();
    s.append_batch(&wal, &idempotent(9, 0, 0, &["kafka"])).await.unwrap();
    let write = crate::meta::writers::DsWrite::default();
    s.append_durable(&wal, &write, &[rec("ds")]).await.unwrap();
    let batches = s.read_tail_batches(Offset(5), Offset(u64::MAX), 1 << 20).unwrap();
    assert_eq!(batches.len(), 3);
    for b in &batches {
        let epoch = i32::from_be_bytes(b[12..16].try_into().unwrap());
        assert_eq!(epoch, 1, "partition leader epoch of {b:?}");
        crate::batch::parse_batch("stored", b).expect("the CRC still holds");
    }
}
