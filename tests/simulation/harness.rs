//! The simulated cluster: three in-process nodes on shared in-memory stores,
//! each behind its own fault-injecting connections, a supervisor that
//! restarts stopped nodes, the fault schedule, and the clients.

use super::history::{check_final, History, Origin, MARKER};
use super::kv_history::KvHistory;
use super::recording::{RecordingStore, WalLedger};
use super::schedule::{self, Event, Fault, Target, NODES};
use super::trace::Trace;
use super::txn_history::{check_final_txns, outcome_counts, TxnHistory};
use crate::support;
use crate::support::linearizable::{self, Append, FinalLog, Outcome, Read};
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use sluice::api::{ErrorCode, ReadFrom, ReadRequest, ReadResult, Records, Topics};
use sluice::batch::Record;
use sluice::ids::{Offset, StreamId, TopicId};
use sluice::meta::store_log::StoreLog;
use sluice::meta::StreamState;
use sluice::node::{Backends, Node, Phase};
use sluice::store::{FaultConfig, FaultStats, FaultyStore, MemoryStore};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, timeout, Instant};

#[path = "transactions.rs"]
mod transactions;

#[path = "compaction.rs"]
mod compaction;

pub const TOPIC: &str = "sim";
pub const PARTITIONS: u32 = 6;
const PRODUCERS: usize = 3;
const READERS: usize = 2;
/// Simulated time the fault schedule and the workload run for.
pub const SCHEDULE_LENGTH: Duration = Duration::from_secs(60);
/// A client gives up on an append after this long: the outcome is unknown.
const APPEND_TIMEOUT: Duration = Duration::from_secs(3);
/// Simulated time allowed, after healing, for every stream to be open again.
const HEAL_TIMEOUT: Duration = Duration::from_secs(120);
/// Flags on top of `support::config` (heartbeat 1 s, node timeout 4 s):
/// frequent flushes so reads also come from data objects, and garbage
/// collection every 3 s (a 20 s grace for unreferenced data objects) so it
/// runs alongside takeovers, zombies and faults.
const FLAGS: &[&str] = &[
    "--flush-interval-sec",
    "2",
    "--gc-interval-sec",
    "3",
    "--gc-grace-sec",
    "20",
    "--compaction-interval-sec",
    "2",
];

/// One partition's appends and strong reads, for the linearizability check.
type LinPartition = (Vec<Append>, Vec<Read>);

/// Wall time in the simulation: 2026-01-01T00:00:00Z when the seed starts,
/// moving with simulated time, so that record timestamps and data-object
/// names are a function of the seed.
#[derive(Debug)]
struct SimWallClock {
    origin: Instant,
}

impl sluice::clock::Clock for SimWallClock {
    fn now_ms(&self) -> i64 {
        1_767_225_600_000 + self.origin.elapsed().as_millis() as i64
    }

    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// One node id: its connections to the shared stores (kept across restarts,
/// so a partition outlives a crash) and its current incarnation.
pub struct Slot {
    pub id: String,
    pub data: FaultyStore,
    pub wal: FaultyStore,
    pub log: FaultyStore,
    backends: Backends,
    state: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    /// The running incarnation.
    node: Option<Arc<Node>>,
    /// An incarnation in a clean shutdown.
    stopping: Option<Arc<Node>>,
    starting: bool,
    /// When the supervisor may start a new incarnation (`None`: not yet).
    restart_at: Option<Instant>,
}

impl Slot {
    fn stores(&self, target: Target) -> Vec<&FaultyStore> {
        match target {
            Target::Data => vec![&self.data],
            Target::Wal => vec![&self.wal],
            Target::Meta => vec![&self.log],
            Target::All => vec![&self.data, &self.wal, &self.log],
        }
    }
}

/// Replace a connection's faults, keeping whether it is partitioned.
fn configure(store: &FaultyStore, config: FaultConfig) {
    let unavailable = store.config().unavailable;
    store.set_config(FaultConfig { unavailable, ..config });
}

/// What one seed did and found.
#[derive(Debug, Default)]
pub struct SeedReport {
    /// The known bug whose signature the seed's only failure (a hang) has.
    pub known_bug: Option<&'static str>,
    pub counts: BTreeMap<String, u64>,
    pub acked: u64,
    pub violations: Vec<String>,
    pub trace: Vec<String>,
    /// The hash of the seed's trace (see `trace.rs`) and its event count.
    pub trace_hash: u64,
    pub trace_events: u64,
    /// The trace's events, when `SLUICE_SIM_TRACE_DIR` asks for them.
    pub trace_lines: Option<Vec<String>>,
}

pub struct Sim {
    pub seed: u64,
    t0: Instant,
    slots: Vec<Slot>,
    history: Mutex<History>,
    txns: Mutex<TxnHistory>,
    counts: Mutex<BTreeMap<String, u64>>,
    trace: Mutex<Vec<String>>,
    /// Every store operation and harness line, hashed (bit-exactness).
    tracer: Arc<Trace>,
    /// Appends and strong reads of the plain topic, per partition, with
    /// their invocation and completion ticks, for the linearizability check.
    lin: Mutex<BTreeMap<u32, LinPartition>>,
    /// The real-time order of those events (the seed runs on one thread).
    ticks: std::sync::atomic::AtomicU64,
    /// Wall time for the nodes: a fixed instant plus simulated time.
    clock: sluice::clock::SharedClock,
    ledger: Arc<Mutex<WalLedger>>,
    /// The shared data and WAL store, without faults, to inspect the truth.
    shared_data: RecordingStore,
    stop: AtomicBool,
    topic: OnceLock<TopicId>,
    /// The compacted topic ([`compaction::KV_TOPIC`]) and its history.
    kv_topic: OnceLock<TopicId>,
    kv: Mutex<KvHistory>,
    health: Mutex<Health>,
    /// Set when a hang shows the signature of a known bug in `src/`.
    known_bug: Mutex<Option<&'static str>>,
    verbose: bool,
    /// The highest metadata log index any incarnation was seen to have
    /// applied (noted whenever the running nodes are listed).
    most_applied: std::sync::atomic::AtomicU64,
}

/// The signature of the takeover bug: a dead incarnation's WAL holds more
/// than one fence marker, and its streams stay recovering.
pub const TAKEOVER_SECOND_MARKER: &str = "takeover-second-fence-marker";

/// Until when each node is out of service (or under a fault configuration)
/// because of the schedule; keeps one node healthy nearly all the time.
struct Health {
    impaired_until: [Instant; NODES],
    configured_until: [Instant; NODES],
}

fn millis(rng: &mut SmallRng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.random_range(lo..=hi))
}

