//! Kafka transactions' coordinator state in the metadata log: one record
//! per transactional id, moved through Kafka's states (Empty → Ongoing →
//! PrepareCommit/PrepareAbort → CompleteCommit/CompleteAbort) only by
//! [`TxnOp`]s applied here, purely. Every op names the producer id and
//! epoch it was made for, so a fenced instance (an older epoch) changes
//! nothing; the coordinator's clock only decides when to propose
//! [`TxnOp::Abort`] (a timeout), which applies only if the record is still
//! as the coordinator saw it. See `docs/design/transactions.md`.

use crate::ids::{LogIndex, StreamId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The most transactional ids with a record.
pub const MAX_TXNS: usize = 10_000;
/// The most partitions one transaction writes.
pub const MAX_TXN_PARTITIONS: usize = 10_000;
/// The most consumer groups, and offsets in all, one transaction commits.
pub const MAX_TXN_GROUPS: usize = 100;
pub const MAX_TXN_OFFSETS: usize = 10_000;
/// The longest transactional id (Kafka has no limit; a record key here).
pub const MAX_TXN_ID_BYTES: usize = 1024;
/// Kafka's broker default for `transaction.max.timeout.ms` (15 minutes).
pub const MAX_TXN_TIMEOUT_MS: u32 = 900_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    /// Kafka's name for it (DescribeTransactions, ListTransactions).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    /// Between transactions: a new one may begin.
    fn idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

/// An offset a transaction commits for a group: (stream, offset, metadata).
pub type TxnOffset = (StreamId, i64, Option<String>);

/// One transactional id's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRow {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: TxnState,
    pub timeout_ms: u32,
    /// The streams the ongoing (or ending) transaction wrote to.
    pub partitions: BTreeSet<StreamId>,
    /// The groups it commits offsets for, with the offsets sent so far
    /// (TxnOffsetCommit); they reach the group's offsets only on commit.
    pub offsets: BTreeMap<String, Vec<TxnOffset>>,
    /// The log index at which the transaction became Ongoing.
    pub started_at: LogIndex,
}

/// A change to one transactional id's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnOp {
    /// InitProducerId with this transactional id: a new producer id at
    /// epoch 0 the first time, else the epoch bumped (the previous instance
    /// is fenced). `expected`: the id and epoch a producer recovering from an
    /// error names (KIP-360), which must be the record's.
    Init {
        timeout_ms: u32,
        expected: Option<(i64, i16)>,
    },
    /// AddPartitionsToTxn: the transaction is Ongoing and writes these too.
    AddPartitions {
        producer_id: i64,
        epoch: i16,
        partitions: Vec<StreamId>,
    },
    /// AddOffsetsToTxn: the transaction commits offsets of `group`.
    AddGroup {
        producer_id: i64,
        epoch: i16,
        group: String,
    },
    /// TxnOffsetCommit: offsets of a group added with `AddGroup`.
    CommitOffsets {
        producer_id: i64,
        epoch: i16,
        group: String,
        offsets: Vec<TxnOffset>,
    },
    /// EndTxn: prepare to commit or abort; the markers come next.
    End { producer_id: i64, epoch: i16, commit: bool },
    /// The coordinator aborts an Ongoing transaction past its timeout; the
    /// epoch is bumped so the producer that let it expire is fenced.
    Abort { producer_id: i64, epoch: i16 },
    /// Every partition has its marker: the transaction is complete (and on
    /// commit its offsets become the groups'). `started_at` names the
    /// transaction (the index it began at): the epoch alone does not, since
    /// one producer epoch runs many transactions, and a coordinator that
    /// finished one late must not complete the next, whose markers were
    /// never written (simulation seed 591). Absent in entries written
    /// before it existed, which complete whatever is ending, as they did.
    Complete {
        producer_id: i64,
        epoch: i16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        started_at: Option<LogIndex>,
    },
}

/// What a Kafka coordinator answers for a refused op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnRefusal {
    /// An older epoch of the producer (`PRODUCER_FENCED`).
    Fenced,
    /// Another producer id, or no record (`INVALID_PRODUCER_ID_MAPPING`).
    UnknownProducer,
    /// The transaction is ending: retry (`CONCURRENT_TRANSACTIONS`).
    Concurrent,
    /// Not allowed in this state (`INVALID_TXN_STATE`).
    InvalidState,
    /// Bad input: sizes, timeout (`INVALID_REQUEST` / `INVALID_TRANSACTION_TIMEOUT`).
    Invalid,
}

/// What an applied op did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnDone {
    /// `Init`: the producer id and epoch to use.
    Producer { producer_id: i64, epoch: i16 },
    /// `Init` found a transaction Ongoing: it is being aborted at a bumped
    /// epoch; the new instance retries (`CONCURRENT_TRANSACTIONS`).
    Fencing,
    /// Anything else.
    Changed,
}

/// Offsets by group, as a committed transaction hands them over.
pub type GroupTxnOffsets = BTreeMap<String, Vec<TxnOffset>>;

