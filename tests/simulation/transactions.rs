//! The simulation's transactional clients: producers that run Kafka
//! transactions through the nodes' transaction coordinator (the same
//! functions the Kafka front door calls), read_committed readers on both
//! read paths, each node's coordinator ticker, and the final committed read.

use super::*;
use crate::history::MARKER;
use crate::txn_history::{Outcome, Seen};
use sluice::api::{ApiResult, Appended, BatchRead, ByteStream, ProducerState, Services};
use sluice::batch::marker::{decode_marker, Marker};
use sluice::batch::{encode_batch, parse_batch, transactional, with_producer};
use sluice::ids::StreamEpoch;
use sluice::kafka::txn_coordinator::{self as tc, TxnTimers};
use sluice::meta::writers::{DsAppend, DsWrite};
use std::collections::HashMap;

pub const TXN_PRODUCERS: usize = 2;
pub const COMMITTED_READERS: usize = 1;
/// Short, so that transactions a fault leaves open time out within the run.
const TXN_TIMEOUT_MS: i32 = 8_000;
/// A coordinator request gives up after this long: the outcome is unknown.
const COORDINATOR_TIMEOUT: Duration = Duration::from_secs(3);
/// Kafka's NOT_COORDINATOR: ask another node.
const NOT_COORDINATOR: i16 = 16;

/// Whether `rec` is a control record: the simulation's own records never
/// have keys; a control record's key is its version (0) and type (0, 1).
pub fn is_control(rec: &Record) -> bool {
    rec.key
        .as_ref()
        .is_some_and(|k| k.len() == 4 && k[..3] == [0, 0, 0] && k[3] <= 1)
}

/// What a read's record is noted as.
pub fn observed(rec: &Record) -> Option<Bytes> {
    if is_control(rec) {
        return Some(Bytes::from_static(MARKER));
    }
    rec.value.clone()
}

/// `node`'s services for its transaction coordinator, with markers for
/// partitions another node owns (as `node`'s view has it) handed to that
/// node in process: the simulation's stand-in for the HTTP forwarding a
/// real cluster does (its sockets cannot run on simulated time).
fn coordinator_services(sim: &Arc<Sim>, node: &Arc<Node>) -> Services {
    Services {
        records: Arc::new(Forwarding {
            sim: sim.clone(),
            here: node.clone(),
        }),
        ..node.services()
    }
}

struct Forwarding {
    sim: Arc<Sim>,
    here: Arc<Node>,
}

#[async_trait::async_trait]
impl Records for Forwarding {
    async fn append(&self, topic: &str, partition: u32, records: Vec<Record>) -> ApiResult<Appended> {
        self.here.append(topic, partition, records).await
    }
    async fn read(&self, topic: &str, partition: u32, req: ReadRequest) -> ApiResult<ReadResult> {
        self.here.read(topic, partition, req).await
    }
    async fn append_durable(
        &self,
        topic: &str,
        partition: u32,
        write: DsWrite,
        records: Vec<Record>,
    ) -> ApiResult<DsAppend> {
        self.here.append_durable(topic, partition, write, records).await
    }
    async fn append_batch(&self, topic: &str, partition: u32, batch: Bytes) -> ApiResult<Appended> {
        self.here.append_batch(topic, partition, batch).await
    }
    async fn append_marker(
        &self,
        topic: &str,
        partition: u32,
        marker: Bytes,
        of: Option<sluice::api::MarkerOf>,
    ) -> ApiResult<Appended> {
        match self.sim.owner_per(&self.here, partition) {
            Some(owner) if !Arc::ptr_eq(&owner, &self.here) => owner.append_marker(topic, partition, marker, of).await,
            _ => self.here.append_marker(topic, partition, marker, of).await,
        }
    }
    async fn read_batches(
        &self,
        topic: &str,
        partition: u32,
        from: Offset,
        max_bytes: usize,
        wait: Duration,
        committed: bool,
    ) -> ApiResult<BatchRead> {
        self.here
            .read_batches(topic, partition, from, max_bytes, wait, committed)
            .await
    }
    async fn relay_subscription(
        &self,
        topic: &str,
        partition: u32,
        path_and_query: &str,
        last_event_id: Option<&str>,
    ) -> Option<ApiResult<ByteStream>> {
        self.here
            .relay_subscription(topic, partition, path_and_query, last_event_id)
            .await
    }
    async fn leader_epoch_end(&self, topic: &str, partition: u32, epoch: StreamEpoch) -> ApiResult<Offset> {
        self.here.leader_epoch_end(topic, partition, epoch).await
    }
    async fn delete_before(&self, topic: &str, partition: u32, before: Option<Offset>) -> ApiResult<Offset> {
        self.here.delete_before(topic, partition, before).await
    }
    async fn producers(&self, topic: &str, partition: u32) -> ApiResult<Vec<ProducerState>> {
        self.here.producers(topic, partition).await
    }
}

