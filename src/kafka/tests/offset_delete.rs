//! OffsetDelete: the codec at every version against kafka-protocol's
//! structs, bounds, the subscription rules, `GroupOffsets::delete_offsets`
//! on a node and on the fake, and the answers of a real node for empty,
//! classic, KIP-848, unknown, uncoordinated and unauthorized groups.

use super::*;
use crate::kafka::groups::{Group, Member, Phase, Stored};
use crate::kafka::header::{flexible_request, flexible_response};
use crate::kafka::offset_delete::*;
use kafka_protocol::messages as km;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

fn versions() -> std::ops::RangeInclusive<i16> {
    let (_, min, max) = SUPPORTED.iter().find(|r| r.0 == OFFSET_DELETE).copied().unwrap();
    min..=max
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn req(group: &str, topics: &[(&str, &[i32])]) -> km::OffsetDeleteRequest {
    use km::offset_delete_request as o;
    km::OffsetDeleteRequest::default()
        .with_group_id(sb(group).into())
        .with_topics(
            topics
                .iter()
                .map(|(t, ps)| {
                    o::OffsetDeleteRequestTopic::default()
                        .with_name(sb(t).into())
                        .with_partitions(
                            ps.iter()
                                .map(|p| o::OffsetDeleteRequestPartition::default().with_partition_index(*p))
                                .collect(),
                        )
                })
                .collect(),
        )
}

fn enc<M: Encodable>(m: &M, version: i16) -> Vec<u8> {
    let mut b = bytes::BytesMut::new();
    m.encode(&mut b, version).unwrap();
    b.to_vec()
}

fn frame(key: i16, version: i16, body: &[u8]) -> Bytes {
    let mut w = Writer::default();
    w.i16(key);
    w.i16(version);
    w.i32(7);
    w.nullable_string(Some("offset-delete-test"));
    if flexible_request(key, version) {
        w.no_tagged_fields();
    }
    w.buf.extend_from_slice(body);
    w.buf.freeze()
}

async fn answer<M: Decodable>(engine: &Services, groups: &Groups, key: i16, version: i16, body: &[u8]) -> M {
    let resp = handle_in(engine, groups, OPTS, frame(key, version, body), "peer")
        .await
        .unwrap()
        .unwrap();
    let mut r = Reader::new(resp);
    assert_eq!(r.i32().unwrap(), 7);
    if flexible_response(key, version) {
        r.tagged_fields().unwrap();
    }
    let mut b = r.bytes_exact(r.remaining()).unwrap();
    let m = M::decode(&mut b, version).unwrap();
    assert!(b.is_empty(), "key {key} v{version}: {} bytes left", b.len());
    m
}

/// OffsetDelete of `topics` for `group`: (top-level error, [(topic, [(partition, error)])]).
type Answered = (i16, Vec<(String, Vec<(i32, i16)>)>);

async fn delete(engine: &Services, groups: &Groups, version: i16, group: &str, topics: &[(&str, &[i32])]) -> Answered {
    let resp: km::OffsetDeleteResponse = answer(
        engine,
        groups,
        OFFSET_DELETE,
        version,
        &enc(&req(group, topics), version),
    )
    .await;
    assert_eq!(resp.throttle_time_ms, 0);
    let topics = resp
        .topics
        .iter()
        .map(|t| {
            let ps = t.partitions.iter().map(|p| (p.partition_index, p.error_code)).collect();
            (t.name.0.to_string(), ps)
        })
        .collect();
    (resp.error_code, topics)
}

fn answered(topics: &[(&str, &[(i32, i16)])]) -> Vec<(String, Vec<(i32, i16)>)> {
    topics.iter().map(|(t, ps)| (t.to_string(), ps.to_vec())).collect()
}

fn offset(topic: &str, partition: u32, offset: i64) -> GroupOffset {
    GroupOffset {
        topic: topic.into(),
        partition,
        offset,
        metadata: None,
    }
}

/// The (topic, partition) pairs `group` has offsets for, sorted.
fn committed(engine: &Services, group: &str) -> Vec<(String, u32)> {
    let mut v: Vec<_> = engine
        .group_offsets
        .committed_offsets(group)
        .into_iter()
        .map(|o| (o.topic, o.partition))
        .collect();
    v.sort();
    v
}

fn tp(t: &str, p: u32) -> (String, u32) {
    (t.to_string(), p)
}

/// A `ConsumerProtocolSubscription` as a consumer sends it: the version,
/// then the struct at that version.
fn subscription(version: i16, topics: &[&str]) -> Bytes {
    let s = km::ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| sb(t)).collect())
        .with_user_data(Some(Bytes::from_static(b"u")))
        .with_generation_id(3);
    let mut b = version.to_be_bytes().to_vec();
    b.extend(enc(&s, version));
    Bytes::from(b)
}

