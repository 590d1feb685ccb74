//! The lease and the holder's tick (once a second): liveness and fencing,
//! WAL takeover, placement, Durable Streams expiry, snapshots. Every node runs this loop; only the
//! one holding the lease acts. Between ticks, a log entry that leaves the
//! lease with no live holder makes every live node try to take it at once,
//! and new closed streams are placed as soon as the holder sees them. Even
//! two overlapping holders cannot break an invariant: `apply` rejects what
//! no longer matches. Garbage collection runs beside it in a task of its own
//! (`gc::run`): deleting thousands of objects must never delay fencing a
//! silent node.

use super::{expiry, failover, placement, Context};
use crate::ids::{HeartbeatCount, LogIndex, StreamEpoch, StreamId};
use crate::meta::{Command, Outcome, StreamState};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Entries between snapshots of the view.
const SNAPSHOT_EVERY: u64 = 1000;

/// What the holder remembers between ticks (derived from the log, local).
#[derive(Default)]
pub(crate) struct HolderState {
    last_snapshot: LogIndex,
    /// Per running transfer, our own heartbeat count when we first saw it:
    /// a transfer's age is measured in our heartbeats, never wall time.
    transfers_seen: BTreeMap<(StreamId, StreamEpoch), HeartbeatCount>,
}

pub async fn run(ctx: Arc<dyn Context>) {
    let node = ctx.as_ref();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut state = HolderState::default();
    let mut applied = node.subscribe();
    // Whether new streams may be placed as soon as the log shows them
    // (reset every tick; cleared when such a placement is not all applied,
    // so a refused plan cannot feed itself).
    let mut place_early = true;
    // The first tick fires at once: a restarted node recovers its previous
    // incarnation without waiting.
    loop {
        let ticked = tokio::select! {
            _ = tick.tick() => true,
            changed = applied.changed() => {
                if changed.is_err() {
                    applied = node.subscribe();
                }
                false
            }
        };
        if node.stopped() {
            return;
        }
        if !ticked {
            if lease_vacant(node) {
                // The holder fenced itself (a clean shutdown) or was fenced:
                // take the lease and place its streams now, not a tick later.
                place_early = true;
                if let Err(e) = tick_once(node, &mut state).await {
                    tracing::warn!(error = %e, "holder tick failed");
                }
            } else if place_early {
                place_early = place_new_streams(node).await;
            }
            continue;
        }
        place_early = true;
        if let Err(e) = tick_once(node, &mut state).await {
            tracing::warn!(error = %e, "holder tick failed");
        }
    }
}

/// Whether the lease is held by no live node while this node is live: any
/// live node may take it at once.
fn lease_vacant(node: &dyn Context) -> bool {
    let (id, epoch) = node.me();
    let view = node.view();
    !view.lease_holder_live() && view.is_live(&id, epoch)
}

/// Places closed streams (a topic just created) at once rather than at the
/// next tick, when this node holds the lease. Returns whether every
/// placement proposed was applied.
async fn place_new_streams(node: &dyn Context) -> bool {
    let (id, epoch) = node.me();
    let places = {
        let view = node.view();
        if !view.holds_lease(&id, epoch) {
            return true;
        }
        placement::plan(&view, 1000)
    };
    if places.is_empty() {
        return true;
    }
    let n = places.len();
    match node.propose_all(places).await {
        Ok(outcomes) => {
            let placed = outcomes.iter().filter(|o| o.is_applied()).count();
            tracing::debug!(placed, proposed = n, "placed new streams");
            placed == n
        }
        Err(e) => {
            tracing::debug!(error = %e, "early placement failed; the next tick retries");
            false
        }
    }
}

#[tracing::instrument(level = "debug", name = "holder_tick", skip_all)]
pub(crate) async fn tick_once(node: &dyn Context, state: &mut HolderState) -> anyhow::Result<()> {
    let (id, epoch) = node.me();
    if !node.view().is_live(&id, epoch) {
        return Ok(()); // fenced or replaced: we are stopping
    }
    let holds = ensure_lease(node).await?;
    crate::telemetry::gauge("sluice_lease_holder", &[], if holds { 1.0 } else { 0.0 });
    if !holds {
        return Ok(());
    }
    let started = tokio::time::Instant::now();
    fence_silent_nodes(node).await?;
    let dead_incarnations = failover::dead_incarnations(&node.view());
    for (dead, epoch) in dead_incarnations {
        if let Err(e) = failover::take_over(node, &dead, epoch).await {
            tracing::error!(node = %dead, %epoch, error = %e, "WAL takeover failed; will retry");
        }
    }
    let places = placement::plan(&node.view(), 1000);
    if !places.is_empty() {
        let n = places.len();
        let outcomes = node.propose_all(places).await?;
        let placed = outcomes.iter().filter(|o| o.is_applied()).count();
        tracing::info!(placed, proposed = n, "placed closed streams");
    }
    supervise_transfers(node, state).await?;
    let settings = node.settings();
    let moves = placement::rebalance(
        &node.view(),
        settings.rebalance_threshold,
        settings.max_concurrent_transfers,
    );
    if !moves.is_empty() {
        let outcomes = node.propose_all(moves).await?;
        let started = outcomes.iter().filter(|o| o.is_applied()).count();
        crate::telemetry::count_n("sluice_transfers_started_total", &[], started as u64);
        tracing::info!(started, "rebalancing transfers");
    }
    expire_streams(node).await?;
    let applied = node.view().applied;
    if applied.0 >= state.last_snapshot.0 + SNAPSHOT_EVERY {
        state.last_snapshot = node.snapshot_and_truncate().await?;
    }
    crate::telemetry::observe("sluice_holder_tick_seconds", &[], started.elapsed());
    Ok(())
}