/// Run `call` on the coordinator of `id`: each running node in a random
/// order until one does not answer NOT_COORDINATOR. `None`: no node
/// answered in time (the outcome is unknown).
async fn on_coordinator<T, F, Fut>(
    sim: &Arc<Sim>,
    rng: &mut SmallRng,
    call: F,
    code_of: impl Fn(&T) -> i16,
) -> Option<T>
where
    F: Fn(Services) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut running = sim.running();
    for i in (1..running.len()).rev() {
        running.swap(i, rng.random_range(0..=i));
    }
    for node in running {
        match timeout(COORDINATOR_TIMEOUT, call(coordinator_services(sim, &node))).await {
            Ok(answer) if code_of(&answer) == NOT_COORDINATOR => continue,
            Ok(answer) => return Some(answer),
            Err(_) => return None,
        }
    }
    None
}

struct Producer {
    i: usize,
    id: String,
    /// Producer id and epoch while initialized.
    pid: Option<(i64, i16)>,
    seqs: HashMap<u32, i32>,
    n: u64,
}

impl Producer {
    async fn init(&mut self, sim: &Arc<Sim>, rng: &mut SmallRng) -> bool {
        let id = self.id.clone();
        let answer = on_coordinator(
            sim,
            rng,
            |s| {
                let id = id.clone();
                async move { tc::init(&s, &id, TXN_TIMEOUT_MS, (-1, -1), 4).await }
            },
            |a| a.0,
        )
        .await;
        match answer {
            Some((0, pid, epoch)) => {
                sim.count("txn: init ok");
                sim.log(format!("{} initialized: producer {pid} epoch {epoch}", self.id));
                self.pid = Some((pid, epoch));
                self.seqs.clear();
                true
            }
            Some((code, ..)) => {
                sim.count(format!("txn: init error {code}"));
                false
            }
            None => {
                sim.count("txn: init timed out");
                false
            }
        }
    }

    async fn add_partitions(&self, sim: &Arc<Sim>, rng: &mut SmallRng, partitions: &[u32]) -> Option<i16> {
        let (id, pid) = (self.id.clone(), self.pid?);
        let asked = vec![(TOPIC.to_string(), partitions.iter().map(|&p| p as i32).collect())];
        on_coordinator(
            sim,
            rng,
            |s| {
                let (id, asked) = (id.clone(), asked.clone());
                async move { tc::add_partitions(&s, &id, pid, &asked, false, 3).await }
            },
            |a| a.first().and_then(|(_, ps)| ps.first()).map_or(-1, |p| p.1),
        )
        .await
        .map(|a| a.first().and_then(|(_, ps)| ps.first()).map_or(-1, |p| p.1))
    }

