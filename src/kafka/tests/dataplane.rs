//! The data-plane codecs at every advertised version: each request built
//! by kafka-protocol's generated structs and decoded by ours, each response
//! written by ours and decoded by kafka-protocol's; truncations and lying
//! counts refused without a panic.

use crate::ids::TopicUuid;
use crate::kafka::leader_epoch::{decode_offset_for_leader_epoch, encode_offset_for_leader_epoch, LeaderEpochAnswer};
use crate::kafka::proto::*;
use crate::kafka::wire::{DecodeResult, Reader, Writer};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{self as km, BrokerId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn topic_name(v: &str) -> TopicName {
    TopicName(s(v))
}

fn uuid(id: TopicUuid) -> uuid::Uuid {
    uuid::Uuid::from_bytes(id.0)
}

fn encoded<M: Encodable>(m: &M, version: i16) -> Bytes {
    let mut b = BytesMut::new();
    m.encode(&mut b, version).unwrap();
    b.freeze()
}

/// Every proper prefix of `full` fails to decode (and nothing panics).
fn truncations_fail<T>(full: &Bytes, decode: impl Fn(&mut Reader) -> DecodeResult<T>) {
    for cut in 0..full.len() {
        assert!(decode(&mut Reader::new(full.slice(..cut))).is_err(), "cut at {cut}");
    }
}

fn decoded<M: Decodable>(w: Writer, version: i16) -> M {
    let mut b = w.finish().into_bytes();
    let m = M::decode(&mut b, version).unwrap();
    assert!(b.is_empty(), "v{version}: {} bytes left over", b.len());
    m
}

const ID: TopicUuid = TopicUuid([9; 16]);

#[test]
fn produce_requests_decode_at_every_version() {
    let records = Bytes::from_static(b"not really a batch");
    for version in 3..=13i16 {
        let req = km::ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1500)
            .with_topic_data(vec![km::produce_request::TopicProduceData::default()
                .with_name(if version < 13 {
                    topic_name("t")
                } else {
                    Default::default()
                })
                .with_topic_id(if version >= 13 { uuid(ID) } else { Default::default() })
                .with_partition_data(vec![
                    km::produce_request::PartitionProduceData::default()
                        .with_index(2)
                        .with_records(Some(records.clone())),
                    km::produce_request::PartitionProduceData::default()
                        .with_index(3)
                        .with_records(None),
                ])]);
        let bytes = encoded(&req, version);
        let got = decode_produce(&mut Reader::new(bytes.clone()), version).unwrap();
        assert_eq!(
            (got.acks, got.timeout_ms, got.transactional_id),
            (-1, 1500, None),
            "v{version}"
        );
        let name = if version < 13 { "t" } else { "" };
        assert_eq!(
            got.topics,
            vec![(name.to_string(), vec![(2, Some(records.clone())), (3, None)])],
            "v{version}"
        );
        assert_eq!(got.topic_ids, if version >= 13 { vec![ID] } else { vec![] });
        truncations_fail(&bytes, |r| decode_produce(r, version));
    }
}

