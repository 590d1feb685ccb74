//! Handlers of the admin APIs over the [`Topics`](crate::api::Topics)
//! capability: topics are created, deleted and grown, and their configs
//! described and altered, by proposing to the metadata log from whichever
//! node the client asked (like the HTTP API); DescribeCluster answers from
//! the view like Metadata.
//!
//! Topic configs are exactly `retention.ms`, `retention.bytes`,
//! `cleanup.policy` (`delete`, `compact`, `compact,delete`) and Kafka's
//! compaction settings (`min.compaction.lag.ms`, `max.compaction.lag.ms`,
//! `min.cleanable.dirty.ratio`, `delete.retention.ms`); any other key is
//! `INVALID_CONFIG`, so a client learns at once that a setting it relies
//! on does not exist here. There are no replicas: a replication
//! factor of -1 or anything ≥ 1 is accepted and means nothing, and manual
//! replica assignments are refused (placement is automatic).

use super::admin_proto::*;
use super::proto::Broker;
use super::wire::{DecodeResult, Reader, Writer};
use super::{broker_id, code, error_code, split_addr};
use crate::api::{ApiError, ErrorCode, Services};
use crate::meta::view::{validate_topic_name, MAX_PARTITIONS};
use crate::meta::{CleanupPolicy, ConfigUpdate, Ratio, TopicConfig};
use std::collections::HashMap;

/// Kafka error codes of the admin APIs.
pub mod acode {
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const INVALID_PARTITIONS: i16 = 37;
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
    pub const INVALID_CONFIG: i16 = 40;
    pub const MISMATCHED_ENDPOINT_TYPE: i16 = 114;
    pub const UNSUPPORTED_ENDPOINT_TYPE: i16 = 115;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
}

/// Partitions of a topic created with `num_partitions` -1 (as when
/// Metadata auto-creates one).
pub const DEFAULT_PARTITIONS: u32 = 1;

/// The Kafka cluster id every node reports (Metadata, DescribeCluster).
pub const CLUSTER_ID: &str = "sluice";

type Failure = (i16, String);

/// The admin error code of an engine error.
fn admin_error(e: &ApiError) -> i16 {
    match e.code {
        ErrorCode::TopicExists => acode::TOPIC_ALREADY_EXISTS,
        ErrorCode::InvalidPartitionCount => acode::INVALID_PARTITIONS,
        _ => error_code(e),
    }
}

fn failure(e: ApiError) -> Failure {
    (admin_error(&e), e.message)
}

fn topic_result(name: String, outcome: Result<(), Failure>) -> TopicResult {
    match outcome {
        Ok(()) => TopicResult {
            name: Some(name),
            ..TopicResult::default()
        },
        Err((error_code, message)) => TopicResult {
            name: Some(name),
            error_code,
            error_message: Some(message),
            ..TopicResult::default()
        },
    }
}

/// How many times each key occurs: Kafka refuses a request naming the
/// same topic or resource twice (`INVALID_REQUEST` for each).
fn counts<K: std::hash::Hash + Eq>(keys: impl Iterator<Item = K>) -> HashMap<K, usize> {
    let mut m = HashMap::new();
    for k in keys {
        *m.entry(k).or_insert(0) += 1;
    }
    m
}

fn duplicate(what: &str) -> Failure {
    (
        code::INVALID_REQUEST,
        format!("{what} is named more than once in the request"),
    )
}

pub(super) async fn request(
    engine: &Services,
    key: i16,
    version: i16,
    r: &mut Reader,
    w: &mut Writer,
) -> DecodeResult<()> {
    match key {
        CREATE_TOPICS => {
            let req = decode_create_topics(r, version)?;
            let results = create_topics(engine, req).await;
            encode_create_topics(w, version, &results)?;
        }
        DELETE_TOPICS => {
            let req = decode_delete_topics(r, version)?;
            let results = delete_topics(engine, req).await;
            encode_delete_topics(w, version, &results)?;
        }
        CREATE_PARTITIONS => {
            let req = decode_create_partitions(r, version)?;
            let results = create_partitions(engine, req).await;
            encode_create_partitions(w, version, &results)?;
        }
        DESCRIBE_CONFIGS => {
            let req = decode_describe_configs(r, version)?;
            // Configs altered through another node are read back here.
            let _ = engine.cluster.sync_metadata().await;
            encode_describe_configs(w, version, &describe_configs(engine, &req))?;
        }
        ALTER_CONFIGS | INCREMENTAL_ALTER_CONFIGS => {
            let incremental = key == INCREMENTAL_ALTER_CONFIGS;
            let req = decode_alter_configs(r, version, incremental)?;
            let results = alter_configs(engine, req, incremental).await;
            encode_alter_configs(w, version, incremental, &results)?;
        }
        DESCRIBE_CLUSTER => {
            let req = decode_describe_cluster(r, version)?;
            encode_describe_cluster(w, version, &describe_cluster(engine, req))?;
        }
        _ => unreachable!("is_admin_api() admits only the keys above"),
    }
    Ok(())
}

