//! The view: cluster state as of some log index, and the pure `apply`.
//!
//! `apply` does no I/O and reads no clock, so every node that applied the
//! same entries holds the same view. Control loops read the view and propose
//! commands; they never change it themselves.

use super::command::{ChunkCommit, Command, ConfigUpdate, IndexedChunk, Outcome, Rejection, TopicConfig};
use crate::ids::{HeartbeatCount, LogIndex, NodeEpoch, NodeId, Offset, StreamEpoch, StreamId, TopicId};
use crate::meta::producers::ProducerTable;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const MAX_PARTITIONS: u32 = 10_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRow {
    pub epoch: NodeEpoch,
    pub heartbeats: HeartbeatCount,
    pub fenced: bool,
    pub http_addr: String,
    pub kafka_addr: String,
    /// Log index of the registration that created this epoch.
    pub registered_at: LogIndex,
    /// Placement avoids a draining node and its streams are moved away.
    #[serde(default)]
    pub draining: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub holder: NodeId,
    pub holder_epoch: NodeEpoch,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRow {
    pub id: TopicId,
    pub partitions: u32,
    pub config: TopicConfig,
}

/// Where a stream is. Exactly one state at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum StreamState {
    /// On no node; every record is in data objects.
    Closed,
    /// `node` at `node_epoch` appends and serves.
    Open { node: NodeId, node_epoch: NodeEpoch },
    /// The owner is handing it to `to`: appends get a retryable error while
    /// the owner flushes its tail, then `CompleteTransfer` opens it on `to`.
    Transferring {
        from: NodeId,
        from_epoch: NodeEpoch,
        to: NodeId,
        to_epoch: NodeEpoch,
    },
    /// Its owner incarnation died; the lease holder is replaying its WAL.
    /// A transfer that was pending completes to `transfer_to` afterwards.
    Recovering {
        node: NodeId,
        node_epoch: NodeEpoch,
        #[serde(default)]
        transfer_to: Option<(NodeId, NodeEpoch)>,
    },
    /// Its topic was deleted.
    Deleted,
}

impl StreamState {
    pub fn name(&self) -> &'static str {
        match self {
            StreamState::Closed => "closed",
            StreamState::Open { .. } => "open",
            StreamState::Transferring { .. } => "transferring",
            StreamState::Recovering { .. } => "recovering",
            StreamState::Deleted => "deleted",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamRow {
    pub topic_name: String,
    pub state: StreamState,
    /// Incremented every time the stream is opened by a new owner.
    pub stream_epoch: StreamEpoch,
    /// Every offset below this is in an indexed chunk.
    pub committed_end: Offset,
    /// Offsets below this were trimmed by retention.
    pub start: Offset,
    /// Chunks ordered by offset, contiguous from `start` (or the first kept
    /// chunk) up to `committed_end`.
    pub chunks: Vec<IndexedChunk>,
    /// Idempotent-producer state (Kafka producers and Durable Streams
    /// writers) as of `committed_end`.
    #[serde(default, skip_serializing_if = "ProducerTable::is_empty")]
    pub producers: ProducerTable,
    /// The offset each recent stream epoch started at, oldest first (the
    /// Kafka leader-epoch history, for OffsetForLeaderEpoch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub epoch_starts: Vec<(StreamEpoch, Offset)>,
    /// Where the last compaction of the stream ended: the chunks below
    /// hold each key once (as of then), those above are dirty. Zero for a
    /// stream never compacted (and absent from entries and snapshots then).
    #[serde(default, skip_serializing_if = "is_zero_offset")]
    pub compacted_end: Offset,
}

fn is_zero_offset(o: &Offset) -> bool {
    *o == Offset::ZERO
}

/// Stream epochs remembered in [`StreamRow::epoch_starts`].
pub const EPOCH_HISTORY: usize = 32;

impl StreamRow {
    /// A new owner opens the stream: the next epoch starts at the committed end.
    fn next_epoch(&mut self) {
        self.stream_epoch = self.stream_epoch.next();
        self.epoch_starts.push((self.stream_epoch, self.committed_end));
        if self.epoch_starts.len() > EPOCH_HISTORY {
            self.epoch_starts.remove(0);
        }
    }

    /// Kafka's end offset of an earlier leader epoch `epoch`: the start of
    /// the first later epoch. `None` for the current epoch (it ends at the
    /// high watermark), for a newer one, and when the history (older
    /// snapshots have none) knows no later epoch.
    pub fn epoch_end(&self, epoch: StreamEpoch) -> Option<Offset> {
        if epoch >= self.stream_epoch {
            return None;
        }
        self.epoch_starts
            .iter()
            .find(|(e, _)| *e > epoch)
            .map(|(_, start)| *start)
    }
}

impl StreamRow {
    /// A new partition's stream: closed, empty, never opened.
    fn new(topic_name: &str) -> Self {
        Self {
            topic_name: topic_name.to_string(),
            state: StreamState::Closed,
            stream_epoch: StreamEpoch::ZERO,
            committed_end: Offset::ZERO,
            start: Offset::ZERO,
            chunks: Vec::new(),
            producers: ProducerTable::default(),
            epoch_starts: Vec::new(),
            compacted_end: Offset::ZERO,
        }
    }
}

/// The cluster as every node sees it after applying the log up to `applied`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    pub applied: LogIndex,
    pub nodes: BTreeMap<NodeId, NodeRow>,
    pub lease: Option<Lease>,
    pub topics: BTreeMap<String, TopicRow>,
    #[serde(with = "crate::format::map_as_pairs")]
    pub streams: BTreeMap<StreamId, StreamRow>,
    pub next_topic_id: TopicId,
    /// Consumer groups' committed offsets: group -> stream -> (offset, metadata).
    #[serde(default, with = "group_offsets")]
    pub groups: BTreeMap<String, GroupOffsets>,
    /// Consumer groups' membership records (`meta::group_state`). Omitted
    /// while empty so snapshots stay readable by older nodes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub group_states: BTreeMap<String, super::group_state::GroupStateRow>,
    /// The next Kafka producer id no node has been given.
    #[serde(default)]
    pub next_producer_id: i64,
    /// Issued, unrevoked tokens by id (hashes only). Absent from snapshots
    /// written before tokens existed, and omitted while empty so those
    /// stay readable by older nodes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tokens: BTreeMap<String, crate::auth::TokenRecord>,
    /// Kafka transactional ids' coordinator records (`meta::txn`); omitted
    /// while empty, as for tokens.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub txns: BTreeMap<String, super::txn::TxnRow>,
}

/// One consumer group's committed offsets: stream -> (offset, metadata).
pub type GroupOffsets = BTreeMap<StreamId, (i64, Option<String>)>;

/// Serialize each group's offsets as pairs (JSON needs string keys).
mod group_offsets {
    use super::GroupOffsets;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    #[derive(Serialize)]
    struct Ser<'a>(#[serde(with = "crate::format::map_as_pairs")] &'a GroupOffsets);

