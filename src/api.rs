//! The operations a front door (HTTP today, Kafka and Durable Streams later)
//! asks of a node, and the public error kinds they map to.
//!
//! Every module's own errors are mapped to [`ApiError`] in one place (here
//! and in `node`), and each front door maps [`ErrorCode`] to its status codes
//! or protocol error codes.

use crate::ids::{NodeEpoch, Offset, StreamEpoch};
use crate::meta::{ConfigUpdate, TopicConfig};
use crate::stream::batch::Record;
use async_trait::async_trait;
use serde::Serialize;
use std::time::Duration;

/// The public error kinds. Each says what a caller should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request is malformed: fix it; retrying the same request fails again.
    InvalidRequest,
    InvalidTopicName,
    InvalidPartitionCount,
    InvalidOffset,
    InvalidJson,
    /// No or bad credentials.
    Unauthenticated,
    /// The credentials lack the scope.
    Forbidden,
    TopicNotFound,
    PartitionNotFound,
    TokenNotFound,
    NotFound,
    /// Creating something that exists.
    TopicExists,
    /// Asked for something only `--auth on` offers (issuing tokens).
    AuthOff,
    RecordTooLarge,
    RequestTooLarge,
    /// Below the start offset or past the end.
    OffsetOutOfRange,
    /// Back-pressure: retry after a pause.
    Throttled,
    /// An idempotent producer's batch does not follow its last sequence.
    OutOfOrderSequence,
    /// An idempotent producer's epoch is older than one the stream has seen.
    InvalidProducerEpoch,
    /// Stream moving, node fenced or shutting down, metadata store down:
    /// retry, possibly on another node.
    Unavailable,
    /// A bug or corrupt stored data; not retryable.
    Internal,
}