// ------------------------------------------------------------ topic configs

const RETENTION_MS: &str = "retention.ms";
const RETENTION_BYTES: &str = "retention.bytes";
const CLEANUP_POLICY: &str = "cleanup.policy";
const MIN_COMPACTION_LAG_MS: &str = "min.compaction.lag.ms";
const MAX_COMPACTION_LAG_MS: &str = "max.compaction.lag.ms";
const MIN_CLEANABLE_DIRTY_RATIO: &str = "min.cleanable.dirty.ratio";
const DELETE_RETENTION_MS: &str = "delete.retention.ms";

/// Every topic config, in the order DescribeConfigs lists them (Kafka's:
/// by name).
const TOPIC_CONFIGS: [&str; 7] = [
    CLEANUP_POLICY,
    DELETE_RETENTION_MS,
    MAX_COMPACTION_LAG_MS,
    MIN_CLEANABLE_DIRTY_RATIO,
    MIN_COMPACTION_LAG_MS,
    RETENTION_BYTES,
    RETENTION_MS,
];

/// The update that sets Kafka config `name` to `value` (`None`: back to
/// the default), or why it cannot be.
pub fn parse_update(name: &str, value: Option<&str>) -> Result<ConfigUpdate, String> {
    let long = |value: Option<&str>| -> Result<Option<i64>, String> {
        value
            .map(|v| {
                v.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("{name} must be an integer, got {v:?}"))
            })
            .transpose()
    };
    let update = match name {
        RETENTION_MS => ConfigUpdate::RetentionMs(long(value)?),
        RETENTION_BYTES => ConfigUpdate::RetentionBytes(long(value)?),
        CLEANUP_POLICY => ConfigUpdate::CleanupPolicy(match value {
            None => None,
            Some(v) => Some(CleanupPolicy::parse(v).ok_or_else(|| {
                format!("{CLEANUP_POLICY} must be \"delete\", \"compact\" or \"compact,delete\", got {v:?}")
            })?),
        }),
        MIN_COMPACTION_LAG_MS => ConfigUpdate::MinCompactionLagMs(long(value)?),
        MAX_COMPACTION_LAG_MS => ConfigUpdate::MaxCompactionLagMs(long(value)?),
        DELETE_RETENTION_MS => ConfigUpdate::DeleteRetentionMs(long(value)?),
        MIN_CLEANABLE_DIRTY_RATIO => ConfigUpdate::MinCleanableDirtyRatio(match value {
            None => None,
            Some(v) => Some(
                (v.trim().parse::<f64>().ok())
                    .and_then(Ratio::new)
                    .ok_or_else(|| format!("{name} must be a number between 0 and 1, got {v:?}"))?,
            ),
        }),
        other => {
            return Err(format!(
                "unknown or unsupported topic config {other:?} (supported: {})",
                TOPIC_CONFIGS.join(", ")
            ))
        }
    };
    update.validate().map_err(|why| {
        // Named as the client named it, not as the stored field.
        let field = name.replace('.', "_");
        why.replace(&field, name)
    })?;
    Ok(update)
}

