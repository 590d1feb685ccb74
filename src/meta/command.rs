//! Commands of the metadata log. Their apply conditions (in `view.rs`) are the
//! contract every node relies on.

use crate::ids::{HeartbeatCount, NodeEpoch, NodeId, Offset, StreamEpoch, StreamId};
use serde::{Deserialize, Serialize};

/// Per-topic configuration (Kafka's `retention.ms`, `retention.bytes`,
/// `cleanup.policy` and its compaction settings). `None` is "not set": the
/// default applies.
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
    /// Kafka's `min.compaction.lag.ms`: a record stays uncompacted at
    /// least this long after it was written (default 0). The compaction
    /// settings are omitted when not set, like `cleanup_policy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_compaction_lag_ms: Option<i64>,
    /// Kafka's `max.compaction.lag.ms`: a record is compacted at the latest
    /// this long after it was written, whatever the dirty ratio (default:
    /// no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_compaction_lag_ms: Option<i64>,
    /// Kafka's `min.cleanable.dirty.ratio`: compaction starts once this
    /// share of the compactable bytes is superseded (default 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_cleanable_dirty_ratio: Option<Ratio>,
    /// Kafka's `delete.retention.ms`: how long a tombstone (a keyed record
    /// with no value) is kept once it is compactable (default one day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_retention_ms: Option<i64>,
    /// Set on topics created through the Durable Streams protocol (absent
    /// from everything else, so older entries and snapshots read as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durable: Option<super::durable::DurableMeta>,
}

/// A ratio between 0 and 1, kept in millionths so that configs compare
/// exactly; written as a JSON number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ratio(u32);

impl Ratio {
    const SCALE: f64 = 1_000_000.0;

    /// `value` when it is within 0..=1, rounded to a millionth.
    pub fn new(value: f64) -> Option<Ratio> {
        (0.0..=1.0)
            .contains(&value)
            .then(|| Ratio((value * Self::SCALE).round() as u32))
    }

    pub fn get(self) -> f64 {
        f64::from(self.0) / Self::SCALE
    }
}

impl Serialize for Ratio {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.get())
    }
}

impl<'de> Deserialize<'de> for Ratio {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        Ratio::new(v).ok_or_else(|| serde::de::Error::custom(format!("a ratio must be between 0 and 1, got {v}")))
    }
}

/// How old records go: deleted by retention, compacted to the latest
/// record of each key, or both (Kafka's `cleanup.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CleanupPolicy {
    #[serde(rename = "delete")]
    Delete,
    #[serde(rename = "compact")]
    Compact,
    #[serde(rename = "compact,delete", alias = "delete,compact")]
    CompactDelete,
}

impl CleanupPolicy {
    /// Kafka's spelling: a list of `compact` and `delete`, in any order,
    /// each at most once; `None` for anything else.
    pub fn parse(list: &str) -> Option<CleanupPolicy> {
        let mut items: Vec<&str> = list.split(',').map(str::trim).collect();
        items.sort_unstable();
        match items.as_slice() {
            ["delete"] => Some(CleanupPolicy::Delete),
            ["compact"] => Some(CleanupPolicy::Compact),
            ["compact", "delete"] => Some(CleanupPolicy::CompactDelete),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactDelete => "compact,delete",
        }
    }

    /// Whether the topic keeps the latest record of each key.
    pub fn compacts(self) -> bool {
        !matches!(self, CleanupPolicy::Delete)
    }

    /// Whether retention deletes old records.
    pub fn deletes(self) -> bool {
        !matches!(self, CleanupPolicy::Compact)
    }
}

/// One change to a topic's configuration: the field's new value, `None`
/// to go back to the default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigUpdate {
    RetentionMs(Option<i64>),
    RetentionBytes(Option<i64>),
    CleanupPolicy(Option<CleanupPolicy>),
    MinCompactionLagMs(Option<i64>),
    MaxCompactionLagMs(Option<i64>),
    MinCleanableDirtyRatio(Option<Ratio>),
    DeleteRetentionMs(Option<i64>),
    /// A change to a Durable Streams stream's state (ignored on other topics).
    Durable(super::durable::DurableUpdate),
}

