//! The admin APIs: codecs (golden bytes, bounds) and each handler over a
//! real in-memory node, including from a node that does not hold the lease.

use super::*;
use crate::kafka::admin::acode;
use crate::kafka::admin_proto::*;
use crate::meta::{CleanupPolicy, TopicConfig};

/// A request frame with the header its key and version use (v2 for
/// DescribeCluster, v1 otherwise).
fn admin_request(key: i16, version: i16, corr: i32, body: &[u8]) -> Bytes {
    let mut w = Writer::default();
    w.i16(key);
    w.i16(version);
    w.i32(corr);
    w.nullable_string(Some("admin-test"));
    if key == DESCRIBE_CLUSTER {
        w.no_tagged_fields();
    }
    w.buf.extend_from_slice(body);
    w.buf.freeze()
}

async fn admin_call(engine: &Services, key: i16, version: i16, body: &[u8]) -> Reader {
    call(engine, admin_request(key, version, 7, body)).await
}

/// One topic for a CreateTopics body: (name, partitions, replication, configs).
type NewTopic<'a> = (&'a str, i32, i16, &'a [(&'a str, Option<&'a str>)]);

fn create_topics_body(version: i16, topics: &[NewTopic<'_>], validate_only: bool) -> Vec<u8> {
    let mut w = Writer::default();
    w.array_len(topics.len());
    for (name, partitions, replication, configs) in topics {
        w.string(name);
        w.i32(*partitions);
        w.i16(*replication);
        w.array_len(0); // assignments
        w.array_len(configs.len());
        for (k, v) in *configs {
            w.string(k);
            w.nullable_string(*v);
        }
    }
    w.i32(5000);
    if version >= 1 {
        w.bool(validate_only);
    }
    w.buf.to_vec()
}

/// CreateTopics / DeleteTopics / CreatePartitions answers: (name, error, message).
fn topic_results(mut r: Reader, key: i16, version: i16) -> Vec<(String, i16, Option<String>)> {
    let throttled = match key {
        CREATE_TOPICS => version >= 2,
        DELETE_TOPICS => version >= 1,
        _ => true,
    };
    if throttled {
        assert_eq!(r.i32().unwrap(), 0);
    }
    let messages = match key {
        CREATE_TOPICS => version >= 1,
        DELETE_TOPICS => false,
        _ => true,
    };
    let n = r.array_len(4).unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        let name = r.string().unwrap();
        let error = r.i16().unwrap();
        let message = if messages { r.nullable_string().unwrap() } else { None };
        out.push((name, error, message));
    }
    r.expect_end().unwrap();
    out
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

fn delete_topics_body(names: &[&str]) -> Vec<u8> {
    let mut w = Writer::default();
    w.array_len(names.len());
    for n in names {
        w.string(n);
    }
    w.i32(5000);
    w.buf.to_vec()
}

/// One topic for a CreatePartitions body: (name, count, assignments).
type Growth<'a> = (&'a str, i32, Option<&'a [&'a [i32]]>);

