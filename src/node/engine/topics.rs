//! [`Topics`] for [`Node`]: lookups answer from the view; changes are
//! proposed to the metadata log from any node.

use super::super::Node;
use super::meta_error;
use crate::api::*;
use crate::ids::TopicUuid;
use crate::meta::{Command, ConfigUpdate, Outcome, Rejection, StreamState, TopicConfig};
use async_trait::async_trait;

#[async_trait]
impl Topics for Node {
    async fn create_topic(&self, name: &str, partitions: u32, config: TopicConfig) -> ApiResult<TopicSummary> {
        if let Err(e) = crate::meta::view::validate_topic_name(name) {
            return Err(ApiError::new(ErrorCode::InvalidTopicName, e));
        }
        if partitions == 0 || partitions > crate::meta::view::MAX_PARTITIONS {
            return Err(ApiError::new(
                ErrorCode::InvalidPartitionCount,
                format!(
                    "partitions must be 1-{}, got {partitions}",
                    crate::meta::view::MAX_PARTITIONS
                ),
            ));
        }
        self.check_serving()?;
        self.check_meta_reachable()?;
        let cmd = Command::CreateTopic {
            name: name.to_string(),
            partitions,
            config,
        };
        match self.meta.propose(cmd).await.map_err(meta_error)? {
            Outcome::TopicCreated(id) => Ok(TopicSummary {
                name: name.to_string(),
                partitions,
                topic_id: TopicUuid::derive(id, name),
            }),
            Outcome::Rejected(Rejection::TopicExists(n)) => Err(ApiError::new(
                ErrorCode::TopicExists,
                format!("topic {n:?} already exists"),
            )),
            // A Durable Streams fork whose source is gone or deleted.
            Outcome::Rejected(Rejection::Precondition(m)) => Err(ApiError::invalid(m)),
            Outcome::Rejected(r) => Err(ApiError::unavailable(format!("topic not created: {r}"))),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }

    fn list_topics(&self) -> Vec<TopicSummary> {
        let view = self.meta.view();
        view.topics
            .iter()
            .map(|(name, t)| TopicSummary {
                name: name.clone(),
                partitions: t.partitions,
                topic_id: TopicUuid::derive(t.id, name),
            })
            .collect()
    }

    fn describe_topic(&self, name: &str) -> ApiResult<TopicDescription> {
        let view = self.meta.view();
        let t = view
            .topics
            .get(name)
            .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("topic {name:?} does not exist")))?;
        let partition_info = view
            .topic_streams(t)
            .map(|(id, row)| {
                let owner = match &row.state {
                    StreamState::Open { node, .. } | StreamState::Recovering { node, .. } => Some(node.to_string()),
                    _ => None,
                };
                let end_offset = self.open_stream(*id).map_or(row.committed_end, |s| s.high_watermark());
                PartitionInfo {
                    partition: id.partition,
                    owner,
                    stream_epoch: row.stream_epoch,
                    state: row.state.name().to_string(),
                    start_offset: row.start,
                    end_offset,
                    compacted_end: row.compacted_end,
                }
            })
            .collect();
        Ok(TopicDescription {
            name: name.to_string(),
            partitions: t.partitions,
            topic_id: TopicUuid::derive(t.id, name),
            config: t.config.clone(),
            partition_info,
        })
    }

    async fn delete_topic(&self, name: &str) -> ApiResult<()> {
        self.check_serving()?;
        if !self.meta.view().topics.contains_key(name) {
            return Err(ApiError::new(
                ErrorCode::TopicNotFound,
                format!("topic {name:?} does not exist"),
            ));
        }
        self.check_meta_reachable()?;
        match self
            .meta
            .propose(Command::DeleteTopic { name: name.to_string() })
            .await
            .map_err(meta_error)?
        {
            Outcome::Applied => Ok(()),
            Outcome::Rejected(Rejection::TopicNotFound(_)) => Err(ApiError::new(
                ErrorCode::TopicNotFound,
                format!("topic {name:?} does not exist"),
            )),
            other => Err(ApiError::unavailable(format!("topic not deleted: {other:?}"))),
        }
    }

    async fn add_partitions(&self, name: &str, partitions: u32) -> ApiResult<()> {
        self.check_serving()?;
        let current = self.partitions(name)?;
        let max = crate::meta::view::MAX_PARTITIONS;
        if partitions <= current || partitions > max {
            return Err(ApiError::new(
                ErrorCode::InvalidPartitionCount,
                format!("topic {name:?} has {current} partitions; the count can only grow, up to {max}, not become {partitions}"),
            ));
        }
        self.check_meta_reachable()?;
        let cmd = Command::AddPartitions {
            name: name.to_string(),
            partitions,
        };
        match self.meta.propose(cmd).await.map_err(meta_error)? {
            Outcome::Applied => Ok(()),
            Outcome::Rejected(Rejection::TopicNotFound(_)) => Err(ApiError::new(
                ErrorCode::TopicNotFound,
                format!("topic {name:?} does not exist"),
            )),
            // Another request grew it first.
            Outcome::Rejected(Rejection::Invalid(m)) => Err(ApiError::new(ErrorCode::InvalidPartitionCount, m)),
            Outcome::Rejected(r) => Err(ApiError::unavailable(format!("partitions not added: {r}"))),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }

    async fn alter_topic_config(&self, name: &str, updates: Vec<ConfigUpdate>) -> ApiResult<TopicConfig> {
        self.check_serving()?;
        self.partitions(name)?;
        if let Some(m) = updates.iter().find_map(|u| u.validate().err()) {
            return Err(ApiError::invalid(m));
        }
        self.check_meta_reachable()?;
        let cmd = Command::AlterTopicConfig {
            name: name.to_string(),
            updates,
        };
        match self.meta.propose(cmd).await.map_err(meta_error)? {
            // The view as of our entry, or later: read back what applied.
            Outcome::Applied => self
                .meta
                .view()
                .topics
                .get(name)
                .map(|t| t.config.clone())
                .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("topic {name:?} was deleted"))),
            Outcome::Rejected(Rejection::TopicNotFound(_)) => Err(ApiError::new(
                ErrorCode::TopicNotFound,
                format!("topic {name:?} does not exist"),
            )),
            Outcome::Rejected(Rejection::Invalid(m)) => Err(ApiError::invalid(m)),
            Outcome::Rejected(r) => Err(ApiError::unavailable(format!("config not altered: {r}"))),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }

    async fn partitions_current(&self, topic: &str) -> ApiResult<u32> {
        self.current(|| self.partitions(topic)).await
    }

    async fn describe_topic_current(&self, name: &str) -> ApiResult<TopicDescription> {
        self.current(|| self.describe_topic(name)).await
    }

    fn config(&self, topic: &str) -> ApiResult<TopicConfig> {
        self.meta
            .view()
            .topics
            .get(topic)
            .map(|t| t.config.clone())
            .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("topic {topic:?} does not exist")))
    }

    fn partitions(&self, topic: &str) -> ApiResult<u32> {
        self.meta
            .view()
            .topics
            .get(topic)
            .map(|t| t.partitions)
            .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("topic {topic:?} does not exist")))
    }

    fn partition_bytes(&self, topic: &str) -> ApiResult<Vec<u64>> {
        let view = self.meta.view();
        let t = view
            .topics
            .get(topic)
            .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("topic {topic:?} does not exist")))?;
        let mut out = vec![0; t.partitions as usize];
        for (id, row) in view.topic_streams(t) {
            let indexed: u64 = row.chunks.iter().map(|c| c.byte_end.saturating_sub(c.byte_start)).sum();
            let tail = self.open_stream(*id).map_or(0, |s| s.unflushed().0 as u64);
            if let Some(slot) = out.get_mut(id.partition as usize) {
                *slot = indexed + tail;
            }
        }
        Ok(out)
    }
}
