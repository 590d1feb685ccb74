//! Requests and responses of the admin APIs: CreateTopics, DeleteTopics,
//! CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs
//! and DescribeCluster, at every version in the `SUPPORTED` table of
//! `versions.rs`, classic and flexible (compact strings and arrays, tagged
//! fields). Requests are decoded by hand with bounded readers ([`Fields`]
//! reads one field in whichever encoding the version uses); responses are
//! kafka-protocol's generated structs written at the request's version.

use super::proto::Broker;
use super::wire::{DecodeResult, Reader, Writer};
use crate::ids::TopicUuid;
use kafka_protocol::messages as km;
use kafka_protocol::protocol::StrBytes;

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

/// The first flexible version of each admin API.
pub fn flexible(key: i16, version: i16) -> bool {
    let from = match key {
        CREATE_TOPICS => 5,
        DELETE_TOPICS | DESCRIBE_CONFIGS => 4,
        ALTER_CONFIGS | CREATE_PARTITIONS => 2,
        INCREMENTAL_ALTER_CONFIGS => 1,
        _ => 0,
    };
    version >= from
}

use super::proto::Fields;

fn fields(r: &mut Reader, key: i16, version: i16) -> Fields<'_> {
    Fields {
        r,
        flexible: flexible(key, version),
    }
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn sb_opt(s: Option<&str>) -> Option<StrBytes> {
    s.map(sb)
}

fn uuid(id: TopicUuid) -> uuid::Uuid {
    uuid::Uuid::from_bytes(id.0)
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
    pub const DOUBLE: i8 = 6;
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

fn named_values(f: &mut Fields) -> DecodeResult<Vec<NamedValue>> {
    let n = f.array_of(2 + 2, 1 + 1 + 1)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let name = f.string()?;
        let value = f.nullable_string()?;
        f.tags()?;
        out.push((name, value));
    }
    Ok(out)
}

fn broker_ids(f: &mut Fields) -> DecodeResult<Vec<i32>> {
    let n = f.array_of(4, 4)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(f.r.i32()?);
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

/// Every version (v5+ flexible; v6 and v7 change only the response).
pub fn decode_create_topics(r: &mut Reader, version: i16) -> DecodeResult<CreateTopicsRequest> {
    let mut f = fields(r, CREATE_TOPICS, version);
    let n = f.array_of(2 + 4 + 2 + 4 + 4, 1 + 4 + 2 + 1 + 1 + 1)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = f.string()?;
        let num_partitions = f.r.i32()?;
        let replication_factor = f.r.i16()?;
        let m = f.array_of(4 + 4, 4 + 1 + 1)?;
        let mut assignments = Vec::with_capacity(m);
        for _ in 0..m {
            let partition = f.r.i32()?;
            let brokers = broker_ids(&mut f)?;
            f.tags()?;
            assignments.push((partition, brokers));
        }
        let configs = named_values(&mut f)?;
        f.tags()?;
        topics.push(CreatableTopic {
            name,
            num_partitions,
            replication_factor,
            assignments,
            configs,
        });
    }
    let timeout_ms = f.r.i32()?;
    let validate_only = if version >= 1 { f.r.bool()? } else { false };
    f.tags()?;
    f.r.expect_end()?;
    Ok(CreateTopicsRequest {
        topics,
        timeout_ms,
        validate_only,
    })
}

/// One topic's answer to CreateTopics, DeleteTopics or CreatePartitions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicResult {
    /// `None` only for DeleteTopics v6 naming an unknown topic id.
    pub name: Option<String>,
    pub error_code: i16,
    pub error_message: Option<String>,
    /// DeleteTopics v6, CreateTopics v7 (zero when unknown).
    pub topic_id: TopicUuid,
    /// CreateTopics v5+: what a created (or validated) topic got.
    pub created: Option<Created>,
}

/// CreateTopics v5+ tells what the topic was created with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<ConfigEntry>,
}