fn create_partitions_body(topics: &[Growth<'_>], validate_only: bool) -> Vec<u8> {
    let mut w = Writer::default();
    w.array_len(topics.len());
    for (name, count, assignments) in topics {
        w.string(name);
        w.i32(*count);
        match assignments {
            None => w.i32(-1),
            Some(a) => {
                w.array_len(a.len());
                for brokers in *a {
                    w.array_len(brokers.len());
                    for b in *brokers {
                        w.i32(*b);
                    }
                }
            }
        }
    }
    w.i32(5000);
    w.bool(validate_only);
    w.buf.to_vec()
}

fn describe_configs_body(
    version: i16,
    resources: &[(i8, &str, Option<&[&str]>)],
    synonyms: bool,
    docs: bool,
) -> Vec<u8> {
    let mut w = Writer::default();
    w.array_len(resources.len());
    for (t, name, keys) in resources {
        w.i8(*t);
        w.string(name);
        match keys {
            None => w.i32(-1),
            Some(k) => {
                w.array_len(k.len());
                for k in *k {
                    w.string(k);
                }
            }
        }
    }
    if version >= 1 {
        w.bool(synonyms);
    }
    if version >= 3 {
        w.bool(docs);
    }
    w.buf.to_vec()
}

/// A decoded DescribeConfigs result: (error, type, name, configs).
type Described = (i16, i8, String, Vec<ConfigEntry>);

fn described(mut r: Reader, version: i16) -> Vec<Described> {
    assert_eq!(r.i32().unwrap(), 0);
    let n = r.array_len(1).unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        let error = r.i16().unwrap();
        r.nullable_string().unwrap();
        let t = r.i8().unwrap();
        let name = r.string().unwrap();
        let m = r.array_len(1).unwrap();
        let mut configs = Vec::new();
        for _ in 0..m {
            let name = r.string().unwrap();
            let value = r.nullable_string().unwrap();
            let read_only = r.bool().unwrap();
            let (is_default, source) = if version == 0 {
                let d = r.bool().unwrap();
                (
                    d,
                    if d {
                        source::DEFAULT_CONFIG
                    } else {
                        source::DYNAMIC_TOPIC_CONFIG
                    },
                )
            } else {
                let s = r.i8().unwrap();
                (s == source::DEFAULT_CONFIG, s)
            };
            let is_sensitive = r.bool().unwrap();
            let mut synonyms = Vec::new();
            if version >= 1 {
                for _ in 0..r.array_len(1).unwrap() {
                    synonyms.push((r.string().unwrap(), r.nullable_string().unwrap(), r.i8().unwrap()));
                }
            }
            let (config_type, documentation) = if version >= 3 {
                (r.i8().unwrap(), r.nullable_string().unwrap())
            } else {
                (0, None)
            };
            configs.push(ConfigEntry {
                name,
                value,
                read_only,
                is_default,
                source,
                is_sensitive,
                synonyms,
                config_type,
                documentation,
            });
        }
        out.push((error, t, name, configs));
    }
    r.expect_end().unwrap();
    out
}