    /// Append one transactional batch to `p`, retried (same sequence) on
    /// retryable errors and timeouts; `true` when acknowledged.
    async fn append(&mut self, sim: &Arc<Sim>, rng: &mut SmallRng, p: u32, values: &[Bytes]) -> bool {
        let Some((pid, epoch)) = self.pid else { return false };
        let seq = *self.seqs.get(&p).unwrap_or(&0);
        let records: Vec<Record> = values.iter().map(|v| record(v, sim.ms())).collect();
        let batch = transactional(
            &with_producer(&encode_batch(Offset(0), &records), pid, epoch, seq),
            false,
        );
        for attempt in 0..4 {
            let Some(node) = sim.pick_node(rng, p, 0.8) else {
                sleep(Duration::from_millis(200)).await;
                continue;
            };
            match timeout(APPEND_TIMEOUT, node.append_batch(TOPIC, p, batch.clone())).await {
                Ok(Ok(a)) => {
                    sim.count(if attempt == 0 {
                        "txn: append ok"
                    } else {
                        "txn: append ok on a retry"
                    });
                    let origin = sim.origin(format!("txn ack by {} {}", node.id, node.epoch));
                    let mut h = sim.history.lock().unwrap();
                    for (j, v) in values.iter().enumerate() {
                        h.ack(p, a.base.0 + j as u64, v.clone(), origin.clone());
                    }
                    self.seqs.insert(p, seq + values.len() as i32);
                    sim.log(format!(
                        "{} {pid}/{epoch} seq {seq}: {} records acknowledged at {p}@{} by {} {}",
                        self.id,
                        values.len(),
                        a.base.0,
                        node.id,
                        node.epoch
                    ));
                    return true;
                }
                Ok(Err(e)) if e.code.retryable() => sim.count(format!("txn: append {}", e.code.as_str())),
                Ok(Err(e)) => {
                    sim.count(format!("txn: append {}", e.code.as_str()));
                    if e.code == ErrorCode::Internal {
                        sim.violation(format!("transactional append to {} failed: {e}", node.id));
                    }
                    return false;
                }
                Err(_) => sim.count("txn: append timed out (outcome unknown)"),
            }
            sleep(millis(rng, 50, 300)).await;
        }
        false
    }

    async fn end(&self, sim: &Arc<Sim>, rng: &mut SmallRng, commit: bool) -> Option<i16> {
        let (id, pid) = (self.id.clone(), self.pid?);
        on_coordinator(
            sim,
            rng,
            |s| {
                let id = id.clone();
                async move { tc::end(&s, &id, pid, commit, 3).await }
            },
            |c| *c,
        )
        .await
    }

    /// One transaction: add 1-3 partitions, write 1-3 records to each,
    /// commit (mostly) or abort. Anything going wrong sends the producer
    /// back to InitProducerId, which aborts what it left open.
    async fn transaction(&mut self, sim: &Arc<Sim>, rng: &mut SmallRng) {
        if self.pid.is_none() && !self.init(sim, rng).await {
            sleep(millis(rng, 100, 500)).await;
            return;
        }
        self.n += 1;
        let name = format!("t{}-{}", self.i, self.n);
        let mut partitions: Vec<u32> = (0..PARTITIONS).collect();
        for i in (1..partitions.len()).rev() {
            partitions.swap(i, rng.random_range(0..=i));
        }
        partitions.truncate(rng.random_range(1..=3));
        sim.txns.lock().unwrap().begin(name.clone());
        let set = |o: Outcome| {
            if let Some(t) = sim.txns.lock().unwrap().get_mut(&name) {
                t.outcome = o;
            }
        };
        let added = self.add_partitions(sim, rng, &partitions).await;
        if added != Some(0) {
            sim.count(format!("txn: add partitions {added:?}"));
            self.pid = None;
            return set(Outcome::Aborted);
        }
        if let Some(t) = sim.txns.lock().unwrap().get_mut(&name) {
            t.partitions.extend(&partitions);
        }
        let mut k = 0;
        for &p in &partitions {
            let values: Vec<Bytes> = (0..rng.random_range(1..=3))
                .map(|_| {
                    k += 1;
                    Bytes::from(format!("{}-{name}-{k}", sim.seed))
                })
                .collect();
            if !self.append(sim, rng, p, &values).await {
                // Never committed: the next InitProducerId aborts it.
                self.pid = None;
                return set(Outcome::Aborted);
            }
            sleep(millis(rng, 0, 30)).await;
        }
        let commit = rng.random_bool(0.7);
        let ended = self.end(sim, rng, commit).await;
        let how = if commit { "commit" } else { "abort" };
        sim.count(format!("txn: end({how}) {ended:?}"));
        sim.log(format!("{name} of {:?}: end({how}) answered {ended:?}", self.pid));
        match (commit, ended) {
            (true, Some(0)) => set(Outcome::Committed),
            (false, _) => set(Outcome::Aborted),
            (true, _) => set(Outcome::Unknown),
        }
        if ended != Some(0) {
            self.pid = None;
        }
    }
}

