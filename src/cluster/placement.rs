//! Placement: every closed stream of a live topic goes to the least loaded
//! live node (fewest open streams, ties broken by node id).

use crate::ids::{NodeEpoch, NodeId, StreamId};
use crate::meta::{Command, StreamState, View};
use std::collections::BTreeMap;

/// `PlaceStream` commands for the closed streams of `view`, at most `max`.
pub fn plan(view: &View, max: usize) -> Vec<Command> {
    let mut load: BTreeMap<(NodeId, NodeEpoch), usize> = view
        .nodes
        .iter()
        .filter(|(_, r)| !r.fenced)
        .map(|(id, r)| ((id.clone(), r.epoch), 0))
        .collect();
    if load.is_empty() {
        return Vec::new();
    }
    for row in view.streams.values() {
        if let StreamState::Open { node, node_epoch } = &row.state {
            if let Some(n) = load.get_mut(&(node.clone(), *node_epoch)) {
                *n += 1;
            }
        }
    }
    let closed: Vec<StreamId> = view
        .streams
        .iter()
        .filter(|(_, r)| r.state == StreamState::Closed && view.topics.contains_key(&r.topic_name))
        .map(|(id, _)| *id)
        .take(max)
        .collect();
    closed
        .into_iter()
        .map(|stream| {
            let ((node, node_epoch), n) = load
                .iter_mut()
                .min_by_key(|((id, _), n)| (**n, id.clone()))
                .expect("load is not empty");
            *n += 1;
            Command::PlaceStream {
                stream,
                node: node.clone(),
                node_epoch: *node_epoch,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::LogIndex;
    use crate::meta::{Outcome, Proposer};

    fn apply(v: &mut View, node: &str, epoch: Option<u64>, cmd: Command) -> Outcome {
        let i = LogIndex(v.applied.0 + 1);
        v.apply_entry(
            i,
            &Proposer {
                node: NodeId::new(node),
                epoch: epoch.map(NodeEpoch),
            },
            &[cmd],
        )
        .remove(0)
    }

    #[test]
    fn closed_streams_spread_over_live_nodes_evenly() {
        let mut v = View::default();
        for n in ["a", "b", "c"] {
            apply(
                &mut v,
                n,
                None,
                Command::RegisterNode {
                    node: NodeId::new(n),
                    http_addr: String::new(),
                    kafka_addr: String::new(),
                },
            );
        }
        apply(
            &mut v,
            "c",
            Some(1),
            Command::FenceSelf {
                node: NodeId::new("c"),
                epoch: NodeEpoch(1),
            },
        );
        apply(
            &mut v,
            "a",
            Some(1),
            Command::CreateTopic {
                name: "t".into(),
                partitions: 5,
                config: Default::default(),
            },
        );
        let cmds = plan(&v, 100);
        assert_eq!(cmds.len(), 5);
        for c in cmds {
            assert_eq!(apply(&mut v, "a", Some(1), c), Outcome::Applied);
        }
        assert_eq!(v.open_streams_of(&NodeId::new("a"), NodeEpoch(1)).len(), 3);
        assert_eq!(v.open_streams_of(&NodeId::new("b"), NodeEpoch(1)).len(), 2);
        assert!(plan(&v, 100).is_empty());
    }

    #[test]
    fn nothing_is_placed_without_live_nodes() {
        let mut v = View::default();
        apply(
            &mut v,
            "a",
            None,
            Command::RegisterNode {
                node: NodeId::new("a"),
                http_addr: String::new(),
                kafka_addr: String::new(),
            },
        );
        apply(
            &mut v,
            "a",
            Some(1),
            Command::CreateTopic {
                name: "t".into(),
                partitions: 1,
                config: Default::default(),
            },
        );
        apply(
            &mut v,
            "a",
            Some(1),
            Command::FenceSelf {
                node: NodeId::new("a"),
                epoch: NodeEpoch(1),
            },
        );
        assert!(plan(&v, 100).is_empty());
    }
}
