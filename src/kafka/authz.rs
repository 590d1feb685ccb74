//! Per-topic authorization of Kafka requests: an [`Engine`] that runs as
//! one principal and refuses what its scopes do not grant with `forbidden`,
//! which [`super::error_code`] answers as `TOPIC_AUTHORIZATION_FAILED` in
//! the refused topic's (or partition's) slot of the response. The handlers
//! stay unaware of auth; every topic they touch goes through here.
//!
//! | engine call | needs |
//! | --- | --- |
//! | append, append_batch | `write` |
//! | read, read_batches, leader_epoch_end, commit_offsets | `read` |
//! | describe_topic, partitions, list_topics (filtered) | any op on the topic |
//! | create_topic (incl. auto-create), delete_topic, add_partitions, alter_topic_config | `admin` |
//! | delete_group | `admin` on every topic the group has offsets for |
//! | transfer, drain, tokens | cluster admin |
//!
//! Consumer groups themselves are not scoped: any authenticated client may
//! join, sync, heartbeat and leave any group; its offsets are guarded by
//! the topic scopes above.

use crate::api::*;
use crate::auth::{Op, Principal};
use crate::ids::{Offset, StreamEpoch};
use crate::meta::{ConfigUpdate, TopicConfig};
use crate::stream::batch::Record;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// `inner` as seen by `principal`.
pub struct Scoped {
    pub inner: Arc<dyn Engine>,
    pub principal: Arc<Principal>,
}

impl Scoped {
    fn need(&self, op: Op, topic: &str) -> ApiResult<()> {
        if self.principal.allows(op, topic) {
            Ok(())
        } else {
            Err(self.refuse(&format!("{op} on topic {topic:?}")))
        }
    }

    fn need_sight(&self, topic: &str) -> ApiResult<()> {
        if self.principal.sees(topic) {
            Ok(())
        } else {
            Err(self.refuse(&format!("any scope on topic {topic:?}")))
        }
    }

    fn need_cluster_admin(&self) -> ApiResult<()> {
        if self.principal.is_cluster_admin() {
            Ok(())
        } else {
            Err(self.refuse("admin on all topics (\"*\")"))
        }
    }

    fn refuse(&self, what: &str) -> ApiError {
        crate::auth::count_failure("kafka", "forbidden");
        ApiError::new(
            ErrorCode::Forbidden,
            format!("token {} lacks {what}", self.principal.id),
        )
    }
}

