//! One test per acceptance and per rejection of every command.

use super::*;

mod admin;
mod forks;
mod group_state;
mod lifetimes;
mod tokens;
mod txn;

fn n(s: &str) -> NodeId {
    NodeId::new(s)
}

/// A view plus a log index counter, to apply single commands conveniently.
struct Harness {
    view: View,
}

impl Harness {
    fn new() -> Self {
        Self { view: View::default() }
    }

    fn apply_as(&mut self, node: &str, epoch: Option<u64>, cmd: Command) -> Outcome {
        let index = self.view.applied.next();
        let proposer = Proposer {
            node: n(node),
            epoch: epoch.map(NodeEpoch),
        };
        self.view.apply_entry(index, &proposer, &[cmd]).remove(0)
    }

    fn register(&mut self, node: &str) -> NodeEpoch {
        match self.apply_as(
            node,
            None,
            Command::RegisterNode {
                node: n(node),
                http_addr: "h".into(),
                kafka_addr: "k".into(),
            },
        ) {
            Outcome::Registered(e) => e,
            o => panic!("registration failed: {o:?}"),
        }
    }

    fn heartbeat(&mut self, node: &str, epoch: NodeEpoch) -> Outcome {
        self.apply_as(node, Some(epoch.0), Command::Heartbeat { node: n(node), epoch })
    }

    fn create(&mut self, by: &str, epoch: NodeEpoch, name: &str, partitions: u32) -> Outcome {
        self.apply_as(
            by,
            Some(epoch.0),
            Command::CreateTopic {
                name: name.into(),
                partitions,
                config: TopicConfig::default(),
            },
        )
    }

    fn stream(&self, topic: &str, p: u32) -> (StreamId, &StreamRow) {
        let id = StreamId::new(self.view.topics[topic].id, p);
        (id, &self.view.streams[&id])
    }

    fn lease(&mut self, node: &str, epoch: NodeEpoch) {
        let holder = self.view.lease.as_ref().map(|l| (l.holder.clone(), l.holder_epoch));
        let out = self.apply_as(
            node,
            Some(epoch.0),
            Command::AcquireLease {
                holder,
                holder_count: HeartbeatCount(0),
            },
        );
        assert_eq!(out, Outcome::Applied);
    }

    /// A one-node cluster with topic `t` (2 partitions), stream 0 open on n1.
    fn with_open_stream() -> (Self, NodeEpoch, StreamId) {
        let mut h = Self::new();
        let e = h.register("n1");
        h.lease("n1", e);
        h.create("n1", e, "t", 2);
        let (s, _) = h.stream("t", 0);
        assert_eq!(
            h.apply_as(
                "n1",
                Some(e.0),
                Command::PlaceStream {
                    stream: s,
                    node: n("n1"),
                    node_epoch: e
                }
            ),
            Outcome::Applied
        );
        (h, e, s)
    }
}

fn chunk(stream: StreamId, se: u64, base: u64, end: u64) -> ChunkCommit {
    ChunkCommit {
        stream,
        stream_epoch: StreamEpoch(se),
        chunk: IndexedChunk {
            base: Offset(base),
            end: Offset(end),
            key: "data/x.obj".into(),
            byte_start: 0,
            byte_end: 10,
            max_timestamp: 0,
            crc: 0,
        },
        producers: vec![],
        writers: Default::default(),
        txns: vec![],
    }
}

fn rejected(o: &Outcome) -> bool {
    matches!(o, Outcome::Rejected(_))
}

#[test]
fn register_starts_at_epoch_one_and_increments_on_restart() {
    let mut h = Harness::new();
    assert_eq!(h.register("n1"), NodeEpoch(1));
    h.heartbeat("n1", NodeEpoch(1));
    assert_eq!(h.register("n1"), NodeEpoch(2));
    let row = &h.view.nodes[&n("n1")];
    assert_eq!(row.heartbeats, HeartbeatCount(0));
    assert!(!row.fenced);
}

#[test]
fn register_rejects_an_invalid_node_id() {
    let mut h = Harness::new();
    let out = h.apply_as(
        "a/b",
        None,
        Command::RegisterNode {
            node: n("a/b"),
            http_addr: String::new(),
            kafka_addr: String::new(),
        },
    );
    assert!(rejected(&out));
    assert!(h.view.nodes.is_empty());
}

#[test]
fn heartbeat_increments_the_count() {
    let mut h = Harness::new();
    let e = h.register("n1");
    assert_eq!(h.heartbeat("n1", e), Outcome::Applied);
    assert_eq!(h.heartbeat("n1", e), Outcome::Applied);
    assert_eq!(h.view.nodes[&n("n1")].heartbeats, HeartbeatCount(2));
}

#[test]
fn heartbeat_of_a_replaced_epoch_is_rejected() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    h.register("n1");
    assert!(matches!(
        h.heartbeat("n1", e1),
        Outcome::Rejected(Rejection::ProposerStale(_))
    ));
}

#[test]
fn heartbeat_for_another_node_is_rejected() {
    let mut h = Harness::new();
    let e = h.register("n1");
    h.register("n2");
    let out = h.apply_as(
        "n1",
        Some(e.0),
        Command::Heartbeat {
            node: n("n2"),
            epoch: NodeEpoch(1),
        },
    );
    assert!(rejected(&out));
}

#[test]
fn fence_node_applies_when_the_row_matches() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    let e2 = h.register("n2");
    h.heartbeat("n2", e2);
    let out = h.apply_as(
        "n1",
        Some(e1.0),
        Command::FenceNode {
            node: n("n2"),
            epoch: e2,
            seen_count: HeartbeatCount(1),
        },
    );
    assert_eq!(out, Outcome::Applied);
    assert!(h.view.nodes[&n("n2")].fenced);
}

#[test]
fn fence_node_is_rejected_if_the_node_heartbeated_since() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    let e2 = h.register("n2");
    h.heartbeat("n2", e2);
    let out = h.apply_as(
        "n1",
        Some(e1.0),
        Command::FenceNode {
            node: n("n2"),
            epoch: e2,
            seen_count: HeartbeatCount(0),
        },
    );
    assert!(rejected(&out));
    assert!(!h.view.nodes[&n("n2")].fenced);
}

