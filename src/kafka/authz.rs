//! Per-topic authorization of Kafka requests: each capability of
//! [`Services`] wrapped to run as one principal, refusing what its scopes do
//! not grant with `forbidden`, which [`super::error_code`] answers as
//! `TOPIC_AUTHORIZATION_FAILED` in the refused topic's (or partition's) slot
//! of the response. The handlers stay unaware of auth; every topic they
//! touch goes through here.
//!
//! | capability | call | needs |
//! | --- | --- | --- |
//! | records | append, append_batch, append_durable | `write` |
//! | records | read, read_batches, leader_epoch_end, relay_subscription, producers | `read` |
//! | records | delete_before (DeleteRecords) | `admin` |
//! | topics | describe_topic(_current), partitions(_current), partition_bytes, list_topics (filtered) | any op on the topic |
//! | topics | create_topic (incl. auto-create), delete_topic, add_partitions, alter_topic_config | `admin` |
//! | group offsets | commit_offsets, committed_offsets (filtered) | `read` |
//! | group offsets | delete_group, authorize_group_delete | `admin` on every topic the group has offsets for |
//! | group offsets | authorize_offset_delete | `read` on the topic |
//! | group offsets | delete_offsets | both of the above: the group's, and each named topic's |
//! | group offsets | offset_groups | nothing |
//! | group state | group_state(s), put_group_state, delete_group_state | nothing (membership is not scoped) |
//! | producer ids | init_producer_id | nothing |
//! | tokens | create_token, revoke_token, list_tokens, scram_users | cluster admin |
//! | tokens | auth_required, authenticate, scram_credential, authenticate_id | nothing |
//! | cluster | transfer, drain | cluster admin |
//! | cluster | ready, nodes, live_reads_ended, sync_metadata, catch_up_to | nothing |
//! | cluster | is_peer | always false: a client is never a peer |
//!
//! There is one wrapper per capability trait, [`Scoped`] over it, and no
//! trait method has a default body: a method added to a trait does not
//! compile until its wrapper here decides what it needs.
//!
//! Consumer groups themselves are not scoped: any authenticated client may
//! join, sync, heartbeat and leave any group; its offsets are guarded by
//! the topic scopes above.

use crate::api::*;
use crate::auth::{AuthFailure, IssuedToken, NewToken, Op, Principal, TokenInfo};
use crate::batch::Record;
use crate::ids::{Offset, StreamEpoch};
use crate::meta::{ConfigUpdate, TopicConfig};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// The capabilities of `inner` as seen by `principal`.
pub fn scoped(inner: &Services, principal: Arc<Principal>) -> Services {
    let p = &principal;
    Services {
        limits: inner.limits,
        records: Arc::new(Scoped::new(inner.records.clone(), p.clone())),
        topics: Arc::new(Scoped::new(inner.topics.clone(), p.clone())),
        group_offsets: Arc::new(Scoped::new(inner.group_offsets.clone(), p.clone())),
        producer_ids: Arc::new(Scoped::new(inner.producer_ids.clone(), p.clone())),
        tokens: Arc::new(Scoped::new(inner.tokens.clone(), p.clone())),
        cluster: Arc::new(Scoped::new(inner.cluster.clone(), principal)),
        clock: inner.clock.clone(),
    }
}

/// One capability `C` (a `dyn` capability trait) as seen by `principal`.
pub struct Scoped<C: ?Sized> {
    inner: Arc<C>,
    principal: Arc<Principal>,
}

