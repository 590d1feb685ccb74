//! Liveness by heartbeat counts in the log, never by wall time.
//!
//! Each node keeps, as it applies the log, the last change it saw of every
//! other node's heartbeat count together with its *own* count at that moment.
//! A node is silent for `k` when its observer has heartbeated `k` times since
//! that change. An observer that was paused or cut off from the log does not
//! heartbeat, so its clock stops and it judges nobody.

use super::view::View;
use crate::ids::{HeartbeatCount, NodeEpoch, NodeId};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Observation {
    epoch: NodeEpoch,
    count: HeartbeatCount,
    /// The observer's own count when `count` was first seen.
    my_count_then: HeartbeatCount,
}

/// What one node has seen of the others.
#[derive(Debug, Clone, Default)]
pub struct Liveness {
    me: Option<(NodeId, NodeEpoch)>,
    seen: BTreeMap<NodeId, Observation>,
}

/// A node that has been silent for a number of the observer's heartbeats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Silence {
    pub node: NodeId,
    pub epoch: NodeEpoch,
    pub count: HeartbeatCount,
    pub observer_heartbeats: u64,
}

impl Liveness {
    /// Update after applying an entry. `me` is the observer's incarnation.
    pub fn observe(&mut self, view: &View, me: Option<(&NodeId, NodeEpoch)>) {
        let me = me.map(|(n, e)| (n.clone(), e));
        if me != self.me {
            // A new incarnation starts with no observations: it waits a full
            // timeout before judging anyone.
            self.me = me;
            self.seen.clear();
        }
        let Some((my_id, my_epoch)) = &self.me else { return };
        let my_count = match view.nodes.get(my_id) {
            Some(r) if r.epoch == *my_epoch => r.heartbeats,
            _ => return,
        };
        for (id, row) in &view.nodes {
            if id == my_id {
                continue;
            }
            let fresh = Observation {
                epoch: row.epoch,
                count: row.heartbeats,
                my_count_then: my_count,
            };
            match self.seen.get(id) {
                Some(o) if o.epoch == row.epoch && o.count == row.heartbeats => {}
                _ => {
                    self.seen.insert(id.clone(), fresh);
                }
            }
        }
        self.seen.retain(|id, _| view.nodes.contains_key(id));
    }

    /// Every other node at its current epoch, with how long it has been silent.
    pub fn silences(&self, view: &View) -> Vec<Silence> {
        let Some((my_id, my_epoch)) = &self.me else {
            return Vec::new();
        };
        let Some(my_count) = view
            .nodes
            .get(my_id)
            .filter(|r| r.epoch == *my_epoch)
            .map(|r| r.heartbeats)
        else {
            return Vec::new();
        };
        self.seen
            .iter()
            .filter_map(|(id, o)| {
                let row = view.nodes.get(id)?;
                (row.epoch == o.epoch && row.heartbeats == o.count).then(|| Silence {
                    node: id.clone(),
                    epoch: o.epoch,
                    count: o.count,
                    observer_heartbeats: my_count.0.saturating_sub(o.my_count_then.0),
                })
            })
            .collect()
    }

    pub fn silence_of(&self, view: &View, node: &NodeId) -> Option<Silence> {
        self.silences(view).into_iter().find(|s| &s.node == node)
    }
}

/// `ceil(timeout / interval)`: how many heartbeats make a timeout.
pub fn heartbeats_for(timeout_sec: u64, interval_sec: u64) -> u64 {
    timeout_sec.div_ceil(interval_sec.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::LogIndex;
    use crate::meta::{Command, Proposer};

    struct Cluster {
        view: View,
    }

    impl Cluster {
        fn apply(&mut self, node: &str, epoch: Option<u64>, cmd: Command) {
            let p = Proposer {
                node: NodeId::new(node),
                epoch: epoch.map(NodeEpoch),
            };
            let i = LogIndex(self.view.applied.0 + 1);
            self.view.apply_entry(i, &p, &[cmd]);
        }
        fn register(&mut self, node: &str) {
            self.apply(
                node,
                None,
                Command::RegisterNode {
                    node: NodeId::new(node),
                    http_addr: String::new(),
                    kafka_addr: String::new(),
                },
            );
        }
        fn beat(&mut self, node: &str) {
            let e = self.view.nodes[&NodeId::new(node)].epoch;
            self.apply(
                node,
                Some(e.0),
                Command::Heartbeat {
                    node: NodeId::new(node),
                    epoch: e,
                },
            );
        }
    }

    #[test]
    fn default_timeout_is_six_heartbeats() {
        assert_eq!(heartbeats_for(30, 5), 6);
        assert_eq!(heartbeats_for(31, 5), 7);
    }

    #[test]
    fn a_node_is_silent_for_the_observers_heartbeats_since_its_last_one() {
        let mut c = Cluster { view: View::default() };
        let mut l = Liveness::default();
        let me = NodeId::new("a");
        c.register("a");
        c.register("b");
        l.observe(&c.view, Some((&me, NodeEpoch(1))));
        c.beat("b");
        l.observe(&c.view, Some((&me, NodeEpoch(1))));
        for _ in 0..3 {
            c.beat("a");
            l.observe(&c.view, Some((&me, NodeEpoch(1))));
        }
        assert_eq!(l.silence_of(&c.view, &NodeId::new("b")).unwrap().observer_heartbeats, 3);
        c.beat("b");
        l.observe(&c.view, Some((&me, NodeEpoch(1))));
        assert_eq!(l.silence_of(&c.view, &NodeId::new("b")).unwrap().observer_heartbeats, 0);
    }

    #[test]
    fn an_observer_that_does_not_heartbeat_judges_nobody() {
        let mut c = Cluster { view: View::default() };
        let mut l = Liveness::default();
        let me = NodeId::new("a");
        c.register("a");
        c.register("b");
        l.observe(&c.view, Some((&me, NodeEpoch(1))));
        // Time passes, nothing lands: the silence does not grow.
        assert_eq!(l.silence_of(&c.view, &NodeId::new("b")).unwrap().observer_heartbeats, 0);
    }

    #[test]
    fn a_reregistered_node_restarts_its_clock() {
        let mut c = Cluster { view: View::default() };
        let mut l = Liveness::default();
        let me = NodeId::new("a");
        c.register("a");
        c.register("b");
        l.observe(&c.view, Some((&me, NodeEpoch(1))));
        c.beat("a");
        c.beat("a");
        l.observe(&c.view, Some((&me, NodeEpoch(1))));
        c.register("b");
        l.observe(&c.view, Some((&me, NodeEpoch(1))));
        let s = l.silence_of(&c.view, &NodeId::new("b")).unwrap();
        assert_eq!((s.epoch, s.observer_heartbeats), (NodeEpoch(2), 0));
    }

    #[test]
    fn a_new_observer_incarnation_forgets_what_it_saw() {
        let mut c = Cluster { view: View::default() };
        let mut l = Liveness::default();
        let me = NodeId::new("a");
        c.register("a");
        c.register("b");
        l.observe(&c.view, Some((&me, NodeEpoch(1))));
        c.beat("a");
        c.register("a");
        l.observe(&c.view, Some((&me, NodeEpoch(2))));
        assert_eq!(l.silence_of(&c.view, &NodeId::new("b")).unwrap().observer_heartbeats, 0);
    }
}