/// Cancel transfers whose target is gone or that made no progress for the
/// transfer timeout (counted in our own heartbeats).
async fn supervise_transfers(node: &dyn Context, state: &mut HolderState) -> anyhow::Result<()> {
    let (id, _) = node.me();
    let timeout = node.settings().transfer_timeout_heartbeats;
    let cancels = {
        let view = node.view();
        let my_count = view.nodes.get(&id).map_or(HeartbeatCount::ZERO, |r| r.heartbeats);
        transfers_to_cancel(&view, my_count, timeout, &mut state.transfers_seen)
    };
    if cancels.is_empty() {
        return Ok(());
    }
    let n = cancels.len();
    let outcomes = node.propose_all(cancels.clone()).await?;
    for (cancel, outcome) in cancels.iter().zip(&outcomes) {
        if let (Command::CancelTransfer { stream, stream_epoch }, true) = (cancel, outcome.is_applied()) {
            // A later transfer of the stream at the same stream epoch
            // (rebalancing may start one in this very tick) gets a timeout
            // of its own, not this one's.
            state.transfers_seen.remove(&(*stream, *stream_epoch));
        }
    }
    crate::telemetry::count_n("sluice_transfers_cancelled_total", &[], n as u64);
    tracing::warn!(
        cancelled = n,
        "cancelled transfers whose target died or that made no progress"
    );
    Ok(())
}

/// `CancelTransfer` for each running transfer whose target is not live or
/// that has run for `timeout` of our heartbeats; `seen` keeps, per running
/// transfer, our heartbeat count when we first saw it.
fn transfers_to_cancel(
    view: &crate::meta::View,
    my_count: HeartbeatCount,
    timeout: u64,
    seen: &mut BTreeMap<(StreamId, StreamEpoch), HeartbeatCount>,
) -> Vec<Command> {
    let mut running = BTreeMap::new();
    let mut cancels = Vec::new();
    for (id, row) in &view.streams {
        let StreamState::Transferring { to, to_epoch, .. } = &row.state else {
            continue;
        };
        let key = (*id, row.stream_epoch);
        let first = *seen.get(&key).unwrap_or(&my_count);
        running.insert(key, first);
        let stuck = my_count.0.saturating_sub(first.0) >= timeout;
        if !view.is_live(to, *to_epoch) || stuck {
            cancels.push(Command::CancelTransfer {
                stream: *id,
                stream_epoch: row.stream_epoch,
            });
        }
    }
    *seen = running;
    cancels
}

