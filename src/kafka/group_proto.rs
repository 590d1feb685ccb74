//! Requests and responses of the consumer-group APIs, non-flexible versions
//! only (see the `SUPPORTED` table in `versions.rs`), decoded with bounded readers.

use super::proto::PerTopic;
use super::wire::{DecodeResult, Reader, Writer};
use bytes::Bytes;

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

fn bytes(r: &mut Reader) -> DecodeResult<Bytes> {
    Ok(r.nullable_bytes()?.unwrap_or_default())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindCoordinatorRequest {
    pub key: String,
    pub key_type: i8,
}

pub fn decode_find_coordinator(r: &mut Reader, version: i16) -> DecodeResult<FindCoordinatorRequest> {
    let key = r.string()?;
    let key_type = if version >= 1 { r.i8()? } else { 0 };
    r.expect_end()?;
    Ok(FindCoordinatorRequest { key, key_type })
}

pub fn encode_find_coordinator(w: &mut Writer, version: i16, error_code: i16, node: i32, host: &str, port: i32) {
    if version >= 1 {
        w.i32(0);
    }
    w.i16(error_code);
    if version >= 1 {
        w.nullable_string(None);
    }
    w.i32(node);
    w.string(host);
    w.i32(port);
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
}

pub fn decode_join_group(r: &mut Reader, version: i16) -> DecodeResult<JoinGroupRequest> {
    let group_id = r.string()?;
    let session_timeout_ms = r.i32()?;
    let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { session_timeout_ms };
    let member_id = r.string()?;
    let group_instance_id = if version >= 5 { r.nullable_string()? } else { None };
    let protocol_type = r.string()?;
    let n = r.array_len(2 + 4)?;
    let mut protocols = Vec::with_capacity(n);
    for _ in 0..n {
        protocols.push((r.string()?, bytes(r)?));
    }
    r.expect_end()?;
    Ok(JoinGroupRequest {
        group_id,
        session_timeout_ms,
        rebalance_timeout_ms,
        member_id,
        group_instance_id,
        protocol_type,
        protocols,
    })
}

pub fn encode_join_group(w: &mut Writer, version: i16, j: &super::groups::Joined) {
    if version >= 2 {
        w.i32(0);
    }
    w.i16(j.error_code);
    w.i32(j.generation);
    w.string(&j.protocol);
    w.string(&j.leader);
    w.string(&j.member_id);
    w.array_len(j.members.len());
    for (id, meta) in &j.members {
        w.string(id);
        if version >= 5 {
            w.nullable_string(None);
        }
        w.bytes_parts(std::slice::from_ref(meta));
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    /// v3+: a static member's `group.instance.id`.
    pub group_instance_id: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

pub fn decode_sync_group(r: &mut Reader, version: i16) -> DecodeResult<SyncGroupRequest> {
    let group_id = r.string()?;
    let generation_id = r.i32()?;
    let member_id = r.string()?;
    let group_instance_id = if version >= 3 { r.nullable_string()? } else { None };
    let n = r.array_len(2 + 4)?;
    let mut assignments = Vec::with_capacity(n);
    for _ in 0..n {
        assignments.push((r.string()?, bytes(r)?));
    }
    r.expect_end()?;
    Ok(SyncGroupRequest {
        group_id,
        generation_id,
        member_id,
        group_instance_id,
        assignments,
    })
}

pub fn encode_sync_group(w: &mut Writer, version: i16, error_code: i16, assignment: &Bytes) {
    if version >= 1 {
        w.i32(0);
    }
    w.i16(error_code);
    w.bytes_parts(std::slice::from_ref(assignment));
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
    let group_id = r.string()?;
    let generation_id = r.i32()?;
    let member_id = r.string()?;
    let group_instance_id = if version >= 3 { r.nullable_string()? } else { None };
    r.expect_end()?;
    Ok(HeartbeatRequest {
        group_id,
        generation_id,
        member_id,
        group_instance_id,
    })
}

/// Heartbeat responses: (throttle from v1), error code.
pub fn encode_error_only(w: &mut Writer, throttle: bool, error_code: i16) {
    if throttle {
        w.i32(0);
    }
    w.i16(error_code);
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupRequest {
    pub group_id: String,
    pub member_ids: Vec<String>,
    /// v3+: each member's `group.instance.id`, in step with `member_ids`.
    pub instance_ids: Vec<Option<String>>,
}

pub fn decode_leave_group(r: &mut Reader, version: i16) -> DecodeResult<LeaveGroupRequest> {
    let group_id = r.string()?;
    let (member_ids, instance_ids) = if version >= 3 {
        let n = r.array_len(2 + 2)?;
        let mut ids = Vec::with_capacity(n);
        let mut instances = Vec::with_capacity(n);
        for _ in 0..n {
            ids.push(r.string()?);
            instances.push(r.nullable_string()?);
        }
        (ids, instances)
    } else {
        (vec![r.string()?], vec![None])
    };
    r.expect_end()?;
    Ok(LeaveGroupRequest {
        group_id,
        member_ids,
        instance_ids,
    })
}

pub fn encode_leave_group(w: &mut Writer, version: i16, error_code: i16, members: &[(String, i16)]) {
    if version >= 1 {
        w.i32(0);
    }
    w.i16(error_code);
    if version >= 3 {
        w.array_len(members.len());
        for (id, e) in members {
            w.string(id);
            w.nullable_string(None);
            w.i16(*e);
        }
    }
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
    pub generation_id: i32,
    pub member_id: String,
    /// v7+: a static member's `group.instance.id`.
    pub group_instance_id: Option<String>,
    pub topics: PerTopic<CommitPartition>,
}

pub fn decode_offset_commit(r: &mut Reader, version: i16) -> DecodeResult<OffsetCommitRequest> {
    let group_id = r.string()?;
    let (generation_id, member_id) = if version >= 1 {
        (r.i32()?, r.string()?)
    } else {
        (-1, String::new())
    };
    if (2..=4).contains(&version) {
        r.i64()?; // retention_time_ms: offsets are kept until the group is deleted
    }
    let group_instance_id = if version >= 7 { r.nullable_string()? } else { None };
    let n = r.array_len(2 + 4)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let m = r.array_len(4 + 8 + 2)?;
        let mut parts = Vec::with_capacity(m);
        for _ in 0..m {
            let partition = r.i32()?;
            let offset = r.i64()?;
            if version >= 6 {
                r.i32()?; // committed_leader_epoch
            }
            if version == 1 {
                r.i64()?; // commit_timestamp
            }
            let metadata = r.nullable_string()?;
            parts.push(CommitPartition {
                partition,
                offset,
                metadata,
            });
        }
        topics.push((name, parts));
    }
    r.expect_end()?;
    Ok(OffsetCommitRequest {
        group_id,
        generation_id,
        member_id,
        group_instance_id,
        topics,
    })
}

pub fn encode_offset_commit(w: &mut Writer, version: i16, topics: &PerTopic<(i32, i16)>) {
    if version >= 3 {
        w.i32(0);
    }
    w.array_len(topics.len());
    for (name, parts) in topics {
        w.string(name);
        w.array_len(parts.len());
        for (p, e) in parts {
            w.i32(*p);
            w.i16(*e);
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchRequest {
    pub group_id: String,
    /// `None`: every partition the group committed (v2+).
    pub topics: Option<PerTopic<i32>>,
}

pub fn decode_offset_fetch(r: &mut Reader, version: i16) -> DecodeResult<OffsetFetchRequest> {
    let group_id = r.string()?;
    let n = if version >= 2 {
        r.nullable_array_len(2 + 4)?
    } else {
        Some(r.array_len(2 + 4)?)
    };
    let topics = match n {
        None => None,
        Some(n) => {
            let mut topics = Vec::with_capacity(n);
            for _ in 0..n {
                let name = r.string()?;
                let m = r.array_len(4)?;
                let mut parts = Vec::with_capacity(m);
                for _ in 0..m {
                    parts.push(r.i32()?);
                }
                topics.push((name, parts));
            }
            Some(topics)
        }
    };
    r.expect_end()?;
    Ok(OffsetFetchRequest { group_id, topics })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    pub partition: i32,
    pub offset: i64,
    pub metadata: Option<String>,
    pub error_code: i16,
}

pub fn encode_offset_fetch(w: &mut Writer, version: i16, error_code: i16, topics: &PerTopic<FetchedOffset>) {
    if version >= 3 {
        w.i32(0);
    }
    w.array_len(topics.len());
    for (name, parts) in topics {
        w.string(name);
        w.array_len(parts.len());
        for p in parts {
            w.i32(p.partition);
            w.i64(p.offset);
            if version >= 5 {
                w.i32(-1);
            }
            w.nullable_string(p.metadata.as_deref());
            w.i16(p.error_code);
        }
    }
    if version >= 2 {
        w.i16(error_code);
    }
}

pub fn decode_list_groups(r: &mut Reader, _version: i16) -> DecodeResult<()> {
    r.expect_end()
}

pub fn encode_list_groups(w: &mut Writer, version: i16, error_code: i16, groups: &[(String, String)]) {
    if version >= 1 {
        w.i32(0);
    }
    w.i16(error_code);
    w.array_len(groups.len());
    for (id, protocol_type) in groups {
        w.string(id);
        w.string(protocol_type);
    }
}

/// DescribeGroups and DeleteGroups: a list of group ids.
pub fn decode_group_ids(r: &mut Reader, version: i16, key: i16) -> DecodeResult<Vec<String>> {
    let n = r.array_len(2)?;
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(r.string()?);
    }
    if key == DESCRIBE_GROUPS && version >= 3 {
        r.bool()?; // include_authorized_operations
    }
    r.expect_end()?;
    Ok(ids)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    pub error_code: i16,
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<DescribedMember>,
}

pub fn encode_describe_groups(w: &mut Writer, version: i16, groups: &[DescribedGroup]) {
    if version >= 1 {
        w.i32(0);
    }
    w.array_len(groups.len());
    for g in groups {
        w.i16(g.error_code);
        w.string(&g.group_id);
        w.string(&g.state);
        w.string(&g.protocol_type);
        w.string(&g.protocol);
        w.array_len(g.members.len());
        for m in &g.members {
            w.string(&m.member_id);
            if version >= 4 {
                w.nullable_string(None);
            }
            w.string(&m.client_id);
            w.string(&m.client_host);
            w.bytes_parts(std::slice::from_ref(&m.metadata));
            w.bytes_parts(std::slice::from_ref(&m.assignment));
        }
        if version >= 3 {
            w.i32(i32::MIN);
        }
    }
}

pub fn encode_delete_groups(w: &mut Writer, results: &[(String, i16)]) {
    w.i32(0);
    w.array_len(results.len());
    for (id, e) in results {
        w.string(id);
        w.i16(*e);
    }
}
