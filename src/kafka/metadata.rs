//! Metadata: the live brokers, the controller (the lease holder) and each
//! asked topic's partitions and leaders, from this node's view after
//! catching up with the metadata log; auto-creates a named topic when the
//! listener and the request allow it. v10+ requests may name topics by id
//! (`UNKNOWN_TOPIC_ID` for an id naming none); v10+ answers carry topic ids.
//! Asked for authorized operations (v8+), it answers every operation Kafka
//! defines for a topic or cluster: what the principal may do is decided per
//! request by [`super::authz`], not here.

use super::proto::*;
use super::wire::{DecodeResult, Writer};
use super::{admin, broker_id, code, error_code, split_addr, Options};
use crate::api::{ErrorCode, Services};
use crate::ids::TopicUuid;

/// Kafka's ACL operation bits a topic answer lists when asked: READ(3),
/// WRITE(4), CREATE(5), DELETE(6), ALTER(7), DESCRIBE(8), DESCRIBE_CONFIGS(10),
/// ALTER_CONFIGS(11).
pub const TOPIC_OPERATIONS: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);
/// The cluster's: CREATE(5), ALTER(7), DESCRIBE(8), CLUSTER_ACTION(9),
/// DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11), IDEMPOTENT_WRITE(12).
pub const CLUSTER_OPERATIONS: i32 = (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

/// Not asked for: Kafka's "omitted" value.
const NOT_ASKED: i32 = i32::MIN;

pub(super) async fn metadata(
    engine: &Services,
    opts: Options,
    version: i16,
    req: MetadataRequest,
    w: &mut Writer,
) -> DecodeResult<()> {
    let nodes = engine.cluster.nodes();
    let live: Vec<&crate::api::NodeInfo> = nodes.nodes.iter().filter(|n| n.live && !n.fenced).collect();
    let brokers: Vec<Broker> = live
        .iter()
        .map(|n| {
            let (host, port) = split_addr(&n.kafka_addr);
            Broker {
                node_id: broker_id(&n.node_id),
                host,
                port,
            }
        })
        .collect();
    let controller = nodes
        .lease_holder
        .as_deref()
        .map(broker_id)
        .unwrap_or_else(|| broker_id(&engine.cluster.ready().node_id));
    // Read-your-writes across nodes: a client that just created, grew or
    // deleted a topic through another node (admin requests go to the
    // controller) asks any broker next. Catch up with the metadata log
    // first; if that fails, answer from the view we have.
    let _ = engine.cluster.sync_metadata().await;
    let (refs, named) = match req.topics {
        Some(t) => (t, true),
        None => (
            engine
                .topics
                .list_topics()
                .into_iter()
                .map(|t| MetadataTopicRef::Name(t.name))
                .collect(),
            false,
        ),
    };
    let ids = refs.iter().filter_map(|r| match r {
        MetadataTopicRef::Id(id) => Some(id),
        MetadataTopicRef::Name(_) => None,
    });
    let id_names = super::topic_names(engine, ids).await;
    let topic_ops = if req.include_topic_authorized_operations {
        TOPIC_OPERATIONS
    } else {
        NOT_ASKED
    };
    let mut topics = Vec::with_capacity(refs.len());
    for r in refs {
        let name = match r {
            MetadataTopicRef::Name(name) => name,
            MetadataTopicRef::Id(id) => match id_names.get(&id) {
                Some(name) => name.clone(),
                None => {
                    topics.push(MetadataTopic {
                        error_code: code::UNKNOWN_TOPIC_ID,
                        name: String::new(),
                        topic_id: id,
                        partitions: Vec::new(),
                        authorized_operations: NOT_ASKED,
                    });
                    continue;
                }
            },
        };
        let error = |error_code| MetadataTopic {
            error_code,
            name: name.clone(),
            topic_id: TopicUuid::ZERO,
            partitions: Vec::new(),
            authorized_operations: NOT_ASKED,
        };
        let topic = match engine.topics.describe_topic(&name) {
            Ok(d) => MetadataTopic {
                error_code: code::NONE,
                name: name.clone(),
                topic_id: d.topic_id,
                authorized_operations: topic_ops,
                partitions: d
                    .partition_info
                    .iter()
                    .map(|p| {
                        let leader = p
                            .owner
                            .as_deref()
                            .filter(|o| p.state == "open" && live.iter().any(|n| n.node_id == *o))
                            .map(broker_id);
                        MetadataPartition {
                            error_code: if leader.is_some() {
                                code::NONE
                            } else {
                                code::LEADER_NOT_AVAILABLE
                            },
                            partition: p.partition as i32,
                            leader: leader.unwrap_or(-1),
                            leader_epoch: i32::try_from(p.stream_epoch.get()).unwrap_or(i32::MAX),
                        }
                    })
                    .collect(),
            },
            Err(e) if e.code == ErrorCode::TopicNotFound => {
                if named && opts.auto_create_topics && req.allow_auto_topic_creation {
                    match engine.topics.create_topic(&name, 1, Default::default()).await {
                        Ok(_) => error(code::LEADER_NOT_AVAILABLE),
                        Err(e) if e.code == ErrorCode::TopicExists => error(code::LEADER_NOT_AVAILABLE),
                        Err(e) if e.code == ErrorCode::InvalidTopicName => error(code::INVALID_TOPIC_EXCEPTION),
                        Err(e) if e.code == ErrorCode::Forbidden => error(code::TOPIC_AUTHORIZATION_FAILED),
                        Err(e) => {
                            tracing::info!(topic = %name, error = %e, "auto-create failed");
                            error(code::LEADER_NOT_AVAILABLE)
                        }
                    }
                } else {
                    error(code::UNKNOWN_TOPIC_OR_PARTITION)
                }
            }
            Err(e) => error(error_code(&e)),
        };
        topics.push(topic);
    }
    let cluster = MetadataCluster {
        brokers: &brokers,
        controller,
        cluster_id: admin::CLUSTER_ID,
        authorized_operations: if req.include_cluster_authorized_operations {
            CLUSTER_OPERATIONS
        } else {
            NOT_ASKED
        },
    };
    encode_metadata(w, version, &cluster, &topics)
}