/// Runs transactions until the schedule ends, then finishes its last.
pub async fn producer(sim: Arc<Sim>, i: usize, mut rng: SmallRng) {
    let mut p = Producer {
        i,
        id: format!("sim-txn-{i}"),
        pid: None,
        seqs: HashMap::new(),
        n: 0,
    };
    while !sim.stop.load(Ordering::Relaxed) {
        p.transaction(&sim, &mut rng).await;
        sleep(millis(&mut rng, 5, 60)).await;
    }
}

/// Kafka's read_committed filter on the client side, done here on its own
/// (not with the server's code): a data batch of a producer whose aborted
/// transaction has begun is skipped until that producer's abort marker.
fn client_filter(
    who: &str,
    batches: &[Bytes],
    aborted: &[sluice::meta::txn_index::Aborted],
) -> Result<Vec<(Offset, Record)>, String> {
    let mut pending: Vec<_> = aborted.to_vec();
    pending.sort_by_key(|a| a.first);
    let mut pending = pending.into_iter().peekable();
    let mut skipping = std::collections::HashSet::new();
    let mut out = Vec::new();
    for b in batches {
        let info = parse_batch(who, b).map_err(|e| format!("{who}: {e:#}"))?;
        while let Some(a) = pending.next_if(|a| a.first < info.end_offset()) {
            skipping.insert(a.producer_id);
        }
        if info.is_control {
            match decode_marker(who, b).map_err(|e| format!("{who}: {e:#}"))? {
                Some((Marker::Abort, _)) => {
                    skipping.remove(&info.producer_id);
                }
                Some((Marker::Commit, _)) => {}
                None => return Err(format!("{who}: a control batch that is no marker")),
            }
            continue;
        }
        if info.is_transactional && skipping.contains(&info.producer_id) {
            continue;
        }
        out.extend(sluice::batch::decode_records(who, b).map_err(|e| format!("{who}: {e:#}"))?);
    }
    Ok(out)
}