impl ErrorCode {
    /// Every code, for parsing.
    pub const ALL: [ErrorCode; 21] = [
        ErrorCode::InvalidRequest,
        ErrorCode::InvalidTopicName,
        ErrorCode::InvalidPartitionCount,
        ErrorCode::InvalidOffset,
        ErrorCode::InvalidJson,
        ErrorCode::Unauthenticated,
        ErrorCode::Forbidden,
        ErrorCode::TopicNotFound,
        ErrorCode::PartitionNotFound,
        ErrorCode::TokenNotFound,
        ErrorCode::NotFound,
        ErrorCode::TopicExists,
        ErrorCode::AuthOff,
        ErrorCode::RecordTooLarge,
        ErrorCode::RequestTooLarge,
        ErrorCode::OffsetOutOfRange,
        ErrorCode::Throttled,
        ErrorCode::OutOfOrderSequence,
        ErrorCode::InvalidProducerEpoch,
        ErrorCode::Unavailable,
        ErrorCode::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::InvalidTopicName => "invalid_topic_name",
            ErrorCode::InvalidPartitionCount => "invalid_partition_count",
            ErrorCode::InvalidOffset => "invalid_offset",
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::TopicNotFound => "topic_not_found",
            ErrorCode::PartitionNotFound => "partition_not_found",
            ErrorCode::TokenNotFound => "token_not_found",
            ErrorCode::NotFound => "not_found",
            ErrorCode::TopicExists => "topic_exists",
            ErrorCode::AuthOff => "auth_off",
            ErrorCode::RecordTooLarge => "record_too_large",
            ErrorCode::RequestTooLarge => "request_too_large",
            ErrorCode::OffsetOutOfRange => "offset_out_of_range",
            ErrorCode::Throttled => "throttled",
            ErrorCode::OutOfOrderSequence => "out_of_order_sequence",
            ErrorCode::InvalidProducerEpoch => "invalid_producer_epoch",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
        }
    }

    pub fn retryable(self) -> bool {
        matches!(self, ErrorCode::Throttled | ErrorCode::Unavailable)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// For `offset_out_of_range`: the stream's current start offset.
    pub start_offset: Option<Offset>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            start_offset: None,
        }
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }

    /// `not_found` seen in a view that could not catch up with the metadata
    /// log: the thing may exist, so the answer is "retry" (503), not 404.
    pub fn unconfirmed(not_found: &ApiError) -> Self {
        Self::unavailable(format!(
            "{}; this node could not catch up with the metadata log to be sure, retry",
            not_found.message
        ))
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicSummary {
    pub name: String,
    pub partitions: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionInfo {
    pub partition: u32,
    pub owner: Option<String>,
    pub stream_epoch: StreamEpoch,
    pub state: String,
    pub start_offset: Offset,
    /// The high watermark where the owner is this node, else the committed end.
    pub end_offset: Offset,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicDescription {
    pub name: String,
    pub partitions: u32,
    pub config: TopicConfig,
    pub partition_info: Vec<PartitionInfo>,
}

/// Where an append landed: consecutive offsets from `base`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Appended {
    pub base: Offset,
    pub count: u32,
}

/// Where a read starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// The stream's start offset.
    Start,
    /// The high watermark (`offset=-1`).
    End,
    At(Offset),
}

#[derive(Debug, Clone)]
pub struct ReadRequest {
    pub from: ReadFrom,
    /// At most this many records (≥ 1).
    pub limit: usize,
    /// At most about this many bytes of values, keys and headers; the first
    /// record is returned even if larger.
    pub max_bytes: usize,
    /// Long poll: wait up to this long for records when none are available.
    pub wait: Duration,
}

#[derive(Debug, Clone)]
pub struct ReadResult {
    pub records: Vec<(Offset, Record)>,
    pub next_offset: Offset,
    pub high_watermark: Offset,
    pub start_offset: Offset,
}

/// Stored RecordBatch v2 bytes for an offset range (the Kafka Fetch path).
#[derive(Debug, Clone)]
pub struct BatchRead {
    /// Whole batches as stored; the first may start before the requested
    /// offset, none reaches past the high watermark.
    pub batches: Vec<bytes::Bytes>,
    pub high_watermark: Offset,
    pub start_offset: Offset,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadyStatus {
    pub ready: bool,
    pub node_id: String,
    pub epoch: NodeEpoch,
    pub fenced: bool,
    pub lease_holder: bool,
    /// Why not ready: `starting`, `draining`, `fenced`, `shutting_down`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeInfo {
    pub node_id: String,
    pub epoch: NodeEpoch,
    pub heartbeats: u64,
    pub fenced: bool,
    pub live: bool,
    pub draining: bool,
    pub http_addr: String,
    pub kafka_addr: String,
    pub open_streams: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodesInfo {
    pub lease_holder: Option<String>,
    pub nodes: Vec<NodeInfo>,
}

/// Limits a front door enforces before calling the engine.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_record_bytes: usize,
    pub max_request_bytes: usize,
    pub max_wait: Duration,
    /// Largest HTTP read answer (`--http-max-read-bytes`): a native read's
    /// `max_bytes` is clamped to it and its JSON body never exceeds it
    /// (one record larger than it is still returned alone); Durable Streams
    /// reads and SSE batches read at most this many bytes at once.
    pub max_read_bytes: usize,
}

/// What a node does for its front doors.
/// One committed offset of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffset {
    pub topic: String,
    pub partition: u32,
    pub offset: i64,
    pub metadata: Option<String>,
}

#[async_trait]
pub trait Engine: Send + Sync + 'static {
    fn limits(&self) -> Limits;
    async fn create_topic(&self, name: &str, partitions: u32, config: TopicConfig) -> ApiResult<TopicSummary>;
    fn list_topics(&self) -> Vec<TopicSummary>;
    fn describe_topic(&self, name: &str) -> ApiResult<TopicDescription>;
    async fn delete_topic(&self, name: &str) -> ApiResult<()>;
    // admin
    /// Grow a topic to `partitions` partitions: `invalid_partition_count`
    /// unless that is an increase (up to the maximum). The new partitions
    /// are placed like a new topic's. Proposed from any node, like
    /// [`Engine::create_topic`].
    async fn add_partitions(&self, name: &str, partitions: u32) -> ApiResult<()> {
        let _ = (name, partitions);
        Err(ApiError::new(
            ErrorCode::NotFound,
            "adding partitions is not supported here",
        ))
    }
    /// Apply `updates` to a topic's configuration, all or nothing
    /// (`invalid_request` for a value out of range); returns the new
    /// configuration.
    async fn alter_topic_config(&self, name: &str, updates: Vec<ConfigUpdate>) -> ApiResult<TopicConfig> {
        let _ = (name, updates);
        Err(ApiError::new(
            ErrorCode::NotFound,
            "altering topic configs is not supported here",
        ))
    }
    /// Number of partitions of a topic (`topic_not_found` otherwise), as
    /// this node's view has it now.
    fn partitions(&self, topic: &str) -> ApiResult<u32>;
    /// [`Engine::partitions`] for a request naming the topic: an engine with
    /// a metadata log catches up with it before answering that the topic or
    /// partition does not exist (it may have just been created or grown
    /// through another node), and answers 503 instead when it cannot.
    async fn partitions_current(&self, topic: &str) -> ApiResult<u32> {
        self.partitions(topic)
    }
    /// [`Engine::describe_topic`] with the same catch-up as
    /// [`Engine::partitions_current`]: `topic_not_found` only from a view
    /// that has caught up with the metadata log, 503 when it could not.
    async fn describe_topic_current(&self, name: &str) -> ApiResult<TopicDescription> {
        self.describe_topic(name)
    }
    /// Append records to one partition atomically; returns once every record
    /// is durable.
    async fn append(&self, topic: &str, partition: u32, records: Vec<Record>) -> ApiResult<Appended>;
    async fn read(&self, topic: &str, partition: u32, req: ReadRequest) -> ApiResult<ReadResult>;
    /// Append one producer-encoded RecordBatch v2 (CRC-checked by the
    /// caller) to a partition this node owns, assigning its offsets; returns
    /// once durable. Never forwarded: Kafka clients go to the leader.
    async fn append_batch(&self, topic: &str, partition: u32, batch: bytes::Bytes) -> ApiResult<Appended> {
        let _ = (topic, partition, batch);
        Err(ApiError::new(
            ErrorCode::NotFound,
            "raw batch appends are not supported here",
        ))
    }
    /// Stored batches from `from` on, up to about `max_bytes` (at least one
    /// batch when any exists), never past the high watermark; waits up to
    /// `wait` when `from` is at the high watermark.
    async fn read_batches(
        &self,
        topic: &str,
        partition: u32,
        from: Offset,
        max_bytes: usize,
        wait: Duration,
    ) -> ApiResult<BatchRead> {
        let _ = (topic, partition, from, max_bytes, wait);
        Err(ApiError::new(
            ErrorCode::NotFound,
            "raw batch reads are not supported here",
        ))
    }
    fn ready(&self) -> ReadyStatus;
    fn nodes(&self) -> NodesInfo;
    /// Resolves when live reads must end (shutdown step 3).
    async fn live_reads_ended(&self);
    /// Start moving a partition to another node (`BeginTransfer`).
    async fn transfer(&self, topic: &str, partition: u32, to: &str) -> ApiResult<()> {
        let _ = (topic, partition, to);
        Err(ApiError::new(ErrorCode::NotFound, "transfers are not supported here"))
    }
    /// Where leader (stream) epoch `epoch` of a partition this node owns
    /// ended: the start offset of the next epoch, or the high watermark for
    /// the current epoch (Kafka's OffsetForLeaderEpoch).
    async fn leader_epoch_end(&self, topic: &str, partition: u32, epoch: StreamEpoch) -> ApiResult<Offset> {
        let _ = (topic, partition, epoch);
        Err(ApiError::new(
            ErrorCode::NotFound,
            "leader epochs are not supported here",
        ))
    }
    /// Bring this node's view of the metadata up to everything committed so
    /// far (bounded wait), so a read follows a change made through another
    /// node. False when that could not be done in time: an absence in the
    /// view then proves nothing. The default has nothing to catch up with.
    async fn sync_metadata(&self) -> bool {
        true
    }
    /// Wait (bounded) until this node's view has applied metadata log entry
    /// `index`; false when it could not. A forwarded request carries the
    /// forwarder's index, so the owner answers from a view at least as new
    /// as the one that routed it there.
    async fn catch_up_to(&self, index: u64) -> bool {
        let _ = index;
        true
    }
    /// Whether `presented` is the credential of a node of this cluster, so a
    /// request carrying it may be served as forwarded. Nothing is a peer
    /// unless the engine says so.
    fn is_peer(&self, presented: &str) -> bool {
        let _ = presented;
        false
    }
    /// A Kafka producer id unique in the cluster (InitProducerId).
    async fn init_producer_id(&self) -> ApiResult<i64> {
        Err(ApiError::new(
            ErrorCode::NotFound,
            "idempotent producers are not supported here",
        ))
    }
    /// Durably commit a consumer group's offsets (all or nothing).
    async fn commit_offsets(&self, group: &str, offsets: Vec<GroupOffset>) -> ApiResult<()> {
        let _ = (group, offsets);
        Err(ApiError::new(
            ErrorCode::NotFound,
            "consumer groups are not supported here",
        ))
    }
    /// A consumer group's committed offsets.
    fn committed_offsets(&self, group: &str) -> Vec<GroupOffset> {
        let _ = group;
        Vec::new()
    }
    /// Groups with committed offsets.
    fn offset_groups(&self) -> Vec<String> {
        Vec::new()
    }
    /// Whether the caller may delete `group` (`forbidden` if not), asked
    /// before anything of the group is touched. Everyone may by default.
    fn authorize_group_delete(&self, group: &str) -> ApiResult<()> {
        let _ = group;
        Ok(())
    }
    /// Forget a consumer group's committed offsets (`not_found` if it has none).
    async fn delete_group(&self, group: &str) -> ApiResult<()> {
        let _ = group;
        Err(ApiError::new(
            ErrorCode::NotFound,
            "consumer groups are not supported here",
        ))
    }
    /// Mark a node draining: placement avoids it and its streams move away.
    async fn drain(&self, node: &str) -> ApiResult<()> {
        let _ = node;
        Err(ApiError::new(ErrorCode::NotFound, "draining is not supported here"))
    }
    // auth
    /// Whether callers must authenticate (`--auth on`). The default (and
    /// `--auth off`) lets every caller do everything.
    fn auth_required(&self) -> bool {
        false
    }
    /// Who presented `secret`, checked against this node's applied view.
    fn authenticate(&self, secret: &str) -> Result<crate::auth::Principal, crate::auth::AuthFailure> {
        let _ = secret;
        Err(crate::auth::AuthFailure::Unknown)
    }
    /// Issue a token; the answer holds its secret, shown this once.
    async fn create_token(&self, req: crate::auth::NewToken) -> ApiResult<crate::auth::IssuedToken> {
        let _ = req;
        Err(ApiError::new(ErrorCode::NotFound, "tokens are not supported here"))
    }
    /// Every unrevoked token, without secrets.
    fn list_tokens(&self) -> Vec<crate::auth::TokenInfo> {
        Vec::new()
    }
    /// Revoke a token (`token_not_found` if there is none with that id).
    async fn revoke_token(&self, id: &str) -> ApiResult<()> {
        let _ = id;
        Err(ApiError::new(ErrorCode::TokenNotFound, "tokens are not supported here"))
    }
}

