//! Handlers of the KIP-848 consumer-group APIs (ConsumerGroupHeartbeat,
//! ConsumerGroupDescribe) over the pure state machine in
//! [`super::groups::consumer`], plus the hooks the classic coordinator
//! calls for groups of the consumer protocol: OffsetCommit validation
//! (member epoch), JoinGroup on a consumer group, and the topics a group
//! subscribes to (OffsetDelete).
//!
//! Every change of a group's stored part (epochs, members, subscriptions,
//! assignments) is written before it is answered, as the group's
//! `"consumer"` record through [`GroupOffsets::put_group_state`]
//! (compare-and-set on the record's version, in the metadata log); a node
//! that coordinates a group it does not hold loads it from that record, so
//! members carry on at their epochs after the coordinator moves.
//!
//! [`GroupOffsets::put_group_state`]: crate::api::GroupOffsets::put_group_state

use super::consumer_proto::*;
use super::group_placement::check_coordinator;
use super::groups::assignor::TopicMeta;
use super::groups::consumer::{code, Caller, GroupState, Persist};
use super::groups::Groups;
use super::wire::{DecodeResult, Reader, Writer};
use crate::api::{ErrorCode, GroupStateWrite, Services};
use std::collections::BTreeSet;
use tokio::time::Instant;

const NOT_COORDINATOR: i16 = 16;

fn topics(engine: &Services) -> Vec<TopicMeta> {
    engine
        .topics
        .list_topics()
        .into_iter()
        .map(|t| TopicMeta {
            id: t.topic_id,
            name: t.name,
            partitions: t.partitions,
        })
        .collect()
}

/// The group's stored record, as the view has it: (version, bytes).
fn loader<'a>(engine: &'a Services, group: &'a str) -> impl FnOnce() -> Option<(u64, Vec<u8>)> + 'a {
    move || {
        engine
            .group_offsets
            .group_state(group)
            .filter(|s| s.kind == "consumer")
            .map(|s| (s.version, s.data))
    }
}

/// Write a changed group's record. `Err(code)`: the change is not durable
/// (the store is unreachable, or another node wrote first) and what this
/// node held of the group is dropped, to be loaded again.
async fn persist(engine: &Services, groups: &Groups, p: Persist) -> Result<(), i16> {
    match engine
        .group_offsets
        .put_group_state(&p.group, "consumer", p.expected, p.data)
        .await
    {
        Ok(GroupStateWrite::Written(v)) => {
            groups.consumer.saved(&p.group, v);
            Ok(())
        }
        Ok(GroupStateWrite::Conflict(_)) => {
            tracing::info!(group = %p.group, "consumer group record changed under us; reloading");
            groups.consumer.forget(&p.group);
            Err(NOT_COORDINATOR)
        }
        Err(e) if e.code == ErrorCode::InvalidRequest => {
            // Over the record size cap: kept in memory only.
            tracing::warn!(group = %p.group, error = %e, "consumer group state too large to persist");
            Ok(())
        }
        Err(e) => {
            tracing::info!(group = %p.group, error = %e, "consumer group state not written");
            groups.consumer.forget(&p.group);
            Err(code::COORDINATOR_NOT_AVAILABLE)
        }
    }
}

/// Expire members of every consumer group and write what changed (the
/// listener's ticker calls this).
pub async fn tick(engine: &Services, groups: &Groups, now: Instant) {
    let _writes = groups.consumer.writes.lock().await;
    for p in groups.consumer.tick(now) {
        let _ = persist(engine, groups, p).await;
    }
}

