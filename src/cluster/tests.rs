//! The lease holder's decisions driven through a fake [`Context`]: which
//! node is fenced and when, WAL takeover and placement of a dead node's
//! streams, retention, Durable Streams expiry and the rows of deleted
//! streams, all against a manual clock.

use super::fake::FakeCluster;
use super::holder::{tick_once, HolderState};
use super::{gc, Context};
use crate::clock::Clock as _;
use crate::ids::{NodeEpoch, NodeId, Offset, StreamId};
use crate::meta::durable::DurableMeta;
use crate::meta::view::StreamRow;
use crate::meta::{Command, IndexedChunk, Outcome, StreamState, TopicConfig};
use std::time::Duration;

fn n(s: &str) -> NodeId {
    NodeId::new(s)
}

fn create(fake: &FakeCluster, name: &str, partitions: u32, config: TopicConfig) -> Vec<StreamId> {
    let out = fake.apply_as(
        "a",
        Command::CreateTopic {
            name: name.into(),
            partitions,
            config,
        },
    );
    let Outcome::TopicCreated(id) = out else {
        panic!("{out:?}")
    };
    (0..partitions).map(|p| StreamId::new(id, p)).collect()
}

fn owner(fake: &FakeCluster, s: StreamId) -> Option<String> {
    fake.view().owner_of(s).map(|(node, _)| node.as_str().to_string())
}

async fn tick(fake: &FakeCluster, state: &mut HolderState) {
    tick_once(fake, state).await.expect("tick");
}

#[tokio::test]
async fn the_holder_takes_a_vacant_lease_on_its_first_tick() {
    let fake = FakeCluster::new("a", &["b"]);
    tick(&fake, &mut HolderState::default()).await;
    assert!(fake.view().holds_lease(&n("a"), NodeEpoch(1)));
    assert_eq!(fake.proposed_names(), vec!["AcquireLease"]);
}

#[tokio::test]
async fn a_silent_node_is_fenced_after_the_node_timeout_counted_in_the_holders_heartbeats() {
    let fake = FakeCluster::new("a", &["b"]);
    let mut state = HolderState::default();
    fake.heartbeat("a");
    fake.heartbeat("b"); // the last sign of life from b
    for _ in 0..2 {
        fake.heartbeat("a");
        tick(&fake, &mut state).await;
        assert!(
            fake.view().is_live(&n("b"), NodeEpoch(1)),
            "not yet: under 3 of our heartbeats"
        );
    }
    fake.heartbeat("a");
    tick(&fake, &mut state).await;
    assert!(
        !fake.view().is_live(&n("b"), NodeEpoch(1)),
        "fenced after 3 of our heartbeats"
    );
    assert!(fake.proposed_names().contains(&"FenceNode"));
}

#[tokio::test]
async fn wall_time_passing_without_our_heartbeats_fences_nobody() {
    let fake = FakeCluster::new("a", &["b"]);
    let mut state = HolderState::default();
    fake.heartbeat("b");
    for _ in 0..10 {
        fake.clock.advance(Duration::from_secs(3600));
        tick(&fake, &mut state).await;
    }
    assert!(fake.view().is_live(&n("b"), NodeEpoch(1)));
}

#[tokio::test]
async fn a_node_that_keeps_heartbeating_is_never_fenced() {
    let fake = FakeCluster::new("a", &["b"]);
    let mut state = HolderState::default();
    for _ in 0..10 {
        fake.heartbeat("a");
        fake.heartbeat("b");
        tick(&fake, &mut state).await;
    }
    assert!(fake.view().is_live(&n("b"), NodeEpoch(1)));
    assert!(!fake.proposed_names().contains(&"FenceNode"));
}