#[test]
fn fence_node_is_rejected_if_the_node_reregistered() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    let old = h.register("n2");
    h.register("n2");
    let out = h.apply_as(
        "n1",
        Some(e1.0),
        Command::FenceNode {
            node: n("n2"),
            epoch: old,
            seen_count: HeartbeatCount(0),
        },
    );
    assert!(rejected(&out));
    assert!(!h.view.nodes[&n("n2")].fenced);
}

#[test]
fn fence_node_is_rejected_if_already_fenced() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    let e2 = h.register("n2");
    let fence = Command::FenceNode {
        node: n("n2"),
        epoch: e2,
        seen_count: HeartbeatCount(0),
    };
    assert_eq!(h.apply_as("n1", Some(e1.0), fence.clone()), Outcome::Applied);
    assert!(rejected(&h.apply_as("n1", Some(e1.0), fence)));
}

#[test]
fn fence_self_is_unconditional_for_the_current_epoch() {
    let mut h = Harness::new();
    let e = h.register("n1");
    h.heartbeat("n1", e);
    assert_eq!(
        h.apply_as(
            "n1",
            Some(e.0),
            Command::FenceSelf {
                node: n("n1"),
                epoch: e
            }
        ),
        Outcome::Applied
    );
    assert!(h.view.nodes[&n("n1")].fenced);
}

#[test]
fn fence_self_for_another_node_is_rejected() {
    let mut h = Harness::new();
    let e = h.register("n1");
    h.register("n2");
    assert!(rejected(&h.apply_as(
        "n1",
        Some(e.0),
        Command::FenceSelf {
            node: n("n2"),
            epoch: NodeEpoch(1)
        }
    )));
    assert!(!h.view.nodes[&n("n2")].fenced);
}

#[test]
fn commands_from_a_fenced_node_are_rejected() {
    let mut h = Harness::new();
    let e = h.register("n1");
    h.apply_as(
        "n1",
        Some(e.0),
        Command::FenceSelf {
            node: n("n1"),
            epoch: e,
        },
    );
    assert!(matches!(
        h.heartbeat("n1", e),
        Outcome::Rejected(Rejection::ProposerFenced(_))
    ));
    assert!(matches!(
        h.create("n1", e, "t", 1),
        Outcome::Rejected(Rejection::ProposerFenced(_))
    ));
    assert!(h.view.topics.is_empty());
}

#[test]
fn commands_from_a_replaced_incarnation_are_rejected() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    h.register("n1");
    assert!(matches!(
        h.create("n1", e1, "t", 1),
        Outcome::Rejected(Rejection::ProposerStale(_))
    ));
    assert!(h.view.topics.is_empty());
}

#[test]
fn commands_from_an_unregistered_node_are_rejected() {
    let mut h = Harness::new();
    assert!(matches!(
        h.create("ghost", NodeEpoch(1), "t", 1),
        Outcome::Rejected(Rejection::ProposerStale(_))
    ));
}

#[test]
fn acquire_lease_when_free() {
    let mut h = Harness::new();
    let e = h.register("n1");
    h.lease("n1", e);
    assert!(h.view.holds_lease(&n("n1"), e));
}

#[test]
fn acquire_lease_from_a_silent_holder() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    let e2 = h.register("n2");
    h.lease("n1", e1);
    h.heartbeat("n1", e1);
    let out = h.apply_as(
        "n2",
        Some(e2.0),
        Command::AcquireLease {
            holder: Some((n("n1"), e1)),
            holder_count: HeartbeatCount(1),
        },
    );
    assert_eq!(out, Outcome::Applied);
    assert!(h.view.holds_lease(&n("n2"), e2));
}

#[test]
fn acquire_lease_is_rejected_if_the_holder_heartbeated() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    let e2 = h.register("n2");
    h.lease("n1", e1);
    h.heartbeat("n1", e1);
    let out = h.apply_as(
        "n2",
        Some(e2.0),
        Command::AcquireLease {
            holder: Some((n("n1"), e1)),
            holder_count: HeartbeatCount(0),
        },
    );
    assert!(rejected(&out));
    assert!(h.view.holds_lease(&n("n1"), e1));
}

#[test]
fn acquire_lease_is_rejected_if_it_changed_hands() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    let e2 = h.register("n2");
    h.lease("n1", e1);
    let out = h.apply_as(
        "n2",
        Some(e2.0),
        Command::AcquireLease {
            holder: None,
            holder_count: HeartbeatCount(0),
        },
    );
    assert!(rejected(&out));
}

#[test]
fn a_replaced_holders_lease_is_free_at_once() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    h.lease("n1", e1);
    h.heartbeat("n1", e1);
    let e2 = h.register("n1");
    // The count of the new epoch is 0, not the old holder's: the lease is free regardless.
    let out = h.apply_as(
        "n1",
        Some(e2.0),
        Command::AcquireLease {
            holder: Some((n("n1"), e1)),
            holder_count: HeartbeatCount(42),
        },
    );
    assert_eq!(out, Outcome::Applied);
    assert!(h.view.holds_lease(&n("n1"), e2));
}

#[test]
fn create_topic_makes_closed_streams_at_offset_zero() {
    let mut h = Harness::new();
    let e = h.register("n1");
    assert!(matches!(
        h.create("n1", e, "orders", 3),
        Outcome::TopicCreated(TopicId(1))
    ));
    let (_, row) = h.stream("orders", 2);
    assert_eq!(row.state, StreamState::Closed);
    assert_eq!(row.committed_end, Offset(0));
    assert_eq!(h.view.streams.len(), 3);
}

#[test]
fn create_topic_rejects_a_taken_name() {
    let mut h = Harness::new();
    let e = h.register("n1");
    h.create("n1", e, "t", 1);
    assert!(matches!(
        h.create("n1", e, "t", 2),
        Outcome::Rejected(Rejection::TopicExists(_))
    ));
    assert_eq!(h.view.topics["t"].partitions, 1);
}

