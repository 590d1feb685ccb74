//! An in-memory backend of every capability for testing the front doors: a
//! `Vec` of records per partition, honest offsets, long poll through
//! [`Notify`], and knobs to inject failures. Not a model of a node: no
//! durability, no ownership, no raw batches, consumer groups, producer ids
//! or tokens (those calls are refused explicitly, with the code a caller
//! would see from a node that lacks them).

use crate::api::*;
use crate::auth::{AuthFailure, IssuedToken, NewToken, Principal, TokenInfo};
use crate::batch::Record;
use crate::ids::{NodeEpoch, Offset, StreamEpoch, TopicId, TopicUuid};
use crate::meta::view::validate_topic_name;
use crate::meta::{ConfigUpdate, TopicConfig};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

#[derive(Default)]
struct Log {
    /// Offsets below `start` have been truncated away.
    start: u64,
    /// `records[i]` is at offset `i`.
    records: Vec<Record>,
}

#[derive(Default)]
struct Partition {
    log: Mutex<Log>,
    appended: Notify,
}

struct Topic {
    config: TopicConfig,
    partitions: Vec<Arc<Partition>>,
}

pub struct FakeEngine {
    limits: Limits,
    topics: Mutex<BTreeMap<String, Topic>>,
    /// Appends to this partition (or to any, with `None`) fail with the error.
    fail_appends: Mutex<Option<(Option<u32>, ApiError)>>,
    fail_reads: Mutex<Option<ApiError>>,
    ended: watch::Sender<bool>,
    ready: Mutex<ReadyStatus>,
    /// Calls to `append` that reached the log.
    pub append_calls: AtomicU64,
    /// The metadata log index this "node" has applied (`catch_up_to`
    /// succeeds up to it).
    pub applied: AtomicU64,
    /// The indexes `catch_up_to` was asked for.
    pub caught_up_to: Mutex<Vec<u64>>,
    /// While positive, `is_peer` answers `false` that many more times (the
    /// peer key loads between two checks of one request).
    pub peer_loads_after: AtomicU64,
    /// Consumer groups' membership records, as the log would keep them.
    group_states: Mutex<BTreeMap<String, GroupState>>,
}

/// The peer credential the fake accepts.
pub const PEER: &str = "test-peer-credential";

impl FakeEngine {
    pub fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            topics: Mutex::default(),
            fail_appends: Mutex::default(),
            fail_reads: Mutex::default(),
            ended: watch::channel(false).0,
            ready: Mutex::new(ReadyStatus {
                ready: true,
                node_id: "n1".into(),
                epoch: NodeEpoch(3),
                fenced: false,
                lease_holder: true,
                reason: None,
            }),
            append_calls: AtomicU64::new(0),
            applied: AtomicU64::new(u64::MAX),
            caught_up_to: Mutex::default(),
            peer_loads_after: AtomicU64::new(0),
            group_states: Mutex::default(),
        })
    }

    pub fn default_limits() -> Limits {
        Limits {
            max_record_bytes: 1024,
            max_request_bytes: 64 * 1024,
            max_wait: Duration::from_secs(30),
            max_read_bytes: 64 * 1024,
        }
    }

    fn partition(&self, topic: &str, p: u32) -> ApiResult<Arc<Partition>> {
        let topics = self.topics.lock().unwrap();
        let t = topics
            .get(topic)
            .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("no topic {topic}")))?;
        t.partitions
            .get(p as usize)
            .cloned()
            .ok_or_else(|| ApiError::new(ErrorCode::PartitionNotFound, format!("no partition {p}")))
    }

    /// Every record of a partition, from offset 0.
    pub fn records(&self, topic: &str, p: u32) -> Vec<Record> {
        self.partition(topic, p).unwrap().log.lock().unwrap().records.clone()
    }

    /// Records in all partitions of a topic.
    pub fn total_records(&self, topic: &str) -> usize {
        let n = self.topics.lock().unwrap().get(topic).map_or(0, |t| t.partitions.len()) as u32;
        (0..n).map(|p| self.records(topic, p).len()).sum()
    }

    pub fn truncate(&self, topic: &str, p: u32, start: u64) {
        self.partition(topic, p).unwrap().log.lock().unwrap().start = start;
    }

    pub fn fail_appends(&self, partition: Option<u32>, e: Option<ApiError>) {
        *self.fail_appends.lock().unwrap() = e.map(|e| (partition, e));
    }

    pub fn fail_reads(&self, e: Option<ApiError>) {
        *self.fail_reads.lock().unwrap() = e;
    }

    pub fn end_live_reads(&self) {
        self.ended.send_replace(true);
    }

    pub fn set_ready(&self, ready: bool, reason: Option<&str>) {
        let mut r = self.ready.lock().unwrap();
        r.ready = ready;
        r.reason = reason.map(str::to_string);
    }
}

