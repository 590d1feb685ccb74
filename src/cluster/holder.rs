//! The lease and the holder's tick (once a second): liveness and fencing,
//! WAL takeover, placement, snapshots. Every node runs this loop; only the
//! one holding the lease acts, and even two overlapping holders cannot break
//! an invariant: `apply` rejects what no longer matches.

use super::{failover, placement};
use crate::ids::{HeartbeatCount, LogIndex};
use crate::meta::{Command, Outcome};
use crate::node::{Node, Phase};
use std::sync::Arc;
use std::time::Duration;

/// Entries between snapshots of the view.
const SNAPSHOT_EVERY: u64 = 1000;

pub async fn run(node: Arc<Node>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_snapshot = LogIndex::ZERO;
    // The first tick fires at once: a restarted node recovers its previous
    // incarnation without waiting.
    loop {
        tick.tick().await;
        if node.phase() == Phase::Fenced {
            return;
        }
        if let Err(e) = tick_once(&node, &mut last_snapshot).await {
            tracing::warn!(error = %e, "holder tick failed");
        }
    }
}

async fn tick_once(node: &Node, last_snapshot: &mut LogIndex) -> anyhow::Result<()> {
    if !node.meta.view().is_live(&node.id, node.epoch) {
        return Ok(()); // fenced or replaced: we are stopping
    }
    if !ensure_lease(node).await? {
        return Ok(());
    }
    let started = tokio::time::Instant::now();
    fence_silent_nodes(node).await?;
    for (dead, epoch) in failover::dead_incarnations(node) {
        if let Err(e) = failover::take_over(node, &dead, epoch).await {
            tracing::error!(node = %dead, %epoch, error = %e, "WAL takeover failed; will retry");
        }
    }
    let places = placement::plan(&node.meta.view(), 1000);
    if !places.is_empty() {
        let n = places.len();
        let outcomes = node.meta.propose_all(places).await?;
        let placed = outcomes.iter().filter(|o| o.is_applied()).count();
        tracing::info!(placed, proposed = n, "placed closed streams");
    }
    let applied = node.meta.applied();
    if applied.0 >= last_snapshot.0 + SNAPSHOT_EVERY {
        *last_snapshot = node.meta.snapshot_and_truncate().await?;
    }
    crate::telemetry::observe("holder_tick_seconds", &[], started.elapsed());
    Ok(())
}

/// Hold the lease, acquiring it when it is free or its holder has been
/// silent for a lease timeout. Returns whether we hold it.
async fn ensure_lease(node: &Node) -> anyhow::Result<bool> {
    let proposal = {
        let view = node.meta.view();
        if view.holds_lease(&node.id, node.epoch) {
            return Ok(true);
        }
        let holder = view.lease.as_ref().map(|l| (l.holder.clone(), l.holder_epoch));
        if view.lease_holder_live() {
            let (h, _) = holder.as_ref().expect("a live lease has a holder");
            match node.meta.liveness().silence_of(&view, h) {
                Some(s) if s.observer_heartbeats >= node.config.lease_timeout_heartbeats => Command::AcquireLease {
                    holder,
                    holder_count: s.count,
                },
                _ => return Ok(false),
            }
        } else {
            Command::AcquireLease {
                holder,
                holder_count: HeartbeatCount::ZERO,
            }
        }
    };
    let out = node.meta.propose(proposal).await?;
    if out == Outcome::Applied {
        crate::telemetry::count("lease_acquisitions_total", &[]);
        tracing::info!(node = %node.id, epoch = %node.epoch, "acquired the lease");
    }
    Ok(node.meta.view().holds_lease(&node.id, node.epoch))
}

/// Fence every live node that has been silent for the node timeout, as
/// counted in our own heartbeats.
async fn fence_silent_nodes(node: &Node) -> anyhow::Result<()> {
    let fences: Vec<Command> = {
        let view = node.meta.view();
        node.meta
            .liveness()
            .silences(&view)
            .into_iter()
            .filter(|s| view.is_live(&s.node, s.epoch) && s.observer_heartbeats >= node.config.node_timeout_heartbeats)
            .map(|s| Command::FenceNode {
                node: s.node,
                epoch: s.epoch,
                seen_count: s.count,
            })
            .collect()
    };
    for f in fences {
        let out = node.meta.propose(f.clone()).await?;
        tracing::warn!(command = ?f, ?out, "fenced a silent node");
        crate::telemetry::count("nodes_fenced_total", &[]);
    }
    Ok(())
}
