//! Requests and responses of the admin APIs, decoded with bounded readers:
//! the non-flexible versions of CreateTopics, DeleteTopics,
//! CreatePartitions, DescribeConfigs, AlterConfigs and
//! IncrementalAlterConfigs, and DescribeCluster v0–1 (flexible only: compact
//! strings and arrays, tagged fields, request header v2, response header v1).
//! The ranges are in the `SUPPORTED` table of `versions.rs`.

use super::proto::Broker;
use super::wire::{DecodeResult, Reader, Writer};

pub const CREATE_TOPICS: i16 = 19;
pub const DELETE_TOPICS: i16 = 20;
pub const DESCRIBE_CONFIGS: i16 = 32;
pub const ALTER_CONFIGS: i16 = 33;
pub const CREATE_PARTITIONS: i16 = 37;
pub const INCREMENTAL_ALTER_CONFIGS: i16 = 44;
pub const DESCRIBE_CLUSTER: i16 = 60;

/// Is `key` one of the admin APIs?
pub fn is_admin_api(key: i16) -> bool {
    matches!(
        key,
        CREATE_TOPICS
            | DELETE_TOPICS
            | DESCRIBE_CONFIGS
            | ALTER_CONFIGS
            | CREATE_PARTITIONS
            | INCREMENTAL_ALTER_CONFIGS
            | DESCRIBE_CLUSTER
    )
}

/// Config resource types (Kafka's `ConfigResource.Type`).
pub mod resource {
    pub const TOPIC: i8 = 2;
    pub const BROKER: i8 = 4;
}

/// Where a described config's value comes from (`ConfigSource`).
pub mod source {
    pub const DYNAMIC_TOPIC_CONFIG: i8 = 1;
    pub const DEFAULT_CONFIG: i8 = 5;
}

/// A described config's type (`ConfigType`, DescribeConfigs v3).
pub mod config_type {
    pub const LONG: i8 = 5;
    pub const LIST: i8 = 7;
}

/// IncrementalAlterConfigs operations.
pub mod op {
    pub const SET: i8 = 0;
    pub const DELETE: i8 = 1;
    pub const APPEND: i8 = 2;
    pub const SUBTRACT: i8 = 3;
}

/// A name and a nullable value (topic configs of CreateTopics, AlterConfigs).
pub type NamedValue = (String, Option<String>);

fn named_values(r: &mut Reader) -> DecodeResult<Vec<NamedValue>> {
    let n = r.array_len(2 + 2)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push((r.string()?, r.nullable_string()?));
    }
    Ok(out)
}

fn broker_ids(r: &mut Reader) -> DecodeResult<Vec<i32>> {
    let n = r.array_len(4)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(r.i32()?);
    }
    Ok(out)
}

// ------------------------------------------------------------ CreateTopics

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatableTopic {
    pub name: String,
    /// -1: the default.
    pub num_partitions: i32,
    /// -1: the default.
    pub replication_factor: i16,
    /// Manual assignment: (partition, broker ids).
    pub assignments: Vec<(i32, Vec<i32>)>,
    pub configs: Vec<NamedValue>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopicsRequest {
    pub topics: Vec<CreatableTopic>,
    pub timeout_ms: i32,
    pub validate_only: bool,
}

pub fn decode_create_topics(r: &mut Reader, version: i16) -> DecodeResult<CreateTopicsRequest> {
    let n = r.array_len(2 + 4 + 2 + 4 + 4)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let num_partitions = r.i32()?;
        let replication_factor = r.i16()?;
        let m = r.array_len(4 + 4)?;
        let mut assignments = Vec::with_capacity(m);
        for _ in 0..m {
            assignments.push((r.i32()?, broker_ids(r)?));
        }
        let configs = named_values(r)?;
        topics.push(CreatableTopic {
            name,
            num_partitions,
            replication_factor,
            assignments,
            configs,
        });
    }
    let timeout_ms = r.i32()?;
    let validate_only = if version >= 1 { r.bool()? } else { false };
    r.expect_end()?;
    Ok(CreateTopicsRequest {
        topics,
        timeout_ms,
        validate_only,
    })
}

/// One topic's answer to CreateTopics, DeleteTopics or CreatePartitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicResult {
    pub name: String,
    pub error_code: i16,
    pub error_message: Option<String>,
}

pub fn encode_create_topics(w: &mut Writer, version: i16, topics: &[TopicResult]) {
    if version >= 2 {
        w.i32(0); // throttle_time_ms
    }
    w.array_len(topics.len());
    for t in topics {
        w.string(&t.name);
        w.i16(t.error_code);
        if version >= 1 {
            w.nullable_string(t.error_message.as_deref());
        }
    }
}