#[test]
fn create_topic_rejects_invalid_names_and_counts() {
    let mut h = Harness::new();
    let e = h.register("n1");
    for bad in ["", ".", "..", "a/b", "a b", &"x".repeat(250)] {
        assert!(rejected(&h.create("n1", e, bad, 1)), "{bad:?}");
    }
    assert!(rejected(&h.create("n1", e, "t", 0)));
    assert!(rejected(&h.create("n1", e, "t", MAX_PARTITIONS + 1)));
    assert!(h.view.topics.is_empty() && h.view.streams.is_empty());
}

#[test]
fn delete_topic_marks_streams_deleted_and_drops_the_index() {
    let (mut h, e, s) = Harness::with_open_stream();
    h.apply_as(
        "n1",
        Some(e.0),
        Command::CommitObjects {
            node: n("n1"),
            epoch: e,
            chunks: vec![chunk(s, 1, 0, 5)],
        },
    );
    assert_eq!(
        h.apply_as("n1", Some(e.0), Command::DeleteTopic { name: "t".into() }),
        Outcome::Applied
    );
    assert!(h.view.topics.is_empty());
    assert_eq!(h.view.streams[&s].state, StreamState::Deleted);
    assert!(h.view.streams[&s].chunks.is_empty());
}

#[test]
fn delete_topic_rejects_an_unknown_topic() {
    let mut h = Harness::new();
    let e = h.register("n1");
    assert!(matches!(
        h.apply_as("n1", Some(e.0), Command::DeleteTopic { name: "nope".into() }),
        Outcome::Rejected(Rejection::TopicNotFound(_))
    ));
}

#[test]
fn a_recreated_topic_gets_a_new_id() {
    let mut h = Harness::new();
    let e = h.register("n1");
    h.create("n1", e, "t", 1);
    h.apply_as("n1", Some(e.0), Command::DeleteTopic { name: "t".into() });
    assert!(matches!(h.create("n1", e, "t", 1), Outcome::TopicCreated(TopicId(2))));
}

#[test]
fn place_stream_opens_a_closed_stream_at_the_next_epoch() {
    let (h, e, s) = Harness::with_open_stream();
    let row = &h.view.streams[&s];
    assert_eq!(
        row.state,
        StreamState::Open {
            node: n("n1"),
            node_epoch: e
        }
    );
    assert_eq!(row.stream_epoch, StreamEpoch(1));
}

#[test]
fn place_stream_rejects_a_stream_that_is_not_closed() {
    let (mut h, e, s) = Harness::with_open_stream();
    assert!(rejected(&h.apply_as(
        "n1",
        Some(e.0),
        Command::PlaceStream {
            stream: s,
            node: n("n1"),
            node_epoch: e
        }
    )));
    assert_eq!(h.view.streams[&s].stream_epoch, StreamEpoch(1));
}

#[test]
fn place_stream_rejects_a_node_that_is_not_live() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    let e2 = h.register("n2");
    h.create("n1", e1, "t", 1);
    h.apply_as(
        "n2",
        Some(e2.0),
        Command::FenceSelf {
            node: n("n2"),
            epoch: e2,
        },
    );
    let (s, _) = h.stream("t", 0);
    assert!(rejected(&h.apply_as(
        "n1",
        Some(e1.0),
        Command::PlaceStream {
            stream: s,
            node: n("n2"),
            node_epoch: e2
        }
    )));
    assert_eq!(h.view.streams[&s].state, StreamState::Closed);
}

#[test]
fn commit_objects_advances_the_committed_end() {
    let (mut h, e, s) = Harness::with_open_stream();
    let out = h.apply_as(
        "n1",
        Some(e.0),
        Command::CommitObjects {
            node: n("n1"),
            epoch: e,
            chunks: vec![chunk(s, 1, 0, 5), chunk(s, 1, 5, 9)],
        },
    );
    assert_eq!(out, Outcome::Applied);
    assert_eq!(h.view.streams[&s].committed_end, Offset(9));
    assert_eq!(h.view.streams[&s].chunks.len(), 2);
}

#[test]
fn commit_objects_is_all_or_nothing_on_a_gap() {
    let (mut h, e, s) = Harness::with_open_stream();
    let out = h.apply_as(
        "n1",
        Some(e.0),
        Command::CommitObjects {
            node: n("n1"),
            epoch: e,
            chunks: vec![chunk(s, 1, 0, 5), chunk(s, 1, 6, 9)],
        },
    );
    assert!(rejected(&out));
    assert_eq!(h.view.streams[&s].committed_end, Offset(0));
    assert!(h.view.streams[&s].chunks.is_empty());
}

#[test]
fn commit_objects_rejects_a_stale_stream_epoch() {
    let (mut h, e, s) = Harness::with_open_stream();
    assert!(rejected(&h.apply_as(
        "n1",
        Some(e.0),
        Command::CommitObjects {
            node: n("n1"),
            epoch: e,
            chunks: vec![chunk(s, 0, 0, 5)]
        }
    )));
}

#[test]
fn commit_objects_rejects_a_stream_owned_by_another_node() {
    let (mut h, _, s) = Harness::with_open_stream();
    let e2 = h.register("n2");
    assert!(rejected(&h.apply_as(
        "n2",
        Some(e2.0),
        Command::CommitObjects {
            node: n("n2"),
            epoch: e2,
            chunks: vec![chunk(s, 1, 0, 5)]
        }
    )));
    assert_eq!(h.view.streams[&s].committed_end, Offset(0));
}

#[test]
fn commit_objects_rejects_a_commit_in_another_nodes_name() {
    let (mut h, e, s) = Harness::with_open_stream();
    let e2 = h.register("n2");
    assert!(rejected(&h.apply_as(
        "n2",
        Some(e2.0),
        Command::CommitObjects {
            node: n("n1"),
            epoch: e,
            chunks: vec![chunk(s, 1, 0, 5)]
        }
    )));
}

