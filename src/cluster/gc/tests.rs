use super::*;
use crate::ids::{HeartbeatCount, LogIndex, Offset, StreamEpoch, StreamId, TopicId};
use crate::meta::view::{NodeRow, StreamRow, TopicRow};
use crate::meta::{IndexedChunk, TopicConfig};
use std::time::Duration;

fn n(s: &str) -> NodeId {
    NodeId::new(s)
}

fn obj(key: &str, size: u64) -> ObjectMeta {
    ObjectMeta { key: key.into(), size }
}

fn node_row(epoch: u64, fenced: bool) -> NodeRow {
    NodeRow {
        epoch: NodeEpoch(epoch),
        heartbeats: HeartbeatCount(0),
        fenced,
        http_addr: "h".into(),
        kafka_addr: "k".into(),
        registered_at: LogIndex(1),
        draining: false,
    }
}

/// A chunk of `bytes` bytes holding [base, end) in `key`, newest record at `ts`.
fn chunk(key: &str, base: u64, end: u64, bytes: u64, ts: i64) -> IndexedChunk {
    IndexedChunk {
        base: Offset(base),
        end: Offset(end),
        key: key.into(),
        byte_start: 0,
        byte_end: bytes,
        max_timestamp: ts,
        crc: 0,
    }
}

fn stream_row(state: StreamState, chunks: Vec<IndexedChunk>) -> StreamRow {
    let end = chunks.last().map_or(Offset(0), |c| c.end);
    let start = chunks.first().map_or(Offset(0), |c| c.base);
    StreamRow {
        topic_name: "t".into(),
        state,
        stream_epoch: StreamEpoch(1),
        committed_end: end,
        start,
        chunks,
        producers: Default::default(),
        epoch_starts: Vec::new(),
        compacted_end: Offset(0),
    }
}

/// Topic `t` (id 1) with one stream per entry of `rows`.
fn view_with(config: TopicConfig, rows: Vec<StreamRow>) -> View {
    let mut view = View::default();
    view.topics.insert(
        "t".into(),
        TopicRow {
            id: TopicId(1),
            partitions: rows.len() as u32,
            config,
        },
    );
    for (p, row) in rows.into_iter().enumerate() {
        view.streams.insert(StreamId::new(TopicId(1), p as u32), row);
    }
    view
}

fn open_on(node: &str, epoch: u64) -> StreamState {
    StreamState::Open {
        node: n(node),
        node_epoch: NodeEpoch(epoch),
    }
}

#[test]
fn retention_by_time_trims_whole_expired_chunks_only() {
    let chunks = vec![
        chunk("data/a", 0, 10, 100, 1_000),
        chunk("data/b", 10, 20, 100, 2_000),
        chunk("data/c", 20, 30, 100, 9_000),
    ];
    let config = TopicConfig {
        retention_ms: Some(5_000),
        ..TopicConfig::default()
    };
    let view = view_with(config, vec![stream_row(StreamState::Closed, chunks)]);
    // now 10_000: chunks whose newest record is older than 5_000 go.
    let trims = retention_trims(&view, 10_000);
    assert_eq!(
        trims,
        vec![Command::TrimStream {
            stream: StreamId::new(TopicId(1), 0),
            new_start: Offset(20)
        }]
    );
    // Nothing has expired at 6_000.
    assert!(retention_trims(&view, 6_000).is_empty());
}

#[test]
fn retention_applies_under_compact_delete_but_not_compact_alone() {
    use crate::meta::CleanupPolicy;
    let chunks = vec![chunk("data/a", 0, 10, 100, 1_000), chunk("data/b", 10, 20, 100, 9_000)];
    let with = |policy| TopicConfig {
        retention_ms: Some(5_000),
        cleanup_policy: Some(policy),
        ..TopicConfig::default()
    };
    let trims = |policy| {
        let view = view_with(with(policy), vec![stream_row(StreamState::Closed, chunks.clone())]);
        retention_trims(&view, 10_000)
    };
    let trimmed = vec![Command::TrimStream {
        stream: StreamId::new(TopicId(1), 0),
        new_start: Offset(10),
    }];
    assert_eq!(trims(CleanupPolicy::Delete), trimmed);
    assert_eq!(trims(CleanupPolicy::CompactDelete), trimmed);
    assert!(
        trims(CleanupPolicy::Compact).is_empty(),
        "compact alone keeps every key"
    );
}

#[test]
fn retention_by_bytes_keeps_the_newest_chunks_within_the_limit() {
    let chunks = vec![
        chunk("data/a", 0, 10, 400, 0),
        chunk("data/b", 10, 20, 400, 0),
        chunk("data/c", 20, 30, 400, 0),
    ];
    let config = TopicConfig {
        retention_bytes: Some(800),
        ..TopicConfig::default()
    };
    let view = view_with(config, vec![stream_row(open_on("n1", 1), chunks)]);
    let trims = retention_trims(&view, 0);
    assert_eq!(
        trims,
        vec![Command::TrimStream {
            stream: StreamId::new(TopicId(1), 0),
            new_start: Offset(10)
        }]
    );
}