/// A topic config's value as Kafka shows it: (value, explicitly set).
fn config_value(config: &TopicConfig, name: &str) -> (String, bool) {
    let long = |v: Option<i64>, default: i64| v.map_or((default.to_string(), false), |v| (v.to_string(), true));
    match name {
        RETENTION_MS => long(config.retention_ms, -1),
        RETENTION_BYTES => long(config.retention_bytes, -1),
        MIN_COMPACTION_LAG_MS => long(config.min_compaction_lag_ms, 0),
        MAX_COMPACTION_LAG_MS => long(config.max_compaction_lag_ms, i64::MAX),
        DELETE_RETENTION_MS => long(config.delete_retention_ms, TopicConfig::DEFAULT_DELETE_RETENTION_MS),
        MIN_CLEANABLE_DIRTY_RATIO => (
            config.min_cleanable_dirty_ratio().to_string(),
            config.min_cleanable_dirty_ratio.is_some(),
        ),
        _ => config
            .cleanup_policy
            .map_or(("delete".into(), false), |p| (p.as_str().into(), true)),
    }
}

fn config_doc(name: &str) -> &'static str {
    match name {
        RETENTION_MS => "How long records are kept, in milliseconds; -1 (the default) keeps them forever. Applies under \"delete\" and \"compact,delete\".",
        RETENTION_BYTES => "How many bytes a partition keeps; -1 (the default) means no limit. Applies under \"delete\" and \"compact,delete\".",
        MIN_COMPACTION_LAG_MS => "The least time a record stays uncompacted after it was written.",
        MAX_COMPACTION_LAG_MS => "The most time a record may stay uncompacted, whatever the dirty ratio.",
        MIN_CLEANABLE_DIRTY_RATIO => "The share of superseded bytes in the compactable part of a partition at which compaction starts.",
        DELETE_RETENTION_MS => "How long a tombstone (a keyed record with no value) is kept once it can be compacted.",
        _ => "\"delete\" (old records go by retention), \"compact\" (the latest record of each key is kept) or \"compact,delete\" (both). Records of a compacted topic must have keys.",
    }
}

fn config_type_of(name: &str) -> i8 {
    match name {
        CLEANUP_POLICY => config_type::LIST,
        MIN_CLEANABLE_DIRTY_RATIO => config_type::DOUBLE,
        _ => config_type::LONG,
    }
}

fn describe_entry(config: &TopicConfig, name: &str, synonyms: bool, docs: bool) -> ConfigEntry {
    let (value, set) = config_value(config, name);
    let default = config_value(&TopicConfig::default(), name).0;
    let source = if set {
        source::DYNAMIC_TOPIC_CONFIG
    } else {
        source::DEFAULT_CONFIG
    };
    let mut syn = Vec::new();
    if synonyms {
        if set {
            syn.push((name.to_string(), Some(value.clone()), source::DYNAMIC_TOPIC_CONFIG));
        }
        syn.push((name.to_string(), Some(default), source::DEFAULT_CONFIG));
    }
    ConfigEntry {
        name: name.to_string(),
        value: Some(value),
        read_only: false,
        source,
        is_sensitive: false,
        synonyms: syn,
        config_type: config_type_of(name),
        documentation: docs.then(|| config_doc(name).to_string()),
    }
}

// ------------------------------------------------------------ CreateTopics

async fn create_topics(engine: &Services, req: CreateTopicsRequest) -> Vec<TopicResult> {
    let named = counts(req.topics.iter().map(|t| t.name.clone()));
    let mut out = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let outcome = if named[&t.name] > 1 {
            Err(duplicate(&format!("topic {:?}", t.name)))
        } else {
            create_topic(engine, &t, req.validate_only).await
        };
        out.push(match outcome {
            Ok(made) => TopicResult {
                name: Some(t.name),
                topic_id: made.topic_id,
                created: Some(Created {
                    num_partitions: made.partitions as i32,
                    // Streams have no replicas: one copy, in the object store.
                    replication_factor: 1,
                    configs: TOPIC_CONFIGS
                        .iter()
                        .map(|k| describe_entry(&made.config, k, false, false))
                        .collect(),
                }),
                ..TopicResult::default()
            },
            Err(e) => topic_result(t.name, Err(e)),
        });
    }
    out
}

/// What CreateTopics v5+ reports of a created (or validated) topic.
struct Made {
    partitions: u32,
    config: TopicConfig,
    /// Zero for `validate_only`: nothing was created.
    topic_id: crate::ids::TopicUuid,
}

