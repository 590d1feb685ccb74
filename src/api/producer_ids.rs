//! The producer-ids capability: ids for Kafka idempotent producers, unique
//! in the cluster, and the coordinator records of transactional ids
//! (changed only through the metadata log, see `meta::txn`). (Sequence
//! checks happen where offsets are assigned, in `stream`.)

use super::{ApiResult, GroupOffset};
use crate::meta::txn::{TxnDone, TxnRefusal, TxnState};
use async_trait::async_trait;

/// What the metadata log made of one transaction op: what it did, or why
/// the record refused it (then nothing changed).
pub type TxnAnswer = Result<TxnDone, (TxnRefusal, String)>;

/// One change to a transactional id's record, partitions named as clients
/// name them (`meta::txn::TxnOp` is the same with stream ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnRequest {
    /// InitProducerId; `expected` is the id and epoch a recovering
    /// producer names (KIP-360).
    Init {
        timeout_ms: u32,
        expected: Option<(i64, i16)>,
    },
    AddPartitions {
        producer_id: i64,
        epoch: i16,
        partitions: Vec<(String, u32)>,
    },
    AddGroup {
        producer_id: i64,
        epoch: i16,
        group: String,
    },
    CommitOffsets {
        producer_id: i64,
        epoch: i16,
        group: String,
        offsets: Vec<GroupOffset>,
    },
    End {
        producer_id: i64,
        epoch: i16,
        commit: bool,
    },
    /// The coordinator aborts an ongoing transaction past its timeout.
    Abort {
        producer_id: i64,
        epoch: i16,
    },
    /// `started_at`: the log index the ending transaction began at, as
    /// its record said ([`TxnSummary::started_at`]).
    Complete {
        producer_id: i64,
        epoch: i16,
        started_at: u64,
    },
}

/// A transactional id's record as DescribeTransactions shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnSummary {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: TxnState,
    pub timeout_ms: u32,
    /// The log index at which the transaction became ongoing: with the
    /// producer id and epoch, which transaction this is.
    pub started_at: u64,
    /// The partitions of the ongoing (or ending) transaction.
    pub partitions: Vec<(String, u32)>,
}

/// One caller's turn at finishing a transactional id's transaction; the
/// next waits until it is dropped.
pub type FinishTurn = tokio::sync::OwnedMutexGuard<()>;

/// Per transactional id, the turn of whoever finishes its transaction on
/// this node ([`ProducerIds::finishing`]); entries nobody holds or awaits
/// are dropped as others are taken.
#[derive(Debug, Default)]
pub struct FinishTurns {
    turns: std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
}

impl FinishTurns {
    pub async fn take(&self, id: &str) -> FinishTurn {
        let turn = {
            let mut turns = self.turns.lock().unwrap();
            turns.retain(|_, t| std::sync::Arc::strong_count(t) > 1);
            turns.entry(id.to_string()).or_default().clone()
        };
        turn.lock_owned().await
    }
}

#[async_trait]
pub trait ProducerIds: Send + Sync + 'static {
    /// A Kafka producer id unique in the cluster (InitProducerId).
    async fn init_producer_id(&self) -> ApiResult<i64>;

    /// Apply `req` to transactional id `id`'s record through the metadata
    /// log. `Err`: the log could not be reached (retryable), or a partition
    /// named does not exist (`topic_not_found`).
    async fn transaction(&self, id: &str, req: TxnRequest) -> ApiResult<TxnAnswer>;

    /// Every transactional id with a record, as this node's view holds them.
    fn transactions(&self) -> Vec<(String, TxnSummary)>;

    /// Held while one caller on this node finishes `id`'s ending
    /// transaction (writes its markers and completes it): the EndTxn request
    /// and the coordinator's ticker take turns, so a finisher that read the
    /// record before another completed it finds it complete when its turn
    /// comes, rather than writing a finished transaction's markers into
    /// partitions where the producer's next transaction has begun.
    async fn finishing(&self, id: &str) -> FinishTurn;

    /// Transactional id `id`'s record, as this node's view holds it.
    fn txn(&self, id: &str) -> Option<TxnSummary> {
        self.transactions().into_iter().find(|(t, _)| t == id).map(|(_, s)| s)
    }
}