#[test]
fn retention_unset_or_unlimited_trims_nothing() {
    let chunks = || vec![chunk("data/a", 0, 10, 400, 0)];
    for config in [
        TopicConfig::default(),
        TopicConfig {
            retention_ms: Some(-1),
            retention_bytes: Some(-1),
            ..TopicConfig::default()
        },
    ] {
        let view = view_with(config, vec![stream_row(StreamState::Closed, chunks())]);
        assert!(retention_trims(&view, i64::MAX).is_empty());
    }
}

#[test]
fn retention_skips_deleted_streams() {
    let config = TopicConfig {
        retention_ms: Some(0),
        ..TopicConfig::default()
    };
    let view = view_with(
        config,
        vec![stream_row(StreamState::Deleted, vec![chunk("data/a", 0, 10, 1, 0)])],
    );
    assert!(retention_trims(&view, 1_000).is_empty());
}

#[test]
fn only_unindexed_data_objects_are_unreferenced() {
    let view = view_with(
        TopicConfig::default(),
        vec![stream_row(StreamState::Closed, vec![chunk("data/kept", 0, 10, 1, 0)])],
    );
    let listed = [obj("data/kept", 10), obj("data/orphan", 10)];
    assert_eq!(unreferenced_data(&view, &listed), vec!["data/orphan".to_string()]);
}

#[test]
fn an_unreferenced_object_waits_out_the_grace_and_is_forgotten_if_referenced_again() {
    let grace = Duration::from_secs(60);
    let mut state = GcState::default();
    let t0 = Duration::from_secs(1);
    // First seen: not due yet.
    assert!(due_after_grace(
        &mut state.unreferenced_since,
        vec!["data/x".into(), "data/y".into()],
        t0,
        grace
    )
    .is_empty());
    // y becomes referenced (its commit applied): forgotten.
    assert!(due_after_grace(
        &mut state.unreferenced_since,
        vec!["data/x".into()],
        t0 + grace / 2,
        grace
    )
    .is_empty());
    // y orphaned again later: its grace starts over; x is due.
    let due = due_after_grace(
        &mut state.unreferenced_since,
        vec!["data/x".into(), "data/y".into()],
        t0 + grace,
        grace,
    );
    assert_eq!(due, vec!["data/x".to_string()]);
}

#[test]
fn wal_keys_parse_into_incarnation_and_seq() {
    assert_eq!(
        parse_wal_key("wal/n-1/7/00000000000000000042"),
        Some((n("n-1"), NodeEpoch(7), SegmentSeq(42)))
    );
    assert_eq!(parse_wal_key("wal/n1/x/0001"), None);
    assert_eq!(parse_wal_key("wal//1/0001"), None);
    assert_eq!(parse_wal_key("data/n1/1/0001"), None);
}

#[test]
fn the_wal_of_a_live_or_unfinished_incarnation_is_never_collectable() {
    let listed = [
        obj("wal/live/2/00000000000000000000", 5000),
        obj("wal/dead/1/00000000000000000000", 5000),
        obj("wal/dead/1/00000000000000000001", 100),
        obj("wal/recovering/1/00000000000000000000", 5000),
        obj("wal/target/1/00000000000000000000", 5000),
        obj("wal/unknown/1/00000000000000000000", 5000),
        obj("wal/restarted/1/00000000000000000000", 5000),
        obj("wal/restarted/2/00000000000000000000", 5000),
    ];
    let mut view = view_with(
        TopicConfig::default(),
        vec![
            stream_row(open_on("live", 2), vec![]),
            stream_row(
                StreamState::Recovering {
                    node: n("recovering"),
                    node_epoch: NodeEpoch(1),
                    transfer_to: None,
                },
                vec![],
            ),
            stream_row(
                StreamState::Transferring {
                    from: n("live"),
                    from_epoch: NodeEpoch(2),
                    to: n("target"),
                    to_epoch: NodeEpoch(1),
                },
                vec![],
            ),
        ],
    );
    view.nodes.insert(n("live"), node_row(2, false));
    view.nodes.insert(n("dead"), node_row(1, true));
    view.nodes.insert(n("recovering"), node_row(1, true));
    view.nodes.insert(n("target"), node_row(1, true));
    // Restarted as epoch 2: epoch 1 is dead (replaced), epoch 2 lives.
    view.nodes.insert(n("restarted"), node_row(2, false));
    let got: Vec<_> = collectable_wal(&view, &listed).into_iter().collect();
    let keys: Vec<(String, u64, Vec<String>)> = got
        .into_iter()
        .map(|((node, epoch), objects)| (node.0, epoch.0, objects.into_iter().map(|o| o.key).collect()))
        .collect();
    assert_eq!(
        keys,
        vec![
            (
                "dead".to_string(),
                1,
                vec![
                    "wal/dead/1/00000000000000000000".to_string(),
                    "wal/dead/1/00000000000000000001".to_string()
                ]
            ),
            (
                "restarted".to_string(),
                1,
                vec!["wal/restarted/1/00000000000000000000".to_string()]
            ),
        ]
    );
}