/// A topic's partition count and config as asked, or why not.
pub fn validate_creatable(t: &CreatableTopic) -> Result<(u32, TopicConfig), Failure> {
    validate_topic_name(&t.name).map_err(|m| (code::INVALID_TOPIC_EXCEPTION, m))?;
    if !t.assignments.is_empty() {
        return Err((
            acode::INVALID_REPLICA_ASSIGNMENT,
            "manual replica assignment is not supported: partitions are placed automatically".into(),
        ));
    }
    let partitions = match t.num_partitions {
        -1 => DEFAULT_PARTITIONS,
        n if n >= 1 && n as u32 <= MAX_PARTITIONS => n as u32,
        n => {
            return Err((
                acode::INVALID_PARTITIONS,
                format!("num_partitions must be 1-{MAX_PARTITIONS} or -1 (default {DEFAULT_PARTITIONS}), got {n}"),
            ))
        }
    };
    // No replicas exist: any factor a client may ask for is accepted.
    if t.replication_factor != -1 && t.replication_factor < 1 {
        return Err((
            acode::INVALID_REPLICATION_FACTOR,
            format!(
                "replication_factor must be -1 or at least 1, got {}",
                t.replication_factor
            ),
        ));
    }
    let mut config = TopicConfig::default();
    for (name, value) in &t.configs {
        let update = parse_update(name, value.as_deref()).map_err(|m| (acode::INVALID_CONFIG, m))?;
        config.apply(&update);
    }
    config.validate().map_err(|m| (acode::INVALID_CONFIG, m))?;
    Ok((partitions, config))
}

async fn create_topic(engine: &Services, t: &CreatableTopic, validate_only: bool) -> Result<Made, Failure> {
    let (partitions, config) = validate_creatable(t)?;
    let mut made = Made {
        partitions,
        config: config.clone(),
        topic_id: crate::ids::TopicUuid::ZERO,
    };
    if validate_only {
        return match engine.topics.describe_topic(&t.name) {
            Ok(_) => Err((
                acode::TOPIC_ALREADY_EXISTS,
                format!("topic {:?} already exists", t.name),
            )),
            Err(_) => Ok(made),
        };
    }
    let summary = engine
        .topics
        .create_topic(&t.name, partitions, config)
        .await
        .map_err(failure)?;
    made.topic_id = summary.topic_id;
    Ok(made)
}

// ------------------------------------------------------------ DeleteTopics

/// Topics named by id (DeleteTopics v6) are looked up in the view first;
/// an id no topic has is `UNKNOWN_TOPIC_ID`.
async fn delete_topics(engine: &Services, req: DeleteTopicsRequest) -> Vec<TopicResult> {
    let by_id = |id: &crate::ids::TopicUuid| engine.topics.list_topics().into_iter().find(|t| t.topic_id == *id);
    let resolved: Vec<(Option<String>, crate::ids::TopicUuid)> = req
        .topics
        .iter()
        .map(|t| match t {
            TopicRef::Name(name) => {
                let id = engine
                    .topics
                    .describe_topic(name)
                    .map_or(crate::ids::TopicUuid::ZERO, |d| d.topic_id);
                (Some(name.clone()), id)
            }
            TopicRef::Id(id) => (by_id(id).map(|t| t.name), *id),
        })
        .collect();
    let named = counts(resolved.iter().filter_map(|(n, _)| n.clone()));
    let mut out = Vec::with_capacity(resolved.len());
    for (name, topic_id) in resolved {
        let Some(name) = name else {
            out.push(TopicResult {
                name: None,
                error_code: acode::UNKNOWN_TOPIC_ID,
                error_message: Some(format!("no topic has id {}", uuid::Uuid::from_bytes(topic_id.0))),
                topic_id,
                created: None,
            });
            continue;
        };
        let outcome = if named[&name] > 1 {
            Err(duplicate(&format!("topic {name:?}")))
        } else {
            engine.topics.delete_topic(&name).await.map_err(failure)
        };
        out.push(TopicResult {
            topic_id,
            ..topic_result(name, outcome)
        });
    }
    out
}

// ------------------------------------------------------------ CreatePartitions

async fn create_partitions(engine: &Services, req: CreatePartitionsRequest) -> Vec<TopicResult> {
    let named = counts(req.topics.iter().map(|t| t.name.clone()));
    let mut out = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let outcome = if named[&t.name] > 1 {
            Err(duplicate(&format!("topic {:?}", t.name)))
        } else {
            grow(engine, &t, req.validate_only).await
        };
        out.push(topic_result(t.name, outcome));
    }
    out
}

