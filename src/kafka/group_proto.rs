//! Requests and responses of the classic consumer-group APIs, at every version the `SUPPORTED` table of `versions.rs`
//! advertises, flexible ones included. Requests are decoded with bounded
//! readers ([`Fields`] reads a field in the classic or compact form);
//! responses are written by kafka-protocol's generated encoders.

use super::header::flexible_request;
use super::proto::{Fields, PerTopic};
use super::wire::{DecodeResult, Reader, Writer};
use bytes::Bytes;
use kafka_protocol::messages as km;
use kafka_protocol::protocol::StrBytes;

pub const OFFSET_COMMIT: i16 = 8;
pub const OFFSET_FETCH: i16 = 9;
pub const FIND_COORDINATOR: i16 = 10;
pub const JOIN_GROUP: i16 = 11;
pub const HEARTBEAT: i16 = 12;
pub const LEAVE_GROUP: i16 = 13;
pub const SYNC_GROUP: i16 = 14;
pub const DESCRIBE_GROUPS: i16 = 15;
pub const LIST_GROUPS: i16 = 16;
pub const DELETE_GROUPS: i16 = 42;

/// Is `key` one of the group APIs?
pub fn is_group_api(key: i16) -> bool {
    matches!(key, OFFSET_COMMIT..=LIST_GROUPS | DELETE_GROUPS)
}

fn fields(r: &mut Reader, key: i16, version: i16) -> Fields<'_> {
    Fields::new(r, flexible_request(key, version))
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn osb(s: Option<&str>) -> Option<StrBytes> {
    s.map(sb)
}

fn bytes(f: &mut Fields) -> DecodeResult<Bytes> {
    Ok(f.nullable_bytes()?.unwrap_or_default())
}

/// An array of strings.
fn strings(f: &mut Fields) -> DecodeResult<Vec<String>> {
    let n = f.array_len(f.min_string())?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(f.string()?);
    }
    Ok(out)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindCoordinatorRequest {
    /// One key before v4; v4+ batches them (`coordinator_keys`).
    pub keys: Vec<String>,
    pub key_type: i8,
}

pub fn decode_find_coordinator(r: &mut Reader, version: i16) -> DecodeResult<FindCoordinatorRequest> {
    let mut f = fields(r, FIND_COORDINATOR, version);
    let (keys, key_type) = if version >= 4 {
        let key_type = f.r.i8()?;
        (strings(&mut f)?, key_type)
    } else {
        let key = f.string()?;
        let key_type = if version >= 1 { f.r.i8()? } else { 0 };
        (vec![key], key_type)
    };
    f.tags()?;
    f.r.expect_end()?;
    Ok(FindCoordinatorRequest { keys, key_type })
}

/// One key's coordinator: (key, error code, node id, host, port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundCoordinator {
    pub key: String,
    pub error_code: i16,
    pub node: i32,
    pub host: String,
    pub port: i32,
}

