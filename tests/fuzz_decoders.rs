//! Fuzzing every decoder that reads bytes Sluice did not write itself (or
//! wrote and may read back damaged): Kafka request frames (header and body,
//! through `kafka::handle` on a real in-process node; the data-plane APIs
//! at their newest, flexible versions too), the Kafka framing
//! layer (length caps before and after login, the request byte budgets),
//! HTTP append bodies
//! (through the router), WAL segments and fence markers, data-object
//! footers, record batches, SASL/SCRAM messages, metadata-log entries
//! and snapshots, and consumer-group assignments and records as the console
//! decodes them.
//!
//! Each target gets arbitrary bytes and mutations of valid encodings
//! (bytes flipped to extremes, truncated, extended, spliced). The only
//! acceptable outcomes are an error or a value: a panic fails the case, and
//! an allocation above [`HUGE`] aborts the whole binary (see [`Guard`]) — the
//! failure mode of decoders that size buffers from wire counts.
//!
//! `SLUICE_FUZZ_CASES` sets the cases per target (default 256, a few
//! seconds each); docs/security.md records the long runs.

mod support;

use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use sluice::api::{Cluster, Topics};
use sluice::batch::{encode_batch, Record};
use sluice::ids::{NodeEpoch, NodeId, Offset, SegmentSeq, StreamEpoch, StreamId, TopicId};
use sluice::kafka::wire::Writer;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// No decoder may ask for this much at once on inputs of a few KiB.
const HUGE: usize = 256 << 20;

