//! [`GroupOffsets`] for [`Node`]: committed offsets live in the metadata
//! log, keyed by stream, and are named by topic here.

use super::super::Node;
use super::meta_error;
use crate::api::*;
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
        if !self.meta.view().groups.contains_key(group) {
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
}