impl Sim {
    fn new(seed: u64, rng: &mut SmallRng) -> Self {
        let tracer = Arc::new(Trace::new(std::env::var_os("SLUICE_SIM_TRACE_DIR").is_some()));
        let shared_data = RecordingStore::traced(Arc::new(MemoryStore::new()), tracer.clone());
        let ledger = shared_data.ledger();
        let shared_meta = Arc::new(RecordingStore::traced(Arc::new(MemoryStore::new()), tracer.clone()));
        let slots = (1..=NODES)
            .map(|i| {
                let faulty = |inner: sluice::store::DynStore, rng: &mut SmallRng| {
                    FaultyStore::new(
                        inner,
                        FaultConfig {
                            seed: rng.random(),
                            ..FaultConfig::default()
                        },
                    )
                };
                let data = faulty(Arc::new(shared_data.clone()), rng);
                let wal = faulty(Arc::new(shared_data.clone()), rng);
                let log = faulty(shared_meta.clone(), rng);
                let backends = Backends {
                    data: Arc::new(data.clone()),
                    wal: Arc::new(wal.clone()),
                    log: Arc::new(StoreLog::new(Arc::new(log.clone()), "meta/")),
                };
                Slot {
                    id: format!("n{i}"),
                    data,
                    wal,
                    log,
                    backends,
                    state: Mutex::new(SlotState {
                        restart_at: Some(Instant::now()),
                        ..SlotState::default()
                    }),
                }
            })
            .collect();
        Self {
            seed,
            t0: Instant::now(),
            slots,
            history: Mutex::default(),
            txns: Mutex::default(),
            counts: Mutex::default(),
            trace: Mutex::default(),
            tracer,
            clock: Arc::new(SimWallClock { origin: Instant::now() }),
            lin: Mutex::default(),
            ticks: std::sync::atomic::AtomicU64::new(1),
            ledger,
            shared_data,
            stop: AtomicBool::new(false),
            topic: OnceLock::new(),
            kv_topic: OnceLock::new(),
            kv: Mutex::default(),
            health: Mutex::new(Health {
                impaired_until: [Instant::now(); NODES],
                configured_until: [Instant::now(); NODES],
            }),
            known_bug: Mutex::new(None),
            most_applied: std::sync::atomic::AtomicU64::new(0),
            verbose: std::env::var_os("SLUICE_SIM_VERBOSE").is_some(),
        }
    }