fn collect(log: &Log, from: u64, req: &ReadRequest) -> ReadResult {
    let mut records = Vec::new();
    let mut bytes = 0;
    for (i, r) in log.records.iter().enumerate().skip(from as usize).take(req.limit) {
        let size = r.key.as_ref().map_or(0, |k| k.len()) + r.value.as_ref().map_or(0, |v| v.len());
        if !records.is_empty() && bytes + size > req.max_bytes {
            break;
        }
        bytes += size;
        records.push((Offset(i as u64), r.clone()));
    }
    ReadResult {
        next_offset: Offset(from + records.len() as u64),
        records,
        high_watermark: Offset(log.records.len() as u64),
        start_offset: Offset(log.start),
    }
}

/// What the fake cannot do, answered as the old engine default did.
fn unsupported(what: &str) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("{what} are not supported here"))
}

impl From<Arc<FakeEngine>> for Services {
    fn from(fake: Arc<FakeEngine>) -> Self {
        let limits = fake.limits;
        Services::of(fake, limits, crate::clock::system())
    }
}

#[async_trait]
impl Topics for FakeEngine {
    async fn create_topic(&self, name: &str, partitions: u32, config: TopicConfig) -> ApiResult<TopicSummary> {
        validate_topic_name(name).map_err(|m| ApiError::new(ErrorCode::InvalidTopicName, m))?;
        let mut topics = self.topics.lock().unwrap();
        if topics.contains_key(name) {
            return Err(ApiError::new(ErrorCode::TopicExists, format!("topic {name} exists")));
        }
        let partitions_vec = (0..partitions).map(|_| Arc::default()).collect();
        topics.insert(
            name.to_string(),
            Topic {
                config,
                partitions: partitions_vec,
            },
        );
        Ok(TopicSummary {
            name: name.to_string(),
            partitions,
            topic_id: TopicUuid::derive(TopicId(0), name),
        })
    }

    fn list_topics(&self) -> Vec<TopicSummary> {
        let topics = self.topics.lock().unwrap();
        topics
            .iter()
            .map(|(name, t)| TopicSummary {
                name: name.clone(),
                partitions: t.partitions.len() as u32,
                topic_id: TopicUuid::derive(TopicId(0), name),
            })
            .collect()
    }

