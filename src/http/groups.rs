//! `/v1/groups`: the consumer groups this node's view of the metadata log
//! knows (those with a membership record or committed offsets), each with
//! its members, their assignments, its committed offsets and the lag of
//! each against the partition's high watermark.
//!
//! Any authenticated caller may list groups (membership is not scoped, as
//! in the Kafka front door); committed offsets, lags and assignments are
//! shown only for topics the caller may read or see.

use super::auth::Caller;
use super::error::HttpResult;
use super::Shared;
use crate::api::{ApiError, ErrorCode};
use crate::auth::Op;
use crate::kafka::groups::view::{self, GroupView};
use axum::extract::{Extension, Path, State};
use axum::response::IntoResponse;
use axum::Json;
use serde::Serialize;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// Every group, with its kind, state and member count.
pub async fn list(State(state): State<Shared>) -> impl IntoResponse {
    let g = &state.engine.group_offsets;
    let names: BTreeSet<String> = g.offset_groups().into_iter().chain(g.group_states()).collect();
    let topics = topic_names(&state);
    let groups: Vec<_> = names
        .into_iter()
        .map(|name| {
            let v = describe(&state, &name, &topics);
            json!({ "group": name, "kind": v.kind, "state": v.state, "members": v.members.len() })
        })
        .collect();
    Json(json!({ "groups": groups }))
}

#[derive(Serialize)]
struct GroupAnswer {
    group: String,
    #[serde(flatten)]
    view: GroupView,
    offsets: Vec<OffsetLag>,
}

#[derive(Serialize)]
struct OffsetLag {
    topic: String,
    partition: u32,
    committed: i64,
    /// The partition's high watermark, `None` when it could not be read.
    end_offset: Option<u64>,
    /// `end_offset - committed` (never below 0).
    lag: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// One group: members, assignments, committed offsets and lag.
pub async fn describe_one(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(group): Path<String>,
) -> HttpResult<impl IntoResponse> {
    let g = &state.engine.group_offsets;
    let committed = g.committed_offsets(&group);
    let known = !committed.is_empty() || g.group_state_version(&group) > 0;
    if !known {
        return Err(ApiError::new(ErrorCode::GroupNotFound, format!("no consumer group {group:?}")).into());
    }
    let mut view = describe(&state, &group, &topic_names(&state));
    for m in &mut view.members {
        m.assignment.retain(|a| caller.sees(&a.topic));
    }
    let visible: Vec<_> = committed
        .into_iter()
        .filter(|o| caller.allows(Op::Read, &o.topic))
        .collect();
    let ends = futures::future::join_all(
        visible
            .iter()
            .map(|o| crate::api::high_watermark(&*state.engine.records, &o.topic, o.partition)),
    )
    .await;
    let offsets = visible
        .into_iter()
        .zip(ends)
        .map(|(o, end)| {
            let (end_offset, error) = match end {
                Ok(e) => (Some(e.0), None),
                Err(e) => (None, Some(e.message)),
            };
            OffsetLag {
                lag: end_offset.map(|e| e.saturating_sub(u64::try_from(o.offset).unwrap_or(0))),
                topic: o.topic,
                partition: o.partition,
                committed: o.offset,
                end_offset,
                error,
            }
        })
        .collect();
    Ok(Json(GroupAnswer { group, view, offsets }))
}

fn topic_names(state: &Shared) -> BTreeMap<crate::ids::TopicUuid, String> {
    state
        .engine
        .topics
        .list_topics()
        .into_iter()
        .map(|t| (t.topic_id, t.name))
        .collect()
}

fn describe(state: &Shared, group: &str, topics: &BTreeMap<crate::ids::TopicUuid, String>) -> GroupView {
    match state.engine.group_offsets.group_state(group) {
        Some(s) => view::view(&s, topics),
        None => view::offsets_only(),
    }
}
