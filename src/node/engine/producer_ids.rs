//! [`ProducerIds`] for [`Node`]: ids reserved from the metadata log a block
//! at a time and handed out from memory; transactional ids' records changed
//! by proposing their ops.

use super::super::Node;
use super::meta_error;
use crate::api::*;
use crate::ids::LogIndex;
use crate::meta::txn::TxnOp;
use crate::meta::{Command, Outcome, Rejection};
use async_trait::async_trait;
use std::collections::BTreeMap;

/// Kafka producer ids a node reserves in the metadata log at a time.
const PRODUCER_ID_BLOCK: u32 = 1000;

#[async_trait]
impl ProducerIds for Node {
    async fn init_producer_id(&self) -> ApiResult<i64> {
        self.check_serving()?;
        let mut ids = self.producer_ids.lock().await;
        if ids.is_empty() {
            self.check_meta_reachable()?;
            let count = PRODUCER_ID_BLOCK;
            match self
                .meta
                .propose(Command::AllocateProducerIds { count })
                .await
                .map_err(meta_error)?
            {
                Outcome::ProducerIds { first } => *ids = first..first + i64::from(count),
                other => return Err(ApiError::unavailable(format!("no producer ids reserved: {other:?}"))),
            }
        }
        let id = ids.start;
        ids.start += 1;
        Ok(id)
    }

    async fn transaction(&self, id: &str, req: TxnRequest) -> ApiResult<TxnAnswer> {
        self.check_serving()?;
        let op = self.txn_op(req)?;
        self.check_meta_reachable()?;
        let command = Command::Txn { id: id.to_string(), op };
        match self.meta.propose(command).await.map_err(meta_error)? {
            Outcome::Txn(done) => Ok(Ok(done)),
            Outcome::Rejected(Rejection::Txn(why, message)) => Ok(Err((why, message))),
            other => Err(ApiError::unavailable(format!("transaction op not applied: {other:?}"))),
        }
    }

    async fn finishing(&self, id: &str) -> FinishTurn {
        self.txn_finishers.take(id).await
    }

    fn transactions(&self) -> Vec<(String, TxnSummary)> {
        let view = self.meta.view();
        let names: BTreeMap<_, _> = view.topics.iter().map(|(n, t)| (t.id, n.clone())).collect();
        view.txns
            .iter()
            .map(|(id, row)| (id.clone(), summary(row, |t| names.get(&t).cloned())))
            .collect()
    }

    fn txn(&self, id: &str) -> Option<TxnSummary> {
        let view = self.meta.view();
        let row = view.txns.get(id)?;
        let name = |t| view.topics.iter().find(|(_, r)| r.id == t).map(|(n, _)| n.clone());
        Some(summary(row, name))
    }
}

/// A record as DescribeTransactions shows it, its partitions named by
/// `name` (a topic deleted meanwhile is left out).
fn summary(row: &crate::meta::txn::TxnRow, name: impl Fn(crate::ids::TopicId) -> Option<String>) -> TxnSummary {
    TxnSummary {
        producer_id: row.producer_id,
        producer_epoch: row.producer_epoch,
        state: row.state,
        timeout_ms: row.timeout_ms,
        started_at: row.started_at.0,
        partitions: (row.partitions.iter())
            .filter_map(|s| Some((name(s.topic)?, s.partition)))
            .collect(),
    }
}

impl Node {
    /// The log's op for `req`: partitions resolved to this view's streams.
    fn txn_op(&self, req: TxnRequest) -> ApiResult<TxnOp> {
        Ok(match req {
            TxnRequest::Init { timeout_ms, expected } => TxnOp::Init { timeout_ms, expected },
            TxnRequest::AddPartitions {
                producer_id,
                epoch,
                partitions,
            } => TxnOp::AddPartitions {
                producer_id,
                epoch,
                partitions: partitions
                    .iter()
                    .map(|(t, p)| self.resolve(t, *p))
                    .collect::<ApiResult<_>>()?,
            },
            TxnRequest::AddGroup {
                producer_id,
                epoch,
                group,
            } => TxnOp::AddGroup {
                producer_id,
                epoch,
                group,
            },
            TxnRequest::CommitOffsets {
                producer_id,
                epoch,
                group,
                offsets,
            } => TxnOp::CommitOffsets {
                producer_id,
                epoch,
                group,
                offsets: offsets
                    .into_iter()
                    .map(|o| Ok((self.resolve(&o.topic, o.partition)?, o.offset, o.metadata)))
                    .collect::<ApiResult<_>>()?,
            },
            TxnRequest::End {
                producer_id,
                epoch,
                commit,
            } => TxnOp::End {
                producer_id,
                epoch,
                commit,
            },
            TxnRequest::Abort { producer_id, epoch } => TxnOp::Abort { producer_id, epoch },
            TxnRequest::Complete {
                producer_id,
                epoch,
                started_at,
            } => TxnOp::Complete {
                producer_id,
                epoch,
                started_at: Some(LogIndex(started_at)),
            },
        })
    }
}
