//! DeleteRecords: the codec at every version against kafka-protocol's
//! structs, bounds, and what a real node does with it.

use super::*;
use crate::kafka::delete_records::*;
use crate::kafka::header::{flexible_request, flexible_response};
use kafka_protocol::messages as km;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

fn versions() -> std::ops::RangeInclusive<i16> {
    let (_, min, max) = SUPPORTED.iter().find(|r| r.0 == DELETE_RECORDS).copied().unwrap();
    min..=max
}

fn body(topics: &[(&str, &[(i32, i64)])], timeout_ms: i32, version: i16) -> Vec<u8> {
    use km::delete_records_request as d;
    let req = km::DeleteRecordsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|(t, ps)| {
                    d::DeleteRecordsTopic::default()
                        .with_name(StrBytes::from_string(t.to_string()).into())
                        .with_partitions(
                            ps.iter()
                                .map(|&(p, o)| {
                                    d::DeleteRecordsPartition::default()
                                        .with_partition_index(p)
                                        .with_offset(o)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
        .with_timeout_ms(timeout_ms);
    let mut b = bytes::BytesMut::new();
    req.encode(&mut b, version).unwrap();
    b.to_vec()
}

#[test]
fn delete_records_requests_decode_at_every_version() {
    for v in versions() {
        let b = body(&[("t", &[(0, 5), (2, -1)]), ("u", &[])], 1500, v);
        let got = decode_delete_records(&mut Reader::new(Bytes::from(b.clone())), v).unwrap();
        assert_eq!(
            got,
            DeleteRecordsRequest {
                topics: vec![("t".into(), vec![(0, 5), (2, -1)]), ("u".into(), vec![])],
                timeout_ms: 1500
            },
            "v{v}"
        );
        for cut in 0..b.len() {
            assert!(decode_delete_records(&mut Reader::new(Bytes::copy_from_slice(&b[..cut])), v).is_err());
        }
    }
    let huge: &[u8] = &[0x7f, 0xff, 0xff, 0xff];
    assert!(decode_delete_records(&mut Reader::new(Bytes::from_static(huge)), 0).is_err());
    let huge: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0x0f];
    assert!(decode_delete_records(&mut Reader::new(Bytes::from_static(huge)), 2).is_err());
    let mut rng = rand::rngs::SmallRng::seed_from_u64(21);
    for i in 0..5_000 {
        let b: Vec<u8> = (0..rng.random_range(0..40)).map(|_| rng.random::<u8>()).collect();
        let _ = decode_delete_records(&mut Reader::new(Bytes::from(b)), (i % 3) as i16);
    }
}

#[test]
fn delete_records_responses_decode_with_kafka_protocol() {
    for v in versions() {
        let mut w = Writer::default();
        encode_delete_records(&mut w, v, &[("t".into(), vec![(0, 7, 0), (1, -1, 6)])]).unwrap();
        let mut b = w.buf.freeze();
        let m = km::DeleteRecordsResponse::decode(&mut b, v).unwrap();
        assert!(b.is_empty());
        let t = &m.topics[0];
        assert_eq!(t.name.0.as_str(), "t");
        let got: Vec<_> = t
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.low_watermark, p.error_code))
            .collect();
        assert_eq!(got, vec![(0, 7, 0), (1, -1, 6)], "v{v}");
    }
}

/// DeleteRecords for one partition of `topic`: (low watermark, error).
async fn delete(
    engine: &Services,
    version: i16,
    topic: &str,
    partition: i32,
    offset: i64,
    timeout_ms: i32,
) -> (i64, i16) {
    let mut w = Writer::default();
    w.i16(DELETE_RECORDS);
    w.i16(version);
    w.i32(9);
    w.nullable_string(Some("delete-records-test"));
    if flexible_request(DELETE_RECORDS, version) {
        w.no_tagged_fields();
    }
    w.buf
        .extend_from_slice(&body(&[(topic, &[(partition, offset)])], timeout_ms, version));
    let mut r = call(engine, w.buf.freeze()).await;
    if flexible_response(DELETE_RECORDS, version) {
        r.tagged_fields().unwrap();
    }
    let mut b = r.bytes_exact(r.remaining()).unwrap();
    let m = km::DeleteRecordsResponse::decode(&mut b, version).unwrap();
    assert!(b.is_empty());
    let p = &m.topics[0].partitions[0];
    assert_eq!(p.partition_index, partition);
    (p.low_watermark, p.error_code)
}

async fn read_from(engine: &Services, topic: &str, from: u64) -> ApiResult<ReadResult> {
    let req = ReadRequest {
        from: ReadFrom::At(Offset(from)),
        limit: 100,
        max_bytes: 1 << 20,
        wait: Duration::ZERO,
        committed: false,
        consistency: Default::default(),
    };
    engine.records.read(topic, 0, req).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_moves_the_start_up_flushing_the_tail_first() {
    // The default flush interval (10 s) would outlast the test: the trim
    // must ask for the flush itself.
    let node = node().await;
    let s = node.services();
    node.create_topic("trim", 1, Default::default()).await.unwrap();
    wait_open(&s, "trim").await;
    for batch in 0..2 {
        let records = (0..5).map(|i| record("k", &format!("v{}", batch * 5 + i), 1)).collect();
        s.records.append("trim", 0, records).await.unwrap();
    }
    let stream = node.open_streams().into_iter().find(|s| s.topic == "trim").unwrap();
    assert_eq!(stream.committed_end(), Offset(0), "nothing flushed yet");

    // Inside the second batch: every version answers, the first moves the start.
    assert_eq!(delete(&s, 0, "trim", 0, 7, 10_000).await, (7, code::NONE));
    // The view is what the trim waited on; the open stream learns of the
    // commit a moment later, from the flusher that made it.
    assert!(
        node.meta.view().streams[&stream.id].committed_end >= Offset(7),
        "flushed on demand"
    );
    for v in versions() {
        assert_eq!(delete(&s, v, "trim", 0, 7, 10_000).await, (7, code::NONE), "v{v}");
    }
    let refused = read_from(&s, "trim", 6).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::OffsetOutOfRange);
    assert_eq!(refused.start_offset, Some(Offset(7)));
    let read = read_from(&s, "trim", 7).await.unwrap();
    let values: Vec<_> = read.records.iter().map(|(o, r)| (o.get(), r.value.clone())).collect();
    assert_eq!(
        values[0],
        (7, Some(Bytes::from("v7"))),
        "read from the new start, mid-batch"
    );
    assert_eq!((read.start_offset, read.high_watermark), (Offset(7), Offset(10)));

    // Lower than the start: nothing changes. Past the end, or below -1: refused.
    assert_eq!(delete(&s, 2, "trim", 0, 3, 10_000).await, (7, code::NONE));
    assert_eq!(
        delete(&s, 2, "trim", 0, 11, 10_000).await,
        (-1, code::OFFSET_OUT_OF_RANGE)
    );
    assert_eq!(
        delete(&s, 2, "trim", 0, -2, 10_000).await,
        (-1, code::OFFSET_OUT_OF_RANGE)
    );
    assert_eq!(
        delete(&s, 2, "nope", 0, 1, 10_000).await.1,
        code::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(
        delete(&s, 2, "trim", 1, 1, 10_000).await.1,
        code::UNKNOWN_TOPIC_OR_PARTITION
    );

    // -1 is the high watermark.
    s.records.append("trim", 0, vec![record("k", "v10", 1)]).await.unwrap();
    assert_eq!(delete(&s, 1, "trim", 0, -1, 10_000).await, (11, code::NONE));
    let read = read_from(&s, "trim", 11).await.unwrap();
    assert!(read.records.is_empty());
    assert_eq!(read.start_offset, Offset(11));
    assert_eq!(
        node.describe_topic("trim").unwrap().partition_info[0].start_offset,
        Offset(11)
    );
}

#[tokio::test]
async fn partitions_not_trimmed_within_the_timeout_answer_request_timed_out() {
    // The fake's trims never finish, as a flush that does not come.
    let s: Services = FakeEngine::new(FakeEngine::default_limits()).into();
    for v in versions() {
        assert_eq!(
            delete(&s, v, "t", 0, 5, 50).await,
            (-1, code::REQUEST_TIMED_OUT),
            "v{v}"
        );
    }
}

#[tokio::test]
async fn a_topic_that_is_only_compacted_answers_policy_violation() {
    use crate::meta::{CleanupPolicy, TopicConfig};
    let s: Services = FakeEngine::new(FakeEngine::default_limits()).into();
    for (name, policy) in [("c", CleanupPolicy::Compact), ("cd", CleanupPolicy::CompactDelete)] {
        let config = TopicConfig {
            cleanup_policy: Some(policy),
            ..TopicConfig::default()
        };
        s.topics.create_topic(name, 1, config).await.unwrap();
    }
    for v in versions() {
        assert_eq!(delete(&s, v, "c", 0, 5, 50).await, (-1, 44), "v{v}: POLICY_VIOLATION");
        // With `delete` in the policy it is tried (the fake's trims never finish).
        assert_eq!(
            delete(&s, v, "cd", 0, 5, 50).await,
            (-1, code::REQUEST_TIMED_OUT),
            "v{v}"
        );
    }
}