/// The system allocator, refusing (so the process aborts, naming the size)
/// any single allocation above [`HUGE`], and remembering the largest seen.
struct Guard;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Guard {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        if layout.size() > HUGE {
            return std::ptr::null_mut();
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        if new_size > HUGE {
            return std::ptr::null_mut();
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Guard = Guard;

fn cases() -> u32 {
    std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn runner() -> TestRunner {
    TestRunner::new(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })
}

/// Arbitrary bytes, or one of `valid` flipped, truncated, extended or spliced.
fn inputs(valid: Vec<Vec<u8>>) -> BoxedStrategy<Vec<u8>> {
    let n = valid.len();
    let valid = Arc::new(valid);
    let (v1, v2, v3, v4) = (valid.clone(), valid.clone(), valid.clone(), valid);
    let extreme = prop_oneof![Just(0u8), Just(0x7f), Just(0x80), Just(0xff), any::<u8>()];
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..512),
        (
            0..n,
            proptest::collection::vec((any::<prop::sample::Index>(), extreme), 1..6)
        )
            .prop_map(move |(i, flips)| {
                let mut b = v1[i].clone();
                if !b.is_empty() {
                    for (at, byte) in flips {
                        let at = at.index(b.len());
                        b[at] = byte;
                    }
                }
                b
            }),
        (0..n, any::<prop::sample::Index>()).prop_map(move |(i, cut)| {
            let b = &v2[i];
            b[..cut.index(b.len() + 1)].to_vec()
        }),
        (0..n, proptest::collection::vec(any::<u8>(), 1..64)).prop_map(move |(i, tail)| {
            let mut b = v3[i].clone();
            b.extend(tail);
            b
        }),
        (0..n, 0..n, any::<prop::sample::Index>(), any::<prop::sample::Index>()).prop_map(move |(i, j, a, b)| {
            let (x, y) = (&v4[i], &v4[j]);
            let mut out = x[..a.index(x.len() + 1)].to_vec();
            out.extend_from_slice(&y[b.index(y.len() + 1)..]);
            out
        }),
    ]
    .boxed()
}

/// Runs `check` on every input; a panic inside fails the target.
fn fuzz(name: &str, valid: Vec<Vec<u8>>, check: impl Fn(&[u8])) {
    let mut runner = runner();
    let result = runner.run(&inputs(valid), |input| {
        check(&input);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    eprintln!(
        "{name}: {} cases, largest allocation so far {} bytes",
        cases(),
        LARGEST.load(Ordering::Relaxed)
    );
}

fn record(value: &str) -> Record {
    Record {
        timestamp_ms: 1_000,
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: vec![("h".into(), Some(Bytes::from_static(b"x")))],
    }
}

fn open(engine: &dyn Topics, topic: &str) -> bool {
    engine
        .describe_topic(topic)
        .is_ok_and(|d| d.partition_info.iter().all(|p| p.state == "open"))
}

// ------------------------------------------------------------ Kafka

fn kafka_request(key: i16, version: i16, body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::default();
    w.i16(key);
    w.i16(version);
    w.i32(7);
    w.string("fuzz");
    if (key == 18 && version >= 3) || key == 68 || key == 69 {
        w.no_tagged_fields(); // request header v2
    }
    body(&mut w);
    w.buf.to_vec()
}

fn valid_kafka_requests() -> Vec<Vec<u8>> {
    let batch = encode_batch(Offset(0), &[record("a"), record("b")]);
    vec![
        kafka_request(18, 0, |_| {}),
        kafka_request(18, 3, |w| {
            w.compact_string("rs");
            w.compact_string("1");
            w.no_tagged_fields();
        }),
        kafka_request(3, 8, |w| {
            w.array_len(1);
            w.string("t");
            w.bool(false);
            w.bool(false);
            w.bool(false);
        }),
        kafka_request(0, 3, |w| {
            w.nullable_string(None);
            w.i16(1);
            w.i32(1000);
            w.array_len(1);
            w.string("t");
            w.array_len(1);
            w.i32(0);
            w.bytes_parts(std::slice::from_ref(&batch));
        }),
        kafka_request(1, 4, |w| {
            w.i32(-1);
            w.i32(1);
            w.i32(1);
            w.i32(1 << 20);
            w.i8(0);
            w.array_len(1);
            w.string("t");
            w.array_len(1);
            w.i32(0);
            w.i64(0);
            w.i32(1 << 20);
        }),
        kafka_request(2, 1, |w| {
            w.i32(-1);
            w.array_len(1);
            w.string("t");
            w.array_len(1);
            w.i32(0);
            w.i64(-1);
        }),
        // FindCoordinator v0, JoinGroup v0, OffsetFetch v1.
        kafka_request(10, 0, |w| w.string("g")),
        kafka_request(11, 0, |w| {
            w.string("g");
            w.i32(10_000);
            w.string("");
            w.string("consumer");
            w.array_len(1);
            w.string("range");
            w.bytes_parts(&[Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 0])]);
        }),
        kafka_request(9, 1, |w| {
            w.string("g");
            w.array_len(1);
            w.string("t");
            w.array_len(1);
            w.i32(0);
        }),
        // ConsumerGroupHeartbeat v1 (a join owning one partition) and
        // ConsumerGroupDescribe v0.
        kafka_request(68, 1, |w| {
            w.compact_string("g");
            w.compact_string("m");
            w.i32(0);
            w.compact_nullable_string(Some("i"));
            w.compact_nullable_string(None);
            w.i32(30_000);
            w.compact_array_len(1);
            w.compact_string("t");
            w.compact_nullable_string(Some("t.*"));
            w.compact_nullable_string(Some("uniform"));
            w.compact_array_len(1);
            w.buf.extend_from_slice(&[7; 16]);
            w.compact_array_len(1);
            w.i32(0);
            w.no_tagged_fields();
            w.no_tagged_fields();
        }),
        kafka_request(69, 0, |w| {
            w.compact_array_len(1);
            w.compact_string("g");
            w.bool(false);
            w.no_tagged_fields();
        }),
        // CreateTopics v2 and DescribeConfigs v1.
        kafka_request(19, 2, |w| {
            w.array_len(1);
            w.string("fz");
            w.i32(1);
            w.i16(1);
            w.array_len(0);
            w.array_len(0);
            w.i32(1000);
            w.bool(false);
        }),
        kafka_request(32, 1, |w| {
            w.array_len(1);
            w.i8(2);
            w.string("t");
            w.nullable_array_len_none();
            w.bool(true);
        }),
        // DescribeUserScramCredentials v0 (flexible: the header's tagged
        // fields first).
        kafka_request(50, 0, |w| {
            w.no_tagged_fields();
            w.compact_array_len(1);
            w.compact_string("0123456789abcdef");
            w.no_tagged_fields();
            w.no_tagged_fields();
        }),
    ]
    .into_iter()
    .chain(flexible_admin_requests())
    .chain(flexible_group_requests())
    .chain(flexible_kafka_requests(&batch))
    .chain(offset_delete_and_producer_requests())
    .chain(transaction_requests())
    .collect()
}

/// The classic group APIs at their newest (flexible) versions, encoded by
/// kafka-protocol's request structs.
fn flexible_group_requests() -> Vec<Vec<u8>> {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::{Encodable, StrBytes};
    fn flex<M: Encodable>(key: i16, version: i16, m: M) -> Vec<u8> {
        let mut w = Writer::default();
        w.i16(key);
        w.i16(version);
        w.i32(7);
        w.string("fuzz");
        w.no_tagged_fields();
        let mut b = bytes::BytesMut::new();
        m.encode(&mut b, version).unwrap();
        w.buf.extend_from_slice(&b);
        w.buf.to_vec()
    }
    let s = |x: &str| StrBytes::from_string(x.to_string());
    let g = || km::GroupId(s("g"));
    vec![
        flex(
            10,
            6,
            km::FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g"), s("h")]),
        ),
        flex(
            11,
            9,
            km::JoinGroupRequest::default()
                .with_group_id(g())
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(100)
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![km::join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(s("range"))
                    .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 0]))])
                .with_reason(Some(s("fuzz"))),
        ),
        flex(
            14,
            5,
            km::SyncGroupRequest::default()
                .with_group_id(g())
                .with_generation_id(1)
                .with_member_id(s("m"))
                .with_protocol_type(Some(s("consumer")))
                .with_protocol_name(Some(s("range"))),
        ),
        flex(
            12,
            4,
            km::HeartbeatRequest::default()
                .with_group_id(g())
                .with_member_id(s("m")),
        ),
        flex(
            13,
            5,
            km::LeaveGroupRequest::default().with_group_id(g()).with_members(vec![
                km::leave_group_request::MemberIdentity::default()
                    .with_member_id(s("m"))
                    .with_reason(Some(s("bye"))),
            ]),
        ),
        flex(
            8,
            9,
            km::OffsetCommitRequest::default()
                .with_group_id(g())
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![km::offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(km::TopicName(s("t")))
                    .with_partitions(vec![
                        km::offset_commit_request::OffsetCommitRequestPartition::default().with_committed_offset(1),
                    ])]),
        ),
        flex(
            9,
            9,
            km::OffsetFetchRequest::default().with_groups(vec![
                km::offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(g())
                    .with_topics(None),
                km::offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(km::GroupId(s("h")))
                    .with_topics(Some(vec![km::offset_fetch_request::OffsetFetchRequestTopics::default(
                    )
                    .with_name(km::TopicName(s("t")))
                    .with_partition_indexes(vec![0])])),
            ]),
        ),
        flex(
            15,
            6,
            km::DescribeGroupsRequest::default()
                .with_groups(vec![g()])
                .with_include_authorized_operations(true),
        ),
        flex(
            16,
            5,
            km::ListGroupsRequest::default()
                .with_states_filter(vec![s("Stable")])
                .with_types_filter(vec![s("classic")]),
        ),
        flex(42, 2, km::DeleteGroupsRequest::default().with_groups_names(vec![g()])),
    ]
}

