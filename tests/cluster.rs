//! In-process clusters on shared in-memory stores: routing, failover after a
//! crash, clean shutdown, metadata outages, and the liveness table of the
//! failover page.

mod support;

use bytes::Bytes;
use sluice::api::{Cluster, ErrorCode, ReadFrom, ReadRequest, Records, Topics};
use sluice::ids::{NodeId, Offset, StreamId};
use sluice::meta::StreamState;
use sluice::node::{Backends, Node, Phase};
use sluice::store::{FaultConfig, FaultyStore, MemoryStore};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{all_placed, config, eventually, read_from, rec};

/// A node serving HTTP on an ephemeral port it advertises.
async fn spawn_node(id: &str, backends: Backends, extra: &[&str]) -> Arc<Node> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut flags = vec!["--advertised-http-addr", &addr];
    flags.extend_from_slice(extra);
    let node = Node::start_with(config(id, &flags), backends).await.unwrap();
    let app = sluice::http::router(node.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    node
}

fn stream_id(node: &Node, topic: &str, p: u32) -> StreamId {
    StreamId::new(node.meta.view().topics[topic].id, p)
}

fn owner(node: &Node, s: StreamId) -> Option<String> {
    match &node.meta.view().streams[&s].state {
        StreamState::Open { node, .. } => Some(node.to_string()),
        _ => None,
    }
}

