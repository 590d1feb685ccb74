//! A node: one `sluice serve` process. It registers at a new epoch, runs its
//! control loops, and serves its open streams to the front doors through
//! the capability traits of [`crate::api`] (see `engine/`).
//!
//! Where each loop lives: [`heartbeat`] (liveness), [`reconcile`] (open and
//! drop streams as the view says), [`flusher`] (upload buffered records),
//! [`compactor`] (compact the compacted streams it owns), [`handoff`] (release a stream for a transfer or a close), [`shutdown`]
//! (clean shutdown, and stopping once fenced); the lease holder's duties are
//! in [`crate::cluster`], which reaches the node only through
//! [`crate::cluster::Context`] ([`control`]).

pub mod compactor;
mod control;
mod engine;
pub mod flusher;
mod handoff;
mod heartbeat;
pub use crate::route::peer;
mod reconcile;
mod routing;
mod shutdown;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::ids::{NodeEpoch, NodeId, StreamId};
use crate::meta::{Command, DynLog, Meta, MetaConfig, Outcome};
use crate::store::DynStore;
use crate::stream::budget::Budget;
use crate::stream::partition::OpenStream;
use crate::stream::reader::ChunkReader;
use crate::wal::{WalConfig, WalWriter};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument as _;

/// Where a node is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Ready,
    /// Clean shutdown has begun: readiness fails.
    Draining,
    /// Fenced or replaced: the node stops and exits.
    Fenced,
    /// Shutdown finished.
    Stopped,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Ready => "ready",
            Phase::Draining => "draining",
            Phase::Fenced => "fenced",
            Phase::Stopped => "shutting_down",
        }
    }
}

/// The stores a node runs on; tests inject shared in-memory ones.
#[derive(Debug, Clone)]
pub struct Backends {
    pub data: DynStore,
    pub wal: DynStore,
    pub log: DynLog,
}

impl Backends {
    pub async fn open(config: &Config) -> anyhow::Result<Self> {
        // Every request is counted by what the store holds (`store::counted`).
        // A benchmark's latency model (`store::latency`) sits below the count.
        use crate::store::latency::LatencyStore;
        use crate::store::CountedStore;
        let modelled = |store: crate::store::DynStore, seed: u64| match config.store_latency_model {
            Some(model) => LatencyStore::wrap(store, model, seed),
            None => store,
        };
        let raw_data = modelled(crate::store::open_url(&config.object_store, &config.s3).await?, 1);
        let data = CountedStore::wrap(raw_data.clone(), "data");
        let wal = CountedStore::wrap(
            modelled(crate::store::open_url(&config.wal_store, &config.s3).await?, 2),
            "wal",
        );
        let log = crate::meta::open::open_url(
            &config.metadata,
            &config.s3,
            config.dynamodb_endpoint.as_deref(),
            CountedStore::wrap(raw_data, "meta"),
        )
        .await?;
        Ok(Self { data, wal, log })
    }
}

pub struct Node {
    pub config: Config,
    pub id: NodeId,
    pub epoch: NodeEpoch,
    pub meta: Meta,
    pub backends: Backends,
    pub wal: WalWriter,
    pub budget: Arc<Budget>,
    pub reader: ChunkReader,
    /// Every reading of time on this node goes through it.
    pub clock: SharedClock,
    forwarder: crate::route::Forwarder,
    /// Proves this node's forwarded requests to its peers, and theirs to it.
    pub(crate) peer: Arc<peer::PeerKey>,
    /// Checks tokens against this node's view (`--auth on`).
    pub(crate) auth: crate::auth::Auth,
    streams: RwLock<BTreeMap<StreamId, Arc<OpenStream>>>,
    /// Streams being handed to a transfer target.
    handing_off: Mutex<std::collections::BTreeSet<StreamId>>,
    /// Kafka producer ids reserved in the metadata log, not yet handed out.
    pub(crate) producer_ids: tokio::sync::Mutex<std::ops::Range<i64>>,
    /// Whose turn it is to finish each transactional id's transaction here.
    pub(crate) txn_finishers: crate::api::FinishTurns,
    /// Set once the node is built, so control paths holding `&self` can spawn.
    me: std::sync::OnceLock<std::sync::Weak<Node>>,
    phase: watch::Sender<Phase>,
    live_reads_end: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .field("epoch", &self.epoch)
            .finish()
    }
}

impl Node {
    /// Open the stores named in `config` and start.
    pub async fn start(config: Config) -> anyhow::Result<Arc<Node>> {
        let backends = Backends::open(&config).await?;
        Self::start_with(config, backends).await
    }

    /// Register at a new epoch and start every control loop, on the real clock.
    pub async fn start_with(config: Config, backends: Backends) -> anyhow::Result<Arc<Node>> {
        Self::start_with_clock(config, backends, crate::clock::system()).await
    }

