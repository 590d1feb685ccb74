//! The transaction requests' codecs: AddPartitionsToTxn (v0–5, with the
//! KIP-890 batched and verify-only form from v4), AddOffsetsToTxn (v0–4),
//! TxnOffsetCommit (v0–5), EndTxn (v0–5), DescribeTransactions (v0) and
//! ListTransactions (v0–2). Requests are read by hand with the bounded
//! [`Fields`]; responses are written by kafka-protocol's encoders. What
//! the coordinator answers is `txn_coordinator`.

use super::proto::{Fields, PerTopic};
use super::wire::{DecodeResult, Reader, Writer};
use kafka_protocol::messages as km;
use kafka_protocol::protocol::StrBytes;

pub const ADD_PARTITIONS_TO_TXN: i16 = 24;
pub const ADD_OFFSETS_TO_TXN: i16 = 25;
pub const END_TXN: i16 = 26;
pub const TXN_OFFSET_COMMIT: i16 = 28;
pub const DESCRIBE_TRANSACTIONS: i16 = 65;
pub const LIST_TRANSACTIONS: i16 = 66;

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Bytes an i64 / i32 / i16 / bool take.
const ID_EPOCH: usize = 8 + 2;

// ------------------------------------------------------------ AddPartitionsToTxn

/// One transaction's partitions (v0–3 carry exactly one, not verify-only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnPartitions {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub verify_only: bool,
    pub topics: PerTopic<i32>,
}

/// Topics with partition numbers (a plain array of i32 per topic).
fn topic_partitions(f: &mut Fields) -> DecodeResult<PerTopic<i32>> {
    Ok(f.topic_partition_numbers(false)?.unwrap_or_default())
}

pub fn decode_add_partitions_to_txn(r: &mut Reader, version: i16) -> DecodeResult<Vec<TxnPartitions>> {
    let mut f = Fields::new(r, version >= 3);
    let txns = if version >= 4 {
        let n = f.array_len(f.min_string() + ID_EPOCH + 1 + f.min_array() + f.min_tags())?;
        let mut txns = Vec::with_capacity(n);
        for _ in 0..n {
            let transactional_id = f.string()?;
            let producer_id = f.r.i64()?;
            let producer_epoch = f.r.i16()?;
            let verify_only = f.r.bool()?;
            let topics = topic_partitions(&mut f)?;
            f.tags()?;
            txns.push(TxnPartitions {
                transactional_id,
                producer_id,
                producer_epoch,
                verify_only,
                topics,
            });
        }
        txns
    } else {
        let transactional_id = f.string()?;
        let producer_id = f.r.i64()?;
        let producer_epoch = f.r.i16()?;
        let topics = topic_partitions(&mut f)?;
        vec![TxnPartitions {
            transactional_id,
            producer_id,
            producer_epoch,
            verify_only: false,
            topics,
        }]
    };
    f.tags()?;
    f.r.expect_end()?;
    Ok(txns)
}

/// Per transaction, per topic, per partition: its code.
pub type TxnPartitionResults = Vec<(String, Vec<(String, Vec<(i32, i16)>)>)>;

/// v4+: a request-wide code and per-transaction results; v0–3: the one
/// transaction's topic results.
pub fn encode_add_partitions_to_txn(
    w: &mut Writer,
    version: i16,
    error_code: i16,
    results: &TxnPartitionResults,
) -> DecodeResult<()> {
    use km::add_partitions_to_txn_response as o;
    let topics = |ts: &Vec<(String, Vec<(i32, i16)>)>| -> Vec<o::AddPartitionsToTxnTopicResult> {
        ts.iter()
            .map(|(t, ps)| {
                o::AddPartitionsToTxnTopicResult::default()
                    .with_name(sb(t).into())
                    .with_results_by_partition(
                        ps.iter()
                            .map(|&(p, e)| {
                                o::AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(p)
                                    .with_partition_error_code(e)
                            })
                            .collect(),
                    )
            })
            .collect()
    };
    let mut m = km::AddPartitionsToTxnResponse::default();
    if version >= 4 {
        m = m.with_error_code(error_code).with_results_by_transaction(
            results
                .iter()
                .map(|(id, ts)| {
                    o::AddPartitionsToTxnResult::default()
                        .with_transactional_id(sb(id).into())
                        .with_topic_results(topics(ts))
                })
                .collect(),
        );
    } else if let Some((_, ts)) = results.first() {
        m = m.with_results_by_topic_v3_and_below(topics(ts));
    }
    w.message(&m, version)
}

