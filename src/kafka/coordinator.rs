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
fn load(engine: &Services, groups: &Groups, group: &str) {
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
            match coordinator_of(engine, &req.key) {
                Some((id, addr)) if req.key_type == 0 => {
                    let (host, port) = split_addr(&addr);
                    encode_find_coordinator(w, version, code::NONE, broker_id(&id), &host, port);
                }
                _ => encode_find_coordinator(w, version, gcode::COORDINATOR_NOT_AVAILABLE, -1, "", -1),
            }
        }
        JOIN_GROUP => {
            let req = decode_join_group(r, version)?;
            let joined = join(engine, groups, version, req, client_id, peer).await;
            encode_join_group(w, version, &joined);
        }
        SYNC_GROUP => {
            let req = decode_sync_group(r, version)?;
            let answer = match check_coordinator(engine, &req.group_id) {
                Err(e) => Err(e),
                Ok(()) => {
                    load(engine, groups, &req.group_id);
                    sync(engine, groups, req).await
                }
            };
            match answer {
                Ok(a) => encode_sync_group(w, version, code::NONE, &a),
                Err(e) => encode_sync_group(w, version, e, &bytes::Bytes::new()),
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
            encode_error_only(w, version >= 1, e);
        }
        LEAVE_GROUP => {
            let req = decode_leave_group(r, version)?;
            match check_coordinator(engine, &req.group_id) {
                Err(e) => encode_leave_group(w, version, e, &[]),
                Ok(()) => {
                    load(engine, groups, &req.group_id);
                    let results: Vec<(String, i16)> = req
                        .member_ids
                        .iter()
                        .zip(&req.instance_ids)
                        .map(|(m, i)| (m.clone(), groups.leave(&req.group_id, m, i.as_deref(), Instant::now())))
                        .collect();
                    persist(engine, groups, &req.group_id).await;
                    let top = if version >= 3 { code::NONE } else { results[0].1 };
                    encode_leave_group(w, version, top, &results);
                }
            }
        }
        OFFSET_COMMIT => {
            let req = decode_offset_commit(r, version)?;
            let topics = offset_commit(engine, groups, version, req).await;
            encode_offset_commit(w, version, &topics);
        }
        OFFSET_FETCH => {
            let req = decode_offset_fetch(r, version)?;
            let (e, topics) = offset_fetch(engine, req);
            encode_offset_fetch(w, version, e, &topics);
        }
        LIST_GROUPS => {
            decode_list_groups(r, version)?;
            let me = engine.cluster.ready().node_id;
            let mut list = groups.list();
            list.extend(groups.consumer.list()); // KIP-848 consumer groups
            for g in engine.group_offsets.offset_groups() {
                let mine = coordinator_of(engine, &g).is_some_and(|(id, _)| id == me);
                if mine && !list.iter().any(|(id, _)| *id == g) {
                    list.push((g, "consumer".into()));
                }
            }
            list.sort();
            encode_list_groups(w, version, code::NONE, &list);
        }
        DESCRIBE_GROUPS => {
            let ids = decode_group_ids(r, version, key)?;
            let described: Vec<DescribedGroup> = ids.into_iter().map(|g| describe(engine, groups, g)).collect();
            encode_describe_groups(w, version, &described);
        }
        DELETE_GROUPS => {
            let ids = decode_group_ids(r, version, key)?;
            let mut results = Vec::with_capacity(ids.len());
            for g in ids {
                let e = delete_group(engine, groups, &g).await;
                results.push((g, e));
            }
            encode_delete_groups(w, &results);
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
) -> Joined {
    if let Err(e) = check_coordinator(engine, &req.group_id) {
        return Joined::error(e, &req.member_id);
    }
    load(engine, groups, &req.group_id);
    // KIP-848: a consumer group with members refuses classic members.
    if let Some(e) = super::consumer_coordinator::classic_join_conflict(engine, groups, &req.group_id).await {
        return Joined::error(e, &req.member_id);
    }
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
        Err(answer) => return answer,
    };
    let deadline = Instant::now() + rebalance_timeout + Duration::from_secs(5);
    let timeout = Joined::error(gcode::REBALANCE_IN_PROGRESS, &member_id);
    // A static member that replaced itself in a Stable group changed it.
    persist(engine, groups, &group).await;
    groups::wait_for(groups, deadline, || groups.join_result(&group, &member_id), timeout).await
}

async fn sync(engine: &Services, groups: &Groups, req: SyncGroupRequest) -> Result<bytes::Bytes, i16> {
    let now = Instant::now();
    match groups.check_instance(&req.group_id, &req.member_id, req.group_instance_id.as_deref()) {
        0 => {}
        e => return Err(e),
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

fn offset_fetch(engine: &Services, req: OffsetFetchRequest) -> (i16, Vec<(String, Vec<FetchedOffset>)>) {
    if let Err(e) = check_coordinator(engine, &req.group_id) {
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

fn describe(engine: &Services, groups: &Groups, group: String) -> DescribedGroup {
    let empty = |error_code, state: &str| DescribedGroup {
        error_code,
        group_id: group.clone(),
        state: state.to_string(),
        protocol_type: String::new(),
        protocol: String::new(),
        members: Vec::new(),
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
                group_id: group.clone(),
                state: g.phase.name().to_string(),
                protocol_type: g.protocol_type.clone(),
                protocol: protocol.clone(),
                members: g
                    .members
                    .values()
                    .map(|m| DescribedMember {
                        member_id: m.id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        metadata: m
                            .protocols
                            .iter()
                            .find(|(p, _)| *p == protocol)
                            .map(|(_, b)| b.clone())
                            .unwrap_or_default(),
                        assignment: m.assignment.clone(),
                    })
                    .collect(),
            }
        }
        None if engine.group_offsets.offset_groups().contains(&group) => DescribedGroup {
            protocol_type: "consumer".into(),
            ..empty(code::NONE, "Empty")
        },
        None => empty(code::NONE, "Dead"),
    }
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
