use super::*;
use crate::batch::{encode_batch, Record};
use crate::ids::{StreamEpoch, TopicId};
use crate::store::{FaultConfig, FaultyStore, MemoryStore};

fn entry(stream: u32, base: u64, n: u32) -> WalEntry {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            timestamp_ms: 1,
            key: None,
            value: Some(bytes::Bytes::from(format!("v{}", base + u64::from(i)))),
            headers: vec![],
        })
        .collect();
    WalEntry {
        stream: StreamId::new(TopicId(1), stream),
        stream_epoch: StreamEpoch(1),
        base_offset: Offset(base),
        record_count: n,
        max_timestamp: 1,
        producer: None,
        batch: encode_batch(Offset(base), &records),
    }
}

fn writer(store: DynStore, config: WalConfig) -> WalWriter {
    WalWriter::start(store, NodeId::new("n1"), NodeEpoch(1), config)
}

async fn segments(store: &DynStore) -> Vec<Segment> {
    let mut out = Vec::new();
    for o in store.list("wal/n1/1/").await.unwrap() {
        let bytes = store.get(&o.key, None).await.unwrap().unwrap();
        if let WalObject::Segment(s) = decode_wal_object(&o.key, &bytes).unwrap() {
            out.push(s);
        }
    }
    out
}

#[tokio::test]
async fn an_append_is_acknowledged_once_its_segment_is_stored() {
    let store: DynStore = Arc::new(MemoryStore::new());
    let w = writer(store.clone(), WalConfig::default());
    let seq = w.append(entry(0, 0, 3)).unwrap().await.unwrap().unwrap();
    assert_eq!(seq, SegmentSeq(0));
    let segs = segments(&store).await;
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].entries[0].record_count, 3);
}

#[tokio::test]
async fn concurrent_appends_batch_into_few_segments_with_dense_seqs() {
    let inner: DynStore = Arc::new(MemoryStore::new());
    let slow = FaultyStore::new(
        inner.clone(),
        FaultConfig {
            latency_ms: (5, 10),
            ..FaultConfig::default()
        },
    );
    let w = writer(Arc::new(slow), WalConfig::default());
    let acks: Vec<_> = (0..200)
        .map(|i| w.append(entry(i % 4, u64::from(i / 4), 1)).unwrap())
        .collect();
    for a in acks {
        a.await.unwrap().unwrap();
    }
    let segs = segments(&inner).await;
    assert!(segs.len() < 50, "200 appends took {} segments", segs.len());
    for (i, s) in segs.iter().enumerate() {
        assert_eq!(s.seq, SegmentSeq(i as u64), "seqs are dense from 0");
    }
    assert_eq!(segs.iter().map(|s| s.entries.len()).sum::<usize>(), 200);
}

#[tokio::test]
async fn acknowledgements_are_released_in_seq_order() {
    let inner: DynStore = Arc::new(MemoryStore::new());
    let jittery = FaultyStore::new(
        inner,
        FaultConfig {
            seed: 3,
            latency_ms: (1, 40),
            ..FaultConfig::default()
        },
    );
    let w = writer(Arc::new(jittery), WalConfig::segment_per_append(4));
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..40u64 {
        let rx = w.append(entry(0, i, 1)).unwrap();
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let seq = rx.await.unwrap().unwrap();
            order.lock().unwrap().push(seq);
        }));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "acks never overtake an earlier segment");
}

#[tokio::test]
async fn failed_and_ambiguous_puts_are_retried_with_the_same_key_and_bytes() {
    let inner: DynStore = Arc::new(MemoryStore::new());
    let faults = FaultConfig {
        seed: 11,
        error_rate: 0.2,
        slowdown_rate: 0.1,
        conflict_rate: 0.1,
        lost_reply_rate: 0.3,
        ..FaultConfig::default()
    };
    let faulty = FaultyStore::new(inner.clone(), faults);
    let w = writer(Arc::new(faulty.clone()), WalConfig::segment_per_append(4));
    // Pairs of appends: one PUT per pair, many PUTs in all.
    for i in 0..30u64 {
        let a = w.append(entry(0, 2 * i, 1)).unwrap();
        let b = w.append(entry(0, 2 * i + 1, 1)).unwrap();
        a.await.unwrap().unwrap();
        b.await.unwrap().unwrap();
    }
    let stats = faulty.stats();
    assert!(stats.lost_replies > 0 && stats.errors > 0, "{stats:?}");
    let segs = segments(&inner).await;
    let offsets: Vec<u64> = segs
        .iter()
        .flat_map(|s| s.entries.iter().map(|e| e.base_offset.0))
        .collect();
    assert_eq!(
        offsets,
        (0..60).collect::<Vec<_>>(),
        "every entry exactly once, in order"
    );
}

