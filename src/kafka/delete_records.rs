//! DeleteRecords (v0–v2; v2 flexible): moving partitions' log start
//! offsets up, through [`Records::delete_before`]. As in Kafka, `-1` is the
//! high watermark, an offset past it (or below -1) is
//! `OFFSET_OUT_OF_RANGE`, an offset at or below the current start changes
//! nothing, and each partition answers its low watermark afterwards; only
//! the partition's owner (leader) serves it. Partitions are handled at
//! once, within the request's `timeout_ms` (`REQUEST_TIMED_OUT` past it:
//! a trim waits while the tail below its offset is flushed).
//!
//! [`Records::delete_before`]: crate::api::Records::delete_before

use super::proto::{Fields, PerTopic};
use super::wire::{DecodeResult, Reader, Writer};
use super::{code, error_code};
use crate::api::Services;
use crate::ids::Offset;
use kafka_protocol::messages as km;
use kafka_protocol::protocol::StrBytes;
use std::time::Duration;

pub const DELETE_RECORDS: i16 = 21;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRecordsRequest {
    /// Per topic: (partition, offset) with -1 for the high watermark.
    pub topics: PerTopic<(i32, i64)>,
    pub timeout_ms: i32,
}

pub fn decode_delete_records(r: &mut Reader, version: i16) -> DecodeResult<DeleteRecordsRequest> {
    let mut f = Fields::new(r, version >= 2);
    let part_len = 4 + 8 + f.min_tags();
    let topics = f.per_topic(part_len, |f| Ok((f.r.i32()?, f.r.i64()?)))?;
    let timeout_ms = f.r.i32()?;
    f.tags()?;
    f.r.expect_end()?;
    Ok(DeleteRecordsRequest { topics, timeout_ms })
}

/// One partition's answer: (partition, low watermark or -1, error code).
pub type Deleted = (i32, i64, i16);

pub fn encode_delete_records(w: &mut Writer, version: i16, topics: &[(String, Vec<Deleted>)]) -> DecodeResult<()> {
    use km::delete_records_response as d;
    let resp = km::DeleteRecordsResponse::default().with_topics(
        topics
            .iter()
            .map(|(name, parts)| {
                d::DeleteRecordsTopicResult::default()
                    .with_name(StrBytes::from_string(name.clone()).into())
                    .with_partitions(
                        parts
                            .iter()
                            .map(|&(p, low, error)| {
                                d::DeleteRecordsPartitionResult::default()
                                    .with_partition_index(p)
                                    .with_low_watermark(low)
                                    .with_error_code(error)
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    w.message(&resp, version)
}

/// Kafka's POLICY_VIOLATION.
const POLICY_VIOLATION: i16 = 44;

async fn delete_one(engine: &Services, topic: &str, partition: i32, offset: i64) -> Deleted {
    let fail = |error| (partition, -1, error);
    let Ok(p) = u32::try_from(partition) else {
        return fail(code::UNKNOWN_TOPIC_OR_PARTITION);
    };
    let before = match offset {
        -1 => None,
        o => match u64::try_from(o) {
            Ok(o) => Some(Offset(o)),
            Err(_) => return fail(code::OFFSET_OUT_OF_RANGE),
        },
    };
    // As Kafka: records of a topic that is only compacted are not deleted
    // by offset (its `delete` policy is what allows it).
    if engine.topics.config(topic).is_ok_and(|c| !c.deletes()) {
        return fail(POLICY_VIOLATION);
    }
    match engine.records.delete_before(topic, p, before).await {
        Ok(low) => (partition, i64::try_from(low.get()).unwrap_or(i64::MAX), code::NONE),
        Err(e) => fail(error_code(&e)),
    }
}

pub async fn delete_records(engine: &Services, req: DeleteRecordsRequest) -> Vec<(String, Vec<Deleted>)> {
    let wait = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0));
    let mut out = Vec::with_capacity(req.topics.len());
    for (topic, parts) in req.topics {
        let each = parts.iter().map(|&(p, o)| {
            let topic = topic.clone();
            async move {
                match tokio::time::timeout(wait, delete_one(engine, &topic, p, o)).await {
                    Ok(answer) => answer,
                    Err(_) => (p, -1, code::REQUEST_TIMED_OUT),
                }
            }
        });
        out.push((topic.clone(), futures::future::join_all(each).await));
    }
    out
}

pub(super) async fn request(engine: &Services, version: i16, r: &mut Reader, w: &mut Writer) -> DecodeResult<()> {
    let req = decode_delete_records(r, version)?;
    let topics = delete_records(engine, req).await;
    encode_delete_records(w, version, &topics)
}
