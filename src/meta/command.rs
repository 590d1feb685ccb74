//! Commands of the metadata log. Their apply conditions (in `view.rs`) are the
//! contract every node relies on.

use crate::ids::{HeartbeatCount, NodeEpoch, NodeId, Offset, StreamEpoch, StreamId};
use serde::{Deserialize, Serialize};

/// Per-topic configuration (Kafka's `retention.ms`, `retention.bytes`,
/// `cleanup.policy`). `None` is "not set": the default applies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfig {
    #[serde(default)]
    pub retention_ms: Option<i64>,
    #[serde(default)]
    pub retention_bytes: Option<i64>,
    /// Absent from entries and snapshots written before it existed, and
    /// omitted when not set so those stay readable by older nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup_policy: Option<CleanupPolicy>,
    /// Set on topics created through the Durable Streams protocol (absent
    /// from everything else, so older entries and snapshots read as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durable: Option<super::durable::DurableMeta>,
}

/// How old records go. Only deletion by retention exists; compaction is
/// not implemented, so it has no variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CleanupPolicy {
    Delete,
}

/// One change to a topic's configuration: the field's new value, `None`
/// to go back to the default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigUpdate {
    RetentionMs(Option<i64>),
    RetentionBytes(Option<i64>),
    CleanupPolicy(Option<CleanupPolicy>),
    /// A change to a Durable Streams stream's state (ignored on other topics).
    Durable(super::durable::DurableUpdate),
}

impl ConfigUpdate {
    /// Retention limits are -1 (unlimited) or positive, as over HTTP.
    pub fn validate(&self) -> Result<(), String> {
        let (name, v) = match self {
            ConfigUpdate::RetentionMs(v) => ("retention_ms", v),
            ConfigUpdate::RetentionBytes(v) => ("retention_bytes", v),
            ConfigUpdate::CleanupPolicy(_) | ConfigUpdate::Durable(_) => return Ok(()),
        };
        match v {
            Some(v) if *v == 0 || *v < -1 => Err(format!("{name} must be positive or -1 (unlimited), got {v}")),
            _ => Ok(()),
        }
    }
}

impl TopicConfig {
    pub fn apply(&mut self, update: &ConfigUpdate) {
        match update {
            ConfigUpdate::RetentionMs(v) => self.retention_ms = *v,
            ConfigUpdate::RetentionBytes(v) => self.retention_bytes = *v,
            ConfigUpdate::CleanupPolicy(v) => self.cleanup_policy = *v,
            ConfigUpdate::Durable(u) => {
                if let Some(d) = &mut self.durable {
                    d.apply(u);
                }
            }
        }
    }
}

/// One chunk of a data object: a contiguous offset range of one stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexedChunk {
    pub base: Offset,
    pub end: Offset,
    pub key: String,
    pub byte_start: u64,
    pub byte_end: u64,
    pub max_timestamp: i64,
    pub crc: u32,
}

