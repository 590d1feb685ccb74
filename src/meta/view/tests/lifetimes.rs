//! The ends of a stream's life decided by the lease holder: `ExpireStream`
//! (a Durable Streams lifetime ended by the holder's clock reading) and
//! `DropStreams` (a deleted stream's row is forgotten).

use super::*;
use crate::meta::durable::{DurableMeta, DurableUpdate, ForkOf};
use crate::meta::entry::encode_snapshot;

fn ttl_stream(ttl_secs: u64, touched_ms: i64, fork_of: Option<&str>) -> TopicConfig {
    TopicConfig {
        durable: Some(DurableMeta {
            path: "p".into(),
            content_type: "text/plain".into(),
            ttl_secs: Some(ttl_secs),
            touched_ms,
            fork: fork_of.map(|s| {
                Box::new(ForkOf {
                    source: s.into(),
                    ..Default::default()
                })
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// n1 holds the lease, n2 does not; both live.
fn two_nodes() -> (Harness, NodeEpoch, NodeEpoch) {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    let e2 = h.register("n2");
    h.lease("n1", e1);
    (h, e1, e2)
}

fn create_with(h: &mut Harness, e: NodeEpoch, name: &str, config: TopicConfig) {
    let out = h.apply_as(
        "n1",
        Some(e.0),
        Command::CreateTopic {
            name: name.into(),
            partitions: 1,
            config,
        },
    );
    assert!(matches!(out, Outcome::TopicCreated(_)), "{out:?}");
}

fn expire(h: &mut Harness, by: &str, e: NodeEpoch, name: &str, now_ms: i64) -> Outcome {
    h.apply_as(
        by,
        Some(e.0),
        Command::ExpireStream {
            name: name.into(),
            now_ms,
        },
    )
}

#[test]
fn expire_stream_deletes_a_stream_past_its_lifetime_at_the_holders_reading() {
    let (mut h, e1, _) = two_nodes();
    create_with(&mut h, e1, "s", ttl_stream(10, 1_000, None));
    let (id, _) = h.stream("s", 0);
    assert_eq!(expire(&mut h, "n1", e1, "s", 11_000), Outcome::Applied);
    assert!(!h.view.topics.contains_key("s"));
    assert_eq!(h.view.streams[&id].state, StreamState::Deleted);
}

#[test]
fn expire_stream_is_rejected_before_the_lifetime_ends() {
    let (mut h, e1, _) = two_nodes();
    create_with(&mut h, e1, "s", ttl_stream(10, 1_000, None));
    assert!(rejected(&expire(&mut h, "n1", e1, "s", 10_999)));
    assert!(h.view.topics.contains_key("s"));
}

#[test]
fn expire_stream_is_rejected_when_a_touch_applied_since_the_reading() {
    let (mut h, e1, _) = two_nodes();
    create_with(&mut h, e1, "s", ttl_stream(10, 1_000, None));
    // The holder read 11 000; a read at 10 500 was recorded before its command.
    let touch = Command::AlterTopicConfig {
        name: "s".into(),
        updates: vec![ConfigUpdate::Durable(DurableUpdate::Touch { at_ms: 10_500 })],
    };
    assert_eq!(h.apply_as("n2", Some(1), touch), Outcome::Applied);
    assert!(rejected(&expire(&mut h, "n1", e1, "s", 11_000)));
    assert!(h.view.topics.contains_key("s"));
}

#[test]
fn expire_stream_from_a_node_without_the_lease_is_rejected() {
    let (mut h, e1, e2) = two_nodes();
    create_with(&mut h, e1, "s", ttl_stream(10, 1_000, None));
    assert!(rejected(&expire(&mut h, "n2", e2, "s", 99_000)));
    assert!(h.view.topics.contains_key("s"));
}

#[test]
fn expire_stream_of_a_plain_topic_or_a_missing_one_is_rejected() {
    let (mut h, e1, _) = two_nodes();
    h.create("n1", e1, "plain", 1);
    assert!(rejected(&expire(&mut h, "n1", e1, "plain", i64::MAX)));
    assert!(rejected(&expire(&mut h, "n1", e1, "nope", i64::MAX)));
    assert!(h.view.topics.contains_key("plain"));
}

#[test]
fn an_expired_source_with_forks_is_marked_and_not_expired_twice() {
    let (mut h, e1, _) = two_nodes();
    create_with(&mut h, e1, "src", ttl_stream(10, 1_000, None));
    create_with(&mut h, e1, "fork", ttl_stream(3600, 1_000, Some("src")));
    assert_eq!(expire(&mut h, "n1", e1, "src", 11_000), Outcome::Applied);
    let marked = h.view.topics["src"].config.durable.as_ref().unwrap().deleted;
    assert!(marked, "kept for its fork, marked deleted");
    assert!(rejected(&expire(&mut h, "n1", e1, "src", 12_000)));
}

fn drop_rows(h: &mut Harness, by: &str, e: NodeEpoch, streams: Vec<StreamId>) -> Outcome {
    h.apply_as(by, Some(e.0), Command::DropStreams { streams })
}

#[test]
fn drop_streams_forgets_deleted_rows_and_their_committed_offsets() {
    let (mut h, e1, _) = two_nodes();
    h.create("n1", e1, "t", 2);
    h.create("n1", e1, "keep", 1);
    let (a, _) = h.stream("t", 0);
    let (b, _) = h.stream("t", 1);
    let (k, _) = h.stream("keep", 0);
    let commit = Command::CommitOffsets {
        group: "g".into(),
        offsets: vec![(a, 5, None), (k, 7, None)],
    };
    assert_eq!(h.apply_as("n1", Some(e1.0), commit), Outcome::Applied);
    assert_eq!(
        h.apply_as("n1", Some(e1.0), Command::DeleteTopic { name: "t".into() }),
        Outcome::Applied
    );
    assert_eq!(drop_rows(&mut h, "n1", e1, vec![a, b]), Outcome::Applied);
    assert!(!h.view.streams.contains_key(&a) && !h.view.streams.contains_key(&b));
    assert!(h.view.streams.contains_key(&k));
    let offsets = &h.view.groups["g"];
    assert_eq!(offsets.keys().copied().collect::<Vec<_>>(), vec![k]);
}

#[test]
fn drop_streams_is_rejected_whole_if_any_stream_is_not_deleted() {
    let (mut h, e1, _) = two_nodes();
    h.create("n1", e1, "t", 1);
    h.create("n1", e1, "live", 1);
    let (dead, _) = h.stream("t", 0);
    let (live, _) = h.stream("live", 0);
    h.apply_as("n1", Some(e1.0), Command::DeleteTopic { name: "t".into() });
    assert!(rejected(&drop_rows(&mut h, "n1", e1, vec![dead, live])));
    assert!(h.view.streams.contains_key(&dead), "all or nothing");
    let unknown = StreamId::new(TopicId(999), 0);
    assert!(rejected(&drop_rows(&mut h, "n1", e1, vec![unknown])));
}

#[test]
fn drop_streams_from_a_node_without_the_lease_is_rejected() {
    let (mut h, e1, e2) = two_nodes();
    h.create("n1", e1, "t", 1);
    let (id, _) = h.stream("t", 0);
    h.apply_as("n1", Some(e1.0), Command::DeleteTopic { name: "t".into() });
    assert!(rejected(&drop_rows(&mut h, "n2", e2, vec![id])));
    assert!(h.view.streams.contains_key(&id));
}

#[test]
fn a_late_commit_for_a_dropped_stream_is_rejected() {
    // The owner's flush raced the delete: its CommitObjects arrives after
    // the row is gone and must not bring it back.
    let (mut h, e, s) = Harness::with_open_stream();
    h.apply_as("n1", Some(e.0), Command::DeleteTopic { name: "t".into() });
    let (s1, _) = (StreamId::new(s.topic, 1), ());
    assert_eq!(drop_rows(&mut h, "n1", e, vec![s, s1]), Outcome::Applied);
    let commit = Command::CommitObjects {
        node: n("n1"),
        epoch: e,
        chunks: vec![chunk(s, 1, 0, 5)],
    };
    assert!(rejected(&h.apply_as("n1", Some(e.0), commit)));
    assert!(!h.view.streams.contains_key(&s));
}

#[test]
fn topic_churn_returns_the_view_and_its_snapshot_to_their_baseline() {
    let (mut h, e1, _) = two_nodes();
    h.create("n1", e1, "steady", 2);
    let rows = h.view.streams.len();
    let baseline = encode_snapshot(&h.view).len();
    for i in 0..50 {
        let name = format!("churn-{i}");
        h.create("n1", e1, &name, 4);
        let ids: Vec<StreamId> = (0..4).map(|p| h.stream(&name, p).0).collect();
        assert_eq!(
            h.apply_as("n1", Some(e1.0), Command::DeleteTopic { name }),
            Outcome::Applied
        );
        assert_eq!(drop_rows(&mut h, "n1", e1, ids), Outcome::Applied);
    }
    assert_eq!(h.view.streams.len(), rows);
    // Only the counters (applied index, next topic id) grew, by a few digits.
    let after = encode_snapshot(&h.view).len();
    assert!(after <= baseline + 8, "snapshot grew from {baseline} to {after} bytes");
}
