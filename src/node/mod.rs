//! A node: one `sluice serve` process. It registers at a new epoch, runs its
//! control loops (heartbeat, view reconciliation, flusher, and the lease
//! holder's duties), and serves its open streams to the front doors through
//! the capability traits of [`crate::api`] (see `engine/`).

mod engine;
pub mod flusher;
pub mod forward;
pub mod keys;
pub mod peer;

use crate::config::Config;
use crate::ids::{NodeEpoch, NodeId, Offset, StreamEpoch, StreamId};
use crate::meta::{Command, DynLog, Meta, MetaConfig, Outcome, StreamState};
use crate::store::DynStore;
use crate::stream::budget::Budget;
use crate::stream::partition::OpenStream;
use crate::stream::producers::ProducerTable;
use crate::stream::reader::ChunkReader;
use crate::wal::{WalConfig, WalWriter};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
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
        let data = crate::store::open_url(&config.object_store, &config.s3).await?;
        let wal = crate::store::open_url(&config.wal_store, &config.s3).await?;
        let log = crate::meta::log::open_url(
            &config.metadata,
            &config.s3,
            config.dynamodb_endpoint.as_deref(),
            data.clone(),
        )
        .await?;
        Ok(Self { data, wal, log })
    }
}

/// How a stream leaves this node.
#[derive(Debug, Clone, Copy)]
enum Release {
    Close,
    Transfer,
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
    forwarder: forward::Forwarder,
    /// Proves this node's forwarded requests to its peers, and theirs to it.
    pub(crate) peer: Arc<peer::PeerKey>,
    /// Checks tokens against this node's view (`--auth on`).
    pub(crate) auth: crate::auth::Auth,
    streams: RwLock<HashMap<StreamId, Arc<OpenStream>>>,
    /// Streams being handed to a transfer target.
    handing_off: Mutex<std::collections::HashSet<StreamId>>,
    /// Kafka producer ids reserved in the metadata log, not yet handed out.
    pub(crate) producer_ids: tokio::sync::Mutex<std::ops::Range<i64>>,
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