// ------------------------------------------------------------ DeleteTopics

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteTopicsRequest {
    pub names: Vec<String>,
    pub timeout_ms: i32,
}

pub fn decode_delete_topics(r: &mut Reader, _version: i16) -> DecodeResult<DeleteTopicsRequest> {
    let n = r.array_len(2)?;
    let mut names = Vec::with_capacity(n);
    for _ in 0..n {
        names.push(r.string()?);
    }
    let timeout_ms = r.i32()?;
    r.expect_end()?;
    Ok(DeleteTopicsRequest { names, timeout_ms })
}

/// DeleteTopics v0–3 answers carry no message: only (name, error code).
pub fn encode_delete_topics(w: &mut Writer, version: i16, topics: &[TopicResult]) {
    if version >= 1 {
        w.i32(0); // throttle_time_ms
    }
    w.array_len(topics.len());
    for t in topics {
        w.string(&t.name);
        w.i16(t.error_code);
    }
}

// ------------------------------------------------------------ CreatePartitions

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePartitionsTopic {
    pub name: String,
    /// The new total partition count.
    pub count: i32,
    /// Broker ids per new partition; `None` for automatic placement.
    pub assignments: Option<Vec<Vec<i32>>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePartitionsRequest {
    pub topics: Vec<CreatePartitionsTopic>,
    pub timeout_ms: i32,
    pub validate_only: bool,
}

pub fn decode_create_partitions(r: &mut Reader, _version: i16) -> DecodeResult<CreatePartitionsRequest> {
    let n = r.array_len(2 + 4 + 4)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let count = r.i32()?;
        let assignments = match r.nullable_array_len(4)? {
            None => None,
            Some(m) => {
                let mut a = Vec::with_capacity(m);
                for _ in 0..m {
                    a.push(broker_ids(r)?);
                }
                Some(a)
            }
        };
        topics.push(CreatePartitionsTopic {
            name,
            count,
            assignments,
        });
    }
    let timeout_ms = r.i32()?;
    let validate_only = r.bool()?;
    r.expect_end()?;
    Ok(CreatePartitionsRequest {
        topics,
        timeout_ms,
        validate_only,
    })
}

pub fn encode_create_partitions(w: &mut Writer, _version: i16, topics: &[TopicResult]) {
    w.i32(0); // throttle_time_ms
    w.array_len(topics.len());
    for t in topics {
        w.string(&t.name);
        w.i16(t.error_code);
        w.nullable_string(t.error_message.as_deref());
    }
}

