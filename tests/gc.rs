//! Garbage collection and retention on in-process nodes sharing in-memory
//! stores (see `docs/design/gc.md`).

mod support;

use bytes::Bytes;
use sluice::api::{ErrorCode, Records, Topics};
use sluice::meta::{ConfigUpdate, StreamState};
use sluice::node::{Backends, Node};
use sluice::store::PutOutcome;
use sluice::wal::segment::{decode_wal_object, WalObject};
use sluice::wal::writer::{incarnation_prefix, segment_key};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use support::{all_placed, config, eventually, read_from, rec, rec_at};

/// Collection every second; unreferenced data objects go after 2 s.
const GC: &[&str] = &["--gc-interval-sec", "1", "--gc-grace-sec", "2"];

async fn start(id: &str, backends: Backends, extra: &[&str]) -> Arc<Node> {
    let mut flags = GC.to_vec();
    flags.extend_from_slice(extra);
    Node::start_with(config(id, &flags), backends).await.unwrap()
}

/// Appends to every partition through whichever node owns it now.
async fn append_all(nodes: &[&Arc<Node>], topic: &str, partitions: u32, n: u32) -> BTreeMap<(u32, u64), String> {
    let mut acked = BTreeMap::new();
    for i in 0..n {
        let p = i % partitions;
        let value = format!("v{i}");
        let mut done = false;
        for _ in 0..200 {
            for node in nodes {
                if let Ok(got) = node.append(topic, p, vec![rec(&value)]).await {
                    acked.insert((p, got.base.0), value.clone());
                    done = true;
                    break;
                }
            }
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(done, "append {i} to partition {p} never succeeded");
    }
    acked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_incarnations_wal_shrinks_to_its_fence_marker_and_the_marker_still_fences() {
    let backends = support::memory_backends();
    // Flushing rarely keeps the victim's records in its WAL, so the takeover replays them.
    let a = start("a", backends.clone(), &["--flush-interval-sec", "3600"]).await;
    let b = start("b", backends.clone(), &["--flush-interval-sec", "3600"]).await;
    a.create_topic("t", 4, Default::default()).await.unwrap();
    assert!(all_placed(&a, "t").await);
    let acked = append_all(&[&a, &b], "t", 4, 40).await;
    let (victim, survivor) = if a.meta.view().holds_lease(&a.id, a.epoch) {
        (b.clone(), a.clone())
    } else {
        (a.clone(), b.clone())
    };
    assert!(
        !victim.open_streams().is_empty(),
        "the victim owns nothing: placement changed"
    );
    let prefix = incarnation_prefix(&victim.id, victim.epoch);
    assert!(!backends.wal.list(&prefix).await.unwrap().is_empty());
    victim.crash();

    // Takeover, then collection: only the fence marker is left.
    let wal = backends.wal.clone();
    let mut left = Vec::new();
    for _ in 0..300 {
        left = wal.list(&prefix).await.unwrap();
        let recovered = survivor
            .meta
            .view()
            .streams
            .values()
            .all(|r| matches!(&r.state, StreamState::Open { node, .. } if node == &survivor.id));
        if recovered && left.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(left.len(), 1, "left under {prefix}: {left:?}");
    let marker = wal.get(&left[0].key, None).await.unwrap().unwrap();
    let Ok(WalObject::Fence(fence)) = decode_wal_object(&left[0].key, &marker) else {
        panic!("what is left is not a fence marker: {}", left[0].key);
    };
    // A paused writer of the dead incarnation waking now cannot land at the marker.
    let key = segment_key(&victim.id, victim.epoch, fence.seq);
    assert_eq!(
        wal.put_if_absent(&key, Bytes::from_static(b"zombie")).await.unwrap(),
        PutOutcome::AlreadyExists
    );
    // Every acknowledged record is still there, served by the survivor.
    for ((p, offset), value) in &acked {
        let r = survivor.read("t", *p, read_from(*offset)).await.unwrap();
        assert_eq!(
            r.records[0].1.value.as_deref(),
            Some(value.as_bytes()),
            "partition {p} offset {offset}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphaned_data_object_goes_after_the_grace_and_indexed_ones_stay() {
    let backends = support::memory_backends();
    let a = start("a", backends.clone(), &["--flush-interval-sec", "1"]).await;
    a.create_topic("t", 2, Default::default()).await.unwrap();
    assert!(all_placed(&a, "t").await);
    let acked = append_all(&[&a], "t", 2, 20).await;
    // Flushed into indexed data objects.
    assert!(
        eventually(Duration::from_secs(20), || {
            let v = a.meta.view();
            v.streams.values().all(|r| r.committed_end.0 == 10)
        })
        .await
    );
    let orphan = "data/2020/01/01/gone-1-00000000000000000000000000.obj";
    backends
        .data
        .put_if_absent(orphan, Bytes::from_static(b"not indexed"))
        .await
        .unwrap();
    let data = backends.data.clone();
    let mut gone = false;
    for _ in 0..200 {
        if data.get(orphan, None).await.unwrap().is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the orphan is still there");
    let indexed: Vec<String> = a
        .meta
        .view()
        .streams
        .values()
        .flat_map(|r| r.chunks.iter().map(|c| c.key.clone()))
        .collect();
    assert!(!indexed.is_empty());
    for key in &indexed {
        assert!(
            data.get(key, None).await.unwrap().is_some(),
            "indexed object {key} was deleted"
        );
    }
    for ((p, offset), value) in &acked {
        let r = a.read("t", *p, read_from(*offset)).await.unwrap();
        assert_eq!(r.records[0].1.value.as_deref(), Some(value.as_bytes()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_trims_old_chunks_and_reads_below_the_start_are_out_of_range() {
    let backends = support::memory_backends();
    let a = start("a", backends.clone(), &["--flush-interval-sec", "1"]).await;
    a.create_topic("t", 1, Default::default()).await.unwrap();
    assert!(all_placed(&a, "t").await);
    // Ten records from 2001: far past any retention.
    for i in 0..10 {
        a.append("t", 0, vec![rec_at(format!("old{i}"), 1_000_000_000_000)])
            .await
            .unwrap();
    }
    assert!(
        eventually(Duration::from_secs(20), || a
            .meta
            .view()
            .streams
            .values()
            .all(|r| r.committed_end.0 == 10))
        .await
    );
    a.alter_topic_config("t", vec![ConfigUpdate::RetentionMs(Some(60_000))])
        .await
        .unwrap();
    // A recent record after them, in a later chunk.
    let now = sluice::clock::Clock::now_ms(a.clock.as_ref());
    a.append("t", 0, vec![rec_at("new", now)]).await.unwrap();
    assert!(
        eventually(Duration::from_secs(20), || a
            .meta
            .view()
            .streams
            .values()
            .all(|r| r.start.0 == 10))
        .await,
        "start offset did not move to 10: {:?}",
        a.meta.view().streams.values().map(|r| r.start).collect::<Vec<_>>()
    );
    let err = a.read("t", 0, read_from(0)).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::OffsetOutOfRange, "{err:?}");
    let r = a.read("t", 0, read_from(10)).await.unwrap();
    assert_eq!(r.records[0].1.value.as_deref(), Some(&b"new"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_deleted_topics_leave_the_view_and_its_objects_are_collected() {
    let backends = support::memory_backends();
    let data = backends.data.clone();
    let a = start("a", backends.clone(), &["--flush-interval-sec", "1"]).await;
    a.create_topic("steady", 1, Default::default()).await.unwrap();
    assert!(all_placed(&a, "steady").await);
    let baseline = a.meta.view().streams.len();
    for round in 0..3 {
        let name = format!("churn{round}");
        a.create_topic(&name, 2, Default::default()).await.unwrap();
        assert!(all_placed(&a, &name).await);
        append_all(&[&a], &name, 2, 4).await;
        // Flushed into data objects before it goes.
        assert!(
            eventually(Duration::from_secs(20), || a
                .meta
                .view()
                .streams
                .values()
                .filter(|r| r.topic_name == name)
                .all(|r| r.committed_end.0 > 0))
            .await
        );
        a.delete_topic(&name).await.unwrap();
    }
    assert!(
        eventually(Duration::from_secs(30), || a.meta.view().streams.len() == baseline).await,
        "deleted streams' rows stayed: {} rows, baseline {baseline}",
        a.meta.view().streams.len()
    );
    assert!(a.meta.view().streams.values().all(|r| r.state != StreamState::Deleted));
    // Their data objects went too (`steady` holds no records).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut left = data.list("data/").await.unwrap();
    while !left.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = data.list("data/").await.unwrap();
    }
    assert!(left.is_empty(), "data objects of deleted topics stayed: {left:?}");
}