/// (name, value, source) of a topic's configs, via DescribeConfigs v1.
async fn topic_configs(engine: &Services, topic: &str) -> Vec<(String, String, i8)> {
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

fn alter_configs_body(incremental: bool, resources: &[AlterResource<'_>], validate_only: bool) -> Vec<u8> {
    let mut w = Writer::default();
    w.array_len(resources.len());
    for (t, name, configs) in resources {
        w.i8(*t);
        w.string(name);
        w.array_len(configs.len());
        for (k, op, v) in *configs {
            w.string(k);
            if incremental {
                w.i8(*op);
            }
            w.nullable_string(*v);
        }
    }
    w.bool(validate_only);
    w.buf.to_vec()
}

/// (error, message) per resource.
fn altered(mut r: Reader) -> Vec<(i16, Option<String>)> {
    assert_eq!(r.i32().unwrap(), 0);
    let n = r.array_len(1).unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        let e = r.i16().unwrap();
        let m = r.nullable_string().unwrap();
        r.i8().unwrap();
        r.string().unwrap();
        out.push((e, m));
    }
    r.expect_end().unwrap();
    out
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
    altered(admin_call(engine, key, version, &body).await)
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
fn create_topics_request_decodes_from_golden_bytes() {
    // v4: one topic "ab", 3 partitions, factor -1, no assignments, config
    // retention.ms=5, timeout 1000, validate_only.
    let mut golden = vec![
        0, 0, 0, 1, 0, 2, b'a', b'b', 0, 0, 0, 3, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 12,
    ];
    golden.extend_from_slice(b"retention.ms");
    golden.extend_from_slice(&[0, 1, b'5', 0, 0, 0x03, 0xe8, 1]);
    let req = decode_create_topics(&mut Reader::new(Bytes::from(golden.clone())), 4).unwrap();
    assert_eq!(
        req,
        CreateTopicsRequest {
            topics: vec![CreatableTopic {
                name: "ab".into(),
                num_partitions: 3,
                replication_factor: -1,
                assignments: vec![],
                configs: vec![("retention.ms".into(), Some("5".into()))],
            }],
            timeout_ms: 1000,
            validate_only: true,
        }
    );
    let built = create_topics_body(4, &[("ab", 3, -1, &[("retention.ms", Some("5"))])], true);
    assert_eq!(built[..built.len() - 5], golden[..golden.len() - 5]);
    assert_eq!(
        built[built.len() - 5..],
        [0, 0, 0x13, 0x88, 1],
        "timeout 5000, validate_only"
    );
    // v0 has no validate_only: the trailing byte is refused.
    assert!(decode_create_topics(&mut Reader::new(Bytes::from(golden.clone())), 0).is_err());
    assert!(decode_create_topics(&mut Reader::new(Bytes::from(golden[..golden.len() - 1].to_vec())), 0).is_ok());
}

#[test]
fn topic_results_encode_per_version() {
    let results = [TopicResult {
        name: "t".into(),
        error_code: acode::TOPIC_ALREADY_EXISTS,
        error_message: Some("x".into()),
    }];
    let enc = |f: fn(&mut Writer, i16, &[TopicResult]), v| {
        let mut w = Writer::default();
        f(&mut w, v, &results);
        w.buf.to_vec()
    };
    assert_eq!(enc(encode_create_topics, 0), [0, 0, 0, 1, 0, 1, b't', 0, 36]);
    assert_eq!(
        enc(encode_create_topics, 1),
        [0, 0, 0, 1, 0, 1, b't', 0, 36, 0, 1, b'x']
    );
    assert_eq!(
        enc(encode_create_topics, 4),
        [0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 36, 0, 1, b'x']
    );
    assert_eq!(enc(encode_delete_topics, 0), [0, 0, 0, 1, 0, 1, b't', 0, 36]);
    assert_eq!(
        enc(encode_delete_topics, 3),
        [0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 36]
    );
    assert_eq!(
        enc(encode_create_partitions, 1),
        [0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 36, 0, 1, b'x']
    );
}

#[test]
fn describe_configs_responses_encode_per_version() {
    let entry = ConfigEntry {
        name: "k".into(),
        value: Some("v".into()),
        read_only: false,
        is_default: true,
        source: source::DEFAULT_CONFIG,
        is_sensitive: false,
        synonyms: vec![("k".into(), Some("v".into()), source::DEFAULT_CONFIG)],
        config_type: config_type::LONG,
        documentation: Some("d".into()),
    };
    let result = DescribeConfigsResult {
        error_code: 0,
        error_message: None,
        resource_type: resource::TOPIC,
        resource_name: "t".into(),
        configs: vec![entry.clone()],
    };
    let enc = |v| {
        let mut w = Writer::default();
        encode_describe_configs(&mut w, v, std::slice::from_ref(&result));
        w.buf.to_vec()
    };
    let head = [
        0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0xff, 0xff, 2, 0, 1, b't', 0, 0, 0, 1, 0, 1, b'k', 0, 1, b'v', 0,
    ];
    let v0: Vec<u8> = head.iter().copied().chain([1, 0]).collect();
    assert_eq!(enc(0), v0, "v0: is_default, is_sensitive");
    let v1: Vec<u8> = head
        .iter()
        .copied()
        .chain([5, 0, 0, 0, 0, 1, 0, 1, b'k', 0, 1, b'v', 5])
        .collect();
    assert_eq!(enc(1), v1, "v1: source, is_sensitive, synonyms");
    assert_eq!(enc(2), v1);
    let v3: Vec<u8> = v1.iter().copied().chain([5, 0, 1, b'd']).collect();
    assert_eq!(enc(3), v3, "v3: config type and documentation");
    // Our own decoder of the response reads back what was encoded.
    for v in 0..=3 {
        let d = described(Reader::new(Bytes::from(enc(v))), v);
        let mut want = entry.clone();
        if v == 0 {
            want.synonyms.clear();
        }
        if v < 3 {
            (want.config_type, want.documentation) = (0, None);
        }
        assert_eq!(d, vec![(0, resource::TOPIC, "t".to_string(), vec![want])], "v{v}");
    }
}

#[test]
fn alter_configs_requests_decode_and_results_encode() {
    let legacy = alter_configs_body(
        false,
        &[(2, "t", &[("retention.ms", 0, Some("5")), ("retention.bytes", 0, None)])],
        true,
    );
    assert_eq!(
        decode_alter_configs(&mut Reader::new(Bytes::from(legacy.clone())), false).unwrap(),
        AlterConfigsRequest {
            resources: vec![AlterConfigsResource {
                resource_type: 2,
                name: "t".into(),
                configs: vec![
                    AlterableConfig {
                        name: "retention.ms".into(),
                        op: op::SET,
                        value: Some("5".into())
                    },
                    AlterableConfig {
                        name: "retention.bytes".into(),
                        op: op::SET,
                        value: None
                    },
                ],
            }],
            validate_only: true,
        }
    );
    assert!(decode_alter_configs(&mut Reader::new(Bytes::from(legacy)), true).is_err());
    let incremental = alter_configs_body(true, &[(2, "t", &[("cleanup.policy", op::DELETE, None)])], false);
    let golden: Vec<u8> = [0, 0, 0, 1, 2, 0, 1, b't', 0, 0, 0, 1, 0, 14]
        .iter()
        .copied()
        .chain(*b"cleanup.policy")
        .chain([1, 0xff, 0xff, 0])
        .collect();
    assert_eq!(incremental, golden);
    let req = decode_alter_configs(&mut Reader::new(Bytes::from(golden)), true).unwrap();
    assert_eq!(req.resources[0].configs[0].op, op::DELETE);
    let mut w = Writer::default();
    encode_alter_configs(
        &mut w,
        &[AlterConfigsResult {
            error_code: acode::INVALID_CONFIG,
            error_message: Some("m".into()),
            resource_type: 2,
            resource_name: "t".into(),
        }],
    );
    assert_eq!(&w.buf[..], &[0, 0, 0, 0, 0, 0, 0, 1, 0, 40, 0, 1, b'm', 2, 0, 1, b't']);
}

#[test]
fn describe_cluster_encodes_compact_fields_and_tagged_sections() {
    let resp = DescribeClusterResponse {
        error_code: 0,
        error_message: None,
        endpoint_type: endpoint::BROKERS,
        cluster_id: "c".into(),
        controller: 7,
        brokers: vec![Broker {
            node_id: 7,
            host: "h".into(),
            port: 9092,
        }],
    };
    let enc = |v| {
        let mut w = Writer::default();
        encode_describe_cluster(&mut w, v, &resp);
        w.buf.to_vec()
    };
    let tail = [
        2, b'c', // cluster id
        0, 0, 0, 7, // controller
        2, // one broker
        0, 0, 0, 7, 2, b'h', 0, 0, 0x23, 0x84, 0, 0, // id, host, port, rack, tags
        0x80, 0, 0, 0, // cluster authorized operations
        0, // tags
    ];
    // throttle, error, error message (null), [v1: endpoint type], the rest.
    let v0: Vec<u8> = [0, 0, 0, 0, 0, 0, 0].iter().chain(&tail).copied().collect();
    assert_eq!(enc(0), v0);
    let v1: Vec<u8> = [0, 0, 0, 0, 0, 0, 0, 1].iter().chain(&tail).copied().collect();
    assert_eq!(enc(1), v1);

    let req = |b: &'static [u8], v| decode_describe_cluster(&mut Reader::new(Bytes::from_static(b)), v);
    assert_eq!(
        req(&[1, 0], 0).unwrap(),
        DescribeClusterRequest {
            include_cluster_authorized_operations: true,
            endpoint_type: endpoint::BROKERS
        }
    );
    assert_eq!(req(&[0, 2, 0], 1).unwrap().endpoint_type, endpoint::CONTROLLERS);
    assert!(req(&[0], 0).is_err(), "tagged fields are required");
    assert!(req(&[0, 0], 1).is_err(), "v1 has an endpoint type");
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
            ALTER_CONFIGS => decode_alter_configs(&mut r, false).map(|_| ()),
            INCREMENTAL_ALTER_CONFIGS => decode_alter_configs(&mut r, true).map(|_| ()),
            _ => decode_describe_cluster(&mut r, *version).map(|_| ()),
        };
    }
    // A lying count is refused before anything is allocated.
    let mut r = Reader::new(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]));
    assert!(decode_create_topics(&mut r, 4).is_err());
}