    fn ms(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    fn log(&self, line: impl AsRef<str>) {
        let line = format!("{:>7} ms  {}", self.ms(), line.as_ref());
        self.tracer.event(format_args!("harness {line}"));
        if self.verbose {
            eprintln!("seed {}: {line}", self.seed);
        }
        self.trace.lock().unwrap().push(line);
    }

    /// The next instant of the linearizability history's clock.
    fn tick(&self) -> u64 {
        self.ticks.fetch_add(1, Ordering::Relaxed)
    }

    fn count(&self, key: impl Into<String>) {
        self.count_n(key, 1);
    }

    fn count_n(&self, key: impl Into<String>, n: u64) {
        *self.counts.lock().unwrap().entry(key.into()).or_default() += n;
    }

    fn violation(&self, v: String) {
        self.log(format!("VIOLATION {v}"));
        self.history.lock().unwrap().violations.push(v);
    }

    fn origin(&self, what: String) -> Origin {
        Origin { what, at_ms: self.ms() }
    }

    fn stream(&self, partition: u32) -> StreamId {
        StreamId::new(*self.topic.get().expect("topic created"), partition)
    }

    fn kv_stream(&self, partition: u32) -> StreamId {
        StreamId::new(*self.kv_topic.get().expect("compacted topic created"), partition)
    }

    /// Running incarnations that still consider themselves ready.
    fn running(&self) -> Vec<Arc<Node>> {
        let nodes: Vec<Arc<Node>> = self
            .slots
            .iter()
            .filter_map(|s| s.state.lock().unwrap().node.clone())
            .collect();
        for n in &nodes {
            self.most_applied
                .fetch_max(n.meta.applied().0, std::sync::atomic::Ordering::Relaxed);
        }
        nodes.into_iter().filter(|n| n.phase() == Phase::Ready).collect()
    }

    fn slot_of(&self, id: &str) -> Option<&Slot> {
        self.slots.iter().find(|s| s.id == id)
    }

    /// The running incarnation `via`'s view names as the owner of `partition`.
    fn owner_per(&self, via: &Node, partition: u32) -> Option<Arc<Node>> {
        self.owner_of(via, self.stream(partition))
    }

    /// The running incarnation `via`'s view names as the owner of stream `id`.
    fn owner_of(&self, via: &Node, id: StreamId) -> Option<Arc<Node>> {
        let state = via.meta.view().streams.get(&id)?.state.clone();
        let StreamState::Open { node, node_epoch } = state else {
            return None;
        };
        let current = self.slot_of(node.as_str())?.state.lock().unwrap().node.clone()?;
        (current.epoch == node_epoch).then_some(current)
    }

    /// A node to send a request for `partition` to: with probability
    /// `owner_bias` the owner as a random node's view has it, otherwise
    /// (or if there is no such owner) that random node.
    fn pick_node(&self, rng: &mut SmallRng, partition: u32, owner_bias: f64) -> Option<Arc<Node>> {
        self.pick_node_for(rng, self.stream(partition), owner_bias)
    }

    /// [`Sim::pick_node`] for stream `id`.
    fn pick_node_for(&self, rng: &mut SmallRng, id: StreamId, owner_bias: f64) -> Option<Arc<Node>> {
        let running = self.running();
        if running.is_empty() {
            return None;
        }
        let via = running[rng.random_range(0..running.len())].clone();
        if rng.random_bool(owner_bias) {
            if let Some(owner) = self.owner_of(&via, id) {
                return Some(owner);
            }
        }
        Some(via)
    }

    /// The owner of `partition` that has the stream open and agrees it owns
    /// it, as the most advanced view among the running nodes has it. A
    /// zombie (fenced, but its view stalled before it learned so) also
    /// agrees with itself that it owns the stream, and keeps serving it
    /// from its stale view as the failover design allows during metadata
    /// outages; its answers are a stale prefix, not the stream's state.
    /// When every node with a newer view is down, the newest running view
    /// is older than one seen before, and nobody counts as settled (seed
    /// 444: a stalled zombie, the only node left running, agreed with itself
    /// and served a last stable offset below one its successor had served).
    fn settled_owner(&self, partition: u32) -> Option<Arc<Node>> {
        self.settled_owner_of(self.stream(partition))
    }

    /// [`Sim::settled_owner`] for stream `id`.
    fn settled_owner_of(&self, id: StreamId) -> Option<Arc<Node>> {
        let running = self.running();
        let newest = running.iter().max_by_key(|n| n.meta.applied())?;
        if newest.meta.applied().0 < self.most_applied.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let owns = |n: &Node, view: &sluice::meta::View| {
            matches!(view.streams.get(&id).map(|r| &r.state),
                Some(StreamState::Open { node, node_epoch }) if *node == n.id && *node_epoch == n.epoch)
        };
        running
            .iter()
            .find(|n| n.open_stream(id).is_some() && owns(n, &n.meta.view()) && owns(n, &newest.meta.view()))
            .cloned()
    }
}

// ---------------------------------------------------------------- supervisor

/// Starts every slot whose restart time has come, and notices incarnations
/// that stopped because they were fenced (a real supervisor restarts the
/// process when it exits).
async fn supervisor(sim: Arc<Sim>, mut rng: SmallRng) {
    loop {
        for i in 0..NODES {
            let slot = &sim.slots[i];
            let mut st = slot.state.lock().unwrap();
            if let Some(node) = st.node.clone() {
                if node.phase() == Phase::Fenced {
                    let delay = millis(&mut rng, 300, 3_000);
                    sim.log(format!(
                        "{} {} stopped itself (fenced); supervisor restarts it in {} ms",
                        node.id,
                        node.epoch,
                        delay.as_millis()
                    ));
                    sim.count("node: fenced and stopped itself");
                    st.node = None;
                    st.restart_at = Some(Instant::now() + delay);
                }
            } else if !st.starting && st.restart_at.is_some_and(|t| t <= Instant::now()) {
                st.starting = true;
                tokio::spawn(start(sim.clone(), i));
            }
        }
        sleep(Duration::from_millis(100)).await;
    }
}

async fn start(sim: Arc<Sim>, i: usize) {
    let slot = &sim.slots[i];
    let result = Node::start_with_clock(
        support::config(&slot.id, FLAGS),
        slot.backends.clone(),
        sim.clock.clone(),
    )
    .await;
    let mut st = slot.state.lock().unwrap();
    st.starting = false;
    match result {
        Ok(node) => {
            sim.log(format!("{} started at {}", node.id, node.epoch));
            sim.count("node: started");
            st.node = Some(node);
            st.restart_at = None;
        }
        Err(e) => {
            sim.log(format!("{} failed to start: {e:#}", slot.id));
            sim.count("node: start failed");
            st.restart_at = Some(Instant::now() + Duration::from_secs(1));
        }
    }
}

// ---------------------------------------------------------------- faults

/// The node `ev` hits, chosen when it fires. A disruptive fault only hits an
/// unimpaired node while another node is unimpaired too, so at most two
/// nodes are out of service at once; a fault that replaces a node's fault
/// configuration waits for the previous one to end. Nodes owning more
/// streams are likelier targets (weight 1 + 3 per open stream).
fn resolve(sim: &Sim, ev: &Event) -> Option<usize> {
    let now = Instant::now();
    let load: Vec<u64> = sim
        .slots
        .iter()
        .map(|s| {
            s.state
                .lock()
                .unwrap()
                .node
                .as_ref()
                .map_or(0, |n| n.open_streams().len() as u64)
        })
        .collect();
    let mut health = sim.health.lock().unwrap();
    let free = |n: usize| health.impaired_until[n] <= now;
    let eligible: Vec<usize> = (0..NODES)
        .filter(|&n| !ev.fault.disruptive() || (free(n) && (0..NODES).any(|m| m != n && free(m))))
        .filter(|&n| !ev.fault.configures() || health.configured_until[n] <= now)
        .collect();
    let total: u64 = eligible.iter().map(|&n| 1 + 3 * load[n]).sum();
    if total == 0 {
        return None;
    }
    let mut x = ev.pick % total;
    let node = *eligible.iter().find(|&&n| {
        let w = 1 + 3 * load[n];
        if x < w {
            return true;
        }
        x -= w;
        false
    })?;
    let end = now + ev.fault.duration();
    if ev.fault.disruptive() {
        health.impaired_until[node] = end + ev.fault.recovery();
    }
    if ev.fault.configures() {
        health.configured_until[node] = end + Duration::from_millis(1);
    }
    Some(node)
}

async fn run_event(sim: Arc<Sim>, start: Instant, index: usize, ev: Event) {
    sleep_until(start + ev.at).await;
    let kind = ev.fault.kind();
    let Some(node) = resolve(&sim, &ev) else {
        sim.count(format!("fault skipped (no eligible node): {kind}"));
        return sim.log(format!("fault: {kind} skipped: no node may take it now"));
    };
    let slot = &sim.slots[node];
    sim.count(format!("fault: {kind}"));
    match ev.fault {
        Fault::Crash { down } => {
            let node = {
                let mut st = slot.state.lock().unwrap();
                let node = st.node.take();
                if node.is_some() {
                    st.restart_at = Some(Instant::now() + down);
                }
                node
            };
            match node {
                Some(node) => {
                    node.crash();
                    sim.log(format!(
                        "fault: crash {} {}; restart in {} ms",
                        node.id,
                        node.epoch,
                        down.as_millis()
                    ));
                }
                None => sim.log(format!("fault: crash {} skipped: not running", slot.id)),
            }
        }
        Fault::Shutdown { down } => {
            let node = {
                let mut st = slot.state.lock().unwrap();
                let node = st.node.take();
                if node.is_some() {
                    st.stopping = node.clone();
                    st.restart_at = None;
                }
                node
            };
            let Some(node) = node else {
                return sim.log(format!("fault: clean shutdown of {} skipped: not running", slot.id));
            };
            sim.log(format!("fault: clean shutdown of {} {} begins", node.id, node.epoch));
            let began = Instant::now();
            if timeout(Duration::from_secs(90), node.shutdown(async {})).await.is_err() {
                sim.violation(format!(
                    "liveness: the clean shutdown of {} {} did not finish in 90 s",
                    node.id, node.epoch
                ));
                node.crash();
            }
            sim.log(format!(
                "clean shutdown of {} {} done after {} ms; restart in {} ms",
                node.id,
                node.epoch,
                began.elapsed().as_millis(),
                down.as_millis()
            ));
            let mut st = slot.state.lock().unwrap();
            st.stopping = None;
            if st.node.is_none() && !st.starting {
                st.restart_at = Some(Instant::now() + down);
            }
        }
        Fault::MetaPartition { dur } => {
            sim.log(format!(
                "fault: {} cut from the metadata store for {} ms",
                slot.id,
                dur.as_millis()
            ));
            slot.log.set_unavailable(true);
            sleep(dur).await;
            slot.log.set_unavailable(false);
            sim.log(format!("heal: {} reaches the metadata store again", slot.id));
        }
        Fault::StorePartition { dur } => {
            sim.log(format!(
                "fault: {} cut from the object store for {} ms",
                slot.id,
                dur.as_millis()
            ));
            slot.data.set_unavailable(true);
            slot.wal.set_unavailable(true);
            sleep(dur).await;
            slot.data.set_unavailable(false);
            slot.wal.set_unavailable(false);
            sim.log(format!("heal: {} reaches the object store again", slot.id));
        }
        Fault::Stall { dur, latency_ms } => {
            sim.log(format!(
                "fault: {} stalls (every request waits {latency_ms:?} ms) for {} ms",
                slot.id,
                dur.as_millis()
            ));
            for s in slot.stores(Target::All) {
                let seed = sim.seed ^ (index as u64) << 32;
                configure(
                    s,
                    FaultConfig {
                        seed,
                        latency_ms,
                        ..FaultConfig::default()
                    },
                );
            }
            sleep(dur).await;
            for s in slot.stores(Target::All) {
                configure(s, FaultConfig::default());
            }
            sim.log(format!("heal: {} no longer stalls", slot.id));
        }
        Fault::Degrade {
            kind,
            target,
            config,
            dur,
        } => {
            sim.log(format!(
                "fault: {kind} on {}'s {target:?} connection(s) for {} ms: {config:?}",
                slot.id,
                dur.as_millis()
            ));
            for s in slot.stores(target) {
                configure(s, config.clone());
            }
            sleep(dur).await;
            for s in slot.stores(target) {
                configure(s, FaultConfig::default());
            }
            sim.log(format!("heal: {kind} on {} ends", slot.id));
        }
    }
}

// ---------------------------------------------------------------- clients

fn record(value: &Bytes, ts: u64) -> Record {
    Record {
        timestamp_ms: ts as i64,
        key: None,
        value: Some(value.clone()),
        headers: vec![],
    }
}

/// Appends small uniquely valued records through random nodes and notes
/// every acknowledgement.
async fn producer(sim: Arc<Sim>, i: usize, mut rng: SmallRng) {
    let mut k = 0u64;
    while !sim.stop.load(Ordering::Relaxed) {
        sleep(millis(&mut rng, 5, 40)).await;
        let p = rng.random_range(0..PARTITIONS);
        let Some(node) = sim.pick_node(&mut rng, p, 0.8) else {
            sim.count("append: no node running");
            continue;
        };
        let n = rng.random_range(1..=3u64);
        let values: Vec<Bytes> = (0..n)
            .map(|_| {
                k += 1;
                Bytes::from(format!("{}-producer-{i}-{k}", sim.seed))
            })
            .collect();
        let records = values.iter().map(|v| record(v, sim.ms())).collect();
        let invoked = sim.tick();
        let result = timeout(APPEND_TIMEOUT, node.append(TOPIC, p, records)).await;
        {
            let completed = sim.tick();
            let mut lin = sim.lin.lock().unwrap();
            let appends = &mut lin.entry(p).or_default().0;
            for (j, v) in values.iter().enumerate() {
                let outcome = match &result {
                    Ok(Ok(a)) => Outcome::Acked {
                        offset: a.base.0 + j as u64,
                        completed,
                    },
                    _ => Outcome::Unknown,
                };
                appends.push(Append {
                    invoked,
                    value: String::from_utf8_lossy(v).into_owned(),
                    outcome,
                });
            }
        }
        match result {
            Ok(Ok(a)) => {
                sim.count("append: ok");
                sim.count_n("append: records acknowledged", n);
                if u64::from(a.count) != n {
                    sim.violation(format!("append of {n} records acknowledged {} records", a.count));
                }
                let origin = sim.origin(format!("ack by {} {}", node.id, node.epoch));
                let mut h = sim.history.lock().unwrap();
                for (j, v) in values.into_iter().enumerate() {
                    h.ack(p, a.base.0 + j as u64, v, origin.clone());
                }
            }
            Ok(Err(e)) => {
                sim.count(format!("append: {}", e.code.as_str()));
                if e.code == ErrorCode::Internal {
                    sim.violation(format!(
                        "append to {} {} failed with an internal error: {e}",
                        node.id, node.epoch
                    ));
                }
            }
            Err(_) => sim.count("append: timed out (outcome unknown)"),
        }
    }
}

/// Reads random partitions at random offsets (and sometimes long-polls the
/// end) from the owner, and notes what it saw.
async fn reader(sim: Arc<Sim>, i: usize, mut rng: SmallRng) {
    while !sim.stop.load(Ordering::Relaxed) {
        sleep(millis(&mut rng, 10, 60)).await;
        let p = rng.random_range(0..PARTITIONS);
        let Some(node) = sim.pick_node(&mut rng, p, 0.9) else {
            sim.count("read: no node running");
            continue;
        };
        let known_end = sim.history.lock().unwrap().known_end.get(&p).copied().unwrap_or(0);
        let (from, wait) = match rng.random_range(0..20) {
            0..=1 => (ReadFrom::Start, Duration::ZERO),
            2..=4 => (ReadFrom::End, millis(&mut rng, 0, 1_500)),
            _ => (
                ReadFrom::At(Offset(rng.random_range(0..=known_end + 2))),
                Duration::ZERO,
            ),
        };
        let req = ReadRequest {
            from,
            limit: rng.random_range(1..=50),
            max_bytes: 16 << 10,
            wait,
            committed: false,
            // Reader 1 reads strongly: its reads are checked for linearizability.
            consistency: if i == 1 {
                sluice::api::Consistency::Strong
            } else {
                sluice::api::Consistency::Local
            },
        };
        let strong = req.consistency == sluice::api::Consistency::Strong;
        let invoked = sim.tick();
        match timeout(wait + Duration::from_secs(5), node.read(TOPIC, p, req)).await {
            Ok(Ok(r)) => {
                if strong {
                    let completed = sim.tick();
                    note_strong_read(
                        &sim,
                        &format!("reader {i} via {} {}", node.id, node.epoch),
                        p,
                        from,
                        &r,
                        (invoked, completed),
                    );
                }
                sim.count(if strong { "read: ok (strong)" } else { "read: ok" });
                sim.count_n("read: records", r.records.len() as u64);
                check_read(&sim, &format!("reader {i} via {} {}", node.id, node.epoch), p, from, &r);
            }
            Ok(Err(e)) => {
                sim.count(format!("read: {}", e.code.as_str()));
                if e.code == ErrorCode::Internal {
                    sim.violation(format!(
                        "read from {} {} failed with an internal error: {e}",
                        node.id, node.epoch
                    ));
                }
            }
            Err(_) => sim.count("read: timed out"),
        }
    }
}

/// Note a strong read for the linearizability check.
fn note_strong_read(sim: &Sim, who: &str, p: u32, from: ReadFrom, r: &ReadResult, (invoked, completed): (u64, u64)) {
    let from = match (from, r.records.first()) {
        (_, Some((o, _))) => o.0,
        (ReadFrom::At(o), None) => o.0,
        (ReadFrom::Start, None) => r.start_offset.0,
        (ReadFrom::End, None) => r.next_offset.0,
    };
    let records = r
        .records
        .iter()
        .filter_map(|(o, rec)| Some((o.0, String::from_utf8_lossy(&transactions::observed(rec)?).into_owned())))
        .collect();
    sim.lin.lock().unwrap().entry(p).or_default().1.push(Read {
        who: who.to_string(),
        invoked,
        completed,
        from,
        records,
        high_watermark: r.high_watermark.0,
    });
}

/// Check one read's shape and note its records.
fn check_read(sim: &Sim, who: &str, p: u32, from: ReadFrom, r: &ReadResult) {
    let mut expect = match from {
        ReadFrom::At(o) => Some(o),
        ReadFrom::Start => Some(r.start_offset),
        ReadFrom::End => None,
    };
    let origin = sim.origin(who.to_string());
    for (o, rec) in &r.records {
        if expect.is_some_and(|e| e != *o) {
            sim.violation(format!(
                "{who}: read of partition {p} from {from:?} returned offset {o} where {expect:?} was due"
            ));
        }
        if *o >= r.high_watermark {
            sim.violation(format!(
                "invariant 4 (readers never see unacknowledged data): {who} got {p}@{} at or past the high watermark {}",
                o.0, r.high_watermark.0
            ));
        }
        match transactions::observed(rec) {
            Some(v) => sim.history.lock().unwrap().note(p, o.0, &v, origin.clone()),
            None => sim.violation(format!("{who}: {p}@{} has no value", o.0)),
        }
        expect = Some(o.next());
    }
    if let Some((last, _)) = r.records.last() {
        if r.next_offset != last.next() {
            sim.violation(format!(
                "{who}: next_offset {} after a last record at {}",
                r.next_offset, last
            ));
        }
    }
}

// ---------------------------------------------------------------- the run

async fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    while !ok() {
        if Instant::now() >= deadline {
            return Err(format!(
                "hang: {what} not reached within {} s of simulated time",
                limit.as_secs()
            ));
        }
        sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

fn streams_summary(sim: &Sim) -> String {
    let Some(any) = sim.running().into_iter().next() else {
        return "no node running".into();
    };
    let view = any.meta.view();
    let nodes: Vec<String> = view
        .nodes
        .iter()
        .map(|(id, r)| format!("{id} {} hb {} fenced {}", r.epoch, r.heartbeats.0, r.fenced))
        .collect();
    let streams: Vec<String> = (0..PARTITIONS)
        .map(|p| {
            let row = view.streams.get(&sim.stream(p));
            format!("p{p}: {:?}", row.map(|r| (&r.state, r.stream_epoch, r.committed_end)))
        })
        .collect();
    format!(
        "view of {} {} at {}: nodes [{}]; lease {:?}; streams [{}]",
        any.id,
        any.epoch,
        view.applied,
        nodes.join(", "),
        view.lease.as_ref().map(|l| format!("{} {}", l.holder, l.holder_epoch)),
        streams.join(", ")
    )
}

async fn create_topic(sim: &Sim) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(node) = sim.running().into_iter().next() {
            match node.create_topic(TOPIC, PARTITIONS, Default::default()).await {
                Ok(_) => {}
                Err(e) if e.code == ErrorCode::TopicExists => {}
                Err(e) if Instant::now() < deadline => {
                    sim.log(format!("create topic: {e}"));
                }
                Err(e) => return Err(format!("setup: topic not created: {e}")),
            }
            if let Some(t) = node.meta.view().topics.get(TOPIC) {
                let _ = sim.topic.set(t.id);
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            return Err("setup: no node started".into());
        }
        sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_all_open(sim: &Sim, what: &str, limit: Duration) -> Result<(), String> {
    let all_open = || {
        (0..PARTITIONS).all(|p| sim.settled_owner(p).is_some())
            && (0..compaction::KV_PARTITIONS).all(|p| sim.settled_owner_of(sim.kv_stream(p)).is_some())
    };
    match wait_until(what, limit, all_open).await {
        Ok(()) => Ok(()),
        Err(e) => Err(format!("{e}; {}{}", streams_summary(sim), wal_diagnosis(sim).await)),
    }
}

/// For streams stuck recovering: what the dead incarnation's WAL holds
/// (its seq range and where fence markers sit).
async fn wal_diagnosis(sim: &Sim) -> String {
    use sluice::store::ObjectStore as _;
    use sluice::wal::segment::{decode_wal_object, WalObject};
    let Some(any) = sim.running().into_iter().next() else {
        return String::new();
    };
    let mut dead: Vec<(String, u64)> = any
        .meta
        .view()
        .streams
        .values()
        .filter_map(|r| match &r.state {
            StreamState::Recovering { node, node_epoch, .. } => Some((node.to_string(), node_epoch.0)),
            _ => None,
        })
        .collect();
    dead.sort();
    dead.dedup();
    let mut out = String::new();
    for (node, epoch) in dead {
        let prefix = format!("wal/{node}/{epoch}/");
        let Ok(listed) = sim.shared_data.list(&prefix).await else {
            continue;
        };
        let seqs: Vec<u64> = listed
            .iter()
            .filter_map(|o| o.key.rsplit('/').next()?.parse().ok())
            .collect();
        let mut markers: Vec<String> = Vec::new();
        for o in &listed {
            if let Ok(Some(b)) = sim.shared_data.get(&o.key, None).await {
                if let Ok(WalObject::Fence(f)) = decode_wal_object(&o.key, &b) {
                    markers.push(format!("seq {} by {} {}", f.seq.0, f.holder, f.holder_epoch));
                }
            }
        }
        if markers.len() > 1 {
            *sim.known_bug.lock().unwrap() = Some(TAKEOVER_SECOND_MARKER);
        }
        out.push_str(&format!(
            "; WAL {prefix}: {} objects, seqs {:?}..={:?}, fence markers at [{}]",
            seqs.len(),
            seqs.first(),
            seqs.last(),
            markers.join(", ")
        ));
    }
    out
}

/// After healing: one more append per partition must be acknowledged.
async fn final_append(sim: &Sim, p: u32) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    let mut attempt = 0;
    while Instant::now() < deadline {
        if let Some(node) = sim.settled_owner(p) {
            let value = final_value(sim, &format!("final-{p}"), &mut attempt, &last);
            match timeout(APPEND_TIMEOUT, node.append(TOPIC, p, vec![record(&value, sim.ms())])).await {
                Ok(Ok(a)) => {
                    let origin = sim.origin(format!("final ack by {} {}", node.id, node.epoch));
                    sim.history.lock().unwrap().ack(p, a.base.0, value, origin);
                    sim.count("append: records acknowledged");
                    return Ok(());
                }
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "timed out".into(),
            }
        }
        sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "liveness: partition {p} accepted no append within 30 s after healing (last: {last}); {}",
        streams_summary(sim)
    ))
}

/// The value of a final append's next attempt: `<seed>-<what>`, and
/// `-retry<n>` from the second attempt on. A plain append carries no
/// producer sequence, so one that timed out may still land, and sending
/// its value again could store it twice (as Kafka's non-idempotent
/// producer would): every attempt sends a value of its own, and the check
/// that no value is stored twice keeps its meaning (seed 7566).
fn final_value(sim: &Sim, what: &str, attempt: &mut u32, last: &str) -> Bytes {
    let value = match *attempt {
        0 => format!("{}-{what}", sim.seed),
        n => {
            sim.log(format!(
                "final append {what}: attempt {n} failed ({last}), again with a new value"
            ));
            format!("{}-{what}-retry{n}", sim.seed)
        }
    };
    *attempt += 1;
    Bytes::from(value)
}

/// Read a whole partition from its owner; offsets must be dense from 0.
async fn final_read(sim: &Sim, p: u32) -> Result<Vec<Bytes>, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    'attempt: while Instant::now() < deadline {
        let Some(node) = sim.settled_owner(p) else {
            sleep(Duration::from_millis(200)).await;
            continue;
        };
        sim.log(format!("final read of partition {p} from {} {}", node.id, node.epoch));
        let mut values: Vec<Bytes> = Vec::new();
        loop {
            let req = ReadRequest {
                from: ReadFrom::At(Offset(values.len() as u64)),
                limit: 1_000,
                max_bytes: usize::MAX,
                wait: Duration::ZERO,
                committed: false,
                consistency: Default::default(),
            };
            let r = match timeout(Duration::from_secs(5), node.read(TOPIC, p, req)).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    last = e.to_string();
                    sleep(Duration::from_millis(200)).await;
                    continue 'attempt;
                }
                Err(_) => {
                    last = "timed out".into();
                    continue 'attempt;
                }
            };
            if r.start_offset != Offset(0) {
                return Err(format!(
                    "partition {p} starts at {}, not 0 (nothing is ever trimmed)",
                    r.start_offset
                ));
            }
            if r.records.is_empty() {
                if r.high_watermark.0 == values.len() as u64 {
                    return Ok(values);
                }
                return Err(format!(
                    "partition {p}: empty read at {} below the high watermark {}",
                    values.len(),
                    r.high_watermark
                ));
            }
            for (o, rec) in r.records {
                if o.0 != values.len() as u64 {
                    return Err(format!(
                        "dense offsets: partition {p} has offset {o} where @{} was due",
                        values.len()
                    ));
                }
                values.push(transactions::observed(&rec).unwrap_or_default());
            }
        }
    }
    Err(format!("final read of partition {p} failed for 30 s: {last}"))
}