#[test]
fn close_stream_at_the_committed_end() {
    let (mut h, e, s) = Harness::with_open_stream();
    h.apply_as(
        "n1",
        Some(e.0),
        Command::CommitObjects {
            node: n("n1"),
            epoch: e,
            chunks: vec![chunk(s, 1, 0, 5)],
        },
    );
    let out = h.apply_as(
        "n1",
        Some(e.0),
        Command::CloseStream {
            stream: s,
            stream_epoch: StreamEpoch(1),
            end: Offset(5),
        },
    );
    assert_eq!(out, Outcome::Applied);
    assert_eq!(h.view.streams[&s].state, StreamState::Closed);
}

#[test]
fn close_stream_rejects_an_end_that_is_not_committed() {
    let (mut h, e, s) = Harness::with_open_stream();
    assert!(rejected(&h.apply_as(
        "n1",
        Some(e.0),
        Command::CloseStream {
            stream: s,
            stream_epoch: StreamEpoch(1),
            end: Offset(5)
        }
    )));
    assert!(matches!(h.view.streams[&s].state, StreamState::Open { .. }));
}

#[test]
fn close_stream_rejects_a_non_owner() {
    let (mut h, _, s) = Harness::with_open_stream();
    let e2 = h.register("n2");
    assert!(rejected(&h.apply_as(
        "n2",
        Some(e2.0),
        Command::CloseStream {
            stream: s,
            stream_epoch: StreamEpoch(1),
            end: Offset(0)
        }
    )));
}

#[test]
fn wal_takeover_recovers_then_closes_a_dead_incarnations_streams() {
    let (mut h, e1, s) = Harness::with_open_stream();
    h.apply_as(
        "n1",
        Some(e1.0),
        Command::CommitObjects {
            node: n("n1"),
            epoch: e1,
            chunks: vec![chunk(s, 1, 0, 5)],
        },
    );
    let e2 = h.register("n1");
    h.lease("n1", e2);
    let begin = Command::BeginWalTakeover {
        node: n("n1"),
        epoch: e1,
    };
    assert_eq!(h.apply_as("n1", Some(e2.0), begin.clone()), Outcome::Applied);
    assert_eq!(
        h.view.streams[&s].state,
        StreamState::Recovering {
            node: n("n1"),
            node_epoch: e1,
            transfer_to: None
        }
    );
    // Idempotent: a second holder may redo the takeover.
    assert_eq!(h.apply_as("n1", Some(e2.0), begin), Outcome::Applied);
    let finish = Command::FinishWalTakeover {
        node: n("n1"),
        epoch: e1,
        chunks: vec![chunk(s, 1, 5, 8)],
    };
    assert_eq!(h.apply_as("n1", Some(e2.0), finish.clone()), Outcome::Applied);
    let row = &h.view.streams[&s];
    assert_eq!((row.state.clone(), row.committed_end), (StreamState::Closed, Offset(8)));
    // A late duplicate finish changes nothing.
    assert!(rejected(&h.apply_as("n1", Some(e2.0), finish)));
    assert_eq!(h.view.streams[&s].committed_end, Offset(8));
}

#[test]
fn wal_takeover_of_a_live_node_is_rejected() {
    let (mut h, e1, s) = Harness::with_open_stream();
    assert!(rejected(&h.apply_as(
        "n1",
        Some(e1.0),
        Command::BeginWalTakeover {
            node: n("n1"),
            epoch: e1
        }
    )));
    assert!(matches!(h.view.streams[&s].state, StreamState::Open { .. }));
}

#[test]
fn wal_takeover_without_the_lease_is_rejected() {
    let (mut h, e1, s) = Harness::with_open_stream();
    let e2 = h.register("n2");
    h.apply_as(
        "n1",
        Some(e1.0),
        Command::FenceSelf {
            node: n("n1"),
            epoch: e1,
        },
    );
    // n1's lease is free now, but n2 has not acquired it.
    assert!(rejected(&h.apply_as(
        "n2",
        Some(e2.0),
        Command::BeginWalTakeover {
            node: n("n1"),
            epoch: e1
        }
    )));
    assert!(matches!(h.view.streams[&s].state, StreamState::Open { .. }));
}

#[test]
fn finish_takeover_rejects_chunks_that_leave_a_gap() {
    let (mut h, e1, s) = Harness::with_open_stream();
    let e2 = h.register("n1");
    h.lease("n1", e2);
    h.apply_as(
        "n1",
        Some(e2.0),
        Command::BeginWalTakeover {
            node: n("n1"),
            epoch: e1,
        },
    );
    assert!(rejected(&h.apply_as(
        "n1",
        Some(e2.0),
        Command::FinishWalTakeover {
            node: n("n1"),
            epoch: e1,
            chunks: vec![chunk(s, 1, 3, 8)]
        }
    )));
    assert!(matches!(h.view.streams[&s].state, StreamState::Recovering { .. }));
}

#[test]
fn trim_stream_advances_the_start_and_drops_old_chunks() {
    let (mut h, e, s) = Harness::with_open_stream();
    h.apply_as(
        "n1",
        Some(e.0),
        Command::CommitObjects {
            node: n("n1"),
            epoch: e,
            chunks: vec![chunk(s, 1, 0, 5), chunk(s, 1, 5, 9)],
        },
    );
    assert_eq!(
        h.apply_as(
            "n1",
            Some(e.0),
            Command::TrimStream {
                stream: s,
                new_start: Offset(6)
            }
        ),
        Outcome::Applied
    );
    let row = &h.view.streams[&s];
    assert_eq!(row.start, Offset(6));
    assert_eq!(row.chunks.len(), 1);
}

#[test]
fn trim_stream_past_the_committed_end_is_rejected() {
    let (mut h, e, s) = Harness::with_open_stream();
    assert!(rejected(&h.apply_as(
        "n1",
        Some(e.0),
        Command::TrimStream {
            stream: s,
            new_start: Offset(1)
        }
    )));
    assert_eq!(h.view.streams[&s].start, Offset(0));
}