impl<C: ?Sized> Scoped<C> {
    pub fn new(inner: Arc<C>, principal: Arc<Principal>) -> Self {
        Self { inner, principal }
    }

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
impl Records for Scoped<dyn Records> {
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
    async fn append_durable(
        &self,
        topic: &str,
        partition: u32,
        write: crate::meta::writers::DsWrite,
        records: Vec<Record>,
    ) -> ApiResult<crate::meta::writers::DsAppend> {
        self.need(Op::Write, topic)?;
        self.inner.append_durable(topic, partition, write, records).await
    }
    async fn read_batches(
        &self,
        topic: &str,
        partition: u32,
        from: Offset,
        max_bytes: usize,
        wait: Duration,
        committed: bool,
    ) -> ApiResult<BatchRead> {
        self.need(Op::Read, topic)?;
        self.inner
            .read_batches(topic, partition, from, max_bytes, wait, committed)
            .await
    }
    /// The coordinator's own write: the transaction's partitions were
    /// authorized for the producer as they were added.
    async fn append_marker(
        &self,
        topic: &str,
        partition: u32,
        marker: bytes::Bytes,
        of: Option<crate::api::MarkerOf>,
    ) -> ApiResult<Appended> {
        self.inner.append_marker(topic, partition, marker, of).await
    }
    async fn relay_subscription(
        &self,
        topic: &str,
        partition: u32,
        path_and_query: &str,
        last_event_id: Option<&str>,
    ) -> Option<ApiResult<crate::api::ByteStream>> {
        if let Err(e) = self.need(Op::Read, topic) {
            return Some(Err(e));
        }
        self.inner
            .relay_subscription(topic, partition, path_and_query, last_event_id)
            .await
    }
    async fn leader_epoch_end(&self, topic: &str, partition: u32, epoch: StreamEpoch) -> ApiResult<Offset> {
        self.need(Op::Read, topic)?;
        self.inner.leader_epoch_end(topic, partition, epoch).await
    }
    async fn delete_before(&self, topic: &str, partition: u32, before: Option<Offset>) -> ApiResult<Offset> {
        self.need(Op::Admin, topic)?;
        self.inner.delete_before(topic, partition, before).await
    }
    async fn producers(&self, topic: &str, partition: u32) -> ApiResult<Vec<ProducerState>> {
        self.need(Op::Read, topic)?;
        self.inner.producers(topic, partition).await
    }
}

#[async_trait]
impl Topics for Scoped<dyn Topics> {
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
    async fn describe_topic_current(&self, name: &str) -> ApiResult<TopicDescription> {
        self.need_sight(name)?;
        self.inner.describe_topic_current(name).await
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
    fn config(&self, topic: &str) -> ApiResult<TopicConfig> {
        self.need_sight(topic)?;
        self.inner.config(topic)
    }
    async fn partitions_current(&self, topic: &str) -> ApiResult<u32> {
        self.need_sight(topic)?;
        self.inner.partitions_current(topic).await
    }
    fn partition_bytes(&self, topic: &str) -> ApiResult<Vec<u64>> {
        self.need_sight(topic)?;
        self.inner.partition_bytes(topic)
    }
}

#[async_trait]
impl GroupOffsets for Scoped<dyn GroupOffsets> {
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
        // Every topic the group has offsets for, not only those the
        // principal may read.
        for o in self.inner.committed_offsets(group) {
            self.need(Op::Admin, &o.topic)?;
        }
        self.inner.authorize_group_delete(group)
    }
    async fn delete_group(&self, group: &str) -> ApiResult<()> {
        self.authorize_group_delete(group)?;
        self.inner.delete_group(group).await
    }
    fn authorize_offset_delete(&self, group: &str, topic: &str) -> ApiResult<()> {
        self.need(Op::Read, topic)?;
        self.inner.authorize_offset_delete(group, topic)
    }
    async fn delete_offsets(&self, group: &str, partitions: Vec<(String, u32)>) -> ApiResult<()> {
        self.authorize_group_delete(group)?;
        for (topic, _) in &partitions {
            self.authorize_offset_delete(group, topic)?;
        }
        self.inner.delete_offsets(group, partitions).await
    }
    // Membership is not scoped (see the module doc): the coordinator
    // writes what its members' requests changed.
    fn group_state(&self, group: &str) -> Option<GroupState> {
        self.inner.group_state(group)
    }
    fn group_state_version(&self, group: &str) -> u64 {
        self.inner.group_state_version(group)
    }
    fn group_states(&self) -> Vec<String> {
        self.inner.group_states()
    }
    async fn put_group_state(
        &self,
        group: &str,
        kind: &str,
        expected: u64,
        data: Vec<u8>,
    ) -> ApiResult<GroupStateWrite> {
        self.inner.put_group_state(group, kind, expected, data).await
    }
    async fn delete_group_state(&self, group: &str, expected: Option<u64>) -> ApiResult<GroupStateWrite> {
        self.inner.delete_group_state(group, expected).await
    }
}

#[async_trait]
impl ProducerIds for Scoped<dyn ProducerIds> {
    /// Any authenticated client may be an idempotent producer; what it
    /// may write to is checked on each append.
    async fn init_producer_id(&self) -> ApiResult<i64> {
        self.inner.init_producer_id().await
    }
    /// A transactional id is not a scoped resource yet: any authenticated
    /// client may coordinate one; its appends are checked per topic.
    async fn transaction(&self, id: &str, req: TxnRequest) -> ApiResult<TxnAnswer> {
        self.inner.transaction(id, req).await
    }
    async fn finishing(&self, id: &str) -> FinishTurn {
        self.inner.finishing(id).await
    }
    fn transactions(&self) -> Vec<(String, TxnSummary)> {
        self.inner.transactions()
    }
}

#[async_trait]
impl Tokens for Scoped<dyn Tokens> {
    fn auth_required(&self) -> bool {
        self.inner.auth_required()
    }
    fn authenticate(&self, secret: &str) -> Result<Principal, AuthFailure> {
        self.inner.authenticate(secret)
    }
    fn scram_credential(
        &self,
        user: &str,
        mechanism: crate::auth::scram::Mechanism,
    ) -> Result<Option<crate::auth::scram::Credential>, AuthFailure> {
        self.inner.scram_credential(user, mechanism)
    }
    fn authenticate_id(&self, id: &str) -> Result<Principal, AuthFailure> {
        self.inner.authenticate_id(id)
    }
    fn scram_users(&self) -> ApiResult<Vec<crate::auth::scram::UserInfo>> {
        self.need_cluster_admin()?;
        self.inner.scram_users()
    }
    async fn create_token(&self, req: NewToken) -> ApiResult<IssuedToken> {
        self.need_cluster_admin()?;
        self.inner.create_token(req).await
    }
    fn list_tokens(&self) -> ApiResult<Vec<TokenInfo>> {
        self.need_cluster_admin()?;
        self.inner.list_tokens()
    }
    async fn revoke_token(&self, id: &str) -> ApiResult<()> {
        self.need_cluster_admin()?;
        self.inner.revoke_token(id).await
    }
}

#[async_trait]
impl Cluster for Scoped<dyn Cluster> {
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
    async fn drain(&self, node: &str) -> ApiResult<()> {
        self.need_cluster_admin()?;
        self.inner.drain(node).await
    }
    async fn node_metrics(&self, node: &str) -> ApiResult<String> {
        self.need_cluster_admin()?;
        self.inner.node_metrics(node).await
    }
    async fn sync_metadata(&self) -> bool {
        self.inner.sync_metadata().await
    }
    async fn catch_up_to(&self, index: u64) -> bool {
        self.inner.catch_up_to(index).await
    }
    /// A Kafka client's credentials never make it a node of the cluster.
    fn is_peer(&self, _presented: &str) -> bool {
        false
    }
    fn peer_key_loaded(&self) -> bool {
        self.inner.peer_key_loaded()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Scope;
    use crate::http::tests::fake::FakeEngine;

    fn forbidden<T: std::fmt::Debug>(r: ApiResult<T>) -> bool {
        matches!(
            r,
            Err(ApiError {
                code: ErrorCode::Forbidden,
                ..
            })
        )
    }

    /// A fake with topics "mine" and "theirs", seen by a principal that may
    /// read and write "mine" only.
    async fn setup() -> (Services, Services) {
        let fake = FakeEngine::new(FakeEngine::default_limits());
        let node: Services = fake.into();
        for t in ["mine", "theirs"] {
            node.topics.create_topic(t, 1, TopicConfig::default()).await.unwrap();
        }
        let principal = Principal {
            id: "tok".into(),
            scopes: vec![Scope::new("mine", &[Op::Read, Op::Write])],
        };
        let scoped = scoped(&node, Arc::new(principal));
        (node, scoped)
    }

    fn record() -> Record {
        Record {
            timestamp_ms: 1,
            key: None,
            value: Some(bytes::Bytes::from_static(b"v")),
            headers: Vec::new(),
        }
    }

    fn read_req() -> ReadRequest {
        ReadRequest {
            from: ReadFrom::Start,
            limit: 10,
            max_bytes: 1 << 20,
            wait: Duration::ZERO,
            committed: false,
            consistency: Default::default(),
        }
    }

    #[tokio::test]
    async fn records_need_write_to_append_and_read_to_read() {
        let (node, s) = setup().await;
        s.records.append("mine", 0, vec![record()]).await.unwrap();
        assert_eq!(s.records.read("mine", 0, read_req()).await.unwrap().records.len(), 1);
        assert!(forbidden(s.records.append("theirs", 0, vec![record()]).await));
        assert!(forbidden(s.records.read("theirs", 0, read_req()).await));
        let batch = bytes::Bytes::from_static(b"not reached");
        assert!(forbidden(s.records.append_batch("theirs", 0, batch).await));
        let write = crate::meta::writers::DsWrite {
            stream_seq: Some("1".into()),
            ..Default::default()
        };
        // The fake keeps no writer state: reaching it is what counts.
        let passed = s.records.append_durable("mine", 0, write.clone(), vec![record()]).await;
        assert!(!forbidden(passed));
        assert!(forbidden(
            s.records.append_durable("theirs", 0, write, vec![record()]).await
        ));
        assert!(forbidden(
            s.records
                .read_batches("theirs", 0, Offset(0), 1, Duration::ZERO, false)
                .await
        ));
        assert!(forbidden(s.records.leader_epoch_end("theirs", 0, StreamEpoch(1)).await));
        assert!(forbidden(s.records.producers("theirs", 0).await));
        assert!(s.records.producers("mine", 0).await.unwrap().is_empty());
        let relayed = s.records.relay_subscription("theirs", 0, "/", None).await;
        assert!(matches!(relayed, Some(Err(e)) if e.code == ErrorCode::Forbidden));
        assert!(
            s.records.relay_subscription("mine", 0, "/", None).await.is_none(),
            "served here"
        );
        assert_eq!(
            node.records.read("theirs", 0, read_req()).await.unwrap().records.len(),
            0
        );
    }

    #[tokio::test]
    async fn topics_are_seen_with_any_scope_and_changed_only_with_admin() {
        let (node, s) = setup().await;
        let names: Vec<_> = s.topics.list_topics().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["mine"], "the list is filtered");
        assert!(s.topics.describe_topic("mine").is_ok());
        assert_eq!(s.topics.partitions_current("mine").await.unwrap(), 1);
        assert!(forbidden(s.topics.describe_topic("theirs")));
        assert!(forbidden(s.topics.describe_topic_current("theirs").await));
        assert!(forbidden(s.topics.partitions("theirs")));
        assert!(forbidden(s.topics.partitions_current("theirs").await));
        // Read and write on "mine" are not admin on it.
        assert!(forbidden(s.topics.create_topic("new", 1, TopicConfig::default()).await));
        assert!(forbidden(s.topics.delete_topic("mine").await));
        assert!(forbidden(s.topics.add_partitions("mine", 2).await));
        assert!(forbidden(s.topics.alter_topic_config("mine", Vec::new()).await));
        assert_eq!(node.topics.list_topics().len(), 2, "nothing was deleted or created");
    }

