//! A fake [`Context`] for unit tests of the control loops: proposals are
//! applied at once to a view of its own (as the log would apply them),
//! liveness is observed after every entry, stores are in memory and time is
//! a [`ManualClock`]. Other nodes act through [`FakeCluster::apply_as`].

use super::{Context, Settings};
use crate::clock::{Clock, ManualClock};
use crate::ids::{LogIndex, NodeEpoch, NodeId};
use crate::meta::liveness::Liveness;
use crate::meta::{Command, MetaError, Outcome, Proposer, View};
use crate::store::{DynStore, MemoryStore};
use async_trait::async_trait;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::time::Duration;
use tokio::sync::watch;

pub struct FakeCluster {
    me: (NodeId, NodeEpoch),
    view: RwLock<View>,
    liveness: Mutex<Liveness>,
    applied: watch::Sender<LogIndex>,
    data: DynStore,
    wal: DynStore,
    pub clock: Arc<ManualClock>,
    pub settings: Settings,
    /// Every command this node proposed, in order.
    pub proposed: Mutex<Vec<Command>>,
}

impl FakeCluster {
    /// `me` and then `others` register, in that order; the clock starts at
    /// wall time 1 000 000 ms.
    pub fn new(me: &str, others: &[&str]) -> Self {
        let settings = Settings {
            node_timeout_heartbeats: 3,
            lease_timeout_heartbeats: 2,
            transfer_timeout_heartbeats: 5,
            rebalance_threshold: 1,
            max_concurrent_transfers: 4,
            gc_interval: Duration::from_secs(1),
            gc_grace: Duration::from_secs(10),
        };
        let fake = Self {
            me: (NodeId::new(me), NodeEpoch(1)),
            view: RwLock::new(View::default()),
            liveness: Mutex::new(Liveness::default()),
            applied: watch::channel(LogIndex::default()).0,
            data: Arc::new(MemoryStore::new()),
            wal: Arc::new(MemoryStore::new()),
            clock: ManualClock::at(1_000_000),
            settings,
            proposed: Mutex::new(Vec::new()),
        };
        for n in std::iter::once(me).chain(others.iter().copied()) {
            let out = fake.apply_as(
                n,
                Command::RegisterNode {
                    node: NodeId::new(n),
                    http_addr: String::new(),
                    kafka_addr: String::new(),
                },
            );
            assert!(matches!(out, Outcome::Registered(_)), "{out:?}");
        }
        fake
    }

    /// Apply one entry proposed by `node` at its current epoch.
    pub fn apply_as(&self, node: &str, command: Command) -> Outcome {
        let epoch = self.view().nodes.get(&NodeId::new(node)).map(|r| r.epoch);
        let proposer = Proposer {
            node: NodeId::new(node),
            epoch,
        };
        self.apply(&proposer, vec![command]).remove(0)
    }

    /// `node` heartbeats once.
    pub fn heartbeat(&self, node: &str) {
        let epoch = self.view().nodes[&NodeId::new(node)].epoch;
        let out = self.apply_as(
            node,
            Command::Heartbeat {
                node: NodeId::new(node),
                epoch,
            },
        );
        assert_eq!(out, Outcome::Applied);
    }

    /// Change the view directly (test setup only: rows no command makes).
    pub fn edit(&self, f: impl FnOnce(&mut View)) {
        f(&mut self.view.write().unwrap());
    }

    /// Names of the commands this node proposed, in order.
    pub fn proposed_names(&self) -> Vec<&'static str> {
        self.proposed.lock().unwrap().iter().map(Command::name).collect()
    }

    fn apply(&self, proposer: &Proposer, commands: Vec<Command>) -> Vec<Outcome> {
        let mut view = self.view.write().unwrap();
        let index = view.applied.next();
        let outcomes = view.apply_entry(index, proposer, &commands);
        let me = (&self.me.0, self.me.1);
        self.liveness.lock().unwrap().observe(&view, Some(me));
        self.applied.send_replace(index);
        outcomes
    }
}

#[async_trait]
impl Context for FakeCluster {
    fn me(&self) -> (NodeId, NodeEpoch) {
        self.me.clone()
    }

    fn view(&self) -> RwLockReadGuard<'_, View> {
        self.view.read().unwrap()
    }

    fn liveness(&self) -> Liveness {
        self.liveness.lock().unwrap().clone()
    }

    fn subscribe(&self) -> watch::Receiver<LogIndex> {
        self.applied.subscribe()
    }

    async fn propose(&self, command: Command) -> Result<Outcome, MetaError> {
        Ok(self.propose_all(vec![command]).await?.remove(0))
    }

    async fn propose_all(&self, commands: Vec<Command>) -> Result<Vec<Outcome>, MetaError> {
        self.proposed.lock().unwrap().extend(commands.iter().cloned());
        let proposer = Proposer {
            node: self.me.0.clone(),
            epoch: Some(self.me.1),
        };
        Ok(self.apply(&proposer, commands))
    }

    async fn sync(&self, _timeout: Duration) -> bool {
        true
    }

    async fn snapshot_and_truncate(&self) -> Result<LogIndex, MetaError> {
        Ok(self.view().applied)
    }

    fn stores(&self) -> (&DynStore, &DynStore) {
        (&self.data, &self.wal)
    }

    fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }

    fn settings(&self) -> Settings {
        self.settings
    }

    fn stopped(&self) -> bool {
        let (id, epoch) = &self.me;
        !self.view().is_live(id, *epoch)
    }
}
