//! DescribeProducers: the codec at every version against kafka-protocol's
//! structs, bounds, and the answers of real nodes: the owner's producer
//! state, unknown and invalid topics, another node's partitions, and READ.

use super::*;
use crate::kafka::describe_producers::*;
use crate::kafka::header::{flexible_request, flexible_response};
use kafka_protocol::messages as km;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

fn versions() -> std::ops::RangeInclusive<i16> {
    let (_, min, max) = SUPPORTED.iter().find(|r| r.0 == DESCRIBE_PRODUCERS).copied().unwrap();
    min..=max
}

fn body(topics: &[(&str, &[i32])], version: i16) -> Vec<u8> {
    let req = km::DescribeProducersRequest::default().with_topics(
        topics
            .iter()
            .map(|(t, ps)| {
                km::describe_producers_request::TopicRequest::default()
                    .with_name(StrBytes::from_string(t.to_string()).into())
                    .with_partition_indexes(ps.to_vec())
            })
            .collect(),
    );
    let mut b = bytes::BytesMut::new();
    req.encode(&mut b, version).unwrap();
    b.to_vec()
}

#[test]
fn describe_producers_requests_decode_at_every_version() {
    for v in versions() {
        let b = body(&[("t", &[0, 2]), ("u", &[])], v);
        let got = decode_describe_producers(&mut Reader::new(Bytes::from(b.clone())), v).unwrap();
        assert_eq!(got, vec![("t".into(), vec![0, 2]), ("u".into(), vec![])], "v{v}");
        for cut in 0..b.len() {
            assert!(decode_describe_producers(&mut Reader::new(Bytes::copy_from_slice(&b[..cut])), v).is_err());
        }
    }
    // A topic count of 2^32-2 in five bytes is refused before allocating.
    let huge: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0x0f];
    assert!(decode_describe_producers(&mut Reader::new(Bytes::from_static(huge)), 0).is_err());
    let mut rng = rand::rngs::SmallRng::seed_from_u64(61);
    for _ in 0..5_000 {
        let b: Vec<u8> = (0..rng.random_range(0..40)).map(|_| rng.random::<u8>()).collect();
        let _ = decode_describe_producers(&mut Reader::new(Bytes::from(b)), 0);
    }
}

async fn ask(engine: &Services, version: i16, topics: &[(&str, &[i32])]) -> km::DescribeProducersResponse {
    let mut w = Writer::default();
    w.i16(DESCRIBE_PRODUCERS);
    w.i16(version);
    w.i32(7);
    w.nullable_string(Some("producers-test"));
    if flexible_request(DESCRIBE_PRODUCERS, version) {
        w.no_tagged_fields();
    }
    w.buf.extend_from_slice(&body(topics, version));
    let mut r = call(engine, w.buf.freeze()).await;
    if flexible_response(DESCRIBE_PRODUCERS, version) {
        r.tagged_fields().unwrap();
    }
    let mut b = r.bytes_exact(r.remaining()).unwrap();
    let m = km::DescribeProducersResponse::decode(&mut b, version).unwrap();
    assert!(b.is_empty());
    m
}

/// Per topic, per partition: (partition, error, [(producer id, epoch,
/// last sequence, last timestamp, coordinator epoch, txn start)]).
type Described = Vec<(String, Vec<(i32, i16, Vec<(i64, i32, i32, i64, i32, i64)>)>)>;

fn described(r: &km::DescribeProducersResponse) -> Described {
    r.topics
        .iter()
        .map(|t| {
            let ps = t
                .partitions
                .iter()
                .map(|p| {
                    assert_eq!(p.error_code == 0, p.error_message.is_none(), "{p:?}");
                    let states = p
                        .active_producers
                        .iter()
                        .map(|s| {
                            (
                                s.producer_id.0,
                                s.producer_epoch,
                                s.last_sequence,
                                s.last_timestamp,
                                s.coordinator_epoch,
                                s.current_txn_start_offset,
                            )
                        })
                        .collect();
                    (p.partition_index, p.error_code, states)
                })
                .collect();
            (t.name.0.to_string(), ps)
        })
        .collect()
}

