use super::*;
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