    fn describe_topic(&self, name: &str) -> ApiResult<TopicDescription> {
        let topics = self.topics.lock().unwrap();
        let t = topics
            .get(name)
            .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("no topic {name}")))?;
        let partition_info = t
            .partitions
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let log = p.log.lock().unwrap();
                PartitionInfo {
                    partition: i as u32,
                    owner: Some("n1".into()),
                    stream_epoch: StreamEpoch(1),
                    state: "open".into(),
                    start_offset: Offset(log.start),
                    end_offset: Offset(log.records.len() as u64),
                    compacted_end: Offset(0),
                }
            })
            .collect();
        Ok(TopicDescription {
            name: name.to_string(),
            partitions: t.partitions.len() as u32,
            topic_id: TopicUuid::derive(TopicId(0), name),
            config: t.config.clone(),
            partition_info,
        })
    }

    async fn delete_topic(&self, name: &str) -> ApiResult<()> {
        match self.topics.lock().unwrap().remove(name) {
            Some(_) => Ok(()),
            None => Err(ApiError::new(ErrorCode::TopicNotFound, format!("no topic {name}"))),
        }
    }

    fn partitions(&self, topic: &str) -> ApiResult<u32> {
        let topics = self.topics.lock().unwrap();
        topics
            .get(topic)
            .map(|t| t.partitions.len() as u32)
            .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("no topic {topic}")))
    }

    fn config(&self, topic: &str) -> ApiResult<TopicConfig> {
        let topics = self.topics.lock().unwrap();
        topics
            .get(topic)
            .map(|t| t.config.clone())
            .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("no topic {topic}")))
    }

    fn partition_bytes(&self, topic: &str) -> ApiResult<Vec<u64>> {
        // The fake keeps no bytes of its own: nothing is stored anywhere.
        Ok(vec![0; self.partitions(topic)? as usize])
    }

    async fn describe_topic_current(&self, name: &str) -> ApiResult<TopicDescription> {
        self.describe_topic(name)
    }

    async fn partitions_current(&self, topic: &str) -> ApiResult<u32> {
        self.partitions(topic)
    }

    async fn add_partitions(&self, _name: &str, _partitions: u32) -> ApiResult<()> {
        Err(unsupported("adding partitions"))
    }

    /// As the view applies it: every update validated, then all applied
    /// and the result checked as a whole.
    async fn alter_topic_config(&self, name: &str, updates: Vec<ConfigUpdate>) -> ApiResult<TopicConfig> {
        let mut topics = self.topics.lock().unwrap();
        let t = topics
            .get_mut(name)
            .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("no topic {name}")))?;
        let mut config = t.config.clone();
        for u in &updates {
            u.validate().map_err(ApiError::invalid)?;
            config.apply(u);
        }
        config.validate().map_err(ApiError::invalid)?;
        t.config = config.clone();
        Ok(config)
    }
}

#[async_trait]
impl Records for FakeEngine {
    async fn append(&self, topic: &str, partition: u32, records: Vec<Record>) -> ApiResult<Appended> {
        assert!(!records.is_empty(), "the front door must not send empty appends");
        let part = self.partition(topic, partition)?;
        if let Some((p, e)) = self.fail_appends.lock().unwrap().clone() {
            if p.is_none_or(|p| p == partition) {
                return Err(e);
            }
        }
        self.append_calls.fetch_add(1, Ordering::Relaxed);
        let base = {
            let mut log = part.log.lock().unwrap();
            let base = log.records.len() as u64;
            log.records.extend(records.iter().cloned());
            base
        };
        part.appended.notify_waiters();
        Ok(Appended {
            base: Offset(base),
            count: records.len() as u32,
        })
    }

    async fn append_durable(
        &self,
        _topic: &str,
        _partition: u32,
        _write: crate::meta::writers::DsWrite,
        _records: Vec<Record>,
    ) -> ApiResult<crate::meta::writers::DsAppend> {
        Err(unsupported("Durable Streams writes"))
    }