/// Until this node serves `topic`/`partition` itself: the view says a
/// stream is open a moment before the node has set it up.
async fn served_here(engine: &Services, topic: &str, partition: u32) {
    for _ in 0..400 {
        if engine.records.producers(topic, partition).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{topic}/{partition} is not served here");
}

fn idempotent(pid: i64, epoch: i16, seq: i32, timestamps: &[i64]) -> Bytes {
    let records: Vec<Record> = timestamps.iter().map(|ts| record("k", "v", *ts)).collect();
    crate::batch::with_producer(&encode_batch(Offset(0), &records), pid, epoch, seq)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_describes_its_idempotent_producers_at_every_version() {
    // No flush during the test: the last batches stay in the tail.
    let node = node_with(&["--flush-interval-sec", "600"]).await;
    let s = node.services();
    node.create_topic("p", 2, Default::default()).await.unwrap();
    wait_open(&s, "p").await;
    served_here(&s, "p", 0).await;
    served_here(&s, "p", 1).await;
    s.records
        .append_batch("p", 0, idempotent(7, 1, 0, &[5, 9]))
        .await
        .unwrap();
    s.records
        .append_batch("p", 0, idempotent(3, 0, 10, &[4]))
        .await
        .unwrap();
    s.records
        .append_batch("p", 0, idempotent(7, 1, 2, &[30, 20, 10]))
        .await
        .unwrap();
    s.records.append("p", 1, vec![record("k", "plain", 1)]).await.unwrap();
    let unknown = code::UNKNOWN_TOPIC_OR_PARTITION;
    for v in versions() {
        let r = ask(&s, v, &[("p", &[0, 1, 5, -1]), ("nope", &[0]), ("bad/name", &[0])]).await;
        assert_eq!(r.throttle_time_ms, 0);
        assert_eq!(
            described(&r),
            vec![
                (
                    "p".to_string(),
                    vec![
                        (0, 0, vec![(3, 0, 10, 4, -1, -1), (7, 1, 4, 30, -1, -1)]),
                        (1, 0, vec![]),
                        (5, unknown, vec![]),
                        (-1, unknown, vec![]),
                    ]
                ),
                ("nope".to_string(), vec![(0, unknown, vec![])]),
                ("bad/name".to_string(), vec![(0, code::INVALID_TOPIC_EXCEPTION, vec![])]),
            ],
            "v{v}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_nodes_partition_is_not_led_here() {
    let (n1, n2) = two_nodes().await;
    n1.create_topic("p", 4, Default::default()).await.unwrap();
    wait_open(&n1.services(), "p").await;
    wait_open(&n2.services(), "p").await;
    let owners: Vec<String> = n1
        .describe_topic("p")
        .unwrap()
        .partition_info
        .iter()
        .map(|p| p.owner.clone().unwrap())
        .collect();
    let theirs = owners.iter().position(|o| o == "n2").expect("a partition on n2") as i32;
    let mine = owners.iter().position(|o| o == "n1").expect("a partition on n1") as i32;
    served_here(&n1.services(), "p", mine as u32).await;
    let r = ask(&n1.services(), 0, &[("p", &[theirs, mine])]).await;
    let got: Vec<(i32, i16)> = r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    assert_eq!(got, vec![(theirs, code::NOT_LEADER_OR_FOLLOWER), (mine, code::NONE)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describing_producers_needs_read_on_the_topic() {
    use crate::auth::{Op, Principal, Scope};
    let node = node().await;
    node.create_topic("p", 1, Default::default()).await.unwrap();
    wait_open(&node.services(), "p").await;
    let as_principal =
        |scopes: Vec<Scope>| authz::scoped(&node.services(), Arc::new(Principal { id: "p".into(), scopes }));
    let writer = as_principal(vec![Scope::new("p", &[Op::Write])]);
    let r = ask(&writer, 0, &[("p", &[0]), ("nope", &[0])]).await;
    let codes: Vec<i16> = r.topics.iter().map(|t| t.partitions[0].error_code).collect();
    assert_eq!(
        codes,
        vec![code::TOPIC_AUTHORIZATION_FAILED; 2],
        "READ is checked before existence"
    );
    let reader = as_principal(vec![Scope::new("p", &[Op::Read])]);
    let r = ask(&reader, 0, &[("p", &[0])]).await;
    assert_eq!(r.topics[0].partitions[0].error_code, code::NONE);
}
