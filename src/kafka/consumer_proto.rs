//! Requests and responses of the KIP-848 consumer-group APIs:
//! ConsumerGroupHeartbeat (key 68) and ConsumerGroupDescribe (key 69), v0–v1,
//! both flexible from v0. Requests are decoded by hand on the bounded
//! [`Reader`]; responses are kafka-protocol's generated structs written by
//! [`Writer::message`].

use super::wire::{DecodeResult, Reader};
use crate::ids::TopicUuid;

pub const CONSUMER_GROUP_HEARTBEAT: i16 = 68;
pub const CONSUMER_GROUP_DESCRIBE: i16 = 69;

/// Is `key` one of the KIP-848 consumer-group APIs?
pub fn is_consumer_group_api(key: i16) -> bool {
    matches!(key, CONSUMER_GROUP_HEARTBEAT | CONSUMER_GROUP_DESCRIBE)
}

/// Partitions of one topic, by topic id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPartitions {
    pub topic_id: TopicUuid,
    pub partitions: Vec<i32>,
}

/// A ConsumerGroupHeartbeat request. `None` fields are "unchanged since
/// the last heartbeat" (Kafka's nullable fields).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    /// v1 only.
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// What the member owns now; `None`: unchanged.
    pub topic_partitions: Option<Vec<TopicPartitions>>,
}

fn uuid(r: &mut Reader) -> DecodeResult<TopicUuid> {
    let b = r.bytes_exact(16)?;
    let mut a = [0u8; 16];
    a.copy_from_slice(&b);
    Ok(TopicUuid(a))
}

fn compact_i32s(r: &mut Reader) -> DecodeResult<Vec<i32>> {
    let n = r.compact_nullable_array_len(4)?.ok_or_else(|| null_array(r))?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(r.i32()?);
    }
    Ok(v)
}

fn null_array(r: &Reader) -> super::wire::DecodeError {
    super::wire::DecodeError {
        at: r.position(),
        message: "null where an array is required".into(),
    }
}

fn compact_strings(r: &mut Reader) -> DecodeResult<Option<Vec<String>>> {
    let Some(n) = r.compact_nullable_array_len(1)? else {
        return Ok(None);
    };
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(r.compact_string()?);
    }
    Ok(Some(v))
}

pub fn decode_heartbeat(r: &mut Reader, version: i16) -> DecodeResult<HeartbeatRequest> {
    let group_id = r.compact_string()?;
    let member_id = r.compact_string()?;
    let member_epoch = r.i32()?;
    let instance_id = r.compact_nullable_string()?;
    let rack_id = r.compact_nullable_string()?;
    let rebalance_timeout_ms = r.i32()?;
    let subscribed_topic_names = compact_strings(r)?;
    let subscribed_topic_regex = if version >= 1 {
        r.compact_nullable_string()?
    } else {
        None
    };
    let server_assignor = r.compact_nullable_string()?;
    // Each element: a 16-byte id, a partition array, tagged fields.
    let topic_partitions = match r.compact_nullable_array_len(16 + 1 + 1)? {
        None => None,
        Some(n) => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                let topic_id = uuid(r)?;
                let partitions = compact_i32s(r)?;
                r.tagged_fields()?;
                v.push(TopicPartitions { topic_id, partitions });
            }
            Some(v)
        }
    };
    r.tagged_fields()?;
    r.expect_end()?;
    Ok(HeartbeatRequest {
        group_id,
        member_id,
        member_epoch,
        instance_id,
        rack_id,
        rebalance_timeout_ms,
        subscribed_topic_names,
        subscribed_topic_regex,
        server_assignor,
        topic_partitions,
    })
}

/// A ConsumerGroupDescribe request: the group ids.
pub fn decode_describe(r: &mut Reader, _version: i16) -> DecodeResult<Vec<String>> {
    let ids = compact_strings(r)?.ok_or_else(|| null_array(r))?;
    let _include_authorized_operations = r.bool()?;
    r.tagged_fields()?;
    r.expect_end()?;
    Ok(ids)
}