    async fn read(&self, topic: &str, partition: u32, req: ReadRequest) -> ApiResult<ReadResult> {
        let part = self.partition(topic, partition)?;
        let deadline = Instant::now() + req.wait;
        let mut from = None;
        loop {
            if let Some(e) = self.fail_reads.lock().unwrap().clone() {
                return Err(e);
            }
            let notified = part.appended.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let log = part.log.lock().unwrap();
                let end = log.records.len() as u64;
                let at = *from.get_or_insert(match req.from {
                    ReadFrom::Start => log.start,
                    ReadFrom::End => end,
                    ReadFrom::At(o) => o.get(),
                });
                if at < log.start || at > end {
                    return Err(ApiError {
                        code: ErrorCode::OffsetOutOfRange,
                        message: format!("offset {at} is outside {}..={end}", log.start),
                        start_offset: Some(Offset(log.start)),
                    });
                }
                if at < end || Instant::now() >= deadline {
                    return Ok(collect(&log, at, &req));
                }
            }
            let _ = tokio::time::timeout_at(deadline, notified).await;
        }
    }

    async fn append_batch(&self, _topic: &str, _partition: u32, _batch: bytes::Bytes) -> ApiResult<Appended> {
        Err(unsupported("raw batch appends"))
    }

    async fn relay_subscription(
        &self,
        _topic: &str,
        _partition: u32,
        _path_and_query: &str,
        _last_event_id: Option<&str>,
    ) -> Option<ApiResult<crate::api::ByteStream>> {
        None // one node: every subscription is served here
    }

    async fn read_batches(
        &self,
        _topic: &str,
        _partition: u32,
        _from: Offset,
        _max_bytes: usize,
        _wait: Duration,
        _committed: bool,
    ) -> ApiResult<BatchRead> {
        Err(unsupported("raw batch reads"))
    }

    async fn append_marker(
        &self,
        _topic: &str,
        _partition: u32,
        _marker: bytes::Bytes,
        _of: Option<crate::api::MarkerOf>,
    ) -> ApiResult<Appended> {
        Err(unsupported("transaction markers"))
    }

    async fn leader_epoch_end(&self, _topic: &str, _partition: u32, _epoch: StreamEpoch) -> ApiResult<Offset> {
        Err(unsupported("leader epochs"))
    }

    /// Never done: as a node waiting for a flush that does not come, so a
    /// caller's own deadline is what ends it.
    async fn delete_before(&self, _topic: &str, _partition: u32, _before: Option<Offset>) -> ApiResult<Offset> {
        std::future::pending().await
    }

    /// Idempotent producers are refused here (see `init_producer_id`), so
    /// no partition remembers any.
    async fn producers(&self, topic: &str, partition: u32) -> ApiResult<Vec<ProducerState>> {
        self.partition(topic, partition)?;
        Ok(Vec::new())
    }
}

/// No consumer group has offsets here, and none can commit any.
#[async_trait]
impl GroupOffsets for FakeEngine {
    async fn commit_offsets(&self, _group: &str, _offsets: Vec<GroupOffset>) -> ApiResult<()> {
        Err(unsupported("consumer groups"))
    }

    fn committed_offsets(&self, _group: &str) -> Vec<GroupOffset> {
        Vec::new()
    }

    fn offset_groups(&self) -> Vec<String> {
        Vec::new()
    }

    fn authorize_group_delete(&self, _group: &str) -> ApiResult<()> {
        Ok(())
    }

    async fn delete_group(&self, _group: &str) -> ApiResult<()> {
        Err(unsupported("consumer groups"))
    }

    fn authorize_offset_delete(&self, _group: &str, _topic: &str) -> ApiResult<()> {
        Ok(())
    }

    /// No group has offsets here: there is nothing to forget.
    async fn delete_offsets(&self, _group: &str, _partitions: Vec<(String, u32)>) -> ApiResult<()> {
        Ok(())
    }

    fn group_state(&self, group: &str) -> Option<GroupState> {
        self.group_states.lock().unwrap().get(group).cloned()
    }

    fn group_states(&self) -> Vec<String> {
        self.group_states.lock().unwrap().keys().cloned().collect()
    }

    /// The log's rules (`meta::group_state::put`) over a map in memory.
    async fn put_group_state(
        &self,
        group: &str,
        kind: &str,
        expected: u64,
        data: Vec<u8>,
    ) -> ApiResult<GroupStateWrite> {
        if data.len() > MAX_GROUP_STATE_BYTES {
            return Err(ApiError::new(ErrorCode::RequestTooLarge, "group state too large"));
        }
        let mut states = self.group_states.lock().unwrap();
        let current = states.get(group).map_or(0, |s| s.version);
        if current != expected {
            return Ok(GroupStateWrite::Conflict(states.get(group).cloned()));
        }
        let version = current + 1;
        states.insert(
            group.to_string(),
            GroupState {
                kind: kind.to_string(),
                version,
                data,
            },
        );
        Ok(GroupStateWrite::Written(version))
    }