#[test]
fn fetch_requests_decode_at_every_version_with_sessions_and_forgotten_topics() {
    for version in 4..=18i16 {
        let by_id = version >= 13;
        let mut req = km::FetchRequest::default()
            .with_max_wait_ms(500)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_isolation_level(1)
            .with_topics(vec![km::fetch_request::FetchTopic::default()
                .with_topic(if by_id { Default::default() } else { topic_name("t") })
                .with_topic_id(if by_id { uuid(ID) } else { Default::default() })
                .with_partitions(vec![km::fetch_request::FetchPartition::default()
                    .with_partition(1)
                    .with_current_leader_epoch(if version >= 9 { 4 } else { -1 })
                    .with_fetch_offset(77)
                    .with_last_fetched_epoch(if version >= 12 { 3 } else { -1 })
                    .with_log_start_offset(if version >= 5 { 0 } else { -1 })
                    .with_partition_max_bytes(4096)])]);
        if version >= 7 {
            req = req
                .with_session_id(42)
                .with_session_epoch(3)
                .with_forgotten_topics_data(vec![km::fetch_request::ForgottenTopic::default()
                    .with_topic(if by_id { Default::default() } else { topic_name("old") })
                    .with_topic_id(if by_id { uuid(ID) } else { Default::default() })
                    .with_partitions(vec![5, 6])]);
        }
        if version >= 11 {
            req = req.with_rack_id(s("rack-a"));
        }
        if version >= 12 {
            req = req.with_cluster_id(Some(s("c")));
        }
        // v15+ carry the replica id in ReplicaState (a tagged field).
        if version <= 14 {
            req = req.with_replica_id(BrokerId(-1));
        }
        let bytes = encoded(&req, version);
        let got = decode_fetch(&mut Reader::new(bytes.clone()), version).unwrap();
        assert_eq!(
            (got.max_wait_ms, got.min_bytes, got.max_bytes, got.isolation_level),
            (500, 1, 1 << 20, 1),
            "v{version}"
        );
        let name = if by_id { "" } else { "t" };
        assert_eq!(
            got.topics,
            vec![(
                name.to_string(),
                vec![FetchPartition {
                    partition: 1,
                    current_leader_epoch: if version >= 9 { 4 } else { -1 },
                    fetch_offset: 77,
                    partition_max_bytes: 4096,
                }]
            )],
            "v{version}"
        );
        assert_eq!(got.topic_ids, if by_id { vec![ID] } else { vec![] });
        if version >= 7 {
            assert_eq!((got.session_id, got.session_epoch), (42, 3));
            let forgotten = if by_id {
                (String::new(), ID, vec![5, 6])
            } else {
                ("old".to_string(), TopicUuid::ZERO, vec![5, 6])
            };
            assert_eq!(got.forgotten, vec![forgotten]);
        } else {
            assert_eq!((got.session_id, got.session_epoch), (0, -1), "sessionless");
        }
        truncations_fail(&bytes, |r| decode_fetch(r, version));
    }
}

#[test]
fn list_offsets_requests_decode_at_every_version() {
    for version in 1..=10i16 {
        let req = km::ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(if version >= 2 { 1 } else { 0 })
            .with_timeout_ms(if version >= 10 { 1000 } else { 0 })
            .with_topics(vec![km::list_offsets_request::ListOffsetsTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![km::list_offsets_request::ListOffsetsPartition::default(
                )
                .with_partition_index(0)
                .with_current_leader_epoch(if version >= 4 { 2 } else { -1 })
                .with_timestamp(-3)])]);
        let bytes = encoded(&req, version);
        let got = decode_list_offsets(&mut Reader::new(bytes.clone()), version).unwrap();
        let epoch = if version >= 4 { 2 } else { -1 };
        assert_eq!(got.topics, vec![("t".to_string(), vec![(0, epoch, -3)])], "v{version}");
        assert_eq!(got.isolation_level, if version >= 2 { 1 } else { 0 });
        truncations_fail(&bytes, |r| decode_list_offsets(r, version));
    }
}

#[test]
fn metadata_requests_decode_at_every_version_by_name_and_by_id() {
    for version in 0..=13i16 {
        let mut topics = vec![km::metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name("t")))];
        if version >= 10 {
            topics.push(
                km::metadata_request::MetadataRequestTopic::default()
                    .with_name(None)
                    .with_topic_id(uuid(ID)),
            );
        }
        let mut req = km::MetadataRequest::default().with_topics(Some(topics));
        if version >= 4 {
            req = req.with_allow_auto_topic_creation(false);
        }
        if (8..=10).contains(&version) {
            req = req.with_include_cluster_authorized_operations(true);
        }
        if version >= 8 {
            req = req.with_include_topic_authorized_operations(true);
        }
        let bytes = encoded(&req, version);
        let got = decode_metadata(&mut Reader::new(bytes.clone()), version).unwrap();
        let mut want = vec![MetadataTopicRef::Name("t".into())];
        if version >= 10 {
            want.push(MetadataTopicRef::Id(ID));
        }
        assert_eq!(got.topics, Some(want), "v{version}");
        assert_eq!(got.allow_auto_topic_creation, version < 4);
        assert_eq!(got.include_cluster_authorized_operations, (8..=10).contains(&version));
        assert_eq!(got.include_topic_authorized_operations, version >= 8);
        truncations_fail(&bytes, |r| decode_metadata(r, version));
        // Every topic.
        if version >= 1 {
            let all = encoded(&km::MetadataRequest::default().with_topics(None), version);
            assert_eq!(decode_metadata(&mut Reader::new(all), version).unwrap().topics, None);
        }
    }
}