/// The flexible admin versions (and InitProducerId v5), their bodies
/// encoded by kafka-protocol's request structs.
fn flexible_admin_requests() -> Vec<Vec<u8>> {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::{Encodable, StrBytes};
    fn flex<M: Encodable>(key: i16, version: i16, m: M) -> Vec<u8> {
        let mut w = Writer::default();
        w.i16(key);
        w.i16(version);
        w.i32(7);
        w.string("fuzz");
        w.no_tagged_fields();
        let mut b = bytes::BytesMut::new();
        m.encode(&mut b, version).unwrap();
        w.buf.extend_from_slice(&b);
        w.buf.to_vec()
    }
    let s = |x: &str| StrBytes::from_string(x.to_string());
    vec![
        flex(
            19,
            7,
            km::CreateTopicsRequest::default().with_topics(vec![km::create_topics_request::CreatableTopic::default()
                .with_name(s("fz7").into())
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_configs(vec![km::create_topics_request::CreatableTopicConfig::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("5")))])]),
        ),
        flex(
            20,
            6,
            km::DeleteTopicsRequest::default().with_topics(vec![
                km::delete_topics_request::DeleteTopicState::default().with_name(Some(s("nope").into())),
                km::delete_topics_request::DeleteTopicState::default(),
            ]),
        ),
        flex(
            32,
            4,
            km::DescribeConfigsRequest::default().with_resources(vec![
                km::describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("t")),
            ]),
        ),
        flex(
            33,
            2,
            km::AlterConfigsRequest::default()
                .with_resources(vec![km::alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("t"))])
                .with_validate_only(true),
        ),
        flex(
            44,
            1,
            km::IncrementalAlterConfigsRequest::default()
                .with_resources(vec![
                    km::incremental_alter_configs_request::AlterConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(s("t")),
                ])
                .with_validate_only(true),
        ),
        flex(
            37,
            3,
            km::CreatePartitionsRequest::default()
                .with_topics(vec![km::create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(s("t").into())
                    .with_count(2)])
                .with_validate_only(true),
        ),
        flex(
            60,
            2,
            km::DescribeClusterRequest::default().with_include_fenced_brokers(true),
        ),
        flex(
            22,
            5,
            km::InitProducerIdRequest::default().with_transaction_timeout_ms(1000),
        ),
        flex(
            29,
            3,
            km::DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_resource_name_filter(Some(s("t")))
                .with_pattern_type_filter(2)
                .with_operation(1)
                .with_permission_type(1),
        ),
        flex(
            30,
            2,
            km::CreateAclsRequest::default().with_creations(vec![km::create_acls_request::AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(s("t"))
                .with_resource_pattern_type(3)
                .with_principal(s("User:x"))
                .with_host(s("*"))
                .with_operation(3)
                .with_permission_type(3)]),
        ),
        flex(
            35,
            4,
            km::DescribeLogDirsRequest::default().with_topics(Some(vec![
                km::describe_log_dirs_request::DescribableLogDirTopic::default()
                    .with_topic(s("t").into())
                    .with_partitions(vec![0, 1]),
            ])),
        ),
        flex(
            21,
            2,
            km::DeleteRecordsRequest::default()
                .with_topics(vec![km::delete_records_request::DeleteRecordsTopic::default()
                    .with_name(s("t").into())
                    .with_partitions(vec![
                        km::delete_records_request::DeleteRecordsPartition::default()
                            .with_partition_index(0)
                            .with_offset(-1),
                    ])])
                .with_timeout_ms(100),
        ),
        flex(
            31,
            3,
            km::DeleteAclsRequest::default().with_filters(vec![km::delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1)]),
        ),
    ]
}