#[test]
fn compact_chunks_swaps_only_what_the_compactor_read_at_its_epoch_and_start() {
    let (mut h, e, s) = Harness::with_open_stream();
    h.apply_as(
        "n1",
        Some(e.0),
        Command::CommitObjects {
            node: n("n1"),
            epoch: e,
            chunks: vec![chunk(s, 1, 0, 5), chunk(s, 1, 5, 9)],
        },
    );
    let before = h.view.streams[&s].clone();
    let compacted = IndexedChunk {
        key: "data/compacted.obj".into(),
        byte_end: 4,
        ..chunk(s, 1, 0, 9).chunk
    };
    let swap = |se: u64, start: u64| Command::CompactChunks {
        stream: s,
        stream_epoch: StreamEpoch(se),
        start: Offset(start),
        replaced: before.chunks.clone(),
        chunks: vec![compacted.clone()],
    };
    // A stale epoch or start changes nothing.
    for cmd in [swap(2, 0), swap(1, 3)] {
        assert!(rejected(&h.apply_as("n1", Some(e.0), cmd.clone())), "{cmd:?}");
        assert_eq!(h.view.streams[&s], before);
    }
    assert_eq!(h.apply_as("n1", Some(e.0), swap(1, 0)), Outcome::Applied);
    let row = &h.view.streams[&s];
    assert_eq!(row.chunks, std::slice::from_ref(&compacted));
    assert_eq!(
        (row.committed_end, row.start),
        (Offset(9), Offset(0)),
        "no offset moved"
    );
    // The same swap again names chunks no longer indexed.
    assert!(rejected(&h.apply_as("n1", Some(e.0), swap(1, 0))));
    assert_eq!(h.view.streams[&s].chunks, [compacted]);
    // A deleted stream is not compacted.
    h.apply_as("n1", Some(e.0), Command::DeleteTopic { name: "t".into() });
    let cmd = Command::CompactChunks {
        stream: s,
        stream_epoch: StreamEpoch(1),
        start: Offset(0),
        replaced: vec![],
        chunks: vec![],
    };
    assert!(rejected(&h.apply_as("n1", Some(e.0), cmd)));
}

#[test]
fn the_view_round_trips_through_json() {
    let (h, _, _) = Harness::with_open_stream();
    let json = serde_json::to_vec(&h.view).unwrap();
    let back: View = serde_json::from_slice(&json).unwrap();
    assert_eq!(back, h.view);
}

fn begin(h: &mut Harness, by: &str, e: NodeEpoch, s: StreamId, se: u64, to: &str, to_e: u64) -> Outcome {
    h.apply_as(
        by,
        Some(e.0),
        Command::BeginTransfer {
            stream: s,
            stream_epoch: StreamEpoch(se),
            to: n(to),
            to_epoch: NodeEpoch(to_e),
        },
    )
}

#[test]
fn a_transfer_moves_an_open_stream_to_the_target_at_the_next_epoch() {
    let (mut h, e, s) = Harness::with_open_stream();
    h.register("n2");
    assert_eq!(begin(&mut h, "n1", e, s, 1, "n2", 1), Outcome::Applied);
    assert!(matches!(h.view.streams[&s].state, StreamState::Transferring { .. }));
    let done = h.apply_as(
        "n1",
        Some(e.0),
        Command::CompleteTransfer {
            stream: s,
            stream_epoch: StreamEpoch(1),
            end: Offset(0),
        },
    );
    assert_eq!(done, Outcome::Applied);
    let row = &h.view.streams[&s];
    assert_eq!(
        row.state,
        StreamState::Open {
            node: n("n2"),
            node_epoch: NodeEpoch(1)
        }
    );
    assert_eq!(row.stream_epoch, StreamEpoch(2));
}

#[test]
fn begin_transfer_rejects_a_dead_or_draining_target_and_a_stale_epoch() {
    let (mut h, e, s) = Harness::with_open_stream();
    let e2 = h.register("n2");
    assert!(rejected(&begin(&mut h, "n1", e, s, 1, "n3", 1)), "unknown target");
    assert!(rejected(&begin(&mut h, "n1", e, s, 0, "n2", 1)), "stale stream epoch");
    assert!(rejected(&begin(&mut h, "n1", e, s, 1, "n1", 1)), "already there");
    h.apply_as(
        "n2",
        Some(e2.0),
        Command::DrainNode {
            node: n("n2"),
            epoch: e2,
        },
    );
    assert!(rejected(&begin(&mut h, "n1", e, s, 1, "n2", 1)), "draining target");
    assert!(matches!(h.view.streams[&s].state, StreamState::Open { .. }));
}

#[test]
fn complete_transfer_requires_the_owner_and_the_committed_end() {
    let (mut h, e, s) = Harness::with_open_stream();
    let e2 = h.register("n2");
    begin(&mut h, "n1", e, s, 1, "n2", 1);
    let by_target = h.apply_as(
        "n2",
        Some(e2.0),
        Command::CompleteTransfer {
            stream: s,
            stream_epoch: StreamEpoch(1),
            end: Offset(0),
        },
    );
    assert!(rejected(&by_target));
    let wrong_end = h.apply_as(
        "n1",
        Some(e.0),
        Command::CompleteTransfer {
            stream: s,
            stream_epoch: StreamEpoch(1),
            end: Offset(3),
        },
    );
    assert!(rejected(&wrong_end));
    assert!(matches!(h.view.streams[&s].state, StreamState::Transferring { .. }));
}

#[test]
fn a_transfer_to_a_target_that_died_completes_as_closed() {
    let (mut h, e, s) = Harness::with_open_stream();
    let e2 = h.register("n2");
    begin(&mut h, "n1", e, s, 1, "n2", 1);
    h.apply_as(
        "n2",
        Some(e2.0),
        Command::FenceSelf {
            node: n("n2"),
            epoch: e2,
        },
    );
    h.apply_as(
        "n1",
        Some(e.0),
        Command::CompleteTransfer {
            stream: s,
            stream_epoch: StreamEpoch(1),
            end: Offset(0),
        },
    );
    assert_eq!(h.view.streams[&s].state, StreamState::Closed);
}

