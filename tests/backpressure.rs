//! Back-pressure, not growth: when the WAL cannot keep up, appends past
//! `--max-buffered-bytes` are refused with a retryable error, buffered bytes
//! never pass the limit, and everything accepted is acknowledged once the
//! store recovers.

mod support;

use bytes::Bytes;
use sluice::api::{ErrorCode, Records, Topics};
use sluice::batch::Record;
use sluice::node::{Backends, Node};
use sluice::store::{FaultConfig, FaultyStore, MemoryStore};
use std::sync::Arc;
use std::time::Duration;
use support::{config, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_past_the_buffer_limit_are_throttled_until_the_wal_catches_up() {
    let wal = FaultyStore::new(Arc::new(MemoryStore::new()), FaultConfig::default());
    let mut backends = support::memory_backends();
    backends = Backends {
        wal: Arc::new(wal.clone()),
        ..backends
    };
    let limit = 1 << 20;
    let cfg = config(
        "n1",
        &[
            "--max-buffered-bytes",
            &limit.to_string(),
            "--max-request-bytes",
            "262144",
            "--max-record-bytes",
            "131072",
        ],
    );
    let node = Node::start_with(cfg, backends).await.unwrap();
    node.create_topic("t", 1, Default::default()).await.unwrap();
    let id = sluice::ids::StreamId::new(node.meta.view().topics["t"].id, 0);
    assert!(eventually(Duration::from_secs(10), || node.open_stream(id).is_some()).await);

    // The WAL store stops answering: nothing can become durable.
    wal.set_unavailable(true);
    let value = Bytes::from(vec![b'x'; 64 * 1024]);
    let mut pending = Vec::new();
    let mut throttled = 0;
    for _ in 0..64 {
        let n = node.clone();
        let v = value.clone();
        let task = tokio::spawn(async move {
            n.append(
                "t",
                0,
                vec![Record {
                    timestamp_ms: 1,
                    key: None,
                    value: Some(v),
                    headers: vec![],
                }],
            )
            .await
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        if task.is_finished() {
            let err = task.await.unwrap().unwrap_err();
            assert_eq!(err.code, ErrorCode::Throttled, "{err}");
            throttled += 1;
        } else {
            pending.push(task);
        }
        assert!(
            node.budget.used() <= limit,
            "buffered {} > limit {limit}",
            node.budget.used()
        );
    }
    assert!(throttled > 0, "64 x 64 KiB must overflow a 1 MiB buffer");
    assert!(!pending.is_empty());
    eprintln!(
        "{} appends accepted and waiting, {throttled} throttled, {} bytes buffered",
        pending.len(),
        node.budget.used()
    );

    // The store heals: every accepted append is acknowledged, densely.
    wal.set_unavailable(false);
    let mut offsets = Vec::new();
    for t in pending {
        offsets.push(t.await.unwrap().unwrap().base.0);
    }
    offsets.sort();
    assert_eq!(offsets, (0..offsets.len() as u64).collect::<Vec<_>>());
}
