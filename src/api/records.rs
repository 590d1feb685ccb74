//! The records capability: appending to and reading from one partition,
//! as records (HTTP, Durable Streams) or as stored RecordBatch v2 bytes
//! (Kafka), Durable Streams writes checked by the stream's sequencer,
//! where a leader epoch ended, moving a partition's start (Kafka's
//! DeleteRecords), and the idempotent producers a partition remembers.

use super::{ApiResult, Appended, BatchRead, ProducerState, ReadFrom, ReadRequest, ReadResult};
use crate::batch::Record;
use crate::ids::{Offset, StreamEpoch};
use crate::meta::writers::{DsAppend, DsWrite};
use async_trait::async_trait;
use std::time::Duration;

/// The transaction a marker ends: its transactional id and the log index
/// it began at ([`TxnSummary::started_at`](super::TxnSummary::started_at)).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MarkerOf {
    pub transactional_id: String,
    pub started_at: u64,
}

#[async_trait]
pub trait Records: Send + Sync + 'static {
    /// Append records to one partition atomically; returns once every record
    /// is durable.
    async fn append(&self, topic: &str, partition: u32, records: Vec<Record>) -> ApiResult<Appended>;

    /// Records from `req.from` on, within `req`'s bounds; a long poll waits
    /// up to `req.wait` when there are none yet.
    async fn read(&self, topic: &str, partition: u32, req: ReadRequest) -> ApiResult<ReadResult>;

    /// Append records for a Durable Streams writer: on the stream's owner,
    /// its producer and `Stream-Seq` are checked and the records appended in
    /// one step (no records: only checked). Forwarded like `append`.
    async fn append_durable(
        &self,
        topic: &str,
        partition: u32,
        write: DsWrite,
        records: Vec<Record>,
    ) -> ApiResult<DsAppend>;

    /// Append one producer-encoded RecordBatch v2 (CRC-checked by the
    /// caller) to a partition this node owns, assigning its offsets; returns
    /// once durable. Never forwarded itself (Kafka clients go to the
    /// leader); the owner's end of a forwarded append.
    async fn append_batch(&self, topic: &str, partition: u32, batch: bytes::Bytes) -> ApiResult<Appended>;

    /// A transaction marker (a control batch the transaction coordinator
    /// encoded) appended to a partition: on its owner, or forwarded there.
    /// It ends the producer's open transaction in the partition; with none
    /// open (a retry) nothing is appended and the answer has no records.
    /// When `of` names the transaction, the owner first checks, against
    /// the log's newest word, that it is still the one ending: a late
    /// marker of a completed transaction appends nothing, so it can never
    /// end the producer's next transaction in the partition early.
    async fn append_marker(
        &self,
        topic: &str,
        partition: u32,
        marker: bytes::Bytes,
        of: Option<MarkerOf>,
    ) -> ApiResult<Appended>;

    /// Stored batches from `from` on, up to about `max_bytes` (at least one
    /// batch when any exists), never past the high watermark — nor, when
    /// `committed` (Kafka's read_committed), past the last stable offset,
    /// with the aborted transactions of the range; waits up to `wait` when
    /// `from` is at that end.
    async fn read_batches(
        &self,
        topic: &str,
        partition: u32,
        from: Offset,
        max_bytes: usize,
        wait: Duration,
        committed: bool,
    ) -> ApiResult<BatchRead>;

    /// `Some` when a subscription to this partition is served by its owner
    /// on another node (see `crate::route`): the owner's answer to the
    /// subscriber's own request (`path_and_query`, resumed after
    /// `last_event_id`), relayed as it arrives. `None`: serve it here.
    async fn relay_subscription(
        &self,
        topic: &str,
        partition: u32,
        path_and_query: &str,
        last_event_id: Option<&str>,
    ) -> Option<ApiResult<super::ByteStream>>;

    /// Where leader (stream) epoch `epoch` of a partition this node owns
    /// ended: the start offset of the next epoch, or the high watermark for
    /// the current epoch (Kafka's OffsetForLeaderEpoch).
    async fn leader_epoch_end(&self, topic: &str, partition: u32, epoch: StreamEpoch) -> ApiResult<Offset>;

    /// Move the start of a partition this node owns up to `before` (`None`:
    /// the high watermark), as Kafka's DeleteRecords does; records below it
    /// are no longer readable. Returns the start after the call (the
    /// partition's low watermark), never lower than it was. `before` past
    /// the high watermark is `offset_out_of_range`. Waits while the tail up
    /// to `before` is flushed; not forwarded.
    async fn delete_before(&self, topic: &str, partition: u32, before: Option<Offset>) -> ApiResult<Offset>;

    /// The idempotent producers a partition this node owns remembers, by
    /// producer id (Kafka's DescribeProducers). Never forwarded:
    /// `unavailable` when another node owns it.
    async fn producers(&self, topic: &str, partition: u32) -> ApiResult<Vec<ProducerState>>;
}

/// A partition's high watermark, as its owner answers a read of nothing
/// at its end (forwarded by the front door if another node owns it).
pub async fn high_watermark(records: &dyn Records, topic: &str, partition: u32) -> ApiResult<Offset> {
    let req = ReadRequest {
        from: ReadFrom::End,
        limit: 1,
        max_bytes: 1,
        wait: Duration::ZERO,
        committed: false,
        consistency: Default::default(),
    };
    Ok(records.read(topic, partition, req).await?.high_watermark)
}

/// A partition's last stable offset, as a committed read at its high
/// watermark `hw` answers it (reading nothing: the read starts at or past
/// the last stable offset).
pub async fn last_stable(records: &dyn Records, topic: &str, partition: u32, hw: Offset) -> ApiResult<Offset> {
    let read = records
        .read_batches(topic, partition, hw, 1, Duration::ZERO, true)
        .await?;
    Ok(read.last_stable)
}

/// The first record with a timestamp at or after `ts` (Kafka's ListOffsets
/// by timestamp, and HTTP reads by time): (its timestamp, its
/// offset), or (-1, -1) when there is none. Scans batch headers from the
/// start, decoding only the batch that holds the answer.
pub async fn offset_for_timestamp(
    records: &dyn Records,
    topic: &str,
    partition: u32,
    start: Offset,
    ts: i64,
) -> ApiResult<(i64, i64)> {
    let mut from = start;
    loop {
        let read = records
            .read_batches(topic, partition, from, 1 << 20, Duration::ZERO, false)
            .await?;
        if read.batches.is_empty() {
            return Ok((-1, -1));
        }
        for b in &read.batches {
            let info = crate::batch::parse_batch("stored batch", b)
                .map_err(|e| super::ApiError::new(super::ErrorCode::Internal, e.to_string()))?;
            if info.max_timestamp >= ts && info.end_offset() > from {
                if let Ok(records) = crate::batch::decode_records("stored batch", b) {
                    if let Some((o, r)) = records.iter().find(|(o, r)| *o >= from && r.timestamp_ms >= ts) {
                        return Ok((r.timestamp_ms, o.get() as i64));
                    }
                } else {
                    return Ok((info.max_timestamp, info.base_offset.max(from).get() as i64));
                }
            }
            from = from.max(info.end_offset());
        }
    }
}
