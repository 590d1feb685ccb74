//! Which node coordinates a consumer group — classic or KIP-848 alike —
//! and the error a node that does not answers with. Every node computes the
//! same answer from its view of the live nodes, so a coordinator that dies
//! is replaced by the next live node without any hand-over.

use super::groups::code as gcode;
use crate::api::Services;

/// The node that coordinates `group`: the group id hashed over the sorted
/// ids of the live nodes, so every node computes the same answer from its
/// view. `None` when no node is live. (node id, kafka address)
pub fn coordinator_of(engine: &Services, group: &str) -> Option<(String, String)> {
    let nodes = engine.cluster.nodes();
    let mut live: Vec<(String, String)> = nodes
        .nodes
        .into_iter()
        .filter(|n| n.live && !n.fenced)
        .map(|n| (n.node_id, n.kafka_addr))
        .collect();
    live.sort();
    if live.is_empty() {
        return None;
    }
    let i = crc32c::crc32c(group.as_bytes()) as usize % live.len();
    Some(live.swap_remove(i))
}

/// `Ok` if this node coordinates `group`, else the error code to answer.
pub(super) fn check_coordinator(engine: &Services, group: &str) -> Result<(), i16> {
    match coordinator_of(engine, group) {
        Some((id, _)) if id == engine.cluster.ready().node_id => Ok(()),
        Some(_) => Err(gcode::NOT_COORDINATOR),
        None => Err(gcode::COORDINATOR_NOT_AVAILABLE),
    }
}
