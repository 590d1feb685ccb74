//! The WAL writer: group commit with natural batching and in-order acks.
//!
//! Appends of every open stream join the *current* segment. A segment is cut
//! and PUT when it reaches `segment_bytes`, when `linger` has passed since its
//! first append, or at once when no PUT is in flight — so a quiet node answers
//! in one PUT's time and a busy one batches. Up to `max_inflight` PUTs run at
//! once (seq 0 alone: see [`cutter`]); acknowledgements are released strictly
//! in seq order. Every PUT is a create-if-absent of
//! `wal/<node>/<epoch>/<seq>`, retried with the same key and bytes until it
//! lands or the writer learns it is fenced. A seq is never skipped.
//!
//! With a PUT budget ([`super::budget`]) a segment that is not full also
//! waits for a token (or for the latency target, when one is set).

use super::budget::{BudgetConfig, Pending, PutBudget};
use super::segment::{decode_wal_object, encode_segment, entry_encoded_len, Segment, WalEntry, WalObject};
use crate::ids::{NodeEpoch, NodeId, Offset, SegmentSeq, StreamId};
use crate::store::{DynStore, PutOutcome};
use crate::telemetry;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, watch, Notify};
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct WalConfig {
    pub linger: Duration,
    pub segment_bytes: usize,
    pub max_inflight: usize,
    /// PUTs per second this incarnation may make for segments that are not
    /// full (`None`: no limit).
    pub budget: Option<BudgetConfig>,
    /// With a budget: a segment whose oldest append has waited this long
    /// goes without a token.
    pub latency_target: Option<Duration>,
}

impl Default for WalConfig {
    fn default() -> Self {
        Self {
            linger: Duration::from_millis(5),
            segment_bytes: 8 << 20,
            max_inflight: 4,
            budget: None,
            latency_target: None,
        }
    }
}

