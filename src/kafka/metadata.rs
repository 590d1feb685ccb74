//! Metadata: the live brokers, the controller (the lease holder) and each
//! asked topic's partitions and leaders, from this node's view after
//! catching up with the metadata log; auto-creates a named topic when the
//! listener and the request allow it.

use super::proto::*;
use super::wire::Writer;
use super::{admin, broker_id, code, error_code, split_addr, Options};
use crate::api::{ErrorCode, Services};

pub(super) async fn metadata(engine: &Services, opts: Options, version: i16, req: MetadataRequest, w: &mut Writer) {
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
    let (names, named) = match req.topics {
        Some(t) => (t, true),
        None => (engine.topics.list_topics().into_iter().map(|t| t.name).collect(), false),
    };
    let mut topics = Vec::with_capacity(names.len());
    for name in names {
        let error = |error_code| MetadataTopic {
            error_code,
            name: name.clone(),
            partitions: Vec::new(),
        };
        let topic = match engine.topics.describe_topic(&name) {
            Ok(d) => MetadataTopic {
                error_code: code::NONE,
                name: name.clone(),
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
    encode_metadata(w, version, &brokers, controller, admin::CLUSTER_ID, &topics);
}
