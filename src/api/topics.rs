//! The topics capability: creating, listing, describing, growing,
//! configuring and deleting topics.
//!
//! Lookups come in two kinds: the plain ones answer from this node's view as
//! it is now; the `_current` ones are for a request naming the topic and
//! catch up with the metadata log before answering that it does not exist.

use super::{ApiResult, TopicDescription, TopicSummary};
use crate::meta::{ConfigUpdate, TopicConfig};
use async_trait::async_trait;

#[async_trait]
pub trait Topics: Send + Sync + 'static {
    /// Create a topic (`topic_exists` if there is one by that name).
    /// Proposed from any node.
    async fn create_topic(&self, name: &str, partitions: u32, config: TopicConfig) -> ApiResult<TopicSummary>;

    /// Every topic in this node's view.
    fn list_topics(&self) -> Vec<TopicSummary>;

    /// A topic and its partitions, as this node's view has it now.
    fn describe_topic(&self, name: &str) -> ApiResult<TopicDescription>;

    /// [`Topics::describe_topic`] with the same catch-up as
    /// [`Topics::partitions_current`]: `topic_not_found` only from a view
    /// that has caught up with the metadata log, 503 when it could not.
    async fn describe_topic_current(&self, name: &str) -> ApiResult<TopicDescription>;

    /// Delete a topic and, in time, its data.
    async fn delete_topic(&self, name: &str) -> ApiResult<()>;

    /// Grow a topic to `partitions` partitions: `invalid_partition_count`
    /// unless that is an increase (up to the maximum). The new partitions
    /// are placed like a new topic's. Proposed from any node, like
    /// [`Topics::create_topic`].
    async fn add_partitions(&self, name: &str, partitions: u32) -> ApiResult<()>;

    /// Apply `updates` to a topic's configuration, all or nothing
    /// (`invalid_request` for a value out of range); returns the new
    /// configuration.
    async fn alter_topic_config(&self, name: &str, updates: Vec<ConfigUpdate>) -> ApiResult<TopicConfig>;

    /// Number of partitions of a topic (`topic_not_found` otherwise), as
    /// this node's view has it now.
    fn partitions(&self, topic: &str) -> ApiResult<u32>;

    /// A topic's configuration as this node's view has it now
    /// (`topic_not_found` otherwise): what a front door checks records
    /// against (a compacted topic's records need keys).
    fn config(&self, topic: &str) -> ApiResult<TopicConfig>;

    /// [`Topics::partitions`] for a request naming the topic: a backend with
    /// a metadata log catches up with it before answering that the topic or
    /// partition does not exist (it may have just been created or grown
    /// through another node), and answers 503 instead when it cannot.
    async fn partitions_current(&self, topic: &str) -> ApiResult<u32>;

    /// Bytes each partition of `topic` holds (index = partition): its
    /// indexed chunks, plus the durable tail not yet flushed where this
    /// node has the stream open. Kafka's DescribeLogDirs partition size.
    fn partition_bytes(&self, topic: &str) -> ApiResult<Vec<u64>>;
}