tokio::task_local! {
    /// Set while serving a request another node forwarded to this one, so it
    /// is never forwarded again (routing is one hop).
    pub static FORWARDED: bool;
}

/// Whether the current request was forwarded by another node.
pub fn is_forwarded() -> bool {
    FORWARDED.try_with(|f| *f).unwrap_or(false)
}

/// The header that marks a forwarded request. Its value is the metadata
/// log index the forwarding node had applied (older nodes send `1`).
pub const FORWARDED_HEADER: &str = "sluice-forwarded";

/// The header that proves a forwarded request comes from a node of this
/// cluster (see `node::peer`); without it [`FORWARDED_HEADER`] is ignored.
pub const PEER_HEADER: &str = "sluice-peer";

tokio::task_local! {
    /// The bearer token the current HTTP request came with, so a request
    /// forwarded to a stream's owner carries the caller's own credentials
    /// (the owner authorizes it again; nodes hold no privilege of their own).
    pub static CALLER_TOKEN: Option<std::sync::Arc<crate::auth::Secret>>;
}

/// The current request's bearer token, if it had one.
pub fn caller_token() -> Option<std::sync::Arc<crate::auth::Secret>> {
    CALLER_TOKEN.try_with(|t| t.clone()).ok().flatten()
}

impl ErrorCode {
    /// The code for its wire name (from another node's error body).
    pub fn from_wire(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unconfirmed_absence_is_a_retryable_503_that_keeps_the_reason() {
        let missing = ApiError::new(ErrorCode::TopicNotFound, "topic \"t\" does not exist");
        let e = ApiError::unconfirmed(&missing);
        assert_eq!(e.code, ErrorCode::Unavailable);
        assert!(e.message.starts_with("topic \"t\" does not exist; "), "{}", e.message);
        assert!(e.message.ends_with("retry"), "{}", e.message);
    }

    #[test]
    fn every_code_round_trips_through_its_wire_name() {
        let names: std::collections::BTreeSet<_> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), ErrorCode::ALL.len(), "wire names are distinct");
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_wire(c.as_str()), Some(c));
        }
        assert_eq!(ErrorCode::from_wire("nope"), None);
    }
}
