//! One conformance suite for every `MetaLog` backend.

use super::log::{AppendOutcome, DynLog};
use crate::ids::LogIndex;
use bytes::Bytes;

pub async fn run_all(log: DynLog) {
    appends_at_an_index_once(&log).await;
    concurrent_appends_have_one_winner(&log).await;
    reads_are_contiguous_and_bounded(&log).await;
    snapshots_and_truncation(&log).await;
}

/// Each check uses its own index range: the log is shared between them.
pub async fn appends_at_an_index_once(log: &DynLog) {
    assert_eq!(
        log.append_at(LogIndex(1), Bytes::from_static(b"one")).await.unwrap(),
        AppendOutcome::Appended
    );
    assert_eq!(
        log.append_at(LogIndex(1), Bytes::from_static(b"other")).await.unwrap(),
        AppendOutcome::IndexTaken
    );
    let got = log.read_from(LogIndex(1), 1).await.unwrap();
    assert_eq!(got, vec![(LogIndex(1), Bytes::from_static(b"one"))]);
}

pub async fn concurrent_appends_have_one_winner(log: &DynLog) {
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let log = log.clone();
            tokio::spawn(async move {
                (
                    i,
                    log.append_at(LogIndex(2), Bytes::from(format!("w{i}"))).await.unwrap(),
                )
            })
        })
        .collect();
    let mut winners = Vec::new();
    for t in tasks {
        let (i, out) = t.await.unwrap();
        if out == AppendOutcome::Appended {
            winners.push(i);
        }
    }
    assert_eq!(winners.len(), 1, "exactly one append wins index 2");
    let got = log.read_from(LogIndex(2), 1).await.unwrap();
    assert_eq!(got[0].1, Bytes::from(format!("w{}", winners[0])));
}

pub async fn reads_are_contiguous_and_bounded(log: &DynLog) {
    for i in 3..=40 {
        log.append_at(LogIndex(i), Bytes::from(format!("e{i}"))).await.unwrap();
    }
    // 41 is missing, 42 exists: reads stop at the gap.
    log.append_at(LogIndex(42), Bytes::from_static(b"after-gap"))
        .await
        .unwrap();
    let all = log.read_from(LogIndex(1), 1000).await.unwrap();
    assert_eq!(all.len(), 40);
    assert!(all.iter().enumerate().all(|(i, (idx, _))| idx.0 == i as u64 + 1));
    let some = log.read_from(LogIndex(10), 5).await.unwrap();
    assert_eq!(
        some.iter().map(|(i, _)| i.0).collect::<Vec<_>>(),
        vec![10, 11, 12, 13, 14]
    );
    assert!(log.read_from(LogIndex(41), 10).await.unwrap().is_empty());
    log.append_at(LogIndex(41), Bytes::from_static(b"e41")).await.unwrap();
}

pub async fn snapshots_and_truncation(log: &DynLog) {
    assert!(log.latest_snapshot().await.unwrap().is_none());
    log.put_snapshot(LogIndex(10), Bytes::from_static(b"view@10"))
        .await
        .unwrap();
    log.put_snapshot(LogIndex(20), Bytes::from_static(b"view@20"))
        .await
        .unwrap();
    assert_eq!(
        log.latest_snapshot().await.unwrap(),
        Some((LogIndex(20), Bytes::from_static(b"view@20")))
    );
    let removed = log.truncate_before(LogIndex(20)).await.unwrap();
    assert_eq!(removed, 19);
    assert!(log.read_from(LogIndex(1), 10).await.unwrap().is_empty());
    assert_eq!(log.read_from(LogIndex(20), 1).await.unwrap()[0].0, LogIndex(20));
    assert_eq!(log.latest_snapshot().await.unwrap().unwrap().0, LogIndex(20));
}
