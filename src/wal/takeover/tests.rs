use super::*;
use crate::batch::{encode_batch, Record};
use crate::ids::TopicId;
use crate::store::MemoryStore;
use crate::wal::{WalConfig, WalError, WalWriter};
use std::sync::Arc;

fn sid(p: u32) -> StreamId {
    StreamId::new(TopicId(1), p)
}

fn entry(p: u32, se: u64, base: u64, n: u32) -> WalEntry {
    let records: Vec<Record> = (0..n)
        .map(|_| Record {
            timestamp_ms: 5,
            key: None,
            value: Some(bytes::Bytes::from_static(b"x")),
            headers: vec![],
        })
        .collect();
    WalEntry {
        stream: sid(p),
        stream_epoch: StreamEpoch(se),
        base_offset: Offset(base),
        record_count: n,
        max_timestamp: 5,
        producer: None,
        batch: encode_batch(Offset(base), &records),
    }
}

/// n1's writer at epoch 1, one append per segment.
fn start_writer(store: &DynStore, max_inflight: usize) -> WalWriter {
    WalWriter::start(
        store.clone(),
        NodeId::new("n1"),
        NodeEpoch(1),
        WalConfig::segment_per_append(max_inflight),
    )
}

fn fencer() -> Fencer {
    Fencer {
        holder: NodeId::new("n2"),
        holder_epoch: NodeEpoch(1),
        log_index: LogIndex(4),
    }
}

#[tokio::test]
async fn takeover_fences_at_the_first_missing_seq_and_reads_everything_below() {
    let store: DynStore = Arc::new(MemoryStore::new());
    let node = NodeId::new("n1");
    let w = start_writer(&store, 1);
    for i in 0..3 {
        w.append(entry(0, 1, i, 1)).unwrap().await.unwrap().unwrap();
    }
    let fenced = fence_and_read(&store, &node, NodeEpoch(1), &fencer()).await.unwrap();
    assert_eq!(fenced.fence_seq, SegmentSeq(3));
    assert_eq!(fenced.segments.len(), 3);
    // The zombie writer can no longer make anything durable.
    let res = w.append(entry(0, 1, 3, 1)).unwrap().await.unwrap();
    assert!(matches!(res, Err(WalError::Fenced(_))));
    // Redoing the takeover finds the same marker and the same segments.
    let again = fence_and_read(&store, &node, NodeEpoch(1), &fencer()).await.unwrap();
    assert_eq!((again.fence_seq, again.segments.len()), (SegmentSeq(3), 3));
}

#[tokio::test]
async fn takeover_of_a_wal_truncated_from_the_front_starts_at_the_lowest_segment() {
    let store: DynStore = Arc::new(MemoryStore::new());
    let node = NodeId::new("n1");
    let w = start_writer(&store, 1);
    for i in 0..4 {
        w.append(entry(0, 1, i, 1)).unwrap().await.unwrap().unwrap();
    }
    w.truncate(|_, end| end <= Offset(2)).await;
    let fenced = fence_and_read(&store, &node, NodeEpoch(1), &fencer()).await.unwrap();
    assert_eq!(fenced.fence_seq, SegmentSeq(4));
    assert_eq!(fenced.segments.iter().map(|s| s.seq.0).collect::<Vec<_>>(), vec![2, 3]);
}

#[tokio::test]
async fn takeover_of_an_empty_wal_fences_seq_zero() {
    let store: DynStore = Arc::new(MemoryStore::new());
    let node = NodeId::new("n1");
    let fenced = fence_and_read(&store, &node, NodeEpoch(1), &fencer()).await.unwrap();
    assert_eq!(fenced.fence_seq, SegmentSeq(0));
    assert!(fenced.segments.is_empty());
    assert!(store
        .get("wal/n1/1/00000000000000000000", None)
        .await
        .unwrap()
        .is_some());
}

fn seg(seq: u64, entries: Vec<WalEntry>) -> Segment {
    Segment {
        node: NodeId::new("n1"),
        epoch: NodeEpoch(1),
        seq: SegmentSeq(seq),
        entries,
    }
}

#[test]
fn replay_keeps_the_dead_epochs_records_above_the_committed_end() {
    let segments = vec![
        seg(0, vec![entry(0, 1, 0, 2), entry(1, 1, 0, 1)]),
        seg(1, vec![entry(0, 1, 2, 3), entry(2, 1, 0, 4)]),
        seg(2, vec![entry(0, 1, 5, 1)]),
    ];
    let streams = BTreeMap::from([
        (
            sid(0),
            Recovering {
                stream_epoch: StreamEpoch(1),
                committed_end: Offset(2),
            },
        ),
        (
            sid(1),
            Recovering {
                stream_epoch: StreamEpoch(2),
                committed_end: Offset(0),
            },
        ),
    ]);
    let tails = replay(&segments, &streams).unwrap();
    let s0: Vec<(u64, u64)> = tails[&sid(0)]
        .iter()
        .map(|e| (e.base_offset.0, e.end_offset().0))
        .collect();
    assert_eq!(s0, vec![(2, 5), (5, 6)]);
    assert!(
        !tails.contains_key(&sid(1)),
        "entries of an earlier stream epoch are not replayed"
    );
    assert!(!tails.contains_key(&sid(2)), "streams not being recovered are ignored");
}

