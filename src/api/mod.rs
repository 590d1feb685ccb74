//! What the front doors (HTTP, Durable Streams, Kafka) ask of a node, as a
//! handful of narrow capability traits, and the public error kinds they map
//! to.
//!
//! # Capabilities
//!
//! Each trait owns one concern; a front door holds them together in a
//! [`Services`] bundle and calls only the ones it needs:
//!
//! - [`Records`] (`records.rs`): append and read records, raw batches, leader epochs.
//! - [`Topics`] (`topics.rs`): create, list, describe, grow, configure, delete topics.
//! - [`GroupOffsets`] (`group_offsets.rs`): consumer groups' committed offsets.
//! - [`ProducerIds`] (`producer_ids.rs`): Kafka producer ids (InitProducerId).
//! - [`Tokens`] (`tokens.rs`): authentication and the tokens behind it.
//! - [`Cluster`] (`cluster.rs`): this node's status, its peers, moving
//!   streams and draining nodes, catching up with the metadata log.
//!
//! No trait method has a default body: whatever implements a capability (a
//! node, the Kafka authorization wrapper, a test fake) answers every call
//! itself, so a method added to a trait cannot be skipped by omission.
//! This module imports no front door and not `node`.
//!
//! Every module's own errors are mapped to [`ApiError`] in one place (here
//! and in `node`), and each front door maps [`ErrorCode`] to its status codes
//! or protocol error codes.

mod cluster;
mod group_offsets;
mod producer_ids;
mod records;
mod services;
mod tokens;
mod topics;

pub use cluster::Cluster;
pub use group_offsets::GroupOffsets;
pub use producer_ids::{FinishTurn, FinishTurns, ProducerIds, TxnAnswer, TxnRequest, TxnSummary};
pub use records::{high_watermark, last_stable, offset_for_timestamp, MarkerOf, Records};
pub use services::Services;
pub use tokens::Tokens;
pub use topics::Topics;

use crate::batch::Record;
use crate::ids::{NodeEpoch, Offset, StreamEpoch, TopicUuid};
use crate::meta::TopicConfig;
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
    /// A consumer group with neither members nor committed offsets.
    GroupNotFound,
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
    pub const ALL: [ErrorCode; 22] = [
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
        ErrorCode::GroupNotFound,
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
            ErrorCode::GroupNotFound => "group_not_found",
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
    /// The public error body every front door answers with over HTTP:
    /// `{"error": {"code", "message", "retryable", "start_offset"?}}`.
    pub fn body(&self) -> serde_json::Value {
        let mut inner = serde_json::json!({
            "code": self.code.as_str(),
            "message": self.message,
            "retryable": self.code.retryable(),
        });
        if let Some(start) = self.start_offset {
            inner["start_offset"] = serde_json::json!(start.get());
        }
        serde_json::json!({ "error": inner })
    }

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
    /// The Kafka topic id ([`TopicUuid::derive`]).
    pub topic_id: TopicUuid,
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
    /// Where the compacted part ends: below it each key is there once (0
    /// until a compaction of a compacted topic has run).
    pub compacted_end: Offset,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicDescription {
    pub name: String,
    pub partitions: u32,
    pub topic_id: TopicUuid,
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
    /// Only what committed transactions wrote (Kafka's read_committed): no
    /// further than the last stable offset, without the records of aborted
    /// transactions or the control records (transaction markers), and
    /// `End` is the last stable offset. `false`: every stored record up to
    /// the high watermark, control records included.
    pub committed: bool,
    /// What the answer promises about recency (see [`Consistency`]).
    pub consistency: Consistency,
}

/// How current a read's answer must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Consistency {
    /// What the node serving the read knows: always a prefix of the log
    /// that every acknowledged record below its end belongs to, but a node
    /// fenced without knowing it yet (or a lagging view of a closed stream)
    /// may answer with an older end. Served during metadata outages.
    #[default]
    Local,
    /// Linearizable: after serving, the node reads the metadata log to its
    /// end and confirms that the stream's placement (owner, node epoch,
    /// stream epoch; the committed end of a closed stream) is still the one
    /// the read was served under. Every record acknowledged before the read
    /// began is in the answer. Refused (retryable) when the placement moved
    /// or the log cannot be read.
    Strong,
}

#[derive(Debug, Clone)]
pub struct ReadResult {
    pub records: Vec<(Offset, Record)>,
    pub next_offset: Offset,
    pub high_watermark: Offset,
    pub start_offset: Offset,
}

/// A response body relayed from another node as it arrives.
pub type ByteStream = futures::stream::BoxStream<'static, Result<bytes::Bytes, std::io::Error>>;

/// Stored RecordBatch v2 bytes for an offset range (the Kafka Fetch path).
#[derive(Debug, Clone)]
pub struct BatchRead {
    /// Whole batches as stored; the first may start before the requested
    /// offset, none reaches past the high watermark.
    pub batches: Vec<bytes::Bytes>,
    pub high_watermark: Offset,
    pub start_offset: Offset,
    /// The last stable offset: below it no transaction is open.
    pub last_stable: Offset,
    /// For a committed read, the aborted transactions with records in the
    /// batches returned (empty otherwise).
    pub aborted: Vec<crate::meta::txn_index::Aborted>,
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

/// One committed offset of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffset {
    pub topic: String,
    pub partition: u32,
    pub offset: i64,
    pub metadata: Option<String>,
}

/// What a partition's owner keeps of one idempotent producer (Kafka's
/// DescribeProducers): its epoch and its last batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerState {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The sequence number of the last record of its last batch.
    pub last_sequence: i32,
    /// The largest timestamp in its last batch, while that batch is still
    /// in the owner's tail (not yet in a data object); `None` after.
    pub last_timestamp: Option<i64>,
}

/// The most bytes a group's state record may hold (see
/// `meta::group_state::MAX_STATE_BYTES`: one write fits one metadata-log
/// entry that a DynamoDB item carries inline).
pub const MAX_GROUP_STATE_BYTES: usize = crate::meta::group_state::MAX_STATE_BYTES;

/// A consumer group's membership record, opaque below the Kafka front door
/// (which encodes and decodes it). `kind` names the protocol that wrote it:
/// `"classic"` or `"consumer"`. `version` counts its writes (1 for the
/// first); a group without a record is at version 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupState {
    pub kind: String,
    pub version: u64,
    pub data: Vec<u8>,
}

/// What a compare-and-set on a group's state did. A lost race is an
/// ordinary answer: `Conflict` carries the record that won (or `None` if
/// there is none), so the caller can reload from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupStateWrite {
    /// Written; the record is now at this version (0 after a delete).
    Written(u64),
    Conflict(Option<GroupState>),
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

/// The header a forwarded Durable Streams append carries its
/// [`DsWrite`](crate::meta::writers::DsWrite) in (JSON); honoured only on
/// forwarded requests.
pub const DS_WRITE_HEADER: &str = "sluice-ds-write";

/// The header that proves a forwarded request comes from a node of this
/// cluster (see `route::peer`); without it [`FORWARDED_HEADER`] is ignored.
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
