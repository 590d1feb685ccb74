//! The admin APIs: codecs (every advertised version against kafka-protocol's
//! generated structs as the oracle, bounds) and each handler over a real
//! in-memory node, including from a node that does not hold the lease.

use super::*;
use crate::kafka::admin::acode;
use crate::kafka::admin_proto::*;
use crate::kafka::header::{flexible_request, flexible_response};
use crate::meta::{CleanupPolicy, TopicConfig};
use kafka_protocol::messages as km;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The versions of `key` that ApiVersions advertises.
fn versions_of(key: i16) -> std::ops::RangeInclusive<i16> {
    let (_, min, max) = SUPPORTED.iter().find(|r| r.0 == key).copied().unwrap();
    min..=max
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Encodes a kafka-protocol request struct at `version`.
fn enc<M: Encodable>(m: &M, version: i16) -> Vec<u8> {
    let mut b = bytes::BytesMut::new();
    m.encode(&mut b, version).unwrap();
    b.to_vec()
}

/// A request frame with the header its key and version use.
fn admin_request(key: i16, version: i16, corr: i32, body: &[u8]) -> Bytes {
    let mut w = Writer::default();
    w.i16(key);
    w.i16(version);
    w.i32(corr);
    w.nullable_string(Some("admin-test"));
    if flexible_request(key, version) {
        w.no_tagged_fields();
    }
    w.buf.extend_from_slice(body);
    w.buf.freeze()
}

/// The answer, just past the correlation id.
async fn admin_call(engine: &Services, key: i16, version: i16, body: &[u8]) -> Reader {
    call(engine, admin_request(key, version, 7, body)).await
}

/// A response body (past its header) decoded by kafka-protocol, which
/// must consume it exactly.
fn decoded<M: Decodable>(mut r: Reader, key: i16, version: i16) -> M {
    if flexible_response(key, version) {
        r.tagged_fields().unwrap();
    }
    let mut b = r.bytes_exact(r.remaining()).unwrap();
    let m = M::decode(&mut b, version).unwrap();
    assert!(b.is_empty(), "key {key} v{version}: {} bytes left", b.len());
    m
}

/// One topic for a CreateTopics body: (name, partitions, replication, configs).
type NewTopic<'a> = (&'a str, i32, i16, &'a [(&'a str, Option<&'a str>)]);

fn create_topics_req(topics: &[NewTopic<'_>], validate_only: bool) -> km::CreateTopicsRequest {
    use km::create_topics_request as c;
    km::CreateTopicsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|(name, partitions, replication, configs)| {
                    c::CreatableTopic::default()
                        .with_name(sb(name).into())
                        .with_num_partitions(*partitions)
                        .with_replication_factor(*replication)
                        .with_configs(
                            configs
                                .iter()
                                .map(|(k, v)| {
                                    c::CreatableTopicConfig::default()
                                        .with_name(sb(k))
                                        .with_value(v.map(sb))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
        .with_timeout_ms(5000)
        .with_validate_only(validate_only)
}

fn create_topics_body(version: i16, topics: &[NewTopic<'_>], validate_only: bool) -> Vec<u8> {
    enc(&create_topics_req(topics, validate_only), version)
}

/// CreateTopics / DeleteTopics / CreatePartitions answers: (name, error, message).
fn topic_results(r: Reader, key: i16, version: i16) -> Vec<(String, i16, Option<String>)> {
    let s = |s: &StrBytes| s.to_string();
    match key {
        CREATE_TOPICS => decoded::<km::CreateTopicsResponse>(r, key, version)
            .topics
            .iter()
            .map(|t| (s(&t.name.0), t.error_code, t.error_message.as_ref().map(s)))
            .collect(),
        DELETE_TOPICS => decoded::<km::DeleteTopicsResponse>(r, key, version)
            .responses
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map_or(String::new(), |n| s(&n.0));
                (name, t.error_code, t.error_message.as_ref().map(s))
            })
            .collect(),
        _ => decoded::<km::CreatePartitionsResponse>(r, key, version)
            .results
            .iter()
            .map(|t| (s(&t.name.0), t.error_code, t.error_message.as_ref().map(s)))
            .collect(),
    }
}

async fn create_topics(
    engine: &Services,
    version: i16,
    topics: &[NewTopic<'_>],
    validate_only: bool,
) -> Vec<(String, i16, Option<String>)> {
    let body = create_topics_body(version, topics, validate_only);
    topic_results(
        admin_call(engine, CREATE_TOPICS, version, &body).await,
        CREATE_TOPICS,
        version,
    )
}

fn errors(results: &[(String, i16, Option<String>)]) -> Vec<i16> {
    results.iter().map(|r| r.1).collect()
}

/// A DeleteTopics v1-5 body naming topics.
fn delete_topics_body(names: &[&str]) -> Vec<u8> {
    delete_topics_body_at(3, names)
}

fn delete_topics_req(version: i16, names: &[&str]) -> km::DeleteTopicsRequest {
    let req = km::DeleteTopicsRequest::default().with_timeout_ms(5000);
    if version >= 6 {
        req.with_topics(
            names
                .iter()
                .map(|n| km::delete_topics_request::DeleteTopicState::default().with_name(Some(sb(n).into())))
                .collect(),
        )
    } else {
        req.with_topic_names(names.iter().map(|n| sb(n).into()).collect())
    }
}

fn delete_topics_body_at(version: i16, names: &[&str]) -> Vec<u8> {
    enc(&delete_topics_req(version, names), version)
}

/// One topic for a CreatePartitions body: (name, count, assignments).
type Growth<'a> = (&'a str, i32, Option<&'a [&'a [i32]]>);

fn create_partitions_req(topics: &[Growth<'_>], validate_only: bool) -> km::CreatePartitionsRequest {
    use km::create_partitions_request as c;
    km::CreatePartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|(name, count, assignments)| {
                    c::CreatePartitionsTopic::default()
                        .with_name(sb(name).into())
                        .with_count(*count)
                        .with_assignments(assignments.map(|a| {
                            a.iter()
                                .map(|b| {
                                    c::CreatePartitionsAssignment::default()
                                        .with_broker_ids(b.iter().map(|&i| i.into()).collect())
                                })
                                .collect()
                        }))
                })
                .collect(),
        )
        .with_timeout_ms(5000)
        .with_validate_only(validate_only)
}

fn create_partitions_body(topics: &[Growth<'_>], validate_only: bool) -> Vec<u8> {
    enc(&create_partitions_req(topics, validate_only), 1)
}

fn describe_configs_req(
    resources: &[(i8, &str, Option<&[&str]>)],
    synonyms: bool,
    docs: bool,
) -> km::DescribeConfigsRequest {
    km::DescribeConfigsRequest::default()
        .with_resources(
            resources
                .iter()
                .map(|(t, name, keys)| {
                    km::describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_type(*t)
                        .with_resource_name(sb(name))
                        .with_configuration_keys(keys.map(|k| k.iter().map(|k| sb(k)).collect()))
                })
                .collect(),
        )
        .with_include_synonyms(synonyms)
        .with_include_documentation(docs)
}

fn describe_configs_body(
    version: i16,
    resources: &[(i8, &str, Option<&[&str]>)],
    synonyms: bool,
    docs: bool,
) -> Vec<u8> {
    let req = describe_configs_req(resources, synonyms && version >= 1, docs && version >= 3);
    enc(&req, version)
}

/// A decoded DescribeConfigs result: (error, type, name, configs).
type Described = (i16, i8, String, Vec<ConfigEntry>);

fn described(r: Reader, version: i16) -> Vec<Described> {
    let resp: km::DescribeConfigsResponse = decoded(r, DESCRIBE_CONFIGS, version);
    resp.results
        .iter()
        .map(|res| {
            let configs = res
                .configs
                .iter()
                .map(|c| ConfigEntry {
                    name: c.name.to_string(),
                    value: c.value.as_ref().map(|v| v.to_string()),
                    read_only: c.read_only,
                    source: c.config_source,
                    is_sensitive: c.is_sensitive,
                    synonyms: c
                        .synonyms
                        .iter()
                        .map(|s| (s.name.to_string(), s.value.as_ref().map(|v| v.to_string()), s.source))
                        .collect(),
                    config_type: c.config_type,
                    documentation: c.documentation.as_ref().map(|d| d.to_string()),
                })
                .collect();
            (
                res.error_code,
                res.resource_type,
                res.resource_name.to_string(),
                configs,
            )
        })
        .collect()
}

/// (name, value, source) of a topic's configs, via DescribeConfigs v1.
/// A topic's `cleanup.policy`, `retention.bytes` and `retention.ms` as
/// DescribeConfigs v1 shows them (the compaction settings: see
/// [`all_topic_configs`]).
async fn topic_configs(engine: &Services, topic: &str) -> Vec<(String, String, i8)> {
    let retention = ["cleanup.policy", "retention.bytes", "retention.ms"];
    let mut all = all_topic_configs(engine, topic).await;
    all.retain(|(name, _, _)| retention.contains(&name.as_str()));
    all
}

async fn all_topic_configs(engine: &Services, topic: &str) -> Vec<(String, String, i8)> {
    let body = describe_configs_body(1, &[(resource::TOPIC, topic, None)], false, false);
    let d = described(admin_call(engine, DESCRIBE_CONFIGS, 1, &body).await, 1);
    assert_eq!(d[0].0, code::NONE);
    d[0].3
        .iter()
        .map(|c| (c.name.clone(), c.value.clone().unwrap(), c.source))
        .collect()
}

/// One resource for an AlterConfigs body: (type, name, [(key, op, value)]).
type AlterResource<'a> = (i8, &'a str, &'a [(&'a str, i8, Option<&'a str>)]);

fn alter_configs_body_at(
    version: i16,
    incremental: bool,
    resources: &[AlterResource<'_>],
    validate_only: bool,
) -> Vec<u8> {
    if incremental {
        use km::incremental_alter_configs_request as i;
        let req = km::IncrementalAlterConfigsRequest::default()
            .with_resources(
                resources
                    .iter()
                    .map(|(t, name, configs)| {
                        i::AlterConfigsResource::default()
                            .with_resource_type(*t)
                            .with_resource_name(sb(name))
                            .with_configs(
                                configs
                                    .iter()
                                    .map(|(k, op, v)| {
                                        i::AlterableConfig::default()
                                            .with_name(sb(k))
                                            .with_config_operation(*op)
                                            .with_value(v.map(sb))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .with_validate_only(validate_only);
        enc(&req, version)
    } else {
        use km::alter_configs_request as a;
        let req = km::AlterConfigsRequest::default()
            .with_resources(
                resources
                    .iter()
                    .map(|(t, name, configs)| {
                        a::AlterConfigsResource::default()
                            .with_resource_type(*t)
                            .with_resource_name(sb(name))
                            .with_configs(
                                configs
                                    .iter()
                                    .map(|(k, _, v)| {
                                        a::AlterableConfig::default().with_name(sb(k)).with_value(v.map(sb))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .with_validate_only(validate_only);
        enc(&req, version)
    }
}

fn alter_configs_body(incremental: bool, resources: &[AlterResource<'_>], validate_only: bool) -> Vec<u8> {
    alter_configs_body_at(if incremental { 0 } else { 1 }, incremental, resources, validate_only)
}

/// (error, message) per resource.
fn altered(r: Reader, incremental: bool, version: i16) -> Vec<(i16, Option<String>)> {
    if incremental {
        let resp: km::IncrementalAlterConfigsResponse = decoded(r, INCREMENTAL_ALTER_CONFIGS, version);
        resp.responses
            .iter()
            .map(|x| (x.error_code, x.error_message.as_ref().map(|m| m.to_string())))
            .collect()
    } else {
        let resp: km::AlterConfigsResponse = decoded(r, ALTER_CONFIGS, version);
        resp.responses
            .iter()
            .map(|x| (x.error_code, x.error_message.as_ref().map(|m| m.to_string())))
            .collect()
    }
}

async fn alter(
    engine: &Services,
    incremental: bool,
    resources: &[AlterResource<'_>],
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let (key, version) = if incremental {
        (INCREMENTAL_ALTER_CONFIGS, 0)
    } else {
        (ALTER_CONFIGS, 1)
    };
    let body = alter_configs_body(incremental, resources, validate_only);
    altered(admin_call(engine, key, version, &body).await, incremental, version)
}

async fn wait_partitions(engine: &Services, topic: &str, n: usize) {
    for _ in 0..300 {
        if engine
            .topics
            .describe_topic(topic)
            .is_ok_and(|d| d.partition_info.len() == n)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{topic} never had {n} partitions");
}

// ------------------------------------------------------------ codecs

#[test]
fn create_topics_requests_decode_at_every_version() {
    for version in versions_of(CREATE_TOPICS) {
        let mut req = create_topics_req(&[("t", 3, -1, &[("retention.ms", Some("5")), ("x", None)])], true);
        req.topics[0].assignments = vec![km::create_topics_request::CreatableReplicaAssignment::default()
            .with_partition_index(0)
            .with_broker_ids(vec![1.into(), 2.into()])];
        let body = enc(&req, version);
        let got = decode_create_topics(&mut Reader::new(Bytes::from(body.clone())), version).unwrap();
        assert_eq!(
            got,
            CreateTopicsRequest {
                topics: vec![CreatableTopic {
                    name: "t".into(),
                    num_partitions: 3,
                    replication_factor: -1,
                    assignments: vec![(0, vec![1, 2])],
                    configs: vec![("retention.ms".into(), Some("5".into())), ("x".into(), None)],
                }],
                timeout_ms: 5000,
                validate_only: version >= 1,
            },
            "v{version}"
        );
        truncations_fail(&body, |r| decode_create_topics(r, version).map(|_| ()));
    }
}

/// Every strict prefix of a valid body is refused.
fn truncations_fail(body: &[u8], decode: impl Fn(&mut Reader) -> DecodeResult<()>) {
    for cut in 0..body.len() {
        let mut r = Reader::new(Bytes::copy_from_slice(&body[..cut]));
        assert!(decode(&mut r).is_err(), "cut at {cut} of {}", body.len());
    }
}

use super::wire::DecodeResult;

#[test]
fn delete_topics_requests_decode_at_every_version_by_name_or_id() {
    for version in versions_of(DELETE_TOPICS) {
        let mut req = delete_topics_req(version, &["t", "u"]);
        if version >= 6 {
            req.topics.push(
                km::delete_topics_request::DeleteTopicState::default().with_topic_id(uuid::Uuid::from_bytes([7; 16])),
            );
        }
        let body = enc(&req, version);
        let got = decode_delete_topics(&mut Reader::new(Bytes::from(body.clone())), version).unwrap();
        let mut want = vec![TopicRef::Name("t".into()), TopicRef::Name("u".into())];
        if version >= 6 {
            want.push(TopicRef::Id(crate::ids::TopicUuid([7; 16])));
        }
        assert_eq!(got.topics, want, "v{version}");
        assert_eq!(got.timeout_ms, 5000);
        truncations_fail(&body, |r| decode_delete_topics(r, version).map(|_| ()));
    }
}

#[test]
fn create_partitions_requests_decode_at_every_version() {
    for version in versions_of(CREATE_PARTITIONS) {
        let body = enc(
            &create_partitions_req(&[("t", 4, Some(&[&[1, 2]])), ("u", 2, None)], true),
            version,
        );
        let got = decode_create_partitions(&mut Reader::new(Bytes::from(body.clone())), version).unwrap();
        assert_eq!(got.topics[0].assignments, Some(vec![vec![1, 2]]), "v{version}");
        assert_eq!((got.topics[1].name.as_str(), got.topics[1].count), ("u", 2));
        assert_eq!(got.topics[1].assignments, None);
        assert!(got.validate_only);
        truncations_fail(&body, |r| decode_create_partitions(r, version).map(|_| ()));
    }
}

#[test]
fn describe_configs_requests_decode_at_every_version() {
    for version in versions_of(DESCRIBE_CONFIGS) {
        let req = describe_configs_req(&[(2, "t", Some(&["retention.ms"])), (4, "1", None)], true, version >= 3);
        let body = enc(&req, version);
        let got = decode_describe_configs(&mut Reader::new(Bytes::from(body.clone())), version).unwrap();
        assert_eq!(
            got.resources,
            vec![
                DescribeConfigsResource {
                    resource_type: 2,
                    name: "t".into(),
                    keys: Some(vec!["retention.ms".into()])
                },
                DescribeConfigsResource {
                    resource_type: 4,
                    name: "1".into(),
                    keys: None
                },
            ],
            "v{version}"
        );
        assert!(got.include_synonyms);
        assert_eq!(got.include_documentation, version >= 3);
        truncations_fail(&body, |r| decode_describe_configs(r, version).map(|_| ()));
    }
}

#[test]
fn alter_configs_requests_decode_at_every_version() {
    for incremental in [false, true] {
        let key = if incremental {
            INCREMENTAL_ALTER_CONFIGS
        } else {
            ALTER_CONFIGS
        };
        for version in versions_of(key) {
            let body = alter_configs_body_at(
                version,
                incremental,
                &[(
                    2,
                    "t",
                    &[
                        ("retention.ms", op::DELETE, Some("5")),
                        ("cleanup.policy", op::SET, None),
                    ],
                )],
                true,
            );
            let got = decode_alter_configs(&mut Reader::new(Bytes::from(body.clone())), version, incremental).unwrap();
            let first_op = if incremental { op::DELETE } else { op::SET };
            assert_eq!(
                got,
                AlterConfigsRequest {
                    resources: vec![AlterConfigsResource {
                        resource_type: 2,
                        name: "t".into(),
                        configs: vec![
                            AlterableConfig {
                                name: "retention.ms".into(),
                                op: first_op,
                                value: Some("5".into())
                            },
                            AlterableConfig {
                                name: "cleanup.policy".into(),
                                op: op::SET,
                                value: None
                            },
                        ],
                    }],
                    validate_only: true,
                },
                "key {key} v{version}"
            );
            truncations_fail(&body, |r| decode_alter_configs(r, version, incremental).map(|_| ()));
        }
    }
}

#[test]
fn describe_cluster_requests_decode_at_every_version() {
    for version in versions_of(DESCRIBE_CLUSTER) {
        let req = km::DescribeClusterRequest::default()
            .with_include_cluster_authorized_operations(true)
            .with_endpoint_type(if version >= 1 { endpoint::CONTROLLERS } else { 1 })
            .with_include_fenced_brokers(version >= 2);
        let body = enc(&req, version);
        let got = decode_describe_cluster(&mut Reader::new(Bytes::from(body.clone())), version).unwrap();
        assert_eq!(
            got,
            DescribeClusterRequest {
                include_cluster_authorized_operations: true,
                endpoint_type: if version >= 1 {
                    endpoint::CONTROLLERS
                } else {
                    endpoint::BROKERS
                },
                include_fenced_brokers: version >= 2,
            }
        );
        truncations_fail(&body, |r| decode_describe_cluster(r, version).map(|_| ()));
    }
}

fn response_reader(w: Writer) -> Bytes {
    w.buf.freeze()
}

fn decode_exact<M: Decodable>(b: Bytes, version: i16) -> M {
    let mut b = b;
    let m = M::decode(&mut b, version).unwrap();
    assert!(b.is_empty(), "v{version}: {} bytes left", b.len());
    m
}

fn sample_entry() -> ConfigEntry {
    ConfigEntry {
        name: "retention.ms".into(),
        value: Some("5".into()),
        read_only: false,
        source: source::DYNAMIC_TOPIC_CONFIG,
        is_sensitive: false,
        synonyms: vec![("retention.ms".into(), Some("5".into()), source::DYNAMIC_TOPIC_CONFIG)],
        config_type: config_type::LONG,
        documentation: Some("doc".into()),
    }
}

#[test]
fn topic_results_decode_with_kafka_protocol_at_every_version() {
    let made = TopicResult {
        name: Some("t".into()),
        topic_id: crate::ids::TopicUuid([9; 16]),
        created: Some(Created {
            num_partitions: 3,
            replication_factor: 1,
            configs: vec![sample_entry()],
        }),
        ..TopicResult::default()
    };
    let failed = TopicResult {
        name: Some("u".into()),
        error_code: acode::TOPIC_ALREADY_EXISTS,
        error_message: Some("exists".into()),
        ..TopicResult::default()
    };
    for version in versions_of(CREATE_TOPICS) {
        let mut w = Writer::default();
        encode_create_topics(&mut w, version, &[made.clone(), failed.clone()]).unwrap();
        let r: km::CreateTopicsResponse = decode_exact(response_reader(w), version);
        assert_eq!(r.topics[0].name.0.as_str(), "t");
        assert_eq!(r.topics[1].error_code, acode::TOPIC_ALREADY_EXISTS);
        assert_eq!(r.topics[1].error_message.as_deref(), Some("exists"));
        if version >= 5 {
            assert_eq!((r.topics[0].num_partitions, r.topics[0].replication_factor), (3, 1));
            let configs = r.topics[0].configs.as_ref().unwrap();
            assert_eq!(configs[0].name.as_str(), "retention.ms");
            assert_eq!(configs[0].config_source, source::DYNAMIC_TOPIC_CONFIG);
            assert_eq!(r.topics[1].num_partitions, -1);
        }
        if version >= 7 {
            assert_eq!(r.topics[0].topic_id, uuid::Uuid::from_bytes([9; 16]));
        }
    }
    let unknown_id = TopicResult {
        name: None,
        error_code: acode::UNKNOWN_TOPIC_ID,
        error_message: Some("no topic has that id".into()),
        topic_id: crate::ids::TopicUuid([4; 16]),
        created: None,
    };
    for version in versions_of(DELETE_TOPICS) {
        let results = if version >= 6 {
            vec![failed.clone(), unknown_id.clone()]
        } else {
            vec![failed.clone()]
        };
        let mut w = Writer::default();
        encode_delete_topics(&mut w, version, &results).unwrap();
        let r: km::DeleteTopicsResponse = decode_exact(response_reader(w), version);
        assert_eq!(r.responses[0].name.as_ref().unwrap().0.as_str(), "u");
        assert_eq!(r.responses[0].error_code, acode::TOPIC_ALREADY_EXISTS);
        if version >= 5 {
            assert_eq!(r.responses[0].error_message.as_deref(), Some("exists"));
        }
        if version >= 6 {
            assert_eq!(r.responses[1].name, None);
            assert_eq!(r.responses[1].topic_id, uuid::Uuid::from_bytes([4; 16]));
            assert_eq!(r.responses[1].error_code, acode::UNKNOWN_TOPIC_ID);
        }
    }
    for version in versions_of(CREATE_PARTITIONS) {
        let mut w = Writer::default();
        encode_create_partitions(&mut w, version, std::slice::from_ref(&failed)).unwrap();
        let r: km::CreatePartitionsResponse = decode_exact(response_reader(w), version);
        assert_eq!(r.results[0].name.0.as_str(), "u");
        assert_eq!(r.results[0].error_message.as_deref(), Some("exists"));
    }
}

#[test]
fn describe_configs_responses_decode_with_kafka_protocol_at_every_version() {
    let res = DescribeConfigsResult {
        error_code: 0,
        error_message: None,
        resource_type: resource::TOPIC,
        resource_name: "t".into(),
        configs: vec![sample_entry()],
    };
    for version in versions_of(DESCRIBE_CONFIGS) {
        let mut w = Writer::default();
        encode_describe_configs(&mut w, version, std::slice::from_ref(&res)).unwrap();
        let r: km::DescribeConfigsResponse = decode_exact(response_reader(w), version);
        let c = &r.results[0].configs[0];
        assert_eq!((c.name.as_str(), c.value.as_deref()), ("retention.ms", Some("5")));
        assert_eq!(c.config_source, source::DYNAMIC_TOPIC_CONFIG);
        assert_eq!(c.synonyms.len(), 1);
        if version >= 3 {
            assert_eq!(c.config_type, config_type::LONG);
            assert_eq!(c.documentation.as_deref(), Some("doc"));
        }
    }
}

#[test]
fn alter_and_describe_cluster_responses_decode_with_kafka_protocol_at_every_version() {
    let res = AlterConfigsResult {
        error_code: acode::INVALID_CONFIG,
        error_message: Some("no".into()),
        resource_type: resource::TOPIC,
        resource_name: "t".into(),
    };
    for (incremental, key) in [(false, ALTER_CONFIGS), (true, INCREMENTAL_ALTER_CONFIGS)] {
        for version in versions_of(key) {
            let mut w = Writer::default();
            encode_alter_configs(&mut w, version, incremental, std::slice::from_ref(&res)).unwrap();
            let b = response_reader(w);
            let (e, m) = if incremental {
                let r: km::IncrementalAlterConfigsResponse = decode_exact(b, version);
                (r.responses[0].error_code, r.responses[0].error_message.clone())
            } else {
                let r: km::AlterConfigsResponse = decode_exact(b, version);
                (r.responses[0].error_code, r.responses[0].error_message.clone())
            };
            assert_eq!((e, m.as_deref()), (acode::INVALID_CONFIG, Some("no")));
        }
    }
    let resp = DescribeClusterResponse {
        error_code: 0,
        error_message: None,
        endpoint_type: endpoint::BROKERS,
        cluster_id: "c".into(),
        controller: 7,
        brokers: vec![ClusterBroker {
            broker: Broker {
                node_id: 7,
                host: "h".into(),
                port: 9092,
            },
            fenced: true,
        }],
    };
    for version in versions_of(DESCRIBE_CLUSTER) {
        let mut w = Writer::default();
        encode_describe_cluster(&mut w, version, &resp).unwrap();
        let r: km::DescribeClusterResponse = decode_exact(response_reader(w), version);
        assert_eq!((r.cluster_id.as_str(), r.controller_id.0), ("c", 7));
        let b = &r.brokers[0];
        assert_eq!((b.broker_id.0, b.host.as_str(), b.port), (7, "h", 9092));
        assert_eq!(b.is_fenced, version >= 2);
        assert_eq!(r.cluster_authorized_operations, i32::MIN);
    }
}

#[test]
fn admin_decoders_are_bounded_under_random_frames() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
    let bodies = admin_bodies();
    for i in 0..20_000 {
        let (key, version, body) = &bodies[i % bodies.len()];
        let mut b = body.clone();
        match i % 3 {
            0 => {
                for _ in 0..rng.random_range(1..4) {
                    let at = rng.random_range(0..b.len());
                    b[at] = [0x00, 0x7f, 0x80, 0xff][rng.random_range(0..4)];
                }
            }
            1 => b.truncate(rng.random_range(0..b.len())),
            _ => b = (0..rng.random_range(0..64)).map(|_| rng.random::<u8>()).collect(),
        }
        let mut r = Reader::new(Bytes::from(b));
        let _ = match *key {
            CREATE_TOPICS => decode_create_topics(&mut r, *version).map(|_| ()),
            DELETE_TOPICS => decode_delete_topics(&mut r, *version).map(|_| ()),
            CREATE_PARTITIONS => decode_create_partitions(&mut r, *version).map(|_| ()),
            DESCRIBE_CONFIGS => decode_describe_configs(&mut r, *version).map(|_| ()),
            ALTER_CONFIGS => decode_alter_configs(&mut r, *version, false).map(|_| ()),
            INCREMENTAL_ALTER_CONFIGS => decode_alter_configs(&mut r, *version, true).map(|_| ()),
            _ => decode_describe_cluster(&mut r, *version).map(|_| ()),
        };
    }
    // A lying count is refused before anything is allocated.
    let mut r = Reader::new(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]));
    assert!(decode_create_topics(&mut r, 4).is_err());
    let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0]));
    assert!(decode_create_topics(&mut r, 7).is_err(), "a compact count of 4 billion");
}

/// A valid body of every admin API at every version, for fuzzing.
fn admin_bodies() -> Vec<(i16, i16, Vec<u8>)> {
    let mut out = Vec::new();
    for v in versions_of(CREATE_TOPICS) {
        out.push((
            CREATE_TOPICS,
            v,
            create_topics_body(v, &[("t", 3, -1, &[("retention.ms", Some("5"))])], false),
        ));
    }
    for v in versions_of(DELETE_TOPICS) {
        out.push((DELETE_TOPICS, v, delete_topics_body_at(v, &["t", "u"])));
    }
    for v in versions_of(CREATE_PARTITIONS) {
        out.push((
            CREATE_PARTITIONS,
            v,
            enc(&create_partitions_req(&[("t", 4, Some(&[&[1, 2]]))], false), v),
        ));
    }
    for v in versions_of(DESCRIBE_CONFIGS) {
        out.push((
            DESCRIBE_CONFIGS,
            v,
            describe_configs_body(v, &[(2, "t", Some(&["retention.ms"]))], true, true),
        ));
    }
    for v in versions_of(ALTER_CONFIGS) {
        out.push((
            ALTER_CONFIGS,
            v,
            alter_configs_body_at(v, false, &[(2, "t", &[("retention.ms", 0, Some("5"))])], false),
        ));
    }
    for v in versions_of(INCREMENTAL_ALTER_CONFIGS) {
        out.push((
            INCREMENTAL_ALTER_CONFIGS,
            v,
            alter_configs_body_at(v, true, &[(2, "t", &[("retention.ms", 1, None)])], false),
        ));
    }
    for v in versions_of(DESCRIBE_CLUSTER) {
        out.push((DESCRIBE_CLUSTER, v, enc(&km::DescribeClusterRequest::default(), v)));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_frames_against_a_real_node_never_panic() {
    let node = node_with(&["--max-wait-ms", "1"]).await;
    node.create_topic("t", 1, Default::default()).await.unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
    let bodies = admin_bodies();
    for i in 0..2_000 {
        let (key, version, body) = &bodies[i % bodies.len()];
        let mut f = admin_request(*key, *version, 1, body).to_vec();
        for _ in 0..rng.random_range(1..4) {
            let at = rng.random_range(8..f.len());
            f[at] = [0x00, 0x7f, 0x80, 0xff][rng.random_range(0..4)];
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), handle(&node.services(), OPTS, Bytes::from(f))).await;
    }
    assert!(node.ready().ready, "the node is still serving");
}

// ------------------------------------------------------------ handlers

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_creates_validates_and_refuses_with_kafka_codes() {
    let node = node().await;
    let engine = &node.services();
    let configs: &[(&str, Option<&str>)] = &[
        ("retention.ms", Some("60000")),
        ("retention.bytes", Some("-1")),
        ("cleanup.policy", Some("delete")),
    ];
    let got = create_topics(engine, 4, &[("a", 3, 1, configs), ("b", -1, -1, &[])], false).await;
    assert_eq!(got, vec![("a".into(), 0, None), ("b".into(), 0, None)]);
    let a = engine.topics.describe_topic("a").unwrap();
    assert_eq!(a.partitions, 3);
    assert_eq!(
        a.config,
        TopicConfig {
            retention_ms: Some(60000),
            retention_bytes: Some(-1),
            cleanup_policy: Some(CleanupPolicy::Delete),
            ..TopicConfig::default()
        }
    );
    assert_eq!(
        engine.topics.describe_topic("b").unwrap().partitions,
        1,
        "-1: the default"
    );
    wait_open(engine, "a").await;

    // validate_only creates nothing, but reports what creating would.
    let got = create_topics(engine, 2, &[("v", 2, 3, &[]), ("a", 1, 1, &[])], true).await;
    assert_eq!(errors(&got), [0, acode::TOPIC_ALREADY_EXISTS]);
    assert!(engine.topics.describe_topic("v").is_err());

    // Every refusal, each topic on its own.
    let bad: &[NewTopic] = &[
        ("a", 1, 1, &[]),
        ("bad/name", 1, 1, &[]),
        ("p0", 0, 1, &[]),
        ("p-2", -2, 1, &[]),
        ("pmax", 10_001, 1, &[]),
        ("r0", 1, 0, &[]),
        ("r-2", 1, -2, &[]),
        ("unknown", 1, 1, &[("segment.bytes", Some("1"))]),
        ("compact", 1, 1, &[("cleanup.policy", Some("compact,compact"))]),
        (
            "lags",
            1,
            1,
            &[
                ("min.compaction.lag.ms", Some("10")),
                ("max.compaction.lag.ms", Some("5")),
            ],
        ),
        ("policy", 1, 1, &[("cleanup.policy", Some("keep"))]),
        ("nan", 1, 1, &[("retention.ms", Some("soon"))]),
        ("zero", 1, 1, &[("retention.bytes", Some("0"))]),
        ("dup", 1, 1, &[]),
        ("dup", 2, 1, &[]),
    ];
    let got = create_topics(engine, 4, bad, false).await;
    assert_eq!(
        errors(&got),
        [
            acode::TOPIC_ALREADY_EXISTS,
            code::INVALID_TOPIC_EXCEPTION,
            acode::INVALID_PARTITIONS,
            acode::INVALID_PARTITIONS,
            acode::INVALID_PARTITIONS,
            acode::INVALID_REPLICATION_FACTOR,
            acode::INVALID_REPLICATION_FACTOR,
            acode::INVALID_CONFIG,
            acode::INVALID_CONFIG,
            acode::INVALID_CONFIG,
            acode::INVALID_CONFIG,
            acode::INVALID_CONFIG,
            acode::INVALID_CONFIG,
            code::INVALID_REQUEST,
            code::INVALID_REQUEST,
        ]
    );
    assert!(got.iter().all(|r| r.2.is_some()), "every refusal says why");
    assert!(got[8].2.as_deref().unwrap().contains("compact"), "{:?}", got[8]);
    let names: Vec<String> = engine.topics.list_topics().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["a", "b"], "nothing else was created");

    // Manual assignments are refused (placement is automatic).
    let mut req = create_topics_req(&[("manual", -1, -1, &[])], false);
    req.topics[0].assignments = vec![km::create_topics_request::CreatableReplicaAssignment::default()
        .with_partition_index(0)
        .with_broker_ids(vec![broker_id("n1").into()])];
    let got = topic_results(
        admin_call(engine, CREATE_TOPICS, 3, &enc(&req, 3)).await,
        CREATE_TOPICS,
        3,
    );
    assert_eq!(errors(&got), [acode::INVALID_REPLICA_ASSIGNMENT]);

    // v7 (flexible) answers with the topic id, what was created and its configs.
    let body = create_topics_body(
        7,
        &[("c7", -1, -1, &[("retention.ms", Some("5000"))]), ("a", 1, 1, &[])],
        false,
    );
    let resp: km::CreateTopicsResponse = decoded(admin_call(engine, CREATE_TOPICS, 7, &body).await, CREATE_TOPICS, 7);
    let (made, exists) = (&resp.topics[0], &resp.topics[1]);
    let c7 = engine.topics.describe_topic("c7").unwrap();
    assert_eq!(made.error_code, 0);
    assert_eq!(made.topic_id, uuid::Uuid::from_bytes(c7.topic_id.0));
    assert!(!c7.topic_id.is_zero());
    assert_eq!((made.num_partitions, made.replication_factor), (1, 1), "-1 defaults");
    let configs = made.configs.as_ref().unwrap();
    let retention = configs.iter().find(|c| c.name.as_str() == "retention.ms").unwrap();
    assert_eq!(retention.value.as_deref(), Some("5000"));
    assert_eq!(retention.config_source, source::DYNAMIC_TOPIC_CONFIG);
    assert_eq!(configs.len(), 7);
    assert_eq!(exists.error_code, acode::TOPIC_ALREADY_EXISTS);
    assert!(exists.topic_id.is_nil() && exists.error_message.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_topics_deletes_and_says_which_are_unknown() {
    let node = node().await;
    let engine = &node.services();
    engine.topics.create_topic("x", 2, Default::default()).await.unwrap();
    engine.topics.create_topic("y", 1, Default::default()).await.unwrap();
    for version in [1, 3] {
        let body = delete_topics_body_at(version, &["x", "nope"]);
        let got = topic_results(
            admin_call(engine, DELETE_TOPICS, version, &body).await,
            DELETE_TOPICS,
            version,
        );
        let want_x = if version == 1 {
            0
        } else {
            code::UNKNOWN_TOPIC_OR_PARTITION
        };
        assert_eq!(errors(&got), [want_x, code::UNKNOWN_TOPIC_OR_PARTITION], "v{version}");
    }
    assert!(engine.topics.describe_topic("x").is_err());
    let body = delete_topics_body(&["y", "y"]);
    let got = topic_results(admin_call(engine, DELETE_TOPICS, 1, &body).await, DELETE_TOPICS, 1);
    assert_eq!(errors(&got), [code::INVALID_REQUEST, code::INVALID_REQUEST]);
    assert!(engine.topics.describe_topic("y").is_ok(), "a duplicate deletes nothing");

    // v6: by topic id (and by name); an id no topic has is UNKNOWN_TOPIC_ID.
    let y = engine.topics.describe_topic("y").unwrap().topic_id;
    let mut req = delete_topics_req(6, &["nope"]);
    for id in [y.0, [5; 16]] {
        req.topics
            .push(km::delete_topics_request::DeleteTopicState::default().with_topic_id(uuid::Uuid::from_bytes(id)));
    }
    let resp: km::DeleteTopicsResponse = decoded(
        admin_call(engine, DELETE_TOPICS, 6, &enc(&req, 6)).await,
        DELETE_TOPICS,
        6,
    );
    let got: Vec<_> = resp
        .responses
        .iter()
        .map(|r| (r.name.as_ref().map(|n| n.0.to_string()), r.error_code))
        .collect();
    assert_eq!(
        got,
        [
            (Some("nope".into()), code::UNKNOWN_TOPIC_OR_PARTITION),
            (Some("y".into()), 0),
            (None, acode::UNKNOWN_TOPIC_ID),
        ]
    );
    assert_eq!(resp.responses[1].topic_id, uuid::Uuid::from_bytes(y.0));
    assert!(resp.responses[0].error_message.is_some(), "v5+ say why");
    assert!(engine.topics.describe_topic("y").is_err(), "deleted by id");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_grows_a_topic_whose_new_partitions_get_placed() {
    let node = node().await;
    let engine = &node.services();
    engine.topics.create_topic("g", 1, Default::default()).await.unwrap();
    wait_open(engine, "g").await;
    let grow = |topics: Vec<Growth<'static>>, validate_only| {
        let body = create_partitions_body(&topics, validate_only);
        async move {
            topic_results(
                admin_call(engine, CREATE_PARTITIONS, 1, &body).await,
                CREATE_PARTITIONS,
                1,
            )
        }
    };
    assert_eq!(errors(&grow(vec![("g", 5, None)], true).await), [0]);
    assert_eq!(
        engine.topics.partitions("g").unwrap(),
        1,
        "validate_only changes nothing"
    );
    assert_eq!(grow(vec![("g", 3, None)], false).await, vec![("g".into(), 0, None)]);
    assert_eq!(engine.topics.partitions("g").unwrap(), 3);
    wait_open(engine, "g").await;
    // Produce to a new partition once it is open.
    let batch = encode_batch(Offset(0), &[record("k", "v", 1)]);
    let produce = request(PRODUCE, 8, 2, &produce_body(1, "g", 2, &batch));
    assert_eq!(produce_answer(call(engine, produce).await), (0, 0));

    let got = grow(
        vec![("g", 3, None), ("g2", 1, None), ("nope", 4, None), ("zero", 0, None)],
        false,
    )
    .await;
    assert_eq!(
        errors(&got),
        [
            acode::INVALID_PARTITIONS,
            code::UNKNOWN_TOPIC_OR_PARTITION,
            code::UNKNOWN_TOPIC_OR_PARTITION,
            code::UNKNOWN_TOPIC_OR_PARTITION
        ]
    );
    assert!(got[0].2.as_deref().unwrap().contains("already has 3"), "{:?}", got[0]);
    const MANUAL: &[&[i32]] = &[&[1]];
    for (count, assignments) in [(2, None), (-1, None), (10_001, None), (4, Some(MANUAL))] {
        let got = grow(vec![("g", count, assignments)], false).await;
        let want = if assignments.is_some() {
            acode::INVALID_REPLICA_ASSIGNMENT
        } else {
            acode::INVALID_PARTITIONS
        };
        assert_eq!(errors(&got), [want], "{count}");
    }
    // An empty assignment list is automatic placement.
    assert_eq!(errors(&grow(vec![("g", 4, Some(&[]))], false).await), [0]);
    assert_eq!(
        errors(&grow(vec![("g", 6, None), ("g", 7, None)], false).await),
        [code::INVALID_REQUEST, code::INVALID_REQUEST]
    );
    assert_eq!(engine.topics.partitions("g").unwrap(), 4);
    wait_open(engine, "g").await;

    // Metadata lists the new partitions with leaders.
    let mut r = call(engine, request(METADATA, 8, 1, &metadata_body(&["g"], false))).await;
    skip_brokers(&mut r);
    r.array_len(1).unwrap();
    assert_eq!(r.i16().unwrap(), 0);
    r.string().unwrap();
    r.bool().unwrap();
    assert_eq!(r.array_len(1).unwrap(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_configs_shows_defaults_set_values_and_their_sources() {
    let node = node().await;
    let engine = &node.services();
    let config = TopicConfig {
        retention_ms: Some(1000),
        ..Default::default()
    };
    engine.topics.create_topic("c", 1, config).await.unwrap();
    assert_eq!(
        topic_configs(engine, "c").await,
        [
            ("cleanup.policy".into(), "delete".into(), source::DEFAULT_CONFIG),
            ("retention.bytes".into(), "-1".into(), source::DEFAULT_CONFIG),
            ("retention.ms".into(), "1000".into(), source::DYNAMIC_TOPIC_CONFIG),
        ]
    );
    // v3 with synonyms, documentation and a key filter.
    let body = describe_configs_body(
        3,
        &[(resource::TOPIC, "c", Some(&["retention.ms", "segment.bytes"]))],
        true,
        true,
    );
    let d = described(admin_call(engine, DESCRIBE_CONFIGS, 3, &body).await, 3);
    assert_eq!(d.len(), 1);
    let (error, t, name, configs) = &d[0];
    assert_eq!((*error, *t, name.as_str()), (0, resource::TOPIC, "c"));
    assert_eq!(configs.len(), 1, "unknown keys are left out");
    let c = &configs[0];
    assert_eq!(c.value.as_deref(), Some("1000"));
    assert!(!c.read_only && !c.is_sensitive && c.source != source::DEFAULT_CONFIG);
    assert_eq!(c.config_type, config_type::LONG);
    assert!(c.documentation.is_some());
    assert_eq!(
        c.synonyms,
        [
            ("retention.ms".into(), Some("1000".into()), source::DYNAMIC_TOPIC_CONFIG),
            ("retention.ms".into(), Some("-1".into()), source::DEFAULT_CONFIG),
        ]
    );
    // v4 (flexible): an unknown topic, a broker (no configs), a group (unsupported).
    let body = describe_configs_body(
        4,
        &[
            (resource::TOPIC, "c", Some(&["cleanup.policy"])),
            (resource::TOPIC, "nope", None),
            (resource::BROKER, &broker_id("n1").to_string(), None),
            (32, "g", None),
        ],
        false,
        false,
    );
    let d = described(admin_call(engine, DESCRIBE_CONFIGS, 4, &body).await, 4);
    assert_eq!(d[0].3[0].name, "cleanup.policy");
    assert_eq!(d[0].3[0].source, source::DEFAULT_CONFIG);
    assert_eq!(
        d.iter().map(|r| (r.0, r.3.len())).collect::<Vec<_>>(),
        [
            (0, 1),
            (code::UNKNOWN_TOPIC_OR_PARTITION, 0),
            (0, 0),
            (code::INVALID_REQUEST, 0)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_configs_replaces_the_whole_config_and_refuses_unknown_keys() {
    let node = node().await;
    let engine = &node.services();
    let config = TopicConfig {
        retention_bytes: Some(5000),
        ..Default::default()
    };
    engine.topics.create_topic("c", 1, config).await.unwrap();
    const SET: i8 = op::SET;
    let got = alter(
        engine,
        false,
        &[(resource::TOPIC, "c", &[("retention.ms", SET, Some("2000"))])],
        false,
    )
    .await;
    assert_eq!(got, [(0, None)]);
    assert_eq!(
        engine.topics.describe_topic("c").unwrap().config,
        TopicConfig {
            retention_ms: Some(2000),
            ..Default::default()
        },
        "keys not named go back to their defaults"
    );
    let got = alter(
        engine,
        false,
        &[
            (
                resource::TOPIC,
                "c",
                &[
                    ("retention.ms", SET, Some("1")),
                    ("min.insync.replicas", SET, Some("2")),
                ],
            ),
            (resource::TOPIC, "c2", &[("cleanup.policy", SET, Some("keep"))]),
            (resource::TOPIC, "nope", &[("retention.ms", SET, Some("1"))]),
            (resource::TOPIC, "c", &[("retention.ms", SET, Some("-5"))]),
            (resource::BROKER, "1", &[("log.retention.ms", SET, Some("1"))]),
            (resource::BROKER, "1", &[]),
            (8, "x", &[]),
        ],
        false,
    )
    .await;
    assert_eq!(
        got.iter().map(|r| r.0).collect::<Vec<_>>(),
        [
            code::INVALID_REQUEST, // "c" twice
            acode::INVALID_CONFIG,
            code::UNKNOWN_TOPIC_OR_PARTITION,
            code::INVALID_REQUEST,
            code::INVALID_REQUEST, // broker "1" twice
            code::INVALID_REQUEST,
            code::INVALID_REQUEST, // broker loggers are not supported
        ]
    );
    let got = alter(
        engine,
        false,
        &[
            (resource::TOPIC, "c", &[("min.insync.replicas", SET, Some("2"))]),
            (resource::BROKER, "1", &[("log.retention.ms", SET, Some("1"))]),
            (resource::BROKER, "2", &[]),
        ],
        false,
    )
    .await;
    assert_eq!(
        got.iter().map(|r| r.0).collect::<Vec<_>>(),
        [acode::INVALID_CONFIG, acode::INVALID_CONFIG, 0]
    );
    assert!(got[0].1.as_deref().unwrap().contains("min.insync.replicas"));
    // validate_only changes nothing.
    let got = alter(
        engine,
        false,
        &[(resource::TOPIC, "c", &[("retention.ms", SET, Some("7"))])],
        true,
    )
    .await;
    assert_eq!(got, [(0, None)]);
    assert_eq!(
        engine.topics.describe_topic("c").unwrap().config.retention_ms,
        Some(2000)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_alter_configs_sets_and_deletes_single_keys() {
    let node = node().await;
    let engine = &node.services();
    engine.topics.create_topic("c", 1, Default::default()).await.unwrap();
    let got = alter(
        engine,
        true,
        &[(
            resource::TOPIC,
            "c",
            &[
                ("retention.ms", op::SET, Some("3000")),
                ("retention.bytes", op::SET, Some("100")),
                ("cleanup.policy", op::SET, Some("delete")),
            ],
        )],
        false,
    )
    .await;
    assert_eq!(got, [(0, None)]);
    let got = alter(
        engine,
        true,
        &[(resource::TOPIC, "c", &[("retention.bytes", op::DELETE, None)])],
        false,
    )
    .await;
    assert_eq!(got, [(0, None)]);
    assert_eq!(
        topic_configs(engine, "c").await,
        [
            ("cleanup.policy".into(), "delete".into(), source::DYNAMIC_TOPIC_CONFIG),
            ("retention.bytes".into(), "-1".into(), source::DEFAULT_CONFIG),
            ("retention.ms".into(), "3000".into(), source::DYNAMIC_TOPIC_CONFIG),
        ],
        "the other keys are kept"
    );
    for (configs, want) in [
        (
            &[("cleanup.policy", op::APPEND, Some("delete"))][..],
            acode::INVALID_CONFIG,
        ),
        (
            &[("cleanup.policy", op::SUBTRACT, Some("delete"))][..],
            acode::INVALID_CONFIG,
        ),
        (&[("retention.ms", 9, Some("1"))][..], code::INVALID_REQUEST),
        (&[("retention.ms", op::SET, None)][..], acode::INVALID_CONFIG),
        (
            &[("retention.ms", op::SET, Some("1")), ("retention.ms", op::DELETE, None)][..],
            code::INVALID_REQUEST,
        ),
        (
            &[("cleanup.policy", op::SET, Some("compact,keep"))][..],
            acode::INVALID_CONFIG,
        ),
        (
            &[("min.cleanable.dirty.ratio", op::SET, Some("1.5"))][..],
            acode::INVALID_CONFIG,
        ),
        (
            &[("max.compaction.lag.ms", op::SET, Some("0"))][..],
            acode::INVALID_CONFIG,
        ),
        (&[("segment.ms", op::DELETE, None)][..], acode::INVALID_CONFIG),
    ] {
        let got = alter(engine, true, &[(resource::TOPIC, "c", configs)], false).await;
        assert_eq!(got[0].0, want, "{configs:?}");
        assert!(got[0].1.is_some());
    }
    assert_eq!(
        engine.topics.describe_topic("c").unwrap().config.retention_ms,
        Some(3000),
        "nothing changed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_requests_to_a_node_without_the_lease_apply_everywhere() {
    let backends = memory_backends();
    let n1 = node_on("n1", backends.clone(), &[]).await;
    let n2 = node_on("n2", backends, &[]).await;
    for _ in 0..400 {
        let (v1, v2) = (n1.nodes(), n2.nodes());
        if v1.nodes.len() == 2 && v2.nodes.len() == 2 && v1.lease_holder.is_some() && v1.lease_holder == v2.lease_holder
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let holder = n1.nodes().lease_holder.unwrap();
    let (holder_node, other) = if holder == "n1" { (&n1, &n2) } else { (&n2, &n1) };

    // DescribeCluster: both brokers, the lease holder as controller.
    for (n, version) in [(&n1, 0), (&n2, 1)] {
        let body: &[u8] = if version == 0 { &[0, 0] } else { &[0, 1, 0] };
        let mut r = admin_call(&n.services(), DESCRIBE_CLUSTER, version, body).await;
        r.tagged_fields().unwrap(); // response header v1
        assert_eq!((r.i32().unwrap(), r.i16().unwrap()), (0, 0));
        assert_eq!(r.compact_nullable_string().unwrap(), None);
        if version == 1 {
            assert_eq!(r.i8().unwrap(), endpoint::BROKERS);
        }
        assert_eq!(r.compact_string().unwrap(), "sluice");
        assert_eq!(r.i32().unwrap(), broker_id(&holder));
        let mut brokers = Vec::new();
        for _ in 0..r.compact_nullable_array_len(1).unwrap().unwrap() {
            let id = r.i32().unwrap();
            let host = r.compact_string().unwrap();
            let port = r.i32().unwrap();
            assert_eq!(r.compact_nullable_string().unwrap(), None);
            r.tagged_fields().unwrap();
            brokers.push((id, host, port));
        }
        brokers.sort();
        let mut want = vec![
            (broker_id("n1"), "kafka.example".to_string(), 9093),
            (broker_id("n2"), "kafka.example".to_string(), 9093),
        ];
        want.sort();
        assert_eq!(brokers, want);
        assert_eq!(r.i32().unwrap(), i32::MIN);
        r.tagged_fields().unwrap();
        r.expect_end().unwrap();
    }
    // There are no controller endpoints to describe.
    let mut r = admin_call(&n1.services(), DESCRIBE_CLUSTER, 1, &[0, 2, 0]).await;
    r.tagged_fields().unwrap();
    r.i32().unwrap();
    assert_eq!(r.i16().unwrap(), acode::MISMATCHED_ENDPOINT_TYPE);

    // Create, grow and configure through the node without the lease.
    let engine = &other.services();
    assert_eq!(
        errors(&create_topics(engine, 4, &[("t", 1, -1, &[])], false).await),
        [0]
    );
    let body = create_partitions_body(&[("t", 2, None)], false);
    let got = topic_results(
        admin_call(engine, CREATE_PARTITIONS, 0, &body).await,
        CREATE_PARTITIONS,
        0,
    );
    assert_eq!(errors(&got), [0]);
    let got = alter(
        engine,
        true,
        &[(resource::TOPIC, "t", &[("retention.ms", op::SET, Some("9"))])],
        false,
    )
    .await;
    assert_eq!(got, [(0, None)]);
    // The lease holder places the new partitions; every view has them.
    wait_partitions(&holder_node.services(), "t", 2).await;
    wait_open(&holder_node.services(), "t").await;
    wait_open(engine, "t").await;
    // The holder's placements can land before the config change in the
    // log, so its view may not have applied the change yet: catch up first
    // (as Kafka DescribeConfigs does).
    assert!(holder_node.meta.sync(Duration::from_secs(5)).await);
    assert_eq!(holder_node.describe_topic("t").unwrap().config.retention_ms, Some(9));
    let body = delete_topics_body(&["t"]);
    let got = topic_results(admin_call(engine, DELETE_TOPICS, 3, &body).await, DELETE_TOPICS, 3);
    assert_eq!(errors(&got), [0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_changes_while_the_metadata_store_is_down_are_retryable() {
    use crate::store::{FaultConfig, FaultyStore};
    let log_store = FaultyStore::new(Arc::new(crate::store::MemoryStore::new()), FaultConfig::default());
    let backends = Backends {
        log: Arc::new(crate::meta::store_log::StoreLog::new(Arc::new(log_store.clone()), "")),
        ..memory_backends()
    };
    let node = node_on("n1", backends, &[]).await;
    let engine = &node.services();
    engine.topics.create_topic("t", 1, Default::default()).await.unwrap();
    log_store.set_unavailable(true);
    for _ in 0..600 {
        if !node.meta.reachable() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(!node.meta.reachable());
    let got = create_topics(engine, 4, &[("u", 1, -1, &[])], false).await;
    assert_eq!(errors(&got), [code::NOT_LEADER_OR_FOLLOWER]);
    let body = create_partitions_body(&[("t", 2, None)], false);
    let got = topic_results(
        admin_call(engine, CREATE_PARTITIONS, 1, &body).await,
        CREATE_PARTITIONS,
        1,
    );
    assert_eq!(errors(&got), [code::NOT_LEADER_OR_FOLLOWER]);
    let got = alter(
        engine,
        true,
        &[(resource::TOPIC, "t", &[("retention.ms", op::SET, Some("9"))])],
        false,
    )
    .await;
    assert_eq!(got[0].0, code::NOT_LEADER_OR_FOLLOWER);
    // Reads still answer from the view.
    assert_eq!(topic_configs(engine, "t").await[2].1, "-1");
    log_store.set_unavailable(false);
}

#[tokio::test]
async fn api_versions_advertises_the_admin_apis() {
    let engine = FakeEngine::new(FakeEngine::default_limits());
    let mut r = call(&Services::from(engine.clone()), request(API_VERSIONS, 2, 1, &[])).await;
    assert_eq!(r.i16().unwrap(), 0);
    let mut got = Vec::new();
    for _ in 0..r.array_len(6).unwrap() {
        got.push((r.i16().unwrap(), r.i16().unwrap(), r.i16().unwrap()));
    }
    for api in [
        (19, 2, 7),
        (20, 1, 6),
        (32, 1, 4),
        (33, 0, 2),
        (37, 0, 3),
        (44, 0, 1),
        (60, 0, 2),
        (22, 0, 5),
    ] {
        assert!(got.contains(&api), "{api:?}");
    }
    // A version not spoken closes the connection (no readable answer exists).
    let closed = handle(
        &Services::from(engine.clone()),
        OPTS,
        admin_request(CREATE_TOPICS, 99, 1, &[]),
    )
    .await;
    assert!(closed.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_settings_are_created_described_with_their_sources_and_reset() {
    let node = node().await;
    let engine = &node.services();
    let configs: &[(&str, Option<&str>)] = &[
        ("cleanup.policy", Some("compact,delete")),
        ("min.cleanable.dirty.ratio", Some("0.1")),
        ("delete.retention.ms", Some("1000")),
    ];
    let got = create_topics(engine, 4, &[("k", 1, 1, configs)], false).await;
    assert_eq!(got, vec![("k".into(), 0, None)]);
    let dynamic = source::DYNAMIC_TOPIC_CONFIG;
    let default = source::DEFAULT_CONFIG;
    assert_eq!(
        all_topic_configs(engine, "k").await,
        [
            ("cleanup.policy".into(), "compact,delete".into(), dynamic),
            ("delete.retention.ms".into(), "1000".into(), dynamic),
            ("max.compaction.lag.ms".into(), i64::MAX.to_string(), default),
            ("min.cleanable.dirty.ratio".into(), "0.1".into(), dynamic),
            ("min.compaction.lag.ms".into(), "0".into(), default),
            ("retention.bytes".into(), "-1".into(), default),
            ("retention.ms".into(), "-1".into(), default),
        ]
    );
    // The ratio is a DOUBLE, the policy a LIST.
    let body = describe_configs_body(
        3,
        &[(
            resource::TOPIC,
            "k",
            Some(&["min.cleanable.dirty.ratio", "cleanup.policy"]),
        )],
        false,
        true,
    );
    let d = described(admin_call(engine, DESCRIBE_CONFIGS, 3, &body).await, 3);
    let types: Vec<(String, i8)> = d[0].3.iter().map(|c| (c.name.clone(), c.config_type)).collect();
    assert_eq!(
        types,
        [
            ("cleanup.policy".into(), config_type::LIST),
            ("min.cleanable.dirty.ratio".into(), config_type::DOUBLE),
        ]
    );
    // Incremental: one lag set, the ratio back to its default.
    let got = alter(
        engine,
        true,
        &[(
            resource::TOPIC,
            "k",
            &[
                ("min.compaction.lag.ms", op::SET, Some("250")),
                ("min.cleanable.dirty.ratio", op::DELETE, None),
            ],
        )],
        false,
    )
    .await;
    assert_eq!(got, [(0, None)]);
    let all = all_topic_configs(engine, "k").await;
    assert!(all.contains(&("min.compaction.lag.ms".into(), "250".into(), dynamic)));
    assert!(all.contains(&("min.cleanable.dirty.ratio".into(), "0.5".into(), default)));
    // A lag range that would be empty is refused, and changes nothing.
    let got = alter(
        engine,
        true,
        &[(resource::TOPIC, "k", &[("max.compaction.lag.ms", op::SET, Some("100"))])],
        false,
    )
    .await;
    assert_eq!(got[0].0, acode::INVALID_CONFIG, "{got:?}");
    assert_eq!(all_topic_configs(engine, "k").await, all);
}