/// Reads committed records of random partitions, half through the record
/// path (HTTP's) and half through the batch path with the aborted list
/// (Kafka Fetch's), and checks what it sees.
pub async fn committed_reader(sim: Arc<Sim>, i: usize, mut rng: SmallRng) {
    while !sim.stop.load(Ordering::Relaxed) {
        sleep(millis(&mut rng, 10, 60)).await;
        let p = rng.random_range(0..PARTITIONS);
        let known_end = sim.history.lock().unwrap().known_end.get(&p).copied().unwrap_or(0);
        let from = rng.random_range(0..=known_end);
        let who = format!("committed reader {i}");
        if rng.random_bool(0.5) {
            let Some(node) = sim.pick_node(&mut rng, p, 0.9) else {
                continue;
            };
            let req = ReadRequest {
                from: ReadFrom::At(Offset(from)),
                limit: rng.random_range(1..=50),
                max_bytes: 16 << 10,
                wait: Duration::ZERO,
                committed: true,
                consistency: Default::default(),
            };
            match timeout(Duration::from_secs(5), node.read(TOPIC, p, req)).await {
                Ok(Ok(r)) => {
                    sim.count("read committed: ok");
                    let who = format!("{who} (records) via {} {}", node.id, node.epoch);
                    note_committed(&sim, &who, p, Offset(from), &r.records);
                }
                Ok(Err(e)) => note_error(&sim, &node, "read committed", &e),
                Err(_) => sim.count("read committed: timed out"),
            }
        } else {
            // The last stable offset is checked on reads from the settled
            // owner only: a zombie's answers are a stale prefix.
            let Some(node) = sim.settled_owner(p) else { continue };
            let floor = sim.txns.lock().unwrap().lso_floor(p);
            let read = node.read_batches(TOPIC, p, Offset(from), 16 << 10, Duration::ZERO, true);
            match timeout(Duration::from_secs(5), read).await {
                Ok(Ok(r)) => {
                    sim.count("fetch committed: ok");
                    let who = format!("{who} (batches) via {} {}", node.id, node.epoch);
                    if r.last_stable > r.high_watermark {
                        sim.violation(format!(
                            "{who}: last stable {} above the high watermark {}",
                            r.last_stable, r.high_watermark
                        ));
                    }
                    let still_owner = sim
                        .settled_owner(p)
                        .is_some_and(|n| n.id == node.id && n.epoch == node.epoch);
                    if still_owner {
                        let noted = sim.txns.lock().unwrap().note_lso(p, floor, r.last_stable.0);
                        if let Err(v) = noted {
                            sim.violation(format!("{who}: {v}"));
                        }
                    }
                    match client_filter(&who, &r.batches, &r.aborted) {
                        Ok(records) => {
                            let records: Vec<_> = records.into_iter().filter(|(o, _)| o.0 >= from).collect();
                            if let Some((o, _)) = records.iter().find(|(o, _)| *o >= r.last_stable) {
                                sim.violation(format!(
                                    "{who}: {p}@{o} at or past the last stable offset {}",
                                    r.last_stable
                                ));
                            }
                            note_committed(&sim, &who, p, Offset(from), &records);
                        }
                        Err(e) => sim.violation(e),
                    }
                }
                Ok(Err(e)) => note_error(&sim, &node, "fetch committed", &e),
                Err(_) => sim.count("fetch committed: timed out"),
            }
        }
    }
}

fn note_error(sim: &Sim, node: &Node, what: &str, e: &sluice::api::ApiError) {
    sim.count(format!("{what}: {}", e.code.as_str()));
    if e.code == ErrorCode::Internal {
        sim.violation(format!(
            "{what} from {} {} failed with an internal error: {e}",
            node.id, node.epoch
        ));
    }
}

fn note_committed(sim: &Sim, who: &str, p: u32, from: Offset, records: &[(Offset, Record)]) {
    sim.count_n("read committed: records", records.len() as u64);
    let mut last: Option<Offset> = None;
    for (o, rec) in records {
        if *o < from || last.is_some_and(|l| l >= *o) {
            sim.violation(format!("{who}: {p}@{o} out of order (from {from}, after {last:?})"));
        }
        last = Some(*o);
        if is_control(rec) {
            sim.violation(format!("{who}: a control record surfaced at {p}@{o}"));
            continue;
        }
        let Some(value) = rec.value.clone() else {
            sim.violation(format!("{who}: {p}@{o} has no value"));
            continue;
        };
        sim.history
            .lock()
            .unwrap()
            .note(p, o.0, &value, sim.origin(who.to_string()));
        let seen = Seen {
            partition: p,
            offset: o.0,
            value,
            who: who.to_string(),
            at_ms: sim.ms(),
        };
        if let Err(v) = sim.txns.lock().unwrap().note_committed(seen) {
            sim.violation(v);
        }
    }
}