#[tokio::test]
async fn a_fence_marker_stops_the_writer_and_fails_pending_appends() {
    use crate::wal::segment::{encode_fence_marker, FenceMarker};
    let store: DynStore = Arc::new(MemoryStore::new());
    let w = writer(store.clone(), WalConfig::default());
    w.append(entry(0, 0, 1)).unwrap().await.unwrap().unwrap();
    let marker = FenceMarker {
        fenced_node: NodeId::new("n1"),
        fenced_epoch: NodeEpoch(1),
        seq: SegmentSeq(1),
        holder: NodeId::new("n2"),
        holder_epoch: NodeEpoch(1),
        log_index: crate::ids::LogIndex(9),
    };
    store
        .put_if_absent(
            &segment_key(&NodeId::new("n1"), NodeEpoch(1), SegmentSeq(1)),
            encode_fence_marker(&marker),
        )
        .await
        .unwrap();
    let res = w.append(entry(0, 1, 1)).unwrap().await.unwrap();
    assert!(matches!(res, Err(WalError::Fenced(_))), "{res:?}");
    assert!(w.is_fenced());
    assert!(w.append(entry(0, 2, 1)).is_err());
    // Nothing of ours was written over the marker.
    assert_eq!(segments(&store).await.len(), 1);
}

/// A writer that has acknowledged `n` entries, each in a segment of its own.
async fn one_segment_per_entry(store: DynStore, n: u64) -> WalWriter {
    let w = writer(store, WalConfig::segment_per_append(1));
    for i in 0..n {
        w.append(entry(0, i, 1)).unwrap().await.unwrap().unwrap();
    }
    w
}

#[tokio::test]
async fn truncation_deletes_committed_segments_but_keeps_the_newest() {
    let store: DynStore = Arc::new(MemoryStore::new());
    let w = one_segment_per_entry(store.clone(), 5).await;
    assert_eq!(w.retained_segments(), 5);
    // Records below 3 are committed: segments 0..=2 may go.
    let deleted = w.truncate(|_, end| end <= Offset(3)).await;
    assert_eq!(deleted, 3);
    // Everything committed: all but the newest go.
    let deleted = w.truncate(|_, _| true).await;
    assert_eq!(deleted, 1);
    let left: Vec<_> = store
        .list("wal/n1/1/")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert_eq!(left, vec![segment_key(&NodeId::new("n1"), NodeEpoch(1), SegmentSeq(4))]);
}

#[tokio::test]
async fn retained_streams_are_those_of_the_segments_left() {
    let store: DynStore = Arc::new(MemoryStore::new());
    let w = writer(store, WalConfig::segment_per_append(1));
    assert!(w.retained_streams().is_empty());
    for (stream, base) in [(0, 0), (1, 0), (2, 0)] {
        w.append(entry(stream, base, 1)).unwrap().await.unwrap().unwrap();
    }
    let id = |p| StreamId::new(TopicId(1), p);
    assert_eq!(w.retained_streams(), [id(0), id(1), id(2)].into_iter().collect());
    // Streams 0 and 1 committed: their segments go, the newest (2) stays.
    assert_eq!(w.truncate(|stream, _| stream != id(2)).await, 2);
    assert_eq!(w.retained_streams(), [id(2)].into_iter().collect());
}

#[tokio::test]
async fn concurrent_truncations_delete_each_segment_once_and_leave_no_straggler() {
    let inner: DynStore = Arc::new(MemoryStore::new());
    let slow = FaultyStore::new(
        inner.clone(),
        FaultConfig {
            seed: 5,
            latency_ms: (1, 5),
            ..FaultConfig::default()
        },
    );
    let w = writer(Arc::new(slow), WalConfig::segment_per_append(1));
    for i in 0..20u64 {
        w.append(entry(0, i, 1)).unwrap().await.unwrap().unwrap();
    }
    let (a, b) = tokio::join!(
        w.truncate(|_, end| end <= Offset(10)),
        w.truncate(|_, end| end <= Offset(10))
    );
    assert_eq!(a + b, 10);
    let (c, d) = tokio::join!(w.truncate(|_, _| true), w.truncate(|_, _| true));
    assert_eq!(c + d, 9);
    let left: Vec<String> = inner
        .list("wal/n1/1/")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert_eq!(
        left,
        vec![segment_key(&NodeId::new("n1"), NodeEpoch(1), SegmentSeq(19))],
        "only the newest is kept"
    );
}

