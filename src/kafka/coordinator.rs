//! Handlers of the consumer-group APIs over [`Groups`] (membership, in
//! memory) and the [`GroupOffsets`](crate::api::GroupOffsets) capability
//! (committed offsets, in the metadata log).

use super::group_placement::check_coordinator;
pub use super::group_placement::coordinator_of;
use super::group_proto::*;
use super::groups::{self, code as gcode, Groups, Join, Joined};
use super::wire::{DecodeResult, Reader, Writer};
use super::{broker_id, code, split_addr};
use crate::api::{ErrorCode, GroupOffset, Services};
use std::time::Duration;
use tokio::time::Instant;

/// Bring this node's copy of `group` in line with the log's record
/// before answering a request for it (load it after the coordinator moved
/// here; replace it if another node wrote since).
pub(super) fn load(engine: &Services, groups: &Groups, group: &str) {
    let logged = engine.group_offsets.group_state_version(group);
    // The usual case, cheaply: this node's copy is the log's record.
    if groups.stored_version(group).unwrap_or(0) == logged {
        return;
    }
    groups.sync_with_log(group, engine.group_offsets.group_state(group), Instant::now());
}

/// Write `group`'s record while it is behind (one write in flight per
/// group; a failed write is retried by the ticker).
pub(super) async fn persist(engine: &Services, groups: &Groups, group: &str) {
    while let Some((expected, bytes)) = groups.take_write(group) {
        let outcome = engine
            .group_offsets
            .put_group_state(group, groups::record::KIND, expected, bytes.clone())
            .await;
        let failed = outcome.is_err();
        let outcome = outcome.map_err(|e| {
            tracing::warn!(group, error = %e, "group record not written");
            match e.code {
                ErrorCode::RequestTooLarge | ErrorCode::InvalidRequest => groups::WriteFailed::Refused,
                _ => groups::WriteFailed::Retry,
            }
        });
        groups.write_done(group, expected, bytes, outcome, Instant::now());
        if failed {
            break;
        }
    }
}

/// The ticker's pass: write the groups whose record is behind (sessions
/// expired, members left) if this node still coordinates them, and forget
/// those it no longer does (their new coordinator loads the log's record).
pub(super) async fn persist_dirty(engine: &Services, groups: &Groups) {
    for g in groups.dirty_groups() {
        if check_coordinator(engine, &g).is_ok() {
            persist(engine, groups, &g).await;
        } else {
            groups.forget(&g);
        }
    }
}