/// Each running incarnation's transaction coordinator ticker, as the Kafka
/// front door runs it.
pub async fn tickers(sim: Arc<Sim>) {
    let mut timers: HashMap<(String, u64), Arc<TxnTimers>> = HashMap::new();
    loop {
        let ticks = sim.running().into_iter().map(|node| {
            let sim = sim.clone();
            let key = (node.id.to_string(), node.epoch.0);
            let t = timers.entry(key).or_default().clone();
            async move {
                let s = coordinator_services(&sim, &node);
                let _ = timeout(Duration::from_secs(5), tc::tick(&s, &t, Instant::now())).await;
            }
        });
        futures::future::join_all(ticks.collect::<Vec<_>>()).await;
        sleep(Duration::from_millis(500)).await;
    }
}

/// After healing: wait until no transaction is open in any partition (the
/// last stable offset is the high watermark), then read each partition
/// committed from its start.
pub async fn final_committed(sim: &Sim) -> Result<BTreeMap<u32, Vec<(u64, Bytes)>>, String> {
    let mut out = BTreeMap::new();
    for p in 0..PARTITIONS {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = String::new();
        'attempt: loop {
            if Instant::now() >= deadline {
                return Err(format!(
                    "liveness: partition {p} still has a transaction open (or no committed read) 60 s after healing: {last}; {}",
                    streams_summary(sim)
                ));
            }
            sleep(Duration::from_millis(200)).await;
            let Some(node) = sim.settled_owner(p) else { continue };
            let mut records = Vec::new();
            let mut at = Offset(0);
            loop {
                let read = node.read_batches(TOPIC, p, at, 1 << 20, Duration::ZERO, true);
                let r = match timeout(Duration::from_secs(5), read).await {
                    Ok(Ok(r)) => r,
                    Ok(Err(e)) => {
                        last = e.to_string();
                        continue 'attempt;
                    }
                    Err(_) => {
                        last = "timed out".into();
                        continue 'attempt;
                    }
                };
                if r.last_stable != r.high_watermark {
                    last = format!(
                        "last stable {} below the high watermark {}",
                        r.last_stable, r.high_watermark
                    );
                    continue 'attempt;
                }
                let Some(end) = r.batches.last().map(|b| sluice::batch::end_offset(b)) else {
                    break;
                };
                let who = format!("final committed read of {p}");
                for (o, rec) in client_filter(&who, &r.batches, &r.aborted)? {
                    if o >= at {
                        records.push((o.0, rec.value.unwrap_or_default()));
                    }
                }
                at = end;
            }
            // The record path must agree with the batch path.
            let via_records = read_all_committed(&node, p).await;
            match via_records {
                Ok(r) if r == records => {}
                Ok(r) => {
                    return Err(format!(
                    "read_committed: partition {p} reads {} records through the record path, {} through the batch path",
                    r.len(),
                    records.len()
                ))
                }
                Err(e) => {
                    last = e;
                    continue 'attempt;
                }
            }
            out.insert(p, records);
            break;
        }
    }
    Ok(out)
}

async fn read_all_committed(node: &Node, p: u32) -> Result<Vec<(u64, Bytes)>, String> {
    let mut out = Vec::new();
    let mut at = Offset(0);
    loop {
        let req = ReadRequest {
            from: ReadFrom::At(at),
            limit: 1_000,
            max_bytes: usize::MAX,
            wait: Duration::ZERO,
            committed: true,
            consistency: Default::default(),
        };
        let r = match timeout(Duration::from_secs(5), node.read(TOPIC, p, req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("timed out".into()),
        };
        if r.records.is_empty() && r.next_offset == at {
            return Ok(out);
        }
        out.extend(
            r.records
                .into_iter()
                .map(|(o, rec)| (o.0, rec.value.unwrap_or_default())),
        );
        at = r.next_offset;
    }
}