#[test]
fn cancel_transfer_returns_the_stream_to_its_owner_and_needs_the_lease() {
    let (mut h, e, s) = Harness::with_open_stream();
    let e2 = h.register("n2");
    begin(&mut h, "n1", e, s, 1, "n2", 1);
    let cancel = Command::CancelTransfer {
        stream: s,
        stream_epoch: StreamEpoch(1),
    };
    assert!(
        rejected(&h.apply_as("n2", Some(e2.0), cancel.clone())),
        "n2 does not hold the lease"
    );
    assert_eq!(h.apply_as("n1", Some(e.0), cancel), Outcome::Applied);
    assert_eq!(
        h.view.streams[&s].state,
        StreamState::Open {
            node: n("n1"),
            node_epoch: e
        }
    );
    assert_eq!(h.view.streams[&s].stream_epoch, StreamEpoch(1));
}

#[test]
fn a_pending_transfer_of_a_dead_owner_completes_to_the_target_after_takeover() {
    let (mut h, e1, s) = Harness::with_open_stream();
    h.register("n2");
    begin(&mut h, "n1", e1, s, 1, "n2", 1);
    let e2 = h.register("n1");
    h.lease("n1", e2);
    assert_eq!(
        h.apply_as(
            "n1",
            Some(e2.0),
            Command::BeginWalTakeover {
                node: n("n1"),
                epoch: e1
            }
        ),
        Outcome::Applied
    );
    assert!(matches!(
        &h.view.streams[&s].state,
        StreamState::Recovering {
            transfer_to: Some(_),
            ..
        }
    ));
    let finish = Command::FinishWalTakeover {
        node: n("n1"),
        epoch: e1,
        chunks: vec![chunk(s, 1, 0, 4)],
    };
    assert_eq!(h.apply_as("n1", Some(e2.0), finish), Outcome::Applied);
    let row = &h.view.streams[&s];
    assert_eq!(
        row.state,
        StreamState::Open {
            node: n("n2"),
            node_epoch: NodeEpoch(1)
        }
    );
    assert_eq!((row.stream_epoch, row.committed_end), (StreamEpoch(2), Offset(4)));
}

#[test]
fn drain_marks_a_live_node_and_is_rejected_for_a_fenced_one() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    let e2 = h.register("n2");
    assert_eq!(
        h.apply_as(
            "n1",
            Some(e1.0),
            Command::DrainNode {
                node: n("n2"),
                epoch: e2
            }
        ),
        Outcome::Applied
    );
    assert!(h.view.nodes[&n("n2")].draining);
    h.apply_as(
        "n1",
        Some(e1.0),
        Command::FenceSelf {
            node: n("n1"),
            epoch: e1,
        },
    );
    let e3 = h.register("n3");
    assert!(rejected(&h.apply_as(
        "n3",
        Some(e3.0),
        Command::DrainNode {
            node: n("n1"),
            epoch: e1
        }
    )));
}

#[test]
fn the_owner_commits_its_tail_while_transferring() {
    let (mut h, e, s) = Harness::with_open_stream();
    h.register("n2");
    begin(&mut h, "n1", e, s, 1, "n2", 1);
    let commit = Command::CommitObjects {
        node: n("n1"),
        epoch: e,
        chunks: vec![chunk(s, 1, 0, 3)],
    };
    assert_eq!(h.apply_as("n1", Some(e.0), commit), Outcome::Applied);
    let done = h.apply_as(
        "n1",
        Some(e.0),
        Command::CompleteTransfer {
            stream: s,
            stream_epoch: StreamEpoch(1),
            end: Offset(3),
        },
    );
    assert_eq!(done, Outcome::Applied);
}

fn commit(h: &mut Harness, e: NodeEpoch, group: &str, offsets: Vec<(StreamId, i64, Option<String>)>) -> Outcome {
    h.apply_as(
        "n1",
        Some(e.0),
        Command::CommitOffsets {
            group: group.into(),
            offsets,
        },
    )
}

#[test]
fn commit_offsets_stores_the_latest_offset_per_stream() {
    let (mut h, e, s) = Harness::with_open_stream();
    assert_eq!(commit(&mut h, e, "g", vec![(s, 3, None)]), Outcome::Applied);
    assert_eq!(commit(&mut h, e, "g", vec![(s, 7, Some("m".into()))]), Outcome::Applied);
    assert_eq!(h.view.groups["g"][&s], (7, Some("m".to_string())));
    let json = serde_json::to_string(&h.view).unwrap();
    assert_eq!(serde_json::from_str::<View>(&json).unwrap(), h.view);
}

#[test]
fn commit_offsets_is_all_or_nothing_for_unknown_or_deleted_streams() {
    let (mut h, e, s) = Harness::with_open_stream();
    let unknown = StreamId::new(h.view.topics["t"].id, 999);
    assert!(rejected(&commit(
        &mut h,
        e,
        "g",
        vec![(s, 1, None), (unknown, 1, None)]
    )));
    assert!(!h.view.groups.contains_key("g"));
    assert!(rejected(&commit(&mut h, e, "", vec![(s, 1, None)])));
    h.apply_as("n1", Some(e.0), Command::DeleteTopic { name: "t".into() });
    assert!(rejected(&commit(&mut h, e, "g", vec![(s, 1, None)])));
    assert!(h.view.groups.is_empty());
}

#[test]
fn delete_group_forgets_its_offsets_and_rejects_an_unknown_group() {
    let (mut h, e, s) = Harness::with_open_stream();
    commit(&mut h, e, "g", vec![(s, 3, None)]);
    let delete = |h: &mut Harness| h.apply_as("n1", Some(e.0), Command::DeleteGroup { group: "g".into() });
    assert_eq!(delete(&mut h), Outcome::Applied);
    assert!(h.view.groups.is_empty());
    assert!(rejected(&delete(&mut h)));
}