/// What [`apply`] answers: what it did and the offsets it hands over, or
/// why it refused (nothing changed).
pub type TxnApplied = Result<(TxnDone, GroupTxnOffsets), (TxnRefusal, String)>;

/// The parts of the view an op may touch besides the records.
pub struct TxnContext<'a> {
    pub index: LogIndex,
    /// The next producer id no node has been given (`Init` takes one).
    pub next_producer_id: &'a mut i64,
}

/// Apply `op` to `id`'s record. On `Complete` of a commit the offsets to
/// commit are returned, for the caller to store as the groups' offsets.
pub fn apply(txns: &mut BTreeMap<String, TxnRow>, ctx: TxnContext<'_>, id: &str, op: &TxnOp) -> TxnApplied {
    let none = BTreeMap::new;
    if id.is_empty() || id.len() > MAX_TXN_ID_BYTES {
        return Err(refuse(
            TxnRefusal::Invalid,
            format!("transactional ids are 1-{MAX_TXN_ID_BYTES} bytes"),
        ));
    }
    if let TxnOp::Init { timeout_ms, expected } = op {
        return init(txns, ctx, id, *timeout_ms, *expected).map(|d| (d, none()));
    }
    let row = txns.get_mut(id).ok_or_else(|| {
        refuse(
            TxnRefusal::UnknownProducer,
            format!("no producer has transactional id {id:?}"),
        )
    })?;
    let (producer_id, epoch) = op.producer();
    check_producer(row, producer_id, epoch)?;
    match op {
        TxnOp::Init { .. } => unreachable!("handled above"),
        TxnOp::AddPartitions { partitions, .. } => {
            let mut all = if row.state == TxnState::Ongoing {
                row.partitions.clone()
            } else {
                BTreeSet::new()
            };
            all.extend(partitions.iter().copied());
            if partitions.is_empty() || all.len() > MAX_TXN_PARTITIONS {
                return Err(refuse(
                    TxnRefusal::Invalid,
                    format!("a transaction writes 1-{MAX_TXN_PARTITIONS} partitions"),
                ));
            }
            begin(row, ctx.index)?;
            row.partitions = all;
        }
        TxnOp::AddGroup { group, .. } => {
            if group.is_empty() {
                return Err(refuse(TxnRefusal::Invalid, "group id is empty".into()));
            }
            if !row.offsets.contains_key(group) && row.offsets.len() >= MAX_TXN_GROUPS {
                return Err(refuse(
                    TxnRefusal::Invalid,
                    format!("a transaction commits offsets of at most {MAX_TXN_GROUPS} groups"),
                ));
            }
            begin(row, ctx.index)?;
            row.offsets.entry(group.clone()).or_default();
        }
        TxnOp::CommitOffsets { group, offsets, .. } => {
            if row.state != TxnState::Ongoing || !row.offsets.contains_key(group) {
                return Err(refuse(
                    TxnRefusal::InvalidState,
                    format!("group {group:?} was not added to the transaction"),
                ));
            }
            let held: usize = row.offsets.values().map(Vec::len).sum();
            if offsets.is_empty() || held + offsets.len() > MAX_TXN_OFFSETS {
                return Err(refuse(
                    TxnRefusal::Invalid,
                    format!("a transaction commits 1-{MAX_TXN_OFFSETS} offsets"),
                ));
            }
            let pending = row.offsets.get_mut(group).expect("checked above");
            for o in offsets {
                // A later commit of the same partition replaces the earlier.
                pending.retain(|p| p.0 != o.0);
                pending.push(o.clone());
            }
        }
        TxnOp::End { commit, .. } => match (row.state, *commit) {
            (TxnState::Ongoing, true) => row.state = TxnState::PrepareCommit,
            (TxnState::Ongoing, false) => row.state = TxnState::PrepareAbort,
            // A retried EndTxn of a transaction that already ended so.
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {}
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                return Err(refuse(TxnRefusal::Concurrent, "the transaction is ending".into()))
            }
            (s, _) => {
                return Err(refuse(
                    TxnRefusal::InvalidState,
                    format!("cannot end a transaction in state {}", s.name()),
                ))
            }
        },
        TxnOp::Abort { .. } => {
            if row.state != TxnState::Ongoing {
                return Err(refuse(
                    TxnRefusal::InvalidState,
                    format!("no transaction to time out in state {}", row.state.name()),
                ));
            }
            row.state = TxnState::PrepareAbort;
            row.producer_epoch = bump(row.producer_epoch);
        }
        TxnOp::Complete { started_at, .. } => {
            if started_at.is_some_and(|s| s != row.started_at) {
                return Err(refuse(
                    TxnRefusal::InvalidState,
                    format!(
                        "the transaction begun at {} is complete already; the record is at one begun at {}",
                        started_at.expect("checked"),
                        row.started_at
                    ),
                ));
            }
            let committed = match row.state {
                TxnState::PrepareCommit => true,
                TxnState::PrepareAbort => false,
                s => {
                    return Err(refuse(
                        TxnRefusal::InvalidState,
                        format!("nothing to complete in state {}", s.name()),
                    ))
                }
            };
            row.state = if committed {
                TxnState::CompleteCommit
            } else {
                TxnState::CompleteAbort
            };
            row.partitions.clear();
            let offsets = std::mem::take(&mut row.offsets);
            return Ok((TxnDone::Changed, if committed { offsets } else { none() }));
        }
    }
    Ok((TxnDone::Changed, none()))
}