#[tokio::test]
async fn a_fenced_nodes_streams_are_taken_over_and_placed_on_a_live_node() {
    let fake = FakeCluster::new("a", &["b"]);
    let mut state = HolderState::default();
    let streams = create(&fake, "t", 2, TopicConfig::default());
    tick(&fake, &mut state).await;
    let owners: Vec<_> = streams.iter().map(|s| owner(&fake, *s)).collect();
    assert_eq!(owners, vec![Some("a".into()), Some("b".into())], "spread over both");
    // b goes silent and is fenced; its open stream is recovered, then placed.
    fake.heartbeat("b");
    for _ in 0..3 {
        fake.heartbeat("a");
    }
    tick(&fake, &mut state).await;
    let names = fake.proposed_names();
    for step in ["FenceNode", "BeginWalTakeover", "FinishWalTakeover"] {
        assert!(names.contains(&step), "{step} missing from {names:?}");
    }
    tick(&fake, &mut state).await;
    assert_eq!(owner(&fake, streams[1]), Some("a".into()));
    // The dead incarnation's WAL is fenced: its marker is in the WAL store.
    let (_, wal) = fake.stores();
    assert!(!wal.list("wal/b/").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_durable_stream_is_expired_by_the_holders_clock_with_the_reading_in_the_command() {
    let fake = FakeCluster::new("a", &[]);
    let mut state = HolderState::default();
    let start = fake.clock.now_ms();
    let config = TopicConfig {
        durable: Some(DurableMeta {
            path: "s".into(),
            content_type: "text/plain".into(),
            ttl_secs: Some(60),
            touched_ms: start,
            ..Default::default()
        }),
        ..Default::default()
    };
    create(&fake, "s", 1, config);
    tick(&fake, &mut state).await;
    fake.clock.advance(Duration::from_secs(59));
    tick(&fake, &mut state).await;
    assert!(fake.view().topics.contains_key("s"), "not expired before its TTL");
    fake.clock.advance(Duration::from_secs(1));
    tick(&fake, &mut state).await;
    assert!(!fake.view().topics.contains_key("s"));
    let expired: Vec<Command> = fake
        .proposed
        .lock()
        .unwrap()
        .iter()
        .filter(|c| matches!(c, Command::ExpireStream { .. }))
        .cloned()
        .collect();
    assert_eq!(
        expired,
        vec![Command::ExpireStream {
            name: "s".into(),
            now_ms: start + 60_000
        }]
    );
}

fn chunk(key: &str, base: u64, end: u64, max_timestamp: i64) -> IndexedChunk {
    IndexedChunk {
        base: Offset(base),
        end: Offset(end),
        key: key.into(),
        byte_start: 0,
        byte_end: 100,
        max_timestamp,
        crc: 0,
    }
}

#[tokio::test]
async fn retention_by_time_trims_by_the_holders_clock() {
    let fake = FakeCluster::new("a", &[]);
    tick(&fake, &mut HolderState::default()).await; // the lease
    let config = TopicConfig {
        retention_ms: Some(60_000),
        ..Default::default()
    };
    let s = create(&fake, "t", 1, config)[0];
    let now = fake.clock.now_ms();
    fake.edit(|v| {
        let row: &mut StreamRow = v.streams.get_mut(&s).unwrap();
        row.chunks = vec![chunk("data/old", 0, 10, now - 1_000), chunk("data/new", 10, 20, now)];
        row.committed_end = Offset(20);
    });
    let mut gc_state = gc::GcState::default();
    assert_eq!(gc::run_once(&fake, &mut gc_state).await.unwrap().trimmed_streams, 0);
    fake.clock.advance(Duration::from_millis(59_500));
    assert_eq!(gc::run_once(&fake, &mut gc_state).await.unwrap().trimmed_streams, 1);
    assert_eq!(fake.view().streams[&s].start, Offset(10), "only the older chunk went");
}

#[tokio::test]
async fn rows_of_deleted_streams_are_dropped_once_the_grace_has_passed() {
    let fake = FakeCluster::new("a", &[]);
    tick(&fake, &mut HolderState::default()).await;
    let mut gc_state = gc::GcState::default();
    let baseline = {
        create(&fake, "steady", 2, TopicConfig::default());
        fake.view().streams.len()
    };
    for round in 0..3 {
        for i in 0..5 {
            let name = format!("churn-{round}-{i}");
            create(&fake, &name, 3, TopicConfig::default());
            assert_eq!(fake.apply_as("a", Command::DeleteTopic { name }), Outcome::Applied);
        }
        assert_eq!(
            gc::run_once(&fake, &mut gc_state).await.unwrap().rows_dropped,
            0,
            "within the grace"
        );
        assert_eq!(fake.view().streams.len(), baseline + 15);
        fake.clock.advance(fake.settings.gc_grace);
        assert_eq!(gc::run_once(&fake, &mut gc_state).await.unwrap().rows_dropped, 15);
        assert_eq!(
            fake.view().streams.len(),
            baseline,
            "back to the baseline after round {round}"
        );
    }
    assert!(fake.view().streams.values().all(|r| r.state != StreamState::Deleted));
}

#[tokio::test]
async fn a_node_without_the_lease_decides_nothing() {
    let fake = FakeCluster::new("a", &["b"]);
    // b holds the lease and keeps heartbeating: a never takes it.
    assert_eq!(
        fake.apply_as(
            "b",
            Command::AcquireLease {
                holder: None,
                holder_count: crate::ids::HeartbeatCount::ZERO,
            }
        ),
        Outcome::Applied
    );
    let mut state = HolderState::default();
    create(&fake, "t", 2, TopicConfig::default());
    for _ in 0..5 {
        fake.heartbeat("a");
        fake.heartbeat("b");
        fake.clock.advance(Duration::from_secs(3600));
        tick(&fake, &mut state).await;
    }
    assert!(fake.proposed.lock().unwrap().is_empty(), "{:?}", fake.proposed_names());
}
