//! Placement: every closed stream of a live topic goes to the least loaded
//! live node (fewest open streams, ties broken by node id).

use crate::ids::{NodeEpoch, NodeId, StreamId};
use crate::meta::{Command, StreamState, View};
use std::collections::BTreeMap;

/// The node a stream counts against: its owner, or its transfer target.
fn load_owner(state: &StreamState) -> Option<(NodeId, NodeEpoch)> {
    match state {
        StreamState::Open { node, node_epoch } => Some((node.clone(), *node_epoch)),
        StreamState::Transferring { to, to_epoch, .. } => Some((to.clone(), *to_epoch)),
        _ => None,
    }
}

/// Open streams per node that may receive streams (live, not draining).
pub fn loads(view: &View) -> BTreeMap<(NodeId, NodeEpoch), usize> {
    let mut load: BTreeMap<(NodeId, NodeEpoch), usize> = view
        .nodes
        .iter()
        .filter(|(_, r)| !r.fenced && !r.draining)
        .map(|(id, r)| ((id.clone(), r.epoch), 0))
        .collect();
    for row in view.streams.values() {
        if let Some(owner) = load_owner(&row.state) {
            if let Some(n) = load.get_mut(&owner) {
                *n += 1;
            }
        }
    }
    load
}

/// Transfers that move streams off draining nodes, then from the most to the
/// least loaded node while their counts differ by more than `threshold`; at
/// most `max_in_flight` transfers at once, counting those already running.
pub fn rebalance(view: &View, threshold: usize, max_in_flight: usize) -> Vec<Command> {
    let running = view
        .streams
        .values()
        .filter(|r| matches!(r.state, StreamState::Transferring { .. }))
        .count();
    let mut budget = max_in_flight.saturating_sub(running);
    let mut load = loads(view);
    let mut out = Vec::new();
    if load.is_empty() {
        return out;
    }
    let least = |load: &BTreeMap<(NodeId, NodeEpoch), usize>| {
        load.iter()
            .min_by_key(|((id, _), n)| (**n, id.clone()))
            .map(|(k, _)| k.clone())
            .expect("not empty")
    };
    // Draining nodes first: every stream they own goes.
    for (id, row) in &view.streams {
        if budget == 0 {
            return out;
        }
        if let StreamState::Open { node, node_epoch } = &row.state {
            if view
                .nodes
                .get(node)
                .is_some_and(|r| r.draining && r.epoch == *node_epoch && !r.fenced)
            {
                let (to, to_epoch) = least(&load);
                *load.get_mut(&(to.clone(), to_epoch)).expect("present") += 1;
                out.push(Command::BeginTransfer {
                    stream: *id,
                    stream_epoch: row.stream_epoch,
                    to,
                    to_epoch,
                });
                budget -= 1;
            }
        }
    }
    while budget > 0 {
        let (max_node, max_n) = load
            .iter()
            .max_by_key(|((id, _), n)| (**n, std::cmp::Reverse(id.clone())))
            .map(|(k, n)| (k.clone(), *n))
            .expect("not empty");
        let (min_node, min_n) = load
            .iter()
            .min_by_key(|((id, _), n)| (**n, id.clone()))
            .map(|(k, n)| (k.clone(), *n))
            .expect("not empty");
        if max_n <= min_n + threshold {
            break;
        }
        let candidate = view.streams.iter().find(|(id, r)| {
            matches!(&r.state, StreamState::Open { node, node_epoch } if (node.clone(), *node_epoch) == max_node)
                && !out
                    .iter()
                    .any(|c| matches!(c, Command::BeginTransfer { stream, .. } if stream == *id))
        });
        let Some((id, row)) = candidate else { break };
        out.push(Command::BeginTransfer {
            stream: *id,
            stream_epoch: row.stream_epoch,
            to: min_node.0.clone(),
            to_epoch: min_node.1,
        });
        *load.get_mut(&max_node).expect("present") -= 1;
        *load.get_mut(&min_node).expect("present") += 1;
        budget -= 1;
    }
    out
}

/// `PlaceStream` commands for the closed streams of `view`, at most `max`.
pub fn plan(view: &View, max: usize) -> Vec<Command> {
    let mut load = loads(view);
    if load.is_empty() {
        return Vec::new();
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

    fn cluster(nodes: &[&str], partitions: u32) -> View {
        let mut v = View::default();
        for n in nodes {
            apply(
                &mut v,
                n,
                None,
                Command::RegisterNode {
                    node: NodeId::new(*n),
                    http_addr: String::new(),
                    kafka_addr: String::new(),
                },
            );
        }
        apply(
            &mut v,
            nodes[0],
            Some(1),
            Command::CreateTopic {
                name: "t".into(),
                partitions,
                config: Default::default(),
            },
        );
        v
    }

    #[test]
    fn a_new_node_gets_streams_by_rebalancing() {
        let mut v = cluster(&["a"], 6);
        for c in plan(&v, 100) {
            apply(&mut v, "a", Some(1), c);
        }
        apply(
            &mut v,
            "b",
            None,
            Command::RegisterNode {
                node: NodeId::new("b"),
                http_addr: String::new(),
                kafka_addr: String::new(),
            },
        );
        let moves = rebalance(&v, 1, 4);
        assert_eq!(moves.len(), 3, "{moves:?}");
        for c in moves {
            assert_eq!(apply(&mut v, "a", Some(1), c), Outcome::Applied);
        }
        assert!(rebalance(&v, 1, 4).is_empty(), "balanced once the transfers land");
    }

    #[test]
    fn draining_nodes_are_emptied_and_get_nothing_new() {
        let mut v = cluster(&["a", "b"], 4);
        for c in plan(&v, 100) {
            apply(&mut v, "a", Some(1), c);
        }
        apply(
            &mut v,
            "a",
            Some(1),
            Command::DrainNode {
                node: NodeId::new("b"),
                epoch: NodeEpoch(1),
            },
        );
        let moves = rebalance(&v, 1, 4);
        assert_eq!(moves.len(), 2);
        assert!(moves
            .iter()
            .all(|c| matches!(c, Command::BeginTransfer { to, .. } if to.as_str() == "a")));
        let mut v2 = cluster(&["a", "b"], 2);
        apply(
            &mut v2,
            "a",
            Some(1),
            Command::DrainNode {
                node: NodeId::new("b"),
                epoch: NodeEpoch(1),
            },
        );
        assert!(plan(&v2, 100)
            .iter()
            .all(|c| matches!(c, Command::PlaceStream { node, .. } if node.as_str() == "a")));
    }

    #[test]
    fn rebalancing_respects_the_concurrency_limit() {
        let mut v = cluster(&["a"], 10);
        for c in plan(&v, 100) {
            apply(&mut v, "a", Some(1), c);
        }
        apply(
            &mut v,
            "b",
            None,
            Command::RegisterNode {
                node: NodeId::new("b"),
                http_addr: String::new(),
                kafka_addr: String::new(),
            },
        );
        assert_eq!(rebalance(&v, 1, 2).len(), 2);
    }
}