    /// [`Self::start_with`] on a given clock (tests, simulation).
    pub async fn start_with_clock(config: Config, backends: Backends, clock: SharedClock) -> anyhow::Result<Arc<Node>> {
        let id = NodeId::new(config.node_id.clone());
        let meta_config = MetaConfig {
            poll_interval: config.meta_poll,
            idle_poll_max: config.meta_idle_poll,
            request_timeout: config.metadata_request_timeout,
            ..MetaConfig::default()
        };
        let meta = Meta::open(backends.log.clone(), id.clone(), meta_config).await?;
        let register = Command::RegisterNode {
            node: id.clone(),
            http_addr: config.advertised_http_addr.clone(),
            kafka_addr: config.advertised_kafka_addr.clone(),
        };
        let epoch = match meta.propose(register).await? {
            Outcome::Registered(e) => e,
            other => anyhow::bail!("registration of node {id} was refused: {other:?}"),
        };
        meta.set_epoch(epoch);
        tracing::info!(node = %id, %epoch, "registered");
        if config.auth {
            tracing::info!("--auth on: HTTP needs bearer tokens, Kafka needs SASL/PLAIN");
        } else {
            tracing::warn!(
                "--auth off: NO AUTHENTICATION. Anyone who can reach the HTTP and Kafka ports can read, write \
                 and delete every topic. Use --auth on --admin-token-file FILE outside a laptop (docs/security.md)"
            );
        }
        let wal_config = WalConfig {
            linger: config.wal_linger,
            segment_bytes: config.wal_segment_bytes,
            max_inflight: config.wal_max_inflight,
            budget: config.wal_budget,
            latency_target: config.wal_latency_target,
        };
        let wal = WalWriter::start(backends.wal.clone(), id.clone(), epoch, wal_config);
        let peer = Arc::new(peer::PeerKey::default());
        let node = Arc::new(Node {
            budget: Arc::new(Budget::new(config.max_buffered_bytes)),
            reader: ChunkReader::new(backends.data.clone(), config.read_cache_bytes),
            forwarder: crate::route::Forwarder::new(config.tls.as_ref(), peer.clone()),
            peer,
            auth: crate::auth::Auth::new(config.admin_token.as_ref(), crate::auth::clock_from(clock.clone())),
            clock,
            config,
            id,
            epoch,
            meta,
            backends,
            wal,
            streams: RwLock::new(BTreeMap::new()),
            handing_off: Mutex::new(Default::default()),
            producer_ids: tokio::sync::Mutex::new(0..0),
            txn_finishers: Default::default(),
            me: std::sync::OnceLock::new(),
            phase: watch::channel(Phase::Ready).0,
            live_reads_end: watch::channel(false).0,
            tasks: Mutex::new(Vec::new()),
        });
        let _ = node.me.set(Arc::downgrade(&node));
        // Every log line of the control loops carries the node and its epoch.
        let span = crate::telemetry::node_span(&node.id, node.epoch);
        let loops = vec![
            tokio::spawn(heartbeat::heartbeat_loop(node.clone()).instrument(span.clone())),
            tokio::spawn(reconcile::reconcile_loop(node.clone()).instrument(span.clone())),
            tokio::spawn(crate::cluster::holder::run(node.clone()).instrument(span.clone())),
            tokio::spawn(crate::cluster::gc::run(node.clone()).instrument(span.clone())),
            tokio::spawn(flusher::run(node.clone()).instrument(span.clone())),
            tokio::spawn(compactor::run(node.clone()).instrument(span.clone())),
            tokio::spawn(flusher::truncate_loop(node.clone()).instrument(span.clone())),
            tokio::spawn(shutdown::watch_wal_fence(node.clone()).instrument(span.clone())),
            tokio::spawn({
                let (peer, store) = (node.peer.clone(), node.backends.data.clone());
                async move { peer.load(&store).await }.instrument(span)
            }),
        ];
        node.tasks.lock().unwrap().extend(loops);
        Ok(node)
    }

    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    pub fn watch_phase(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    pub fn open_stream(&self, id: StreamId) -> Option<Arc<OpenStream>> {
        self.streams.read().unwrap().get(&id).cloned()
    }

    pub fn open_streams(&self) -> Vec<Arc<OpenStream>> {
        self.streams.read().unwrap().values().cloned().collect()
    }

    /// Resolves when live reads must end.
    pub async fn live_reads_ended(&self) {
        let mut rx = self.live_reads_end.subscribe();
        let _ = rx.wait_for(|e| *e).await;
    }

    /// End long polls and subscriptions (shutdown step 3, or fencing).
    pub fn end_live_reads(&self) {
        self.live_reads_end.send_replace(true);
    }

    /// Simulate a crash in process: every loop stops at once and nothing is
    /// flushed, closed or fenced. (For tests; a real crash is `kill -9`.)
    pub fn crash(&self) {
        self.wal.stop("crashed");
        self.abort_tasks();
        self.phase.send_replace(Phase::Stopped);
        self.end_live_reads();
    }

    fn abort_tasks(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}
