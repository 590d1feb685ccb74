//! Every version of every transaction request decoded from kafka-protocol's
//! encoding, every response decoded by kafka-protocol, and lying counts and
//! truncations refused.

use super::*;
use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable};

fn enc<M: Encodable>(m: &M, version: i16) -> Bytes {
    let mut b = BytesMut::new();
    m.encode(&mut b, version).unwrap();
    b.freeze()
}

fn dec<M: Decodable>(w: Writer, version: i16) -> M {
    let mut b = w.buf.freeze();
    let m = M::decode(&mut b, version).unwrap();
    assert!(b.is_empty(), "v{version}: {} bytes left", b.len());
    m
}

fn reader(b: Bytes) -> Reader {
    Reader::new(b)
}

fn add_partitions_request(version: i16) -> km::AddPartitionsToTxnRequest {
    use km::add_partitions_to_txn_request as o;
    let topics = vec![
        o::AddPartitionsToTxnTopic::default()
            .with_name(sb("t").into())
            .with_partitions(vec![0, 3]),
        o::AddPartitionsToTxnTopic::default()
            .with_name(sb("u").into())
            .with_partitions(vec![1]),
    ];
    let m = km::AddPartitionsToTxnRequest::default();
    if version >= 4 {
        m.with_transactions(vec![
            o::AddPartitionsToTxnTransaction::default()
                .with_transactional_id(sb("tx").into())
                .with_producer_id(7.into())
                .with_producer_epoch(2)
                .with_verify_only(true)
                .with_topics(topics.clone()),
            o::AddPartitionsToTxnTransaction::default()
                .with_transactional_id(sb("ty").into())
                .with_producer_id(8.into())
                .with_producer_epoch(0)
                .with_topics(topics[..1].to_vec()),
        ])
    } else {
        m.with_v3_and_below_transactional_id(sb("tx").into())
            .with_v3_and_below_producer_id(7.into())
            .with_v3_and_below_producer_epoch(2)
            .with_v3_and_below_topics(topics)
    }
}

#[test]
fn add_partitions_to_txn_at_every_version() {
    let both = vec![("t".to_string(), vec![0, 3]), ("u".to_string(), vec![1])];
    for v in 0..=5 {
        let got = decode_add_partitions_to_txn(&mut reader(enc(&add_partitions_request(v), v)), v).unwrap();
        let first = TxnPartitions {
            transactional_id: "tx".into(),
            producer_id: 7,
            producer_epoch: 2,
            verify_only: v >= 4,
            topics: both.clone(),
        };
        if v >= 4 {
            assert_eq!(got.len(), 2);
            assert_eq!(got[0], first);
            assert_eq!((got[1].transactional_id.as_str(), got[1].verify_only), ("ty", false));
        } else {
            assert_eq!(got, vec![first], "v{v}");
        }

        let results: TxnPartitionResults = vec![("tx".into(), vec![("t".into(), vec![(0, 0), (3, 51)])])];
        let mut w = Writer::default();
        encode_add_partitions_to_txn(&mut w, v, 0, &results).unwrap();
        let m: km::AddPartitionsToTxnResponse = dec(w, v);
        let topics = if v >= 4 {
            assert_eq!(m.results_by_transaction.len(), 1);
            assert_eq!(m.results_by_transaction[0].transactional_id.as_str(), "tx");
            m.results_by_transaction[0].topic_results.clone()
        } else {
            m.results_by_topic_v3_and_below.clone()
        };
        assert_eq!(topics[0].name.as_str(), "t");
        let codes: Vec<(i32, i16)> = topics[0]
            .results_by_partition
            .iter()
            .map(|p| (p.partition_index, p.partition_error_code))
            .collect();
        assert_eq!(codes, vec![(0, 0), (3, 51)], "v{v}");
    }
}

#[test]
fn add_offsets_and_end_txn_at_every_version() {
    for v in 0..=4 {
        let m = km::AddOffsetsToTxnRequest::default()
            .with_transactional_id(sb("tx").into())
            .with_producer_id(7.into())
            .with_producer_epoch(3)
            .with_group_id(sb("g").into());
        let got = decode_add_offsets_to_txn(&mut reader(enc(&m, v)), v).unwrap();
        assert_eq!(
            got,
            AddOffsetsToTxnRequest {
                transactional_id: "tx".into(),
                producer_id: 7,
                producer_epoch: 3,
                group_id: "g".into()
            }
        );
        let mut w = Writer::default();
        encode_add_offsets_to_txn(&mut w, v, 51).unwrap();
        assert_eq!(dec::<km::AddOffsetsToTxnResponse>(w, v).error_code, 51);
    }
    for v in 0..=5 {
        let m = km::EndTxnRequest::default()
            .with_transactional_id(sb("tx").into())
            .with_producer_id(7.into())
            .with_producer_epoch(3)
            .with_committed(true);
        let got = decode_end_txn(&mut reader(enc(&m, v)), v).unwrap();
        assert_eq!(
            (
                got.transactional_id.as_str(),
                got.producer_id,
                got.producer_epoch,
                got.committed
            ),
            ("tx", 7, 3, true)
        );
        let mut w = Writer::default();
        encode_end_txn(&mut w, v, 90, (7, 4)).unwrap();
        let r: km::EndTxnResponse = dec(w, v);
        assert_eq!(r.error_code, 90);
        if v >= 5 {
            assert_eq!((i64::from(r.producer_id), r.producer_epoch), (7, 4));
        }
    }
}