/// The answer to a heartbeat, before encoding.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatAnswer {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's whole assignment, when it is sent.
    pub assignment: Option<Vec<TopicPartitions>>,
}

impl HeartbeatAnswer {
    pub fn error(code: i16, message: impl Into<String>) -> Self {
        Self {
            error_code: code,
            error_message: Some(message.into()),
            ..Self::default()
        }
    }
}

use kafka_protocol::messages::{consumer_group_describe_response as cgd, consumer_group_heartbeat_response as cgh};
use kafka_protocol::protocol::StrBytes;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub fn heartbeat_response(a: &HeartbeatAnswer) -> kafka_protocol::messages::ConsumerGroupHeartbeatResponse {
    kafka_protocol::messages::ConsumerGroupHeartbeatResponse::default()
        .with_error_code(a.error_code)
        .with_error_message(a.error_message.as_deref().map(s))
        .with_member_id(a.member_id.as_deref().map(s))
        .with_member_epoch(a.member_epoch)
        .with_heartbeat_interval_ms(a.heartbeat_interval_ms)
        .with_assignment(a.assignment.as_ref().map(|tps| {
            cgh::Assignment::default().with_topic_partitions(
                tps.iter()
                    .map(|tp| {
                        cgh::TopicPartitions::default()
                            .with_topic_id(uuid::Uuid::from_bytes(tp.topic_id.0))
                            .with_partitions(tp.partitions.clone())
                    })
                    .collect(),
            )
        }))
}

/// Partitions of one topic in a described member's assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPartitions {
    pub topic_id: TopicUuid,
    pub topic_name: String,
    pub partitions: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub assignment: Vec<NamedPartitions>,
    pub target_assignment: Vec<NamedPartitions>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub group_id: String,
    pub state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<DescribedMember>,
}

fn named(ps: &[NamedPartitions]) -> cgd::Assignment {
    cgd::Assignment::default().with_topic_partitions(
        ps.iter()
            .map(|p| {
                cgd::TopicPartitions::default()
                    .with_topic_id(uuid::Uuid::from_bytes(p.topic_id.0))
                    .with_topic_name(s(&p.topic_name).into())
                    .with_partitions(p.partitions.clone())
            })
            .collect(),
    )
}

pub fn describe_response(
    version: i16,
    groups: &[DescribedGroup],
) -> kafka_protocol::messages::ConsumerGroupDescribeResponse {
    kafka_protocol::messages::ConsumerGroupDescribeResponse::default().with_groups(
        groups
            .iter()
            .map(|g| {
                cgd::DescribedGroup::default()
                    .with_error_code(g.error_code)
                    .with_error_message(g.error_message.as_deref().map(s))
                    .with_group_id(s(&g.group_id).into())
                    .with_group_state(s(&g.state))
                    .with_group_epoch(g.group_epoch)
                    .with_assignment_epoch(g.assignment_epoch)
                    .with_assignor_name(s(&g.assignor_name))
                    .with_authorized_operations(i32::MIN)
                    .with_members(
                        g.members
                            .iter()
                            .map(|m| {
                                let member = cgd::Member::default()
                                    .with_member_id(s(&m.member_id))
                                    .with_instance_id(m.instance_id.as_deref().map(s))
                                    .with_rack_id(m.rack_id.as_deref().map(s))
                                    .with_member_epoch(m.member_epoch)
                                    .with_client_id(s(&m.client_id))
                                    .with_client_host(s(&m.client_host))
                                    .with_subscribed_topic_names(
                                        m.subscribed_topic_names.iter().map(|t| s(t).into()).collect(),
                                    )
                                    .with_subscribed_topic_regex(m.subscribed_topic_regex.as_deref().map(s))
                                    .with_assignment(named(&m.assignment))
                                    .with_target_assignment(named(&m.target_assignment));
                                // v1: 1 = a member of the consumer protocol.
                                if version >= 1 {
                                    member.with_member_type(1)
                                } else {
                                    member
                                }
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests;