#[tokio::test]
async fn truncation_keeps_every_segment_a_failed_delete_left() {
    let faulty = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new()), FaultConfig::default()));
    let store: DynStore = faulty.clone();
    let w = one_segment_per_entry(store.clone(), 40).await;
    assert_eq!(w.retained_segments(), 40);
    // Deletes fail: nothing is forgotten.
    faulty.set_unavailable(true);
    assert_eq!(w.truncate(|_, _| true).await, 0);
    assert_eq!(w.retained_segments(), 40);
    faulty.set_unavailable(false);
    assert_eq!(segments(&store).await.len(), 40);
    // Back: every committed segment but the newest goes.
    assert_eq!(w.truncate(|_, _| true).await, 39);
    assert_eq!(w.retained_segments(), 1);
    let left = segments(&store).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].seq, SegmentSeq(39));
}

fn budgeted(puts_per_sec: f64, burst: u32, latency_target: Option<Duration>) -> WalConfig {
    WalConfig {
        budget: Some(BudgetConfig::new(puts_per_sec, burst).unwrap()),
        latency_target,
        ..WalConfig::default()
    }
}

/// One append every 10 ms for `n` appends; the time each waited for its ack.
async fn paced_appends(w: &WalWriter, n: u64) -> Vec<Duration> {
    let mut acks = Vec::new();
    for i in 0..n {
        let sent = Instant::now();
        let rx = w.append(entry(0, i, 1)).unwrap();
        acks.push(tokio::spawn(async move {
            rx.await.unwrap().unwrap();
            sent.elapsed()
        }));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut waited = Vec::new();
    for a in acks {
        waited.push(a.await.unwrap());
    }
    waited
}

#[tokio::test(start_paused = true)]
async fn a_put_budget_makes_steady_appends_share_puts() {
    let store: DynStore = Arc::new(MemoryStore::new());
    let w = writer(store.clone(), budgeted(4.0, 1, None));
    // 100 appends over 1 s: without a budget each goes alone (no PUT in
    // flight on an instant store); with 4 PUTs/s they share about 5.
    let waited = paced_appends(&w, 100).await;
    let segs = segments(&store).await;
    assert!((4..=7).contains(&segs.len()), "{} segments", segs.len());
    assert_eq!(segs.iter().map(|s| s.entries.len()).sum::<usize>(), 100);
    assert!(
        waited.iter().all(|d| *d <= Duration::from_millis(260)),
        "no append waits longer than one token: {:?}",
        waited.iter().max()
    );
}

#[tokio::test(start_paused = true)]
async fn a_lone_append_on_a_rested_budget_goes_at_once() {
    let store: DynStore = Arc::new(MemoryStore::new());
    let w = writer(store.clone(), budgeted(1.0, 2, None));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let sent = Instant::now();
    w.append(entry(0, 0, 1)).unwrap().await.unwrap().unwrap();
    assert_eq!(sent.elapsed(), Duration::ZERO, "a token was there");
}

#[tokio::test(start_paused = true)]
async fn a_latency_target_overrides_the_budget() {
    let store: DynStore = Arc::new(MemoryStore::new());
    let w = writer(store.clone(), budgeted(1.0, 1, Some(Duration::from_millis(50))));
    let waited = paced_appends(&w, 100).await;
    assert!(
        waited.iter().all(|d| *d <= Duration::from_millis(60)),
        "the target bounds the wait: {:?}",
        waited.iter().max()
    );
    let segs = segments(&store).await;
    assert!(segs.len() > 2, "the budget alone would allow 2 PUTs: {}", segs.len());
    assert!(segs.len() < 100, "appends still share PUTs: {}", segs.len());
}

#[tokio::test(start_paused = true)]
async fn a_full_segment_goes_without_a_token() {
    let store: DynStore = Arc::new(MemoryStore::new());
    let config = WalConfig {
        segment_bytes: 1,
        ..budgeted(0.001, 1, None)
    };
    let w = writer(store.clone(), config);
    let sent = Instant::now();
    for i in 0..3 {
        w.append(entry(0, i, 1)).unwrap().await.unwrap().unwrap();
    }
    assert_eq!(sent.elapsed(), Duration::ZERO);
    assert_eq!(segments(&store).await.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_segment_past_the_bypass_size_goes_without_a_token() {
    // A budget that would hold every PUT for 1000 s, and a bypass at about
    // ten entries: appends every 10 ms go in PUTs of about ten entries,
    // each after about 100 ms, not after the token.
    let one = entry_encoded_len(&entry(0, 0, 1));
    let store: DynStore = Arc::new(MemoryStore::new());
    let mut config = budgeted(0.001, 1, None);
    config.budget = config.budget.map(|b| b.bypass_at(10 * one));
    let w = writer(store.clone(), config);
    let waited = paced_appends(&w, 100).await;
    let segs = segments(&store).await.len();
    assert!((9..=13).contains(&segs), "{segs} segments for 100 appends");
    // The last few, too few to fill one, wait for the token.
    let worst = waited[..90].iter().max().unwrap();
    assert!(*worst <= Duration::from_millis(120), "waited {worst:?}");
    assert!(*waited.last().unwrap() > Duration::from_secs(100));
}