async fn grow(engine: &Services, t: &CreatePartitionsTopic, validate_only: bool) -> Result<(), Failure> {
    if t.assignments.as_ref().is_some_and(|a| !a.is_empty()) {
        return Err((
            acode::INVALID_REPLICA_ASSIGNMENT,
            "manual replica assignment is not supported: partitions are placed automatically".into(),
        ));
    }
    let current = engine.topics.partitions(&t.name).map_err(failure)?;
    let count = u32::try_from(t.count).unwrap_or(0);
    if count <= current || count > MAX_PARTITIONS {
        let why = if count == current {
            format!("topic {:?} already has {current} partitions", t.name)
        } else {
            format!(
                "topic {:?} has {current} partitions; the count can only grow, up to {MAX_PARTITIONS}, not become {}",
                t.name, t.count
            )
        };
        return Err((acode::INVALID_PARTITIONS, why));
    }
    if validate_only {
        return Ok(());
    }
    engine.topics.add_partitions(&t.name, count).await.map_err(failure)
}

// ------------------------------------------------------------ DescribeConfigs

fn describe_configs(engine: &Services, req: &DescribeConfigsRequest) -> Vec<DescribeConfigsResult> {
    req.resources
        .iter()
        .map(|res| {
            let answer = |configs: Result<Vec<ConfigEntry>, Failure>| {
                let (error_code, error_message, configs) = match configs {
                    Ok(c) => (code::NONE, None, c),
                    Err((e, m)) => (e, Some(m), Vec::new()),
                };
                DescribeConfigsResult {
                    error_code,
                    error_message,
                    resource_type: res.resource_type,
                    resource_name: res.name.clone(),
                    configs,
                }
            };
            match res.resource_type {
                resource::TOPIC => answer(engine.topics.describe_topic(&res.name).map_err(failure).map(|d| {
                    TOPIC_CONFIGS
                        .iter()
                        .filter(|k| res.keys.as_ref().is_none_or(|keys| keys.iter().any(|x| x == *k)))
                        .map(|k| describe_entry(&d.config, k, req.include_synonyms, req.include_documentation))
                        .collect()
                })),
                // Brokers are configured by flags at start, not over Kafka.
                resource::BROKER => answer(Ok(Vec::new())),
                other => answer(Err(unsupported_resource(other))),
            }
        })
        .collect()
}

fn unsupported_resource(resource_type: i8) -> Failure {
    (
        code::INVALID_REQUEST,
        format!("config resource type {resource_type} is not supported (only topics, and brokers with no configs)"),
    )
}

// ------------------------------------------------------------ AlterConfigs

async fn alter_configs(engine: &Services, req: AlterConfigsRequest, incremental: bool) -> Vec<AlterConfigsResult> {
    let named = counts(req.resources.iter().map(|r| (r.resource_type, r.name.clone())));
    let mut out = Vec::with_capacity(req.resources.len());
    for res in req.resources {
        let outcome = if named[&(res.resource_type, res.name.clone())] > 1 {
            Err(duplicate(&format!("resource {:?}", res.name)))
        } else {
            alter_resource(engine, &res, incremental, req.validate_only).await
        };
        let (error_code, error_message) = match outcome {
            Ok(()) => (code::NONE, None),
            Err((e, m)) => (e, Some(m)),
        };
        out.push(AlterConfigsResult {
            error_code,
            error_message,
            resource_type: res.resource_type,
            resource_name: res.name,
        });
    }
    out
}