#[test]
fn offset_for_leader_epoch_requests_decode_at_every_version() {
    for version in 2..=4i16 {
        let req = km::OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![
                km::offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                    .with_topic(topic_name("t"))
                    .with_partitions(vec![
                        km::offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                            .with_partition(1)
                            .with_current_leader_epoch(5)
                            .with_leader_epoch(4),
                    ]),
            ]);
        let bytes = encoded(&req, version);
        let got = decode_offset_for_leader_epoch(&mut Reader::new(bytes.clone()), version).unwrap();
        assert_eq!(got.topics, vec![("t".to_string(), vec![(1, 5, 4)])], "v{version}");
        truncations_fail(&bytes, |r| decode_offset_for_leader_epoch(r, version));
    }
}

#[test]
fn lying_counts_are_refused_before_allocating() {
    // Fetch v12 (flexible): a compact topic array claiming 2^31 entries.
    let mut w = Writer::default();
    for v in [-1, 500, 1, 1 << 20] {
        w.i32(v);
    }
    w.i8(0);
    w.i32(0);
    w.i32(-1);
    w.uvarint(1 << 31);
    assert!(decode_fetch(&mut Reader::new(w.buf.freeze()), 12).is_err());
    // Produce v13: one topic id, then 2^30 partitions.
    let mut w = Writer::default();
    w.uvarint(0);
    w.i16(1);
    w.i32(100);
    w.uvarint(2);
    w.buf.extend_from_slice(&[1; 16]);
    w.uvarint(1 << 30);
    assert!(decode_produce(&mut Reader::new(w.buf.freeze()), 13).is_err());
    // Metadata v12: a million topics in a few bytes.
    let mut w = Writer::default();
    w.uvarint(1_000_001);
    w.buf.extend_from_slice(&[0; 8]);
    assert!(decode_metadata(&mut Reader::new(w.buf.freeze()), 12).is_err());
}

#[test]
fn produce_responses_decode_with_kafka_protocol_at_every_version() {
    let topics = vec![(
        "t".to_string(),
        vec![
            ProducePartitionResponse {
                partition: 0,
                error_code: 0,
                base_offset: 41,
                log_start_offset: 0,
                error_message: None,
            },
            ProducePartitionResponse {
                partition: 1,
                error_code: 100,
                base_offset: -1,
                log_start_offset: -1,
                error_message: Some("no topic has this id".into()),
            },
        ],
    )];
    for version in 3..=13i16 {
        let mut w = Writer::default();
        encode_produce(&mut w, version, &topics, &[ID]);
        let resp: km::ProduceResponse = decoded(w, version);
        let t = &resp.responses[0];
        if version >= 13 {
            assert_eq!(t.topic_id, uuid(ID));
        } else {
            assert_eq!(t.name.0.as_str(), "t");
        }
        let p = &t.partition_responses;
        assert_eq!(
            (p[0].index, p[0].error_code, p[0].base_offset),
            (0, 0, 41),
            "v{version}"
        );
        assert_eq!((p[1].index, p[1].error_code), (1, 100));
        if version >= 8 {
            assert_eq!(p[1].error_message.as_deref(), Some("no topic has this id"));
        }
    }
}

