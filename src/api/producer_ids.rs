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

    /// Transactional id `id`'s record, as this node's view holds it.
    fn txn(&self, id: &str) -> Option<TxnSummary> {
        self.transactions().into_iter().find(|(t, _)| t == id).map(|(_, s)| s)
    }
}