/// A valid body of every admin API, for fuzzing.
fn admin_bodies() -> Vec<(i16, i16, Vec<u8>)> {
    vec![
        (
            CREATE_TOPICS,
            4,
            create_topics_body(4, &[("t", 3, -1, &[("retention.ms", Some("5"))])], false),
        ),
        (DELETE_TOPICS, 3, delete_topics_body(&["t", "u"])),
        (
            CREATE_PARTITIONS,
            1,
            create_partitions_body(&[("t", 4, Some(&[&[1, 2]]))], false),
        ),
        (
            DESCRIBE_CONFIGS,
            3,
            describe_configs_body(3, &[(2, "t", Some(&["retention.ms"]))], true, true),
        ),
        (
            ALTER_CONFIGS,
            1,
            alter_configs_body(false, &[(2, "t", &[("retention.ms", 0, Some("5"))])], false),
        ),
        (
            INCREMENTAL_ALTER_CONFIGS,
            0,
            alter_configs_body(true, &[(2, "t", &[("retention.ms", 1, None)])], false),
        ),
        (DESCRIBE_CLUSTER, 0, vec![0, 0]),
        (DESCRIBE_CLUSTER, 1, vec![0, 1, 0]),
    ]
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
            durable: None,
        }
    );
    assert_eq!(
        engine.topics.describe_topic("b").unwrap().partitions,
        1,
        "-1: the default"
    );
    wait_open(engine, "a").await;

    // validate_only creates nothing, but reports what creating would.
    let got = create_topics(engine, 1, &[("v", 2, 3, &[]), ("a", 1, 1, &[])], true).await;
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
        ("compact", 1, 1, &[("cleanup.policy", Some("compact"))]),
        ("both", 1, 1, &[("cleanup.policy", Some("compact,delete"))]),
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
    let mut w = Writer::default();
    w.array_len(1);
    w.string("manual");
    w.i32(-1);
    w.i16(-1);
    w.array_len(1);
    w.i32(0);
    w.array_len(1);
    w.i32(broker_id("n1"));
    w.array_len(0);
    w.i32(1000);
    w.bool(false);
    let got = topic_results(admin_call(engine, CREATE_TOPICS, 3, &w.buf).await, CREATE_TOPICS, 3);
    assert_eq!(errors(&got), [acode::INVALID_REPLICA_ASSIGNMENT]);

    // v0 answers carry no message.
    let got = create_topics(engine, 0, &[("a", 1, 1, &[])], false).await;
    assert_eq!(got, vec![("a".into(), acode::TOPIC_ALREADY_EXISTS, None)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_topics_deletes_and_says_which_are_unknown() {
    let node = node().await;
    let engine = &node.services();
    engine.topics.create_topic("x", 2, Default::default()).await.unwrap();
    engine.topics.create_topic("y", 1, Default::default()).await.unwrap();
    for version in [0, 3] {
        let body = delete_topics_body(&["x", "nope"]);
        let got = topic_results(
            admin_call(engine, DELETE_TOPICS, version, &body).await,
            DELETE_TOPICS,
            version,
        );
        let want_x = if version == 0 {
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
    assert!(!c.read_only && !c.is_sensitive && !c.is_default);
    assert_eq!(c.config_type, config_type::LONG);
    assert!(c.documentation.is_some());
    assert_eq!(
        c.synonyms,
        [
            ("retention.ms".into(), Some("1000".into()), source::DYNAMIC_TOPIC_CONFIG),
            ("retention.ms".into(), Some("-1".into()), source::DEFAULT_CONFIG),
        ]
    );
    // v0: is_default; an unknown topic, a broker (no configs), a group (unsupported).
    let body = describe_configs_body(
        0,
        &[
            (resource::TOPIC, "c", Some(&["cleanup.policy"])),
            (resource::TOPIC, "nope", None),
            (resource::BROKER, &broker_id("n1").to_string(), None),
            (32, "g", None),
        ],
        false,
        false,
    );
    let d = described(admin_call(engine, DESCRIBE_CONFIGS, 0, &body).await, 0);
    assert_eq!(d[0].3[0].name, "cleanup.policy");
    assert!(d[0].3[0].is_default);
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
            (resource::TOPIC, "c2", &[("cleanup.policy", SET, Some("compact"))]),
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
            &[("cleanup.policy", op::SET, Some("compact"))][..],
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
        (19, 0, 4),
        (20, 0, 3),
        (32, 0, 3),
        (33, 0, 1),
        (37, 0, 1),
        (44, 0, 0),
        (60, 0, 1),
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
