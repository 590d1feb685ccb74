//! Retention and garbage collection, run by the lease holder every
//! `--gc-interval-sec` (see `docs/design/gc.md`).
//!
//! - **Retention**: a stream whose oldest chunks are past its topic's
//!   `retention_ms` (by the chunk's newest record timestamp, against the
//!   holder's [`Clock`](crate::clock::Clock)) or beyond its
//!   `retention_bytes` is trimmed with `TrimStream` at a chunk boundary.
//! - **Data objects**: an object under `data/` that no index entry
//!   references is a candidate; it is deleted once it has stayed
//!   unreferenced for `--gc-grace-sec` of this holder's own monotonic time
//!   (so a flush whose `CommitObjects` is still in flight is never taken, and
//!   no node's wall clock decides). A new holder starts the grace afresh.
//! - **WAL of dead incarnations**: once an incarnation is dead (fenced or
//!   replaced) and no stream is open, transferring or recovering at it, its
//!   records are all in data objects, so its segments go — but never its
//!   fence marker: a paused writer of that incarnation may still wake and
//!   create-if-absent at the marker's key, and the marker is what refuses it.
//! - **Rows of deleted streams**: a deleted stream's row has no chunks left
//!   (its objects became unreferenced when it was deleted); once it has been
//!   deleted for the same grace, by which its objects are due too, the
//!   holder proposes `DropStreams` and `apply` forgets the row, so the view
//!   and its snapshots do not grow with topic churn.
//!
//! Every run deletes at most [`MAX_DELETES_PER_RUN`] objects, and decides
//! only from the view it read after listing, so nothing referenced at that
//! index is ever deleted.

use super::Context;
use crate::ids::{NodeEpoch, NodeId, SegmentSeq, StreamId};
use crate::meta::{Command, StreamState, View};
use crate::store::{DynStore, ObjectMeta};
use crate::wal::segment::{decode_wal_object, WalObject};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hash;
use std::time::Duration;

/// Objects one run deletes at most (data and WAL together).
pub const MAX_DELETES_PER_RUN: usize = 1000;

/// A fence marker is a few hundred bytes; larger WAL objects are segments.
const FENCE_MARKER_MAX_BYTES: u64 = 1024;

/// What the holder remembers between runs (local, derived; lost on a
/// change of holder, which only restarts the grace period).
/// Times are the holder's monotonic clock readings.
#[derive(Debug, Default)]
pub struct GcState {
    last_run: Option<Duration>,
    /// Unreferenced data objects and when this holder first saw them so.
    unreferenced_since: BTreeMap<String, Duration>,
    /// Deleted streams' rows and when this holder first saw them deleted.
    deleted_since: BTreeMap<StreamId, Duration>,
}

/// What one run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GcReport {
    pub trimmed_streams: usize,
    pub rows_dropped: usize,
    pub data_deleted: usize,
    pub wal_deleted: usize,
    pub markers_kept: usize,
}

/// The collector's loop, beside the holder's tick and never inside it (a
/// run against a slow store can take many seconds, and failover must not
/// wait for it). Acts only while this node holds the lease; losing the lease
/// forgets the grace clocks, so a later term starts them afresh.
pub async fn run(ctx: std::sync::Arc<dyn Context>) {
    let node = ctx.as_ref();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut state = GcState::default();
    loop {
        tick.tick().await;
        if node.stopped() {
            return;
        }
        if !super::context::leads(node) {
            state = GcState::default();
            continue;
        }
        if let Err(e) = maybe_run(node, &mut state).await {
            tracing::warn!(error = %e, "garbage collection failed; will retry");
        }
    }
}

/// Run when `--gc-interval-sec` has passed since the last run (0 disables).
pub async fn maybe_run(node: &dyn Context, state: &mut GcState) -> anyhow::Result<()> {
    let interval = node.settings().gc_interval;
    let now = node.clock().monotonic();
    if interval.is_zero() || state.last_run.is_some_and(|t| now.saturating_sub(t) < interval) {
        return Ok(());
    }
    state.last_run = Some(now);
    let report = run_once(node, state).await?;
    if report != GcReport::default() {
        tracing::info!(
            trimmed_streams = report.trimmed_streams,
            rows_dropped = report.rows_dropped,
            data_deleted = report.data_deleted,
            wal_deleted = report.wal_deleted,
            markers_kept = report.markers_kept,
            "garbage collection"
        );
    }
    Ok(())
}

