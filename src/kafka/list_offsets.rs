//! ListOffsets: a partition's earliest or latest offset, the record with
//! the largest timestamp (KIP-734), or the first offset at or after a
//! timestamp (scanning stored batch headers). Without tiered storage the
//! earliest local offset (-4) is the earliest, and there is no last tiered
//! offset (-5 answers -1). With `read_committed` the latest offset is the
//! last stable offset (below it no transaction is open).

use super::leader_epoch::check_leader_epoch;
use super::proto::*;
use super::{code, error_code};
use crate::api::{ApiError, ErrorCode, PartitionInfo, Services};
use crate::ids::Offset;
use std::time::Duration;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// The partition's state, once this node's view serves it: a partition
/// missing from the view, or not open here, is looked at again after
/// catching up with the metadata log, and waited for (up to
/// [`super::CATCH_UP_WAIT`]) while the caught-up view places it here.
async fn served_here(engine: &Services, topic: &str, partition: i32, me: &str) -> Result<PartitionInfo, i16> {
    let look = || {
        let d = engine.topics.describe_topic(topic).ok()?;
        d.partition_info
            .into_iter()
            .find(|p| i64::from(p.partition) == i64::from(partition))
    };
    let deadline = tokio::time::Instant::now() + super::CATCH_UP_WAIT;
    let mut synced = false;
    loop {
        let info = look();
        let here = |p: &PartitionInfo| p.owner.as_deref() == Some(me);
        match info {
            Some(p) if p.state == "open" && here(&p) => return Ok(p),
            Some(p) if synced && (!here(&p) || tokio::time::Instant::now() >= deadline) => {
                return Err(code::NOT_LEADER_OR_FOLLOWER)
            }
            None if synced => return Err(code::UNKNOWN_TOPIC_OR_PARTITION),
            _ if synced => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
            _ => {
                let _ = engine.cluster.sync_metadata().await;
                synced = true;
            }
        }
    }
}

pub(super) async fn list_offsets(
    engine: &Services,
    req: ListOffsetsRequest,
) -> Vec<(String, Vec<ListOffsetsPartitionResponse>)> {
    let me = engine.cluster.ready().node_id;
    let committed = req.isolation_level == 1;
    let mut out = Vec::with_capacity(req.topics.len());
    for (topic, parts) in req.topics {
        let mut answers = Vec::with_capacity(parts.len());
        for (partition, requested_epoch, timestamp) in parts {
            let fail = |error_code| ListOffsetsPartitionResponse {
                partition,
                error_code,
                timestamp: -1,
                offset: -1,
                leader_epoch: -1,
            };
            let info = match served_here(engine, &topic, partition, &me).await {
                Ok(info) => info,
                Err(error) => {
                    answers.push(fail(error));
                    continue;
                }
            };
            if let Some(error) = check_leader_epoch(requested_epoch, info.stream_epoch.get()) {
                answers.push(fail(error));
                continue;
            }
            let leader_epoch = i32::try_from(info.stream_epoch.get()).unwrap_or(i32::MAX);
            let found = match timestamp {
                EARLIEST | EARLIEST_LOCAL => Ok((-1, info.start_offset.get() as i64)),
                LATEST if committed => last_stable(engine, &topic, info.partition, info.end_offset).await,
                LATEST => Ok((-1, info.end_offset.get() as i64)),
                LATEST_TIERED => Ok((-1, -1)),
                MAX_TIMESTAMP => max_timestamp(engine, &topic, info.partition, info.start_offset).await,
                ts => {
                    crate::api::offset_for_timestamp(
                        engine.records.as_ref(),
                        &topic,
                        info.partition,
                        info.start_offset,
                        ts,
                    )
                    .await
                }
            };
            answers.push(match found {
                Ok((found_ts, offset)) => ListOffsetsPartitionResponse {
                    partition,
                    error_code: code::NONE,
                    timestamp: found_ts,
                    offset,
                    leader_epoch: if timestamp == LATEST_TIERED { -1 } else { leader_epoch },
                },
                Err(e) => fail(error_code(&e)),
            });
        }
        out.push((topic, answers));
    }
    out
}

/// The partition's last stable offset (no timestamp), `hw` its high watermark.
async fn last_stable(engine: &Services, topic: &str, partition: u32, hw: Offset) -> Result<(i64, i64), ApiError> {
    let stable = crate::api::last_stable(engine.records.as_ref(), topic, partition, hw).await?;
    Ok((-1, stable.get() as i64))
}

/// The record with the largest timestamp (the first of equals, as Kafka):
/// (its timestamp, its offset), or (-1, -1) for an empty partition. Reads
/// every batch header from `start`, and decodes the batch that holds it.
pub async fn max_timestamp(
    engine: &Services,
    topic: &str,
    partition: u32,
    start: Offset,
) -> Result<(i64, i64), ApiError> {
    let mut from = start;
    let mut best: Option<(i64, bytes::Bytes)> = None;
    loop {
        let read = engine
            .records
            .read_batches(topic, partition, from, 1 << 20, Duration::ZERO, false)
            .await?;
        if read.batches.is_empty() {
            break;
        }
        for b in &read.batches {
            let info = crate::batch::parse_batch("stored batch", b)
                .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
            if best.as_ref().is_none_or(|(ts, _)| info.max_timestamp > *ts) {
                best = Some((info.max_timestamp, b.clone()));
            }
            from = from.max(info.end_offset());
        }
    }
    let Some((ts, batch)) = best else {
        return Ok((-1, -1));
    };
    let info = crate::batch::parse_batch("stored batch", &batch)
        .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    let at = crate::batch::decode_records("stored batch", &batch)
        .ok()
        .and_then(|rs| {
            rs.iter()
                .find(|(o, r)| *o >= start && r.timestamp_ms == ts)
                .map(|(o, _)| o.get() as i64)
        });
    Ok((ts, at.unwrap_or(info.base_offset.max(start).get() as i64)))
}