/// A frame of `key` at `version`, header and body written by kafka-protocol's
/// generated encoders (flexible versions: compact fields, tagged sections).
fn generated<M: kafka_protocol::protocol::Encodable>(
    key: kafka_protocol::messages::ApiKey,
    version: i16,
    body: &M,
) -> Vec<u8> {
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let mut b = bytes::BytesMut::new();
    kafka_protocol::messages::RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("fuzz")))
        .encode(&mut b, key.request_header_version(version))
        .unwrap();
    body.encode(&mut b, version).unwrap();
    b.to_vec()
}

/// The data-plane requests at their newest versions: Produce v13 and Fetch
/// v18 (topics by id, a fetch session, forgotten topics), ListOffsets v10
/// (max timestamp), Metadata v13 (a topic by id) and OffsetForLeaderEpoch v4.
fn flexible_kafka_requests(batch: &Bytes) -> Vec<Vec<u8>> {
    use kafka_protocol::messages::{self as km, ApiKey, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let id = uuid::Uuid::from_bytes([7; 16]);
    let name = TopicName(StrBytes::from_static_str("t"));
    vec![
        generated(
            ApiKey::Produce,
            13,
            &km::ProduceRequest::default().with_acks(1).with_topic_data(vec![
                km::produce_request::TopicProduceData::default()
                    .with_topic_id(id)
                    .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch.clone()))]),
            ]),
        ),
        generated(
            ApiKey::Fetch,
            18,
            &km::FetchRequest::default()
                .with_max_bytes(1 << 20)
                .with_session_id(5)
                .with_session_epoch(1)
                .with_topics(vec![km::fetch_request::FetchTopic::default()
                    .with_topic_id(id)
                    .with_partitions(vec![km::fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_partition_max_bytes(1 << 20)])])
                .with_forgotten_topics_data(vec![km::fetch_request::ForgottenTopic::default()
                    .with_topic_id(id)
                    .with_partitions(vec![1])]),
        ),
        generated(
            ApiKey::Fetch,
            12,
            &km::FetchRequest::default().with_max_bytes(1 << 20).with_topics(vec![
                km::fetch_request::FetchTopic::default()
                    .with_topic(name.clone())
                    .with_partitions(vec![km::fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_partition_max_bytes(1 << 20)]),
            ]),
        ),
        generated(
            ApiKey::ListOffsets,
            10,
            &km::ListOffsetsRequest::default().with_topics(vec![km::list_offsets_request::ListOffsetsTopic::default()
                .with_name(name.clone())
                .with_partitions(vec![km::list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-3)])]),
        ),
        generated(
            ApiKey::Metadata,
            13,
            &km::MetadataRequest::default().with_topics(Some(vec![
                km::metadata_request::MetadataRequestTopic::default().with_name(Some(name.clone())),
                km::metadata_request::MetadataRequestTopic::default().with_topic_id(id),
            ])),
        ),
        generated(
            ApiKey::OffsetForLeaderEpoch,
            4,
            &km::OffsetForLeaderEpochRequest::default().with_topics(vec![
                km::offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                    .with_topic(name)
                    .with_partitions(vec![
                        km::offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_leader_epoch(0),
                    ]),
            ]),
        ),
    ]
}

/// OffsetDelete v0 (a group's offsets of two topics) and DescribeProducers
/// v0 (flexible), encoded by kafka-protocol's request structs.
fn offset_delete_and_producer_requests() -> Vec<Vec<u8>> {
    use kafka_protocol::messages::{self as km, ApiKey, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use km::offset_delete_request as od;
    let name = |t: &'static str| TopicName(StrBytes::from_static_str(t));
    vec![
        generated(
            ApiKey::OffsetDelete,
            0,
            &km::OffsetDeleteRequest::default()
                .with_group_id(km::GroupId(StrBytes::from_static_str("g")))
                .with_topics(vec![
                    od::OffsetDeleteRequestTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![
                            od::OffsetDeleteRequestPartition::default().with_partition_index(0),
                            od::OffsetDeleteRequestPartition::default().with_partition_index(3),
                        ]),
                    od::OffsetDeleteRequestTopic::default().with_name(name("u")),
                ]),
        ),
        generated(
            ApiKey::DescribeProducers,
            0,
            &km::DescribeProducersRequest::default().with_topics(vec![
                km::describe_producers_request::TopicRequest::default()
                    .with_name(name("t"))
                    .with_partition_indexes(vec![0, -1]),
                km::describe_producers_request::TopicRequest::default().with_name(name("nope")),
            ]),
        ),
    ]
}

