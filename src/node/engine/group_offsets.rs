//! [`GroupOffsets`] for [`Node`]: committed offsets live in the metadata
//! log, keyed by stream, and are named by topic here; membership records
//! live there too (`meta::group_state`), written by compare-and-set.

use super::super::Node;
use super::meta_error;
use crate::api::*;
use crate::ids::StreamId;
use crate::meta::view::MAX_DELETED_OFFSETS;
use crate::meta::{Command, Outcome, Rejection};
use async_trait::async_trait;

#[async_trait]
impl GroupOffsets for Node {
    async fn commit_offsets(&self, group: &str, offsets: Vec<GroupOffset>) -> ApiResult<()> {
        self.check_serving()?;
        let mut resolved = Vec::with_capacity(offsets.len());
        for o in offsets {
            resolved.push((self.resolve(&o.topic, o.partition)?, o.offset, o.metadata));
        }
        self.check_meta_reachable()?;
        let cmd = Command::CommitOffsets {
            group: group.to_string(),
            offsets: resolved,
        };
        match self.meta.propose(cmd).await.map_err(meta_error)? {
            Outcome::Applied => Ok(()),
            Outcome::Rejected(Rejection::Precondition(m)) => Err(ApiError::new(ErrorCode::TopicNotFound, m)),
            other => Err(ApiError::unavailable(format!("offsets not committed: {other:?}"))),
        }
    }

    fn committed_offsets(&self, group: &str) -> Vec<GroupOffset> {
        let view = self.meta.view();
        let Some(g) = view.groups.get(group) else {
            return Vec::new();
        };
        let names: std::collections::BTreeMap<_, _> = view.topics.iter().map(|(n, t)| (t.id, n.clone())).collect();
        g.iter()
            .filter_map(|(s, (offset, metadata))| {
                Some(GroupOffset {
                    topic: names.get(&s.topic)?.clone(),
                    partition: s.partition,
                    offset: *offset,
                    metadata: metadata.clone(),
                })
            })
            .collect()
    }

    fn offset_groups(&self) -> Vec<String> {
        self.meta.view().groups.keys().cloned().collect()
    }

    /// A node authorizes nothing itself: every caller may delete a group
    /// (with auth on, the Kafka front door's wrapper asks for admin on the
    /// group's topics first).
    fn authorize_group_delete(&self, _group: &str) -> ApiResult<()> {
        Ok(())
    }

    async fn delete_group(&self, group: &str) -> ApiResult<()> {
        self.check_serving()?;
        let known = {
            let view = self.meta.view();
            view.groups.contains_key(group) || view.group_states.contains_key(group)
        };
        if !known {
            return Err(ApiError::new(
                ErrorCode::NotFound,
                format!("group {group:?} has no offsets"),
            ));
        }
        self.check_meta_reachable()?;
        match self
            .meta
            .propose(Command::DeleteGroup {
                group: group.to_string(),
            })
            .await
            .map_err(meta_error)?
        {
            Outcome::Applied => Ok(()),
            Outcome::Rejected(r) => Err(ApiError::new(ErrorCode::NotFound, r.to_string())),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }

    /// As [`Self::authorize_group_delete`]: the node itself refuses nobody.
    fn authorize_offset_delete(&self, _group: &str, _topic: &str) -> ApiResult<()> {
        Ok(())
    }

    /// Only the partitions the group has an offset for are proposed, in
    /// entries of at most [`MAX_DELETED_OFFSETS`] each; nothing is proposed
    /// when there are none. An entry that finds the group's offsets gone
    /// (deleted meanwhile) has nothing left to do.
    async fn delete_offsets(&self, group: &str, partitions: Vec<(String, u32)>) -> ApiResult<()> {
        self.check_serving()?;
        let wanted: std::collections::BTreeSet<StreamId> = {
            let view = self.meta.view();
            let Some(offsets) = view.groups.get(group) else {
                return Ok(());
            };
            partitions
                .iter()
                .filter_map(|(t, p)| view.topics.get(t).map(|row| StreamId::new(row.id, *p)))
                .filter(|s| offsets.contains_key(s))
                .collect()
        };
        if wanted.is_empty() {
            return Ok(());
        }
        self.check_meta_reachable()?;
        let wanted: Vec<StreamId> = wanted.into_iter().collect();
        for chunk in wanted.chunks(MAX_DELETED_OFFSETS) {
            let cmd = Command::DeleteOffsets {
                group: group.to_string(),
                partitions: chunk.to_vec(),
            };
            match self.meta.propose(cmd).await.map_err(meta_error)? {
                Outcome::Applied => {}
                Outcome::Rejected(Rejection::Precondition(_)) => return Ok(()),
                Outcome::Rejected(r) => return Err(ApiError::new(ErrorCode::InvalidRequest, r.to_string())),
                other => {
                    return Err(ApiError::new(
                        ErrorCode::Internal,
                        format!("unexpected outcome {other:?}"),
                    ))
                }
            }
        }
        Ok(())
    }

    fn group_state(&self, group: &str) -> Option<GroupState> {
        state_of(&self.meta.view(), group)
    }

    fn group_state_version(&self, group: &str) -> u64 {
        self.meta.view().group_states.get(group).map_or(0, |r| r.version)
    }

    fn group_states(&self) -> Vec<String> {
        self.meta.view().group_states.keys().cloned().collect()
    }

    async fn put_group_state(
        &self,
        group: &str,
        kind: &str,
        expected: u64,
        data: Vec<u8>,
    ) -> ApiResult<GroupStateWrite> {
        self.check_serving()?;
        if data.len() > MAX_GROUP_STATE_BYTES {
            return Err(ApiError::new(
                ErrorCode::RequestTooLarge,
                format!(
                    "group {group:?} state is {} bytes, over the {MAX_GROUP_STATE_BYTES}-byte limit",
                    data.len()
                ),
            ));
        }
        self.check_meta_reachable()?;
        let cmd = Command::PutGroupState {
            group: group.to_string(),
            kind: kind.to_string(),
            expected_version: expected,
            data,
        };
        self.settle_group_state(group, cmd, expected + 1).await
    }

    async fn delete_group_state(&self, group: &str, expected: Option<u64>) -> ApiResult<GroupStateWrite> {
        self.check_serving()?;
        self.check_meta_reachable()?;
        let cmd = Command::DeleteGroupState {
            group: group.to_string(),
            expected_version: expected,
        };
        self.settle_group_state(group, cmd, 0).await
    }
}

fn state_of(view: &crate::meta::View, group: &str) -> Option<GroupState> {
    view.group_states.get(group).map(|r| GroupState {
        kind: r.kind.clone(),
        version: r.version,
        data: r.data.clone(),
    })
}

impl Node {
    /// Propose a group-state write; a lost compare-and-set answers the
    /// record that won, as this node's view has it after the entry.
    async fn settle_group_state(&self, group: &str, cmd: Command, written: u64) -> ApiResult<GroupStateWrite> {
        match self.meta.propose(cmd).await.map_err(meta_error)? {
            Outcome::Applied => Ok(GroupStateWrite::Written(written)),
            Outcome::Rejected(Rejection::Precondition(_)) => {
                Ok(GroupStateWrite::Conflict(state_of(&self.meta.view(), group)))
            }
            Outcome::Rejected(r) => Err(ApiError::new(ErrorCode::InvalidRequest, r.to_string())),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }
}
