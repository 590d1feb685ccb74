//! `AddPartitions` and `AlterTopicConfig`: every acceptance and rejection.

use super::*;
use crate::meta::command::{CleanupPolicy, ConfigUpdate};

fn add(h: &mut Harness, e: NodeEpoch, name: &str, partitions: u32) -> Outcome {
    h.apply_as(
        "n1",
        Some(e.0),
        Command::AddPartitions {
            name: name.into(),
            partitions,
        },
    )
}

fn alter(h: &mut Harness, e: NodeEpoch, name: &str, updates: Vec<ConfigUpdate>) -> Outcome {
    h.apply_as(
        "n1",
        Some(e.0),
        Command::AlterTopicConfig {
            name: name.into(),
            updates,
        },
    )
}

#[test]
fn add_partitions_makes_closed_streams_for_the_new_partitions_only() {
    let (mut h, e, s0) = Harness::with_open_stream();
    let before = h.view.streams[&s0].clone();
    assert_eq!(add(&mut h, e, "t", 5), Outcome::Applied);
    assert_eq!(h.view.topics["t"].partitions, 5);
    assert_eq!(h.view.streams[&s0], before, "existing partitions are untouched");
    for p in 2..5 {
        let (_, row) = h.stream("t", p);
        assert_eq!(row.state, StreamState::Closed);
        assert_eq!((row.start, row.committed_end), (Offset(0), Offset(0)));
        assert_eq!(row.stream_epoch, StreamEpoch::ZERO);
        assert_eq!(row.topic_name, "t");
    }
    assert_eq!(h.view.streams.len(), 5);
    // A new partition is placed like a new topic's.
    let (s4, _) = h.stream("t", 4);
    let placed = h.apply_as(
        "n1",
        Some(e.0),
        Command::PlaceStream {
            stream: s4,
            node: n("n1"),
            node_epoch: e,
        },
    );
    assert_eq!(placed, Outcome::Applied);
    // Deleting the topic deletes the added streams too.
    h.apply_as("n1", Some(e.0), Command::DeleteTopic { name: "t".into() });
    assert!(h.view.streams.values().all(|r| r.state == StreamState::Deleted));
}

#[test]
fn add_partitions_rejects_an_equal_or_smaller_count() {
    let (mut h, e, _) = Harness::with_open_stream();
    for bad in [0, 1, 2] {
        assert!(
            matches!(add(&mut h, e, "t", bad), Outcome::Rejected(Rejection::Invalid(_))),
            "{bad}"
        );
    }
    assert_eq!(h.view.topics["t"].partitions, 2);
    assert_eq!(h.view.streams.len(), 2);
}

#[test]
fn add_partitions_rejects_more_than_the_maximum() {
    let (mut h, e, _) = Harness::with_open_stream();
    assert!(matches!(
        add(&mut h, e, "t", MAX_PARTITIONS + 1),
        Outcome::Rejected(Rejection::Invalid(_))
    ));
    assert_eq!(add(&mut h, e, "t", MAX_PARTITIONS), Outcome::Applied);
}

#[test]
fn add_partitions_rejects_an_unknown_or_deleted_topic() {
    let (mut h, e, _) = Harness::with_open_stream();
    assert!(matches!(
        add(&mut h, e, "nope", 3),
        Outcome::Rejected(Rejection::TopicNotFound(_))
    ));
    h.apply_as("n1", Some(e.0), Command::DeleteTopic { name: "t".into() });
    assert!(matches!(
        add(&mut h, e, "t", 3),
        Outcome::Rejected(Rejection::TopicNotFound(_))
    ));
}

#[test]
fn add_partitions_from_a_fenced_node_is_rejected() {
    let (mut h, e, _) = Harness::with_open_stream();
    h.apply_as(
        "n1",
        Some(e.0),
        Command::FenceSelf {
            node: n("n1"),
            epoch: e,
        },
    );
    assert!(matches!(
        add(&mut h, e, "t", 3),
        Outcome::Rejected(Rejection::ProposerFenced(_))
    ));
    assert_eq!(h.view.topics["t"].partitions, 2);
}

#[test]
fn alter_topic_config_sets_and_resets_keys_in_order() {
    let (mut h, e, _) = Harness::with_open_stream();
    let out = alter(
        &mut h,
        e,
        "t",
        vec![
            ConfigUpdate::RetentionMs(Some(1000)),
            ConfigUpdate::RetentionBytes(Some(-1)),
            ConfigUpdate::CleanupPolicy(Some(CleanupPolicy::Delete)),
            ConfigUpdate::RetentionMs(Some(2000)),
        ],
    );
    assert_eq!(out, Outcome::Applied);
    assert_eq!(
        h.view.topics["t"].config,
        TopicConfig {
            retention_ms: Some(2000),
            retention_bytes: Some(-1),
            cleanup_policy: Some(CleanupPolicy::Delete),
            ..TopicConfig::default()
        }
    );
    // Keys not named are kept; `None` goes back to the default.
    let out = alter(&mut h, e, "t", vec![ConfigUpdate::RetentionBytes(None)]);
    assert_eq!(out, Outcome::Applied);
    assert_eq!(h.view.topics["t"].config.retention_bytes, None);
    assert_eq!(h.view.topics["t"].config.retention_ms, Some(2000));
    assert_eq!(alter(&mut h, e, "t", vec![]), Outcome::Applied, "nothing to change");
}

