//! The data-plane requests (Produce, Fetch, ListOffsets, Metadata),
//! decoded with bounded readers, and their responses, for exactly the
//! versions the `SUPPORTED` table of `versions.rs` advertises, flexible
//! versions (compact strings and arrays, tagged fields) included. Produce
//! and Fetch responses are written by hand (Fetch shares stored record
//! batches zero-copy); Metadata and ListOffsets responses by kafka-protocol's
//! generated encoders.

use super::wire::{DecodeError, DecodeResult, Reader, Writer};
use crate::ids::TopicUuid;
use bytes::Bytes;

pub const PRODUCE: i16 = 0;
pub const FETCH: i16 = 1;
pub const LIST_OFFSETS: i16 = 2;
pub const METADATA: i16 = 3;
pub const API_VERSIONS: i16 = 18;

// ------------------------------------------------------------ requests

/// A topic's entries in a request or response: (topic name, per partition).
pub type PerTopic<T> = Vec<(String, Vec<T>)>;

/// The fields whose wire form depends on the version being flexible
/// (compact strings, arrays and bytes, tagged-field sections) or not.
pub struct Fields<'a> {
    pub r: &'a mut Reader,
    pub flexible: bool,
}

impl<'a> Fields<'a> {
    pub fn new(r: &'a mut Reader, flexible: bool) -> Self {
        Self { r, flexible }
    }
    fn error<T>(&self, message: &str) -> DecodeResult<T> {
        Err(DecodeError {
            at: self.r.position(),
            message: message.to_string(),
        })
    }
    pub fn string(&mut self) -> DecodeResult<String> {
        if self.flexible {
            self.r.compact_string()
        } else {
            self.r.string()
        }
    }
    pub fn nullable_string(&mut self) -> DecodeResult<Option<String>> {
        if self.flexible {
            self.r.compact_nullable_string()
        } else {
            self.r.nullable_string()
        }
    }
    pub fn nullable_array_len(&mut self, min_element: usize) -> DecodeResult<Option<usize>> {
        if self.flexible {
            self.r.compact_nullable_array_len(min_element)
        } else {
            self.r.nullable_array_len(min_element)
        }
    }
    pub fn array_len(&mut self, min_element: usize) -> DecodeResult<usize> {
        match self.nullable_array_len(min_element)? {
            Some(n) => Ok(n),
            None => self.error("null where an array is required"),
        }
    }
    /// An array whose elements take at least `classic` bytes in the
    /// classic encoding and `compact` in the flexible one.
    pub fn array_of(&mut self, classic: usize, compact: usize) -> DecodeResult<usize> {
        self.array_len(if self.flexible { compact } else { classic })
    }
    /// [`Self::array_of`], nullable.
    pub fn nullable_array_of(&mut self, classic: usize, compact: usize) -> DecodeResult<Option<usize>> {
        self.nullable_array_len(if self.flexible { compact } else { classic })
    }
    /// An array of topics by name, each with an array of per-partition
    /// entries of at least `partition_min` bytes (tagged fields included)
    /// read by `partition`: the shape of most partition-level requests.
    pub fn per_topic<T>(
        &mut self,
        partition_min: usize,
        mut partition: impl FnMut(&mut Self) -> DecodeResult<T>,
    ) -> DecodeResult<PerTopic<T>> {
        let n = self.array_len(self.min_string() + self.min_array() + self.min_tags())?;
        let mut topics = Vec::with_capacity(n);
        for _ in 0..n {
            let name = self.string()?;
            let m = self.array_len(partition_min)?;
            let mut parts = Vec::with_capacity(m);
            for _ in 0..m {
                parts.push(partition(self)?);
                self.tags()?;
            }
            self.tags()?;
            topics.push((name, parts));
        }
        Ok(topics)
    }
    /// An array of topics by name, each with a plain array of partition
    /// numbers (OffsetFetch, AddPartitionsToTxn); `None` for a null array
    /// where `nullable`.
    pub fn topic_partition_numbers(&mut self, nullable: bool) -> DecodeResult<Option<PerTopic<i32>>> {
        let min = self.min_string() + self.min_array() + self.min_tags();
        let n = if nullable {
            self.nullable_array_len(min)?
        } else {
            Some(self.array_len(min)?)
        };
        let Some(n) = n else { return Ok(None) };
        let mut topics = Vec::with_capacity(n);
        for _ in 0..n {
            let name = self.string()?;
            let m = self.array_len(4)?;
            let mut parts = Vec::with_capacity(m);
            for _ in 0..m {
                parts.push(self.r.i32()?);
            }
            self.tags()?;
            topics.push((name, parts));
        }
        Ok(Some(topics))
    }
    /// Bytes that share the frame; `None` for null.
    pub fn nullable_bytes(&mut self) -> DecodeResult<Option<Bytes>> {
        if !self.flexible {
            return self.r.nullable_bytes();
        }
        match self.r.uvarint()? as usize {
            0 => Ok(None),
            n => self.r.bytes_exact(n - 1).map(Some),
        }
    }
    pub fn uuid(&mut self) -> DecodeResult<TopicUuid> {
        let b = self.r.bytes_exact(16)?;
        let mut id = [0u8; 16];
        id.copy_from_slice(&b);
        Ok(TopicUuid(id))
    }
    /// A tagged-field section (skipped), in flexible versions only.
    pub fn tags(&mut self) -> DecodeResult<()> {
        if self.flexible {
            self.r.tagged_fields()?;
        }
        Ok(())
    }
    /// Bytes an element of an array of strings takes at least.
    pub fn min_string(&self) -> usize {
        if self.flexible {
            1
        } else {
            2
        }
    }
    /// Bytes an array (its count) takes at least.
    pub fn min_array(&self) -> usize {
        if self.flexible {
            1
        } else {
            4
        }
    }
    /// Bytes a tagged-field section takes at least.
    pub fn min_tags(&self) -> usize {
        usize::from(self.flexible)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProduceRequest {
    pub transactional_id: Option<String>,
    pub acks: i16,
    pub timeout_ms: i32,
    /// (partition, records). From v13 topics are named by id: the names
    /// are empty until the handler resolves `topic_ids`.
    pub topics: PerTopic<(i32, Option<Bytes>)>,
    /// One per entry of `topics` from v13 on, else empty.
    pub topic_ids: Vec<TopicUuid>,
}

pub fn decode_produce(r: &mut Reader, version: i16) -> DecodeResult<ProduceRequest> {
    let mut f = Fields::new(r, version >= 9);
    let transactional_id = f.nullable_string()?;
    let acks = f.r.i16()?;
    let timeout_ms = f.r.i32()?;
    let by_id = version >= 13;
    let topic_len = if by_id { 16 } else { f.min_string() } + f.min_array() + f.min_tags();
    let n = f.array_len(topic_len)?;
    let mut topics = Vec::with_capacity(n);
    let mut topic_ids = Vec::new();
    for _ in 0..n {
        let name = if by_id {
            topic_ids.push(f.uuid()?);
            String::new()
        } else {
            f.string()?
        };
        let m = f.array_len(4 + f.min_array() + f.min_tags())?;
        let mut parts = Vec::with_capacity(m);
        for _ in 0..m {
            let index = f.r.i32()?;
            let records = f.nullable_bytes()?;
            f.tags()?;
            parts.push((index, records));
        }
        f.tags()?;
        topics.push((name, parts));
    }
    f.tags()?;
    f.r.expect_end()?;
    Ok(ProduceRequest {
        transactional_id,
        acks,
        timeout_ms,
        topics,
        topic_ids,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartition {
    pub partition: i32,
    pub current_leader_epoch: i32,
    pub fetch_offset: i64,
    pub partition_max_bytes: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchRequest {
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub isolation_level: i8,
    /// KIP-227 fetch session: 0 and -1 (or 0 and 0 to open one) for a full
    /// fetch; see `fetch_session`.
    pub session_id: i32,
    pub session_epoch: i32,
    /// From v13 topics are named by id: the names are empty until the
    /// handler resolves `topic_ids`.
    pub topics: Vec<(String, Vec<FetchPartition>)>,
    /// One per entry of `topics` from v13 on, else empty.
    pub topic_ids: Vec<TopicUuid>,
    /// Partitions to drop from the session: (name, id, partitions); the
    /// name is empty from v13, the id zero before.
    pub forgotten: Vec<(String, TopicUuid, Vec<i32>)>,
}

impl FetchRequest {
    /// One entry per partition, as Kafka keeps them (a map keyed by
    /// topic-partition): a partition named more than once, in one topic
    /// entry or in two entries of the same topic, is fetched once, with the
    /// fields of its last mention, at the place of its first. Topics keep
    /// the order of their first mention. Topics are told apart by name and
    /// id together (v13+ requests name them by id only).
    pub fn merge_duplicates(mut self) -> Self {
        use std::collections::hash_map::{Entry, HashMap};
        let mut topics: Vec<(String, Vec<FetchPartition>)> = Vec::new();
        let mut ids: Vec<TopicUuid> = Vec::new();
        let mut topic_at: HashMap<(String, TopicUuid), usize> = HashMap::new();
        let mut partition_at: HashMap<(usize, i32), usize> = HashMap::new();
        let had_ids = !self.topic_ids.is_empty();
        let old_ids = std::mem::take(&mut self.topic_ids);
        for (i, (name, parts)) in std::mem::take(&mut self.topics).into_iter().enumerate() {
            let id = old_ids.get(i).copied().unwrap_or(TopicUuid::ZERO);
            let t = match topic_at.entry((name, id)) {
                Entry::Occupied(e) => *e.get(),
                Entry::Vacant(e) => {
                    topics.push((e.key().0.clone(), Vec::new()));
                    ids.push(id);
                    *e.insert(topics.len() - 1)
                }
            };
            for p in parts {
                let list = &mut topics[t].1;
                match partition_at.entry((t, p.partition)) {
                    Entry::Occupied(e) => list[*e.get()] = p,
                    Entry::Vacant(e) => {
                        e.insert(list.len());
                        list.push(p);
                    }
                }
            }
        }
        self.topics = topics;
        if had_ids {
            self.topic_ids = ids;
        }
        self
    }
}

pub fn decode_fetch(r: &mut Reader, version: i16) -> DecodeResult<FetchRequest> {
    let mut f = Fields::new(r, version >= 12);
    if version <= 14 {
        let _replica_id = f.r.i32()?;
    }
    let max_wait_ms = f.r.i32()?;
    let min_bytes = f.r.i32()?;
    let max_bytes = f.r.i32()?;
    let isolation_level = f.r.i8()?;
    let (mut session_id, mut session_epoch) = (0, -1);
    if version >= 7 {
        session_id = f.r.i32()?;
        session_epoch = f.r.i32()?;
    }
    let by_id = version >= 13;
    let part_len = 4
        + 8
        + 4
        + if version >= 9 { 4 } else { 0 }
        + if version >= 12 { 4 } else { 0 }
        + if version >= 5 { 8 } else { 0 }
        + f.min_tags();
    let topic_len = if by_id { 16 } else { f.min_string() } + f.min_array() + f.min_tags();
    let n = f.array_len(topic_len)?;
    let mut topics = Vec::with_capacity(n);
    let mut topic_ids = Vec::new();
    for _ in 0..n {
        let name = if by_id {
            topic_ids.push(f.uuid()?);
            String::new()
        } else {
            f.string()?
        };
        let m = f.array_len(part_len)?;
        let mut parts = Vec::with_capacity(m);
        for _ in 0..m {
            let partition = f.r.i32()?;
            let current_leader_epoch = if version >= 9 { f.r.i32()? } else { -1 };
            let fetch_offset = f.r.i64()?;
            if version >= 12 {
                let _last_fetched_epoch = f.r.i32()?;
            }
            if version >= 5 {
                let _log_start_offset = f.r.i64()?;
            }
            let partition_max_bytes = f.r.i32()?;
            f.tags()?;
            parts.push(FetchPartition {
                partition,
                current_leader_epoch,
                fetch_offset,
                partition_max_bytes,
            });
        }
        f.tags()?;
        topics.push((name, parts));
    }
    let mut forgotten = Vec::new();
    if version >= 7 {
        let n = f.array_len(topic_len)?;
        for _ in 0..n {
            let (name, id) = if by_id {
                (String::new(), f.uuid()?)
            } else {
                (f.string()?, TopicUuid::ZERO)
            };
            let m = f.array_len(4)?;
            let mut parts = Vec::with_capacity(m);
            for _ in 0..m {
                parts.push(f.r.i32()?);
            }
            f.tags()?;
            forgotten.push((name, id, parts));
        }
    }
    if version >= 11 {
        let _rack_id = f.string()?;
    }
    f.tags()?;
    f.r.expect_end()?;
    Ok(FetchRequest {
        max_wait_ms,
        min_bytes,
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        topics,
        topic_ids,
        forgotten,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsRequest {
    /// 0 read_uncommitted, 1 read_committed (the same here: without
    /// transactions the last stable offset is the high watermark).
    pub isolation_level: i8,
    /// (topic, [(partition, current leader epoch, timestamp)])
    pub topics: PerTopic<(i32, i32, i64)>,
}

pub fn decode_list_offsets(r: &mut Reader, version: i16) -> DecodeResult<ListOffsetsRequest> {
    let mut f = Fields::new(r, version >= 6);
    let _replica_id = f.r.i32()?;
    let isolation_level = if version >= 2 { f.r.i8()? } else { 0 };
    let part_len = 4 + 8 + if version >= 4 { 4 } else { 0 } + f.min_tags();
    let topics = f.per_topic(part_len, |f| {
        let partition = f.r.i32()?;
        let epoch = if version >= 4 { f.r.i32()? } else { -1 };
        Ok((partition, epoch, f.r.i64()?))
    })?;
    if version >= 10 {
        let _timeout_ms = f.r.i32()?;
    }
    f.tags()?;
    f.r.expect_end()?;
    Ok(ListOffsetsRequest {
        isolation_level,
        topics,
    })
}

/// A topic a Metadata request names: by name, or (v10+) by id with a null name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataTopicRef {
    Name(String),
    Id(TopicUuid),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataRequest {
    /// `None`: every topic.
    pub topics: Option<Vec<MetadataTopicRef>>,
    pub allow_auto_topic_creation: bool,
    pub include_cluster_authorized_operations: bool,
    pub include_topic_authorized_operations: bool,
}

pub fn decode_metadata(r: &mut Reader, version: i16) -> DecodeResult<MetadataRequest> {
    let mut f = Fields::new(r, version >= 9);
    let topic_len = if version >= 10 { 16 } else { 0 } + f.min_string().min(1) + f.min_tags();
    let n = f.nullable_array_len(topic_len.max(2))?;
    let topics = match n {
        // v0: an empty array means every topic.
        Some(0) if version == 0 => None,
        Some(n) => {
            let mut t = Vec::with_capacity(n);
            for _ in 0..n {
                let id = if version >= 10 { f.uuid()? } else { TopicUuid::ZERO };
                let name = if version >= 10 {
                    f.nullable_string()?
                } else {
                    Some(f.string()?)
                };
                f.tags()?;
                t.push(match name {
                    Some(name) => MetadataTopicRef::Name(name),
                    None => MetadataTopicRef::Id(id),
                });
            }
            Some(t)
        }
        None => None,
    };
    let allow_auto_topic_creation = if version >= 4 { f.r.bool()? } else { true };
    let (mut cluster_ops, mut topic_ops) = (false, false);
    if (8..=10).contains(&version) {
        cluster_ops = f.r.bool()?;
    }
    if version >= 8 {
        topic_ops = f.r.bool()?;
    }
    f.tags()?;
    f.r.expect_end()?;
    Ok(MetadataRequest {
        topics,
        allow_auto_topic_creation,
        include_cluster_authorized_operations: cluster_ops,
        include_topic_authorized_operations: topic_ops,
    })
}

// ------------------------------------------------------------ responses

/// Writes the fields whose wire form depends on the version being flexible.
struct Out<'a> {
    w: &'a mut Writer,
    flexible: bool,
}

impl Out<'_> {
    fn string(&mut self, s: &str) {
        if self.flexible {
            self.w.compact_string(s)
        } else {
            self.w.string(s)
        }
    }
    fn nullable_string(&mut self, s: Option<&str>) {
        if self.flexible {
            self.w.compact_nullable_string(s)
        } else {
            self.w.nullable_string(s)
        }
    }
    fn array_len(&mut self, n: usize) {
        if self.flexible {
            self.w.compact_array_len(n)
        } else {
            self.w.array_len(n)
        }
    }
    fn tags(&mut self) {
        if self.flexible {
            self.w.no_tagged_fields();
        }
    }
    /// A topic's key: its id from `by_id_from` on, else its name.
    fn topic(&mut self, version: i16, by_id_from: i16, name: &str, id: TopicUuid) {
        if version >= by_id_from {
            self.w.buf.extend_from_slice(&id.0);
        } else {
            self.string(name);
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataPartition {
    pub error_code: i16,
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataTopic {
    pub error_code: i16,
    /// Empty for a topic asked by an id that names no topic.
    pub name: String,
    pub topic_id: TopicUuid,
    pub partitions: Vec<MetadataPartition>,
    /// Kafka's bit field of ACL operations, `i32::MIN` when not asked.
    pub authorized_operations: i32,
}

/// What a Metadata response says besides its topics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataCluster<'a> {
    pub brokers: &'a [Broker],
    pub controller: i32,
    pub cluster_id: &'a str,
    /// Kafka's bit field of cluster ACL operations, `i32::MIN` when not asked.
    pub authorized_operations: i32,
}

/// The Metadata response in kafka-protocol's generated form.
pub fn metadata_response(
    cluster: &MetadataCluster,
    topics: &[MetadataTopic],
) -> kafka_protocol::messages::MetadataResponse {
    use kafka_protocol::messages::metadata_response::*;
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    MetadataResponse::default()
        .with_brokers(
            cluster
                .brokers
                .iter()
                .map(|b| {
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(b.node_id))
                        .with_host(StrBytes::from_string(b.host.clone()))
                        .with_port(b.port)
                })
                .collect(),
        )
        .with_cluster_id(Some(StrBytes::from_string(cluster.cluster_id.to_string())))
        .with_controller_id(BrokerId(cluster.controller))
        .with_cluster_authorized_operations(cluster.authorized_operations)
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    MetadataResponseTopic::default()
                        .with_error_code(t.error_code)
                        .with_name((!t.name.is_empty()).then(|| TopicName(StrBytes::from_string(t.name.clone()))))
                        .with_topic_id(uuid::Uuid::from_bytes(t.topic_id.0))
                        .with_topic_authorized_operations(t.authorized_operations)
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    let replicas: Vec<BrokerId> = if p.leader >= 0 {
                                        vec![BrokerId(p.leader)]
                                    } else {
                                        Vec::new()
                                    };
                                    MetadataResponsePartition::default()
                                        .with_error_code(p.error_code)
                                        .with_partition_index(p.partition)
                                        .with_leader_id(BrokerId(p.leader))
                                        .with_leader_epoch(p.leader_epoch)
                                        .with_replica_nodes(replicas.clone())
                                        .with_isr_nodes(replicas)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// The Metadata response body at `version` (v0-v13), by the generated encoder.
pub fn encode_metadata(
    w: &mut Writer,
    version: i16,
    cluster: &MetadataCluster,
    topics: &[MetadataTopic],
) -> DecodeResult<()> {
    let mut resp = metadata_response(cluster, topics);
    if version < 8 {
        // Fields older versions lack must keep their defaults.
        resp.cluster_authorized_operations = i32::MIN;
        for t in &mut resp.topics {
            t.topic_authorized_operations = i32::MIN;
        }
    }
    if version >= 11 {
        resp.cluster_authorized_operations = i32::MIN;
    }
    if version < 12 {
        for t in &mut resp.topics {
            if version < 10 {
                t.topic_id = Default::default();
            }
            if version < 12 && t.name.is_none() {
                t.name = Some(Default::default());
            }
        }
    }
    w.message(&resp, version)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducePartitionResponse {
    pub partition: i32,
    pub error_code: i16,
    pub base_offset: i64,
    pub log_start_offset: i64,
    pub error_message: Option<String>,
}

/// The Produce response body, v3-v13. `ids` holds each topic's id (v13
/// names topics by id; missing ids are written as zero).
pub fn encode_produce(
    w: &mut Writer,
    version: i16,
    topics: &[(String, Vec<ProducePartitionResponse>)],
    ids: &[TopicUuid],
) {
    let mut o = Out {
        w,
        flexible: version >= 9,
    };
    o.array_len(topics.len());
    for (i, (name, parts)) in topics.iter().enumerate() {
        o.topic(version, 13, name, ids.get(i).copied().unwrap_or_default());
        o.array_len(parts.len());
        for p in parts {
            o.w.i32(p.partition);
            o.w.i16(p.error_code);
            o.w.i64(p.base_offset);
            o.w.i64(-1); // log_append_time_ms: CreateTime
            if version >= 5 {
                o.w.i64(p.log_start_offset);
            }
            if version >= 8 {
                o.array_len(0); // record_errors
                o.nullable_string(p.error_message.as_deref());
            }
            o.tags();
        }
        o.tags();
    }
    o.w.i32(0); // throttle_time_ms
    o.tags();
}

#[derive(Debug, Clone)]
pub struct FetchPartitionResponse {
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// The aborted transactions of a read_committed answer: (producer id,
    /// first offset).
    pub aborted: Vec<(i64, i64)>,
    pub batches: Vec<Bytes>,
}

/// The top-level fields of a Fetch response (v7+): the session's error and id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FetchHead {
    pub error_code: i16,
    pub session_id: i32,
}

/// The Fetch response body, v4-v18, record batches shared zero-copy.
/// `ids` holds each topic's id (v13+ name topics by id).
pub fn encode_fetch(
    w: &mut Writer,
    version: i16,
    head: FetchHead,
    topics: &[(String, Vec<FetchPartitionResponse>)],
    ids: &[TopicUuid],
) {
    let mut o = Out {
        w,
        flexible: version >= 12,
    };
    o.w.i32(0); // throttle_time_ms
    if version >= 7 {
        o.w.i16(head.error_code);
        o.w.i32(head.session_id);
    }
    o.array_len(topics.len());
    for (i, (name, parts)) in topics.iter().enumerate() {
        o.topic(version, 13, name, ids.get(i).copied().unwrap_or_default());
        o.array_len(parts.len());
        for p in parts {
            o.w.i32(p.partition);
            o.w.i16(p.error_code);
            o.w.i64(p.high_watermark);
            o.w.i64(p.last_stable_offset);
            if version >= 5 {
                o.w.i64(p.log_start_offset);
            }
            o.array_len(p.aborted.len());
            for &(producer_id, first_offset) in &p.aborted {
                o.w.i64(producer_id);
                o.w.i64(first_offset);
                o.tags();
            }
            if version >= 11 {
                o.w.i32(-1); // preferred_read_replica
            }
            if o.flexible {
                o.w.compact_bytes_shared(&p.batches);
            } else {
                o.w.bytes_shared(&p.batches);
            }
            o.tags();
        }
        o.tags();
    }
    o.tags();
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsPartitionResponse {
    pub partition: i32,
    pub error_code: i16,
    pub timestamp: i64,
    pub offset: i64,
    pub leader_epoch: i32,
}

/// The ListOffsets response body, v1-v10, by the generated encoder.
pub fn encode_list_offsets(
    w: &mut Writer,
    version: i16,
    topics: &[(String, Vec<ListOffsetsPartitionResponse>)],
) -> DecodeResult<()> {
    use kafka_protocol::messages::list_offsets_response as lo;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;
    let resp = lo::ListOffsetsResponse::default().with_topics(
        topics
            .iter()
            .map(|(name, parts)| {
                lo::ListOffsetsTopicResponse::default()
                    .with_name(TopicName(StrBytes::from_string(name.clone())))
                    .with_partitions(
                        parts
                            .iter()
                            .map(|p| {
                                lo::ListOffsetsPartitionResponse::default()
                                    .with_partition_index(p.partition)
                                    .with_error_code(p.error_code)
                                    .with_timestamp(p.timestamp)
                                    .with_offset(p.offset)
                                    .with_leader_epoch(if version >= 4 { p.leader_epoch } else { -1 })
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    w.message(&resp, version)
}
