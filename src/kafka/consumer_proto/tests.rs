use super::*;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    consumer_group_heartbeat_request, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

fn sb(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn oracle_heartbeat(version: i16) -> Bytes {
    let mut req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(sb("g").into())
        .with_member_id(sb("m-1"))
        .with_member_epoch(7)
        .with_instance_id(Some(sb("i")))
        .with_rack_id(None)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![sb("a").into(), sb("b").into()]))
        .with_server_assignor(Some(sb("range")))
        .with_topic_partitions(Some(vec![consumer_group_heartbeat_request::TopicPartitions::default()
            .with_topic_id(uuid::Uuid::from_bytes([9; 16]))
            .with_partitions(vec![0, 3])]));
    if version >= 1 {
        req = req.with_subscribed_topic_regex(Some(sb("t.*")));
    }
    let mut b = BytesMut::new();
    req.encode(&mut b, version).unwrap();
    b.freeze()
}

#[test]
fn heartbeat_requests_decode_at_every_version() {
    for version in 0..=1 {
        let mut r = Reader::new(oracle_heartbeat(version));
        let req = decode_heartbeat(&mut r, version).unwrap();
        assert_eq!(req.group_id, "g");
        assert_eq!(req.member_id, "m-1");
        assert_eq!(req.member_epoch, 7);
        assert_eq!(req.instance_id.as_deref(), Some("i"));
        assert_eq!(req.rack_id, None);
        assert_eq!(req.rebalance_timeout_ms, 30_000);
        assert_eq!(req.subscribed_topic_names, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(req.subscribed_topic_regex.as_deref(), (version >= 1).then_some("t.*"));
        assert_eq!(req.server_assignor.as_deref(), Some("range"));
        assert_eq!(
            req.topic_partitions,
            Some(vec![TopicPartitions {
                topic_id: TopicUuid([9; 16]),
                partitions: vec![0, 3]
            }])
        );
    }
    // Nulls: "unchanged since the last heartbeat".
    let mut b = BytesMut::new();
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(sb("g").into())
        .with_member_epoch(3)
        .encode(&mut b, 1)
        .unwrap();
    let req = decode_heartbeat(&mut Reader::new(b.freeze()), 1).unwrap();
    assert_eq!(
        (req.subscribed_topic_names, req.topic_partitions, req.server_assignor),
        (None, None, None)
    );
}

#[test]
fn describe_requests_decode_at_every_version() {
    for version in 0..=1 {
        let mut b = BytesMut::new();
        ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![sb("g1").into(), sb("g2").into()])
            .with_include_authorized_operations(true)
            .encode(&mut b, version)
            .unwrap();
        let ids = decode_describe(&mut Reader::new(b.freeze()), version).unwrap();
        assert_eq!(ids, vec!["g1".to_string(), "g2".to_string()]);
    }
}

#[test]
fn truncated_and_lying_requests_fail_without_allocating() {
    let full = oracle_heartbeat(1);
    for cut in 0..full.len() {
        assert!(
            decode_heartbeat(&mut Reader::new(full.slice(..cut)), 1).is_err(),
            "cut at {cut}"
        );
    }
    let mut long = full.to_vec();
    long.push(0);
    assert!(
        decode_heartbeat(&mut Reader::new(Bytes::from(long)), 1).is_err(),
        "trailing byte"
    );
    // group "g", member "", epoch, null instance, null rack, timeout, then
    // a subscribed-names array claiming 2^28 elements.
    let mut w = super::super::wire::Writer::default();
    w.compact_string("g");
    w.compact_string("");
    w.i32(0);
    w.uvarint(0);
    w.uvarint(0);
    w.i32(1);
    w.uvarint(1 << 28);
    assert!(decode_heartbeat(&mut Reader::new(w.buf.freeze()), 0).is_err());
    let mut w = super::super::wire::Writer::default();
    w.uvarint(u32::MAX);
    assert!(decode_describe(&mut Reader::new(w.buf.freeze()), 0).is_err());
}

#[test]
fn heartbeat_responses_read_back_at_every_version() {
    let a = HeartbeatAnswer {
        error_code: 0,
        error_message: None,
        member_id: Some("m".into()),
        member_epoch: 4,
        heartbeat_interval_ms: 5000,
        assignment: Some(vec![TopicPartitions {
            topic_id: TopicUuid([3; 16]),
            partitions: vec![1, 2],
        }]),
    };
    for version in 0..=1 {
        let mut w = super::super::wire::Writer::default();
        w.message(&heartbeat_response(&a), version).unwrap();
        let back = ConsumerGroupHeartbeatResponse::decode(&mut w.buf.freeze(), version).unwrap();
        assert_eq!(back.member_id.as_deref(), Some("m"));
        assert_eq!(back.member_epoch, 4);
        assert_eq!(back.heartbeat_interval_ms, 5000);
        let tps = back.assignment.unwrap().topic_partitions;
        assert_eq!(tps[0].topic_id, uuid::Uuid::from_bytes([3; 16]));
        assert_eq!(tps[0].partitions, vec![1, 2]);
    }
    let err = HeartbeatAnswer::error(110, "fenced");
    let mut w = super::super::wire::Writer::default();
    w.message(&heartbeat_response(&err), 1).unwrap();
    let back = ConsumerGroupHeartbeatResponse::decode(&mut w.buf.freeze(), 1).unwrap();
    assert_eq!((back.error_code, back.error_message.as_deref()), (110, Some("fenced")));
    assert!(back.assignment.is_none());
}

#[test]
fn describe_responses_read_back_at_every_version() {
    let parts = vec![NamedPartitions {
        topic_id: TopicUuid([5; 16]),
        topic_name: "t".into(),
        partitions: vec![0],
    }];
    let g = DescribedGroup {
        error_code: 0,
        error_message: None,
        group_id: "g".into(),
        state: "Stable".into(),
        group_epoch: 3,
        assignment_epoch: 3,
        assignor_name: "uniform".into(),
        members: vec![DescribedMember {
            member_id: "m".into(),
            instance_id: None,
            rack_id: None,
            member_epoch: 3,
            client_id: "c".into(),
            client_host: "/h".into(),
            subscribed_topic_names: vec!["t".into()],
            subscribed_topic_regex: None,
            assignment: parts.clone(),
            target_assignment: parts,
        }],
    };
    for version in 0..=1 {
        let mut w = super::super::wire::Writer::default();
        w.message(&describe_response(version, std::slice::from_ref(&g)), version)
            .unwrap();
        let back = ConsumerGroupDescribeResponse::decode(&mut w.buf.freeze(), version).unwrap();
        let d = &back.groups[0];
        assert_eq!(
            (d.group_epoch, d.assignment_epoch, d.group_state.as_str()),
            (3, 3, "Stable")
        );
        let m = &d.members[0];
        assert_eq!(m.member_id.as_str(), "m");
        assert_eq!(m.assignment.topic_partitions[0].topic_name.as_str(), "t");
        assert_eq!(m.member_type, if version >= 1 { 1 } else { -1 });
    }
}