#[test]
fn fetch_responses_decode_with_kafka_protocol_at_every_version_sharing_batches() {
    let big = Bytes::from(vec![7u8; 4096]);
    let small = Bytes::from_static(b"abc");
    let topics = vec![(
        "t".to_string(),
        vec![
            FetchPartitionResponse {
                partition: 0,
                error_code: 0,
                high_watermark: 10,
                last_stable_offset: 10,
                aborted: Vec::new(),
                log_start_offset: 2,
                batches: vec![big.clone(), small.clone()],
            },
            FetchPartitionResponse {
                partition: 1,
                error_code: 100,
                high_watermark: -1,
                last_stable_offset: -1,
                aborted: Vec::new(),
                log_start_offset: -1,
                batches: Vec::new(),
            },
        ],
    )];
    let head = FetchHead {
        error_code: 0,
        session_id: 1234,
    };
    for version in 4..=18i16 {
        let mut w = Writer::default();
        encode_fetch(&mut w, version, head, &topics, &[ID]);
        let encoded = w.finish();
        assert!(
            encoded.parts().iter().any(|p| p.as_ptr() == big.as_ptr()),
            "v{version}: the large batch is shared, not copied"
        );
        let mut b = encoded.into_bytes();
        let resp = km::FetchResponse::decode(&mut b, version).unwrap();
        assert!(b.is_empty());
        if version >= 7 {
            assert_eq!((resp.error_code, resp.session_id), (0, 1234));
        }
        let t = &resp.responses[0];
        if version >= 13 {
            assert_eq!(t.topic_id, uuid(ID));
        } else {
            assert_eq!(t.topic.0.as_str(), "t");
        }
        let p = &t.partitions;
        assert_eq!((p[0].partition_index, p[0].high_watermark), (0, 10));
        if version >= 5 {
            assert_eq!(p[0].log_start_offset, 2);
        }
        let mut joined = big.to_vec();
        joined.extend_from_slice(&small);
        assert_eq!(p[0].records.as_deref(), Some(&joined[..]), "v{version}");
        assert_eq!((p[1].partition_index, p[1].error_code), (1, 100));
        assert_eq!(p[1].records.as_deref().map(<[u8]>::len), Some(0));
    }
}

#[test]
fn list_offsets_responses_decode_with_kafka_protocol_at_every_version() {
    let topics = vec![(
        "t".to_string(),
        vec![ListOffsetsPartitionResponse {
            partition: 0,
            error_code: 0,
            timestamp: 1_700_000_000_000,
            offset: 12,
            leader_epoch: 3,
        }],
    )];
    for version in 1..=10i16 {
        let mut w = Writer::default();
        encode_list_offsets(&mut w, version, &topics).unwrap();
        let resp: km::ListOffsetsResponse = decoded(w, version);
        let p = &resp.topics[0].partitions[0];
        assert_eq!(
            (p.partition_index, p.timestamp, p.offset),
            (0, 1_700_000_000_000, 12),
            "v{version}"
        );
        assert_eq!(p.leader_epoch, if version >= 4 { 3 } else { -1 });
    }
}

fn metadata_fixture(partitions: usize) -> (Vec<Broker>, Vec<MetadataTopic>) {
    let brokers = vec![
        Broker {
            node_id: 1,
            host: "10.0.0.1".into(),
            port: 9092,
        },
        Broker {
            node_id: 2,
            host: "10.0.0.2".into(),
            port: 9092,
        },
    ];
    let topics = vec![
        MetadataTopic {
            error_code: 0,
            name: "t".into(),
            topic_id: ID,
            partitions: (0..partitions)
                .map(|p| MetadataPartition {
                    error_code: 0,
                    partition: p as i32,
                    leader: 1 + (p % 2) as i32,
                    leader_epoch: 4,
                })
                .collect(),
            authorized_operations: i32::MIN,
        },
        MetadataTopic {
            error_code: 100,
            name: String::new(),
            topic_id: TopicUuid([3; 16]),
            partitions: Vec::new(),
            authorized_operations: i32::MIN,
        },
    ];
    (brokers, topics)
}