fn ms(v: i32) -> Duration {
    Duration::from_millis(u64::try_from(v).unwrap_or(0))
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn group_request(
    engine: &Services,
    groups: &Groups,
    key: i16,
    version: i16,
    r: &mut Reader,
    client_id: &str,
    peer: &str,
    w: &mut Writer,
) -> DecodeResult<()> {
    match key {
        FIND_COORDINATOR => {
            let req = decode_find_coordinator(r, version)?;
            let found: Vec<FoundCoordinator> = req
                .keys
                .iter()
                // Key type 0: a consumer group; 1: a transactional id,
                // placed the same way.
                .map(|k| match coordinator_of(engine, k) {
                    Some((id, addr)) if matches!(req.key_type, 0 | 1) => {
                        let (host, port) = split_addr(&addr);
                        FoundCoordinator {
                            key: k.clone(),
                            error_code: code::NONE,
                            node: broker_id(&id),
                            host,
                            port,
                        }
                    }
                    _ => FoundCoordinator {
                        key: k.clone(),
                        error_code: gcode::COORDINATOR_NOT_AVAILABLE,
                        node: -1,
                        host: String::new(),
                        port: -1,
                    },
                })
                .collect();
            encode_find_coordinator(w, version, &found)?;
        }
        JOIN_GROUP => {
            let req = decode_join_group(r, version)?;
            let group = req.group_id.clone();
            let (joined, skip) = join(engine, groups, version, req, client_id, peer).await;
            let protocol_type = groups.describe(&group).map(|g| g.protocol_type);
            encode_join_group(w, version, &joined, protocol_type.as_deref(), skip)?;
        }
        SYNC_GROUP => {
            let req = decode_sync_group(r, version)?;
            let group = req.group_id.clone();
            let answer = match check_coordinator(engine, &req.group_id) {
                Err(e) => Err(e),
                Ok(()) => {
                    load(engine, groups, &req.group_id);
                    sync(engine, groups, req).await
                }
            };
            let protocol = groups
                .describe(&group)
                .map(|g| (g.protocol_type, g.protocol.unwrap_or_default()));
            let protocol = protocol.as_ref().map(|(t, n)| (t.as_str(), n.as_str()));
            match answer {
                Ok(a) => encode_sync_group(w, version, code::NONE, &a, protocol)?,
                Err(e) => encode_sync_group(w, version, e, &bytes::Bytes::new(), None)?,
            }
        }
        HEARTBEAT => {
            let req = decode_heartbeat(r, version)?;
            let e = check_coordinator(engine, &req.group_id).err().unwrap_or_else(|| {
                load(engine, groups, &req.group_id);
                match groups.check_instance(&req.group_id, &req.member_id, req.group_instance_id.as_deref()) {
                    0 => groups.heartbeat(&req.group_id, req.generation_id, &req.member_id, Instant::now()),
                    e => e,
                }
            });
            encode_heartbeat(w, version, e)?;
        }
        LEAVE_GROUP => {
            let req = decode_leave_group(r, version)?;
            match check_coordinator(engine, &req.group_id) {
                Err(e) => encode_leave_group(w, version, e, &[])?,
                Ok(()) => {
                    load(engine, groups, &req.group_id);
                    let results: Vec<LeftMember> = req
                        .member_ids
                        .iter()
                        .zip(&req.instance_ids)
                        .zip(&req.reasons)
                        .map(|((m, i), reason)| {
                            if let Some(reason) = reason {
                                tracing::info!(group = %req.group_id, member = %m, reason, "member leaves");
                            }
                            let e = groups.leave(&req.group_id, m, i.as_deref(), Instant::now());
                            (m.clone(), i.clone(), e)
                        })
                        .collect();
                    persist(engine, groups, &req.group_id).await;
                    let top = if version >= 3 { code::NONE } else { results[0].2 };
                    encode_leave_group(w, version, top, &results)?;
                }
            }
        }
        OFFSET_COMMIT => {
            let req = decode_offset_commit(r, version)?;
            let topics = offset_commit(engine, groups, version, req).await;
            encode_offset_commit(w, version, &topics)?;
        }
        OFFSET_FETCH => {
            let req = decode_offset_fetch(r, version)?;
            let answers: Vec<FetchedGroup> = req
                .groups
                .into_iter()
                .map(|g| offset_fetch(engine, groups, g))
                .collect();
            encode_offset_fetch(w, version, &answers)?;
        }
        LIST_GROUPS => {
            let req = decode_list_groups(r, version)?;
            let list = list_groups(engine, groups, &req);
            encode_list_groups(w, version, code::NONE, &list)?;
        }
        DESCRIBE_GROUPS => {
            let req = decode_group_ids(r, version, key)?;
            let described: Vec<DescribedGroup> = req
                .ids
                .into_iter()
                .map(|g| describe(engine, groups, g, version, req.include_authorized_operations))
                .collect();
            encode_describe_groups(w, version, &described)?;
        }
        DELETE_GROUPS => {
            let req = decode_group_ids(r, version, key)?;
            let mut results = Vec::with_capacity(req.ids.len());
            for g in req.ids {
                let e = delete_group(engine, groups, &g).await;
                results.push((g, e));
            }
            encode_delete_groups(w, version, &results)?;
        }
        _ => unreachable!("only group APIs are routed here"),
    }
    Ok(())
}

async fn join(
    engine: &Services,
    groups: &Groups,
    version: i16,
    req: JoinGroupRequest,
    client_id: &str,
    peer: &str,
) -> (Joined, bool) {
    if let Err(e) = check_coordinator(engine, &req.group_id) {
        return (Joined::error(e, &req.member_id), false);
    }
    load(engine, groups, &req.group_id);
    // KIP-848: a consumer group with members refuses classic members.
    if let Some(e) = super::consumer_coordinator::classic_join_conflict(engine, groups, &req.group_id).await {
        return (Joined::error(e, &req.member_id), false);
    }
    if let Some(reason) = &req.reason {
        tracing::debug!(group = %req.group_id, member = %req.member_id, reason, "member joins");
    }
    // A static leader rejoining a Stable group with the same protocols
    // keeps the generation and the assignment: like Kafka, v9+ tells it to
    // skip the assignment (KIP-814).
    let static_leader_rejoin = req.group_instance_id.as_ref().and_then(|instance| {
        let g = groups.describe(&req.group_id)?;
        let leader = g.members.get(g.leader.as_ref()?)?;
        let same = g.phase == groups::Phase::Stable
            && leader.info.instance_id.as_ref() == Some(instance)
            && leader.info.protocols == req.protocols;
        same.then_some(g.generation)
    });
    let rebalance_timeout = ms(req.rebalance_timeout_ms).min(groups::MAX_SESSION);
    let group = req.group_id.clone();
    let j = Join {
        group: req.group_id,
        member_id: req.member_id,
        client_id: client_id.to_string(),
        client_host: format!("/{peer}"),
        session_timeout: ms(req.session_timeout_ms),
        rebalance_timeout,
        protocol_type: req.protocol_type,
        protocols: req.protocols,
        require_known_member_id: version >= 4,
        instance_id: req.group_instance_id,
    };
    let member_id = match groups.join(j, Instant::now()) {
        Ok(id) => id,
        Err(answer) => return (answer, false),
    };
    let deadline = Instant::now() + rebalance_timeout + Duration::from_secs(5);
    let timeout = Joined::error(gcode::REBALANCE_IN_PROGRESS, &member_id);
    // A static member that replaced itself in a Stable group changed it.
    persist(engine, groups, &group).await;
    let joined = groups::wait_for(groups, deadline, || groups.join_result(&group, &member_id), timeout).await;
    let skip = version >= 9
        && joined.error_code == code::NONE
        && joined.leader == joined.member_id
        && static_leader_rejoin == Some(joined.generation);
    (joined, skip)
}

async fn sync(engine: &Services, groups: &Groups, req: SyncGroupRequest) -> Result<bytes::Bytes, i16> {
    let now = Instant::now();
    match groups.check_instance(&req.group_id, &req.member_id, req.group_instance_id.as_deref()) {
        0 => {}
        e => return Err(e),
    }
    // v5+: the member's idea of the protocol must be the group's.
    if let Some(g) = groups.describe(&req.group_id) {
        let type_differs = req.protocol_type.as_ref().is_some_and(|t| *t != g.protocol_type);
        let name_differs = req
            .protocol_name
            .as_ref()
            .is_some_and(|n| Some(n) != g.protocol.as_ref());
        if type_differs || name_differs {
            return Err(gcode::INCONSISTENT_GROUP_PROTOCOL);
        }
    }
    groups.sync(&req.group_id, req.generation_id, &req.member_id, req.assignments, now)?;
    // The leader's assignments completed a generation: keep it.
    persist(engine, groups, &req.group_id).await;
    let deadline = now + Duration::from_secs(60);
    groups::wait_for(
        groups,
        deadline,
        || groups.sync_result(&req.group_id, req.generation_id, &req.member_id),
        Err(gcode::REBALANCE_IN_PROGRESS),
    )
    .await
}

async fn offset_commit(
    engine: &Services,
    groups: &Groups,
    version: i16,
    req: OffsetCommitRequest,
) -> Vec<(String, Vec<(i32, i16)>)> {
    let all = |topics: &[(String, Vec<CommitPartition>)], e: i16| -> Vec<(String, Vec<(i32, i16)>)> {
        topics
            .iter()
            .map(|(t, ps)| (t.clone(), ps.iter().map(|p| (p.partition, e)).collect()))
            .collect()
    };
    let check = check_coordinator(engine, &req.group_id).err().unwrap_or_else(|| {
        load(engine, groups, &req.group_id);
        // KIP-848 consumer groups validate member epochs (consumer_coordinator).
        super::consumer_coordinator::validate_offset_commit(
            engine,
            groups,
            &req.group_id,
            &req.member_id,
            req.generation_id,
        )
        .unwrap_or_else(|| {
            let has_offsets =
                !groups.holds(&req.group_id) && engine.group_offsets.offset_groups().contains(&req.group_id);
            groups.check_commit(&groups::CommitCheck {
                group: &req.group_id,
                generation: req.generation_id,
                member_id: &req.member_id,
                instance_id: req.group_instance_id.as_deref(),
                version,
                has_offsets,
            })
        })
    });
    if check != code::NONE {
        return all(&req.topics, check);
    }
    // Unknown partitions fail alone; the rest commit together.
    let mut offsets = Vec::new();
    let mut out: Vec<(String, Vec<(i32, i16)>)> = Vec::with_capacity(req.topics.len());
    for (topic, parts) in &req.topics {
        let count = engine.topics.partitions(topic);
        let denied = matches!(&count, Err(e) if e.code == ErrorCode::Forbidden);
        let count = count.ok();
        let mut answers = Vec::with_capacity(parts.len());
        for p in parts {
            let known = count.is_some_and(|n| p.partition >= 0 && (p.partition as u32) < n);
            if known {
                offsets.push(GroupOffset {
                    topic: topic.clone(),
                    partition: p.partition as u32,
                    offset: p.offset,
                    metadata: p.metadata.clone(),
                });
            }
            answers.push((
                p.partition,
                if known {
                    code::NONE
                } else if denied {
                    code::TOPIC_AUTHORIZATION_FAILED
                } else {
                    code::UNKNOWN_TOPIC_OR_PARTITION
                },
            ));
        }
        out.push((topic.clone(), answers));
    }
    if offsets.is_empty() {
        return out;
    }
    if let Err(e) = engine.group_offsets.commit_offsets(&req.group_id, offsets).await {
        let failed = match e.code {
            ErrorCode::TopicNotFound | ErrorCode::PartitionNotFound => code::UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode::Unavailable => gcode::COORDINATOR_NOT_AVAILABLE,
            ErrorCode::Forbidden => code::TOPIC_AUTHORIZATION_FAILED,
            _ => code::UNKNOWN_SERVER_ERROR,
        };
        tracing::info!(group = %req.group_id, error = %e, "offset commit failed");
        for (_, answers) in &mut out {
            for a in answers.iter_mut().filter(|a| a.1 == code::NONE) {
                a.1 = failed;
            }
        }
    }
    out
}

fn offset_fetch(engine: &Services, groups: &Groups, req: OffsetFetchGroup) -> FetchedGroup {
    let group = req.group_id.clone();
    let (e, topics) = offset_fetch_one(engine, groups, req);
    (group, e, topics)
}

fn offset_fetch_one(
    engine: &Services,
    groups: &Groups,
    req: OffsetFetchGroup,
) -> (i16, Vec<(String, Vec<FetchedOffset>)>) {
    let refused = check_coordinator(engine, &req.group_id).err().or_else(|| {
        // A member of a KIP-848 consumer group (v9+) asks at its epoch.
        super::consumer_coordinator::validate_offset_fetch(
            engine,
            groups,
            &req.group_id,
            req.member_id.as_deref(),
            req.member_epoch,
        )
        .filter(|&c| c != code::NONE)
    });
    if let Some(e) = refused {
        let topics = req
            .topics
            .unwrap_or_default()
            .into_iter()
            .map(|(t, ps)| {
                let parts = ps
                    .into_iter()
                    .map(|p| FetchedOffset {
                        partition: p,
                        offset: -1,
                        metadata: None,
                        error_code: e,
                    })
                    .collect();
                (t, parts)
            })
            .collect();
        return (e, topics);
    }
    let committed = engine.group_offsets.committed_offsets(&req.group_id);
    let found = |t: &str, p: i32| {
        committed
            .iter()
            .find(|o| o.topic == t && i64::from(o.partition) == i64::from(p))
            .map(|o| FetchedOffset {
                partition: p,
                offset: o.offset,
                metadata: Some(o.metadata.clone().unwrap_or_default()),
                error_code: code::NONE,
            })
            .unwrap_or(FetchedOffset {
                partition: p,
                offset: -1,
                metadata: Some(String::new()),
                error_code: code::NONE,
            })
    };
    let topics = match req.topics {
        Some(topics) => topics
            .into_iter()
            .map(|(t, ps)| {
                let parts = ps.into_iter().map(|p| found(&t, p)).collect();
                (t, parts)
            })
            .collect(),
        None => {
            let mut by_topic: Vec<(String, Vec<FetchedOffset>)> = Vec::new();
            for o in &committed {
                let f = found(&o.topic, o.partition as i32);
                match by_topic.iter_mut().find(|(t, _)| *t == o.topic) {
                    Some((_, ps)) => ps.push(f),
                    None => by_topic.push((o.topic.clone(), vec![f])),
                }
            }
            by_topic
        }
    };
    (code::NONE, topics)
}

/// The ACL operations a classic group allows, as DescribeGroups v3+
/// reports them when asked: READ (3), DELETE (6) and DESCRIBE (8).
const GROUP_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8);