/// Every partition of `topic` is open in `node`'s view and served by its
/// owner (an owner opens a stream shortly after the view places it there).
async fn all_open(node: &Node, topic: &str) -> bool {
    let placed = all_placed(node, topic).await;
    let partitions = node.meta.view().topics[topic].partitions;
    let deadline = Instant::now() + Duration::from_secs(20);
    for p in 0..partitions {
        while sluice::api::high_watermark(node, topic, p).await.is_err() {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    placed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_to_a_non_owner_are_forwarded_to_the_owner() {
    let backends = support::memory_backends();
    let a = spawn_node("a", backends.clone(), &[]).await;
    let b = spawn_node("b", backends.clone(), &[]).await;
    a.create_topic("t", 4, Default::default()).await.unwrap();
    assert!(all_open(&a, "t").await);
    b.meta.wait_for(a.meta.applied()).await;
    // Every partition, through both nodes: one of them is not the owner.
    for p in 0..4 {
        for (i, n) in [&a, &b].into_iter().enumerate() {
            let got = n.append("t", p, vec![rec(format!("p{p}-{i}"))]).await.unwrap();
            assert_eq!(got.base, Offset(i as u64));
        }
        for n in [&a, &b] {
            let r = n.read("t", p, read_from(0)).await.unwrap();
            let values: Vec<_> = r.records.iter().map(|(_, r)| r.value.clone().unwrap()).collect();
            assert_eq!(
                values,
                vec![Bytes::from(format!("p{p}-0")), Bytes::from(format!("p{p}-1"))]
            );
        }
    }
    // A long poll through the non-owner wakes on an append through the owner.
    let s = stream_id(&a, "t", 0);
    let (owner_node, other) = if owner(&a, s).as_deref() == Some("a") {
        (a.clone(), b.clone())
    } else {
        (b.clone(), a.clone())
    };
    let poll = tokio::spawn(async move {
        let req = ReadRequest {
            from: ReadFrom::At(Offset(2)),
            limit: 10,
            max_bytes: 1 << 20,
            wait: Duration::from_secs(10),
            committed: false,
            consistency: Default::default(),
        };
        other.read("t", 0, req).await.unwrap()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    owner_node.append("t", 0, vec![rec("late")]).await.unwrap();
    let r = poll.await.unwrap();
    assert_eq!(r.records[0].1.value.as_deref(), Some(&b"late"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_nodes_streams_are_recovered_and_placed_on_a_live_node() {
    let backends = support::memory_backends();
    let a = spawn_node("a", backends.clone(), &["--flush-interval-sec", "3600"]).await;
    let b = spawn_node("b", backends.clone(), &["--flush-interval-sec", "3600"]).await;
    a.create_topic("t", 4, Default::default()).await.unwrap();
    assert!(all_open(&a, "t").await);
    let mut acked = BTreeMap::new();
    for i in 0..40u32 {
        let p = i % 4;
        let got = a.append("t", p, vec![rec(format!("v{i}"))]).await.unwrap();
        acked.insert((p, got.base.0), format!("v{i}"));
    }
    let victim = if a.meta.view().holds_lease(&NodeId::new("a"), a.epoch) {
        b.clone()
    } else {
        a.clone()
    };
    let survivor = if Arc::ptr_eq(&victim, &a) { b.clone() } else { a.clone() };
    let victim_streams = victim.open_streams().len();
    let crashed_at = Instant::now();
    victim.crash();
    // Fenced after the node timeout (4 heartbeats of 1 s), recovered, placed.
    assert!(
        eventually(Duration::from_secs(20), || {
            let v = survivor.meta.view();
            v.nodes[&victim.id].fenced && v.open_streams_of(&survivor.id, survivor.epoch).len() == 4
        })
        .await
    );
    eprintln!(
        "{victim_streams} streams moved {:?} after the crash",
        crashed_at.elapsed()
    );
    for ((p, offset), value) in &acked {
        let r = survivor.read("t", *p, read_from(*offset)).await.unwrap();
        assert_eq!(
            r.records[0].1.value.as_deref(),
            Some(value.as_bytes()),
            "partition {p} offset {offset}"
        );
    }
    assert!(!survivor.ready().fenced);
    assert!(survivor
        .nodes()
        .nodes
        .iter()
        .any(|n| n.node_id == victim.id.to_string() && n.fenced));
}

/// Shut down `b` cleanly (the lease holder or not) with `a` left running:
/// `a` gets every stream, each placed once (never back on `b`), and their
/// offsets continue.
async fn clean_shutdown_hands_over(stop_the_lease_holder: bool) {
    let backends = support::memory_backends();
    let first = spawn_node("a", backends.clone(), &[]).await;
    let second = spawn_node("b", backends.clone(), &[]).await;
    first.create_topic("t", 4, Default::default()).await.unwrap();
    assert!(all_open(&first, "t").await);
    let holder = first.meta.view().lease.as_ref().map(|l| l.holder.clone());
    let b_holds = holder.as_ref() == Some(&second.id);
    let (a, b) = if b_holds == stop_the_lease_holder {
        (first, second)
    } else {
        (second, first)
    };
    for p in 0..4 {
        a.append("t", p, vec![rec("before")]).await.unwrap();
    }
    let moving: Vec<_> = b.open_streams().iter().map(|s| (s.id, s.epoch)).collect();
    assert!(!moving.is_empty(), "b owns some of the partitions");
    let started = Instant::now();
    b.shutdown(async {}).await;
    assert_eq!(b.phase(), Phase::Stopped);
    a.meta.wait_for(b.meta.applied()).await;
    assert!(a.meta.view().nodes[&b.id].fenced, "the node fenced itself");
    assert!(eventually(Duration::from_secs(20), || a.open_streams().len() == 4).await);
    let handoff = started.elapsed();
    eprintln!("clean handoff (lease holder stopped: {stop_the_lease_holder}) took {handoff:?}");
    assert!(
        a.meta.view().holds_lease(&a.id, a.epoch),
        "the survivor holds the lease"
    );
    // Each stream was placed once, straight on the live node: never back on
    // the node shutting down (that costs a takeover and a tick).
    for (id, epoch) in moving {
        let now = a.meta.view().streams[&id].stream_epoch;
        assert_eq!(now.0, epoch.0 + 1, "{id} placed once");
    }
    for p in 0..4 {
        let got = a.append("t", p, vec![rec("after")]).await.unwrap();
        assert_eq!(got.base, Offset(1), "nothing lost, offsets continue");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_shutdown_hands_streams_over() {
    clean_shutdown_hands_over(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_shutdown_of_the_lease_holder_hands_over_the_lease_and_its_streams() {
    clean_shutdown_hands_over(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_a_metadata_outage_appends_go_on_metadata_changes_fail_fast_and_nobody_is_fenced() {
    let log_store = FaultyStore::new(Arc::new(MemoryStore::new()), FaultConfig::default());
    let log: sluice::meta::DynLog = Arc::new(sluice::meta::store_log::StoreLog::new(Arc::new(log_store.clone()), ""));
    let backends = Backends {
        log,
        ..support::memory_backends()
    };
    let a = spawn_node("a", backends.clone(), &[]).await;
    let b = spawn_node("b", backends.clone(), &[]).await;
    a.create_topic("t", 2, Default::default()).await.unwrap();
    assert!(all_open(&a, "t").await);
    log_store.set_unavailable(true);
    // Wait past two node timeouts: nobody may be fenced.
    let outage = Instant::now();
    let mut appended = 0;
    while outage.elapsed() < Duration::from_secs(9) {
        for n in [&a, &b] {
            for s in n.open_streams() {
                n.append("t", s.id.partition, vec![rec("during")]).await.unwrap();
                appended += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let started = Instant::now();
    let err = a.create_topic("u", 1, Default::default()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Unavailable);
    assert!(started.elapsed() < Duration::from_secs(1), "metadata changes fail fast");
    // A view that cannot catch up proves no absence: 503, not 404, and at once.
    let started = Instant::now();
    let err = a.describe_topic_current("never-created").await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Unavailable, "{err:?}");
    assert_eq!(
        a.partitions_current("never-created").await.unwrap_err().code,
        ErrorCode::Unavailable
    );
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "lookups do not wait out the outage"
    );
    assert_eq!(
        a.describe_topic_current("t").await.unwrap().partitions,
        2,
        "known topics are served"
    );
    log_store.set_unavailable(false);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        a.describe_topic_current("never-created").await.unwrap_err().code,
        ErrorCode::TopicNotFound,
        "caught up again: the absence is confirmed"
    );
    let v = a.meta.view();
    assert!(v.nodes.values().all(|r| !r.fenced), "nobody was fenced by the outage");
    assert_eq!(a.phase(), Phase::Ready);
    assert_eq!(b.phase(), Phase::Ready);
    eprintln!("{appended} appends acknowledged during a 9 s metadata outage");
}

/// One metadata log seen two ways: node a's view can be cut off (the
/// returned `FaultyStore`), node b's always reads it. Both share one data
/// store, so b can recover what a acknowledged.
fn two_views_of_one_log() -> (FaultyStore, Backends, Backends) {
    let shared_log = Arc::new(MemoryStore::new());
    let a_view = FaultyStore::new(shared_log.clone(), FaultConfig::default());
    let log_a: sluice::meta::DynLog = Arc::new(sluice::meta::store_log::StoreLog::new(Arc::new(a_view.clone()), ""));
    let log_b: sluice::meta::DynLog = Arc::new(sluice::meta::store_log::StoreLog::new(shared_log, ""));
    let base = support::memory_backends();
    let a = Backends {
        log: log_a,
        ..base.clone()
    };
    let b = Backends { log: log_b, ..base };
    (a_view, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_cut_off_from_the_log_fences_nobody_and_loses_the_lease() {
    let (holder_view, a_backends, b_backends) = two_views_of_one_log();
    let a = spawn_node("a", a_backends, &[]).await;
    assert!(eventually(Duration::from_secs(5), || a.ready().lease_holder).await);
    let b = spawn_node("b", b_backends, &[]).await;
    holder_view.set_unavailable(true);
    // b takes the lease after the lease timeout and fences a after the node timeout;
    // a, cut off, fences nobody (its own clock stopped).
    assert!(eventually(Duration::from_secs(20), || b.meta.view().nodes[&a.id].fenced).await);
    assert!(!b.meta.view().nodes[&b.id].fenced);
    assert!(b.ready().lease_holder);
    holder_view.set_unavailable(false);
    // a sees its fence in the view and stops.
    assert!(eventually(Duration::from_secs(10), || a.phase() == Phase::Fenced).await);
    assert!(a.ready().fenced);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_registers_at_a_new_epoch_and_is_not_fenced() {
    let backends = support::memory_backends();
    let a = spawn_node("a", backends.clone(), &[]).await;
    let b = spawn_node("b", backends.clone(), &[]).await;
    b.crash();
    let b2 = spawn_node("b", backends.clone(), &[]).await;
    assert_eq!(b2.epoch.0, b.epoch.0 + 1);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let v = a.meta.view();
    assert!(!v.nodes[&b2.id].fenced, "the new epoch restarted its clock");
    assert_eq!(v.nodes[&b2.id].epoch, b2.epoch);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_moves_a_stream_without_losing_records() {
    let backends = support::memory_backends();
    let a = spawn_node("a", backends.clone(), &["--rebalance-threshold", "100"]).await;
    let b = spawn_node("b", backends.clone(), &["--rebalance-threshold", "100"]).await;
    a.create_topic("t", 2, Default::default()).await.unwrap();
    assert!(all_open(&a, "t").await);
    let s = stream_id(&a, "t", 0);
    for i in 0..5 {
        a.append("t", 0, vec![rec(format!("v{i}"))]).await.unwrap();
    }
    let from = owner(&a, s).unwrap();
    let to = if from == "a" { "b" } else { "a" };
    let epoch_before = a.meta.view().streams[&s].stream_epoch;
    let started = Instant::now();
    a.transfer("t", 0, to).await.unwrap();
    assert!(eventually(Duration::from_secs(10), || owner(&a, s).as_deref() == Some(to)).await);
    eprintln!("transfer took {:?}", started.elapsed());
    assert_eq!(a.meta.view().streams[&s].stream_epoch, epoch_before.next());
    // Appends through either node continue at offset 5 on the new owner.
    assert!(
        eventually(Duration::from_secs(5), || {
            let target = if to == "a" { &a } else { &b };
            target.open_stream(s).is_some()
        })
        .await
    );
    let got = b.append("t", 0, vec![rec("after")]).await.unwrap();
    assert_eq!(got.base, Offset(5));
    let r = a.read("t", 0, read_from(0)).await.unwrap();
    assert_eq!(r.records.len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_a_node_moves_all_its_streams_and_a_new_node_gets_some_by_rebalancing() {
    let backends = support::memory_backends();
    let a = spawn_node("a", backends.clone(), &[]).await;
    a.create_topic("t", 6, Default::default()).await.unwrap();
    assert!(all_open(&a, "t").await);
    let b = spawn_node("b", backends.clone(), &[]).await;
    // Rebalancing gives the newcomer its share.
    assert!(
        eventually(Duration::from_secs(15), || b.open_streams().len() == 3).await,
        "b has {}",
        b.open_streams().len()
    );
    a.drain("b").await.unwrap();
    assert!(
        eventually(Duration::from_secs(15), || a.open_streams().len() == 6
            && b.open_streams().is_empty())
        .await
    );
    assert!(a.nodes().nodes.iter().any(|n| n.node_id == "b" && n.draining));
    for p in 0..6 {
        a.append("t", p, vec![rec("x")]).await.unwrap();
    }
}

/// A read with `consistency: Strong` (HTTP `consistency=strong`).
fn strong_from(offset: u64) -> ReadRequest {
    ReadRequest {
        consistency: sluice::api::Consistency::Strong,
        ..read_from(offset)
    }
}

fn values(r: &sluice::api::ReadResult) -> Vec<String> {
    r.records
        .iter()
        .map(|(_, rec)| String::from_utf8_lossy(rec.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

/// The residual risk of default reads and what strong ones do about it: a
/// node cut off from the metadata log is fenced and its streams move, but it
/// does not know. It still answers default reads with the prefix it knows
/// (stale: without what the new owner acknowledged), and refuses strong
/// ones, which cannot confirm through the log that it still owns the stream.
/// Through the new owner, or through the zombie once it can read the log
/// again (forwarded), a strong read has every acknowledged record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_zombie_serves_a_stale_default_read_but_refuses_a_strong_one() {
    let (a_view, a_backends, b_backends) = two_views_of_one_log();
    let a = spawn_node("a", a_backends, &[]).await;
    a.create_topic("t", 1, Default::default()).await.unwrap();
    assert!(all_open(&a, "t").await);
    let b = spawn_node("b", b_backends, &[]).await;
    let s = stream_id(&a, "t", 0);
    assert_eq!(owner(&a, s).as_deref(), Some("a"));
    a.append("t", 0, vec![rec("before")]).await.unwrap();
    // Strong reads on both nodes see it while a owns the stream.
    assert_eq!(values(&a.read("t", 0, strong_from(0)).await.unwrap()), ["before"]);
    assert_eq!(values(&b.read("t", 0, strong_from(0)).await.unwrap()), ["before"]);

    a_view.set_unavailable(true);
    assert!(eventually(Duration::from_secs(30), || b.meta.view().nodes[&a.id].fenced).await);
    // b recovers a's WAL and takes the stream.
    let mut acked = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked.is_none() && Instant::now() < deadline {
        match b.append("t", 0, vec![rec("after")]).await {
            Ok(x) => acked = Some((x, Instant::now())),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let (after, acked_at) = acked.expect("b appends after taking the stream over");
    assert_eq!(after.base, Offset(1));
    assert_eq!(owner(&b, s).as_deref(), Some("b"));

    // The zombie: a default read is served, stale.
    let stale = a.read("t", 0, read_from(0)).await.unwrap();
    assert_eq!(values(&stale), ["before"], "a does not know it was fenced");
    assert_eq!(stale.high_watermark, Offset(1));
    eprintln!(
        "zombie still served a stale default read {:?} after b acknowledged offset 1",
        acked_at.elapsed()
    );
    // A strong read is refused, retryably.
    let err = a.read("t", 0, strong_from(0)).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Unavailable, "{err:?}");
    // Through the new owner it has both records.
    let strong = b.read("t", 0, strong_from(0)).await.unwrap();
    assert_eq!(values(&strong), ["before", "after"]);

    // a reads the log again, learns it is fenced and stops serving.
    a_view.set_unavailable(false);
    assert!(eventually(Duration::from_secs(10), || a.phase() == Phase::Fenced).await);
    assert!(
        a.read("t", 0, strong_from(0)).await.is_err(),
        "a fenced node serves nothing"
    );
}

/// A strong read through a node that does not own the stream is forwarded
/// and then confirmed; a placement that moves in between is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strong_read_through_a_non_owner_is_forwarded_and_confirmed() {
    let backends = support::memory_backends();
    let a = spawn_node("a", backends.clone(), &[]).await;
    let b = spawn_node("b", backends.clone(), &[]).await;
    a.create_topic("t", 4, Default::default()).await.unwrap();
    assert!(all_open(&a, "t").await);
    assert!(all_open(&b, "t").await);
    for p in 0..4 {
        a.append("t", p, vec![rec(format!("v{p}"))]).await.unwrap();
        for n in [&a, &b] {
            let r = n.read("t", p, strong_from(0)).await.unwrap();
            assert_eq!(values(&r), [format!("v{p}")]);
            assert_eq!(r.high_watermark, Offset(1));
        }
    }
}