#[test]
fn metadata_responses_decode_with_kafka_protocol_at_every_version() {
    let (brokers, topics) = metadata_fixture(3);
    let cluster = MetadataCluster {
        brokers: &brokers,
        controller: 2,
        cluster_id: "sluice",
        authorized_operations: i32::MIN,
    };
    for version in 0..=13i16 {
        let mut w = Writer::default();
        encode_metadata(&mut w, version, &cluster, &topics).unwrap();
        let resp: km::MetadataResponse = decoded(w, version);
        assert_eq!(resp.brokers.len(), 2, "v{version}");
        let t = &resp.topics[0];
        assert_eq!(t.name.as_ref().map(|n| n.0.as_str()), Some("t"));
        assert_eq!(t.partitions.len(), 3);
        assert_eq!(t.partitions[1].leader_id, BrokerId(2));
        if version >= 10 {
            assert_eq!(t.topic_id, uuid(ID), "v{version}: topic ids");
            assert_eq!(resp.topics[1].topic_id, uuid(TopicUuid([3; 16])));
        }
        assert_eq!(resp.topics[1].error_code, 100);
        if version >= 1 {
            assert_eq!(resp.controller_id, BrokerId(2));
        }
    }
}

#[test]
fn offset_for_leader_epoch_responses_decode_with_kafka_protocol() {
    let topics = vec![(
        "t".to_string(),
        vec![LeaderEpochAnswer {
            error_code: 0,
            partition: 1,
            leader_epoch: 3,
            end_offset: 99,
        }],
    )];
    for version in 2..=4i16 {
        let mut w = Writer::default();
        encode_offset_for_leader_epoch(&mut w, version, &topics);
        let resp: km::OffsetForLeaderEpochResponse = decoded(w, version);
        let p = &resp.topics[0].partitions[0];
        assert_eq!((p.partition, p.leader_epoch, p.end_offset), (1, 3, 99), "v{version}");
    }
}

/// Encode cost of a 1,000-partition Metadata response (v12), by the
/// generated encoder (`encode_metadata`) against the hand-written v8-style
/// writer this module replaced, measured in-process. Numbers are in
/// docs/kafka.md, "The codec". Run with
/// `cargo test --lib metadata_encode_cost -- --ignored --nocapture`.
#[test]
#[ignore]
fn metadata_encode_cost() {
    let (brokers, topics) = metadata_fixture(1000);
    let cluster = MetadataCluster {
        brokers: &brokers,
        controller: 1,
        cluster_id: "sluice",
        authorized_operations: i32::MIN,
    };
    let rounds = 2000;
    let hand = |w: &mut Writer| {
        // The old hand-written v8 writer, kept here as the baseline.
        w.i32(0);
        w.array_len(brokers.len());
        for b in &brokers {
            w.i32(b.node_id);
            w.string(&b.host);
            w.i32(b.port);
            w.nullable_string(None);
        }
        w.nullable_string(Some("sluice"));
        w.i32(1);
        w.array_len(topics.len());
        for t in &topics {
            w.i16(t.error_code);
            w.string(&t.name);
            w.bool(false);
            w.array_len(t.partitions.len());
            for p in &t.partitions {
                w.i16(p.error_code);
                w.i32(p.partition);
                w.i32(p.leader);
                w.i32(p.leader_epoch);
                for _ in 0..2 {
                    w.array_len(1);
                    w.i32(p.leader);
                }
                w.array_len(0);
            }
            w.i32(i32::MIN);
        }
        w.i32(i32::MIN);
    };
    let time = |f: &dyn Fn() -> usize| {
        let started = std::time::Instant::now();
        let mut bytes = 0;
        for _ in 0..rounds {
            bytes = f();
        }
        (started.elapsed() / rounds, bytes)
    };
    let (hand_t, hand_b) = time(&|| {
        let mut w = Writer::default();
        hand(&mut w);
        w.buf.len()
    });
    let (gen_t, gen_b) = time(&|| {
        let mut w = Writer::default();
        encode_metadata(&mut w, 12, &cluster, &topics).unwrap();
        w.buf.len()
    });
    let (build_t, _) = time(&|| metadata_response(&cluster, &topics).topics.len());
    println!("hand-written v8: {hand_t:?} per response ({hand_b} bytes)");
    println!("generated v12:   {gen_t:?} per response ({gen_b} bytes), of which building the struct {build_t:?}");
}