#[async_trait]
impl Engine for Scoped {
    fn limits(&self) -> Limits {
        self.inner.limits()
    }
    async fn create_topic(&self, name: &str, partitions: u32, config: TopicConfig) -> ApiResult<TopicSummary> {
        self.need(Op::Admin, name)?;
        self.inner.create_topic(name, partitions, config).await
    }
    fn list_topics(&self) -> Vec<TopicSummary> {
        let mut topics = self.inner.list_topics();
        topics.retain(|t| self.principal.sees(&t.name));
        topics
    }
    fn describe_topic(&self, name: &str) -> ApiResult<TopicDescription> {
        self.need_sight(name)?;
        self.inner.describe_topic(name)
    }
    async fn delete_topic(&self, name: &str) -> ApiResult<()> {
        self.need(Op::Admin, name)?;
        self.inner.delete_topic(name).await
    }
    async fn add_partitions(&self, name: &str, partitions: u32) -> ApiResult<()> {
        self.need(Op::Admin, name)?;
        self.inner.add_partitions(name, partitions).await
    }
    async fn alter_topic_config(&self, name: &str, updates: Vec<ConfigUpdate>) -> ApiResult<TopicConfig> {
        self.need(Op::Admin, name)?;
        self.inner.alter_topic_config(name, updates).await
    }
    fn partitions(&self, topic: &str) -> ApiResult<u32> {
        self.need_sight(topic)?;
        self.inner.partitions(topic)
    }
    async fn partitions_current(&self, topic: &str) -> ApiResult<u32> {
        self.need_sight(topic)?;
        self.inner.partitions_current(topic).await
    }
    async fn describe_topic_current(&self, name: &str) -> ApiResult<TopicDescription> {
        self.need_sight(name)?;
        self.inner.describe_topic_current(name).await
    }
    async fn append(&self, topic: &str, partition: u32, records: Vec<Record>) -> ApiResult<Appended> {
        self.need(Op::Write, topic)?;
        self.inner.append(topic, partition, records).await
    }
    async fn read(&self, topic: &str, partition: u32, req: ReadRequest) -> ApiResult<ReadResult> {
        self.need(Op::Read, topic)?;
        self.inner.read(topic, partition, req).await
    }
    async fn append_batch(&self, topic: &str, partition: u32, batch: bytes::Bytes) -> ApiResult<Appended> {
        self.need(Op::Write, topic)?;
        self.inner.append_batch(topic, partition, batch).await
    }
    async fn read_batches(
        &self,
        topic: &str,
        partition: u32,
        from: Offset,
        max_bytes: usize,
        wait: Duration,
    ) -> ApiResult<BatchRead> {
        self.need(Op::Read, topic)?;
        self.inner.read_batches(topic, partition, from, max_bytes, wait).await
    }
    fn ready(&self) -> ReadyStatus {
        self.inner.ready()
    }
    fn nodes(&self) -> NodesInfo {
        self.inner.nodes()
    }
    async fn live_reads_ended(&self) {
        self.inner.live_reads_ended().await
    }
    async fn transfer(&self, topic: &str, partition: u32, to: &str) -> ApiResult<()> {
        self.need_cluster_admin()?;
        self.inner.transfer(topic, partition, to).await
    }
    async fn leader_epoch_end(&self, topic: &str, partition: u32, epoch: StreamEpoch) -> ApiResult<Offset> {
        self.need(Op::Read, topic)?;
        self.inner.leader_epoch_end(topic, partition, epoch).await
    }
    async fn sync_metadata(&self) -> bool {
        self.inner.sync_metadata().await
    }
    async fn init_producer_id(&self) -> ApiResult<i64> {
        self.inner.init_producer_id().await
    }
    async fn commit_offsets(&self, group: &str, offsets: Vec<GroupOffset>) -> ApiResult<()> {
        for o in &offsets {
            self.need(Op::Read, &o.topic)?;
        }
        self.inner.commit_offsets(group, offsets).await
    }
    fn committed_offsets(&self, group: &str) -> Vec<GroupOffset> {
        let mut offsets = self.inner.committed_offsets(group);
        offsets.retain(|o| self.principal.allows(Op::Read, &o.topic));
        offsets
    }
    fn offset_groups(&self) -> Vec<String> {
        self.inner.offset_groups()
    }
    fn authorize_group_delete(&self, group: &str) -> ApiResult<()> {
        for o in self.inner.committed_offsets(group) {
            self.need(Op::Admin, &o.topic)?;
        }
        self.inner.authorize_group_delete(group)
    }
    async fn delete_group(&self, group: &str) -> ApiResult<()> {
        self.authorize_group_delete(group)?;
        self.inner.delete_group(group).await
    }
    async fn drain(&self, node: &str) -> ApiResult<()> {
        self.need_cluster_admin()?;
        self.inner.drain(node).await
    }
    fn auth_required(&self) -> bool {
        self.inner.auth_required()
    }
    fn authenticate(&self, secret: &str) -> Result<Principal, crate::auth::AuthFailure> {
        self.inner.authenticate(secret)
    }
    async fn create_token(&self, req: crate::auth::NewToken) -> ApiResult<crate::auth::IssuedToken> {
        self.need_cluster_admin()?;
        self.inner.create_token(req).await
    }
    fn list_tokens(&self) -> Vec<crate::auth::TokenInfo> {
        if self.principal.is_cluster_admin() {
            self.inner.list_tokens()
        } else {
            Vec::new()
        }
    }
    async fn revoke_token(&self, id: &str) -> ApiResult<()> {
        self.need_cluster_admin()?;
        self.inner.revoke_token(id).await
    }
}
