//! The node's handle on the metadata log: a proposer that batches commands
//! and learns their outcomes by applying its own entry, and a tailer that
//! keeps the local view current.
//!
//! One task owns the log connection, so entries are applied strictly in
//! order; everything else reads the view through [`Meta::view`] and waits for
//! progress with [`Meta::subscribe`].

use super::command::{Command, Outcome};
use super::entry::{decode_entry, decode_snapshot, encode_entry, encode_snapshot, LogEntry};
use super::liveness::Liveness;
use super::log::{AppendOutcome, DynLog};
use super::view::{Proposer, View};
use crate::ids::{LogIndex, NodeEpoch, NodeId};
use bytes::Bytes;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct MetaConfig {
    /// How often a node polls the log for entries of other nodes while
    /// entries keep coming.
    pub poll_interval: Duration,
    /// The longest gap between polls: each poll that finds nothing doubles
    /// the gap up to this, and an entry read or proposed resets it. An
    /// idle node tails the log at about one request per this interval
    /// rather than one per `poll_interval` (on a store that bills each
    /// GET, most of an idle node's cost).
    pub idle_poll_max: Duration,
    /// How long a proposal may wait for its outcome.
    pub propose_timeout: Duration,
    /// How long one request to the log may take. A request that has not
    /// answered by then counts as the store being unreachable, and a
    /// proposal gives up (`Unavailable`) once no request has succeeded for
    /// this long, rather than waiting out `propose_timeout` on a store that
    /// does not answer.
    pub request_timeout: Duration,
    /// How many entries a read fetches at most.
    pub read_batch: usize,
}

impl Default for MetaConfig {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_millis(100),
            idle_poll_max: Duration::from_millis(800),
            propose_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(2),
            read_batch: 256,
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum MetaError {
    /// The metadata store could not be reached in time; retry later. The
    /// command may still apply if its entry landed ambiguously.
    #[error("metadata store unavailable: {0}")]
    Unavailable(String),
    /// An entry or snapshot could not be decoded: the node cannot go on.
    #[error("metadata log is corrupt: {0}")]
    Corrupt(String),
    #[error("metadata client stopped")]
    Stopped,
}

type Reply = oneshot::Sender<Result<Vec<Outcome>, MetaError>>;

struct Proposal {
    commands: Vec<Command>,
    reply: Reply,
    /// When the caller asked: its proposal fails `request_timeout` after
    /// this unless the store answers meanwhile.
    submitted: Instant,
}

struct Shared {
    view: RwLock<View>,
    identity: Mutex<Proposer>,
    liveness: Mutex<Liveness>,
    applied: watch::Sender<LogIndex>,
    /// Whether the last request to the log succeeded.
    reachable: watch::Sender<bool>,
}

/// Cheap to clone; every clone talks to the same core task.
#[derive(Clone)]
pub struct Meta {
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Proposal>,
    /// Asks the core task to read the log now (see [`Meta::sync`]).
    sync_tx: mpsc::UnboundedSender<oneshot::Sender<bool>>,
    log: DynLog,
    config: MetaConfig,
}

impl std::fmt::Debug for Meta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meta")
            .field("applied", &*self.shared.applied.borrow())
            .finish()
    }
}