pub async fn run_once(node: &dyn Context, state: &mut GcState) -> anyhow::Result<GcReport> {
    let mut report = GcReport::default();
    let (data, wal) = node.stores();
    let grace = node.settings().gc_grace;
    let trims = retention_trims(&node.view(), node.clock().now_ms());
    if !trims.is_empty() {
        let outcomes = node.propose_all(trims).await?;
        report.trimmed_streams = outcomes.iter().filter(|o| o.is_applied()).count();
        crate::telemetry::count_n("sluice_retention_trims_total", &[], report.trimmed_streams as u64);
    }
    report.rows_dropped = drop_deleted_rows(node, state).await?;
    let mut budget = MAX_DELETES_PER_RUN;

    // List first, then read the view: anything committed before the view's
    // index is seen as referenced.
    let listed = data.list("data/").await?;
    // A view that did not catch up may miss references committed after the
    // listing; the grace period covers that, but a failed sync also says the
    // store is in trouble: delete nothing this run.
    if !node.sync(grace.min(Duration::from_secs(5))).await {
        return Ok(report);
    }
    let doomed = {
        let view = node.view();
        let unreferenced = unreferenced_data(&view, &listed);
        due_after_grace(
            &mut state.unreferenced_since,
            unreferenced,
            node.clock().monotonic(),
            grace,
        )
    };
    let deleted = concurrently(doomed.into_iter().take(budget), |key| async move {
        data.delete(&key).await?;
        Ok(Some(key))
    })
    .await;
    for key in deleted.done {
        state.unreferenced_since.remove(&key);
        report.data_deleted += 1;
    }
    if let Some(e) = deleted.error {
        return Err(e);
    }
    budget -= report.data_deleted;
    crate::telemetry::count_n(
        "sluice_gc_deleted_objects_total",
        &[("kind", "data")],
        report.data_deleted as u64,
    );

    let listed = wal.list("wal/").await?;
    let candidates: Vec<ObjectMeta> = collectable_wal(&node.view(), &listed)
        .into_values()
        .flatten()
        .take(budget)
        .collect();
    let outcome = concurrently(candidates, |o| async move {
        if o.size <= FENCE_MARKER_MAX_BYTES && !is_plain_segment(wal, &o.key).await? {
            return Ok(None); // a fence marker: kept
        }
        wal.delete(&o.key).await?;
        Ok(Some(()))
    })
    .await;
    report.wal_deleted = outcome.done.len();
    report.markers_kept = outcome.skipped;
    crate::telemetry::count_n(
        "sluice_gc_deleted_objects_total",
        &[("kind", "wal")],
        report.wal_deleted as u64,
    );
    match outcome.error {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// Requests one pass keeps in flight: a backlog of small deletes against a
/// store ~50 ms away must not take minutes.
const CONCURRENT_REQUESTS: usize = 16;

/// What [`concurrently`] got done: the results of the jobs that did
/// something, how many chose to do nothing, and the first error (after it
/// no job starts, and those in flight are dropped: a delete cut short is
/// simply retried by a later pass).
struct Concurrent<T> {
    done: Vec<T>,
    skipped: usize,
    error: Option<anyhow::Error>,
}

async fn concurrently<I, T, F, Fut>(items: I, job: F) -> Concurrent<T>
where
    I: IntoIterator,
    F: Fn(I::Item) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    use futures::StreamExt;
    let mut results = futures::stream::iter(items)
        .map(job)
        .buffer_unordered(CONCURRENT_REQUESTS);
    let mut out = Concurrent {
        done: Vec::new(),
        skipped: 0,
        error: None,
    };
    while let Some(r) = results.next().await {
        match r {
            Ok(Some(t)) => out.done.push(t),
            Ok(None) => out.skipped += 1,
            Err(e) => {
                out.error = Some(e);
                break;
            }
        }
    }
    out
}

/// Whether a small WAL object is a segment (deletable). A fence marker, an
/// object that vanished meanwhile, or one that does not decode is kept.
async fn is_plain_segment(wal: &DynStore, key: &str) -> anyhow::Result<bool> {
    let Some(bytes) = wal.get(key, None).await? else {
        return Ok(false);
    };
    Ok(match decode_wal_object(key, &bytes) {
        Ok(WalObject::Segment(_)) => true,
        Ok(WalObject::Fence(_)) => false,
        Err(e) => {
            tracing::warn!(key, error = %e, "garbage collection keeps an undecodable WAL object");
            false
        }
    })
}

/// `TrimStream` for every stream with chunks past its topic's retention.
/// Trims only at chunk boundaries and never into the unflushed tail.
pub fn retention_trims(view: &View, now_ms: i64) -> Vec<Command> {
    let mut out = Vec::new();
    for topic in view.topics.values().filter(|t| t.config.deletes()) {
        let by_time = topic.config.retention_ms.filter(|ms| *ms >= 0);
        let by_bytes = topic.config.retention_bytes.filter(|b| *b >= 0);
        if by_time.is_none() && by_bytes.is_none() {
            continue;
        }
        for (id, row) in view.topic_streams(topic) {
            if row.state == StreamState::Deleted {
                continue;
            }
            let mut kept: i64 = row.chunks.iter().map(|c| (c.byte_end - c.byte_start) as i64).sum();
            let mut new_start = row.start;
            for c in &row.chunks {
                let expired = by_time.is_some_and(|ms| c.max_timestamp < now_ms.saturating_sub(ms));
                let excess = by_bytes.is_some_and(|b| kept > b);
                if !(expired || excess) {
                    break;
                }
                kept -= (c.byte_end - c.byte_start) as i64;
                new_start = new_start.max(c.end);
            }
            if new_start > row.start {
                out.push(Command::TrimStream { stream: *id, new_start });
            }
        }
    }
    out
}

/// Keys under `data/` that no chunk of the view references.
pub fn unreferenced_data(view: &View, listed: &[ObjectMeta]) -> Vec<String> {
    let referenced: BTreeSet<&str> = view
        .streams
        .values()
        .flat_map(|r| r.chunks.iter().map(|c| c.key.as_str()))
        .collect();
    listed
        .iter()
        .filter(|o| !referenced.contains(o.key.as_str()))
        .map(|o| o.key.clone())
        .collect()
}

/// Remember when each candidate (an unreferenced key, a deleted stream) was
/// first seen so, in `since`; return those that have been candidates for at
/// least `grace`. Those no longer candidates are forgotten.
fn due_after_grace<K: Clone + Eq + Hash + Ord>(
    since: &mut BTreeMap<K, Duration>,
    candidates: Vec<K>,
    now: Duration,
    grace: Duration,
) -> Vec<K> {
    let current: BTreeSet<&K> = candidates.iter().collect();
    since.retain(|k, _| current.contains(k));
    let mut due = Vec::new();
    for key in candidates {
        let first = *since.entry(key.clone()).or_insert(now);
        if now.saturating_sub(first) >= grace {
            due.push(key);
        }
    }
    due.sort();
    due
}

/// Rows of deleted streams in the view.
pub fn deleted_rows(view: &View) -> Vec<StreamId> {
    view.streams
        .iter()
        .filter(|(_, r)| r.state == StreamState::Deleted)
        .map(|(id, _)| *id)
        .collect()
}

/// Most rows one `DropStreams` names.
const MAX_ROWS_PER_DROP: usize = 1000;

/// Propose `DropStreams` for the rows deleted for the grace period; returns
/// how many rows went.
async fn drop_deleted_rows(node: &dyn Context, state: &mut GcState) -> anyhow::Result<usize> {
    let due = due_after_grace(
        &mut state.deleted_since,
        deleted_rows(&node.view()),
        node.clock().monotonic(),
        node.settings().gc_grace,
    );
    if due.is_empty() {
        return Ok(0);
    }
    let streams: Vec<StreamId> = due.into_iter().take(MAX_ROWS_PER_DROP).collect();
    let n = streams.len();
    if !node.propose(Command::DropStreams { streams }).await?.is_applied() {
        return Ok(0);
    }
    crate::telemetry::count_n("sluice_stream_rows_dropped_total", &[], n as u64);
    Ok(n)
}

/// `wal/<node>/<epoch>/<seq>` → its incarnation and seq.
fn parse_wal_key(key: &str) -> Option<(NodeId, NodeEpoch, SegmentSeq)> {
    let rest = key.strip_prefix("wal/")?;
    let mut parts = rest.rsplitn(3, '/');
    let seq = parts.next()?.parse().ok()?;
    let epoch = parts.next()?.parse().ok()?;
    let node = parts.next()?;
    (!node.is_empty()).then(|| (NodeId::new(node), NodeEpoch(epoch), SegmentSeq(seq)))
}

/// Whether a stream state names the incarnation in any role.
fn mentions(state: &StreamState, node: &NodeId, epoch: NodeEpoch) -> bool {
    let is = |n: &NodeId, e: NodeEpoch| n == node && e == epoch;
    match state {
        StreamState::Open { node: n, node_epoch } => is(n, *node_epoch),
        StreamState::Transferring {
            from,
            from_epoch,
            to,
            to_epoch,
        } => is(from, *from_epoch) || is(to, *to_epoch),
        StreamState::Recovering {
            node: n,
            node_epoch,
            transfer_to,
        } => is(n, *node_epoch) || transfer_to.as_ref().is_some_and(|(t, e)| is(t, *e)),
        StreamState::Closed | StreamState::Deleted => false,
    }
}

/// WAL objects of incarnations whose records are all in data objects: dead
/// in the view and named by no stream. Both stay true at every later index
/// (a dead incarnation is never placed again), so a lagging view is safe. Objects are in seq order per
/// incarnation; keys that do not parse are left alone.
pub fn collectable_wal(view: &View, listed: &[ObjectMeta]) -> BTreeMap<(NodeId, NodeEpoch), Vec<ObjectMeta>> {
    let mut by_incarnation: BTreeMap<(NodeId, NodeEpoch), Vec<(SegmentSeq, ObjectMeta)>> = BTreeMap::new();
    for o in listed {
        if let Some((node, epoch, seq)) = parse_wal_key(&o.key) {
            by_incarnation.entry((node, epoch)).or_default().push((seq, o.clone()));
        }
    }
    by_incarnation
        .into_iter()
        .filter(|((node, epoch), _)| {
            // A node the view does not know yet may have just registered
            // (this view lags the log): never collect it.
            view.nodes.contains_key(node)
                && view.incarnation_dead(node, *epoch)
                && !view.streams.values().any(|r| mentions(&r.state, node, *epoch))
        })
        .map(|(k, mut objects)| {
            objects.sort_by_key(|(seq, _)| *seq);
            (k, objects.into_iter().map(|(_, o)| o).collect())
        })
        .collect()
}

#[cfg(test)]
mod tests;