/// Before v4 the single key's answer fills the top-level fields; v4+
/// answers each key in `coordinators`.
pub fn encode_find_coordinator(w: &mut Writer, version: i16, found: &[FoundCoordinator]) -> DecodeResult<()> {
    let mut resp = km::FindCoordinatorResponse::default();
    if version >= 4 {
        resp.coordinators = found
            .iter()
            .map(|c| {
                km::find_coordinator_response::Coordinator::default()
                    .with_key(sb(&c.key))
                    .with_node_id(km::BrokerId(c.node))
                    .with_host(sb(&c.host))
                    .with_port(c.port)
                    .with_error_code(c.error_code)
            })
            .collect();
    } else if let Some(c) = found.first() {
        resp = resp
            .with_error_code(c.error_code)
            .with_node_id(km::BrokerId(c.node))
            .with_host(sb(&c.host))
            .with_port(c.port);
    }
    w.message(&resp, version)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupRequest {
    pub group_id: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// v8+: why the member (re)joins, for the log.
    pub reason: Option<String>,
}

pub fn decode_join_group(r: &mut Reader, version: i16) -> DecodeResult<JoinGroupRequest> {
    let mut f = fields(r, JOIN_GROUP, version);
    let group_id = f.string()?;
    let session_timeout_ms = f.r.i32()?;
    let rebalance_timeout_ms = if version >= 1 { f.r.i32()? } else { session_timeout_ms };
    let member_id = f.string()?;
    let group_instance_id = if version >= 5 { f.nullable_string()? } else { None };
    let protocol_type = f.string()?;
    let n = f.array_len(f.min_string() + f.min_string() + f.min_tags())?;
    let mut protocols = Vec::with_capacity(n);
    for _ in 0..n {
        let name = f.string()?;
        let meta = bytes(&mut f)?;
        f.tags()?;
        protocols.push((name, meta));
    }
    let reason = if version >= 8 { f.nullable_string()? } else { None };
    f.tags()?;
    f.r.expect_end()?;
    Ok(JoinGroupRequest {
        group_id,
        session_timeout_ms,
        rebalance_timeout_ms,
        member_id,
        group_instance_id,
        protocol_type,
        protocols,
        reason,
    })
}

/// The JoinGroup answer; `protocol_type` is the group's (v7+), and
/// `skip_assignment` (v9+) tells a static leader that rejoined a stable
/// group to keep the current assignment.
pub fn encode_join_group(
    w: &mut Writer,
    version: i16,
    j: &super::groups::Joined,
    protocol_type: Option<&str>,
    skip_assignment: bool,
) -> DecodeResult<()> {
    let protocol = (j.error_code == 0).then_some(j.protocol.as_str());
    let resp = km::JoinGroupResponse::default()
        .with_error_code(j.error_code)
        .with_generation_id(j.generation)
        .with_protocol_type(if version >= 7 {
            osb(protocol_type.filter(|_| j.error_code == 0))
        } else {
            None
        })
        .with_protocol_name(if version >= 7 {
            osb(protocol)
        } else {
            Some(sb(&j.protocol))
        })
        .with_leader(sb(&j.leader))
        .with_skip_assignment(version >= 9 && skip_assignment)
        .with_member_id(sb(&j.member_id))
        .with_members(
            j.members
                .iter()
                .map(|(id, meta)| {
                    km::join_group_response::JoinGroupResponseMember::default()
                        .with_member_id(sb(id))
                        .with_metadata(meta.clone())
                })
                .collect(),
        );
    w.message(&resp, version)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    /// v3+: a static member's `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// v5+: the protocol type and name the member believes in.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

pub fn decode_sync_group(r: &mut Reader, version: i16) -> DecodeResult<SyncGroupRequest> {
    let mut f = fields(r, SYNC_GROUP, version);
    let group_id = f.string()?;
    let generation_id = f.r.i32()?;
    let member_id = f.string()?;
    let group_instance_id = if version >= 3 { f.nullable_string()? } else { None };
    let (protocol_type, protocol_name) = if version >= 5 {
        (f.nullable_string()?, f.nullable_string()?)
    } else {
        (None, None)
    };
    let n = f.array_len(f.min_string() + f.min_string() + f.min_tags())?;
    let mut assignments = Vec::with_capacity(n);
    for _ in 0..n {
        let id = f.string()?;
        let a = bytes(&mut f)?;
        f.tags()?;
        assignments.push((id, a));
    }
    f.tags()?;
    f.r.expect_end()?;
    Ok(SyncGroupRequest {
        group_id,
        generation_id,
        member_id,
        group_instance_id,
        protocol_type,
        protocol_name,
        assignments,
    })
}

/// The SyncGroup answer; v5+ names the group's protocol type and name.
pub fn encode_sync_group(
    w: &mut Writer,
    version: i16,
    error_code: i16,
    assignment: &Bytes,
    protocol: Option<(&str, &str)>,
) -> DecodeResult<()> {
    let (t, n) = match protocol {
        Some((t, n)) if version >= 5 => (Some(sb(t)), Some(sb(n))),
        _ => (None, None),
    };
    let resp = km::SyncGroupResponse::default()
        .with_error_code(error_code)
        .with_protocol_type(t)
        .with_protocol_name(n)
        .with_assignment(assignment.clone());
    w.message(&resp, version)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    /// v3+: a static member's `group.instance.id`.
    pub group_instance_id: Option<String>,
}

pub fn decode_heartbeat(r: &mut Reader, version: i16) -> DecodeResult<HeartbeatRequest> {
    let mut f = fields(r, HEARTBEAT, version);
    let group_id = f.string()?;
    let generation_id = f.r.i32()?;
    let member_id = f.string()?;
    let group_instance_id = if version >= 3 { f.nullable_string()? } else { None };
    f.tags()?;
    f.r.expect_end()?;
    Ok(HeartbeatRequest {
        group_id,
        generation_id,
        member_id,
        group_instance_id,
    })
}

pub fn encode_heartbeat(w: &mut Writer, version: i16, error_code: i16) -> DecodeResult<()> {
    w.message(&km::HeartbeatResponse::default().with_error_code(error_code), version)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupRequest {
    pub group_id: String,
    pub member_ids: Vec<String>,
    /// v3+: each member's `group.instance.id`, in step with `member_ids`.
    pub instance_ids: Vec<Option<String>>,
    /// v5+: each member's reason for leaving, in step with `member_ids`.
    pub reasons: Vec<Option<String>>,
}

pub fn decode_leave_group(r: &mut Reader, version: i16) -> DecodeResult<LeaveGroupRequest> {
    let mut f = fields(r, LEAVE_GROUP, version);
    let group_id = f.string()?;
    let mut member_ids = Vec::new();
    let mut instance_ids = Vec::new();
    let mut reasons = Vec::new();
    if version >= 3 {
        let n = f.array_len(f.min_string() * 2 + f.min_tags())?;
        for _ in 0..n {
            member_ids.push(f.string()?);
            instance_ids.push(f.nullable_string()?);
            reasons.push(if version >= 5 { f.nullable_string()? } else { None });
            f.tags()?;
        }
    } else {
        member_ids.push(f.string()?);
        instance_ids.push(None);
        reasons.push(None);
    }
    f.tags()?;
    f.r.expect_end()?;
    Ok(LeaveGroupRequest {
        group_id,
        member_ids,
        instance_ids,
        reasons,
    })
}

/// (member id, instance id, error code) per member, from v3.
pub type LeftMember = (String, Option<String>, i16);

pub fn encode_leave_group(w: &mut Writer, version: i16, error_code: i16, members: &[LeftMember]) -> DecodeResult<()> {
    let mut resp = km::LeaveGroupResponse::default().with_error_code(error_code);
    if version >= 3 {
        resp.members = members
            .iter()
            .map(|(id, instance, e)| {
                km::leave_group_response::MemberResponse::default()
                    .with_member_id(sb(id))
                    .with_group_instance_id(osb(instance.as_deref()))
                    .with_error_code(*e)
            })
            .collect();
    }
    w.message(&resp, version)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitPartition {
    pub partition: i32,
    pub offset: i64,
    pub metadata: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    pub group_id: String,
    /// The generation (classic groups) or member epoch (v9+, consumer groups).
    pub generation_id: i32,
    pub member_id: String,
    /// v7+: a static member's `group.instance.id`.
    pub group_instance_id: Option<String>,
    pub topics: PerTopic<CommitPartition>,
}

pub fn decode_offset_commit(r: &mut Reader, version: i16) -> DecodeResult<OffsetCommitRequest> {
    let mut f = fields(r, OFFSET_COMMIT, version);
    let group_id = f.string()?;
    let (generation_id, member_id) = if version >= 1 {
        (f.r.i32()?, f.string()?)
    } else {
        (-1, String::new())
    };
    if (2..=4).contains(&version) {
        f.r.i64()?; // retention_time_ms: offsets are kept until the group is deleted
    }
    let group_instance_id = if version >= 7 { f.nullable_string()? } else { None };
    let part_len = 4 + 8 + f.min_string() + f.min_tags();
    let topics = f.per_topic(part_len, |f| {
        let partition = f.r.i32()?;
        let offset = f.r.i64()?;
        if version >= 6 {
            f.r.i32()?; // committed_leader_epoch
        }
        if version == 1 {
            f.r.i64()?; // commit_timestamp
        }
        let metadata = f.nullable_string()?;
        Ok(CommitPartition {
            partition,
            offset,
            metadata,
        })
    })?;
    f.tags()?;
    f.r.expect_end()?;
    Ok(OffsetCommitRequest {
        group_id,
        generation_id,
        member_id,
        group_instance_id,
        topics,
    })
}

/// The generated OffsetCommit structs start at v2 (Kafka 4 dropped v0
/// and v1); the v0 and v1 responses are the v2 one byte for byte.
pub fn encode_offset_commit(w: &mut Writer, version: i16, topics: &PerTopic<(i32, i16)>) -> DecodeResult<()> {
    let version = version.max(2);
    use km::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
    let resp = km::OffsetCommitResponse::default().with_topics(
        topics
            .iter()
            .map(|(name, parts)| {
                OffsetCommitResponseTopic::default()
                    .with_name(km::TopicName(sb(name)))
                    .with_partitions(
                        parts
                            .iter()
                            .map(|(p, e)| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(*p)
                                    .with_error_code(*e)
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    w.message(&resp, version)
}

/// One group's part of an OffsetFetch (before v8 the request is one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchGroup {
    pub group_id: String,
    /// v9+: the asking member of a consumer group, and its epoch (-1: none).
    pub member_id: Option<String>,
    pub member_epoch: i32,
    /// `None`: every partition the group committed (v2+).
    pub topics: Option<PerTopic<i32>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchRequest {
    pub groups: Vec<OffsetFetchGroup>,
}

fn offset_fetch_topics(f: &mut Fields, nullable: bool) -> DecodeResult<Option<PerTopic<i32>>> {
    f.topic_partition_numbers(nullable)
}

pub fn decode_offset_fetch(r: &mut Reader, version: i16) -> DecodeResult<OffsetFetchRequest> {
    let mut f = fields(r, OFFSET_FETCH, version);
    let groups = if version >= 8 {
        let n = f.array_len(f.min_string() + 1 + f.min_tags())?;
        let mut groups = Vec::with_capacity(n);
        for _ in 0..n {
            let group_id = f.string()?;
            let (member_id, member_epoch) = if version >= 9 {
                (f.nullable_string()?, f.r.i32()?)
            } else {
                (None, -1)
            };
            let topics = offset_fetch_topics(&mut f, true)?;
            f.tags()?;
            groups.push(OffsetFetchGroup {
                group_id,
                member_id,
                member_epoch,
                topics,
            });
        }
        groups
    } else {
        let group_id = f.string()?;
        let topics = offset_fetch_topics(&mut f, version >= 2)?;
        vec![OffsetFetchGroup {
            group_id,
            member_id: None,
            member_epoch: -1,
            topics,
        }]
    };
    if version >= 7 {
        f.r.bool()?; // require_stable: commits are applied before they are answered
    }
    f.tags()?;
    f.r.expect_end()?;
    Ok(OffsetFetchRequest { groups })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    pub partition: i32,
    pub offset: i64,
    pub metadata: Option<String>,
    pub error_code: i16,
}

/// One group's answer: (group id, error code, offsets per topic).
pub type FetchedGroup = (String, i16, PerTopic<FetchedOffset>);

/// Before v8 the one group's answer is the whole response; v8+ answers
/// each group in `groups`.
/// The generated OffsetFetch structs start at v1; the v0 response is the
/// v1 one byte for byte.
pub fn encode_offset_fetch(w: &mut Writer, version: i16, groups: &[FetchedGroup]) -> DecodeResult<()> {
    let version = version.max(1);
    use km::offset_fetch_response as of;
    let mut resp = km::OffsetFetchResponse::default();
    if version >= 8 {
        resp.groups = groups
            .iter()
            .map(|(g, e, topics)| {
                of::OffsetFetchResponseGroup::default()
                    .with_group_id(km::GroupId(sb(g)))
                    .with_error_code(*e)
                    .with_topics(
                        topics
                            .iter()
                            .map(|(name, parts)| {
                                of::OffsetFetchResponseTopics::default()
                                    .with_name(km::TopicName(sb(name)))
                                    .with_partitions(
                                        parts
                                            .iter()
                                            .map(|p| {
                                                of::OffsetFetchResponsePartitions::default()
                                                    .with_partition_index(p.partition)
                                                    .with_committed_offset(p.offset)
                                                    .with_committed_leader_epoch(-1)
                                                    .with_metadata(osb(p.metadata.as_deref()))
                                                    .with_error_code(p.error_code)
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    )
            })
            .collect();
    } else if let Some((_, e, topics)) = groups.first() {
        resp.error_code = if version >= 2 { *e } else { 0 };
        resp.topics = topics
            .iter()
            .map(|(name, parts)| {
                of::OffsetFetchResponseTopic::default()
                    .with_name(km::TopicName(sb(name)))
                    .with_partitions(
                        parts
                            .iter()
                            .map(|p| {
                                of::OffsetFetchResponsePartition::default()
                                    .with_partition_index(p.partition)
                                    .with_committed_offset(p.offset)
                                    .with_committed_leader_epoch(-1)
                                    .with_metadata(osb(p.metadata.as_deref()))
                                    .with_error_code(p.error_code)
                            })
                            .collect(),
                    )
            })
            .collect();
    }
    w.message(&resp, version)
}

/// ListGroups filters (v4+ states, v5+ types); empty: no filter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListGroupsRequest {
    pub states: Vec<String>,
    pub types: Vec<String>,
}

pub fn decode_list_groups(r: &mut Reader, version: i16) -> DecodeResult<ListGroupsRequest> {
    let mut f = fields(r, LIST_GROUPS, version);
    let states = if version >= 4 { strings(&mut f)? } else { Vec::new() };
    let types = if version >= 5 { strings(&mut f)? } else { Vec::new() };
    f.tags()?;
    f.r.expect_end()?;
    Ok(ListGroupsRequest { states, types })
}

/// A listed group: id, protocol type, state (v4+), type (v5+: "classic"
/// or "consumer").
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
    pub group_type: String,
}

pub fn encode_list_groups(w: &mut Writer, version: i16, error_code: i16, groups: &[ListedGroup]) -> DecodeResult<()> {
    let resp = km::ListGroupsResponse::default()
        .with_error_code(error_code)
        .with_groups(
            groups
                .iter()
                .map(|g| {
                    km::list_groups_response::ListedGroup::default()
                        .with_group_id(km::GroupId(sb(&g.group_id)))
                        .with_protocol_type(sb(&g.protocol_type))
                        .with_group_state(if version >= 4 {
                            sb(&g.state)
                        } else {
                            StrBytes::default()
                        })
                        .with_group_type(if version >= 5 {
                            sb(&g.group_type)
                        } else {
                            StrBytes::default()
                        })
                })
                .collect(),
        );
    w.message(&resp, version)
}

/// DescribeGroups (ids and, v3+, whether to include authorized
/// operations) and DeleteGroups (ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupIds {
    pub ids: Vec<String>,
    pub include_authorized_operations: bool,
}

pub fn decode_group_ids(r: &mut Reader, version: i16, key: i16) -> DecodeResult<GroupIds> {
    let mut f = fields(r, key, version);
    let ids = strings(&mut f)?;
    let include_authorized_operations = key == DESCRIBE_GROUPS && version >= 3 && f.r.bool()?;
    f.tags()?;
    f.r.expect_end()?;
    Ok(GroupIds {
        ids,
        include_authorized_operations,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    pub error_code: i16,
    /// v6+.
    pub error_message: Option<String>,
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<DescribedMember>,
    /// v3+: a bit per ACL operation, `i32::MIN` when not asked for.
    pub authorized_operations: i32,
}

pub fn encode_describe_groups(w: &mut Writer, version: i16, groups: &[DescribedGroup]) -> DecodeResult<()> {
    use km::describe_groups_response as dg;
    let resp = km::DescribeGroupsResponse::default().with_groups(
        groups
            .iter()
            .map(|g| {
                dg::DescribedGroup::default()
                    .with_error_code(g.error_code)
                    .with_error_message(if version >= 6 {
                        osb(g.error_message.as_deref())
                    } else {
                        None
                    })
                    .with_group_id(km::GroupId(sb(&g.group_id)))
                    .with_group_state(sb(&g.state))
                    .with_protocol_type(sb(&g.protocol_type))
                    .with_protocol_data(sb(&g.protocol))
                    .with_authorized_operations(if version >= 3 {
                        g.authorized_operations
                    } else {
                        i32::MIN
                    })
                    .with_members(
                        g.members
                            .iter()
                            .map(|m| {
                                dg::DescribedGroupMember::default()
                                    .with_member_id(sb(&m.member_id))
                                    .with_group_instance_id(if version >= 4 {
                                        osb(m.group_instance_id.as_deref())
                                    } else {
                                        None
                                    })
                                    .with_client_id(sb(&m.client_id))
                                    .with_client_host(sb(&m.client_host))
                                    .with_member_metadata(m.metadata.clone())
                                    .with_member_assignment(m.assignment.clone())
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    w.message(&resp, version)
}

pub fn encode_delete_groups(w: &mut Writer, version: i16, results: &[(String, i16)]) -> DecodeResult<()> {
    let resp = km::DeleteGroupsResponse::default().with_results(
        results
            .iter()
            .map(|(id, e)| {
                km::delete_groups_response::DeletableGroupResult::default()
                    .with_group_id(km::GroupId(sb(id)))
                    .with_error_code(*e)
            })
            .collect(),
    );
    w.message(&resp, version)
}