pub fn encode_create_topics(w: &mut Writer, version: i16, topics: &[TopicResult]) -> DecodeResult<()> {
    let topics = topics
        .iter()
        .map(|t| {
            let mut r = km::create_topics_response::CreatableTopicResult::default()
                .with_name(sb(t.name.as_deref().unwrap_or_default()).into())
                .with_error_code(t.error_code)
                .with_error_message(if version >= 1 {
                    sb_opt(t.error_message.as_deref())
                } else {
                    None
                });
            if version >= 7 {
                r = r.with_topic_id(uuid(t.topic_id));
            }
            if version >= 5 {
                r = match &t.created {
                    Some(c) => r
                        .with_num_partitions(c.num_partitions)
                        .with_replication_factor(c.replication_factor)
                        .with_configs(Some(
                            c.configs
                                .iter()
                                .map(|e| {
                                    km::create_topics_response::CreatableTopicConfigs::default()
                                        .with_name(sb(&e.name))
                                        .with_value(sb_opt(e.value.as_deref()))
                                        .with_read_only(e.read_only)
                                        .with_config_source(e.source)
                                        .with_is_sensitive(e.is_sensitive)
                                })
                                .collect(),
                        )),
                    None => r.with_num_partitions(-1).with_replication_factor(-1).with_configs(None),
                };
            }
            r
        })
        .collect();
    w.message(&km::CreateTopicsResponse::default().with_topics(topics), version)
}

// ------------------------------------------------------------ DeleteTopics

/// A topic to delete: by name, or (v6) by topic id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicRef {
    Name(String),
    Id(TopicUuid),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteTopicsRequest {
    pub topics: Vec<TopicRef>,
    pub timeout_ms: i32,
}

/// v0–5 name topics; v6 sends (nullable name, topic id) pairs: a name
/// names the topic, else the id does.
pub fn decode_delete_topics(r: &mut Reader, version: i16) -> DecodeResult<DeleteTopicsRequest> {
    let mut f = fields(r, DELETE_TOPICS, version);
    let mut topics;
    if version >= 6 {
        let n = f.array_of(2 + 16, 1 + 16 + 1)?;
        topics = Vec::with_capacity(n);
        for _ in 0..n {
            let name = f.nullable_string()?;
            let id = f.uuid()?;
            f.tags()?;
            topics.push(match name {
                Some(name) => TopicRef::Name(name),
                None => TopicRef::Id(id),
            });
        }
    } else {
        let n = f.array_of(2, 1)?;
        topics = Vec::with_capacity(n);
        for _ in 0..n {
            topics.push(TopicRef::Name(f.string()?));
        }
    }
    let timeout_ms = f.r.i32()?;
    f.tags()?;
    f.r.expect_end()?;
    Ok(DeleteTopicsRequest { topics, timeout_ms })
}

/// Messages from v5, topic ids from v6.
pub fn encode_delete_topics(w: &mut Writer, version: i16, topics: &[TopicResult]) -> DecodeResult<()> {
    let responses = topics
        .iter()
        .map(|t| {
            let mut r = km::delete_topics_response::DeletableTopicResult::default()
                .with_name(t.name.as_deref().map(|n| sb(n).into()))
                .with_error_code(t.error_code);
            if version >= 5 {
                r = r.with_error_message(sb_opt(t.error_message.as_deref()));
            }
            if version >= 6 {
                r = r.with_topic_id(uuid(t.topic_id));
            }
            r
        })
        .collect();
    w.message(&km::DeleteTopicsResponse::default().with_responses(responses), version)
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

pub fn decode_create_partitions(r: &mut Reader, version: i16) -> DecodeResult<CreatePartitionsRequest> {
    let mut f = fields(r, CREATE_PARTITIONS, version);
    let n = f.array_of(2 + 4 + 4, 1 + 4 + 1 + 1)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = f.string()?;
        let count = f.r.i32()?;
        let assignments = match f.nullable_array_of(4, 1 + 1)? {
            None => None,
            Some(m) => {
                let mut a = Vec::with_capacity(m);
                for _ in 0..m {
                    a.push(broker_ids(&mut f)?);
                    f.tags()?;
                }
                Some(a)
            }
        };
        f.tags()?;
        topics.push(CreatePartitionsTopic {
            name,
            count,
            assignments,
        });
    }
    let timeout_ms = f.r.i32()?;
    let validate_only = f.r.bool()?;
    f.tags()?;
    f.r.expect_end()?;
    Ok(CreatePartitionsRequest {
        topics,
        timeout_ms,
        validate_only,
    })
}