/// A member id as Kafka makes them: 16 random bytes, URL-safe base64.
fn fresh_member_id() -> String {
    use base64::Engine;
    let b: [u8; 16] = crate::entropy::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn request(
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
        CONSUMER_GROUP_HEARTBEAT => {
            let req = decode_heartbeat(r, version)?;
            let caller = Caller {
                version,
                client_id: client_id.to_string(),
                client_host: format!("/{peer}"),
                fresh_member_id: fresh_member_id(),
            };
            let answer = heartbeat(engine, groups, &req, &caller, Instant::now()).await;
            w.message(&heartbeat_response(&answer), version)
        }
        CONSUMER_GROUP_DESCRIBE => {
            let ids = decode_describe(r, version)?;
            let described: Vec<DescribedGroup> = ids
                .into_iter()
                .map(|g| describe(engine, groups, g, Instant::now()))
                .collect();
            w.message(&describe_response(version, &described), version)
        }
        _ => unreachable!("only the consumer-group APIs are routed here"),
    }
}

/// One heartbeat: the coordinator check, the classic-group check, the
/// state machine, and the write of what changed before the answer.
pub async fn heartbeat(
    engine: &Services,
    groups: &Groups,
    req: &HeartbeatRequest,
    caller: &Caller,
    now: Instant,
) -> HeartbeatAnswer {
    if let Err(e) = check_coordinator(engine, &req.group_id) {
        return HeartbeatAnswer::error(e, "This node does not coordinate the group.");
    }
    // A classic group with members is not converted (an empty one has no
    // state left on the classic side, so it converts by itself).
    if groups.describe(&req.group_id).is_some_and(|g| !g.members.is_empty()) {
        return HeartbeatAnswer::error(
            code::GROUP_ID_NOT_FOUND,
            format!(
                "Group {} is a classic group with members; classic members cannot be upgraded online.",
                req.group_id
            ),
        );
    }
    let topics = topics(engine);
    let _writes = groups.consumer.writes.lock().await;
    let run = groups.consumer.with_group(
        &req.group_id,
        req.member_epoch == 0,
        now,
        loader(engine, &req.group_id),
        |g| {
            let o = g.heartbeat(req, caller, &topics, now);
            (o.answer, o.changed)
        },
    );
    match run {
        Ok(Some((answer, None))) => answer,
        Ok(Some((answer, Some(p)))) => match persist(engine, groups, p).await {
            Ok(()) => answer,
            Err(e) => HeartbeatAnswer::error(e, "The group's state could not be written; retry."),
        },
        Ok(None) => HeartbeatAnswer::error(
            code::UNKNOWN_MEMBER_ID,
            format!("Member {} is not a member of group {}.", req.member_id, req.group_id),
        ),
        Err(e) => HeartbeatAnswer::error(e, "Too many groups on this coordinator."),
    }
}

fn describe(engine: &Services, groups: &Groups, group: String, now: Instant) -> DescribedGroup {
    let error = |error_code, message: String| DescribedGroup {
        error_code,
        error_message: Some(message),
        group_id: group.clone(),
        state: String::new(),
        group_epoch: -1,
        assignment_epoch: -1,
        assignor_name: String::new(),
        members: Vec::new(),
    };
    if let Err(e) = check_coordinator(engine, &group) {
        return error(e, "This node does not coordinate the group.".into());
    }
    match groups.consumer.describe(&group, now, loader(engine, &group)) {
        Some(g) => described(&g, &topics(engine)),
        None => error(
            code::GROUP_ID_NOT_FOUND,
            format!("Group {group} is not a consumer group."),
        ),
    }
}

fn described(g: &GroupState, topics: &[TopicMeta]) -> DescribedGroup {
    let named = |a: &super::groups::assignor::Assignment| -> Vec<NamedPartitions> {
        a.iter()
            .filter(|(_, ps)| !ps.is_empty())
            .map(|(id, ps)| NamedPartitions {
                topic_id: *id,
                topic_name: topics
                    .iter()
                    .find(|t| t.id == *id)
                    .map(|t| t.name.clone())
                    .unwrap_or_default(),
                partitions: ps.iter().copied().collect(),
            })
            .collect()
    };
    DescribedGroup {
        error_code: 0,
        error_message: None,
        group_id: g.group_id.clone(),
        state: g.state_name().to_string(),
        group_epoch: g.group_epoch,
        assignment_epoch: g.assignment_epoch,
        assignor_name: g.assignor().to_string(),
        members: g
            .members
            .values()
            .map(|m| DescribedMember {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                rack_id: m.rack_id.clone(),
                member_epoch: m.member_epoch,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                subscribed_topic_names: m.subscribed_names.clone(),
                subscribed_topic_regex: m.subscribed_regex.clone(),
                assignment: named(&m.assigned),
                target_assignment: named(&g.target.get(&m.id).cloned().unwrap_or_default()),
            })
            .collect(),
    }
}