fn describe(engine: &Services, groups: &Groups, group: String, version: i16, include_ops: bool) -> DescribedGroup {
    let authorized_operations = if include_ops { GROUP_OPERATIONS } else { i32::MIN };
    let empty = |error_code, state: &str| DescribedGroup {
        error_code,
        error_message: None,
        group_id: group.clone(),
        state: state.to_string(),
        protocol_type: String::new(),
        protocol: String::new(),
        members: Vec::new(),
        authorized_operations,
    };
    if let Err(e) = check_coordinator(engine, &group) {
        return empty(e, "");
    }
    load(engine, groups, &group);
    match groups.describe(&group) {
        Some(g) => {
            let protocol = g.protocol.clone().unwrap_or_default();
            DescribedGroup {
                error_code: code::NONE,
                error_message: None,
                authorized_operations,
                group_id: group.clone(),
                state: g.phase.name().to_string(),
                protocol_type: g.protocol_type.clone(),
                protocol: protocol.clone(),
                members: g
                    .members
                    .values()
                    .map(|m| DescribedMember {
                        member_id: m.info.id.clone(),
                        group_instance_id: if version >= 4 { m.info.instance_id.clone() } else { None },
                        client_id: m.info.client_id.clone(),
                        client_host: m.info.client_host.clone(),
                        metadata: m
                            .info
                            .protocols
                            .iter()
                            .find(|(p, _)| *p == protocol)
                            .map(|(_, b)| b.clone())
                            .unwrap_or_default(),
                        assignment: m.info.assignment.clone(),
                    })
                    .collect(),
            }
        }
        None if engine.group_offsets.offset_groups().contains(&group) => DescribedGroup {
            protocol_type: "consumer".into(),
            ..empty(code::NONE, "Empty")
        },
        // v6+ (Kafka 3.8): an unknown group is an error, with a message.
        None if version >= 6 => DescribedGroup {
            error_message: Some(format!("Group {group} not found.")),
            ..empty(gcode::GROUP_ID_NOT_FOUND, "Dead")
        },
        None => empty(code::NONE, "Dead"),
    }
}

