//! The classic consumer-group codecs at every advertised version:
//! requests built by kafka-protocol's generated structs decoded by the
//! hand-written decoders (and every truncation refused), responses
//! written through kafka-protocol and decoded back by it.

use super::*;
use kafka_protocol::messages as km;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

fn versions_of(key: i16) -> std::ops::RangeInclusive<i16> {
    let (_, min, max) = SUPPORTED.iter().find(|r| r.0 == key).copied().unwrap();
    min..=max
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn enc<M: Encodable>(m: &M, version: i16) -> Bytes {
    let mut b = bytes::BytesMut::new();
    m.encode(&mut b, version).unwrap();
    b.freeze()
}

fn truncations_fail<T>(full: &Bytes, decode: impl Fn(&mut Reader) -> DecodeResult<T>) {
    for cut in 0..full.len() {
        assert!(decode(&mut Reader::new(full.slice(..cut))).is_err(), "cut at {cut}");
    }
}

fn back<M: Decodable>(w: Writer, version: i16) -> M {
    let mut b = w.buf.freeze();
    let m = M::decode(&mut b, version).unwrap();
    assert!(b.is_empty(), "v{version}: {} bytes left over", b.len());
    m
}

use super::wire::DecodeResult;

#[test]
fn find_coordinator_requests_and_responses_at_every_version() {
    for v in versions_of(FIND_COORDINATOR) {
        let mut req = km::FindCoordinatorRequest::default();
        if v >= 4 {
            req = req.with_coordinator_keys(vec![sb("g1"), sb("g2")]);
        } else {
            req = req.with_key(sb("g1"));
        }
        let b = enc(&req, v);
        let got = decode_find_coordinator(&mut Reader::new(b.clone()), v).unwrap();
        let want: Vec<String> = if v >= 4 {
            vec!["g1".into(), "g2".into()]
        } else {
            vec!["g1".into()]
        };
        assert_eq!(got.keys, want, "v{v}");
        truncations_fail(&b, |r| decode_find_coordinator(r, v));
        let found: Vec<FoundCoordinator> = want
            .iter()
            .map(|k| FoundCoordinator {
                key: k.clone(),
                error_code: 0,
                node: 3,
                host: "h".into(),
                port: 9092,
            })
            .collect();
        let mut w = Writer::default();
        encode_find_coordinator(&mut w, v, &found).unwrap();
        let resp: km::FindCoordinatorResponse = back(w, v);
        if v >= 4 {
            assert_eq!(resp.coordinators.len(), 2);
            assert_eq!(resp.coordinators[1].key.as_str(), "g2");
            assert_eq!(resp.coordinators[1].port, 9092);
        } else {
            assert_eq!((resp.node_id.0, resp.host.as_str(), resp.port), (3, "h", 9092));
        }
    }
}

#[test]
fn join_and_sync_requests_and_responses_at_every_version() {
    for v in versions_of(JOIN_GROUP) {
        let req = km::JoinGroupRequest::default()
            .with_group_id(km::GroupId(sb("g")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(if v >= 1 { 20_000 } else { -1 })
            .with_member_id(sb("m"))
            .with_group_instance_id(if v >= 5 { Some(sb("i")) } else { None })
            .with_protocol_type(sb("consumer"))
            .with_protocols(vec![km::join_group_request::JoinGroupRequestProtocol::default()
                .with_name(sb("range"))
                .with_metadata(Bytes::from_static(b"meta"))])
            .with_reason(if v >= 8 { Some(sb("why")) } else { None });
        let b = enc(&req, v);
        let got = decode_join_group(&mut Reader::new(b.clone()), v).unwrap();
        assert_eq!(got.group_id, "g");
        assert_eq!(got.rebalance_timeout_ms, if v >= 1 { 20_000 } else { 10_000 });
        assert_eq!(got.group_instance_id.as_deref(), (v >= 5).then_some("i"));
        assert_eq!(got.protocols, vec![("range".to_string(), Bytes::from_static(b"meta"))]);
        assert_eq!(got.reason.as_deref(), (v >= 8).then_some("why"));
        truncations_fail(&b, |r| decode_join_group(r, v));
        for skip in [false, true] {
            let j = crate::kafka::groups::Joined {
                error_code: 0,
                generation: 4,
                protocol: "range".into(),
                leader: "m".into(),
                member_id: "m".into(),
                members: vec![("m".into(), Bytes::from_static(b"meta"))],
            };
            let mut w = Writer::default();
            encode_join_group(&mut w, v, &j, Some("consumer"), skip).unwrap();
            let resp: km::JoinGroupResponse = back(w, v);
            assert_eq!(resp.generation_id, 4);
            assert_eq!(resp.protocol_name.as_deref(), Some("range"));
            assert_eq!(resp.protocol_type.as_deref(), (v >= 7).then_some("consumer"));
            assert_eq!(resp.skip_assignment, skip && v >= 9);
            assert_eq!(resp.members.len(), 1);
        }
        let mut w = Writer::default();
        encode_join_group(&mut w, v, &crate::kafka::groups::Joined::error(16, "m"), None, false).unwrap();
        let resp: km::JoinGroupResponse = back(w, v);
        assert_eq!(resp.error_code, 16);
    }
    for v in versions_of(SYNC_GROUP) {
        let req = km::SyncGroupRequest::default()
            .with_group_id(km::GroupId(sb("g")))
            .with_generation_id(3)
            .with_member_id(sb("m"))
            .with_group_instance_id(if v >= 3 { Some(sb("i")) } else { None })
            .with_protocol_type(if v >= 5 { Some(sb("consumer")) } else { None })
            .with_protocol_name(if v >= 5 { Some(sb("range")) } else { None })
            .with_assignments(vec![km::sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(sb("m"))
                .with_assignment(Bytes::from_static(b"a"))]);
        let b = enc(&req, v);
        let got = decode_sync_group(&mut Reader::new(b.clone()), v).unwrap();
        assert_eq!((got.generation_id, got.member_id.as_str()), (3, "m"));
        assert_eq!(got.protocol_type.as_deref(), (v >= 5).then_some("consumer"));
        assert_eq!(got.protocol_name.as_deref(), (v >= 5).then_some("range"));
        assert_eq!(got.assignments, vec![("m".to_string(), Bytes::from_static(b"a"))]);
        truncations_fail(&b, |r| decode_sync_group(r, v));
        let mut w = Writer::default();
        encode_sync_group(&mut w, v, 0, &Bytes::from_static(b"a"), Some(("consumer", "range"))).unwrap();
        let resp: km::SyncGroupResponse = back(w, v);
        assert_eq!(&resp.assignment[..], b"a");
        assert_eq!(resp.protocol_name.as_deref(), (v >= 5).then_some("range"));
    }
}

#[test]
fn heartbeat_and_leave_requests_and_responses_at_every_version() {
    for v in versions_of(HEARTBEAT) {
        let req = km::HeartbeatRequest::default()
            .with_group_id(km::GroupId(sb("g")))
            .with_generation_id(2)
            .with_member_id(sb("m"))
            .with_group_instance_id(if v >= 3 { Some(sb("i")) } else { None });
        let b = enc(&req, v);
        let got = decode_heartbeat(&mut Reader::new(b.clone()), v).unwrap();
        assert_eq!(
            (got.generation_id, got.group_instance_id.as_deref()),
            (2, (v >= 3).then_some("i"))
        );
        truncations_fail(&b, |r| decode_heartbeat(r, v));
        let mut w = Writer::default();
        encode_heartbeat(&mut w, v, 27).unwrap();
        assert_eq!(back::<km::HeartbeatResponse>(w, v).error_code, 27);
    }
    for v in versions_of(LEAVE_GROUP) {
        let mut req = km::LeaveGroupRequest::default().with_group_id(km::GroupId(sb("g")));
        if v >= 3 {
            req.members = vec![
                km::leave_group_request::MemberIdentity::default()
                    .with_member_id(sb("m1"))
                    .with_group_instance_id(Some(sb("i1")))
                    .with_reason(if v >= 5 { Some(sb("bye")) } else { None }),
                km::leave_group_request::MemberIdentity::default().with_member_id(sb("m2")),
            ];
        } else {
            req.member_id = sb("m1");
        }
        let b = enc(&req, v);
        let got = decode_leave_group(&mut Reader::new(b.clone()), v).unwrap();
        assert_eq!(got.member_ids[0], "m1");
        if v >= 3 {
            assert_eq!(got.member_ids.len(), 2);
            assert_eq!(got.instance_ids[0].as_deref(), Some("i1"));
            assert_eq!(got.reasons[0].as_deref(), (v >= 5).then_some("bye"));
        }
        truncations_fail(&b, |r| decode_leave_group(r, v));
        let mut w = Writer::default();
        encode_leave_group(&mut w, v, 0, &[("m1".into(), Some("i1".into()), 25)]).unwrap();
        let resp: km::LeaveGroupResponse = back(w, v);
        assert_eq!(resp.members.len(), usize::from(v >= 3));
    }
}

#[test]
fn offset_commit_and_fetch_requests_and_responses_at_every_version() {
    use km::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    // kafka-protocol's OffsetCommit starts at v2 and OffsetFetch at v1
    // (v0 and v1 are checked against hand-built frames in tests.rs); their
    // older responses are the same bytes as those versions'.
    for v in versions_of(OFFSET_COMMIT) {
        let mut w = Writer::default();
        encode_offset_commit(&mut w, v, &vec![("t".to_string(), vec![(1, 0), (2, 3)])]).unwrap();
        let resp: km::OffsetCommitResponse = back(w, v.max(2));
        assert_eq!(resp.topics[0].partitions[1].error_code, 3);
        if v < 2 {
            continue;
        }
        let req = km::OffsetCommitRequest::default()
            .with_group_id(km::GroupId(sb("g")))
            .with_generation_id_or_member_epoch(if v >= 1 { 5 } else { -1 })
            .with_member_id(sb(if v >= 1 { "m" } else { "" }))
            .with_group_instance_id(if v >= 7 { Some(sb("i")) } else { None })
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(km::TopicName(sb("t")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(1)
                    .with_committed_offset(42)
                    .with_committed_metadata(Some(sb("md")))])]);
        let b = enc(&req, v);
        let got = decode_offset_commit(&mut Reader::new(b.clone()), v).unwrap();
        assert_eq!(got.generation_id, if v >= 1 { 5 } else { -1 });
        assert_eq!(got.group_instance_id.as_deref(), (v >= 7).then_some("i"));
        assert_eq!(
            got.topics,
            vec![(
                "t".to_string(),
                vec![CommitPartition {
                    partition: 1,
                    offset: 42,
                    metadata: Some("md".into())
                }]
            )]
        );
        truncations_fail(&b, |r| decode_offset_commit(r, v));
    }
    use km::offset_fetch_request as ofr;
    for v in versions_of(OFFSET_FETCH).filter(|v| *v >= 1) {
        let topics = vec![ofr::OffsetFetchRequestTopic::default()
            .with_name(km::TopicName(sb("t")))
            .with_partition_indexes(vec![0, 2])];
        let mut req = km::OffsetFetchRequest::default();
        if v >= 8 {
            req.groups = vec![
                ofr::OffsetFetchRequestGroup::default()
                    .with_group_id(km::GroupId(sb("g1")))
                    .with_member_id(if v >= 9 { Some(sb("m")) } else { None })
                    .with_member_epoch(if v >= 9 { 7 } else { -1 })
                    .with_topics(Some(vec![ofr::OffsetFetchRequestTopics::default()
                        .with_name(km::TopicName(sb("t")))
                        .with_partition_indexes(vec![0, 2])])),
                ofr::OffsetFetchRequestGroup::default()
                    .with_group_id(km::GroupId(sb("g2")))
                    .with_topics(None),
            ];
        } else {
            req = req.with_group_id(km::GroupId(sb("g1"))).with_topics(Some(topics));
        }
        let b = enc(&req, v);
        let got = decode_offset_fetch(&mut Reader::new(b.clone()), v).unwrap();
        assert_eq!(got.groups[0].group_id, "g1");
        assert_eq!(got.groups[0].topics, Some(vec![("t".to_string(), vec![0, 2])]));
        if v >= 8 {
            assert_eq!(got.groups[1].topics, None);
            assert_eq!(got.groups[0].member_id.as_deref(), (v >= 9).then_some("m"));
            assert_eq!(got.groups[0].member_epoch, if v >= 9 { 7 } else { -1 });
        }
        truncations_fail(&b, |r| decode_offset_fetch(r, v));
        let fetched = |g: &str| -> FetchedGroup {
            (
                g.to_string(),
                0,
                vec![(
                    "t".to_string(),
                    vec![FetchedOffset {
                        partition: 0,
                        offset: 9,
                        metadata: Some(String::new()),
                        error_code: 0,
                    }],
                )],
            )
        };
        let mut w = Writer::default();
        encode_offset_fetch(&mut w, v, &[fetched("g1"), fetched("g2")]).unwrap();
        let resp: km::OffsetFetchResponse = back(w, v);
        if v >= 8 {
            assert_eq!(resp.groups.len(), 2);
            assert_eq!(resp.groups[1].topics[0].partitions[0].committed_offset, 9);
        } else {
            assert_eq!(resp.topics[0].partitions[0].committed_offset, 9);
        }
    }
}

#[test]
fn list_describe_delete_groups_requests_and_responses_at_every_version() {
    for v in versions_of(LIST_GROUPS) {
        let req = km::ListGroupsRequest::default()
            .with_states_filter(if v >= 4 { vec![sb("Stable")] } else { vec![] })
            .with_types_filter(if v >= 5 { vec![sb("classic")] } else { vec![] });
        let b = enc(&req, v);
        let got = decode_list_groups(&mut Reader::new(b.clone()), v).unwrap();
        assert_eq!(got.states, if v >= 4 { vec!["Stable".to_string()] } else { vec![] });
        assert_eq!(got.types, if v >= 5 { vec!["classic".to_string()] } else { vec![] });
        truncations_fail(&b, |r| decode_list_groups(r, v));
        let mut w = Writer::default();
        let listed = ListedGroup {
            group_id: "g".into(),
            protocol_type: "consumer".into(),
            state: "Stable".into(),
            group_type: "classic".into(),
        };
        encode_list_groups(&mut w, v, 0, &[listed]).unwrap();
        let resp: km::ListGroupsResponse = back(w, v);
        assert_eq!(resp.groups[0].group_id.as_str(), "g");
        if v >= 5 {
            assert_eq!(resp.groups[0].group_type.as_str(), "classic");
        }
    }
    for v in versions_of(DESCRIBE_GROUPS) {
        let req = km::DescribeGroupsRequest::default()
            .with_groups(vec![km::GroupId(sb("a")), km::GroupId(sb("b"))])
            .with_include_authorized_operations(v >= 3);
        let b = enc(&req, v);
        let got = decode_group_ids(&mut Reader::new(b.clone()), v, DESCRIBE_GROUPS).unwrap();
        assert_eq!(got.ids, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(got.include_authorized_operations, v >= 3);
        truncations_fail(&b, |r| decode_group_ids(r, v, DESCRIBE_GROUPS));
        let g = DescribedGroup {
            error_code: 69,
            error_message: Some("Group a not found.".into()),
            group_id: "a".into(),
            state: "Dead".into(),
            protocol_type: String::new(),
            protocol: String::new(),
            members: vec![DescribedMember {
                member_id: "m".into(),
                group_instance_id: if v >= 4 { Some("i".into()) } else { None },
                client_id: "c".into(),
                client_host: "/h".into(),
                metadata: Bytes::from_static(b"x"),
                assignment: Bytes::new(),
            }],
            authorized_operations: 328,
        };
        let mut w = Writer::default();
        encode_describe_groups(&mut w, v, &[g]).unwrap();
        let resp: km::DescribeGroupsResponse = back(w, v);
        assert_eq!(resp.groups[0].members[0].client_id.as_str(), "c");
        assert_eq!(resp.groups[0].error_message.is_some(), v >= 6);
        assert_eq!(
            resp.groups[0].authorized_operations,
            if v >= 3 { 328 } else { i32::MIN }
        );
    }
    for v in versions_of(DELETE_GROUPS) {
        let req = km::DeleteGroupsRequest::default().with_groups_names(vec![km::GroupId(sb("a"))]);
        let b = enc(&req, v);
        let got = decode_group_ids(&mut Reader::new(b.clone()), v, DELETE_GROUPS).unwrap();
        assert_eq!(got.ids, vec!["a".to_string()]);
        truncations_fail(&b, |r| decode_group_ids(r, v, DELETE_GROUPS));
        let mut w = Writer::default();
        encode_delete_groups(&mut w, v, &[("a".into(), 68)]).unwrap();
        let resp: km::DeleteGroupsResponse = back(w, v);
        assert_eq!(resp.results[0].error_code, 68);
    }
}

#[test]
fn flexible_group_requests_refuse_huge_counts() {
    // A compact array count far beyond the bytes left is refused.
    let mut w = Writer::default();
    w.uvarint(u32::MAX);
    assert!(decode_group_ids(&mut Reader::new(w.buf.freeze()), 2, DELETE_GROUPS).is_err());
    let mut w = Writer::default();
    w.uvarint(1_000_000);
    assert!(decode_offset_fetch(&mut Reader::new(w.buf.freeze()), 8).is_err());
    let mut w = Writer::default();
    w.i8(0);
    w.uvarint(1_000_000);
    assert!(decode_find_coordinator(&mut Reader::new(w.buf.freeze()), 4).is_err());
}

/// A request frame with the header its key and version use, answered by
/// `node`; the body of the answer decoded by kafka-protocol.
async fn ask<M: Decodable>(node: &Arc<Node>, groups: &Groups, key: i16, version: i16, req: &impl Encodable) -> M {
    let mut w = Writer::default();
    w.i16(key);
    w.i16(version);
    w.i32(5);
    w.nullable_string(Some("test"));
    if crate::kafka::header::flexible_request(key, version) {
        w.no_tagged_fields();
    }
    w.buf.extend_from_slice(&enc(req, version));
    let resp = handle_in(&node.services(), groups, OPTS, w.buf.freeze(), "peer")
        .await
        .unwrap()
        .unwrap();
    let mut r = Reader::new(resp);
    assert_eq!(r.i32().unwrap(), 5);
    if crate::kafka::header::flexible_response(key, version) {
        r.tagged_fields().unwrap();
    }
    let mut b = r.bytes_exact(r.remaining()).unwrap();
    let m = M::decode(&mut b, version).unwrap();
    assert!(b.is_empty());
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newest_group_versions_answer_per_key_per_group_and_filter() {
    let node = node().await;
    let groups = Groups::new();
    // FindCoordinator v4+: one coordinator per key.
    let req = km::FindCoordinatorRequest::default().with_coordinator_keys(vec![sb("a"), sb("b")]);
    let resp: km::FindCoordinatorResponse = ask(&node, &groups, FIND_COORDINATOR, 6, &req).await;
    assert_eq!(resp.coordinators.len(), 2);
    assert!(resp.coordinators.iter().all(|c| c.error_code == 0 && c.port > 0));
    // DescribeGroups v6: an unknown group is GROUP_ID_NOT_FOUND with a message.
    let req = km::DescribeGroupsRequest::default()
        .with_groups(vec![km::GroupId(sb("nope"))])
        .with_include_authorized_operations(true);
    let resp: km::DescribeGroupsResponse = ask(&node, &groups, DESCRIBE_GROUPS, 6, &req).await;
    assert_eq!(resp.groups[0].error_code, 69);
    assert!(resp.groups[0].error_message.is_some());
    let resp: km::DescribeGroupsResponse = ask(&node, &groups, DESCRIBE_GROUPS, 5, &req).await;
    assert_eq!(
        (resp.groups[0].error_code, resp.groups[0].group_state.as_str()),
        (0, "Dead")
    );
    // OffsetCommit v9 then OffsetFetch v8 of two groups, each on its own.
    node.create_topic("t", 1, Default::default()).await.unwrap();
    use km::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    let req = km::OffsetCommitRequest::default()
        .with_group_id(km::GroupId(sb("g1")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(km::TopicName(sb("t")))
            .with_partitions(vec![
                OffsetCommitRequestPartition::default().with_committed_offset(7)
            ])]);
    let resp: km::OffsetCommitResponse = ask(&node, &groups, OFFSET_COMMIT, 9, &req).await;
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    use km::offset_fetch_request::OffsetFetchRequestGroup;
    let req = km::OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(km::GroupId(sb("g1")))
            .with_topics(None),
        OffsetFetchRequestGroup::default()
            .with_group_id(km::GroupId(sb("g2")))
            .with_topics(None),
    ]);
    let resp: km::OffsetFetchResponse = ask(&node, &groups, OFFSET_FETCH, 8, &req).await;
    assert_eq!(resp.groups.len(), 2);
    assert_eq!(resp.groups[0].topics[0].partitions[0].committed_offset, 7);
    assert!(resp.groups[1].topics.is_empty());
    // ListGroups v5: the offsets-only group is a classic Empty one.
    let req = km::ListGroupsRequest::default().with_types_filter(vec![sb("Classic")]);
    let resp: km::ListGroupsResponse = ask(&node, &groups, LIST_GROUPS, 5, &req).await;
    let g1 = resp
        .groups
        .iter()
        .find(|g| g.group_id.as_str() == "g1")
        .expect("g1 listed");
    assert_eq!((g1.group_state.as_str(), g1.group_type.as_str()), ("Empty", "classic"));
    let req = km::ListGroupsRequest::default().with_types_filter(vec![sb("consumer")]);
    let resp: km::ListGroupsResponse = ask(&node, &groups, LIST_GROUPS, 5, &req).await;
    assert!(resp.groups.is_empty());
    let req = km::ListGroupsRequest::default().with_states_filter(vec![sb("Stable")]);
    let resp: km::ListGroupsResponse = ask(&node, &groups, LIST_GROUPS, 4, &req).await;
    assert!(resp.groups.is_empty());
}