impl ConfigUpdate {
    /// Retention limits are -1 (unlimited) or positive, as over HTTP; the
    /// compaction lags and `delete_retention_ms` as Kafka bounds them.
    pub fn validate(&self) -> Result<(), String> {
        let (name, v) = match self {
            ConfigUpdate::RetentionMs(v) => ("retention_ms", v),
            ConfigUpdate::RetentionBytes(v) => ("retention_bytes", v),
            ConfigUpdate::MinCompactionLagMs(v) => return at_least("min_compaction_lag_ms", *v, 0),
            ConfigUpdate::MaxCompactionLagMs(v) => return at_least("max_compaction_lag_ms", *v, 1),
            ConfigUpdate::DeleteRetentionMs(v) => return at_least("delete_retention_ms", *v, 0),
            ConfigUpdate::CleanupPolicy(_) | ConfigUpdate::MinCleanableDirtyRatio(_) | ConfigUpdate::Durable(_) => {
                return Ok(())
            }
        };
        match v {
            Some(v) if *v == 0 || *v < -1 => Err(format!("{name} must be positive or -1 (unlimited), got {v}")),
            _ => Ok(()),
        }
    }
}

fn at_least(name: &str, v: Option<i64>, min: i64) -> Result<(), String> {
    match v {
        Some(v) if v < min => Err(format!("{name} must be at least {min}, got {v}")),
        _ => Ok(()),
    }
}

impl TopicConfig {
    /// Kafka's defaults for the compaction settings.
    pub const DEFAULT_MIN_CLEANABLE_DIRTY_RATIO: f64 = 0.5;
    pub const DEFAULT_DELETE_RETENTION_MS: i64 = 86_400_000;

    pub fn apply(&mut self, update: &ConfigUpdate) {
        match update {
            ConfigUpdate::RetentionMs(v) => self.retention_ms = *v,
            ConfigUpdate::RetentionBytes(v) => self.retention_bytes = *v,
            ConfigUpdate::CleanupPolicy(v) => self.cleanup_policy = *v,
            ConfigUpdate::MinCompactionLagMs(v) => self.min_compaction_lag_ms = *v,
            ConfigUpdate::MaxCompactionLagMs(v) => self.max_compaction_lag_ms = *v,
            ConfigUpdate::MinCleanableDirtyRatio(v) => self.min_cleanable_dirty_ratio = *v,
            ConfigUpdate::DeleteRetentionMs(v) => self.delete_retention_ms = *v,
            ConfigUpdate::Durable(u) => {
                if let Some(d) = &mut self.durable {
                    d.apply(u);
                }
            }
        }
    }

    /// The checks that span settings: a compaction lag range that is not
    /// empty, and no compaction of a Durable Streams stream (its readers
    /// count on dense offsets). Fields that predate these checks are left
    /// to [`ConfigUpdate::validate`].
    pub fn validate(&self) -> Result<(), String> {
        for u in [
            ConfigUpdate::MinCompactionLagMs(self.min_compaction_lag_ms),
            ConfigUpdate::MaxCompactionLagMs(self.max_compaction_lag_ms),
            ConfigUpdate::DeleteRetentionMs(self.delete_retention_ms),
        ] {
            u.validate()?;
        }
        if let (Some(min), Some(max)) = (self.min_compaction_lag_ms, self.max_compaction_lag_ms) {
            if min > max {
                return Err(format!(
                    "min_compaction_lag_ms ({min}) must not be greater than max_compaction_lag_ms ({max})"
                ));
            }
        }
        if self.durable.is_some() && self.compacts() {
            return Err("a Durable Streams stream cannot be compacted".into());
        }
        Ok(())
    }

    /// Whether the topic is compacted (`compact` or `compact,delete`):
    /// its records must have keys.
    pub fn compacts(&self) -> bool {
        self.cleanup_policy.is_some_and(CleanupPolicy::compacts)
    }

    /// Whether retention applies (not under `compact` alone).
    pub fn deletes(&self) -> bool {
        self.cleanup_policy.is_none_or(CleanupPolicy::deletes)
    }

    pub fn min_cleanable_dirty_ratio(&self) -> f64 {
        (self.min_cleanable_dirty_ratio).map_or(Self::DEFAULT_MIN_CLEANABLE_DIRTY_RATIO, Ratio::get)
    }

    pub fn delete_retention_ms(&self) -> i64 {
        self.delete_retention_ms.unwrap_or(Self::DEFAULT_DELETE_RETENTION_MS)
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
    /// Replace a run of a stream's chunks by their compacted rewrite
    /// (`meta::compaction`). Applies only if the stream is still at
    /// `stream_epoch` and `start`, and `replaced` is still, exactly, a run
    /// of its chunks; `chunks` must tile the same offset range. A
    /// compactor that read a stale view cannot apply it.
    CompactChunks {
        stream: StreamId,
        stream_epoch: StreamEpoch,
        start: Offset,
        replaced: Vec<IndexedChunk>,
        chunks: Vec<IndexedChunk>,
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
            Command::CompactChunks { .. } => "CompactChunks",
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