/// The classic coordinator's OffsetCommit hook: `Some(code)` when `group`
/// is a consumer group (Kafka's `ConsumerGroup.validateOffsetCommit`: an
/// empty group takes simple commits; otherwise the member must exist and
/// `generation_or_epoch` must be its member epoch, else
/// `STALE_MEMBER_EPOCH`); `None` for a classic group.
pub fn validate_offset_commit(
    engine: &Services,
    groups: &Groups,
    group: &str,
    member_id: &str,
    generation_or_epoch: i32,
) -> Option<i16> {
    groups
        .consumer
        .with_group(group, false, Instant::now(), loader(engine, group), |g| {
            (g.validate_offset_commit(member_id, generation_or_epoch), false)
        })
        .ok()
        .flatten()
        .map(|(c, _)| c)
}

/// Hold `group` in memory if its record in the log is a consumer group's
/// (a coordinator that took over lists and serves it as it was).
pub fn load_group(engine: &Services, groups: &Groups, group: &str) {
    let _ = groups.consumer.describe(group, Instant::now(), loader(engine, group));
}

/// The classic coordinator's OffsetFetch hook: `Some(code)` when `group`
/// is a consumer group (Kafka's `ConsumerGroup.validateOffsetFetch`: no
/// member id and no epoch is an admin's fetch; otherwise the member must
/// exist at `member_epoch`, else `UNKNOWN_MEMBER_ID` or
/// `STALE_MEMBER_EPOCH`); `None` for a classic group.
pub fn validate_offset_fetch(
    engine: &Services,
    groups: &Groups,
    group: &str,
    member_id: Option<&str>,
    member_epoch: i32,
) -> Option<i16> {
    groups
        .consumer
        .with_group(group, false, Instant::now(), loader(engine, group), |g| {
            (g.validate_offset_fetch(member_id, member_epoch), false)
        })
        .ok()
        .flatten()
        .map(|(c, _)| c)
}

/// The OffsetDelete hook: `Some(topics)` when `group` is a consumer group,
/// the existing topics its members subscribe to (none when it is empty);
/// `None` for any other group.
pub fn subscribed_topics(engine: &Services, groups: &Groups, group: &str) -> Option<BTreeSet<String>> {
    let topics = topics(engine);
    groups
        .consumer
        .with_group(group, false, Instant::now(), loader(engine, group), |g| {
            (g.subscribed_topics(&topics), false)
        })
        .ok()
        .flatten()
        .map(|(t, _)| t)
}

/// The classic coordinator's JoinGroup hook: a consumer group with members
/// refuses classic members (`INCONSISTENT_GROUP_PROTOCOL`: classic members
/// inside a consumer group are not supported); an empty one is forgotten
/// with its record, so the join makes it a classic group.
pub async fn classic_join_conflict(engine: &Services, groups: &Groups, group: &str) -> Option<i16> {
    const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    let _writes = groups.consumer.writes.lock().await;
    if groups
        .consumer
        .has_members(group, Instant::now(), loader(engine, group))
    {
        return Some(INCONSISTENT_GROUP_PROTOCOL);
    }
    if let Some(version) = groups.consumer.forget_if_empty(group) {
        if version > 0 {
            let _ = engine.group_offsets.delete_group_state(group, Some(version)).await;
        }
    }
    None
}

#[cfg(test)]
mod tests;
