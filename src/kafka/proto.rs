//! The Kafka requests Sluice accepts, decoded with bounded readers, and the
//! responses it sends, for exactly the versions the `SUPPORTED` table of
//! `versions.rs` advertises.
//!
//! Only non-flexible versions are implemented, except ApiVersions v3 (which
//! librdkafka sends first), SaslAuthenticate v2 and DescribeCluster
//! (flexible in every version);
//! clients negotiate down to these.

use super::wire::{DecodeResult, Reader, Writer};
use bytes::Bytes;

pub const PRODUCE: i16 = 0;
pub const FETCH: i16 = 1;
pub const LIST_OFFSETS: i16 = 2;
pub const METADATA: i16 = 3;
pub const API_VERSIONS: i16 = 18;

// ------------------------------------------------------------ requests

/// A topic's entries in a request or response: (topic name, per partition).
pub type PerTopic<T> = Vec<(String, Vec<T>)>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRequest {
    pub transactional_id: Option<String>,
    pub acks: i16,
    pub timeout_ms: i32,
    /// (partition, records)
    pub topics: PerTopic<(i32, Option<Bytes>)>,
}

pub fn decode_produce(r: &mut Reader, _version: i16) -> DecodeResult<ProduceRequest> {
    let transactional_id = r.nullable_string()?;
    let acks = r.i16()?;
    let timeout_ms = r.i32()?;
    let n = r.array_len(2 + 4)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let m = r.array_len(4 + 4)?;
        let mut parts = Vec::with_capacity(m);
        for _ in 0..m {
            parts.push((r.i32()?, r.nullable_bytes()?));
        }
        topics.push((name, parts));
    }
    r.expect_end()?;
    Ok(ProduceRequest {
        transactional_id,
        acks,
        timeout_ms,
        topics,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartition {
    pub partition: i32,
    pub current_leader_epoch: i32,
    pub fetch_offset: i64,
    pub partition_max_bytes: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub isolation_level: i8,
    pub topics: Vec<(String, Vec<FetchPartition>)>,
}

impl FetchRequest {
    /// One entry per partition, as Kafka keeps them (a map keyed by
    /// topic-partition): a partition named more than once, in one topic
    /// entry or in two entries of the same topic, is fetched once, with the
    /// fields of its last mention, at the place of its first. Topics keep
    /// the order of their first mention.
    pub fn merge_duplicates(mut self) -> Self {
        use std::collections::hash_map::{Entry, HashMap};
        let mut topics: Vec<(String, Vec<FetchPartition>)> = Vec::new();
        let mut topic_at: HashMap<String, usize> = HashMap::new();
        let mut partition_at: HashMap<(usize, i32), usize> = HashMap::new();
        for (name, parts) in std::mem::take(&mut self.topics) {
            let t = match topic_at.entry(name) {
                Entry::Occupied(e) => *e.get(),
                Entry::Vacant(e) => {
                    topics.push((e.key().clone(), Vec::new()));
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
        self
    }
}

pub fn decode_fetch(r: &mut Reader, version: i16) -> DecodeResult<FetchRequest> {
    let _replica_id = r.i32()?;
    let max_wait_ms = r.i32()?;
    let min_bytes = r.i32()?;
    let max_bytes = r.i32()?;
    let isolation_level = r.i8()?;
    if version >= 7 {
        let _session_id = r.i32()?;
        let _session_epoch = r.i32()?;
    }
    let part_len = 4 + 8 + 4 + if version >= 9 { 4 } else { 0 } + if version >= 5 { 8 } else { 0 };
    let n = r.array_len(2 + 4)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let m = r.array_len(part_len)?;
        let mut parts = Vec::with_capacity(m);
        for _ in 0..m {
            let partition = r.i32()?;
            let current_leader_epoch = if version >= 9 { r.i32()? } else { -1 };
            let fetch_offset = r.i64()?;
            if version >= 5 {
                let _log_start_offset = r.i64()?;
            }
            let partition_max_bytes = r.i32()?;
            parts.push(FetchPartition {
                partition,
                current_leader_epoch,
                fetch_offset,
                partition_max_bytes,
            });
        }
        topics.push((name, parts));
    }
    if version >= 7 {
        // Forgotten topics belong to fetch sessions, which are not kept.
        let n = r.array_len(2 + 4)?;
        for _ in 0..n {
            let _ = r.string()?;
            let m = r.array_len(4)?;
            for _ in 0..m {
                r.i32()?;
            }
        }
    }
    if version >= 11 {
        let _rack_id = r.string()?;
    }
    r.expect_end()?;
    Ok(FetchRequest {
        max_wait_ms,
        min_bytes,
        max_bytes,
        isolation_level,
        topics,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsRequest {
    /// (topic, [(partition, current leader epoch, timestamp)])
    pub topics: PerTopic<(i32, i32, i64)>,
}

pub fn decode_list_offsets(r: &mut Reader, version: i16) -> DecodeResult<ListOffsetsRequest> {
    let _replica_id = r.i32()?;
    if version >= 2 {
        let _isolation_level = r.i8()?;
    }
    let part_len = 4 + 8 + if version >= 4 { 4 } else { 0 };
    let n = r.array_len(2 + 4)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let m = r.array_len(part_len)?;
        let mut parts = Vec::with_capacity(m);
        for _ in 0..m {
            let partition = r.i32()?;
            let epoch = if version >= 4 { r.i32()? } else { -1 };
            parts.push((partition, epoch, r.i64()?));
        }
        topics.push((name, parts));
    }
    r.expect_end()?;
    Ok(ListOffsetsRequest { topics })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataRequest {
    /// `None`: every topic.
    pub topics: Option<Vec<String>>,
    pub allow_auto_topic_creation: bool,
}

pub fn decode_metadata(r: &mut Reader, version: i16) -> DecodeResult<MetadataRequest> {
    let n = r.nullable_array_len(2)?;
    let topics = match n {
        // v0: an empty array means every topic.
        Some(0) if version == 0 => None,
        Some(n) => {
            let mut t = Vec::with_capacity(n);
            for _ in 0..n {
                t.push(r.string()?);
            }
            Some(t)
        }
        None => None,
    };
    let allow_auto_topic_creation = if version >= 4 { r.bool()? } else { true };
    if version >= 8 {
        let _cluster_ops = r.bool()?;
        let _topic_ops = r.bool()?;
    }
    r.expect_end()?;
    Ok(MetadataRequest {
        topics,
        allow_auto_topic_creation,
    })
}

// ------------------------------------------------------------ responses

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
    pub name: String,
    pub partitions: Vec<MetadataPartition>,
}

pub fn encode_metadata(
    w: &mut Writer,
    version: i16,
    brokers: &[Broker],
    controller: i32,
    cluster_id: &str,
    topics: &[MetadataTopic],
) {
    if version >= 3 {
        w.i32(0); // throttle_time_ms
    }
    w.array_len(brokers.len());
    for b in brokers {
        w.i32(b.node_id);
        w.string(&b.host);
        w.i32(b.port);
        if version >= 1 {
            w.nullable_string(None); // rack
        }
    }
    if version >= 2 {
        w.nullable_string(Some(cluster_id));
    }
    if version >= 1 {
        w.i32(controller);
    }
    w.array_len(topics.len());
    for t in topics {
        w.i16(t.error_code);
        w.string(&t.name);
        if version >= 1 {
            w.bool(false); // is_internal
        }
        w.array_len(t.partitions.len());
        for p in &t.partitions {
            w.i16(p.error_code);
            w.i32(p.partition);
            w.i32(p.leader);
            if version >= 7 {
                w.i32(p.leader_epoch);
            }
            let replicas: &[i32] = if p.leader >= 0 { &[p.leader] } else { &[] };
            for _ in 0..2 {
                // replica_nodes, isr_nodes
                w.array_len(replicas.len());
                for r in replicas {
                    w.i32(*r);
                }
            }
            if version >= 5 {
                w.array_len(0); // offline_replicas
            }
        }
        if version >= 8 {
            w.i32(i32::MIN); // topic_authorized_operations: not requested
        }
    }
    if version >= 8 {
        w.i32(i32::MIN); // cluster_authorized_operations
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducePartitionResponse {
    pub partition: i32,
    pub error_code: i16,
    pub base_offset: i64,
    pub log_start_offset: i64,
    pub error_message: Option<String>,
}

pub fn encode_produce(w: &mut Writer, version: i16, topics: &[(String, Vec<ProducePartitionResponse>)]) {
    w.array_len(topics.len());
    for (name, parts) in topics {
        w.string(name);
        w.array_len(parts.len());
        for p in parts {
            w.i32(p.partition);
            w.i16(p.error_code);
            w.i64(p.base_offset);
            w.i64(-1); // log_append_time_ms: CreateTime
            if version >= 5 {
                w.i64(p.log_start_offset);
            }
            if version >= 8 {
                w.array_len(0); // record_errors
                w.nullable_string(p.error_message.as_deref());
            }
        }
    }
    w.i32(0); // throttle_time_ms
}

#[derive(Debug, Clone)]
pub struct FetchPartitionResponse {
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub batches: Vec<Bytes>,
}

pub fn encode_fetch(w: &mut Writer, version: i16, topics: &[(String, Vec<FetchPartitionResponse>)]) {
    w.i32(0); // throttle_time_ms
    if version >= 7 {
        w.i16(0); // error_code
        w.i32(0); // session_id: no sessions
    }
    w.array_len(topics.len());
    for (name, parts) in topics {
        w.string(name);
        w.array_len(parts.len());
        for p in parts {
            w.i32(p.partition);
            w.i16(p.error_code);
            w.i64(p.high_watermark);
            w.i64(p.high_watermark); // last_stable_offset: no transactions
            if version >= 5 {
                w.i64(p.log_start_offset);
            }
            w.array_len(0); // aborted_transactions
            if version >= 11 {
                w.i32(-1); // preferred_read_replica
            }
            w.bytes_shared(&p.batches);
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsPartitionResponse {
    pub partition: i32,
    pub error_code: i16,
    pub timestamp: i64,
    pub offset: i64,
    pub leader_epoch: i32,
}

pub fn encode_list_offsets(w: &mut Writer, version: i16, topics: &[(String, Vec<ListOffsetsPartitionResponse>)]) {
    if version >= 2 {
        w.i32(0); // throttle_time_ms
    }
    w.array_len(topics.len());
    for (name, parts) in topics {
        w.string(name);
        w.array_len(parts.len());
        for p in parts {
            w.i32(p.partition);
            w.i16(p.error_code);
            w.i64(p.timestamp);
            w.i64(p.offset);
            if version >= 4 {
                w.i32(p.leader_epoch);
            }
        }
    }
}