/// One seed: set up, run the schedule under load, heal, check.
pub async fn run_seed(seed: u64) -> SeedReport {
    let mut rng = SmallRng::seed_from_u64(seed);
    let events = schedule::draw(&mut rng, SCHEDULE_LENGTH);
    let sim = Arc::new(Sim::new(seed, &mut rng));
    let supervisor_task = tokio::spawn(supervisor(sim.clone(), SmallRng::seed_from_u64(rng.random())));
    let client_seeds: Vec<u64> = (0..PRODUCERS + READERS).map(|_| rng.random()).collect();
    // Drawn last, so that the transactional clients leave every earlier
    // draw (and so the pinned seeds' schedules) as it was.
    let txn_seeds: Vec<u64> = (0..transactions::TXN_PRODUCERS + transactions::COMMITTED_READERS)
        .map(|_| rng.random())
        .collect();
    // Drawn after those, for the same reason.
    let kv_seeds = [rng.random(), rng.random()];

    let outcome = match timeout(
        Duration::from_secs(900),
        drive(&sim, events, client_seeds, txn_seeds, kv_seeds),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(format!(
            "hang: the run did not finish within 900 s of simulated time; {}",
            streams_summary(&sim)
        )),
    };
    if let Err(e) = outcome {
        sim.violation(e);
    }

    supervisor_task.abort();
    for slot in &sim.slots {
        let st = slot.state.lock().unwrap();
        for n in st.node.iter().chain(st.stopping.iter()) {
            n.crash();
        }
    }
    let mut counts = std::mem::take(&mut *sim.counts.lock().unwrap());
    let mut injected = FaultStats::default();
    for slot in &sim.slots {
        for s in [&slot.data, &slot.wal, &slot.log] {
            let st = s.stats();
            injected.errors += st.errors;
            injected.slowdowns += st.slowdowns;
            injected.conflicts += st.conflicts;
            injected.lost_replies += st.lost_replies;
            injected.unavailable += st.unavailable;
            injected.delayed += st.delayed;
        }
    }
    for (k, v) in [
        ("injected: 500 errors", injected.errors),
        ("injected: 503 slowdowns", injected.slowdowns),
        ("injected: 409 conflicts", injected.conflicts),
        ("injected: lost replies", injected.lost_replies),
        ("injected: refused (partitioned)", injected.unavailable),
        ("injected: delayed requests", injected.delayed),
    ] {
        *counts.entry(k.to_string()).or_default() += v;
    }
    {
        let ledger = sim.ledger.lock().unwrap();
        *counts.entry("wal: segments landed".into()).or_default() += ledger.segments;
        *counts.entry("wal: fence markers".into()).or_default() += ledger.fence_markers;
        *counts.entry("gc: WAL objects deleted".into()).or_default() += ledger.wal_deleted;
        *counts.entry("gc: data objects deleted".into()).or_default() += ledger.data_deleted;
    }
    let history = std::mem::take(&mut *sim.history.lock().unwrap());
    let trace = std::mem::take(&mut *sim.trace.lock().unwrap());
    let only_a_hang = history.violations.iter().all(|v| v.starts_with("hang: after healing"));
    let known_bug = if only_a_hang && !history.violations.is_empty() {
        *sim.known_bug.lock().unwrap()
    } else {
        None
    };
    let (trace_hash, trace_events) = sim.tracer.digest();
    SeedReport {
        known_bug,
        acked: history.acked.len() as u64,
        counts,
        violations: history.violations,
        trace,
        trace_hash,
        trace_events,
        trace_lines: sim.tracer.lines(),
    }
}

