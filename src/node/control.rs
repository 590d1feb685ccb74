//! The node as its control loops see it: [`Context`] over its metadata
//! client, stores, clock and configuration.

use super::{Node, Phase};
use crate::clock::Clock;
use crate::cluster::{Context, Settings};
use crate::ids::{LogIndex, NodeEpoch, NodeId};
use crate::meta::liveness::Liveness;
use crate::meta::{Command, MetaError, Outcome, View};
use crate::store::DynStore;
use async_trait::async_trait;
use std::sync::RwLockReadGuard;
use std::time::Duration;
use tokio::sync::watch;

#[async_trait]
impl Context for Node {
    fn me(&self) -> (NodeId, NodeEpoch) {
        (self.id.clone(), self.epoch)
    }

    fn view(&self) -> RwLockReadGuard<'_, View> {
        self.meta.view()
    }

    fn liveness(&self) -> Liveness {
        self.meta.liveness()
    }

    fn subscribe(&self) -> watch::Receiver<LogIndex> {
        self.meta.subscribe()
    }

    async fn propose(&self, command: Command) -> Result<Outcome, MetaError> {
        self.meta.propose(command).await
    }

    async fn propose_all(&self, commands: Vec<Command>) -> Result<Vec<Outcome>, MetaError> {
        self.meta.propose_all(commands).await
    }

    async fn sync(&self, timeout: Duration) -> bool {
        self.meta.sync(timeout).await
    }

    async fn snapshot_and_truncate(&self) -> Result<LogIndex, MetaError> {
        self.meta.snapshot_and_truncate().await
    }

    fn stores(&self) -> (&DynStore, &DynStore) {
        (&self.backends.data, &self.backends.wal)
    }

    fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }

    fn settings(&self) -> Settings {
        let c = &self.config;
        Settings {
            node_timeout_heartbeats: c.node_timeout_heartbeats,
            lease_timeout_heartbeats: c.lease_timeout_heartbeats,
            transfer_timeout_heartbeats: c.transfer_timeout_heartbeats,
            rebalance_threshold: c.rebalance_threshold,
            max_concurrent_transfers: c.max_concurrent_transfers,
            gc_interval: c.gc_interval,
            gc_grace: c.gc_grace,
        }
    }

    fn stopped(&self) -> bool {
        self.phase() == Phase::Fenced
    }
}