    async fn delete_group_state(&self, group: &str, expected: Option<u64>) -> ApiResult<GroupStateWrite> {
        let mut states = self.group_states.lock().unwrap();
        let current = states.get(group).map_or(0, |s| s.version);
        if expected.is_some_and(|e| e != current) {
            return Ok(GroupStateWrite::Conflict(states.get(group).cloned()));
        }
        states.remove(group);
        Ok(GroupStateWrite::Written(0))
    }
}

#[async_trait]
impl ProducerIds for FakeEngine {
    async fn init_producer_id(&self) -> ApiResult<i64> {
        Err(unsupported("idempotent producers"))
    }
    async fn transaction(&self, _id: &str, _req: TxnRequest) -> ApiResult<TxnAnswer> {
        Err(unsupported("transactions"))
    }
    /// Transactions are not modelled: every caller gets a turn of its own.
    async fn finishing(&self, _id: &str) -> FinishTurn {
        std::sync::Arc::new(tokio::sync::Mutex::new(())).lock_owned().await
    }
    fn transactions(&self) -> Vec<(String, TxnSummary)> {
        Vec::new()
    }
}

/// Auth is off: nobody needs a token and none can be issued.
#[async_trait]
impl Tokens for FakeEngine {
    fn auth_required(&self) -> bool {
        false
    }

    fn authenticate(&self, _secret: &str) -> Result<Principal, AuthFailure> {
        Err(AuthFailure::Unknown)
    }

    fn scram_credential(
        &self,
        _user: &str,
        _mechanism: crate::auth::scram::Mechanism,
    ) -> Result<Option<crate::auth::scram::Credential>, AuthFailure> {
        Err(AuthFailure::Unknown)
    }

    fn authenticate_id(&self, _id: &str) -> Result<Principal, AuthFailure> {
        Err(AuthFailure::Unknown)
    }

    fn scram_users(&self) -> ApiResult<Vec<crate::auth::scram::UserInfo>> {
        Ok(Vec::new())
    }

    async fn create_token(&self, _req: NewToken) -> ApiResult<IssuedToken> {
        Err(unsupported("tokens"))
    }

    fn list_tokens(&self) -> ApiResult<Vec<TokenInfo>> {
        Ok(Vec::new())
    }

    async fn revoke_token(&self, _id: &str) -> ApiResult<()> {
        Err(ApiError::new(ErrorCode::TokenNotFound, "tokens are not supported here"))
    }
}

#[async_trait]
impl Cluster for FakeEngine {
    fn is_peer(&self, presented: &str) -> bool {
        let loading = self
            .peer_loads_after
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        !loading && presented == PEER
    }

    fn peer_key_loaded(&self) -> bool {
        true
    }

    async fn catch_up_to(&self, index: u64) -> bool {
        self.caught_up_to.lock().unwrap().push(index);
        index <= self.applied.load(Ordering::Relaxed)
    }

    fn ready(&self) -> ReadyStatus {
        self.ready.lock().unwrap().clone()
    }

    fn nodes(&self) -> NodesInfo {
        NodesInfo {
            lease_holder: Some("n1".into()),
            nodes: vec![NodeInfo {
                node_id: "n1".into(),
                epoch: NodeEpoch(3),
                heartbeats: 42,
                fenced: false,
                live: true,
                draining: false,
                http_addr: "127.0.0.1:8080".into(),
                kafka_addr: "127.0.0.1:9092".into(),
                open_streams: 2,
            }],
        }
    }

    /// One process: every node's metrics are this one's.
    async fn node_metrics(&self, _node: &str) -> ApiResult<String> {
        Ok(crate::telemetry::render())
    }

    async fn live_reads_ended(&self) {
        let mut rx = self.ended.subscribe();
        let _ = rx.wait_for(|ended| *ended).await;
    }

    async fn transfer(&self, topic: &str, partition: u32, _to: &str) -> ApiResult<()> {
        if partition >= self.partitions(topic)? {
            return Err(ApiError::new(ErrorCode::PartitionNotFound, "no such partition"));
        }
        Ok(())
    }

    async fn drain(&self, _node: &str) -> ApiResult<()> {
        Ok(())
    }

    /// Nothing to catch up with.
    async fn sync_metadata(&self) -> bool {
        true
    }
}