// ------------------------------------------------------------ AddOffsetsToTxn

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddOffsetsToTxnRequest {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub group_id: String,
}

pub fn decode_add_offsets_to_txn(r: &mut Reader, version: i16) -> DecodeResult<AddOffsetsToTxnRequest> {
    let mut f = Fields::new(r, version >= 3);
    let req = AddOffsetsToTxnRequest {
        transactional_id: f.string()?,
        producer_id: f.r.i64()?,
        producer_epoch: f.r.i16()?,
        group_id: f.string()?,
    };
    f.tags()?;
    f.r.expect_end()?;
    Ok(req)
}

pub fn encode_add_offsets_to_txn(w: &mut Writer, version: i16, error_code: i16) -> DecodeResult<()> {
    w.message(
        &km::AddOffsetsToTxnResponse::default().with_error_code(error_code),
        version,
    )
}

// ------------------------------------------------------------ TxnOffsetCommit

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitRequest {
    pub transactional_id: String,
    pub group_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// v3+ (KIP-447): the member's generation, id and instance id.
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// Per partition: (partition, offset, leader epoch, metadata).
    pub topics: PerTopic<(i32, i64, i32, Option<String>)>,
}

pub fn decode_txn_offset_commit(r: &mut Reader, version: i16) -> DecodeResult<TxnOffsetCommitRequest> {
    let mut f = Fields::new(r, version >= 3);
    let transactional_id = f.string()?;
    let group_id = f.string()?;
    let producer_id = f.r.i64()?;
    let producer_epoch = f.r.i16()?;
    let (generation_id, member_id, group_instance_id) = if version >= 3 {
        (f.r.i32()?, f.string()?, f.nullable_string()?)
    } else {
        (-1, String::new(), None)
    };
    let min = 4 + 8 + if version >= 2 { 4 } else { 0 } + f.min_string() + f.min_tags();
    let topics = f.per_topic(min, |f| {
        let partition = f.r.i32()?;
        let offset = f.r.i64()?;
        let leader_epoch = if version >= 2 { f.r.i32()? } else { -1 };
        Ok((partition, offset, leader_epoch, f.nullable_string()?))
    })?;
    f.tags()?;
    f.r.expect_end()?;
    Ok(TxnOffsetCommitRequest {
        transactional_id,
        group_id,
        producer_id,
        producer_epoch,
        generation_id,
        member_id,
        group_instance_id,
        topics,
    })
}