#[cfg(test)]
impl WalConfig {
    /// Every append cut into a segment of its own at once.
    pub(crate) fn segment_per_append(max_inflight: usize) -> Self {
        Self {
            linger: Duration::ZERO,
            segment_bytes: 1,
            max_inflight,
            budget: None,
            latency_target: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalError {
    /// Another node took this WAL over (or the node is stopping): nothing
    /// more can be made durable here. Retry on the stream's new owner.
    #[error("WAL of {0} is fenced")]
    Fenced(String),
}

/// The key of segment `seq` of one incarnation.
pub fn segment_key(node: &NodeId, epoch: NodeEpoch, seq: SegmentSeq) -> String {
    format!("{}{:020}", incarnation_prefix(node, epoch), seq.0)
}

/// `wal/<node>/<epoch>/`.
pub fn incarnation_prefix(node: &NodeId, epoch: NodeEpoch) -> String {
    format!("wal/{}/{}/", node, epoch.0)
}

/// Per stream, the end offset of its last entry in a segment.
type SegmentEnds = BTreeMap<StreamId, Offset>;

/// Resolves when an append is durable (with its segment's seq) or failed.
type Ack = oneshot::Sender<Result<SegmentSeq, WalError>>;

struct Waiting {
    entries: Vec<WalEntry>,
    bytes: usize,
    acks: Vec<Ack>,
    first_at: Option<Instant>,
}

impl Waiting {
    fn new() -> Self {
        Self {
            entries: Vec::new(),
            bytes: 0,
            acks: Vec::new(),
            first_at: None,
        }
    }
}

struct State {
    current: Waiting,
    next_seq: SegmentSeq,
    inflight: usize,
    /// Segments that landed but wait for an earlier one before acking.
    landed: BTreeMap<SegmentSeq, (Vec<Ack>, SegmentEnds)>,
    /// Acks of segments in flight, by seq (released in order).
    next_to_ack: SegmentSeq,
    /// Acknowledged segments not yet deleted, oldest first.
    retained: VecDeque<(SegmentSeq, SegmentEnds)>,
    fenced: Option<String>,
    budget: Option<PutBudget>,
}

struct Shared {
    node: NodeId,
    epoch: NodeEpoch,
    store: DynStore,
    config: WalConfig,
    state: Mutex<State>,
    wake: Notify,
    fenced_tx: watch::Sender<bool>,
    /// Held for the whole of a truncation.
    truncating: tokio::sync::Mutex<()>,
}

/// Handle on one incarnation's WAL. Cheap to clone.
#[derive(Clone)]
pub struct WalWriter {
    shared: Arc<Shared>,
}

impl WalWriter {
    /// Start writing `wal/<node>/<epoch>/` from seq 0.
    pub fn start(store: DynStore, node: NodeId, epoch: NodeEpoch, config: WalConfig) -> Self {
        let (fenced_tx, _) = watch::channel(false);
        let budget = config.budget.map(|b| PutBudget::new(b, Instant::now()));
        let shared = Arc::new(Shared {
            node,
            epoch,
            store,
            config,
            state: Mutex::new(State {
                current: Waiting::new(),
                next_seq: SegmentSeq::ZERO,
                inflight: 0,
                landed: BTreeMap::new(),
                next_to_ack: SegmentSeq::ZERO,
                retained: VecDeque::new(),
                fenced: None,
                budget,
            }),
            wake: Notify::new(),
            fenced_tx,
            truncating: tokio::sync::Mutex::new(()),
        });
        tokio::spawn(cutter(shared.clone()));
        Self { shared }
    }

    /// Join the current segment. The receiver resolves once the entry's
    /// segment and every earlier one are durable. Callers assign offsets and
    /// call this under the same lock, so a stream's entries keep their order.
    pub fn append(&self, entry: WalEntry) -> Result<oneshot::Receiver<Result<SegmentSeq, WalError>>, WalError> {
        let (tx, rx) = oneshot::channel();
        let mut s = self.shared.state.lock().unwrap();
        if let Some(why) = &s.fenced {
            return Err(WalError::Fenced(why.clone()));
        }
        s.current.bytes += entry_encoded_len(&entry);
        s.current.entries.push(entry);
        s.current.acks.push(tx);
        s.current.first_at.get_or_insert_with(Instant::now);
        drop(s);
        self.shared.wake.notify_one();
        Ok(rx)
    }

    /// Becomes `true` once the writer is fenced.
    pub fn fenced(&self) -> watch::Receiver<bool> {
        self.shared.fenced_tx.subscribe()
    }

    pub fn is_fenced(&self) -> bool {
        self.shared.state.lock().unwrap().fenced.is_some()
    }

    /// Stop for good: pending and future appends fail as fenced.
    pub fn stop(&self, why: &str) {
        fence(&self.shared, why);
    }

    /// Delete acknowledged segments from the front while every entry in them
    /// is committed (`committed(stream, end)` says whether the records of
    /// `stream` below `end` are in data objects, or need no WAL any more).
    /// The newest acknowledged segment is always kept, so a takeover always
    /// finds the frontier of this incarnation's WAL.
    ///
    /// Truncations are serialized: two running at once would each delete
    /// the same front and pop twice, forgetting segments that then stay in
    /// the store below a hole — and a takeover reads the run from the
    /// lowest present segment, so a hole there would misplace its fence.
    pub async fn truncate(&self, committed: impl Fn(StreamId, Offset) -> bool) -> usize {
        let _one_at_a_time = self.shared.truncating.lock().await;
        let doomed: Vec<SegmentSeq> = {
            let s = self.shared.state.lock().unwrap();
            let keep_last = s.retained.len().saturating_sub(1);
            s.retained
                .iter()
                .take(keep_last)
                .take_while(|(_, ends)| ends.iter().all(|(stream, end)| committed(*stream, *end)))
                .map(|(seq, _)| *seq)
                .collect()
        };
        // Strictly from the front, one at a time: a takeover fences at the
        // first missing segment above the lowest present one, so deletes
        // that land out of order (or a failed one between two that landed)
        // would leave a hole it takes for the WAL's end, and acknowledged
        // segments above it would be lost.
        let mut deleted = 0;
        for seq in doomed {
            let key = segment_key(&self.shared.node, self.shared.epoch, seq);
            if self.shared.store.delete(&key).await.is_err() {
                break;
            }
            let mut s = self.shared.state.lock().unwrap();
            debug_assert_eq!(
                s.retained.front().map(|(q, _)| *q),
                Some(seq),
                "deletes follow the front"
            );
            if s.retained.front().is_some_and(|(q, _)| *q == seq) {
                s.retained.pop_front();
            }
            deleted += 1;
        }
        telemetry::count_n("sluice_wal_segments_deleted_total", &[], deleted as u64);
        deleted
    }

    /// Every stream with an entry in an acknowledged segment still in the
    /// store.
    pub fn retained_streams(&self) -> std::collections::BTreeSet<StreamId> {
        let s = self.shared.state.lock().unwrap();
        s.retained.iter().flat_map(|(_, ends)| ends.keys().copied()).collect()
    }

    /// Acknowledged segments still in the store.
    pub fn retained_segments(&self) -> usize {
        self.shared.state.lock().unwrap().retained.len()
    }
}

fn fence(shared: &Shared, why: &str) {
    let mut s = shared.state.lock().unwrap();
    if s.fenced.is_some() {
        return;
    }
    s.fenced = Some(why.to_string());
    let err = WalError::Fenced(why.to_string());
    for ack in s.current.acks.drain(..) {
        let _ = ack.send(Err(err.clone()));
    }
    s.current = Waiting::new();
    for (_, (acks, _)) in std::mem::take(&mut s.landed) {
        for ack in acks {
            let _ = ack.send(Err(err.clone()));
        }
    }
    drop(s);
    shared.fenced_tx.send_replace(true);
    shared.wake.notify_one();
}

/// Decides when to cut the current segment and starts its PUT.
async fn cutter(shared: Arc<Shared>) {
    loop {
        let deadline = {
            let mut s = shared.state.lock().unwrap();
            if s.fenced.is_some() {
                return;
            }
            match s.current.first_at {
                None => None,
                Some(first) => {
                    let full = s.current.bytes >= shared.config.segment_bytes;
                    let idle = s.inflight == 0;
                    // Seq 0 goes alone. A takeover reads the WAL from its
                    // lowest present segment; that is only the frontier if
                    // nothing below it can still land. Later segments
                    // guarantee this (the newest acknowledged one is always
                    // kept, and every PUT in flight is above it), but before
                    // seq 0 lands nothing is acknowledged, so a seq 1 that
                    // overtook it would hide it.
                    let first_unlanded = s.next_seq > SegmentSeq::ZERO && s.next_to_ack == SegmentSeq::ZERO;
                    let slot = s.inflight < shared.config.max_inflight && !first_unlanded;
                    let lingered = first.elapsed() >= shared.config.linger;
                    let now = Instant::now();
                    let due = if full || idle || lingered {
                        now
                    } else {
                        first + shared.config.linger
                    };
                    let pending = Pending {
                        bytes: s.current.bytes,
                        oldest: first,
                        due,
                    };
                    let due = match &mut s.budget {
                        Some(budget) => {
                            budget.due(pending, shared.config.segment_bytes, shared.config.latency_target, now)
                        }
                        None => due,
                    };
                    // Otherwise wait for a PUT to finish (or seq 0 to land).
                    slot.then_some(due)
                }
            }
        };
        match deadline {
            Some(d) if d <= Instant::now() => cut(&shared),
            Some(d) => {
                tokio::select! {
                    _ = shared.wake.notified() => {}
                    _ = tokio::time::sleep_until(d) => {}
                }
            }
            None => shared.wake.notified().await,
        }
    }
}

fn cut(shared: &Arc<Shared>) {
    let (seq, waiting) = {
        let mut s = shared.state.lock().unwrap();
        if let Some(budget) = &mut s.budget {
            budget.spend(Instant::now());
        }
        let waiting = std::mem::replace(&mut s.current, Waiting::new());
        let seq = s.next_seq;
        s.next_seq = seq.next();
        s.inflight += 1;
        (seq, waiting)
    };
    let mut ends = SegmentEnds::new();
    for e in &waiting.entries {
        let end = ends.entry(e.stream).or_insert(e.end_offset());
        *end = (*end).max(e.end_offset());
    }
    let segment = Segment {
        node: shared.node.clone(),
        epoch: shared.epoch,
        seq,
        entries: waiting.entries,
    };
    let body = encode_segment(&segment);
    telemetry::observe(
        "sluice_wal_segment_linger_seconds",
        &[],
        waiting.first_at.map_or(Duration::ZERO, |t| t.elapsed()),
    );
    let shared = shared.clone();
    tokio::spawn(async move {
        let outcome = put_segment(&shared, seq, body).await;
        let mut s = shared.state.lock().unwrap();
        s.inflight -= 1;
        match outcome {
            // Once fenced, nothing more is acknowledged: a takeover may have
            // fenced below this seq, so these records may never be replayed.
            Ok(()) if s.fenced.is_some() => {
                let err = WalError::Fenced(s.fenced.clone().unwrap_or_default());
                for ack in waiting.acks {
                    let _ = ack.send(Err(err.clone()));
                }
            }
            Ok(()) => {
                s.landed.insert(seq, (waiting.acks, ends));
                release_in_order(&mut s);
            }
            Err(why) => {
                drop(s);
                for ack in waiting.acks {
                    let _ = ack.send(Err(WalError::Fenced(why.clone())));
                }
                fence(&shared, &why);
                return;
            }
        }
        drop(s);
        shared.wake.notify_one();
    });
}

fn release_in_order(s: &mut State) {
    while let Some((acks, ends)) = s.landed.remove(&s.next_to_ack) {
        let seq = s.next_to_ack;
        for ack in acks {
            let _ = ack.send(Ok(seq));
        }
        s.retained.push_back((seq, ends));
        s.next_to_ack = seq.next();
    }
}

/// PUT one segment until it lands. `Err` means fenced (with the reason).
async fn put_segment(shared: &Shared, seq: SegmentSeq, body: bytes::Bytes) -> Result<(), String> {
    let key = segment_key(&shared.node, shared.epoch, seq);
    let started = Instant::now();
    let mut backoff = Duration::from_millis(20);
    loop {
        if let Some(why) = shared.state.lock().unwrap().fenced.clone() {
            return Err(why);
        }
        match shared.store.put_if_absent(&key, body.clone()).await {
            Ok(PutOutcome::Created) => {
                telemetry::observe("sluice_wal_put_seconds", &[("outcome", "ok")], started.elapsed());
                telemetry::count_n("sluice_wal_put_bytes_total", &[], body.len() as u64);
                return Ok(());
            }
            Ok(PutOutcome::AlreadyExists) => {
                // Either an earlier attempt of ours landed (its reply was
                // lost), or a takeover put a fence marker here. Read it.
                match shared.store.get(&key, None).await {
                    Ok(Some(existing)) if existing == body => return Ok(()),
                    Ok(Some(existing)) => {
                        return Err(match decode_wal_object(&key, &existing) {
                            Ok(WalObject::Fence(f)) => {
                                format!("fence marker at {key} by {} {}", f.holder, f.holder_epoch)
                            }
                            _ => format!("a foreign object occupies {key}"),
                        });
                    }
                    // Gone again (or unreadable): try the create once more.
                    Ok(None) | Err(_) => {}
                }
            }
            Err(e) => {
                telemetry::count("sluice_wal_put_retries_total", &[]);
                tracing::warn!(error = %e, %key, "WAL PUT failed; retrying the same bytes");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests;