/// Hold the lease, acquiring it when it is free or its holder has been
/// silent for a lease timeout. Returns whether we hold it.
async fn ensure_lease(node: &dyn Context) -> anyhow::Result<bool> {
    let (id, epoch) = node.me();
    let lease_timeout = node.settings().lease_timeout_heartbeats;
    let liveness = node.liveness();
    let proposal = {
        let view = node.view();
        if view.holds_lease(&id, epoch) {
            return Ok(true);
        }
        let holder = view.lease.as_ref().map(|l| (l.holder.clone(), l.holder_epoch));
        if view.lease_holder_live() {
            let (h, _) = holder.as_ref().expect("a live lease has a holder");
            match liveness.silence_of(&view, h) {
                Some(s) if s.observer_heartbeats >= lease_timeout => Command::AcquireLease {
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
    let out = node.propose(proposal).await?;
    if out == Outcome::Applied {
        crate::telemetry::count("sluice_lease_acquisitions_total", &[]);
        tracing::info!(node = %id, %epoch, "acquired the lease");
    }
    Ok(node.view().holds_lease(&id, epoch))
}

/// Fence every live node that has been silent for the node timeout, as
/// counted in our own heartbeats.
async fn fence_silent_nodes(node: &dyn Context) -> anyhow::Result<()> {
    let timeout = node.settings().node_timeout_heartbeats;
    let liveness = node.liveness();
    let fences: Vec<Command> = {
        let view = node.view();
        liveness
            .silences(&view)
            .into_iter()
            .filter(|s| view.is_live(&s.node, s.epoch) && s.observer_heartbeats >= timeout)
            .map(|s| Command::FenceNode {
                node: s.node,
                epoch: s.epoch,
                seen_count: s.count,
            })
            .collect()
    };
    for f in fences {
        let out = node.propose(f.clone()).await?;
        tracing::warn!(command = ?f, ?out, "fenced a silent node");
        crate::telemetry::count("sluice_nodes_fenced_total", &[]);
    }
    Ok(())
}

/// Delete the Durable Streams streams whose lifetime ended by this
/// holder's clock. The reading goes into each command, so `apply` judges
/// it again against the stream as it is then (a touch in between saves it).
async fn expire_streams(node: &dyn Context) -> anyhow::Result<()> {
    let now_ms = node.clock().now_ms();
    let expiries = expiry::due(&node.view(), now_ms);
    if expiries.is_empty() {
        return Ok(());
    }
    let n = expiries.len();
    let outcomes = node.propose_all(expiries).await?;
    let expired = outcomes.iter().filter(|o| o.is_applied()).count();
    crate::telemetry::count_n("sluice_streams_expired_total", &[], expired as u64);
    tracing::info!(expired, proposed = n, "expired Durable Streams streams");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{LogIndex, NodeEpoch, NodeId, Offset, TopicId};
    use crate::meta::view::{NodeRow, StreamRow};
    use crate::meta::View;

    fn view_transferring(epoch: u64) -> View {
        let mut view = View::default();
        for n in ["a", "b"] {
            view.nodes.insert(
                NodeId::new(n),
                NodeRow {
                    epoch: NodeEpoch(1),
                    heartbeats: HeartbeatCount(0),
                    fenced: false,
                    http_addr: String::new(),
                    kafka_addr: String::new(),
                    registered_at: LogIndex(1),
                    draining: false,
                },
            );
        }
        view.streams.insert(
            StreamId::new(TopicId(1), 0),
            StreamRow {
                topic_name: "t".into(),
                state: StreamState::Transferring {
                    from: NodeId::new("a"),
                    from_epoch: NodeEpoch(1),
                    to: NodeId::new("b"),
                    to_epoch: NodeEpoch(1),
                },
                stream_epoch: StreamEpoch(epoch),
                committed_end: Offset(0),
                start: Offset(0),
                chunks: Vec::new(),
                producers: Default::default(),
                epoch_starts: Vec::new(),
                compacted_end: Offset(0),
            },
        );
        view
    }

    #[test]
    fn a_transfer_is_cancelled_after_the_timeout_and_not_before() {
        let view = view_transferring(3);
        let mut seen = BTreeMap::new();
        assert!(transfers_to_cancel(&view, HeartbeatCount(10), 5, &mut seen).is_empty());
        assert!(transfers_to_cancel(&view, HeartbeatCount(14), 5, &mut seen).is_empty());
        assert_eq!(transfers_to_cancel(&view, HeartbeatCount(15), 5, &mut seen).len(), 1);
    }

    #[test]
    fn a_transfer_restarted_at_the_same_stream_epoch_after_a_cancel_gets_a_fresh_timeout() {
        // Found on radosgw + DynamoDB Local under load: once one transfer
        // timed out, rebalancing restarted it in the same tick at the same
        // stream epoch, and every later tick cancelled it at once.
        let view = view_transferring(3);
        let mut seen = BTreeMap::new();
        transfers_to_cancel(&view, HeartbeatCount(10), 5, &mut seen);
        assert_eq!(transfers_to_cancel(&view, HeartbeatCount(15), 5, &mut seen).len(), 1);
        // The cancel applied (supervise_transfers forgets it), and a new transfer runs.
        seen.remove(&(StreamId::new(TopicId(1), 0), StreamEpoch(3)));
        assert!(transfers_to_cancel(&view, HeartbeatCount(16), 5, &mut seen).is_empty());
        assert!(transfers_to_cancel(&view, HeartbeatCount(20), 5, &mut seen).is_empty());
        assert_eq!(transfers_to_cancel(&view, HeartbeatCount(21), 5, &mut seen).len(), 1);
    }

    #[test]
    fn a_transfer_to_a_dead_target_is_cancelled_at_once() {
        let mut view = view_transferring(3);
        view.nodes.get_mut(&NodeId::new("b")).unwrap().fenced = true;
        let mut seen = BTreeMap::new();
        assert_eq!(transfers_to_cancel(&view, HeartbeatCount(10), 5, &mut seen).len(), 1);
    }
}