fn delete_offsets(h: &mut Harness, e: NodeEpoch, group: &str, partitions: Vec<StreamId>) -> Outcome {
    h.apply_as(
        "n1",
        Some(e.0),
        Command::DeleteOffsets {
            group: group.into(),
            partitions,
        },
    )
}

#[test]
fn delete_offsets_forgets_only_the_named_partitions_and_then_the_group() {
    let (mut h, e, s0) = Harness::with_open_stream();
    let (s1, _) = h.stream("t", 1);
    commit(&mut h, e, "g", vec![(s0, 3, None), (s1, 4, Some("m".into()))]);
    commit(&mut h, e, "other", vec![(s0, 9, None)]);
    let record = Command::PutGroupState {
        group: "g".into(),
        kind: "classic".into(),
        expected_version: 0,
        data: b"members".to_vec(),
    };
    assert_eq!(h.apply_as("n1", Some(e.0), record), Outcome::Applied);
    assert_eq!(delete_offsets(&mut h, e, "g", vec![s0]), Outcome::Applied);
    assert_eq!(h.view.groups["g"].keys().copied().collect::<Vec<_>>(), vec![s1]);
    assert_eq!(h.view.groups["other"][&s0], (9, None), "another group keeps its offset");
    // A partition the group has no offset for is skipped, not refused.
    assert_eq!(delete_offsets(&mut h, e, "g", vec![s0, s0]), Outcome::Applied);
    assert_eq!(h.view.groups["g"].len(), 1);
    let json = serde_json::to_string(&h.view).unwrap();
    assert_eq!(serde_json::from_str::<View>(&json).unwrap(), h.view);
    // The last offset gone, the group has no offsets entry; its membership
    // record is another matter and stays.
    assert_eq!(delete_offsets(&mut h, e, "g", vec![s1]), Outcome::Applied);
    assert!(!h.view.groups.contains_key("g"));
    assert_eq!(h.view.group_states["g"].data, b"members");
    assert!(matches!(
        delete_offsets(&mut h, e, "g", vec![s1]),
        Outcome::Rejected(Rejection::Precondition(_))
    ));
}

#[test]
fn delete_offsets_refuses_empty_ids_bad_sizes_and_stale_proposers_and_changes_nothing() {
    let (mut h, e, s) = Harness::with_open_stream();
    commit(&mut h, e, "g", vec![(s, 3, None)]);
    let before = h.view.groups.clone();
    let invalid = |o: Outcome| matches!(o, Outcome::Rejected(Rejection::Invalid(_)));
    assert!(invalid(delete_offsets(&mut h, e, "", vec![s])));
    assert!(invalid(delete_offsets(&mut h, e, "g", vec![])));
    assert!(invalid(delete_offsets(
        &mut h,
        e,
        "g",
        vec![s; MAX_DELETED_OFFSETS + 1]
    )));
    assert_eq!(h.view.groups, before);
    // At the bound it applies.
    assert_eq!(
        delete_offsets(&mut h, e, "g", vec![s; MAX_DELETED_OFFSETS]),
        Outcome::Applied
    );
    commit(&mut h, e, "g", vec![(s, 3, None)]);
    let stale = h.apply_as(
        "n1",
        Some(e.0 + 1),
        Command::DeleteOffsets {
            group: "g".into(),
            partitions: vec![s],
        },
    );
    assert!(matches!(stale, Outcome::Rejected(Rejection::ProposerStale(_))));
    assert_eq!(h.view.groups, before);
}