    #[tokio::test]
    async fn offsets_need_read_on_every_topic_committed() {
        let (_, s) = setup().await;
        let offset = |topic: &str| GroupOffset {
            topic: topic.into(),
            partition: 0,
            offset: 1,
            metadata: None,
        };
        let both = vec![offset("mine"), offset("theirs")];
        assert!(forbidden(s.group_offsets.commit_offsets("g", both).await));
        // The fake itself refuses commits: the wrapper let this one through.
        let mine = s.group_offsets.commit_offsets("g", vec![offset("mine")]).await;
        assert_eq!(mine.unwrap_err().code, ErrorCode::NotFound);
        // Deleting offsets needs read on each topic named.
        assert!(forbidden(s.group_offsets.authorize_offset_delete("g", "theirs")));
        s.group_offsets.authorize_offset_delete("g", "mine").unwrap();
        let both = vec![("mine".to_string(), 0), ("theirs".to_string(), 0)];
        assert!(forbidden(s.group_offsets.delete_offsets("g", both).await));
        s.group_offsets
            .delete_offsets("g", vec![("mine".into(), 0)])
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn cluster_moves_and_tokens_need_cluster_admin_and_a_client_is_never_a_peer() {
        let (node, s) = setup().await;
        assert!(forbidden(s.cluster.transfer("mine", 0, "n2").await));
        assert!(forbidden(s.cluster.drain("n1").await));
        assert!(forbidden(s.tokens.revoke_token("t1").await));
        assert!(forbidden(s.tokens.list_tokens()));
        assert!(node.cluster.is_peer(crate::http::tests::fake::PEER));
        assert!(!s.cluster.is_peer(crate::http::tests::fake::PEER));
        // Status passes through.
        assert_eq!(s.cluster.ready(), node.cluster.ready());
        let admin = scoped(
            &node,
            Arc::new(Principal {
                id: "admin".into(),
                scopes: vec![Scope::new("*", &[Op::Admin])],
            }),
        );
        admin.cluster.transfer("mine", 0, "n2").await.unwrap();
        admin.cluster.drain("n1").await.unwrap();
    }
}