/// A chunk offered for the index by `CommitObjects` or a WAL takeover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkCommit {
    pub stream: StreamId,
    pub stream_epoch: StreamEpoch,
    pub chunk: IndexedChunk,
    /// Idempotent-producer batches in the chunk (the last few per producer),
    /// so the view's producer state follows the committed end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub producers: Vec<crate::meta::producers::ProducerBatch>,
    /// Durable Streams writer state the chunk's batches add up to.
    #[serde(default, skip_serializing_if = "crate::meta::writers::WriterTable::is_empty")]
    pub writers: crate::meta::writers::WriterTable,
    /// Transactional batches in the chunk, as the transaction index needs
    /// them (see [`TxnBatch::compact`](crate::meta::txn_index::TxnBatch::compact)),
    /// so the view knows the open and aborted transactions at the
    /// committed end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub txns: Vec<crate::meta::txn_index::TxnBatch>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Command {
    /// A node starts: it gets registration epoch previous + 1.
    RegisterNode {
        node: NodeId,
        http_addr: String,
        kafka_addr: String,
    },
    Heartbeat {
        node: NodeId,
        epoch: NodeEpoch,
    },
    /// Conditional: only if the row is still exactly as the proposer saw it.
    FenceNode {
        node: NodeId,
        epoch: NodeEpoch,
        seen_count: HeartbeatCount,
    },
    FenceSelf {
        node: NodeId,
        epoch: NodeEpoch,
    },
    /// Take the lease from `holder` (or from nobody), which the proposer saw
    /// at `holder_count` heartbeats for a whole lease timeout.
    AcquireLease {
        holder: Option<(NodeId, NodeEpoch)>,
        holder_count: HeartbeatCount,
    },
    CreateTopic {
        name: String,
        partitions: u32,
        config: TopicConfig,
    },
    DeleteTopic {
        name: String,
    },
    /// The lease holder deletes a Durable Streams stream whose lifetime
    /// ended by `now_ms`, its own clock's reading. Applies only if the
    /// stream is still expired at that time (a touch since moved its TTL on).
    ExpireStream {
        name: String,
        now_ms: i64,
    },
    /// The lease holder forgets the rows of deleted streams (their data is
    /// no longer indexed), and any committed offsets of them. All or
    /// nothing: every stream must exist and be deleted.
    DropStreams {
        streams: Vec<StreamId>,
    },
    // admin
    /// Grow a topic to `partitions` partitions. Only an increase applies;
    /// the new streams start closed and are placed like a new topic's.
    AddPartitions {
        name: String,
        partitions: u32,
    },
    /// Change a topic's configuration, one update after another, all or
    /// nothing. Updates (not a whole config) so that concurrent changes of
    /// different keys do not undo each other.
    AlterTopicConfig {
        name: String,
        updates: Vec<ConfigUpdate>,
    },
    PlaceStream {
        stream: StreamId,
        node: NodeId,
        node_epoch: NodeEpoch,
    },
    CommitObjects {
        node: NodeId,
        epoch: NodeEpoch,
        chunks: Vec<ChunkCommit>,
    },
    CloseStream {
        stream: StreamId,
        stream_epoch: StreamEpoch,
        end: Offset,
    },
    /// The lease holder starts recovering the streams of a dead incarnation.
    BeginWalTakeover {
        node: NodeId,
        epoch: NodeEpoch,
    },
    /// Index the replayed tails and close every recovering stream of the
    /// incarnation at its recovered end, all or nothing.
    FinishWalTakeover {
        node: NodeId,
        epoch: NodeEpoch,
        chunks: Vec<ChunkCommit>,
    },
    TrimStream {
        stream: StreamId,
        new_start: Offset,
    },
    /// Start moving an open stream to another live node.
    BeginTransfer {
        stream: StreamId,
        stream_epoch: StreamEpoch,
        to: NodeId,
        to_epoch: NodeEpoch,
    },
    /// The owner flushed everything up to `end`: open the stream on the target.
    CompleteTransfer {
        stream: StreamId,
        stream_epoch: StreamEpoch,
        end: Offset,
    },
    /// The lease holder gives up a transfer (target gone, or no progress).
    CancelTransfer {
        stream: StreamId,
        stream_epoch: StreamEpoch,
    },
    /// Placement avoids the node and moves its streams away.
    DrainNode {
        node: NodeId,
        epoch: NodeEpoch,
    },
    /// A consumer group's committed offsets: (stream, offset, metadata).
    /// Applies only if every stream exists and is not deleted, all or nothing.
    CommitOffsets {
        group: String,
        offsets: Vec<(StreamId, i64, Option<String>)>,
    },
    /// Forget a consumer group: its committed offsets and its membership
    /// record. Applies if it has either.
    DeleteGroup {
        group: String,
    },
    /// Forget some of a consumer group's committed offsets (Kafka's
    /// OffsetDelete): 1 to `MAX_DELETED_OFFSETS` streams, those the group
    /// has no offset for skipped. Applies if the group has offsets; a group
    /// left with none has no offsets entry any more.
    DeleteOffsets {
        group: String,
        partitions: Vec<StreamId>,
    },
    /// Write a consumer group's membership record if it is still at
    /// `expected_version` (0: no record); see `meta::group_state`.
    PutGroupState {
        group: String,
        kind: String,
        expected_version: u64,
        #[serde(with = "super::group_state::base64_bytes")]
        data: Vec<u8>,
    },
    /// Remove a consumer group's membership record if it is at
    /// `expected_version` (`None`: whatever it is).
    DeleteGroupState {
        group: String,
        expected_version: Option<u64>,
    },
    /// Reserve `count` Kafka producer ids for the proposer to hand out.
    AllocateProducerIds {
        count: u32,
    },
    /// A change to a Kafka transactional id's coordinator record
    /// (`meta::txn`).
    Txn {
        id: String,
        op: super::txn::TxnOp,
    },
    // auth
    /// Issue a token: its record holds the secret's hash, never the secret.
    /// Applies only if the record is valid and its id is new.
    CreateToken {
        token: crate::auth::TokenRecord,
    },
    /// Revoke a token. Every node refuses it once it applies this entry.
    RevokeToken {
        id: String,
    },
}