impl Meta {
    /// Load the newest snapshot, catch up with the log, and start the core task.
    pub async fn open(log: DynLog, me: NodeId, config: MetaConfig) -> Result<Meta, MetaError> {
        let deadline = Instant::now() + config.propose_timeout;
        let snapshot = loop {
            match log.latest_snapshot().await {
                Ok(s) => break s,
                Err(e) if Instant::now() >= deadline => return Err(MetaError::Unavailable(e.to_string())),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        let view = match snapshot {
            Some((index, bytes)) => {
                let v = decode_snapshot(&format!("snapshot {index}"), &bytes)
                    .map_err(|e| MetaError::Corrupt(e.to_string()))?;
                if v.applied != index {
                    return Err(MetaError::Corrupt(format!(
                        "snapshot {index} holds a view at {}",
                        v.applied
                    )));
                }
                v
            }
            None => View::default(),
        };
        let (applied, _) = watch::channel(view.applied);
        let (reachable, _) = watch::channel(true);
        let shared = Arc::new(Shared {
            view: RwLock::new(view),
            identity: Mutex::new(Proposer { node: me, epoch: None }),
            liveness: Mutex::new(Liveness::default()),
            applied,
            reachable,
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let mut core = Core {
            shared: shared.clone(),
            log: log.clone(),
            config: config.clone(),
            pending: None,
            last_answer: Instant::now(),
            unsettled: None,
            last_id: None,
        };
        loop {
            match core.catch_up().await {
                Ok(0) => break,
                Ok(_) => {}
                Err(MetaError::Unavailable(e)) if Instant::now() >= deadline => return Err(MetaError::Unavailable(e)),
                Err(MetaError::Unavailable(_)) => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(e) => return Err(e),
            }
        }
        let (sync_tx, sync_rx) = mpsc::unbounded_channel();
        tokio::spawn(core.run(rx, sync_rx));
        Ok(Meta {
            shared,
            tx,
            sync_tx,
            log,
            config,
        })
    }

    /// The current view. Never hold the guard across an `.await`.
    pub fn view(&self) -> RwLockReadGuard<'_, View> {
        self.shared.view.read().unwrap()
    }

    pub fn applied(&self) -> LogIndex {
        *self.shared.applied.borrow()
    }

    /// Notified every time entries are applied.
    pub fn subscribe(&self) -> watch::Receiver<LogIndex> {
        self.shared.applied.subscribe()
    }

    /// Whether the last request to the metadata store succeeded.
    pub fn reachable(&self) -> bool {
        *self.shared.reachable.borrow()
    }

    pub fn me(&self) -> Proposer {
        self.shared.identity.lock().unwrap().clone()
    }

    /// After registering, entries are proposed as this incarnation.
    pub fn set_epoch(&self, epoch: NodeEpoch) {
        self.shared.identity.lock().unwrap().epoch = Some(epoch);
        let me = self.me();
        let view = self.view();
        self.shared
            .liveness
            .lock()
            .unwrap()
            .observe(&view, Some((&me.node, epoch)));
    }

    pub fn liveness(&self) -> Liveness {
        self.shared.liveness.lock().unwrap().clone()
    }

    /// Propose one command and wait for its outcome.
    pub async fn propose(&self, command: Command) -> Result<Outcome, MetaError> {
        Ok(self.propose_all(vec![command]).await?.remove(0))
    }

    /// Propose commands together (they land in one entry, in order).
    pub async fn propose_all(&self, commands: Vec<Command>) -> Result<Vec<Outcome>, MetaError> {
        assert!(!commands.is_empty(), "nothing to propose");
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Proposal {
                commands,
                reply,
                submitted: Instant::now(),
            })
            .map_err(|_| MetaError::Stopped)?;
        match tokio::time::timeout(self.config.propose_timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(MetaError::Stopped),
            Err(_) => Err(MetaError::Unavailable(format!(
                "no outcome within {:?}",
                self.config.propose_timeout
            ))),
        }
    }

    /// Read the log now rather than at the next poll, so the view holds
    /// every entry committed before the call (read-your-writes across
    /// nodes). True when it did: the log was read to its end. False when
    /// the log could not be read or `timeout` passed first; the view may
    /// then be older than the log, and an absence in it proves nothing.
    #[must_use = "an absence in a view that did not catch up proves nothing"]
    pub async fn sync(&self, timeout: Duration) -> bool {
        let (reply, rx) = oneshot::channel();
        if self.sync_tx.send(reply).is_err() {
            return false;
        }
        matches!(tokio::time::timeout(timeout, rx).await, Ok(Ok(true)))
    }

    /// Wait until the view has applied at least `index`.
    pub async fn wait_for(&self, index: LogIndex) {
        let mut rx = self.subscribe();
        let _ = rx.wait_for(|i| *i >= index).await;
    }

    /// Write a snapshot of the current view, then drop log entries below the
    /// previous snapshot (one snapshot's worth of entries is kept, so a node
    /// slightly behind can still tail). Returns the snapshot index.
    pub async fn snapshot_and_truncate(&self) -> Result<LogIndex, MetaError> {
        let unavailable = |e: crate::store::StoreError| MetaError::Unavailable(e.to_string());
        let previous = self.log.latest_snapshot().await.map_err(unavailable)?.map(|(i, _)| i);
        let (index, bytes) = {
            let v = self.view();
            (v.applied, encode_snapshot(&v))
        };
        if index == LogIndex::ZERO || Some(index) == previous {
            return Ok(index);
        }
        self.log
            .put_snapshot(index, Bytes::from(bytes))
            .await
            .map_err(unavailable)?;
        if let Some(prev) = previous {
            self.log.truncate_before(prev).await.map_err(unavailable)?;
        }
        Ok(index)
    }
}

/// The one task that talks to the log.
struct Core {
    shared: Arc<Shared>,
    log: DynLog,
    config: MetaConfig,
    /// The proposal in flight: its id, and per caller how many commands.
    pending: Option<Pending>,
    /// When a request to the log last succeeded.
    last_answer: Instant,
    /// An index this node appended at without learning whether it follows
    /// the log or sits on a slot freed by truncation. Nothing is read or
    /// applied from it on until that is known (see [`Core::settle_orphan`]).
    unsettled: Option<LogIndex>,
    /// The proposal id of the entry at the view's applied index (`None`
    /// after loading a snapshot): what the slot before the next one read
    /// or appended must still hold (see [`Core::predecessor_holds`]).
    last_id: Option<u64>,
}

struct Pending {
    proposal_id: u64,
    callers: Vec<(usize, Reply)>,
}

/// The gap before the next poll after `quiet` polls that found nothing:
/// `poll_interval`, doubled per quiet poll, at most `idle_poll_max` (or
/// `poll_interval`, when that is longer).
fn poll_gap(config: &MetaConfig, quiet: u32) -> Duration {
    let cap = config.idle_poll_max.max(config.poll_interval);
    config.poll_interval.saturating_mul(1u32 << quiet.min(16)).min(cap)
}

impl Core {
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Proposal>,
        mut sync_rx: mpsc::UnboundedReceiver<oneshot::Sender<bool>>,
    ) {
        let mut idle_polls = 0u32;
        // Consecutive polls that found nothing: the gap before the next.
        let mut quiet = 0u32;
        loop {
            let gap = poll_gap(&self.config, quiet);
            let mut batch = Vec::new();
            while let Ok(p) = rx.try_recv() {
                batch.push(p);
            }
            if batch.is_empty() {
                tokio::select! {
                    p = rx.recv() => match p {
                        Some(p) => batch.push(p),
                        None => return,
                    },
                    Some(reply) = sync_rx.recv() => {
                        let caught_up = self.read_to_end().await;
                        let _ = reply.send(caught_up);
                        continue;
                    }
                    _ = tokio::time::sleep(gap) => {
                        match self.catch_up().await {
                            Ok(0) => {
                                idle_polls += 1;
                                quiet = quiet.saturating_add(1);
                            }
                            Ok(_) => {
                                idle_polls = 0;
                                quiet = 0;
                            }
                            Err(MetaError::Corrupt(e)) => {
                                tracing::error!(error = %e, "metadata log is corrupt; the tailer stops");
                                return;
                            }
                            Err(_) => {}
                        }
                        // A node that fell behind truncation finds nothing at
                        // its next index forever; now and then, look for a
                        // newer snapshot.
                        if idle_polls >= 100 {
                            idle_polls = 0;
                            let _ = self.reload_snapshot().await;
                        }
                        continue;
                    }
                }
            }
            quiet = 0;
            if let Err(MetaError::Corrupt(e)) = self.propose(batch).await {
                tracing::error!(error = %e, "metadata log is corrupt; the tailer stops");
                return;
            }
        }
    }

    /// Record whether a request to the log succeeded: front doors refuse
    /// metadata changes at once while the last one did not.
    fn set_reachable(&mut self, ok: bool) {
        if ok {
            self.last_answer = Instant::now();
        }
        self.shared
            .reachable
            .send_if_modified(|r| std::mem::replace(r, ok) != ok);
    }

    /// One request to the log, given up after `limit`: a blackholed store
    /// does not answer at all, and waiting on it would hold every proposal
    /// behind it. A request given up on may still take effect.
    async fn request<T>(
        &self,
        limit: Duration,
        request: impl std::future::Future<Output = crate::store::StoreResult<T>>,
    ) -> Result<T, String> {
        match tokio::time::timeout(limit, request).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("metadata log request did not answer within {limit:?}")),
        }
    }

    /// Everything committed so far, applied: read until nothing new, then
    /// make sure "nothing new" is the log's end and not slots freed by
    /// truncation below it. A node cut off from the store while two
    /// snapshots were taken finds nothing at its next index either, and a
    /// caller that syncs to judge by the newest state (a transaction
    /// marker, simulation seed 420) must not be handed that stale view: it
    /// took a current marker for a late one and the partition kept an
    /// aborted transaction's batch visible. The check is one more read,
    /// paid by `sync` only; the idle tail stays at one request a poll.
    async fn read_to_end(&mut self) -> bool {
        // Each round either applies entries or moves to a newer snapshot;
        // the bound only keeps a store that answers inconsistently from
        // holding the core here.
        for _ in 0..64 {
            match self.catch_up().await {
                Ok(0) => {}
                Ok(_) => continue,
                Err(_) => return false,
            }
            let from = self.shared.view.read().unwrap().applied.next();
            let deadline = Instant::now() + self.config.request_timeout;
            match self.predecessor_holds(from, deadline).await {
                Some(true) => return true,
                None => return false,
                Some(false) => match self.reload_below_truncation(from).await {
                    Err(_) => return false,
                    Ok(true) => {}
                    // No newer snapshot: a view that is the newest snapshot,
                    // with nothing after it, is the end (the entries after
                    // the newest snapshot are never freed).
                    Ok(false) => return self.last_id.is_none(),
                },
            }
        }
        false
    }

    /// Read and apply whatever entries are available. Returns how many.
    async fn catch_up(&mut self) -> Result<usize, MetaError> {
        self.catch_up_within(self.config.request_timeout).await
    }

    /// [`Self::catch_up`] with its read given up after `limit`.
    async fn catch_up_within(&mut self, limit: Duration) -> Result<usize, MetaError> {
        self.settle_orphan(limit).await?;
        let from = self.shared.view.read().unwrap().applied.next();
        let read = self.log.read_from(from, self.config.read_batch);
        let entries = match self.request(limit, read).await {
            Ok(e) => {
                self.set_reachable(true);
                e
            }
            Err(e) => {
                self.set_reachable(false);
                return Err(MetaError::Unavailable(e));
            }
        };
        if entries.is_empty() {
            return Ok(0);
        }
        // The slots just read may have been freed by truncation and written
        // again by a node as far behind as we are (an orphan): applying one
        // would fork this view from everyone else's (the simulation, seed
        // 146: a stalled node read its own orphans back, believed a flush
        // committed that the log never held, and deleted the WAL segments
        // that were the only copy of acknowledged records). Truncation
        // deletes in ascending order, so if the slot before them still holds
        // the entry we applied there, none of them had been freed when read.
        match self.predecessor_holds(from, Instant::now() + limit).await {
            Some(true) => {}
            Some(false) => {
                let advanced = self.reload_below_truncation(from).await?;
                return Ok(usize::from(advanced));
            }
            None => {
                return Err(MetaError::Unavailable(format!(
                    "could not tell whether log entries from {from} follow the log"
                )))
            }
        }
        let n = entries.len();
        for (index, bytes) in entries {
            let entry =
                decode_entry(&format!("log entry {index}"), &bytes).map_err(|e| MetaError::Corrupt(e.to_string()))?;
            self.apply(index, &entry);
        }
        Ok(n)
    }

    fn apply(&mut self, index: LogIndex, entry: &LogEntry) {
        let outcomes = {
            let mut view = self.shared.view.write().unwrap();
            let outcomes = view.apply_entry(index, &entry.proposer, &entry.commands);
            let me = self.shared.identity.lock().unwrap().clone();
            self.shared
                .liveness
                .lock()
                .unwrap()
                .observe(&view, me.epoch.map(|e| (&me.node, e)));
            outcomes
        };
        self.last_id = Some(entry.proposal_id);
        // Publish the index before answering: a proposer that got its
        // outcome must find `applied()` at or past its entry.
        self.shared.applied.send_replace(index);
        if self
            .pending
            .as_ref()
            .is_some_and(|p| p.proposal_id == entry.proposal_id)
        {
            let pending = self.pending.take().expect("checked");
            let mut outcomes = outcomes.into_iter();
            for (n, reply) in pending.callers {
                let _ = reply.send(Ok(outcomes.by_ref().take(n).collect()));
            }
        }
    }

    fn fail_pending(&mut self, err: MetaError) {
        if let Some(p) = self.pending.take() {
            for (_, reply) in p.callers {
                let _ = reply.send(Err(err.clone()));
            }
        }
    }

    async fn propose(&mut self, batch: Vec<Proposal>) -> Result<(), MetaError> {
        let proposal_id = crate::entropy::random::<u64>();
        let mut commands = Vec::new();
        let mut callers = Vec::new();
        let submitted = batch.iter().map(|p| p.submitted).min().unwrap_or_else(Instant::now);
        for p in batch {
            callers.push((p.commands.len(), p.reply));
            commands.extend(p.commands);
        }
        let proposer = self.shared.identity.lock().unwrap().clone();
        let entry = LogEntry {
            proposer,
            proposal_id,
            commands,
        };
        let bytes = Bytes::from(encode_entry(&entry));
        self.pending = Some(Pending { proposal_id, callers });
        let hard_deadline = Instant::now() + self.config.propose_timeout;
        let mut backoff = Duration::from_millis(10);
        while self.pending.is_some() {
            // Retried while the store answers; given up once it has not for
            // a request timeout (counted from the caller's request if the
            // store answered since), so a caller learns of an outage within
            // one request timeout, not the whole propose timeout.
            let deadline = (self.last_answer.max(submitted) + self.config.request_timeout).min(hard_deadline);
            let now = Instant::now();
            if now >= deadline {
                let why = if now >= hard_deadline {
                    "metadata log append timed out".to_string()
                } else {
                    format!("metadata store unreachable for {:?}", self.config.request_timeout)
                };
                self.fail_pending(MetaError::Unavailable(why));
                break;
            }
            let limit = deadline - now;
            // Catching up first both moves us to the log's end and settles an
            // earlier ambiguous append: if our entry landed, applying it
            // delivers the outcomes.
            match self.catch_up_within(limit).await {
                Ok(_) => {}
                Err(MetaError::Unavailable(e)) => {
                    tracing::debug!(error = %e, "metadata log read failed; backing off");
                    sleep_before(deadline, backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
                Err(e) => {
                    self.fail_pending(e.clone());
                    return Err(e);
                }
            }
            if self.pending.is_none() {
                break;
            }
            let index = self.shared.view.read().unwrap().applied.next();
            let started = Instant::now();
            let limit = deadline
                .saturating_duration_since(started)
                .max(Duration::from_millis(1));
            let appended = self.request(limit, self.log.append_at(index, bytes.clone())).await;
            let outcome = match &appended {
                Ok(AppendOutcome::Appended) => "appended",
                Ok(AppendOutcome::IndexTaken) => "index_taken",
                Err(_) => "error",
            };
            crate::telemetry::observe("sluice_meta_append_seconds", &[("outcome", outcome)], started.elapsed());
            match appended {
                Ok(AppendOutcome::Appended) => {
                    self.set_reachable(true);
                    match self.predecessor_holds(index, deadline).await {
                        Some(true) => self.apply(index, &entry),
                        // We appended on an index freed by truncation: nobody
                        // will ever read it. Reload from the snapshot.
                        known => {
                            let why = if known.is_some() {
                                "node fell behind log truncation".to_string()
                            } else {
                                format!("could not tell whether log entry {index} follows the log")
                            };
                            self.fail_pending(MetaError::Unavailable(why));
                            self.unsettled = Some(index);
                            if known.is_some() {
                                self.unsettled_was_orphan(index).await?;
                            }
                            break;
                        }
                    }
                }
                Ok(AppendOutcome::IndexTaken) => {
                    self.set_reachable(true);
                    crate::telemetry::count("sluice_meta_append_conflicts_total", &[]);
                }
                Err(e) => {
                    self.set_reachable(false);
                    tracing::debug!(error = %e, "metadata log append failed; retrying");
                    sleep_before(deadline, backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
        Ok(())
    }

    /// Whether the slot before `index` still holds the entry this view
    /// applied there (by proposal id; any entry when the view came from a
    /// snapshot), asked until the store answers or `deadline` passes
    /// (`None`: not known). Truncation deletes in ascending order, so an
    /// unchanged predecessor proves `index` had not been freed when it was
    /// read or appended before this call; a missing or different one means
    /// it may have been (or that the log moved on past a snapshot that holds
    /// it: reloading that snapshot is right either way).
    async fn predecessor_holds(&self, index: LogIndex, deadline: Instant) -> Option<bool> {
        if index.0 <= 1 {
            return Some(true);
        }
        let mut backoff = Duration::from_millis(10);
        loop {
            let limit = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            let read = self.log.read_from(LogIndex(index.0 - 1), 1);
            match self.request(limit, read).await {
                Ok(v) => {
                    let Some((_, bytes)) = v.first() else {
                        return Some(false);
                    };
                    let Some(expected) = self.last_id else {
                        return Some(true);
                    };
                    // An undecodable predecessor is not the entry we applied.
                    let id = decode_entry("predecessor", bytes).map(|e| e.proposal_id).ok();
                    return Some(id == Some(expected));
                }
                Err(_) if Instant::now() >= deadline => return None,
                Err(e) => {
                    tracing::debug!(error = %e, %index, "could not read the predecessor of our entry; retrying");
                    sleep_before(deadline, backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    /// Before reading on past an index of ours whose standing is unknown,
    /// learn it: an entry on a freed slot must never be applied (its
    /// commands would fork this node's view from everyone else's, as a
    /// restarted node registering at its old epoch again did in the
    /// simulation, seed 504), and a legitimate one is read back like any
    /// other entry.
    async fn settle_orphan(&mut self, limit: Duration) -> Result<(), MetaError> {
        let Some(index) = self.unsettled else {
            return Ok(());
        };
        match self.predecessor_holds(index, Instant::now() + limit).await {
            Some(true) => {
                self.unsettled = None;
                Ok(())
            }
            Some(false) => self.unsettled_was_orphan(index).await,
            None => Err(MetaError::Unavailable(format!(
                "could not tell whether log entry {index} follows the log"
            ))),
        }
    }

    /// `index` was freed by truncation before we appended there: move past
    /// it to the newest snapshot, which is at or beyond it.
    async fn unsettled_was_orphan(&mut self, index: LogIndex) -> Result<(), MetaError> {
        self.reload_snapshot().await?;
        if self.shared.view.read().unwrap().applied < index {
            return Err(MetaError::Unavailable(format!(
                "log entry {index} was appended on a truncated slot and no snapshot past it was found yet"
            )));
        }
        self.unsettled = None;
        Ok(())
    }

    /// This node's view ends below the log's truncation (the slot before
    /// `from` no longer holds what it applied there): count it, move to the
    /// newest snapshot, and say whether the view advanced.
    async fn reload_below_truncation(&mut self, from: LogIndex) -> Result<bool, MetaError> {
        crate::telemetry::count("sluice_meta_truncated_reads_total", &[]);
        tracing::warn!(%from, "this node's view is below the log's truncation; reloading the snapshot");
        let before = self.shared.view.read().unwrap().applied;
        self.reload_snapshot().await?;
        Ok(self.shared.view.read().unwrap().applied > before)
    }

    async fn reload_snapshot(&mut self) -> Result<(), MetaError> {
        let snap = self
            .log
            .latest_snapshot()
            .await
            .map_err(|e| MetaError::Unavailable(e.to_string()))?;
        if let Some((index, bytes)) = snap {
            let v =
                decode_snapshot(&format!("snapshot {index}"), &bytes).map_err(|e| MetaError::Corrupt(e.to_string()))?;
            if v.applied > self.shared.view.read().unwrap().applied {
                *self.shared.view.write().unwrap() = v;
                self.last_id = None;
                self.shared.applied.send_replace(index);
            }
        }
        Ok(())
    }
}

/// Back off for `backoff`, but wake by `deadline` so the proposal can give up on time.
async fn sleep_before(deadline: Instant, backoff: Duration) {
    tokio::time::sleep_until((Instant::now() + backoff).min(deadline)).await;
}

#[cfg(test)]
mod tests;