/// The transaction requests (AddPartitionsToTxn in its v3 and batched v4
/// shapes, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, Describe- and
/// ListTransactions), encoded by kafka-protocol's request structs.
fn transaction_requests() -> Vec<Vec<u8>> {
    use kafka_protocol::messages::{self as km, ApiKey, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use km::add_partitions_to_txn_request as ap;
    use km::txn_offset_commit_request as tc;
    let s = StrBytes::from_static_str;
    let topics = vec![ap::AddPartitionsToTxnTopic::default()
        .with_name(TopicName(s("t")))
        .with_partitions(vec![0, 1])];
    vec![
        generated(
            ApiKey::AddPartitionsToTxn,
            3,
            &km::AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(km::TransactionalId(s("tx")))
                .with_v3_and_below_producer_id(km::ProducerId(7))
                .with_v3_and_below_topics(topics.clone()),
        ),
        generated(
            ApiKey::AddPartitionsToTxn,
            4,
            &km::AddPartitionsToTxnRequest::default().with_transactions(vec![
                ap::AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(km::TransactionalId(s("tx")))
                    .with_producer_id(km::ProducerId(7))
                    .with_verify_only(true)
                    .with_topics(topics),
            ]),
        ),
        generated(
            ApiKey::AddOffsetsToTxn,
            3,
            &km::AddOffsetsToTxnRequest::default()
                .with_transactional_id(km::TransactionalId(s("tx")))
                .with_producer_id(km::ProducerId(7))
                .with_group_id(km::GroupId(s("g"))),
        ),
        generated(
            ApiKey::TxnOffsetCommit,
            3,
            &km::TxnOffsetCommitRequest::default()
                .with_transactional_id(km::TransactionalId(s("tx")))
                .with_group_id(km::GroupId(s("g")))
                .with_producer_id(km::ProducerId(7))
                .with_member_id(s("m"))
                .with_topics(vec![tc::TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![tc::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(5)
                        .with_committed_metadata(Some(s("m")))])]),
        ),
        generated(
            ApiKey::EndTxn,
            3,
            &km::EndTxnRequest::default()
                .with_transactional_id(km::TransactionalId(s("tx")))
                .with_producer_id(km::ProducerId(7))
                .with_committed(true),
        ),
        generated(
            ApiKey::DescribeTransactions,
            0,
            &km::DescribeTransactionsRequest::default()
                .with_transactional_ids(vec![km::TransactionalId(s("tx")), km::TransactionalId(s("ty"))]),
        ),
        generated(
            ApiKey::ListTransactions,
            2,
            &km::ListTransactionsRequest::default()
                .with_state_filters(vec![s("Ongoing")])
                .with_producer_id_filters(vec![km::ProducerId(7)])
                .with_transactional_id_pattern(Some(s("t.*"))),
        ),
    ]
}

trait NullArray {
    fn nullable_array_len_none(&mut self);
}

impl NullArray for Writer {
    fn nullable_array_len_none(&mut self) {
        self.i32(-1);
    }
}

#[test]
fn kafka_request_frames_decode_or_fail_without_panicking() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let node = rt.block_on(async {
        let node = sluice::node::Node::start_with(
            support::config("n1", &["--max-wait-ms", "1", "--read-cache-bytes", "1048576"]),
            support::memory_backends(),
        )
        .await
        .unwrap();
        node.create_topic("t", 1, Default::default()).await.unwrap();
        assert!(
            support::eventually(Duration::from_secs(10), || open(node.as_ref(), "t")).await,
            "t was not placed"
        );
        node
    });
    // No auto-creation: mutated Metadata requests would otherwise create a
    // topic per case.
    let opts = sluice::kafka::Options {
        max_frame_bytes: 1 << 20,
        auto_create_topics: false,
        ..sluice::kafka::Options::defaults()
    };
    let services = node.services();
    fuzz("kafka", valid_kafka_requests(), |frame| {
        let frame = Bytes::copy_from_slice(frame);
        rt.block_on(async {
            // Errors close the connection; a stuck request would hit the
            // timeout; neither is a failure here. Panics are.
            let _ = tokio::time::timeout(Duration::from_secs(2), sluice::kafka::handle(&services, opts, frame)).await;
        });
    });
    assert!(rt.block_on(async { node.ready() }).ready, "the node still serves");
}

/// Frames as a client sends them: each of `requests` behind its length.
fn framed(requests: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in requests {
        out.extend_from_slice(&(r.len() as u32).to_be_bytes());
        out.extend_from_slice(r);
    }
    out
}