impl Command {
    pub fn name(&self) -> &'static str {
        match self {
            Command::RegisterNode { .. } => "RegisterNode",
            Command::Heartbeat { .. } => "Heartbeat",
            Command::FenceNode { .. } => "FenceNode",
            Command::FenceSelf { .. } => "FenceSelf",
            Command::AcquireLease { .. } => "AcquireLease",
            Command::CreateTopic { .. } => "CreateTopic",
            Command::DeleteTopic { .. } => "DeleteTopic",
            Command::ExpireStream { .. } => "ExpireStream",
            Command::DropStreams { .. } => "DropStreams",
            Command::AddPartitions { .. } => "AddPartitions",
            Command::AlterTopicConfig { .. } => "AlterTopicConfig",
            Command::PlaceStream { .. } => "PlaceStream",
            Command::CommitObjects { .. } => "CommitObjects",
            Command::CloseStream { .. } => "CloseStream",
            Command::BeginWalTakeover { .. } => "BeginWalTakeover",
            Command::FinishWalTakeover { .. } => "FinishWalTakeover",
            Command::TrimStream { .. } => "TrimStream",
            Command::BeginTransfer { .. } => "BeginTransfer",
            Command::CompleteTransfer { .. } => "CompleteTransfer",
            Command::CancelTransfer { .. } => "CancelTransfer",
            Command::DrainNode { .. } => "DrainNode",
            Command::CommitOffsets { .. } => "CommitOffsets",
            Command::DeleteGroup { .. } => "DeleteGroup",
            Command::DeleteOffsets { .. } => "DeleteOffsets",
            Command::PutGroupState { .. } => "PutGroupState",
            Command::DeleteGroupState { .. } => "DeleteGroupState",
            Command::AllocateProducerIds { .. } => "AllocateProducerIds",
            Command::Txn { .. } => "Txn",
            Command::CreateToken { .. } => "CreateToken",
            Command::RevokeToken { .. } => "RevokeToken",
        }
    }
}

/// Why `apply` refused a command. Refusals are ordinary outcomes, not errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Rejection {
    #[error("proposer {0} is fenced")]
    ProposerFenced(NodeId),
    #[error("proposer {0} is not registered at the epoch it claims")]
    ProposerStale(NodeId),
    #[error("topic {0:?} already exists")]
    TopicExists(String),
    #[error("topic {0:?} does not exist")]
    TopicNotFound(String),
    #[error("invalid: {0}")]
    Invalid(String),
    #[error("token {0} does not exist")]
    TokenNotFound(String),
    #[error("token {0} already exists")]
    TokenExists(String),
    /// The state no longer matches what the proposer saw.
    #[error("precondition failed: {0}")]
    Precondition(String),
    /// A transactional id's record refused the change, as Kafka's
    /// coordinator would.
    #[error("transaction refused ({0:?}): {1}")]
    Txn(super::txn::TxnRefusal, String),
}

/// What applying one command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Applied,
    Registered(NodeEpoch),
    TopicCreated(crate::ids::TopicId),
    /// Producer ids `first..first + count` are the proposer's.
    ProducerIds {
        first: i64,
    },
    /// What a `Txn` command did.
    Txn(super::txn::TxnDone),
    Rejected(Rejection),
}

impl Outcome {
    pub fn is_applied(&self) -> bool {
        !matches!(self, Outcome::Rejected(_))
    }
}