// ------------------------------------------------------------ DescribeConfigs

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeConfigsResource {
    pub resource_type: i8,
    pub name: String,
    /// `None`: every key.
    pub keys: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeConfigsRequest {
    pub resources: Vec<DescribeConfigsResource>,
    pub include_synonyms: bool,
    pub include_documentation: bool,
}

pub fn decode_describe_configs(r: &mut Reader, version: i16) -> DecodeResult<DescribeConfigsRequest> {
    let n = r.array_len(1 + 2 + 4)?;
    let mut resources = Vec::with_capacity(n);
    for _ in 0..n {
        let resource_type = r.i8()?;
        let name = r.string()?;
        let keys = match r.nullable_array_len(2)? {
            None => None,
            Some(m) => {
                let mut k = Vec::with_capacity(m);
                for _ in 0..m {
                    k.push(r.string()?);
                }
                Some(k)
            }
        };
        resources.push(DescribeConfigsResource {
            resource_type,
            name,
            keys,
        });
    }
    let include_synonyms = if version >= 1 { r.bool()? } else { false };
    let include_documentation = if version >= 3 { r.bool()? } else { false };
    r.expect_end()?;
    Ok(DescribeConfigsRequest {
        resources,
        include_synonyms,
        include_documentation,
    })
}

/// One described config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub read_only: bool,
    /// Not set: the default applies (v0's `is_default`; v1+ says it with `source`).
    pub is_default: bool,
    pub source: i8,
    pub is_sensitive: bool,
    /// (name, value, source), v1+.
    pub synonyms: Vec<(String, Option<String>, i8)>,
    /// v3+.
    pub config_type: i8,
    /// v3+.
    pub documentation: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeConfigsResult {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub resource_type: i8,
    pub resource_name: String,
    pub configs: Vec<ConfigEntry>,
}

pub fn encode_describe_configs(w: &mut Writer, version: i16, results: &[DescribeConfigsResult]) {
    w.i32(0); // throttle_time_ms
    w.array_len(results.len());
    for res in results {
        w.i16(res.error_code);
        w.nullable_string(res.error_message.as_deref());
        w.i8(res.resource_type);
        w.string(&res.resource_name);
        w.array_len(res.configs.len());
        for c in &res.configs {
            w.string(&c.name);
            w.nullable_string(c.value.as_deref());
            w.bool(c.read_only);
            if version == 0 {
                w.bool(c.is_default);
            } else {
                w.i8(c.source);
            }
            w.bool(c.is_sensitive);
            if version >= 1 {
                w.array_len(c.synonyms.len());
                for (name, value, source) in &c.synonyms {
                    w.string(name);
                    w.nullable_string(value.as_deref());
                    w.i8(*source);
                }
            }
            if version >= 3 {
                w.i8(c.config_type);
                w.nullable_string(c.documentation.as_deref());
            }
        }
    }
}

// ------------------------------------------------------------ AlterConfigs, IncrementalAlterConfigs

/// One key to change: AlterConfigs sends only `SET`s (the whole config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterableConfig {
    pub name: String,
    pub op: i8,
    pub value: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterConfigsResource {
    pub resource_type: i8,
    pub name: String,
    pub configs: Vec<AlterableConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterConfigsRequest {
    pub resources: Vec<AlterConfigsResource>,
    pub validate_only: bool,
}

/// AlterConfigs (`incremental` false) or IncrementalAlterConfigs (true),
/// whose configs also carry an operation.
pub fn decode_alter_configs(r: &mut Reader, incremental: bool) -> DecodeResult<AlterConfigsRequest> {
    let n = r.array_len(1 + 2 + 4)?;
    let mut resources = Vec::with_capacity(n);
    for _ in 0..n {
        let resource_type = r.i8()?;
        let name = r.string()?;
        let m = r.array_len(2 + 2 + usize::from(incremental))?;
        let mut configs = Vec::with_capacity(m);
        for _ in 0..m {
            let name = r.string()?;
            let op = if incremental { r.i8()? } else { op::SET };
            let value = r.nullable_string()?;
            configs.push(AlterableConfig { name, op, value });
        }
        resources.push(AlterConfigsResource {
            resource_type,
            name,
            configs,
        });
    }
    let validate_only = r.bool()?;
    r.expect_end()?;
    Ok(AlterConfigsRequest {
        resources,
        validate_only,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterConfigsResult {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub resource_type: i8,
    pub resource_name: String,
}

/// The same shape for AlterConfigs v0–1 and IncrementalAlterConfigs v0.
pub fn encode_alter_configs(w: &mut Writer, results: &[AlterConfigsResult]) {
    w.i32(0); // throttle_time_ms
    w.array_len(results.len());
    for res in results {
        w.i16(res.error_code);
        w.nullable_string(res.error_message.as_deref());
        w.i8(res.resource_type);
        w.string(&res.resource_name);
    }
}

// ------------------------------------------------------------ DescribeCluster

/// DescribeCluster endpoint types (v1+).
pub mod endpoint {
    pub const BROKERS: i8 = 1;
    pub const CONTROLLERS: i8 = 2;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescribeClusterRequest {
    /// Ignored: there is no authorizer.
    pub include_cluster_authorized_operations: bool,
    /// v1+; brokers before.
    pub endpoint_type: i8,
}

pub fn decode_describe_cluster(r: &mut Reader, version: i16) -> DecodeResult<DescribeClusterRequest> {
    let include_cluster_authorized_operations = r.bool()?;
    let endpoint_type = if version >= 1 { r.i8()? } else { endpoint::BROKERS };
    r.tagged_fields()?;
    r.expect_end()?;
    Ok(DescribeClusterRequest {
        include_cluster_authorized_operations,
        endpoint_type,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeClusterResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub endpoint_type: i8,
    pub cluster_id: String,
    pub controller: i32,
    pub brokers: Vec<Broker>,
}

/// The body of a DescribeCluster response.
pub fn encode_describe_cluster(w: &mut Writer, version: i16, resp: &DescribeClusterResponse) {
    w.i32(0); // throttle_time_ms
    w.i16(resp.error_code);
    w.compact_nullable_string(resp.error_message.as_deref());
    if version >= 1 {
        w.i8(resp.endpoint_type);
    }
    w.compact_string(&resp.cluster_id);
    w.i32(resp.controller);
    w.compact_array_len(resp.brokers.len());
    for b in &resp.brokers {
        w.i32(b.node_id);
        w.compact_string(&b.host);
        w.i32(b.port);
        w.compact_nullable_string(None); // rack
        w.no_tagged_fields();
    }
    w.i32(i32::MIN); // cluster_authorized_operations: no authorizer
    w.no_tagged_fields();
}