/// The framing layer on a byte stream: the length prefix checked against
/// the cap before login (512 bytes here) and after it (64 KiB), the
/// connection's and the node's byte budgets taken before each body and
/// given back when the frame is dropped. Up to four frames are kept
/// unanswered, as a connection reading ahead does; a frame that does not
/// fit waits, and answering the held ones must let it go on.
#[test]
fn kafka_frames_are_read_within_the_caps_and_budgets_without_panicking() {
    use sluice::kafka::framing::{ConnBudget, FrameCap};
    use std::future::Future;
    use std::task::{Context, Poll};
    const BEFORE_LOGIN: usize = 512;
    const OPEN: usize = 64 * 1024;
    let requests = valid_kafka_requests();
    let big = {
        let mut r = requests[0].clone();
        r.resize(40_000, 0);
        r
    };
    let valid = vec![
        framed(&requests),
        framed(&requests[..2]),
        framed(&[requests[0].clone(), big.clone(), big.clone(), big]),
        // A claim of 100 MiB, and one just over the cap before login.
        [&(100u32 << 20).to_be_bytes()[..], &requests[0]].concat(),
        [&((BEFORE_LOGIN + 1) as u32).to_be_bytes()[..], &[0u8; 600][..]].concat(),
    ];
    let memory = sluice::kafka::RequestMemory::new(OPEN * 2);
    let waker = futures::task::noop_waker();
    fuzz("kafka-framing", valid, |input| {
        let budget = ConnBudget::new(&memory, OPEN);
        let mut r = std::io::Cursor::new(input);
        let mut held = std::collections::VecDeque::new();
        let mut frames = 0usize;
        loop {
            // Logged in after the first two frames.
            let cap = if frames < 2 {
                FrameCap::BeforeLogin(BEFORE_LOGIN)
            } else {
                FrameCap::Open(OPEN)
            };
            let mut read = std::pin::pin!(sluice::kafka::read_frame(&mut r, || cap, &budget));
            let mut cx = Context::from_waker(&waker);
            let result = loop {
                match read.as_mut().poll(&mut cx) {
                    Poll::Ready(result) => break result,
                    // Waiting for budget: answer the oldest held frame.
                    Poll::Pending => {
                        assert!(held.pop_front().is_some(), "a frame waits with nothing held");
                    }
                }
            };
            let Ok(Some(frame)) = result else { break };
            let max = match cap {
                FrameCap::BeforeLogin(n) | FrameCap::Open(n) => n,
            };
            assert!(
                (8..=max).contains(&frame.body.len()),
                "{} bytes past the cap",
                frame.body.len()
            );
            assert_eq!(frame.held.bytes(), frame.body.len());
            assert!(budget.in_use() <= OPEN && memory.in_use() <= OPEN * 2);
            frames += 1;
            held.push_back(frame);
            if held.len() > 4 {
                held.pop_front();
            }
        }
        drop(held);
        assert_eq!((budget.in_use(), memory.in_use()), (0, 0), "every byte is given back");
    });
}

// ------------------------------------------------------------ HTTP

#[test]
fn http_append_bodies_are_answered_without_panicking() {
    use tower::ServiceExt;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let node = rt.block_on(async {
        let node = sluice::node::Node::start_with(support::config("n1", &[]), support::memory_backends())
            .await
            .unwrap();
        node.create_topic("t", 2, Default::default()).await.unwrap();
        assert!(
            support::eventually(Duration::from_secs(10), || open(node.as_ref(), "t")).await,
            "t was not placed"
        );
        node
    });
    let router = sluice::http::router(node.clone());
    let valid: Vec<Vec<u8>> = [
        r#"{"records":[{"value":"a"}]}"#,
        r#"{"records":[{"key":"k","value":"v","headers":{"h":"x","n":null}},{"value":null}]}"#,
        r#"{"records":[{"key":"aGk=","value":"aGk=","headers":{"h":"eA=="}}]}"#,
        r#"{"records":[]}"#,
        r#"{"records":[{"value":"\u00e9\ud83d\ude00","key":"1234567890"}]}"#,
        r#"{"records":[{"value":"a","partition":1,"headers":{"b":"1","a":null,"b":"2"}},{"value":"b","partition":0}]}"#,
        r#"{"records":[{"value":"esc \" \\ \n","key":null,"partition":null,"headers":null}],"records":[{"value":"x"}]}"#,
        r#"{"records":[{"value":[1,{"a":[]}]},{"value":1.5e3,"partition":-1}]}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let i = std::sync::atomic::AtomicU32::new(0);
    fuzz("http-append", valid, |body| {
        let uri = match i.fetch_add(1, Ordering::Relaxed) % 3 {
            0 => "/v1/topics/t/records",
            1 => "/v1/topics/t/partitions/0/records",
            _ => "/v1/topics/t/partitions/1/records?encoding=base64",
        };
        let req = axum::http::Request::post(uri)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body.to_vec()))
            .unwrap();
        let status = rt.block_on(router.clone().oneshot(req)).unwrap().status();
        assert!(
            status.is_success() || status.is_client_error(),
            "an append body was answered {status}"
        );
    });
}

