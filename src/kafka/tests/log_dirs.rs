//! DescribeLogDirs: the codec at every version against kafka-protocol's
//! structs, bounds, and the answer of a real node.

use super::*;
use crate::kafka::header::{flexible_request, flexible_response};
use crate::kafka::log_dirs::*;
use kafka_protocol::messages as km;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

fn versions() -> std::ops::RangeInclusive<i16> {
    let (_, min, max) = SUPPORTED.iter().find(|r| r.0 == DESCRIBE_LOG_DIRS).copied().unwrap();
    min..=max
}

fn body(topics: Option<&[(&str, &[i32])]>, version: i16) -> Vec<u8> {
    let req = km::DescribeLogDirsRequest::default().with_topics(topics.map(|ts| {
        ts.iter()
            .map(|(t, ps)| {
                km::describe_log_dirs_request::DescribableLogDirTopic::default()
                    .with_topic(StrBytes::from_string(t.to_string()).into())
                    .with_partitions(ps.to_vec())
            })
            .collect()
    }));
    let mut b = bytes::BytesMut::new();
    req.encode(&mut b, version).unwrap();
    b.to_vec()
}

#[test]
fn describe_log_dirs_requests_decode_at_every_version() {
    for v in versions() {
        let b = body(Some(&[("t", &[0, 2]), ("u", &[])]), v);
        let got = decode_describe_log_dirs(&mut Reader::new(Bytes::from(b.clone())), v).unwrap();
        assert_eq!(got, Some(vec![("t".into(), vec![0, 2]), ("u".into(), vec![])]), "v{v}");
        for cut in 0..b.len() {
            assert!(decode_describe_log_dirs(&mut Reader::new(Bytes::copy_from_slice(&b[..cut])), v).is_err());
        }
        let all = body(None, v);
        assert_eq!(
            decode_describe_log_dirs(&mut Reader::new(Bytes::from(all)), v).unwrap(),
            None
        );
    }
    let huge: &[u8] = &[0x7f, 0xff, 0xff, 0xff];
    assert!(decode_describe_log_dirs(&mut Reader::new(Bytes::from_static(huge)), 1).is_err());
    let huge: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0x0f];
    assert!(decode_describe_log_dirs(&mut Reader::new(Bytes::from_static(huge)), 4).is_err());
    let mut rng = rand::rngs::SmallRng::seed_from_u64(35);
    for i in 0..5_000 {
        let b: Vec<u8> = (0..rng.random_range(0..40)).map(|_| rng.random::<u8>()).collect();
        let _ = decode_describe_log_dirs(&mut Reader::new(Bytes::from(b)), 1 + (i % 4) as i16);
    }
}

async fn ask(engine: &Services, version: i16, topics: Option<&[(&str, &[i32])]>) -> km::DescribeLogDirsResponse {
    let mut w = Writer::default();
    w.i16(DESCRIBE_LOG_DIRS);
    w.i16(version);
    w.i32(7);
    w.nullable_string(Some("log-dirs-test"));
    if flexible_request(DESCRIBE_LOG_DIRS, version) {
        w.no_tagged_fields();
    }
    w.buf.extend_from_slice(&body(topics, version));
    let mut r = call(engine, w.buf.freeze()).await;
    if flexible_response(DESCRIBE_LOG_DIRS, version) {
        r.tagged_fields().unwrap();
    }
    let mut b = r.bytes_exact(r.remaining()).unwrap();
    let m = km::DescribeLogDirsResponse::decode(&mut b, version).unwrap();
    assert!(b.is_empty());
    m
}

#[tokio::test]
async fn a_node_reports_its_own_partitions_with_their_bytes_at_every_version() {
    let node = node().await;
    let s = node.services();
    node.create_topic("dirs", 2, Default::default()).await.unwrap();
    wait_open(&s, "dirs").await;
    s.records
        .append("dirs", 1, vec![record("k", "hello", 1), record("k", "world", 2)])
        .await
        .unwrap();
    let sizes = s.topics.partition_bytes("dirs").unwrap();
    assert_eq!(sizes[0], 0);
    assert!(sizes[1] > 0, "{sizes:?}");
    for v in versions() {
        let r = ask(&s, v, None).await;
        assert_eq!(r.error_code, 0);
        assert_eq!(r.results.len(), 1);
        let dir = &r.results[0];
        assert_eq!(dir.log_dir.as_str(), "sluice://n1");
        if v >= 4 {
            assert_eq!((dir.total_bytes, dir.usable_bytes), (-1, -1));
        }
        let t = dir
            .topics
            .iter()
            .find(|t| t.name.0.as_str() == "dirs")
            .expect("the topic");
        let got: Vec<(i32, i64)> = t
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.partition_size))
            .collect();
        assert_eq!(got, vec![(0, 0), (1, sizes[1] as i64)], "v{v}");

        let r = ask(&s, v, Some(&[("dirs", &[1]), ("nope", &[0])])).await;
        let topics: Vec<_> = r.results[0]
            .topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partitions.len()))
            .collect();
        assert_eq!(
            topics,
            vec![("dirs".to_string(), 1)],
            "only what was asked, unknown topics left out"
        );
    }
    // Another node's log dir holds none of this node's partitions.
    assert!(describe_log_dirs(&s, "n2", None).is_empty());
}
