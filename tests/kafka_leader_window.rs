//! The leader window after CreateTopics: node A's view places a new
//! topic's partition on node B (so A's Metadata names B as its leader)
//! before B's own view has opened it. A Produce (or Fetch, ListOffsets)
//! reaching B in that window must be served once B catches up with the
//! metadata log, not refused with UNKNOWN_TOPIC_OR_PARTITION or
//! NOT_LEADER_OR_FOLLOWER. Two in-process nodes on shared in-memory stores;
//! requests go straight to B's Kafka handler.

mod support;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{self as km, ApiKey, RequestHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use sluice::api::Topics;
use sluice::batch::encode_batch;
use sluice::ids::Offset;
use sluice::node::Node;
use std::sync::Arc;
use std::time::Duration;
use support::{config, eventually, memory_backends, rec};

async fn two_nodes() -> (Arc<Node>, Arc<Node>) {
    let backends = memory_backends();
    let a = Node::start_with(config("n1", &[]), backends.clone()).await.unwrap();
    let b = Node::start_with(config("n2", &[]), backends).await.unwrap();
    let both = eventually(Duration::from_secs(10), || {
        [&a, &b]
            .iter()
            .all(|n| n.meta.view().nodes.values().filter(|r| !r.fenced).count() == 2)
    })
    .await;
    assert!(both, "the nodes did not see each other");
    (a, b)
}

/// A request frame (header included) of `key` at `version`.
fn frame<M: Encodable>(key: ApiKey, version: i16, body: &M) -> Bytes {
    let mut b = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("leader-window")))
        .encode(&mut b, key.request_header_version(version))
        .unwrap();
    body.encode(&mut b, version).unwrap();
    b.freeze()
}

/// The body of a response to `key` at `version` (after its header).
fn body<M: Decodable>(key: ApiKey, version: i16, mut resp: Bytes) -> M {
    km::ResponseHeader::decode(&mut resp, key.response_header_version(version)).unwrap();
    M::decode(&mut resp, version).unwrap()
}

/// The partition of `topic` that `a`'s view has open on node `owner`, as
/// soon as it has one (polled every millisecond).
async fn placed_on(a: &Node, topic: &str, owner: &str) -> Option<i32> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        if let Ok(d) = a.describe_topic(topic) {
            let opened = d.partition_info.iter().all(|p| p.state == "open");
            if opened {
                return d
                    .partition_info
                    .iter()
                    .find(|p| p.owner.as_deref() == Some(owner))
                    .map(|p| p.partition as i32);
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_produce_right_after_create_topics_succeeds_on_the_new_leader() {
    let (a, b) = two_nodes().await;
    let services = b.services();
    let opts = sluice::kafka::Options::defaults();
    let batch = encode_batch(Offset(0), &[rec("right after create")]);
    let (mut tried, mut failures) = (0, Vec::new());
    for i in 0..50 {
        let topic = format!("window-{i}");
        a.create_topic(&topic, 4, Default::default()).await.unwrap();
        // A's view decides where the client goes; B's may still lag.
        let Some(partition) = placed_on(&a, &topic, "n2").await else {
            continue;
        };
        let req = km::ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![km::produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.clone())))
                .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch.clone()))])]);
        let resp = sluice::kafka::handle(&services, opts, frame(ApiKey::Produce, 9, &req))
            .await
            .unwrap()
            .unwrap();
        let resp: km::ProduceResponse = body(ApiKey::Produce, 9, resp);
        let p = &resp.responses[0].partition_responses[0];
        tried += 1;
        if p.error_code != 0 {
            failures.push((topic, partition, p.error_code));
        }
    }
    assert!(tried >= 40, "only {tried} of 50 topics had a partition on n2");
    assert!(
        failures.is_empty(),
        "{} of {tried} produces failed: {failures:?}",
        failures.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_and_fetch_right_after_create_topics_succeed_on_the_new_leader() {
    let (a, b) = two_nodes().await;
    let services = b.services();
    let opts = sluice::kafka::Options::defaults();
    for i in 0..10 {
        let topic = format!("window-read-{i}");
        a.create_topic(&topic, 4, Default::default()).await.unwrap();
        let Some(partition) = placed_on(&a, &topic, "n2").await else {
            continue;
        };
        let name = TopicName(StrBytes::from_string(topic.clone()));
        let lo =
            km::ListOffsetsRequest::default().with_topics(vec![km::list_offsets_request::ListOffsetsTopic::default()
                .with_name(name.clone())
                .with_partitions(vec![km::list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(-1)])]);
        let resp = sluice::kafka::handle(&services, opts, frame(ApiKey::ListOffsets, 7, &lo))
            .await
            .unwrap()
            .unwrap();
        let resp: km::ListOffsetsResponse = body(ApiKey::ListOffsets, 7, resp);
        let p = &resp.topics[0].partitions[0];
        assert_eq!((p.error_code, p.offset), (0, 0), "{topic}/{partition}: ListOffsets");
        let topic_id = b.describe_topic(&topic).unwrap().topic_id;
        let fetch = km::FetchRequest::default()
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![km::fetch_request::FetchTopic::default()
                .with_topic_id(uuid::Uuid::from_bytes(topic_id.0))
                .with_partitions(vec![km::fetch_request::FetchPartition::default()
                    .with_partition(partition)
                    .with_partition_max_bytes(1 << 20)])]);
        let resp = sluice::kafka::handle(&services, opts, frame(ApiKey::Fetch, 13, &fetch))
            .await
            .unwrap()
            .unwrap();
        let resp: km::FetchResponse = body(ApiKey::Fetch, 13, resp);
        assert_eq!(
            resp.responses[0].partitions[0].error_code, 0,
            "{topic}/{partition}: Fetch"
        );
    }
}