#[test]
fn txn_offset_commit_at_every_version() {
    use km::txn_offset_commit_request as o;
    for v in 0..=5 {
        let mut m = km::TxnOffsetCommitRequest::default()
            .with_transactional_id(sb("tx").into())
            .with_group_id(sb("g").into())
            .with_producer_id(7.into())
            .with_producer_epoch(1)
            .with_topics(vec![o::TxnOffsetCommitRequestTopic::default()
                .with_name(sb("t").into())
                .with_partitions(vec![
                    o::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(2)
                        .with_committed_offset(40)
                        .with_committed_leader_epoch(if v >= 2 { 5 } else { -1 })
                        .with_committed_metadata(Some(sb("meta"))),
                    o::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(3)
                        .with_committed_offset(41)
                        .with_committed_leader_epoch(-1)
                        .with_committed_metadata(None),
                ])]);
        if v >= 3 {
            m = m
                .with_generation_id(4)
                .with_member_id(sb("m-1"))
                .with_group_instance_id(Some(sb("i-1")));
        }
        let got = decode_txn_offset_commit(&mut reader(enc(&m, v)), v).unwrap();
        assert_eq!(
            (
                got.transactional_id.as_str(),
                got.group_id.as_str(),
                got.producer_id,
                got.producer_epoch
            ),
            ("tx", "g", 7, 1)
        );
        let epoch = if v >= 2 { 5 } else { -1 };
        assert_eq!(
            got.topics,
            vec![(
                "t".to_string(),
                vec![(2, 40, epoch, Some("meta".to_string())), (3, 41, -1, None)]
            )],
            "v{v}"
        );
        if v >= 3 {
            assert_eq!(
                (
                    got.generation_id,
                    got.member_id.as_str(),
                    got.group_instance_id.as_deref()
                ),
                (4, "m-1", Some("i-1"))
            );
        } else {
            assert_eq!(got.generation_id, -1);
        }
        let mut w = Writer::default();
        encode_txn_offset_commit(&mut w, v, &vec![("t".into(), vec![(2, 0), (3, 48)])]).unwrap();
        let r: km::TxnOffsetCommitResponse = dec(w, v);
        let codes: Vec<_> = r.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        assert_eq!(codes, vec![(2, 0), (3, 48)]);
    }
}

#[test]
fn describe_and_list_transactions_at_every_version() {
    let m = km::DescribeTransactionsRequest::default().with_transactional_ids(vec![sb("a").into(), sb("b").into()]);
    assert_eq!(
        decode_describe_transactions(&mut reader(enc(&m, 0)), 0).unwrap(),
        vec!["a", "b"]
    );
    let mut w = Writer::default();
    let d = DescribedTxn {
        error_code: 0,
        transactional_id: "a".into(),
        state: "Ongoing".into(),
        timeout_ms: 60_000,
        producer_id: 7,
        producer_epoch: 1,
        topics: vec![("t".into(), vec![0, 1])],
    };
    encode_describe_transactions(&mut w, 0, &[d]).unwrap();
    let r: km::DescribeTransactionsResponse = dec(w, 0);
    let s = &r.transaction_states[0];
    assert_eq!(
        (
            s.transactional_id.as_str(),
            s.transaction_state.as_str(),
            s.transaction_timeout_ms
        ),
        ("a", "Ongoing", 60_000)
    );
    assert_eq!(
        (
            i64::from(s.producer_id),
            s.producer_epoch,
            s.topics[0].partitions.clone()
        ),
        (7, 1, vec![0, 1])
    );

    for v in 0..=2 {
        let mut m = km::ListTransactionsRequest::default()
            .with_state_filters(vec![sb("Ongoing")])
            .with_producer_id_filters(vec![7.into(), 9.into()]);
        if v >= 1 {
            m = m.with_duration_filter(5_000);
        }
        if v >= 2 {
            m = m.with_transactional_id_pattern(Some(sb("tx-.*")));
        }
        let got = decode_list_transactions(&mut reader(enc(&m, v)), v).unwrap();
        assert_eq!(got.state_filters, vec!["Ongoing"]);
        assert_eq!(got.producer_id_filters, vec![7, 9]);
        assert_eq!(got.duration_filter, if v >= 1 { 5_000 } else { -1 });
        assert_eq!(
            got.transactional_id_pattern.as_deref(),
            if v >= 2 { Some("tx-.*") } else { None }
        );
        let mut w = Writer::default();
        encode_list_transactions(&mut w, v, 0, &["Bogus".into()], &[("a".into(), 7, "Ongoing")]).unwrap();
        let r: km::ListTransactionsResponse = dec(w, v);
        assert_eq!(r.unknown_state_filters[0].as_str(), "Bogus");
        assert_eq!(r.transaction_states[0].transactional_id.as_str(), "a");
    }
}

#[test]
fn lying_counts_and_truncations_are_refused() {
    // AddPartitionsToTxn v3: an id, a producer, then a topic count of 2^31.
    let mut w = Writer::default();
    w.compact_string("tx");
    w.i64(7);
    w.i16(0);
    w.buf.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]);
    assert!(decode_add_partitions_to_txn(&mut reader(w.buf.freeze()), 3).is_err());
    // Every truncation of every valid request fails cleanly.
    let whole = enc(&add_partitions_request(5), 5);
    for n in 0..whole.len() {
        assert!(decode_add_partitions_to_txn(&mut reader(whole.slice(..n)), 5).is_err());
    }
    let end = enc(
        &km::EndTxnRequest::default()
            .with_transactional_id(sb("tx").into())
            .with_committed(true),
        3,
    );
    for n in 0..end.len() {
        assert!(decode_end_txn(&mut reader(end.slice(..n)), 3).is_err());
    }
    // Trailing bytes are refused too.
    let mut long = BytesMut::from(&end[..]);
    long.extend_from_slice(&[0]);
    assert!(decode_end_txn(&mut reader(long.freeze()), 3).is_err());
}
