//! ListOffsets: a partition's earliest or latest offset, or the first
//! offset at or after a timestamp (scanning stored batch headers).

use super::leader_epoch::check_leader_epoch;
use super::proto::*;
use super::{code, error_code};
use crate::api::{ApiError, ErrorCode, Services};
use crate::ids::Offset;
use std::time::Duration;

const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

pub(super) async fn list_offsets(
    engine: &Services,
    req: ListOffsetsRequest,
) -> Vec<(String, Vec<ListOffsetsPartitionResponse>)> {
    let me = engine.cluster.ready().node_id;
    let mut out = Vec::with_capacity(req.topics.len());
    for (topic, parts) in req.topics {
        let described = engine.topics.describe_topic(&topic);
        let mut answers = Vec::with_capacity(parts.len());
        for (partition, requested_epoch, timestamp) in parts {
            let fail = |error_code| ListOffsetsPartitionResponse {
                partition,
                error_code,
                timestamp: -1,
                offset: -1,
                leader_epoch: -1,
            };
            let info = match &described {
                Ok(d) => d
                    .partition_info
                    .iter()
                    .find(|p| i64::from(p.partition) == i64::from(partition)),
                Err(_) => None,
            };
            let Some(info) = info else {
                answers.push(fail(code::UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            };
            if info.state != "open" || info.owner.as_deref() != Some(me.as_str()) {
                answers.push(fail(code::NOT_LEADER_OR_FOLLOWER));
                continue;
            }
            if let Some(error) = check_leader_epoch(requested_epoch, info.stream_epoch.get()) {
                answers.push(fail(error));
                continue;
            }
            let leader_epoch = i32::try_from(info.stream_epoch.get()).unwrap_or(i32::MAX);
            let found = match timestamp {
                EARLIEST => Ok((-1, info.start_offset.get() as i64)),
                LATEST => Ok((-1, info.end_offset.get() as i64)),
                ts => offset_for_timestamp(engine, &topic, info.partition, info.start_offset, ts).await,
            };
            answers.push(match found {
                Ok((timestamp, offset)) => ListOffsetsPartitionResponse {
                    partition,
                    error_code: code::NONE,
                    timestamp,
                    offset,
                    leader_epoch,
                },
                Err(e) => fail(error_code(&e)),
            });
        }
        out.push((topic, answers));
    }
    out
}

/// The first record with a timestamp at or after `ts`: (its timestamp, its
/// offset), or (-1, -1) when there is none. Scans batch headers from the
/// start, decoding only the batch that holds the answer.
pub async fn offset_for_timestamp(
    engine: &Services,
    topic: &str,
    partition: u32,
    start: Offset,
    ts: i64,
) -> Result<(i64, i64), ApiError> {
    let mut from = start;
    loop {
        let read = engine
            .records
            .read_batches(topic, partition, from, 1 << 20, Duration::ZERO)
            .await?;
        if read.batches.is_empty() {
            return Ok((-1, -1));
        }
        for b in &read.batches {
            let info = crate::batch::parse_batch("stored batch", b)
                .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
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