#[test]
fn replay_stops_loudly_at_a_gap() {
    let segments = vec![seg(0, vec![entry(0, 1, 0, 2)]), seg(1, vec![entry(0, 1, 3, 1)])];
    let streams = BTreeMap::from([(
        sid(0),
        Recovering {
            stream_epoch: StreamEpoch(1),
            committed_end: Offset(0),
        },
    )]);
    let err = replay(&segments, &streams).unwrap_err();
    assert!(
        matches!(
            err,
            TakeoverError::Gap {
                expected: Offset(2),
                found: Offset(3),
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_redone_takeover_uses_the_lowest_marker_even_with_segments_landed_above_it() {
    use crate::wal::segment::{encode_segment, Segment};
    let store: DynStore = Arc::new(MemoryStore::new());
    let node = NodeId::new("n1");
    let w = start_writer(&store, 1);
    for i in 0..2 {
        w.append(entry(0, 1, i, 1)).unwrap().await.unwrap().unwrap();
    }
    let first = fence_and_read(&store, &node, NodeEpoch(1), &fencer()).await.unwrap();
    assert_eq!(first.fence_seq, SegmentSeq(2));
    // An unacknowledged segment of the dead writer lands above the marker
    // (it was in flight when the marker was placed).
    let late = Segment {
        node: node.clone(),
        epoch: NodeEpoch(1),
        seq: SegmentSeq(3),
        entries: vec![entry(0, 1, 2, 1)],
    };
    store
        .put_if_absent(&segment_key(&node, NodeEpoch(1), SegmentSeq(3)), encode_segment(&late))
        .await
        .unwrap();
    let again = fence_and_read(&store, &node, NodeEpoch(1), &fencer()).await.unwrap();
    assert_eq!(again.fence_seq, SegmentSeq(2), "the first marker is the fence");
    assert_eq!(again.segments.len(), 2);
    assert!(
        store
            .get(&segment_key(&node, NodeEpoch(1), SegmentSeq(4)), None)
            .await
            .unwrap()
            .is_none(),
        "no second marker"
    );
}

/// Holds the first PUT of one key until released; everything else goes
/// straight through (a slow first segment, overtaken by nothing else).
#[derive(Debug)]
struct HoldFirstPut {
    inner: DynStore,
    key: String,
    held: std::sync::atomic::AtomicBool,
    release: tokio::sync::Semaphore,
}

#[async_trait::async_trait]
impl crate::store::ObjectStore for HoldFirstPut {
    async fn put_if_absent(&self, key: &str, body: bytes::Bytes) -> crate::store::StoreResult<PutOutcome> {
        if key == self.key && !self.held.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let _permit = self.release.acquire().await.expect("never closed");
        }
        self.inner.put_if_absent(key, body).await
    }
    async fn get(
        &self,
        key: &str,
        range: Option<std::ops::Range<u64>>,
    ) -> crate::store::StoreResult<Option<bytes::Bytes>> {
        self.inner.get(key, range).await
    }
    async fn list(&self, prefix: &str) -> crate::store::StoreResult<Vec<crate::store::ObjectMeta>> {
        self.inner.list(prefix).await
    }
    async fn delete(&self, key: &str) -> crate::store::StoreResult<()> {
        self.inner.delete(key).await
    }
}

/// Simulation seed 6325: a new incarnation's seq 0 was slow, seqs 1 and 2
/// overtook it, a takeover took seq 1 for the lowest segment and fenced at
/// 3, then seq 0 landed and the writer acknowledged records no takeover
/// read. Seq 0 now goes alone, so the takeover finds an empty WAL.
#[tokio::test]
async fn a_takeover_while_seq_zero_is_in_flight_loses_no_acknowledged_record() {
    let inner: DynStore = Arc::new(MemoryStore::new());
    let node = NodeId::new("n1");
    let held = Arc::new(HoldFirstPut {
        inner: inner.clone(),
        key: crate::wal::writer::segment_key(&node, NodeEpoch(1), SegmentSeq::ZERO),
        held: Default::default(),
        release: tokio::sync::Semaphore::new(0),
    });
    let store: DynStore = held.clone();
    let w = start_writer(&store, 4);
    let mut acks = Vec::new();
    for i in 0..4 {
        acks.push(w.append(entry(0, 1, i, 1)).unwrap());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        inner.list("wal/n1/1/").await.unwrap().is_empty(),
        "nothing overtakes seq 0"
    );

    let fenced = fence_and_read(&store, &node, NodeEpoch(1), &fencer()).await.unwrap();
    held.release.add_permits(1);
    let read: Vec<Offset> = fenced
        .segments
        .iter()
        .flat_map(|s| s.entries.iter().map(|e| e.base_offset))
        .collect();
    for (i, ack) in acks.into_iter().enumerate() {
        if ack.await.unwrap().is_ok() {
            assert!(
                read.contains(&Offset(i as u64)),
                "record {i} acknowledged but not read by the takeover"
            );
        }
    }
    assert_eq!(fenced.fence_seq, SegmentSeq::ZERO);
    assert!(w.is_fenced());
}