/// Topic creations (the `config` keys are checked by name) and Durable
/// Streams appends with arbitrary `Stream-Seq` values and JSON bodies
/// (split into messages, counted against the request).
#[test]
fn http_topic_bodies_and_stream_appends_are_answered_without_panicking() {
    use tower::ServiceExt;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let node = rt.block_on(async {
        sluice::node::Node::start_with(support::config("n1", &[]), support::memory_backends())
            .await
            .unwrap()
    });
    let router = sluice::http::router(node.clone());
    let send = |req: axum::http::Request<axum::body::Body>| rt.block_on(router.clone().oneshot(req)).unwrap().status();
    let put = axum::http::Request::put("/v1/stream/fz")
        .header("content-type", "application/json")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(send(put), 201);
    let topics: Vec<Vec<u8>> = [
        r#"{"name":"a","partitions":2,"config":{"retention_ms":1000,"retention_bytes":null}}"#,
        r#"{"name":"b","config":{"cleanup_policy":"delete"}}"#,
        r#"{"name":"c","config":{"retention.ms":5,"durable":{}}}"#,
        r#"{"name":"d","config":null}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    fuzz("http-topic-create", topics, |body| {
        let req = axum::http::Request::post("/v1/topics")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body.to_vec()))
            .unwrap();
        let status = send(req);
        assert!(
            status.is_success() || status.is_client_error(),
            "a topic creation was answered {status}"
        );
    });
    let appends: Vec<Vec<u8>> = ["0001\n[1,2,{\"a\":[3]}]", "0002\n\"x\"", "zz\n[ ]", "\n{\"k\":\"v,]\"}"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    fuzz("ds-append-seq", appends, |input| {
        // The first line is the Stream-Seq header, the rest the body.
        let split = input.iter().position(|b| *b == b'\n').unwrap_or(input.len());
        let mut req = axum::http::Request::post("/v1/stream/fz").header("content-type", "application/json");
        if let Ok(seq) = axum::http::HeaderValue::from_bytes(&input[..split]) {
            if !input[..split].is_empty() {
                req = req.header("stream-seq", seq);
            }
        }
        let body = input.get(split + 1..).unwrap_or_default().to_vec();
        let status = send(req.body(axum::body::Body::from(body)).unwrap());
        assert!(
            status.is_success() || status.is_client_error(),
            "a stream append was answered {status}"
        );
    });
}

// ------------------------------------------------------------ stored formats

fn segment() -> sluice::wal::segment::Segment {
    use sluice::wal::segment::{ProducerInfo, Segment, WalEntry};
    Segment {
        node: NodeId::new("n1"),
        epoch: NodeEpoch(3),
        seq: SegmentSeq(9),
        entries: vec![
            WalEntry {
                stream: StreamId::new(TopicId(7), 2),
                stream_epoch: StreamEpoch(4),
                base_offset: Offset(5),
                record_count: 2,
                max_timestamp: 1_000,
                producer: Some(ProducerInfo {
                    producer_id: 11,
                    producer_epoch: 1,
                    base_sequence: 0,
                }),
                batch: encode_batch(Offset(5), &[record("a"), record("b")]),
            },
            WalEntry {
                stream: StreamId::new(TopicId(8), 0),
                stream_epoch: StreamEpoch(1),
                base_offset: Offset(0),
                record_count: 1,
                max_timestamp: 1_000,
                producer: None,
                batch: encode_batch(Offset(0), &[record("c")]),
            },
        ],
    }
}

#[test]
fn wal_objects_decode_or_fail_without_panicking() {
    use sluice::wal::segment::*;
    let fence = FenceMarker {
        fenced_node: NodeId::new("n1"),
        fenced_epoch: NodeEpoch(3),
        seq: SegmentSeq(9),
        holder: NodeId::new("n2"),
        holder_epoch: NodeEpoch(1),
        log_index: sluice::ids::LogIndex(12),
    };
    let valid = vec![
        encode_segment(&segment()).to_vec(),
        encode_fence_marker(&fence).to_vec(),
    ];
    fuzz("wal", valid, |b| {
        if let Ok(WalObject::Segment(s)) = decode_wal_object("wal/x", b) {
            // A value that decodes is one the encoder can write again.
            assert_eq!(decode_segment("wal/x", &encode_segment(&s)).unwrap(), s);
        }
    });
}