fn init(
    txns: &mut BTreeMap<String, TxnRow>,
    ctx: TxnContext<'_>,
    id: &str,
    timeout_ms: u32,
    expected: Option<(i64, i16)>,
) -> Result<TxnDone, (TxnRefusal, String)> {
    if timeout_ms == 0 || timeout_ms > MAX_TXN_TIMEOUT_MS {
        return Err(refuse(
            TxnRefusal::Invalid,
            format!("transaction timeouts are 1-{MAX_TXN_TIMEOUT_MS} ms, not {timeout_ms}"),
        ));
    }
    let Some(row) = txns.get_mut(id) else {
        if expected.is_some() {
            return Err(refuse(
                TxnRefusal::UnknownProducer,
                format!("no producer has transactional id {id:?}"),
            ));
        }
        if txns.len() >= MAX_TXNS {
            return Err(refuse(
                TxnRefusal::Invalid,
                format!("a cluster holds at most {MAX_TXNS} transactional ids"),
            ));
        }
        let producer_id = take_producer_id(ctx.next_producer_id)?;
        txns.insert(id.to_string(), TxnRow::new(producer_id, 0, timeout_ms));
        return Ok(TxnDone::Producer { producer_id, epoch: 0 });
    };
    if let Some((producer_id, epoch)) = expected {
        check_producer(row, producer_id, epoch)?;
    }
    match row.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort => Err(refuse(
            TxnRefusal::Concurrent,
            "the previous transaction is ending".into(),
        )),
        TxnState::Ongoing => {
            // Fence the previous instance and abort what it left open.
            row.state = TxnState::PrepareAbort;
            row.producer_epoch = bump(row.producer_epoch);
            Ok(TxnDone::Fencing)
        }
        _ => {
            if row.producer_epoch >= i16::MAX - 1 {
                // Kafka's answer to an exhausted epoch: a new producer id.
                row.producer_id = take_producer_id(ctx.next_producer_id)?;
                row.producer_epoch = 0;
            } else {
                row.producer_epoch += 1;
            }
            row.timeout_ms = timeout_ms;
            row.state = TxnState::Empty;
            Ok(TxnDone::Producer {
                producer_id: row.producer_id,
                epoch: row.producer_epoch,
            })
        }
    }
}

impl TxnRow {
    fn new(producer_id: i64, producer_epoch: i16, timeout_ms: u32) -> Self {
        Self {
            producer_id,
            producer_epoch,
            state: TxnState::Empty,
            timeout_ms,
            partitions: BTreeSet::new(),
            offsets: BTreeMap::new(),
            started_at: LogIndex::default(),
        }
    }
}

impl TxnOp {
    fn producer(&self) -> (i64, i16) {
        match self {
            TxnOp::Init { .. } => (-1, -1),
            TxnOp::AddPartitions { producer_id, epoch, .. }
            | TxnOp::AddGroup { producer_id, epoch, .. }
            | TxnOp::CommitOffsets { producer_id, epoch, .. }
            | TxnOp::End { producer_id, epoch, .. }
            | TxnOp::Abort { producer_id, epoch }
            | TxnOp::Complete { producer_id, epoch, .. } => (*producer_id, *epoch),
        }
    }
}

fn check_producer(row: &TxnRow, producer_id: i64, epoch: i16) -> Result<(), (TxnRefusal, String)> {
    if producer_id != row.producer_id {
        return Err(refuse(
            TxnRefusal::UnknownProducer,
            format!(
                "producer id {producer_id} is not this transactional id's ({})",
                row.producer_id
            ),
        ));
    }
    if epoch != row.producer_epoch {
        return Err(refuse(
            TxnRefusal::Fenced,
            format!("producer epoch {epoch} is not the current {}", row.producer_epoch),
        ));
    }
    Ok(())
}

/// The transaction is (now) Ongoing; one that is ending refuses.
fn begin(row: &mut TxnRow, index: LogIndex) -> Result<(), (TxnRefusal, String)> {
    match row.state {
        TxnState::Ongoing => Ok(()),
        s if s.idle() => {
            row.state = TxnState::Ongoing;
            row.started_at = index;
            Ok(())
        }
        _ => Err(refuse(
            TxnRefusal::Concurrent,
            "the previous transaction is ending".into(),
        )),
    }
}

fn bump(epoch: i16) -> i16 {
    epoch.saturating_add(1)
}

fn take_producer_id(next: &mut i64) -> Result<i64, (TxnRefusal, String)> {
    let id = *next;
    *next = id
        .checked_add(1)
        .ok_or_else(|| refuse(TxnRefusal::Invalid, "producer ids are exhausted".into()))?;
    Ok(id)
}

fn refuse(why: TxnRefusal, message: String) -> (TxnRefusal, String) {
    (why, message)
}

#[cfg(test)]
mod tests;