/// ListGroups: the classic groups with members, the KIP-848 consumer
/// groups held here, and the groups that only have committed offsets
/// (Empty classic groups), filtered by state (v4+) and type (v5+) as Kafka
/// does (case-insensitively).
fn list_groups(engine: &Services, groups: &Groups, req: &ListGroupsRequest) -> Vec<ListedGroup> {
    let me = engine.cluster.ready().node_id;
    let mine = |g: &str| coordinator_of(engine, g).is_some_and(|(id, _)| id == me);
    // Groups this node coordinates whose record it has not read yet (it
    // took them over after a failover, and no member has called since):
    // listed as their record has them, not as Empty.
    let loaded: std::collections::BTreeSet<String> = groups.consumer.list().into_iter().map(|(id, _)| id).collect();
    for g in engine.group_offsets.group_states() {
        if mine(&g) && !groups.holds(&g) && !loaded.contains(&g) {
            match engine.group_offsets.group_state(&g).map(|s| s.kind) {
                Some(k) if k == groups::record::KIND => load(engine, groups, &g),
                Some(_) => super::consumer_coordinator::load_group(engine, groups, &g),
                None => {}
            }
        }
    }
    let mut list: Vec<ListedGroup> = groups
        .list()
        .into_iter()
        .map(|(id, protocol_type)| {
            let state = groups.describe(&id).map_or("Empty", |g| g.phase.name()).to_string();
            ListedGroup {
                group_id: id,
                protocol_type,
                state,
                group_type: "classic".into(),
            }
        })
        .collect();
    for (id, protocol_type) in groups.consumer.list() {
        let state = groups
            .consumer
            .describe(&id, Instant::now(), || None)
            .map_or("Empty", |g| g.state_name())
            .to_string();
        list.push(ListedGroup {
            group_id: id,
            protocol_type,
            state,
            group_type: "consumer".into(),
        });
    }
    for g in engine.group_offsets.offset_groups() {
        if mine(&g) && !list.iter().any(|l| l.group_id == g) {
            list.push(ListedGroup {
                group_id: g,
                protocol_type: "consumer".into(),
                state: "Empty".into(),
                group_type: "classic".into(),
            });
        }
    }
    let wanted = |filter: &[String], v: &str| filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(v));
    list.retain(|g| wanted(&req.states, &g.state) && wanted(&req.types, &g.group_type));
    list.sort();
    list
}

/// DeleteGroups of one group. Authorization comes first: a caller that may
/// not delete the group gets `GROUP_AUTHORIZATION_FAILED` and neither its
/// membership nor its offsets change.
async fn delete_group(engine: &Services, groups: &Groups, group: &str) -> i16 {
    if let Err(e) = check_coordinator(engine, group) {
        return e;
    }
    if engine.group_offsets.authorize_group_delete(group).is_err() {
        return gcode::GROUP_AUTHORIZATION_FAILED;
    }
    load(engine, groups, group);
    if let Err(e) = groups.delete(group) {
        return e;
    }
    match engine.group_offsets.delete_group(group).await {
        Ok(()) => code::NONE,
        // Offsets committed since the check above, for a topic the caller
        // may not administer.
        Err(e) if e.code == ErrorCode::Forbidden => gcode::GROUP_AUTHORIZATION_FAILED,
        Err(e) if e.code == ErrorCode::NotFound => gcode::GROUP_ID_NOT_FOUND,
        Err(e) if e.code == ErrorCode::Unavailable => gcode::COORDINATOR_NOT_AVAILABLE,
        Err(_) => code::UNKNOWN_SERVER_ERROR,
    }
}