#[test]
fn delete_offsets_round_trips_through_json() {
    let (h, _, s) = Harness::with_open_stream();
    let cmd = Command::DeleteOffsets {
        group: "g".into(),
        partitions: vec![s, h.stream("t", 1).0],
    };
    let json = serde_json::to_string(&cmd).unwrap();
    assert!(
        json.starts_with(r#"{"type":"DeleteOffsets","group":"g","partitions":["#),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<Command>(&json).unwrap(), cmd);
    assert_eq!(cmd.name(), "DeleteOffsets");
}

fn producer_batch(pid: i64, first_seq: i32, base: u64, count: u32) -> crate::meta::producers::ProducerBatch {
    crate::meta::producers::ProducerBatch {
        producer_id: pid,
        producer_epoch: 0,
        first_seq,
        last_seq: first_seq + count as i32 - 1,
        base: Offset(base),
        count,
    }
}

#[test]
fn committed_chunks_carry_producer_state_into_the_stream_row() {
    use crate::meta::producers::Verdict;
    let (mut h, e, s) = Harness::with_open_stream();
    let mut c = chunk(s, 1, 0, 5);
    c.producers = vec![producer_batch(7, 0, 0, 2), producer_batch(7, 2, 2, 3)];
    let commit = Command::CommitObjects {
        node: n("n1"),
        epoch: e,
        chunks: vec![c],
    };
    assert_eq!(h.apply_as("n1", Some(e.0), commit), Outcome::Applied);
    let row = &h.view.streams[&s];
    assert_eq!(
        row.producers.check(7, 0, 2, 3),
        Verdict::Duplicate {
            base: Offset(2),
            count: 3
        }
    );
    assert_eq!(row.producers.check(7, 0, 5, 1), Verdict::Append);
    // The state survives a snapshot round trip.
    let json = serde_json::to_string(&h.view).unwrap();
    assert_eq!(serde_json::from_str::<View>(&json).unwrap(), h.view);
}

#[test]
fn a_producer_batch_outside_its_chunk_is_rejected_and_changes_nothing() {
    let (mut h, e, s) = Harness::with_open_stream();
    let mut c = chunk(s, 1, 0, 5);
    c.producers = vec![producer_batch(7, 0, 4, 2)];
    let before = h.view.streams[&s].clone();
    let commit = Command::CommitObjects {
        node: n("n1"),
        epoch: e,
        chunks: vec![c],
    };
    assert!(rejected(&h.apply_as("n1", Some(e.0), commit)));
    assert_eq!(h.view.streams[&s], before);
}

#[test]
fn committed_chunks_carry_open_and_aborted_transactions_into_the_stream_row() {
    use crate::meta::txn_index::TxnBatch;
    let (mut h, e, s) = Harness::with_open_stream();
    let mut c = chunk(s, 1, 0, 6);
    c.txns = vec![
        TxnBatch::Data {
            producer_id: 7,
            base: Offset(0),
        },
        TxnBatch::Data {
            producer_id: 8,
            base: Offset(2),
        },
        TxnBatch::Marker {
            producer_id: 7,
            producer_epoch: 1,
            offset: Offset(4),
            commit: false,
        },
    ];
    let commit = |chunks| Command::CommitObjects {
        node: n("n1"),
        epoch: e,
        chunks,
    };
    assert_eq!(h.apply_as("n1", Some(e.0), commit(vec![c])), Outcome::Applied);
    let txns = h.view.streams[&s].producers.txns().clone();
    assert_eq!(txns.last_stable(Offset(6)), Offset(2), "producer 8 is open");
    assert_eq!(txns.aborted_in(Offset(0), Offset(6)).len(), 1);
    let json = serde_json::to_string(&h.view).unwrap();
    assert_eq!(serde_json::from_str::<View>(&json).unwrap(), h.view);
    // An event outside its chunk is refused and changes nothing.
    let mut bad = chunk(s, 1, 6, 8);
    bad.txns = vec![TxnBatch::Data {
        producer_id: 9,
        base: Offset(8),
    }];
    let before = h.view.streams[&s].clone();
    assert!(rejected(&h.apply_as("n1", Some(e.0), commit(vec![bad]))));
    assert_eq!(h.view.streams[&s], before);
}

#[test]
fn producer_ids_are_handed_out_in_disjoint_blocks() {
    let mut h = Harness::new();
    let e1 = h.register("n1");
    let e2 = h.register("n2");
    let a = h.apply_as("n1", Some(e1.0), Command::AllocateProducerIds { count: 1000 });
    let b = h.apply_as("n2", Some(e2.0), Command::AllocateProducerIds { count: 10 });
    assert_eq!(a, Outcome::ProducerIds { first: 0 });
    assert_eq!(b, Outcome::ProducerIds { first: 1000 });
    assert_eq!(h.view.next_producer_id, 1010);
}

#[test]
fn producer_id_blocks_must_be_sized_sensibly_and_proposers_alive() {
    let mut h = Harness::new();
    let e = h.register("n1");
    assert!(rejected(&h.apply_as(
        "n1",
        Some(e.0),
        Command::AllocateProducerIds { count: 0 }
    )));
    let too_many = MAX_PRODUCER_ID_BLOCK + 1;
    assert!(rejected(&h.apply_as(
        "n1",
        Some(e.0),
        Command::AllocateProducerIds { count: too_many }
    )));
    assert!(rejected(&h.apply_as(
        "n9",
        Some(1),
        Command::AllocateProducerIds { count: 1 }
    )));
    assert_eq!(h.view.next_producer_id, 0);
}

#[test]
fn each_new_stream_epoch_records_where_it_started() {
    let (mut h, e1, s) = Harness::with_open_stream();
    h.apply_as(
        "n1",
        Some(e1.0),
        Command::CommitObjects {
            node: n("n1"),
            epoch: e1,
            chunks: vec![chunk(s, 1, 0, 5)],
        },
    );
    let close = Command::CloseStream {
        stream: s,
        stream_epoch: StreamEpoch(1),
        end: Offset(5),
    };
    assert_eq!(h.apply_as("n1", Some(e1.0), close), Outcome::Applied);
    let place = Command::PlaceStream {
        stream: s,
        node: n("n1"),
        node_epoch: e1,
    };
    assert_eq!(h.apply_as("n1", Some(e1.0), place), Outcome::Applied);
    let row = &h.view.streams[&s];
    assert_eq!(row.stream_epoch, StreamEpoch(2));
    assert_eq!(
        row.epoch_starts,
        vec![(StreamEpoch(1), Offset(0)), (StreamEpoch(2), Offset(5))]
    );
    assert_eq!(row.epoch_end(StreamEpoch(1)), Some(Offset(5)));
    assert_eq!(row.epoch_end(StreamEpoch(0)), Some(Offset(0)));
    assert_eq!(
        row.epoch_end(StreamEpoch(2)),
        None,
        "the current epoch ends at the high watermark"
    );
}

#[test]
fn committed_chunks_carry_durable_writer_state_into_the_stream_row() {
    use crate::meta::writers::{DsVerdict, DsWrite, ProducerSeq, WriterMark, WriterTable};
    let (mut h, e, s) = Harness::with_open_stream();
    let write = |seq| DsWrite {
        producer: Some(ProducerSeq {
            id: "w".into(),
            epoch: 0,
            seq,
        }),
        ..Default::default()
    };
    let mut writers = WriterTable::default();
    writers.record(&WriterMark {
        write: write(0),
        end: Offset(5),
    });
    let mut c = chunk(s, 1, 0, 5);
    c.writers = writers;
    let commit = Command::CommitObjects {
        node: n("n1"),
        epoch: e,
        chunks: vec![c],
    };
    assert_eq!(h.apply_as("n1", Some(e.0), commit), Outcome::Applied);
    let row = &h.view.streams[&s];
    assert!(matches!(
        row.producers.writers().check(&write(0)),
        DsVerdict::Duplicate { next: Offset(5), .. }
    ));
    let json = serde_json::to_string(&h.view).unwrap();
    assert_eq!(serde_json::from_str::<View>(&json).unwrap(), h.view);
}

#[test]
fn a_stream_row_from_an_older_snapshot_has_no_writer_state() {
    // Producer state as older releases wrote it: Kafka producers only.
    let old = r#"{"producers":[]}"#;
    let t: crate::meta::producers::ProducerTable = serde_json::from_str(old).unwrap();
    assert!(t.writers().is_empty() && t.is_empty());
}