    /// Register at a new epoch and start every control loop.
    pub async fn start_with(config: Config, backends: Backends) -> anyhow::Result<Arc<Node>> {
        let id = NodeId::new(config.node_id.clone());
        let meta_config = MetaConfig {
            poll_interval: config.meta_poll,
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
        };
        let wal = WalWriter::start(backends.wal.clone(), id.clone(), epoch, wal_config);
        let peer = Arc::new(peer::PeerKey::default());
        let node = Arc::new(Node {
            budget: Arc::new(Budget::new(config.max_buffered_bytes)),
            reader: ChunkReader::new(backends.data.clone(), config.read_cache_bytes),
            forwarder: forward::Forwarder::new(config.tls.as_ref(), peer.clone()),
            peer,
            auth: crate::auth::Auth::new(config.admin_token.as_ref(), crate::auth::system_clock()),
            config,
            id,
            epoch,
            meta,
            backends,
            wal,
            streams: RwLock::new(HashMap::new()),
            handing_off: Mutex::new(Default::default()),
            producer_ids: tokio::sync::Mutex::new(0..0),
            me: std::sync::OnceLock::new(),
            phase: watch::channel(Phase::Ready).0,
            live_reads_end: watch::channel(false).0,
            tasks: Mutex::new(Vec::new()),
        });
        let _ = node.me.set(Arc::downgrade(&node));
        // Every log line of the control loops carries the node and its epoch.
        let span = crate::telemetry::node_span(&node.id, node.epoch);
        let loops = vec![
            tokio::spawn(heartbeat_loop(node.clone()).instrument(span.clone())),
            tokio::spawn(reconcile_loop(node.clone()).instrument(span.clone())),
            tokio::spawn(crate::cluster::holder::run(node.clone()).instrument(span.clone())),
            tokio::spawn(crate::cluster::gc::run(node.clone()).instrument(span.clone())),
            tokio::spawn(flusher::run(node.clone()).instrument(span.clone())),
            tokio::spawn(flusher::truncate_loop(node.clone()).instrument(span.clone())),
            tokio::spawn(watch_wal_fence(node.clone()).instrument(span.clone())),
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

    /// Stop for good because the node was fenced or replaced: nothing more
    /// is acknowledged, live reads end, and the process should exit.
    pub fn stop_fenced(&self, why: &str) {
        if self.phase() == Phase::Fenced {
            return;
        }
        tracing::warn!(node = %self.id, epoch = %self.epoch, why, "node is fenced; stopping");
        self.wal.stop(why);
        for s in self.open_streams() {
            s.stop_accepting();
        }
        self.phase.send_replace(Phase::Fenced);
        self.end_live_reads();
        self.abort_tasks();
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

    /// Open what the view says this incarnation owns; drop what it no longer does.
    fn reconcile(&self) {
        let view = self.meta.view();
        match view.nodes.get(&self.id) {
            Some(row) if row.epoch == self.epoch && !row.fenced => {}
            Some(row) if row.epoch == self.epoch => {
                drop(view);
                return self.stop_fenced("our row is fenced in the view");
            }
            _ => {
                drop(view);
                return self.stop_fenced("a newer registration replaced this incarnation");
            }
        }
        // Producer state is cloned from the view only for streams being opened.
        let opened: HashMap<StreamId, StreamEpoch> = self
            .streams
            .read()
            .unwrap()
            .iter()
            .map(|(id, s)| (*id, s.epoch))
            .collect();
        let wanted_row = |id: &StreamId, row: &crate::meta::StreamRow| {
            let producers = if opened.get(id) == Some(&row.stream_epoch) {
                ProducerTable::default()
            } else {
                row.producers.clone()
            };
            (row.stream_epoch, row.committed_end, row.topic_name.clone(), producers)
        };
        let mut wanted: HashMap<StreamId, (StreamEpoch, Offset, String, ProducerTable)> = HashMap::new();
        let mut leaving = Vec::new();
        for (id, row) in &view.streams {
            match &row.state {
                StreamState::Open { node, node_epoch } if node == &self.id && *node_epoch == self.epoch => {
                    wanted.insert(*id, wanted_row(id, row));
                }
                // Still ours while we hand it over: reads go on, appends stop.
                StreamState::Transferring { from, from_epoch, .. } if from == &self.id && *from_epoch == self.epoch => {
                    wanted.insert(*id, wanted_row(id, row));
                    leaving.push(*id);
                }
                _ => {}
            }
        }
        drop(view);
        let mut streams = self.streams.write().unwrap();
        streams.retain(|id, s| {
            let keep = wanted.get(id).is_some_and(|(e, _, _, _)| *e == s.epoch);
            if !keep {
                s.stop_accepting();
                tracing::info!(stream = %id, "stream no longer ours");
            }
            keep
        });
        for (id, (epoch, committed_end, topic, producers)) in wanted {
            let s = streams.entry(id).or_insert_with(|| {
                tracing::info!(stream = %id, stream_epoch = %epoch, %committed_end, producers = producers.len(), "opening stream");
                Arc::new(OpenStream::open(
                    id,
                    topic,
                    epoch,
                    committed_end,
                    producers,
                    self.budget.clone(),
                ))
            });
            if !leaving.contains(&id) && self.phase() == Phase::Ready && !self.handing_off.lock().unwrap().contains(&id)
            {
                s.resume_accepting();
            }
        }
        for id in leaving {
            let Some(s) = streams.get(&id).cloned() else { continue };
            if self.handing_off.lock().unwrap().insert(id) {
                if let Some(me) = self.me.get().and_then(std::sync::Weak::upgrade) {
                    tracing::info!(stream = %id, "handing stream over to its transfer target");
                    tokio::spawn(me.hand_off(s).instrument(tracing::info_span!("hand_off", stream = %id)));
                }
            }
        }
        crate::telemetry::gauge("open_streams", &[], streams.len() as f64);
    }

    /// Stop appends, wait for in-flight WAL writes and flush the tail; then
    /// the command that closes the stream or completes its transfer at its
    /// committed end.
    async fn settle_stream(
        &self,
        stream: &Arc<OpenStream>,
        timeout: Duration,
        how: Release,
    ) -> Result<Command, String> {
        stream.stop_accepting();
        let started = tokio::time::Instant::now();
        let deadline = started + timeout;
        while !stream.quiescent() {
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("stream {} still has appends in flight", stream.id));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tracing::debug!(stream = %stream.id, took = ?started.elapsed(), "release: appends quiescent");
        while stream.committed_end() < stream.high_watermark() {
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("stream {} could not be flushed in time", stream.id));
            }
            flusher::flush_now(self, std::slice::from_ref(stream)).await;
            if stream.committed_end() < stream.high_watermark() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        tracing::debug!(stream = %stream.id, took = ?started.elapsed(), "release: flushed");
        let (stream_id, stream_epoch, end) = (stream.id, stream.epoch, stream.committed_end());
        Ok(match how {
            Release::Close => Command::CloseStream {
                stream: stream_id,
                stream_epoch,
                end,
            },
            Release::Transfer => Command::CompleteTransfer {
                stream: stream_id,
                stream_epoch,
                end,
            },
        })
    }

    /// [`Self::settle_stream`], then propose its command.
    async fn release_stream(&self, stream: &Arc<OpenStream>, timeout: Duration, how: Release) -> Result<(), String> {
        let command = self.settle_stream(stream, timeout, how).await?;
        match self.meta.propose(command).await {
            Ok(Outcome::Applied) => {
                self.streams.write().unwrap().remove(&stream.id);
                Ok(())
            }
            Ok(other) => Err(format!("releasing {} was refused: {other:?}", stream.id)),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Hand a stream over to its transfer target (ownership step 2-3).
    async fn hand_off(self: Arc<Self>, stream: Arc<OpenStream>) {
        let started = tokio::time::Instant::now();
        let result = self
            .release_stream(&stream, self.config.shutdown_timeout, Release::Transfer)
            .await;
        self.handing_off.lock().unwrap().remove(&stream.id);
        match result {
            Ok(()) => {
                crate::telemetry::observe("transfer_seconds", &[], started.elapsed());
                tracing::info!(stream = %stream.id, took = ?started.elapsed(), "stream handed over");
            }
            Err(e) => {
                tracing::warn!(stream = %stream.id, error = %e, "transfer not completed");
                // A cancelled transfer gives the stream back: serve it again.
                self.reconcile();
            }
        }
    }

    /// Clean shutdown (the failover page's six steps). `stop_listeners` is
    /// step 4: it resolves once the listeners stopped and in-flight requests
    /// finished or timed out.
    pub async fn shutdown(&self, stop_listeners: impl std::future::Future<Output = ()>) {
        tracing::info!("clean shutdown: readiness fails");
        self.phase.send_replace(Phase::Draining);
        tokio::time::sleep(self.config.shutdown_drain).await;
        tracing::info!("clean shutdown: ending live reads");
        self.end_live_reads();
        let _ = tokio::time::timeout(self.config.shutdown_timeout, stop_listeners).await;
        tracing::info!("clean shutdown: closing streams");
        // Steps 5 and 6. Every stream is flushed at once; then the closes
        // and the self-fence go in one log entry, applied in that order. Were
        // the closes applied first, the lease holder could place the closed
        // streams right back on this node, the least loaded one, and they
        // would wait a tick after the fence to move again.
        let streams = self.open_streams();
        let settles = streams
            .iter()
            .map(|s| self.settle_stream(s, self.config.shutdown_timeout, Release::Close));
        let mut closing = Vec::new();
        let mut commands = Vec::new();
        for (s, settled) in streams.iter().zip(futures::future::join_all(settles).await) {
            match settled {
                Ok(close) => {
                    closing.push(s.id);
                    commands.push(close);
                }
                Err(e) => {
                    tracing::warn!(stream = %s.id, error = %e, "stream not closed cleanly; failover will recover it from the WAL")
                }
            }
        }
        commands.push(Command::FenceSelf {
            node: self.id.clone(),
            epoch: self.epoch,
        });
        match self.meta.propose_all(commands).await {
            Ok(mut outcomes) => {
                let fenced = outcomes.pop().expect("one outcome per command");
                for (id, outcome) in closing.iter().zip(outcomes) {
                    if outcome.is_applied() {
                        self.streams.write().unwrap().remove(id);
                    } else {
                        tracing::warn!(stream = %id, ?outcome, "close refused; failover will recover it from the WAL");
                    }
                }
                if fenced.is_applied() {
                    tracing::info!(
                        closed = closing.len(),
                        "clean shutdown: closed our streams and fenced ourselves"
                    );
                } else {
                    tracing::warn!(?fenced, "could not fence ourselves; the node timeout will");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not close our streams or fence ourselves; the node timeout will")
            }
        }
        self.wal.stop("node stopped");
        self.abort_tasks();
        self.phase.send_replace(Phase::Stopped);
    }
}

async fn heartbeat_loop(node: Arc<Node>) {
    let mut tick = tokio::time::interval(node.config.heartbeat_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let hb = Command::Heartbeat {
            node: node.id.clone(),
            epoch: node.epoch,
        };
        match node.meta.propose(hb).await {
            Ok(Outcome::Applied) => crate::telemetry::count("heartbeats_total", &[("outcome", "applied")]),
            Ok(Outcome::Rejected(r)) => {
                crate::telemetry::count("heartbeats_total", &[("outcome", "rejected")]);
                node.stop_fenced(&format!("heartbeat rejected: {r}"));
                return;
            }
            Ok(_) => {}
            Err(e) => {
                crate::telemetry::count("heartbeats_total", &[("outcome", "unavailable")]);
                tracing::warn!(error = %e, "heartbeat did not land");
            }
        }
    }
}

async fn reconcile_loop(node: Arc<Node>) {
    let mut applied = node.meta.subscribe();
    loop {
        node.reconcile();
        if node.phase() == Phase::Fenced || applied.changed().await.is_err() {
            return;
        }
    }
}

async fn watch_wal_fence(node: Arc<Node>) {
    let mut fenced = node.wal.fenced();
    if fenced.wait_for(|f| *f).await.is_ok() && node.phase() == Phase::Ready {
        node.stop_fenced("our WAL was taken over");
    }
}