#[test]
fn offset_delete_requests_decode_at_every_version() {
    for v in versions() {
        let body = enc(&req("g", &[("t", &[0, 2]), ("u", &[])]), v);
        let got = decode_offset_delete(&mut Reader::new(Bytes::from(body.clone())), v).unwrap();
        assert_eq!(
            got,
            OffsetDeleteRequest {
                group_id: "g".into(),
                topics: vec![("t".into(), vec![0, 2]), ("u".into(), vec![])],
            },
            "v{v}"
        );
        for cut in 0..body.len() {
            assert!(decode_offset_delete(&mut Reader::new(Bytes::copy_from_slice(&body[..cut])), v).is_err());
        }
        let mut longer = body.clone();
        longer.push(0);
        assert!(decode_offset_delete(&mut Reader::new(Bytes::from(longer)), v).is_err());
    }
    // A topic count of 2^31-1 in a few bytes is refused before allocating.
    let huge: &[u8] = &[0, 1, b'g', 0x7f, 0xff, 0xff, 0xff];
    assert!(decode_offset_delete(&mut Reader::new(Bytes::from_static(huge)), 0).is_err());
    let mut rng = rand::rngs::SmallRng::seed_from_u64(47);
    for _ in 0..5_000 {
        let b: Vec<u8> = (0..rng.random_range(0..40)).map(|_| rng.random::<u8>()).collect();
        let _ = decode_offset_delete(&mut Reader::new(Bytes::from(b)), 0);
    }
}

#[test]
fn offset_delete_responses_encode_as_kafka_decodes_them() {
    for v in versions() {
        let a = OffsetDeleteAnswer {
            error_code: 0,
            topics: answered(&[("t", &[(0, 0), (1, GROUP_SUBSCRIBED_TO_TOPIC)])]),
        };
        let mut w = Writer::default();
        encode_offset_delete(&mut w, v, &a).unwrap();
        let mut b = w.buf.freeze();
        let m = km::OffsetDeleteResponse::decode(&mut b, v).unwrap();
        assert!(b.is_empty());
        assert_eq!(m.topics[0].name.0.as_str(), "t");
        assert_eq!(m.topics[0].partitions[1].error_code, 86);
    }
}

#[test]
fn subscriptions_are_read_from_the_v0_prefix_of_every_version() {
    for v in 0..=3 {
        assert_eq!(
            subscription_topics(subscription(v, &["a", "b"])),
            Some(vec!["a".to_string(), "b".to_string()]),
            "v{v}"
        );
    }
    assert_eq!(subscription_topics(subscription(0, &[])), Some(vec![]));
    // A negative version, a lying count, or too few bytes: unreadable.
    let mut negative = subscription(0, &["a"]).to_vec();
    negative[..2].copy_from_slice(&(-1i16).to_be_bytes());
    assert_eq!(subscription_topics(Bytes::from(negative)), None);
    assert_eq!(
        subscription_topics(Bytes::from_static(&[0, 0, 0x7f, 0xff, 0xff, 0xff])),
        None
    );
    assert_eq!(subscription_topics(Bytes::from_static(b"meta")), None);
    assert_eq!(subscription_topics(Bytes::new()), None);
}

fn member(id: &str, protocols: &[(&str, Bytes)]) -> Member {
    Member {
        joined: true,
        ..Member::for_test(id, protocols)
    }
}

fn group(phase: Phase, protocol_type: &str, protocol: Option<&str>, members: Vec<Member>) -> Group {
    Group {
        generation: 1,
        phase,
        protocol_type: protocol_type.into(),
        protocol: protocol.map(String::from),
        leader: members.first().map(|m| m.info.id.clone()),
        members: members.into_iter().map(|m| (m.info.id.clone(), m)).collect(),
        pending: Default::default(),
        stored: Stored::default(),
    }
}

