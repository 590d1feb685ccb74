//! InitProducerId (idempotent producers, no transactions) and
//! OffsetForLeaderEpoch (clients checking for log truncation after a
//! leader change): codecs and handlers.
//!
//! Sequence checks of idempotent batches happen where offsets are assigned
//! (`stream::partition`, with the state in `stream::producers`); this module
//! only hands out producer ids.

use super::code;
use super::wire::{DecodeResult, Reader, Writer};
use crate::api::Engine;
use crate::ids::StreamEpoch;

pub const INIT_PRODUCER_ID: i16 = 22;
pub const OFFSET_FOR_LEADER_EPOCH: i16 = 23;

// ------------------------------------------------------------ InitProducerId

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    pub transactional_id: Option<String>,
    pub transaction_timeout_ms: i32,
}

/// v0 and v1 share one layout.
pub fn decode_init_producer_id(r: &mut Reader, _version: i16) -> DecodeResult<InitProducerIdRequest> {
    let transactional_id = r.nullable_string()?;
    let transaction_timeout_ms = r.i32()?;
    r.expect_end()?;
    Ok(InitProducerIdRequest {
        transactional_id,
        transaction_timeout_ms,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitProducerIdResponse {
    pub error_code: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

pub fn encode_init_producer_id(w: &mut Writer, _version: i16, resp: &InitProducerIdResponse) {
    w.i32(0); // throttle_time_ms
    w.i16(resp.error_code);
    w.i64(resp.producer_id);
    w.i16(resp.producer_epoch);
}

/// A fresh producer id at epoch 0. Transactional ids are refused:
/// transactions are not implemented (FindCoordinator for a transaction key
/// answers `COORDINATOR_NOT_AVAILABLE` as well).
pub async fn init_producer_id(engine: &dyn Engine, req: &InitProducerIdRequest) -> InitProducerIdResponse {
    let fail = |error_code| InitProducerIdResponse {
        error_code,
        producer_id: -1,
        producer_epoch: -1,
    };
    if req.transactional_id.is_some() {
        return fail(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    }
    match engine.init_producer_id().await {
        Ok(producer_id) => InitProducerIdResponse {
            error_code: code::NONE,
            producer_id,
            producer_epoch: 0,
        },
        // Retryable for the client: the metadata store is down or the
        // node is not serving.
        Err(e) if e.code.retryable() => fail(super::groups::code::COORDINATOR_NOT_AVAILABLE),
        Err(e) => fail(super::error_code(&e)),
    }
}

// ------------------------------------------------------ OffsetForLeaderEpoch

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderEpochRequest {
    /// (topic, [(partition, current leader epoch or -1, leader epoch)])
    pub topics: super::proto::PerTopic<(i32, i32, i32)>,
}

pub fn decode_offset_for_leader_epoch(r: &mut Reader, version: i16) -> DecodeResult<LeaderEpochRequest> {
    if version >= 3 {
        let _replica_id = r.i32()?;
    }
    let part_len = if version >= 2 { 12 } else { 8 };
    let n = r.array_len(2 + 4)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let m = r.array_len(part_len)?;
        let mut parts = Vec::with_capacity(m);
        for _ in 0..m {
            let partition = r.i32()?;
            let current = if version >= 2 { r.i32()? } else { -1 };
            parts.push((partition, current, r.i32()?));
        }
        topics.push((name, parts));
    }
    r.expect_end()?;
    Ok(LeaderEpochRequest { topics })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderEpochAnswer {
    pub error_code: i16,
    pub partition: i32,
    pub leader_epoch: i32,
    pub end_offset: i64,
}

pub fn encode_offset_for_leader_epoch(w: &mut Writer, version: i16, topics: &[(String, Vec<LeaderEpochAnswer>)]) {
    if version >= 2 {
        w.i32(0); // throttle_time_ms
    }
    w.array_len(topics.len());
    for (name, parts) in topics {
        w.string(name);
        w.array_len(parts.len());
        for p in parts {
            w.i16(p.error_code);
            w.i32(p.partition);
            if version >= 1 {
                w.i32(p.leader_epoch);
            }
            w.i64(p.end_offset);
        }
    }
}

/// For each partition this node leads: the end offset of the asked epoch
/// (the start of the next stream epoch, or the high watermark for the
/// current one). An epoch newer than the current answers -1 / -1 as Kafka
/// does; `current_leader_epoch` is checked like in Fetch.
pub async fn offset_for_leader_epoch(
    engine: &dyn Engine,
    req: LeaderEpochRequest,
) -> Vec<(String, Vec<LeaderEpochAnswer>)> {
    let mut out = Vec::with_capacity(req.topics.len());
    for (topic, parts) in req.topics {
        let mut answers = Vec::with_capacity(parts.len());
        for (partition, current, asked) in parts {
            let fail = |error_code| LeaderEpochAnswer {
                error_code,
                partition,
                leader_epoch: -1,
                end_offset: -1,
            };
            let answer = match leader_epoch_end(engine, &topic, partition, current, asked).await {
                Ok((leader_epoch, end_offset)) => LeaderEpochAnswer {
                    error_code: code::NONE,
                    partition,
                    leader_epoch,
                    end_offset,
                },
                Err(error_code) => fail(error_code),
            };
            answers.push(answer);
        }
        out.push((topic, answers));
    }
    out
}

async fn leader_epoch_end(
    engine: &dyn Engine,
    topic: &str,
    partition: i32,
    current: i32,
    asked: i32,
) -> Result<(i32, i64), i16> {
    let p = u32::try_from(partition).map_err(|_| code::UNKNOWN_TOPIC_OR_PARTITION)?;
    let Some(epoch) = super::stream_epoch(engine, topic, p) else {
        return Err(code::UNKNOWN_TOPIC_OR_PARTITION);
    };
    if let Some(error) = super::check_leader_epoch(current, epoch) {
        return Err(error);
    }
    let Ok(asked) = u64::try_from(asked) else {
        return Ok((-1, -1));
    };
    if asked > epoch {
        return Ok((-1, -1));
    }
    let end = engine
        .leader_epoch_end(topic, p, StreamEpoch(asked))
        .await
        .map_err(|e| super::error_code(&e))?;
    let asked = i32::try_from(asked).unwrap_or(i32::MAX);
    Ok((asked, i64::try_from(end.get()).unwrap_or(i64::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn reader(w: Writer) -> Reader {
        Reader::new(w.buf.freeze())
    }

    #[test]
    fn init_producer_id_decodes_a_null_transactional_id() {
        let mut w = Writer::default();
        w.nullable_string(None);
        w.i32(60_000);
        let req = decode_init_producer_id(&mut reader(w), 1).unwrap();
        assert_eq!(req.transactional_id, None);
        assert_eq!(req.transaction_timeout_ms, 60_000);
    }

    #[test]
    fn init_producer_id_response_layout() {
        let mut w = Writer::default();
        encode_init_producer_id(
            &mut w,
            0,
            &InitProducerIdResponse {
                error_code: 0,
                producer_id: 7,
                producer_epoch: 0,
            },
        );
        assert_eq!(
            w.buf.as_ref(),
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0].as_slice(),
            "throttle, error, id, epoch"
        );
    }

    #[test]
    fn leader_epoch_request_versions_differ_in_fields() {
        for version in 0..=3i16 {
            let mut w = Writer::default();
            if version >= 3 {
                w.i32(-1);
            }
            w.array_len(1);
            w.string("t");
            w.array_len(1);
            w.i32(2);
            if version >= 2 {
                w.i32(5);
            }
            w.i32(4);
            let req = decode_offset_for_leader_epoch(&mut reader(w), version).unwrap();
            let current = if version >= 2 { 5 } else { -1 };
            assert_eq!(req.topics, vec![("t".to_string(), vec![(2, current, 4)])], "v{version}");
        }
    }

    #[test]
    fn a_lying_partition_count_is_refused_before_allocating() {
        let mut w = Writer::default();
        w.array_len(1);
        w.string("t");
        w.i32(i32::MAX);
        assert!(decode_offset_for_leader_epoch(&mut reader(w), 1).is_err());
        let short = Bytes::from_static(&[0, 0]);
        assert!(decode_init_producer_id(&mut Reader::new(short), 0).is_err());
    }

    #[test]
    fn leader_epoch_response_v0_has_no_epoch_and_v2_a_throttle_time() {
        let answer = LeaderEpochAnswer {
            error_code: 0,
            partition: 1,
            leader_epoch: 3,
            end_offset: 9,
        };
        let topics = vec![("t".to_string(), vec![answer])];
        let mut v0 = Writer::default();
        encode_offset_for_leader_epoch(&mut v0, 0, &topics);
        let mut v2 = Writer::default();
        encode_offset_for_leader_epoch(&mut v2, 2, &topics);
        assert_eq!(v2.buf.len(), v0.buf.len() + 4 + 4);
    }
}