    #[derive(Deserialize)]
    struct De(#[serde(with = "crate::format::map_as_pairs")] GroupOffsets);

    pub fn serialize<S: Serializer>(m: &BTreeMap<String, GroupOffsets>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(m.iter().map(|(k, v)| (k, Ser(v))))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, GroupOffsets>, D::Error> {
        Ok(BTreeMap::<String, De>::deserialize(d)?
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect())
    }
}

/// An applied log entry: who proposed it and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposer {
    pub node: NodeId,
    /// `None` only for a node that has not registered yet.
    pub epoch: Option<NodeEpoch>,
}

impl View {
    /// Is `node` registered at `epoch` and not fenced?
    pub fn is_live(&self, node: &NodeId, epoch: NodeEpoch) -> bool {
        self.nodes.get(node).is_some_and(|r| r.epoch == epoch && !r.fenced)
    }

    /// Live and not draining: may receive streams.
    pub fn accepts_streams(&self, node: &NodeId, epoch: NodeEpoch) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|r| r.epoch == epoch && !r.fenced && !r.draining)
    }

    /// The incarnation that serves a stream's appends right now, if any.
    pub fn owner_of(&self, stream: StreamId) -> Option<(&NodeId, NodeEpoch)> {
        match &self.streams.get(&stream)?.state {
            StreamState::Open { node, node_epoch } => Some((node, *node_epoch)),
            _ => None,
        }
    }

    /// Does `lease` name an incarnation that is still live?
    pub fn lease_holder_live(&self) -> bool {
        self.lease
            .as_ref()
            .is_some_and(|l| self.is_live(&l.holder, l.holder_epoch))
    }

    pub fn holds_lease(&self, node: &NodeId, epoch: NodeEpoch) -> bool {
        self.lease
            .as_ref()
            .is_some_and(|l| &l.holder == node && l.holder_epoch == epoch)
    }

    pub fn topic_streams(&self, topic: &TopicRow) -> impl Iterator<Item = (&StreamId, &StreamRow)> {
        let id = topic.id;
        self.streams.range(StreamId::new(id, 0)..=StreamId::new(id, u32::MAX))
    }

    /// Streams open on `node` at `epoch`.
    pub fn open_streams_of(&self, node: &NodeId, epoch: NodeEpoch) -> Vec<StreamId> {
        self.streams
            .iter()
            .filter(|(_, r)| matches!(&r.state, StreamState::Open { node: n, node_epoch } if n == node && *node_epoch == epoch))
            .map(|(s, _)| *s)
            .collect()
    }

    /// Apply every command of one entry at `index`, returning one outcome per
    /// command. Commands of a fenced or superseded proposer are all rejected.
    pub fn apply_entry(&mut self, index: LogIndex, proposer: &Proposer, commands: &[Command]) -> Vec<Outcome> {
        debug_assert!(index > self.applied, "entries are applied in order");
        self.applied = index;
        commands.iter().map(|c| self.apply(index, proposer, c)).collect()
    }

    fn check_proposer(&self, proposer: &Proposer, cmd: &Command) -> Result<(), Rejection> {
        if matches!(cmd, Command::RegisterNode { .. }) {
            return Ok(());
        }
        let row = self
            .nodes
            .get(&proposer.node)
            .ok_or_else(|| Rejection::ProposerStale(proposer.node.clone()))?;
        if Some(row.epoch) != proposer.epoch {
            return Err(Rejection::ProposerStale(proposer.node.clone()));
        }
        if row.fenced {
            return Err(Rejection::ProposerFenced(proposer.node.clone()));
        }
        Ok(())
    }

    fn apply(&mut self, index: LogIndex, proposer: &Proposer, cmd: &Command) -> Outcome {
        if let Err(r) = self.check_proposer(proposer, cmd) {
            return Outcome::Rejected(r);
        }
        let result = match cmd {
            Command::RegisterNode {
                node,
                http_addr,
                kafka_addr,
            } => {
                return self.register(index, node, http_addr, kafka_addr);
            }
            Command::Heartbeat { node, epoch } => self.heartbeat(proposer, node, *epoch),
            Command::FenceNode {
                node,
                epoch,
                seen_count,
            } => self.fence_node(node, *epoch, *seen_count),
            Command::FenceSelf { node, epoch } => self.fence_self(proposer, node, *epoch),
            Command::AcquireLease { holder, holder_count } => self.acquire_lease(proposer, holder, *holder_count),
            Command::CreateTopic {
                name,
                partitions,
                config,
            } => {
                return match self.create_topic(name, *partitions, config) {
                    Ok(id) => Outcome::TopicCreated(id),
                    Err(r) => Outcome::Rejected(r),
                };
            }
            Command::DeleteTopic { name } => self.delete_topic(name),
            Command::ExpireStream { name, now_ms } => self.expire_stream(proposer, name, *now_ms),
            Command::DropStreams { streams } => self.drop_streams(proposer, streams),
            // admin
            Command::AddPartitions { name, partitions } => self.add_partitions(name, *partitions),
            Command::AlterTopicConfig { name, updates } => self.alter_topic_config(name, updates),
            Command::PlaceStream {
                stream,
                node,
                node_epoch,
            } => self.place_stream(*stream, node, *node_epoch),
            Command::CommitObjects { node, epoch, chunks } => self.commit_objects(proposer, node, *epoch, chunks),
            Command::CloseStream {
                stream,
                stream_epoch,
                end,
            } => self.close_stream(proposer, *stream, *stream_epoch, *end),
            Command::BeginWalTakeover { node, epoch } => self.begin_takeover(proposer, node, *epoch),
            Command::FinishWalTakeover { node, epoch, chunks } => self.finish_takeover(proposer, node, *epoch, chunks),
            Command::TrimStream { stream, new_start } => self.trim_stream(*stream, *new_start),
            Command::CompactChunks {
                stream,
                stream_epoch,
                start,
                replaced,
                chunks,
            } => self.compact_chunks(*stream, *stream_epoch, *start, replaced, chunks),
            Command::BeginTransfer {
                stream,
                stream_epoch,
                to,
                to_epoch,
            } => self.begin_transfer(*stream, *stream_epoch, to, *to_epoch),
            Command::CompleteTransfer {
                stream,
                stream_epoch,
                end,
            } => self.complete_transfer(proposer, *stream, *stream_epoch, *end),
            Command::CancelTransfer { stream, stream_epoch } => self.cancel_transfer(proposer, *stream, *stream_epoch),
            Command::DrainNode { node, epoch } => self.drain_node(node, *epoch),
            Command::CommitOffsets { group, offsets } => self.commit_offsets(group, offsets),
            Command::DeleteGroup { group } => self.delete_group(group),
            Command::DeleteOffsets { group, partitions } => self.delete_offsets(group, partitions),
            Command::PutGroupState {
                group,
                kind,
                expected_version,
                data,
            } => super::group_state::put(&mut self.group_states, group, kind, *expected_version, data),
            Command::DeleteGroupState {
                group,
                expected_version,
            } => super::group_state::delete(&mut self.group_states, group, *expected_version),
            Command::CreateToken { token } => self.create_token(token),
            Command::RevokeToken { id } => self.revoke_token(id),
            Command::AllocateProducerIds { count } => {
                return match self.allocate_producer_ids(*count) {
                    Ok(first) => Outcome::ProducerIds { first },
                    Err(r) => Outcome::Rejected(r),
                };
            }
            Command::Txn { id, op } => return self.apply_txn(index, id, op),
        };
        match result {
            Ok(()) => Outcome::Applied,
            Err(r) => Outcome::Rejected(r),
        }
    }

    fn register(&mut self, index: LogIndex, node: &NodeId, http_addr: &str, kafka_addr: &str) -> Outcome {
        if let Err(e) = NodeId::validate(node.as_str()) {
            return Outcome::Rejected(Rejection::Invalid(e));
        }
        let epoch = self.nodes.get(node).map_or(NodeEpoch(1), |r| r.epoch.next());
        self.nodes.insert(
            node.clone(),
            NodeRow {
                epoch,
                heartbeats: HeartbeatCount::ZERO,
                fenced: false,
                http_addr: http_addr.to_string(),
                kafka_addr: kafka_addr.to_string(),
                registered_at: index,
                draining: false,
            },
        );
        Outcome::Registered(epoch)
    }

    fn heartbeat(&mut self, proposer: &Proposer, node: &NodeId, epoch: NodeEpoch) -> Result<(), Rejection> {
        if node != &proposer.node {
            return Err(Rejection::Invalid("a node heartbeats only for itself".into()));
        }
        let row = self.live_row_mut(node, epoch)?;
        row.heartbeats = row.heartbeats.next();
        Ok(())
    }

    fn live_row_mut(&mut self, node: &NodeId, epoch: NodeEpoch) -> Result<&mut NodeRow, Rejection> {
        let row = self
            .nodes
            .get_mut(node)
            .ok_or_else(|| Rejection::Precondition(format!("node {node} is not registered")))?;
        if row.epoch != epoch {
            return Err(Rejection::Precondition(format!(
                "node {node} is at {}, not {epoch}",
                row.epoch
            )));
        }
        if row.fenced {
            return Err(Rejection::Precondition(format!("node {node} {epoch} is fenced")));
        }
        Ok(row)
    }

    fn fence_node(&mut self, node: &NodeId, epoch: NodeEpoch, seen: HeartbeatCount) -> Result<(), Rejection> {
        let row = self.live_row_mut(node, epoch)?;
        if row.heartbeats != seen {
            return Err(Rejection::Precondition(format!(
                "node {node} {epoch} heartbeated since ({} != {seen})",
                row.heartbeats
            )));
        }
        row.fenced = true;
        Ok(())
    }

    fn fence_self(&mut self, proposer: &Proposer, node: &NodeId, epoch: NodeEpoch) -> Result<(), Rejection> {
        if node != &proposer.node {
            return Err(Rejection::Invalid("FenceSelf names another node".into()));
        }
        let row = self.live_row_mut(node, epoch)?;
        row.fenced = true;
        Ok(())
    }

    fn acquire_lease(
        &mut self,
        proposer: &Proposer,
        holder: &Option<(NodeId, NodeEpoch)>,
        holder_count: HeartbeatCount,
    ) -> Result<(), Rejection> {
        let current = self.lease.as_ref().map(|l| (l.holder.clone(), l.holder_epoch));
        if &current != holder {
            return Err(Rejection::Precondition("the lease changed hands".into()));
        }
        // A lease whose holder is gone (fenced or re-registered) is free.
        let holder_gone = !self.lease_holder_live();
        if !holder_gone {
            let (h, _) = holder.as_ref().expect("a live lease has a holder");
            let count = self.nodes[h].heartbeats;
            if count != holder_count {
                return Err(Rejection::Precondition(format!(
                    "holder {h} heartbeated since ({count} != {holder_count})"
                )));
            }
        }
        let epoch = proposer.epoch.expect("checked by check_proposer");
        self.lease = Some(Lease {
            holder: proposer.node.clone(),
            holder_epoch: epoch,
        });
        Ok(())
    }

    fn create_topic(&mut self, name: &str, partitions: u32, config: &TopicConfig) -> Result<TopicId, Rejection> {
        validate_topic_name(name).map_err(Rejection::Invalid)?;
        if partitions == 0 || partitions > MAX_PARTITIONS {
            return Err(Rejection::Invalid(format!(
                "partitions must be 1-{MAX_PARTITIONS}, got {partitions}"
            )));
        }
        if self.topics.contains_key(name) {
            return Err(Rejection::TopicExists(name.to_string()));
        }
        config.validate().map_err(Rejection::Invalid)?;
        if let Some(fork) = config.durable.as_ref().and_then(|d| d.fork.as_ref()) {
            // A fork reads its source's records: the source must be a live
            // stream now, and cannot go (see `delete_topic`) while the fork is.
            let source = self.topics.get(&fork.source).and_then(|t| t.config.durable.as_ref());
            match source {
                Some(s) if !s.deleted => {}
                Some(_) => {
                    return Err(Rejection::Precondition(format!(
                        "stream {:?} was deleted; it cannot be forked",
                        fork.source
                    )))
                }
                None => {
                    return Err(Rejection::Precondition(format!(
                        "fork source {:?} is not a stream",
                        fork.source
                    )))
                }
            }
        }
        self.next_topic_id = self.next_topic_id.next();
        let id = self.next_topic_id;
        self.topics.insert(
            name.to_string(),
            TopicRow {
                id,
                partitions,
                config: config.clone(),
            },
        );
        for p in 0..partitions {
            self.streams.insert(StreamId::new(id, p), StreamRow::new(name));
        }
        Ok(id)
    }

    /// The new streams start closed at offset zero, exactly as at creation,
    /// so placement opens them like any other closed stream.
    fn add_partitions(&mut self, name: &str, partitions: u32) -> Result<(), Rejection> {
        let topic = self
            .topics
            .get_mut(name)
            .ok_or_else(|| Rejection::TopicNotFound(name.to_string()))?;
        if partitions <= topic.partitions {
            return Err(Rejection::Invalid(format!(
                "topic {name:?} has {} partitions; the count can only increase, not become {partitions}",
                topic.partitions
            )));
        }
        if partitions > MAX_PARTITIONS {
            return Err(Rejection::Invalid(format!(
                "partitions must be 1-{MAX_PARTITIONS}, got {partitions}"
            )));
        }
        let (id, from) = (topic.id, topic.partitions);
        topic.partitions = partitions;
        for p in from..partitions {
            self.streams.insert(StreamId::new(id, p), StreamRow::new(name));
        }
        Ok(())
    }

    fn alter_topic_config(&mut self, name: &str, updates: &[ConfigUpdate]) -> Result<(), Rejection> {
        let topic = self
            .topics
            .get_mut(name)
            .ok_or_else(|| Rejection::TopicNotFound(name.to_string()))?;
        for u in updates {
            u.validate().map_err(Rejection::Invalid)?;
        }
        let mut config = topic.config.clone();
        for u in updates {
            config.apply(u);
        }
        config.validate().map_err(Rejection::Invalid)?;
        topic.config = config;
        Ok(())
    }

    /// The topics of the Durable Streams forks made from `name`.
    pub fn forks_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.topics.iter().filter_map(move |(t, row)| {
            let fork = row.config.durable.as_ref()?.fork.as_ref()?;
            (fork.source == name).then_some(t.as_str())
        })
    }

    /// Deleting a Durable Streams stream that forks still read only marks
    /// it deleted; it goes with its last fork. Removing a fork removes its
    /// source too when that was marked and this was its last fork, and so
    /// on up the chain.
    fn delete_topic(&mut self, name: &str) -> Result<(), Rejection> {
        let Some(row) = self.topics.get(name) else {
            return Err(Rejection::TopicNotFound(name.to_string()));
        };
        if row.config.durable.is_some() && self.forks_of(name).next().is_some() {
            if let Some(d) = self.topics.get_mut(name).and_then(|t| t.config.durable.as_mut()) {
                d.deleted = true;
            }
            return Ok(());
        }
        let mut next = Some(name.to_string());
        while let Some(name) = next.take() {
            let source = self.remove_topic(&name);
            if let Some(s) = source {
                let marked = self
                    .topics
                    .get(&s)
                    .and_then(|t| t.config.durable.as_ref())
                    .is_some_and(|d| d.deleted);
                if marked && self.forks_of(&s).next().is_none() {
                    next = Some(s);
                }
            }
        }
        Ok(())
    }

    /// A Durable Streams stream's lifetime ended by the lease holder's
    /// clock reading `now_ms`: delete it (or mark it, while forks read it).
    fn expire_stream(&mut self, proposer: &Proposer, name: &str, now_ms: i64) -> Result<(), Rejection> {
        self.require_lease(proposer)?;
        let topic = self
            .topics
            .get(name)
            .ok_or_else(|| Rejection::TopicNotFound(name.to_string()))?;
        let Some(d) = topic.config.durable.as_ref() else {
            return Err(Rejection::Invalid(format!(
                "topic {name:?} is not a Durable Streams stream"
            )));
        };
        if d.deleted {
            return Err(Rejection::Precondition(format!("stream {name:?} is already deleted")));
        }
        if !d.expired(now_ms) {
            return Err(Rejection::Precondition(format!(
                "stream {name:?} has not expired at {now_ms}"
            )));
        }
        self.delete_topic(name)
    }

    /// Forget the rows of deleted streams and their committed offsets.
    fn drop_streams(&mut self, proposer: &Proposer, streams: &[StreamId]) -> Result<(), Rejection> {
        self.require_lease(proposer)?;
        for id in streams {
            match self.streams.get(id) {
                Some(r) if r.state == StreamState::Deleted => {}
                Some(r) => {
                    return Err(Rejection::Precondition(format!(
                        "stream {id} is {}, not deleted",
                        r.state.name()
                    )))
                }
                None => return Err(Rejection::Precondition(format!("stream {id} does not exist"))),
            }
        }
        for id in streams {
            self.streams.remove(id);
        }
        for offsets in self.groups.values_mut() {
            offsets.retain(|s, _| !streams.contains(s));
        }
        // A group left with no offsets has none to list.
        self.groups.retain(|_, offsets| !offsets.is_empty());
        Ok(())
    }

    /// Removes a topic that exists; returns the source it was a fork of.
    fn remove_topic(&mut self, name: &str) -> Option<String> {
        let topic = self.topics.remove(name)?;
        let ids: Vec<StreamId> = (0..topic.partitions).map(|p| StreamId::new(topic.id, p)).collect();
        for id in ids {
            if let Some(row) = self.streams.get_mut(&id) {
                row.state = StreamState::Deleted;
                row.chunks.clear();
            }
        }
        topic.config.durable.and_then(|d| d.fork).map(|f| f.source)
    }

    fn stream_mut(&mut self, stream: StreamId) -> Result<&mut StreamRow, Rejection> {
        self.streams
            .get_mut(&stream)
            .ok_or_else(|| Rejection::Precondition(format!("stream {stream} does not exist")))
    }

    fn place_stream(&mut self, stream: StreamId, node: &NodeId, node_epoch: NodeEpoch) -> Result<(), Rejection> {
        if !self.is_live(node, node_epoch) {
            return Err(Rejection::Precondition(format!("node {node} {node_epoch} is not live")));
        }
        let row = self.stream_mut(stream)?;
        if row.state != StreamState::Closed {
            return Err(Rejection::Precondition(format!(
                "stream {stream} is {}, not closed",
                row.state.name()
            )));
        }
        row.state = StreamState::Open {
            node: node.clone(),
            node_epoch,
        };
        row.next_epoch();
        Ok(())
    }

    /// Check that `chunks` extend their streams contiguously, given the
    /// state each stream must be in. All or nothing: nothing changes on error.
    fn check_chunks(
        &self,
        chunks: &[ChunkCommit],
        state_ok: impl Fn(&StreamState) -> bool,
    ) -> Result<BTreeMap<StreamId, Offset>, Rejection> {
        let mut ends: BTreeMap<StreamId, Offset> = BTreeMap::new();
        for c in chunks {
            let row = self
                .streams
                .get(&c.stream)
                .ok_or_else(|| Rejection::Precondition(format!("stream {} does not exist", c.stream)))?;
            if !state_ok(&row.state) || row.stream_epoch != c.stream_epoch {
                return Err(Rejection::Precondition(format!(
                    "stream {} is {} at {}, not owned by the committer at {}",
                    c.stream,
                    row.state.name(),
                    row.stream_epoch,
                    c.stream_epoch
                )));
            }
            let end = ends.entry(c.stream).or_insert(row.committed_end);
            if c.chunk.base != *end || c.chunk.end <= c.chunk.base || c.chunk.byte_end < c.chunk.byte_start {
                return Err(Rejection::Precondition(format!(
                    "chunk {}..{} of {} does not extend the committed end {}",
                    c.chunk.base, c.chunk.end, c.stream, end
                )));
            }
            if let Some(b) = c
                .producers
                .iter()
                .find(|b| b.base < c.chunk.base || b.base.plus(u64::from(b.count)) > c.chunk.end)
            {
                return Err(Rejection::Invalid(format!(
                    "producer batch at {} ({} records) lies outside chunk {}..{} of {}",
                    b.base, b.count, c.chunk.base, c.chunk.end, c.stream
                )));
            }
            if let Some(t) = c
                .txns
                .iter()
                .find(|t| t.offset() < c.chunk.base || t.offset() >= c.chunk.end)
            {
                return Err(Rejection::Invalid(format!(
                    "transactional batch {t:?} lies outside chunk {}..{} of {}",
                    c.chunk.base, c.chunk.end, c.stream
                )));
            }
            *end = c.chunk.end;
        }
        Ok(ends)
    }

    fn index_chunks(&mut self, chunks: &[ChunkCommit]) {
        for c in chunks {
            let row = self.streams.get_mut(&c.stream).expect("checked");
            row.committed_end = c.chunk.end;
            row.chunks.push(c.chunk.clone());
            for b in &c.producers {
                row.producers.record(*b);
            }
            row.producers.writers_mut().merge(&c.writers);
            for t in &c.txns {
                row.producers.record_txn(*t);
            }
        }
    }

    fn commit_objects(
        &mut self,
        proposer: &Proposer,
        node: &NodeId,
        epoch: NodeEpoch,
        chunks: &[ChunkCommit],
    ) -> Result<(), Rejection> {
        if node != &proposer.node || Some(epoch) != proposer.epoch {
            return Err(Rejection::Invalid(
                "CommitObjects names another incarnation than its proposer".into(),
            ));
        }
        // The owner flushes its tail while handing a stream over, too.
        self.check_chunks(chunks, |s| match s {
            StreamState::Open { node: n, node_epoch } => n == node && *node_epoch == epoch,
            StreamState::Transferring { from, from_epoch, .. } => from == node && *from_epoch == epoch,
            _ => false,
        })?;
        self.index_chunks(chunks);
        Ok(())
    }

    fn close_stream(
        &mut self,
        proposer: &Proposer,
        stream: StreamId,
        stream_epoch: StreamEpoch,
        end: Offset,
    ) -> Result<(), Rejection> {
        let epoch = proposer.epoch.expect("checked by check_proposer");
        let row = self.stream_mut(stream)?;
        let owned = matches!(&row.state, StreamState::Open { node, node_epoch } if node == &proposer.node && *node_epoch == epoch);
        if !owned || row.stream_epoch != stream_epoch {
            return Err(Rejection::Precondition(format!(
                "stream {stream} is not open by the proposer at {stream_epoch}"
            )));
        }
        if row.committed_end != end {
            return Err(Rejection::Precondition(format!(
                "stream {stream} committed end is {}, not {end}",
                row.committed_end
            )));
        }
        row.state = StreamState::Closed;
        Ok(())
    }

    /// Is the incarnation `node`@`epoch` dead: fenced, or replaced by a newer registration?
    pub fn incarnation_dead(&self, node: &NodeId, epoch: NodeEpoch) -> bool {
        self.nodes
            .get(node)
            .is_none_or(|r| r.epoch > epoch || (r.epoch == epoch && r.fenced))
    }

    fn require_lease(&self, proposer: &Proposer) -> Result<(), Rejection> {
        let epoch = proposer.epoch.expect("checked by check_proposer");
        if !self.holds_lease(&proposer.node, epoch) {
            return Err(Rejection::Precondition(format!(
                "{} does not hold the lease",
                proposer.node
            )));
        }
        Ok(())
    }

    fn begin_takeover(&mut self, proposer: &Proposer, node: &NodeId, epoch: NodeEpoch) -> Result<(), Rejection> {
        self.require_lease(proposer)?;
        if !self.incarnation_dead(node, epoch) {
            return Err(Rejection::Precondition(format!("node {node} {epoch} is not fenced")));
        }
        let mut any = false;
        for row in self.streams.values_mut() {
            let transfer_to = match &row.state {
                StreamState::Open { node: n, node_epoch } if n == node && *node_epoch == epoch => None,
                StreamState::Transferring {
                    from,
                    from_epoch,
                    to,
                    to_epoch,
                } if from == node && *from_epoch == epoch => Some((to.clone(), *to_epoch)),
                _ => continue,
            };
            row.state = StreamState::Recovering {
                node: node.clone(),
                node_epoch: epoch,
                transfer_to,
            };
            any = true;
        }
        let recovering = self.streams.values().any(|r| matches!(&r.state, StreamState::Recovering { node: n, node_epoch, .. } if n == node && *node_epoch == epoch));
        if !any && !recovering {
            return Err(Rejection::Precondition(format!(
                "node {node} {epoch} has no open streams"
            )));
        }
        Ok(())
    }

    fn finish_takeover(
        &mut self,
        proposer: &Proposer,
        node: &NodeId,
        epoch: NodeEpoch,
        chunks: &[ChunkCommit],
    ) -> Result<(), Rejection> {
        self.require_lease(proposer)?;
        let recovering = |s: &StreamState| matches!(s, StreamState::Recovering { node: n, node_epoch, .. } if n == node && *node_epoch == epoch);
        if !self.streams.values().any(|r| recovering(&r.state)) {
            return Err(Rejection::Precondition(format!(
                "no takeover of node {node} {epoch} is in progress"
            )));
        }
        self.check_chunks(chunks, recovering)?;
        self.index_chunks(chunks);
        let nodes = self.nodes.clone();
        let accepts = |n: &NodeId, e: NodeEpoch| nodes.get(n).is_some_and(|r| r.epoch == e && !r.fenced);
        for row in self.streams.values_mut() {
            if !recovering(&row.state) {
                continue;
            }
            // A pending transfer completes to its target if that is still live.
            let target = match &row.state {
                StreamState::Recovering {
                    transfer_to: Some((to, to_epoch)),
                    ..
                } if accepts(to, *to_epoch) => Some((to.clone(), *to_epoch)),
                _ => None,
            };
            row.state = match target {
                Some((node, node_epoch)) => {
                    row.next_epoch();
                    StreamState::Open { node, node_epoch }
                }
                None => StreamState::Closed,
            };
        }
        Ok(())
    }

    fn begin_transfer(
        &mut self,
        stream: StreamId,
        stream_epoch: StreamEpoch,
        to: &NodeId,
        to_epoch: NodeEpoch,
    ) -> Result<(), Rejection> {
        if !self.accepts_streams(to, to_epoch) {
            return Err(Rejection::Precondition(format!(
                "target {to} {to_epoch} is not live or is draining"
            )));
        }
        let live = |n: &NodeId, e: NodeEpoch| self.is_live(n, e);
        let row = self
            .streams
            .get(&stream)
            .ok_or_else(|| Rejection::Precondition(format!("stream {stream} does not exist")))?;
        let (from, from_epoch) = match &row.state {
            StreamState::Open { node, node_epoch } if row.stream_epoch == stream_epoch && live(node, *node_epoch) => {
                (node.clone(), *node_epoch)
            }
            _ => {
                return Err(Rejection::Precondition(format!(
                    "stream {stream} is not open at {stream_epoch} on a live node"
                )))
            }
        };
        if &from == to {
            return Err(Rejection::Invalid(format!("stream {stream} is already on {to}")));
        }
        let row = self.stream_mut(stream)?;
        row.state = StreamState::Transferring {
            from,
            from_epoch,
            to: to.clone(),
            to_epoch,
        };
        Ok(())
    }

    fn complete_transfer(
        &mut self,
        proposer: &Proposer,
        stream: StreamId,
        stream_epoch: StreamEpoch,
        end: Offset,
    ) -> Result<(), Rejection> {
        let epoch = proposer.epoch.expect("checked by check_proposer");
        let target_live = |v: &Self, n: &NodeId, e: NodeEpoch| v.is_live(n, e);
        let row = self
            .streams
            .get(&stream)
            .ok_or_else(|| Rejection::Precondition(format!("stream {stream} does not exist")))?;
        let (to, to_epoch) = match &row.state {
            StreamState::Transferring {
                from,
                from_epoch,
                to,
                to_epoch,
            } if from == &proposer.node && *from_epoch == epoch && row.stream_epoch == stream_epoch => {
                (to.clone(), *to_epoch)
            }
            _ => {
                return Err(Rejection::Precondition(format!(
                    "stream {stream} is not being transferred by the proposer at {stream_epoch}"
                )))
            }
        };
        if row.committed_end != end {
            return Err(Rejection::Precondition(format!(
                "stream {stream} committed end is {}, not {end}",
                row.committed_end
            )));
        }
        let to_live = target_live(self, &to, to_epoch);
        let row = self.stream_mut(stream)?;
        if to_live {
            row.state = StreamState::Open {
                node: to,
                node_epoch: to_epoch,
            };
            row.next_epoch();
        } else {
            row.state = StreamState::Closed;
        }
        Ok(())
    }

    fn cancel_transfer(
        &mut self,
        proposer: &Proposer,
        stream: StreamId,
        stream_epoch: StreamEpoch,
    ) -> Result<(), Rejection> {
        self.require_lease(proposer)?;
        let row = self.stream_mut(stream)?;
        match &row.state {
            StreamState::Transferring { from, from_epoch, .. } if row.stream_epoch == stream_epoch => {
                row.state = StreamState::Open {
                    node: from.clone(),
                    node_epoch: *from_epoch,
                };
                Ok(())
            }
            _ => Err(Rejection::Precondition(format!(
                "stream {stream} has no transfer at {stream_epoch}"
            ))),
        }
    }

    fn allocate_producer_ids(&mut self, count: u32) -> Result<i64, Rejection> {
        if count == 0 || count > MAX_PRODUCER_ID_BLOCK {
            return Err(Rejection::Invalid(format!(
                "producer id blocks hold 1-{MAX_PRODUCER_ID_BLOCK} ids, not {count}"
            )));
        }
        let first = self.next_producer_id;
        self.next_producer_id = first
            .checked_add(i64::from(count))
            .ok_or_else(|| Rejection::Invalid("producer ids are exhausted".into()))?;
        Ok(first)
    }

    fn create_token(&mut self, token: &crate::auth::TokenRecord) -> Result<(), Rejection> {
        token.validate().map_err(Rejection::Invalid)?;
        if self.tokens.len() >= MAX_TOKENS {
            return Err(Rejection::Invalid(format!(
                "a cluster holds at most {MAX_TOKENS} tokens"
            )));
        }
        if self.tokens.contains_key(&token.id) {
            return Err(Rejection::TokenExists(token.id.clone()));
        }
        self.tokens.insert(token.id.clone(), token.clone());
        Ok(())
    }

    fn revoke_token(&mut self, id: &str) -> Result<(), Rejection> {
        self.tokens
            .remove(id)
            .map(|_| ())
            .ok_or_else(|| Rejection::TokenNotFound(id.to_string()))
    }

    fn apply_txn(&mut self, index: LogIndex, id: &str, op: &super::txn::TxnOp) -> Outcome {
        use super::txn::{TxnOp, TxnRefusal};
        if let TxnOp::AddPartitions { partitions, .. } = op {
            if let Some(s) = partitions
                .iter()
                .find(|s| !self.streams.get(s).is_some_and(|r| r.state != StreamState::Deleted))
            {
                return Outcome::Rejected(Rejection::Txn(
                    TxnRefusal::Invalid,
                    format!("stream {s} does not exist"),
                ));
            }
        }
        let ctx = super::txn::TxnContext {
            index,
            next_producer_id: &mut self.next_producer_id,
        };
        match super::txn::apply(&mut self.txns, ctx, id, op) {
            Ok((done, committed)) => {
                // A committed transaction's offsets become its groups' (a
                // partition deleted meanwhile has nothing to commit to).
                for (group, offsets) in committed {
                    let live: Vec<_> = offsets
                        .into_iter()
                        .filter(|(s, _, _)| self.streams.get(s).is_some_and(|r| r.state != StreamState::Deleted))
                        .collect();
                    if !live.is_empty() {
                        let g = self.groups.entry(group).or_default();
                        for (stream, offset, metadata) in live {
                            g.insert(stream, (offset, metadata));
                        }
                    }
                }
                Outcome::Txn(done)
            }
            Err((why, message)) => Outcome::Rejected(Rejection::Txn(why, message)),
        }
    }

    fn commit_offsets(&mut self, group: &str, offsets: &[(StreamId, i64, Option<String>)]) -> Result<(), Rejection> {
        if group.is_empty() {
            return Err(Rejection::Invalid("group id is empty".into()));
        }
        for (stream, _, _) in offsets {
            match self.streams.get(stream) {
                Some(r) if r.state != StreamState::Deleted => {}
                _ => return Err(Rejection::Precondition(format!("stream {stream} does not exist"))),
            }
        }
        let g = self.groups.entry(group.to_string()).or_default();
        for (stream, offset, metadata) in offsets {
            g.insert(*stream, (*offset, metadata.clone()));
        }
        Ok(())
    }

    fn delete_group(&mut self, group: &str) -> Result<(), Rejection> {
        let offsets = self.groups.remove(group).is_some();
        let state = self.group_states.remove(group).is_some();
        if offsets || state {
            Ok(())
        } else {
            Err(Rejection::Precondition(format!(
                "group {group:?} has no committed offsets"
            )))
        }
    }

    fn delete_offsets(&mut self, group: &str, partitions: &[StreamId]) -> Result<(), Rejection> {
        if group.is_empty() {
            return Err(Rejection::Invalid("group id is empty".into()));
        }
        if partitions.is_empty() || partitions.len() > MAX_DELETED_OFFSETS {
            return Err(Rejection::Invalid(format!(
                "an offset deletion names 1-{MAX_DELETED_OFFSETS} partitions, not {}",
                partitions.len()
            )));
        }
        let Some(offsets) = self.groups.get_mut(group) else {
            return Err(Rejection::Precondition(format!(
                "group {group:?} has no committed offsets"
            )));
        };
        for s in partitions {
            offsets.remove(s);
        }
        if offsets.is_empty() {
            self.groups.remove(group);
        }
        Ok(())
    }

    fn drain_node(&mut self, node: &NodeId, epoch: NodeEpoch) -> Result<(), Rejection> {
        let row = self.live_row_mut(node, epoch)?;
        row.draining = true;
        Ok(())
    }

    /// See [`Command::CompactChunks`].
    fn compact_chunks(
        &mut self,
        stream: StreamId,
        stream_epoch: StreamEpoch,
        start: Offset,
        replaced: &[IndexedChunk],
        chunks: &[IndexedChunk],
    ) -> Result<(), Rejection> {
        let row = self.stream_mut(stream)?;
        if row.state == StreamState::Deleted {
            return Err(Rejection::Precondition(format!("stream {stream} is deleted")));
        }
        if row.stream_epoch != stream_epoch || row.start != start {
            return Err(Rejection::Precondition(format!(
                "stream {stream} is at {} starting at {}, not {stream_epoch} starting at {start}",
                row.stream_epoch, row.start
            )));
        }
        super::compaction::swap(&mut row.chunks, replaced, chunks).map_err(Rejection::Precondition)?;
        let end = replaced.last().map_or(Offset::ZERO, |c| c.end);
        row.compacted_end = row.compacted_end.max(end);
        Ok(())
    }

    fn trim_stream(&mut self, stream: StreamId, new_start: Offset) -> Result<(), Rejection> {
        let row = self.stream_mut(stream)?;
        if new_start > row.committed_end {
            return Err(Rejection::Precondition(format!(
                "trim to {new_start} is past the committed end {}",
                row.committed_end
            )));
        }
        if new_start <= row.start {
            return Err(Rejection::Precondition(format!(
                "stream {stream} already starts at {}",
                row.start
            )));
        }
        row.start = new_start;
        row.chunks.retain(|c| c.end > new_start);
        Ok(())
    }
}

/// Kafka's rule: 1-249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 249 {
        return Err(format!("topic name must be 1-249 characters, got {}", name.len()));
    }
    if name == "." || name == ".." {
        return Err("topic name may not be '.' or '..'".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '.' || *c == '_' || *c == '-'))
    {
        return Err(format!(
            "topic name {name:?} has invalid character {c:?}; allowed: [a-zA-Z0-9._-]"
        ));
    }
    Ok(())
}

/// The most tokens a cluster holds (each is in every snapshot).
pub const MAX_TOKENS: usize = 10_000;

/// The most partitions one `DeleteOffsets` names (a node deleting more
/// proposes several).
pub const MAX_DELETED_OFFSETS: usize = 10_000;

/// The most producer ids one `AllocateProducerIds` reserves.
pub const MAX_PRODUCER_ID_BLOCK: u32 = 100_000;

#[cfg(test)]
mod tests;