#[test]
fn classic_groups_subscribe_to_what_their_members_metadata_names() {
    let set = |ts: &[&str]| Subscribed::Topics(ts.iter().map(|t| t.to_string()).collect());
    let a = member(
        "a",
        &[("range", subscription(1, &["t", "u"])), ("rr", subscription(0, &["x"]))],
    );
    let b = member("b", &[("range", subscription(3, &["u", "v"]))]);
    let stable = group(Phase::Stable, "consumer", Some("range"), vec![a.clone(), b.clone()]);
    let s = classic_subscriptions(&stable).unwrap();
    assert_eq!(s, set(&["t", "u", "v"]), "the chosen protocol's metadata only");
    assert!(s.covers("t") && !s.covers("x"));
    assert_eq!(
        classic_subscriptions(&group(Phase::Empty, "", None, vec![])),
        Ok(Subscribed::Nothing)
    );
    assert!(!Subscribed::Nothing.covers("t"));
    // Members but not the consumer protocol: nothing may be deleted.
    let connect = group(Phase::Stable, "connect", Some("range"), vec![a.clone()]);
    assert_eq!(classic_subscriptions(&connect), Err(groups::code::NON_EMPTY_GROUP));
    // No protocol chosen yet, or metadata that does not parse: every topic.
    let joining = group(
        Phase::PreparingRebalance {
            deadline: tokio::time::Instant::now(),
        },
        "consumer",
        None,
        vec![a.clone()],
    );
    assert_eq!(classic_subscriptions(&joining), Ok(Subscribed::Everything));
    let garbled = member("c", &[("range", Bytes::from_static(b"??"))]);
    let g = group(Phase::CompletingRebalance, "consumer", Some("range"), vec![a, garbled]);
    assert_eq!(classic_subscriptions(&g), Ok(Subscribed::Everything));
    assert!(Subscribed::Everything.covers("anything"));
    let missing = group(Phase::Stable, "consumer", Some("sticky"), vec![b]);
    assert_eq!(classic_subscriptions(&missing), Ok(Subscribed::Everything));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_offsets_forgets_only_the_named_partitions_on_a_node() {
    let node = node().await;
    let g = node.services().group_offsets;
    node.create_topic("t", 2, Default::default()).await.unwrap();
    node.create_topic("u", 1, Default::default()).await.unwrap();
    wait_open(&node.services(), "u").await;
    g.commit_offsets("g", vec![offset("t", 0, 1), offset("t", 1, 2), offset("u", 0, 3)])
        .await
        .unwrap();
    g.commit_offsets("other", vec![offset("t", 0, 9)]).await.unwrap();
    g.put_group_state("g", "classic", 0, b"members".to_vec()).await.unwrap();
    // Named twice, unknown partitions and topics: skipped.
    let asked = vec![tp("t", 0), tp("t", 0), tp("t", 7), tp("nope", 0), tp("u", 0)];
    g.delete_offsets("g", asked).await.unwrap();
    assert_eq!(committed(&node.services(), "g"), vec![tp("t", 1)]);
    assert_eq!(committed(&node.services(), "other"), vec![tp("t", 0)]);
    // Nothing of it left: a no-op, and so is a group with no offsets.
    g.delete_offsets("g", vec![tp("t", 0)]).await.unwrap();
    g.delete_offsets("nobody", vec![tp("t", 0)]).await.unwrap();
    g.delete_offsets("g", vec![tp("t", 1)]).await.unwrap();
    assert!(g.committed_offsets("g").is_empty());
    assert!(!g.offset_groups().contains(&"g".to_string()));
    assert_eq!(
        g.group_state("g").unwrap().data,
        b"members",
        "the membership record stays"
    );
    assert!(g.authorize_offset_delete("g", "t").is_ok());
}

#[tokio::test]
async fn delete_offsets_on_the_fake_has_nothing_to_forget() {
    let fake = FakeEngine::new(FakeEngine::default_limits());
    fake.delete_offsets("g", vec![tp("t", 0)]).await.unwrap();
    assert!(fake.committed_offsets("g").is_empty());
    assert!(fake.authorize_offset_delete("g", "t").is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_group_loses_every_asked_offset_and_then_is_not_found() {
    let node = node().await;
    let engine = node.services();
    node.create_topic("t", 3, Default::default()).await.unwrap();
    wait_open(&engine, "t").await;
    let groups = Groups::new();
    for v in versions() {
        engine
            .group_offsets
            .commit_offsets("g", vec![offset("t", 0, 1), offset("t", 1, 2)])
            .await
            .unwrap();
        let asked: &[(&str, &[i32])] = &[("t", &[0, 9, -1]), ("nope", &[0]), ("t", &[2])];
        let got = delete(&engine, &groups, v, "g", asked).await;
        let unknown = code::UNKNOWN_TOPIC_OR_PARTITION;
        assert_eq!(
            got,
            (
                0,
                answered(&[
                    ("t", &[(0, 0), (9, unknown), (-1, unknown), (2, 0)]),
                    ("nope", &[(0, unknown)])
                ])
            ),
            "v{v}: a topic named twice is answered once; partition 2 has no offset and answers NONE"
        );
        assert_eq!(committed(&engine, "g"), vec![tp("t", 1)]);
        let got = delete(&engine, &groups, v, "g", &[("t", &[1])]).await;
        assert_eq!(got, (0, answered(&[("t", &[(1, 0)])])));
        assert!(committed(&engine, "g").is_empty());
        // No offsets and no members left: the group is gone.
        let got = delete(&engine, &groups, v, "g", &[("t", &[1])]).await;
        assert_eq!(got, (groups::code::GROUP_ID_NOT_FOUND, vec![]), "v{v}");
        let got = delete(&engine, &groups, v, "", &[("t", &[1])]).await;
        assert_eq!(got, (groups::code::INVALID_GROUP_ID, vec![]), "v{v}");
    }
}

/// JoinGroup v5 of a static member of `group` (so no MEMBER_ID_REQUIRED
/// round): the error code.
async fn join(engine: &Services, groups: &Groups, group: &str, protocol_type: &str, metadata: Bytes) -> i16 {
    let body = km::JoinGroupRequest::default()
        .with_group_id(sb(group).into())
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_group_instance_id(Some(sb("i1")))
        .with_protocol_type(sb(protocol_type))
        .with_protocols(vec![km::join_group_request::JoinGroupRequestProtocol::default()
            .with_name(sb("range"))
            .with_metadata(metadata)]);
    let resp: km::JoinGroupResponse = answer(engine, groups, JOIN_GROUP, 5, &enc(&body, 5)).await;
    resp.error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_group_with_members_keeps_the_offsets_of_subscribed_topics() {
    let node = node().await;
    let engine = node.services();
    node.create_topic("t", 1, Default::default()).await.unwrap();
    node.create_topic("u", 1, Default::default()).await.unwrap();
    wait_open(&engine, "u").await;
    let groups = Groups::new();
    assert_eq!(
        join(&engine, &groups, "g", "consumer", subscription(1, &["t"])).await,
        0
    );
    let all = vec![offset("t", 0, 1), offset("u", 0, 2)];
    for v in versions() {
        engine.group_offsets.commit_offsets("g", all.clone()).await.unwrap();
        let got = delete(&engine, &groups, v, "g", &[("t", &[0]), ("u", &[0])]).await;
        assert_eq!(
            got,
            (
                0,
                answered(&[("t", &[(0, GROUP_SUBSCRIBED_TO_TOPIC)]), ("u", &[(0, 0)])])
            ),
            "v{v}"
        );
        assert_eq!(committed(&engine, "g"), vec![tp("t", 0)]);
    }
    // A group with members of another protocol refuses the whole request.
    assert_eq!(
        join(&engine, &groups, "connect", "connect", Bytes::from_static(b"x")).await,
        0
    );
    engine
        .group_offsets
        .commit_offsets("connect", all.clone())
        .await
        .unwrap();
    let got = delete(&engine, &groups, 0, "connect", &[("u", &[0])]).await;
    assert_eq!(got, (groups::code::NON_EMPTY_GROUP, vec![]));
    assert_eq!(committed(&engine, "connect").len(), 2);
    // Members with unreadable metadata subscribe to everything.
    assert_eq!(
        join(&engine, &groups, "odd", "consumer", Bytes::from_static(b"??")).await,
        0
    );
    engine.group_offsets.commit_offsets("odd", all).await.unwrap();
    let got = delete(&engine, &groups, 0, "odd", &[("u", &[0])]).await;
    assert_eq!(got, (0, answered(&[("u", &[(0, GROUP_SUBSCRIBED_TO_TOPIC)])])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_group_keeps_the_offsets_of_topics_its_members_subscribe_to() {
    let node = node().await;
    let engine = node.services();
    for t in ["t", "tx", "u"] {
        node.create_topic(t, 1, Default::default()).await.unwrap();
        wait_open(&engine, t).await;
    }
    let groups = Groups::new();
    let hb = km::ConsumerGroupHeartbeatRequest::default()
        .with_group_id(sb("cg").into())
        .with_member_id(sb("m1"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![sb("t").into()]))
        .with_subscribed_topic_regex(Some(sb("tx.*")))
        .with_topic_partitions(Some(vec![]));
    let key = crate::kafka::consumer_proto::CONSUMER_GROUP_HEARTBEAT;
    let resp: km::ConsumerGroupHeartbeatResponse = answer(&engine, &groups, key, 1, &enc(&hb, 1)).await;
    assert_eq!(resp.error_code, 0, "{resp:?}");
    let all = vec![offset("t", 0, 1), offset("tx", 0, 2), offset("u", 0, 3)];
    engine.group_offsets.commit_offsets("cg", all).await.unwrap();
    let got = delete(&engine, &groups, 0, "cg", &[("t", &[0]), ("tx", &[0]), ("u", &[0])]).await;
    let kept = GROUP_SUBSCRIBED_TO_TOPIC;
    assert_eq!(
        got,
        (
            0,
            answered(&[("t", &[(0, kept)]), ("tx", &[(0, kept)]), ("u", &[(0, 0)])])
        ),
        "by name and by regex"
    );
    assert_eq!(committed(&engine, "cg"), vec![tp("t", 0), tp("tx", 0)]);
    // A coordinator that loads the group from its record sees the same.
    let fresh = Groups::new();
    let got = delete(&engine, &fresh, 0, "cg", &[("tx", &[0])]).await;
    assert_eq!(got, (0, answered(&[("tx", &[(0, kept)])])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_coordinator_deletes_offsets() {
    let (n1, n2) = two_nodes().await;
    n1.create_topic("t", 1, Default::default()).await.unwrap();
    wait_open(&n2.services(), "t").await;
    let group = (0..)
        .map(|i| format!("g{i}"))
        .find(|g| coordinator::coordinator_of(&n1.services(), g).unwrap().0 == "n2")
        .unwrap();
    n2.commit_offsets(&group, vec![offset("t", 0, 5)]).await.unwrap();
    let groups = Groups::new();
    let got = delete(&n1.services(), &groups, 0, &group, &[("t", &[0])]).await;
    assert_eq!(got, (groups::code::NOT_COORDINATOR, vec![]));
    assert_eq!(n2.committed_offsets(&group).len(), 1);
    let got = delete(&n2.services(), &groups, 0, &group, &[("t", &[0])]).await;
    assert_eq!(got, (0, answered(&[("t", &[(0, 0)])])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_delete_needs_the_group_and_read_on_each_topic() {
    use crate::auth::{Op, Principal, Scope};
    let node = node().await;
    node.create_topic("t", 1, Default::default()).await.unwrap();
    node.create_topic("u", 1, Default::default()).await.unwrap();
    wait_open(&node.services(), "u").await;
    let as_principal =
        |scopes: Vec<Scope>| authz::scoped(&node.services(), Arc::new(Principal { id: "p".into(), scopes }));
    let groups = Groups::new();
    node.commit_offsets("g", vec![offset("t", 0, 1), offset("u", 0, 2)])
        .await
        .unwrap();
    // Deleting the group's offsets needs admin on all its topics, as DeleteGroups does.
    let reader = as_principal(vec![Scope::new("*", &[Op::Read])]);
    let got = delete(&reader, &groups, 0, "g", &[("t", &[0])]).await;
    assert_eq!(got, (groups::code::GROUP_AUTHORIZATION_FAILED, vec![]));
    // Admin on both, read on t only: u's partition is refused alone.
    let admin = as_principal(vec![Scope::new("*", &[Op::Admin]), Scope::new("t", &[Op::Read])]);
    let got = delete(&admin, &groups, 0, "g", &[("t", &[0]), ("u", &[0])]).await;
    let denied = code::TOPIC_AUTHORIZATION_FAILED;
    assert_eq!(got, (0, answered(&[("t", &[(0, 0)]), ("u", &[(0, denied)])])));
    assert_eq!(committed(&node.services(), "g"), vec![tp("u", 0)]);
    // The wrapper refuses a direct call that names an unreadable topic.
    let e = admin
        .group_offsets
        .delete_offsets("g", vec![tp("u", 0)])
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    assert_eq!(committed(&node.services(), "g"), vec![tp("u", 0)]);
}