async fn drive(
    sim: &Arc<Sim>,
    events: Vec<Event>,
    client_seeds: Vec<u64>,
    txn_seeds: Vec<u64>,
    kv_seeds: [u64; 2],
) -> Result<(), String> {
    create_topic(sim).await?;
    compaction::create_topic(sim).await?;
    wait_all_open(sim, "setup: every stream open", Duration::from_secs(60)).await?;
    let tickers = AbortOnDrop(tokio::spawn(transactions::tickers(sim.clone())));
    sim.log(format!("setup done; {} faults scheduled", events.len()));

    let start = Instant::now();
    let mut clients: Vec<JoinHandle<()>> = Vec::new();
    for (i, s) in client_seeds.iter().enumerate() {
        let rng = SmallRng::seed_from_u64(*s);
        clients.push(if i < PRODUCERS {
            tokio::spawn(producer(sim.clone(), i, rng))
        } else {
            tokio::spawn(reader(sim.clone(), i - PRODUCERS, rng))
        });
    }
    for (i, s) in txn_seeds.iter().enumerate() {
        let rng = SmallRng::seed_from_u64(*s);
        clients.push(if i < transactions::TXN_PRODUCERS {
            tokio::spawn(transactions::producer(sim.clone(), i, rng))
        } else {
            tokio::spawn(transactions::committed_reader(
                sim.clone(),
                i - transactions::TXN_PRODUCERS,
                rng,
            ))
        });
    }
    clients.push(tokio::spawn(compaction::producer(
        sim.clone(),
        SmallRng::seed_from_u64(kv_seeds[0]),
    )));
    clients.push(tokio::spawn(compaction::reader(
        sim.clone(),
        SmallRng::seed_from_u64(kv_seeds[1]),
    )));
    let faults: Vec<JoinHandle<()>> = events
        .into_iter()
        .enumerate()
        .map(|(i, ev)| tokio::spawn(run_event(sim.clone(), start, i, ev)))
        .collect();
    sleep_until(start + SCHEDULE_LENGTH).await;

    // Stop the clients and heal everything.
    sim.stop.store(true, Ordering::Relaxed);
    for c in clients {
        if let Err(e) = c.await {
            return Err(format!("a client task failed: {e}"));
        }
    }
    for f in &faults {
        f.abort();
    }
    for f in faults {
        let _ = f.await;
    }
    sim.log("schedule over: healing every connection and restarting stopped nodes");
    for slot in &sim.slots {
        for s in [&slot.data, &slot.wal, &slot.log] {
            s.set_config(FaultConfig::default());
        }
        let mut st = slot.state.lock().unwrap();
        if let Some(n) = st.stopping.take() {
            // A clean shutdown cut short by the end of the schedule.
            n.crash();
        }
        if st.node.is_none() && !st.starting {
            st.restart_at = Some(Instant::now());
        }
    }
    let healed = Instant::now();
    wait_all_open(sim, "after healing: every stream open on a live node", HEAL_TIMEOUT).await?;
    sim.log(format!(
        "every stream open {} ms after healing",
        healed.elapsed().as_millis()
    ));
    sim.count_n(
        "heal: ms until every stream open (sum)",
        healed.elapsed().as_millis() as u64,
    );

    for p in 0..PARTITIONS {
        final_append(sim, p).await?;
    }
    for p in 0..compaction::KV_PARTITIONS {
        compaction::final_append(sim, p).await?;
    }
    // Let anything still in flight land before the final read.
    sleep(Duration::from_secs(3)).await;
    // Every transaction ended (the coordinators time out what the clients
    // left open), so the committed read and the log's final state agree.
    let committed = transactions::final_committed(sim).await?;
    drop(tickers);
    let mut final_state = BTreeMap::new();
    for p in 0..PARTITIONS {
        final_state.insert(p, final_read(sim, p).await?);
    }
    let mut violations = check_final(&sim.history.lock().unwrap(), &final_state);
    {
        // Linearizability of the plain appends and the strong reads.
        let lin = std::mem::take(&mut *sim.lin.lock().unwrap());
        for (p, (appends, reads)) in &lin {
            let log = FinalLog {
                start: 0,
                values: final_state[p]
                    .iter()
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .collect(),
            };
            let (found, sizes) = linearizable::check(appends, reads, &log);
            sim.count_n("linearizability: appends checked", sizes.appends as u64);
            sim.count_n("linearizability: strong reads checked", sizes.reads as u64);
            violations.extend(found.iter().map(|v| format!("linearizability of partition {p}: {v}")));
        }
    }
    violations.extend(compaction::final_check(sim).await?);
    {
        let txns = sim.txns.lock().unwrap();
        let (found, kinds) = check_final_txns(&txns, &final_state, &committed, |v| v.as_ref() == MARKER);
        violations.extend(found);
        for (k, n) in outcome_counts(&txns).into_iter().chain(kinds) {
            sim.count_n(k, n);
        }
    }
    let visible: usize = committed.values().map(Vec::len).sum();
    sim.count_n("final: records visible to read_committed", visible as u64);
    {
        let ledger = sim.ledger.lock().unwrap();
        for ((stream, epoch), writers) in &ledger.writers {
            if writers.len() > 1 {
                let w: Vec<String> = writers.iter().map(|(n, e)| format!("{n} {e}")).collect();
                violations.push(format!(
                    "invariant 2 (one writer per stream epoch): stream {stream} at {epoch} was written by {}",
                    w.join(" and ")
                ));
            }
        }
        for u in &ledger.undecodable {
            violations.push(format!("an undecodable object landed in the WAL: {u}"));
        }
        for k in &ledger.markers_deleted {
            violations.push(format!("a fence marker was deleted: {k}"));
        }
    }
    let total: usize = final_state.values().map(Vec::len).sum();
    sim.log(format!("final state: {total} records in {PARTITIONS} partitions"));
    sim.count_n("final: records", total as u64);
    for v in violations {
        sim.violation(v);
    }
    Ok(())
}

/// Aborts its task when dropped (on every way out of `drive`).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