#[test]
fn alter_topic_config_is_all_or_nothing_on_an_invalid_value() {
    let (mut h, e, _) = Harness::with_open_stream();
    for bad in [
        ConfigUpdate::RetentionMs(Some(0)),
        ConfigUpdate::RetentionMs(Some(-2)),
        ConfigUpdate::RetentionBytes(Some(0)),
        ConfigUpdate::RetentionBytes(Some(i64::MIN)),
    ] {
        let out = alter(&mut h, e, "t", vec![ConfigUpdate::RetentionMs(Some(5)), bad.clone()]);
        assert!(matches!(out, Outcome::Rejected(Rejection::Invalid(_))), "{bad:?}");
    }
    assert_eq!(h.view.topics["t"].config, TopicConfig::default());
}

#[test]
fn alter_topic_config_rejects_an_unknown_topic() {
    let (mut h, e, _) = Harness::with_open_stream();
    assert!(matches!(
        alter(&mut h, e, "nope", vec![ConfigUpdate::RetentionMs(Some(5))]),
        Outcome::Rejected(Rejection::TopicNotFound(_))
    ));
}

#[test]
fn alter_topic_config_from_a_replaced_incarnation_is_rejected() {
    let (mut h, e, _) = Harness::with_open_stream();
    h.register("n1");
    assert!(matches!(
        alter(&mut h, e, "t", vec![ConfigUpdate::RetentionMs(Some(5))]),
        Outcome::Rejected(Rejection::ProposerStale(_))
    ));
    assert_eq!(h.view.topics["t"].config, TopicConfig::default());
}

