//! What the control loops (lease holder, garbage collector, placement,
//! failover) need from the node that runs them, and nothing more: this
//! incarnation's identity, the view and its liveness observations, a way to
//! propose commands, the two stores, a clock and their settings.
//!
//! A node provides it (`node::control`); unit tests provide a fake that
//! applies proposals to a view of its own and moves a manual clock, so
//! every decision of the holder can be driven without a cluster.

use crate::clock::Clock;
use crate::ids::{LogIndex, NodeEpoch, NodeId};
use crate::meta::liveness::Liveness;
use crate::meta::{Command, MetaError, Outcome, View};
use crate::store::DynStore;
use async_trait::async_trait;
use std::sync::RwLockReadGuard;
use std::time::Duration;
use tokio::sync::watch;

/// The loops' settings, from the node's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// A node silent for this many of the holder's heartbeats is fenced.
    pub node_timeout_heartbeats: u64,
    /// A lease holder silent this long loses the lease.
    pub lease_timeout_heartbeats: u64,
    /// A transfer without progress this long is cancelled.
    pub transfer_timeout_heartbeats: u64,
    pub rebalance_threshold: usize,
    pub max_concurrent_transfers: usize,
    /// Between garbage collection runs (zero: never).
    pub gc_interval: Duration,
    /// How long an unreferenced data object or a deleted stream's row waits.
    pub gc_grace: Duration,
}

/// The node a control loop runs on, as the loop sees it.
#[async_trait]
pub trait Context: Send + Sync {
    /// This incarnation.
    fn me(&self) -> (NodeId, NodeEpoch);
    /// The current view. Never hold the guard across an `.await`.
    fn view(&self) -> RwLockReadGuard<'_, View>;
    /// What this incarnation has seen of the others' heartbeats.
    fn liveness(&self) -> Liveness;
    /// Notified every time entries are applied.
    fn subscribe(&self) -> watch::Receiver<LogIndex>;
    async fn propose(&self, command: Command) -> Result<Outcome, MetaError>;
    /// One log entry, one outcome per command.
    async fn propose_all(&self, commands: Vec<Command>) -> Result<Vec<Outcome>, MetaError>;
    /// Whether the view caught up with the log within `timeout`.
    async fn sync(&self, timeout: Duration) -> bool;
    /// Snapshot the view and truncate the log below it.
    async fn snapshot_and_truncate(&self) -> Result<LogIndex, MetaError>;
    /// The data object store and the WAL store.
    fn stores(&self) -> (&DynStore, &DynStore);
    fn clock(&self) -> &dyn Clock;
    fn settings(&self) -> Settings;
    /// The node stopped for good (fenced or replaced): the loops end.
    fn stopped(&self) -> bool;
}

/// Whether this incarnation holds the lease and is live.
pub fn leads(ctx: &dyn Context) -> bool {
    let (id, epoch) = ctx.me();
    let view = ctx.view();
    view.holds_lease(&id, epoch) && view.is_live(&id, epoch)
}