pub fn encode_create_partitions(w: &mut Writer, version: i16, topics: &[TopicResult]) -> DecodeResult<()> {
    let results = topics
        .iter()
        .map(|t| {
            km::create_partitions_response::CreatePartitionsTopicResult::default()
                .with_name(sb(t.name.as_deref().unwrap_or_default()).into())
                .with_error_code(t.error_code)
                .with_error_message(sb_opt(t.error_message.as_deref()))
        })
        .collect();
    w.message(&km::CreatePartitionsResponse::default().with_results(results), version)
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
    let mut f = fields(r, DESCRIBE_CONFIGS, version);
    let n = f.array_of(1 + 2 + 4, 1 + 1 + 1 + 1)?;
    let mut resources = Vec::with_capacity(n);
    for _ in 0..n {
        let resource_type = f.r.i8()?;
        let name = f.string()?;
        let keys = match f.nullable_array_of(2, 1)? {
            None => None,
            Some(m) => {
                let mut k = Vec::with_capacity(m);
                for _ in 0..m {
                    k.push(f.string()?);
                }
                Some(k)
            }
        };
        f.tags()?;
        resources.push(DescribeConfigsResource {
            resource_type,
            name,
            keys,
        });
    }
    let include_synonyms = if version >= 1 { f.r.bool()? } else { false };
    let include_documentation = if version >= 3 { f.r.bool()? } else { false };
    f.tags()?;
    f.r.expect_end()?;
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
    pub source: i8,
    pub is_sensitive: bool,
    /// (name, value, source).
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

pub fn encode_describe_configs(w: &mut Writer, version: i16, results: &[DescribeConfigsResult]) -> DecodeResult<()> {
    use km::describe_configs_response as d;
    let results = results
        .iter()
        .map(|res| {
            d::DescribeConfigsResult::default()
                .with_error_code(res.error_code)
                .with_error_message(sb_opt(res.error_message.as_deref()))
                .with_resource_type(res.resource_type)
                .with_resource_name(sb(&res.resource_name))
                .with_configs(
                    res.configs
                        .iter()
                        .map(|c| {
                            let mut e = d::DescribeConfigsResourceResult::default()
                                .with_name(sb(&c.name))
                                .with_value(sb_opt(c.value.as_deref()))
                                .with_read_only(c.read_only)
                                .with_is_sensitive(c.is_sensitive);
                            {
                                e = e.with_config_source(c.source).with_synonyms(
                                    c.synonyms
                                        .iter()
                                        .map(|(n, v, s)| {
                                            d::DescribeConfigsSynonym::default()
                                                .with_name(sb(n))
                                                .with_value(sb_opt(v.as_deref()))
                                                .with_source(*s)
                                        })
                                        .collect(),
                                );
                            }
                            if version >= 3 {
                                e = e
                                    .with_config_type(c.config_type)
                                    .with_documentation(sb_opt(c.documentation.as_deref()));
                            }
                            e
                        })
                        .collect(),
                )
        })
        .collect();
    w.message(&km::DescribeConfigsResponse::default().with_results(results), version)
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
pub fn decode_alter_configs(r: &mut Reader, version: i16, incremental: bool) -> DecodeResult<AlterConfigsRequest> {
    let key = if incremental {
        INCREMENTAL_ALTER_CONFIGS
    } else {
        ALTER_CONFIGS
    };
    let mut f = fields(r, key, version);
    let n = f.array_of(1 + 2 + 4, 1 + 1 + 1 + 1)?;
    let mut resources = Vec::with_capacity(n);
    for _ in 0..n {
        let resource_type = f.r.i8()?;
        let name = f.string()?;
        let op_len = usize::from(incremental);
        let m = f.array_of(2 + 2 + op_len, 1 + 1 + 1 + op_len)?;
        let mut configs = Vec::with_capacity(m);
        for _ in 0..m {
            let name = f.string()?;
            let op = if incremental { f.r.i8()? } else { op::SET };
            let value = f.nullable_string()?;
            f.tags()?;
            configs.push(AlterableConfig { name, op, value });
        }
        f.tags()?;
        resources.push(AlterConfigsResource {
            resource_type,
            name,
            configs,
        });
    }
    let validate_only = f.r.bool()?;
    f.tags()?;
    f.r.expect_end()?;
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

/// AlterConfigs and IncrementalAlterConfigs answer alike.
pub fn encode_alter_configs(
    w: &mut Writer,
    version: i16,
    incremental: bool,
    results: &[AlterConfigsResult],
) -> DecodeResult<()> {
    if incremental {
        use km::incremental_alter_configs_response as i;
        let responses = results
            .iter()
            .map(|r| {
                i::AlterConfigsResourceResponse::default()
                    .with_error_code(r.error_code)
                    .with_error_message(sb_opt(r.error_message.as_deref()))
                    .with_resource_type(r.resource_type)
                    .with_resource_name(sb(&r.resource_name))
            })
            .collect();
        w.message(
            &km::IncrementalAlterConfigsResponse::default().with_responses(responses),
            version,
        )
    } else {
        use km::alter_configs_response as a;
        let responses = results
            .iter()
            .map(|r| {
                a::AlterConfigsResourceResponse::default()
                    .with_error_code(r.error_code)
                    .with_error_message(sb_opt(r.error_message.as_deref()))
                    .with_resource_type(r.resource_type)
                    .with_resource_name(sb(&r.resource_name))
            })
            .collect();
        w.message(&km::AlterConfigsResponse::default().with_responses(responses), version)
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
    /// v2+: list fenced nodes too (with `is_fenced`).
    pub include_fenced_brokers: bool,
}

/// Flexible at every version.
pub fn decode_describe_cluster(r: &mut Reader, version: i16) -> DecodeResult<DescribeClusterRequest> {
    let include_cluster_authorized_operations = r.bool()?;
    let endpoint_type = if version >= 1 { r.i8()? } else { endpoint::BROKERS };
    let include_fenced_brokers = if version >= 2 { r.bool()? } else { false };
    r.tagged_fields()?;
    r.expect_end()?;
    Ok(DescribeClusterRequest {
        include_cluster_authorized_operations,
        endpoint_type,
        include_fenced_brokers,
    })
}

/// A broker of a DescribeCluster answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterBroker {
    pub broker: Broker,
    /// v2+.
    pub fenced: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeClusterResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub endpoint_type: i8,
    pub cluster_id: String,
    pub controller: i32,
    pub brokers: Vec<ClusterBroker>,
}

/// The body of a DescribeCluster response.
pub fn encode_describe_cluster(w: &mut Writer, version: i16, resp: &DescribeClusterResponse) -> DecodeResult<()> {
    let brokers = resp
        .brokers
        .iter()
        .map(|b| {
            let mut d = km::describe_cluster_response::DescribeClusterBroker::default()
                .with_broker_id(b.broker.node_id.into())
                .with_host(sb(&b.broker.host))
                .with_port(b.broker.port);
            if version >= 2 {
                d = d.with_is_fenced(b.fenced);
            }
            d
        })
        .collect();
    let mut m = km::DescribeClusterResponse::default()
        .with_error_code(resp.error_code)
        .with_error_message(sb_opt(resp.error_message.as_deref()))
        .with_cluster_id(sb(&resp.cluster_id))
        .with_controller_id(resp.controller.into())
        .with_brokers(brokers)
        .with_cluster_authorized_operations(i32::MIN); // no authorizer
    if version >= 1 {
        m = m.with_endpoint_type(resp.endpoint_type);
    }
    w.message(&m, version)
}