/// The updates a resource's configs ask for. AlterConfigs replaces the whole
/// config: every key it does not name goes back to its default.
pub fn topic_updates(configs: &[AlterableConfig], incremental: bool) -> Result<Vec<ConfigUpdate>, Failure> {
    let named = counts(configs.iter().map(|c| c.name.as_str()));
    if let Some((name, _)) = named.iter().find(|(_, n)| **n > 1) {
        return Err(duplicate(&format!("config {name:?}")));
    }
    let mut updates = Vec::with_capacity(TOPIC_CONFIGS.len());
    for c in configs {
        let value = match c.op {
            op::SET => match &c.value {
                Some(v) => Some(v.as_str()),
                None if incremental => {
                    return Err((acode::INVALID_CONFIG, format!("SET {:?} needs a value", c.name)));
                }
                None => None,
            },
            op::DELETE => None,
            op::APPEND | op::SUBTRACT => {
                return Err((
                    acode::INVALID_CONFIG,
                    format!(
                        "{:?}: only SET and DELETE are supported, not APPEND or SUBTRACT",
                        c.name
                    ),
                ))
            }
            other => {
                return Err((
                    code::INVALID_REQUEST,
                    format!("{:?}: unknown config operation {other}", c.name),
                ))
            }
        };
        updates.push(parse_update(&c.name, value).map_err(|m| (acode::INVALID_CONFIG, m))?);
    }
    if !incremental {
        for name in TOPIC_CONFIGS {
            if !named.contains_key(name) {
                updates.push(parse_update(name, None).expect("resetting a known key"));
            }
        }
    }
    Ok(updates)
}

async fn alter_resource(
    engine: &Services,
    res: &AlterConfigsResource,
    incremental: bool,
    validate_only: bool,
) -> Result<(), Failure> {
    match res.resource_type {
        resource::TOPIC => {
            let updates = topic_updates(&res.configs, incremental)?;
            let mut config = engine.topics.describe_topic(&res.name).map_err(failure)?.config;
            for u in &updates {
                config.apply(u);
            }
            config.validate().map_err(|m| (acode::INVALID_CONFIG, m))?;
            if validate_only {
                return Ok(());
            }
            engine
                .topics
                .alter_topic_config(&res.name, updates)
                .await
                .map(|_| ())
                .map_err(|e| match e.code {
                    ErrorCode::InvalidRequest => (acode::INVALID_CONFIG, e.message),
                    _ => failure(e),
                })
        }
        resource::BROKER if res.configs.is_empty() => Ok(()),
        resource::BROKER => Err((
            acode::INVALID_CONFIG,
            "broker configs cannot be altered over Kafka: nodes are configured by flags at start".into(),
        )),
        other => Err(unsupported_resource(other)),
    }
}

// ------------------------------------------------------------ DescribeCluster

/// Every node serves brokers' requests; there is no separate controller
/// endpoint to describe.
fn describe_cluster(engine: &Services, req: DescribeClusterRequest) -> DescribeClusterResponse {
    let (brokers, controller) = cluster(engine, req.include_fenced_brokers);
    let error = match req.endpoint_type {
        endpoint::BROKERS => None,
        endpoint::CONTROLLERS => Some((
            acode::MISMATCHED_ENDPOINT_TYPE,
            "there are no controller endpoints: every node is a broker".to_string(),
        )),
        other => Some((acode::UNSUPPORTED_ENDPOINT_TYPE, format!("endpoint type {other}"))),
    };
    match error {
        None => DescribeClusterResponse {
            error_code: code::NONE,
            error_message: None,
            endpoint_type: req.endpoint_type,
            cluster_id: CLUSTER_ID.to_string(),
            controller,
            brokers,
        },
        Some((error_code, message)) => DescribeClusterResponse {
            error_code,
            error_message: Some(message),
            endpoint_type: req.endpoint_type,
            cluster_id: CLUSTER_ID.to_string(),
            controller: -1,
            brokers: Vec::new(),
        },
    }
}

/// The brokers (live, unfenced nodes; with `fenced`, live fenced ones too,
/// marked) and the controller (the lease holder, else this node), as
/// Metadata reports them.
fn cluster(engine: &Services, fenced: bool) -> (Vec<ClusterBroker>, i32) {
    let nodes = engine.cluster.nodes();
    let brokers = nodes
        .nodes
        .iter()
        .filter(|n| n.live && (fenced || !n.fenced))
        .map(|n| {
            let (host, port) = split_addr(&n.kafka_addr);
            ClusterBroker {
                broker: Broker {
                    node_id: broker_id(&n.node_id),
                    host,
                    port,
                },
                fenced: n.fenced,
            }
        })
        .collect();
    let controller = nodes
        .lease_holder
        .as_deref()
        .map(broker_id)
        .unwrap_or_else(|| broker_id(&engine.cluster.ready().node_id));
    (brokers, controller)
}
