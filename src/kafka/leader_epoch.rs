//! OffsetForLeaderEpoch (clients checking for log truncation after a
//! leader change): its codec and handler over the
//! [`Records`](crate::api::Records) capability, and the current-leader-epoch
//! check Fetch and ListOffsets share.

use super::code;
use super::wire::{DecodeResult, Reader, Writer};
use crate::api::Services;
use crate::ids::StreamEpoch;

pub const OFFSET_FOR_LEADER_EPOCH: i16 = 23;

/// A request's current leader epoch (-1 = not given) against the stream
/// epoch: older → `FENCED_LEADER_EPOCH`, newer → `UNKNOWN_LEADER_EPOCH`.
pub fn check_leader_epoch(requested: i32, stream_epoch: u64) -> Option<i16> {
    let requested = u64::try_from(requested).ok()?;
    match requested.cmp(&stream_epoch) {
        std::cmp::Ordering::Less => Some(code::FENCED_LEADER_EPOCH),
        std::cmp::Ordering::Greater => Some(code::UNKNOWN_LEADER_EPOCH),
        std::cmp::Ordering::Equal => None,
    }
}

pub(super) fn stream_epoch(engine: &Services, topic: &str, partition: u32) -> Option<u64> {
    let d = engine.topics.describe_topic(topic).ok()?;
    let p = d.partition_info.iter().find(|p| p.partition == partition)?;
    Some(p.stream_epoch.get())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderEpochRequest {
    /// (topic, [(partition, current leader epoch or -1, leader epoch)])
    pub topics: super::proto::PerTopic<(i32, i32, i32)>,
}

pub fn decode_offset_for_leader_epoch(r: &mut Reader, version: i16) -> DecodeResult<LeaderEpochRequest> {
    let mut f = super::proto::Fields::new(r, version >= 4);
    if version >= 3 {
        let _replica_id = f.r.i32()?;
    }
    let part_len = if version >= 2 { 12 } else { 8 } + f.min_tags();
    let topics = f.per_topic(part_len, |f| {
        let partition = f.r.i32()?;
        let current = if version >= 2 { f.r.i32()? } else { -1 };
        Ok((partition, current, f.r.i32()?))
    })?;
    f.tags()?;
    f.r.expect_end()?;
    Ok(LeaderEpochRequest { topics })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderEpochAnswer {
    pub error_code: i16,
    pub partition: i32,
    pub leader_epoch: i32,
    pub end_offset: i64,
}

/// The response body, v0-v4 (v4 flexible). Written by hand: kafka-protocol
/// knows only v2-v4 of it.
pub fn encode_offset_for_leader_epoch(w: &mut Writer, version: i16, topics: &[(String, Vec<LeaderEpochAnswer>)]) {
    let flexible = version >= 4;
    let array_len = |w: &mut Writer, n: usize| {
        if flexible {
            w.compact_array_len(n)
        } else {
            w.array_len(n)
        }
    };
    if version >= 2 {
        w.i32(0); // throttle_time_ms
    }
    array_len(w, topics.len());
    for (name, parts) in topics {
        if flexible {
            w.compact_string(name);
        } else {
            w.string(name);
        }
        array_len(w, parts.len());
        for p in parts {
            w.i16(p.error_code);
            w.i32(p.partition);
            if version >= 1 {
                w.i32(p.leader_epoch);
            }
            w.i64(p.end_offset);
            if flexible {
                w.no_tagged_fields();
            }
        }
        if flexible {
            w.no_tagged_fields();
        }
    }
    if flexible {
        w.no_tagged_fields();
    }
}

/// For each partition this node leads: the end offset of the asked epoch
/// (the start of the next stream epoch, or the high watermark for the
/// current one). An epoch newer than the current answers -1 / -1 as Kafka
/// does; `current_leader_epoch` is checked like in Fetch.
pub async fn offset_for_leader_epoch(
    engine: &Services,
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
    engine: &Services,
    topic: &str,
    partition: i32,
    current: i32,
    asked: i32,
) -> Result<(i32, i64), i16> {
    let p = u32::try_from(partition).map_err(|_| code::UNKNOWN_TOPIC_OR_PARTITION)?;
    let Some(epoch) = stream_epoch(engine, topic, p) else {
        return Err(code::UNKNOWN_TOPIC_OR_PARTITION);
    };
    if let Some(error) = check_leader_epoch(current, epoch) {
        return Err(error);
    }
    let Ok(asked) = u64::try_from(asked) else {
        return Ok((-1, -1));
    };
    if asked > epoch {
        // Kafka answers an epoch newer than the leader's as undefined (-1,
        // -1), which clients take for truncation and reset by policy (to
        // offset 0 under `earliest`). Here offsets are never truncated: a
        // client has seen `asked` from a node whose view is ahead of this
        // one's, so the answer is to retry once this view catches up.
        return Err(code::UNKNOWN_LEADER_EPOCH);
    }
    let end = engine
        .records
        .leader_epoch_end(topic, p, StreamEpoch(asked))
        .await
        .map_err(|e| super::error_code(&e))?;
    let asked = i32::try_from(asked).unwrap_or(i32::MAX);
    Ok((asked, i64::try_from(end.get()).unwrap_or(i64::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(w: Writer) -> Reader {
        Reader::new(w.buf.freeze())
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