pub fn encode_txn_offset_commit(w: &mut Writer, version: i16, topics: &PerTopic<(i32, i16)>) -> DecodeResult<()> {
    use km::txn_offset_commit_response as o;
    let m = km::TxnOffsetCommitResponse::default().with_topics(
        topics
            .iter()
            .map(|(t, ps)| {
                o::TxnOffsetCommitResponseTopic::default()
                    .with_name(sb(t).into())
                    .with_partitions(
                        ps.iter()
                            .map(|&(p, e)| {
                                o::TxnOffsetCommitResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_error_code(e)
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    w.message(&m, version)
}

// ------------------------------------------------------------ EndTxn

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndTxnRequest {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub committed: bool,
}

pub fn decode_end_txn(r: &mut Reader, version: i16) -> DecodeResult<EndTxnRequest> {
    let mut f = Fields::new(r, version >= 3);
    let req = EndTxnRequest {
        transactional_id: f.string()?,
        producer_id: f.r.i64()?,
        producer_epoch: f.r.i16()?,
        committed: f.r.bool()?,
    };
    f.tags()?;
    f.r.expect_end()?;
    Ok(req)
}

/// v5+ also names the producer id and epoch to use next (KIP-890).
pub fn encode_end_txn(w: &mut Writer, version: i16, error_code: i16, producer: (i64, i16)) -> DecodeResult<()> {
    let m = km::EndTxnResponse::default()
        .with_error_code(error_code)
        .with_producer_id(producer.0.into())
        .with_producer_epoch(producer.1);
    w.message(&m, version)
}

// ------------------------------------------------------------ Describe / List

pub fn decode_describe_transactions(r: &mut Reader, _version: i16) -> DecodeResult<Vec<String>> {
    let mut f = Fields::new(r, true);
    let n = f.array_len(f.min_string())?;
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(f.string()?);
    }
    f.tags()?;
    f.r.expect_end()?;
    Ok(ids)
}

/// One transactional id as DescribeTransactions shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedTxn {
    pub error_code: i16,
    pub transactional_id: String,
    pub state: String,
    pub timeout_ms: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub topics: PerTopic<i32>,
}

pub fn encode_describe_transactions(w: &mut Writer, version: i16, txns: &[DescribedTxn]) -> DecodeResult<()> {
    use km::describe_transactions_response as o;
    let m = km::DescribeTransactionsResponse::default().with_transaction_states(
        txns.iter()
            .map(|t| {
                o::TransactionState::default()
                    .with_error_code(t.error_code)
                    .with_transactional_id(sb(&t.transactional_id).into())
                    .with_transaction_state(sb(&t.state))
                    .with_transaction_timeout_ms(t.timeout_ms)
                    .with_transaction_start_time_ms(-1)
                    .with_producer_id(t.producer_id.into())
                    .with_producer_epoch(t.producer_epoch)
                    .with_topics(
                        t.topics
                            .iter()
                            .map(|(name, ps)| {
                                o::TopicData::default()
                                    .with_topic(sb(name).into())
                                    .with_partitions(ps.clone())
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    w.message(&m, version)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListTransactionsRequest {
    pub state_filters: Vec<String>,
    pub producer_id_filters: Vec<i64>,
    /// v1+: only transactions running longer than this (ms; -1: all).
    pub duration_filter: i64,
    /// v2+: only ids matching this regular expression.
    pub transactional_id_pattern: Option<String>,
}

pub fn decode_list_transactions(r: &mut Reader, version: i16) -> DecodeResult<ListTransactionsRequest> {
    let mut f = Fields::new(r, true);
    let n = f.array_len(f.min_string())?;
    let mut state_filters = Vec::with_capacity(n);
    for _ in 0..n {
        state_filters.push(f.string()?);
    }
    let n = f.array_len(8)?;
    let mut producer_id_filters = Vec::with_capacity(n);
    for _ in 0..n {
        producer_id_filters.push(f.r.i64()?);
    }
    let duration_filter = if version >= 1 { f.r.i64()? } else { -1 };
    let transactional_id_pattern = if version >= 2 { f.nullable_string()? } else { None };
    f.tags()?;
    f.r.expect_end()?;
    Ok(ListTransactionsRequest {
        state_filters,
        producer_id_filters,
        duration_filter,
        transactional_id_pattern,
    })
}

pub fn encode_list_transactions(
    w: &mut Writer,
    version: i16,
    error_code: i16,
    unknown_state_filters: &[String],
    txns: &[(String, i64, &str)],
) -> DecodeResult<()> {
    use km::list_transactions_response as o;
    let m = km::ListTransactionsResponse::default()
        .with_error_code(error_code)
        .with_unknown_state_filters(unknown_state_filters.iter().map(|s| sb(s)).collect())
        .with_transaction_states(
            txns.iter()
                .map(|(id, pid, state)| {
                    o::TransactionState::default()
                        .with_transactional_id(sb(id).into())
                        .with_producer_id((*pid).into())
                        .with_transaction_state(sb(state))
                })
                .collect(),
        );
    w.message(&m, version)
}

#[cfg(test)]
mod tests;