#[test]
fn topic_config_without_a_cleanup_policy_reads_and_writes_as_before() {
    // Entries and snapshots written before `cleanup_policy` existed.
    let old: TopicConfig = serde_json::from_str(r#"{"retention_ms":5,"retention_bytes":null}"#).unwrap();
    assert_eq!(old.cleanup_policy, None);
    assert_eq!(
        serde_json::to_string(&old).unwrap(),
        r#"{"retention_ms":5,"retention_bytes":null}"#,
        "unset, it is not written"
    );
    let set = TopicConfig {
        cleanup_policy: Some(CleanupPolicy::Delete),
        ..old
    };
    let json = serde_json::to_string(&set).unwrap();
    assert_eq!(
        json,
        r#"{"retention_ms":5,"retention_bytes":null,"cleanup_policy":"delete"}"#
    );
    assert_eq!(serde_json::from_str::<TopicConfig>(&json).unwrap(), set);
    assert!(serde_json::from_str::<TopicConfig>(r#"{"cleanup_policy":"keep"}"#).is_err());
}

#[test]
fn compaction_settings_are_written_only_when_set_and_read_in_kafka_spellings() {
    let c: TopicConfig = serde_json::from_str(
        r#"{"retention_ms":null,"retention_bytes":null,"cleanup_policy":"delete,compact",
            "min_compaction_lag_ms":5,"min_cleanable_dirty_ratio":0.25}"#,
    )
    .unwrap();
    assert_eq!(c.cleanup_policy, Some(CleanupPolicy::CompactDelete));
    assert!(c.compacts() && c.deletes());
    assert_eq!(c.min_cleanable_dirty_ratio(), 0.25);
    assert_eq!(c.delete_retention_ms(), TopicConfig::DEFAULT_DELETE_RETENTION_MS);
    assert_eq!(
        serde_json::to_string(&c).unwrap(),
        r#"{"retention_ms":null,"retention_bytes":null,"cleanup_policy":"compact,delete","min_compaction_lag_ms":5,"min_cleanable_dirty_ratio":0.25}"#
    );
    for bad in [
        r#"{"min_cleanable_dirty_ratio":1.01}"#,
        r#"{"min_cleanable_dirty_ratio":-0.1}"#,
        r#"{"cleanup_policy":"compact,delete,compact"}"#,
    ] {
        assert!(serde_json::from_str::<TopicConfig>(bad).is_err(), "{bad}");
    }
    for (list, want) in [
        ("compact", Some(CleanupPolicy::Compact)),
        (" delete , compact", Some(CleanupPolicy::CompactDelete)),
        ("delete", Some(CleanupPolicy::Delete)),
        ("compact,compact", None),
        ("", None),
    ] {
        assert_eq!(CleanupPolicy::parse(list), want, "{list:?}");
    }
    let compact = TopicConfig {
        cleanup_policy: Some(CleanupPolicy::Compact),
        ..TopicConfig::default()
    };
    assert!(compact.compacts() && !compact.deletes(), "retention does not apply");
    assert!(TopicConfig::default().deletes() && !TopicConfig::default().compacts());
}

#[test]
fn compaction_settings_are_checked_alone_and_together() {
    let (mut h, e, _) = Harness::with_open_stream();
    let ratio = |v| crate::meta::Ratio::new(v).unwrap();
    let out = alter(
        &mut h,
        e,
        "t",
        vec![
            ConfigUpdate::CleanupPolicy(Some(CleanupPolicy::Compact)),
            ConfigUpdate::MinCompactionLagMs(Some(100)),
            ConfigUpdate::MaxCompactionLagMs(Some(1000)),
            ConfigUpdate::MinCleanableDirtyRatio(Some(ratio(0.1))),
            ConfigUpdate::DeleteRetentionMs(Some(0)),
        ],
    );
    assert_eq!(out, Outcome::Applied);
    let before = h.view.topics["t"].config.clone();
    assert_eq!(before.min_cleanable_dirty_ratio(), 0.1);
    for bad in [
        vec![ConfigUpdate::MinCompactionLagMs(Some(-1))],
        vec![ConfigUpdate::MaxCompactionLagMs(Some(0))],
        vec![ConfigUpdate::DeleteRetentionMs(Some(-5))],
        // Each valid alone; the range they make is empty.
        vec![ConfigUpdate::MinCompactionLagMs(Some(2000))],
        vec![
            ConfigUpdate::MaxCompactionLagMs(Some(50)),
            ConfigUpdate::RetentionMs(Some(10)),
        ],
    ] {
        assert!(
            matches!(
                alter(&mut h, e, "t", bad.clone()),
                Outcome::Rejected(Rejection::Invalid(_))
            ),
            "{bad:?}"
        );
        assert_eq!(h.view.topics["t"].config, before, "all or nothing: {bad:?}");
    }
    // Moving both ends together is fine.
    let out = alter(
        &mut h,
        e,
        "t",
        vec![
            ConfigUpdate::MaxCompactionLagMs(Some(5000)),
            ConfigUpdate::MinCompactionLagMs(Some(2000)),
        ],
    );
    assert_eq!(out, Outcome::Applied);
}

#[test]
fn admin_commands_round_trip_through_json() {
    for cmd in [
        Command::AddPartitions {
            name: "t".into(),
            partitions: 4,
        },
        Command::AlterTopicConfig {
            name: "t".into(),
            updates: vec![
                ConfigUpdate::RetentionMs(Some(1)),
                ConfigUpdate::RetentionBytes(None),
                ConfigUpdate::CleanupPolicy(Some(CleanupPolicy::Delete)),
            ],
        },
    ] {
        let json = serde_json::to_string(&cmd).unwrap();
        assert_eq!(serde_json::from_str::<Command>(&json).unwrap(), cmd, "{json}");
    }
    let pinned = r#"{"type":"AlterTopicConfig","name":"t","updates":[{"retention_ms":1},{"cleanup_policy":"delete"}]}"#;
    assert_eq!(
        serde_json::from_str::<Command>(pinned).unwrap(),
        Command::AlterTopicConfig {
            name: "t".into(),
            updates: vec![
                ConfigUpdate::RetentionMs(Some(1)),
                ConfigUpdate::CleanupPolicy(Some(CleanupPolicy::Delete))
            ],
        }
    );
}

#[test]
fn durable_stream_updates_change_only_durable_streams() {
    use crate::meta::durable::{DurableMeta, DurableUpdate};
    let (mut h, e, _) = Harness::with_open_stream();
    let meta = DurableMeta {
        path: "a/b".into(),
        content_type: "text/plain".into(),
        ..Default::default()
    };
    let config = TopicConfig {
        durable: Some(meta.clone()),
        ..Default::default()
    };
    let created = h.apply_as(
        "n1",
        Some(e.0),
        Command::CreateTopic {
            name: "ds.a_2Fb".into(),
            partitions: 1,
            config,
        },
    );
    assert!(matches!(created, Outcome::TopicCreated(_)), "{created:?}");
    let close = ConfigUpdate::Durable(DurableUpdate::Close {
        at: Offset(3),
        by: None,
    });
    assert_eq!(alter(&mut h, e, "ds.a_2Fb", vec![close.clone()]), Outcome::Applied);
    let d = h.view.topics["ds.a_2Fb"].config.durable.clone().unwrap();
    assert_eq!(d.closed_at, Some(Offset(3)));
    assert_eq!(DurableMeta { closed_at: None, ..d }, meta, "nothing else changed");
    // On an ordinary topic the update is accepted and changes nothing.
    let before = h.view.topics["t"].config.clone();
    assert_eq!(alter(&mut h, e, "t", vec![close.clone()]), Outcome::Applied);
    assert_eq!(h.view.topics["t"].config, before);
    let json = serde_json::to_string(&Command::AlterTopicConfig {
        name: "t".into(),
        updates: vec![close.clone()],
    })
    .unwrap();
    assert_eq!(
        json,
        r#"{"type":"AlterTopicConfig","name":"t","updates":[{"durable":{"close":{"at":3,"by":null}}}]}"#
    );
}
