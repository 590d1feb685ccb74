//! Durable Streams forks in the state machine: a fork needs a live source,
//! a source with forks is only marked deleted, and removing the last fork
//! removes the marked sources up the chain.

use super::*;
use crate::meta::durable::{DurableMeta, ForkOf};

fn stream(source: Option<&str>) -> TopicConfig {
    TopicConfig {
        durable: Some(DurableMeta {
            path: "p".into(),
            content_type: "text/plain".into(),
            fork: source.map(|s| {
                Box::new(ForkOf {
                    source: s.into(),
                    offset: Offset(1),
                    ..Default::default()
                })
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn create(h: &mut Harness, e: NodeEpoch, name: &str, config: TopicConfig) -> Outcome {
    h.apply_as(
        "n1",
        Some(e.0),
        Command::CreateTopic {
            name: name.into(),
            partitions: 1,
            config,
        },
    )
}

fn delete(h: &mut Harness, e: NodeEpoch, name: &str) -> Outcome {
    h.apply_as("n1", Some(e.0), Command::DeleteTopic { name: name.into() })
}

fn deleted_mark(h: &Harness, name: &str) -> Option<bool> {
    h.view
        .topics
        .get(name)
        .map(|t| t.config.durable.as_ref().unwrap().deleted)
}

#[test]
fn a_fork_needs_a_live_stream_as_its_source() {
    let (mut h, e, _) = Harness::with_open_stream();
    let missing = create(&mut h, e, "ds.f", stream(Some("ds.nope")));
    assert!(
        matches!(missing, Outcome::Rejected(Rejection::Precondition(_))),
        "{missing:?}"
    );
    // An ordinary topic is not a stream.
    let plain = create(&mut h, e, "ds.f", stream(Some("t")));
    assert!(
        matches!(plain, Outcome::Rejected(Rejection::Precondition(_))),
        "{plain:?}"
    );
    assert!(!h.view.topics.contains_key("ds.f"), "nothing was created");
    assert!(matches!(
        create(&mut h, e, "ds.s", stream(None)),
        Outcome::TopicCreated(_)
    ));
    assert!(matches!(
        create(&mut h, e, "ds.f", stream(Some("ds.s"))),
        Outcome::TopicCreated(_)
    ));
    assert_eq!(h.view.forks_of("ds.s").collect::<Vec<_>>(), vec!["ds.f"]);
    // Once marked deleted, a source cannot be forked again.
    assert_eq!(delete(&mut h, e, "ds.s"), Outcome::Applied);
    let again = create(&mut h, e, "ds.g", stream(Some("ds.s")));
    assert!(
        matches!(again, Outcome::Rejected(Rejection::Precondition(_))),
        "{again:?}"
    );
}

#[test]
fn a_source_with_forks_is_marked_and_goes_with_its_last_fork() {
    let (mut h, e, _) = Harness::with_open_stream();
    create(&mut h, e, "ds.s", stream(None));
    create(&mut h, e, "ds.f1", stream(Some("ds.s")));
    create(&mut h, e, "ds.f2", stream(Some("ds.s")));
    let s_id = h.view.topics["ds.s"].id;
    assert_eq!(delete(&mut h, e, "ds.s"), Outcome::Applied);
    assert_eq!(deleted_mark(&h, "ds.s"), Some(true), "kept for its forks");
    assert_ne!(h.stream("ds.s", 0).1.state, StreamState::Deleted, "its records stay");
    // Deleting it again changes nothing.
    assert_eq!(delete(&mut h, e, "ds.s"), Outcome::Applied);
    assert_eq!(delete(&mut h, e, "ds.f1"), Outcome::Applied);
    assert_eq!(deleted_mark(&h, "ds.s"), Some(true), "f2 still reads it");
    assert_eq!(delete(&mut h, e, "ds.f2"), Outcome::Applied);
    assert_eq!(deleted_mark(&h, "ds.s"), None, "gone with its last fork");
    assert_eq!(h.view.streams[&StreamId::new(s_id, 0)].state, StreamState::Deleted);
}

#[test]
fn removal_cascades_up_a_chain_and_stops_at_a_live_stream() {
    let (mut h, e, _) = Harness::with_open_stream();
    create(&mut h, e, "ds.l0", stream(None));
    create(&mut h, e, "ds.l1", stream(Some("ds.l0")));
    create(&mut h, e, "ds.l2", stream(Some("ds.l1")));
    create(&mut h, e, "ds.m", stream(None));
    create(&mut h, e, "ds.m1", stream(Some("ds.m")));
    delete(&mut h, e, "ds.l0");
    delete(&mut h, e, "ds.l1");
    assert_eq!(
        (deleted_mark(&h, "ds.l0"), deleted_mark(&h, "ds.l1")),
        (Some(true), Some(true))
    );
    assert_eq!(delete(&mut h, e, "ds.l2"), Outcome::Applied);
    for t in ["ds.l0", "ds.l1", "ds.l2"] {
        assert!(!h.view.topics.contains_key(t), "{t}");
    }
    // A source that was not deleted stays when its fork goes.
    delete(&mut h, e, "ds.m1");
    assert_eq!(deleted_mark(&h, "ds.m"), Some(false));
    // Ordinary topics delete as before.
    assert_eq!(delete(&mut h, e, "t"), Outcome::Applied);
    assert!(!h.view.topics.contains_key("t"));
}