#[test]
fn data_object_footers_decode_or_fail_without_panicking() {
    use sluice::stream::dataobj::{decode_footer, verify_chunk, DataObjectBuilder};
    let mut b = DataObjectBuilder::new();
    let one = encode_batch(Offset(0), &[record("a"), record("b")]);
    let two = encode_batch(Offset(10), &[record("c")]);
    b.add_chunk(StreamId::new(TopicId(1), 0), Offset(0), Offset(2), 1_000, 2, &[one]);
    b.add_chunk(StreamId::new(TopicId(2), 1), Offset(10), Offset(11), 1_000, 1, &[two]);
    let (object, _) = b.finish();
    fuzz("dataobj", vec![object.to_vec()], |o| {
        if let Ok(chunks) = decode_footer("data/x", o) {
            for c in &chunks {
                let (s, e) = (c.byte_start as usize, c.byte_end as usize);
                if s <= e && e <= o.len() {
                    let _ = verify_chunk("data/x", c, &o[s..e]);
                }
            }
        }
    });
}

#[test]
fn record_batches_decode_or_fail_without_panicking() {
    use sluice::batch::marker::{decode_marker, encode_marker, Marker};
    use sluice::batch::{decode_records, parse_batch};
    let valid = vec![
        encode_batch(Offset(0), &[record("a"), record("b")]).to_vec(),
        encode_batch(Offset(99), &[record("")]).to_vec(),
        encode_marker(7, 1, Marker::Commit, 3, 1000).to_vec(),
        encode_marker(7, 1, Marker::Abort, 3, 1000).to_vec(),
    ];
    fuzz("batch", valid, |b| {
        let _ = parse_batch("batch", b);
        let _ = decode_records("batch", b);
        let _ = decode_marker("batch", b);
    });
}

/// What the console shows of a group: the assignment bytes a classic
/// group's leader sent (client bytes) and the membership records of both
/// kinds, decoded by `kafka::groups::view`.
#[test]
fn group_views_decode_or_fail_without_panicking() {
    use sluice::api::GroupState;
    use sluice::kafka::groups::view::{consumer_assignment, view};
    let mut w = Writer::default();
    w.i16(1);
    w.array_len(2);
    for (t, ps) in [("orders", &[0, 2][..]), ("audit", &[1][..])] {
        w.string(t);
        w.array_len(ps.len());
        for p in ps {
            w.i32(*p);
        }
    }
    w.i32(-1);
    let assignment = w.buf.to_vec();
    let consumer = br#"{"version":1,"group_id":"g","group_epoch":2,"assignment_epoch":2,"members":{},"target":{},"subscribed_meta":{}}"#;
    let names = std::collections::BTreeMap::new();
    fuzz(
        "group view",
        vec![assignment, consumer.to_vec(), b"SCG\x01".to_vec()],
        |b| {
            let _ = consumer_assignment(&Bytes::copy_from_slice(b));
            for kind in ["classic", "consumer"] {
                let _ = view(
                    &GroupState {
                        kind: kind.into(),
                        version: 1,
                        data: b.to_vec(),
                    },
                    &names,
                );
            }
        },
    );
}

#[test]
fn scram_messages_parse_or_fail_without_panicking() {
    use sluice::auth::scram::{client_final, Challenge, ClientFirst, Credential, Mechanism};
    for m in Mechanism::ALL {
        let first = ClientFirst::parse(b"n,,n=0123456789abcdef,r=fuzznonce").unwrap();
        let credential = Credential::derive(m, b"slc_0123456789abcdef_pw", &[7; 16], 4096);
        let (challenge, server_first) = Challenge::new(&first, credential, "servernonce");
        let server_first = String::from_utf8(server_first).unwrap();
        let (last, _) = client_final(m, "slc_0123456789abcdef_pw", &first.bare, &server_first).unwrap();
        let firsts = vec![
            b"n,,n=0123456789abcdef,r=fuzznonce".to_vec(),
            b"n,a=us=2Cer,n=us=2Cer,r=abc,tokenauth=true".to_vec(),
        ];
        fuzz("scram-client-first", firsts, |b| {
            let _ = ClientFirst::parse(b);
        });
        fuzz("scram-client-final", vec![last.into_bytes()], |b| {
            let _ = challenge.finish(b);
        });
    }
}

#[test]
fn metadata_log_entries_and_snapshots_decode_or_fail_without_panicking() {
    use sluice::meta::command::Command;
    use sluice::meta::entry::*;
    use sluice::meta::view::{Proposer, View};
    let entry = LogEntry {
        proposer: Proposer {
            node: NodeId::new("n1"),
            epoch: Some(NodeEpoch(2)),
        },
        proposal_id: 7,
        commands: vec![Command::Heartbeat {
            node: NodeId::new("n1"),
            epoch: NodeEpoch(2),
        }],
    };
    let valid = vec![encode_entry(&entry), encode_snapshot(&View::default())];
    fuzz("metalog", valid, |b| {
        if let Ok(e) = decode_entry("log/x", b) {
            assert_eq!(decode_entry("log/x", &encode_entry(&e)).unwrap(), e);
        }
        let _ = decode_snapshot("snap/x", b);
    });
}
