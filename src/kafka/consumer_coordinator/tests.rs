//! The consumer-protocol APIs through the dispatcher, over a real
//! in-memory node: heartbeats, describe, and the classic coordinator's
//! hooks (OffsetCommit epochs, JoinGroup on a consumer group).

use super::super::{handle_in, Options};
use super::*;
use crate::api::Topics;
use crate::config::ServeArgs;
use crate::node::{Backends, Node};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    offset_commit_request, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, JoinGroupRequest, JoinGroupResponse, ListGroupsRequest, ListGroupsResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::sync::Arc;
use std::time::Duration;

fn sb(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn node() -> Arc<Node> {
    let args = [
        "--node-id",
        "n1",
        "--heartbeat-interval-sec",
        "1",
        "--shutdown-drain-sec",
        "0",
        "--meta-poll-ms",
        "20",
        "--http-addr",
        "127.0.0.1:0",
        "--kafka-addr",
        "127.0.0.1:0",
    ];
    let config = ServeArgs::parse_from(args).unwrap().validate().unwrap();
    let backends = Backends {
        data: Arc::new(crate::store::MemoryStore::new()),
        wal: Arc::new(crate::store::MemoryStore::new()),
        log: Arc::new(crate::meta::memory_log::MemoryLog::new()),
    };
    Node::start_with(config, backends).await.unwrap()
}

/// A request frame: header (v2 when the API is flexible) and body.
fn frame<M: Encodable>(key: i16, version: i16, body: &M) -> Bytes {
    let mut w = Writer::default();
    w.i16(key);
    w.i16(version);
    w.i32(1);
    w.nullable_string(Some("test"));
    if crate::kafka::header::flexible_request(key, version) {
        w.no_tagged_fields();
    }
    let mut b = BytesMut::new();
    body.encode(&mut b, version).unwrap();
    w.buf.extend_from_slice(&b);
    w.buf.freeze()
}

/// The response body (after the correlation id and any tagged header).
async fn call<R: Decodable>(engine: &Services, groups: &Groups, key: i16, version: i16, f: Bytes) -> R {
    let resp = handle_in(engine, groups, Options::defaults(), f, "127.0.0.1")
        .await
        .unwrap()
        .unwrap();
    let mut r = Reader::new(resp);
    r.i32().unwrap();
    if crate::kafka::header::flexible_response(key, version) {
        r.tagged_fields().unwrap();
    }
    let mut rest = r.bytes_exact(r.remaining()).unwrap();
    R::decode(&mut rest, version).unwrap()
}

fn join_req(member: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(sb("g").into())
        .with_member_id(sb(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![sb("t").into()]))
        .with_topic_partitions(Some(vec![]))
}

/// OffsetFetch v9 of group `g`'s committed offsets by `member` at `epoch`.
fn fetch_req(member: Option<&str>, epoch: i32) -> OffsetFetchRequest {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
    OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(sb("g").into())
        .with_member_id(member.map(sb))
        .with_member_epoch(epoch)
        .with_topics(None)])
}

fn commit_req(member: &str, epoch: i32) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(sb("g").into())
        .with_generation_id_or_member_epoch(epoch)
        .with_member_id(sb(member))
        .with_topics(vec![offset_commit_request::OffsetCommitRequestTopic::default()
            .with_name(sb("t").into())
            .with_partitions(vec![
                offset_commit_request::OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(0),
            ])])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_assign_by_topic_id_and_commits_check_the_member_epoch() {
    let node = node().await;
    let engine = node.services();
    node.create_topic("t", 2, Default::default()).await.unwrap();
    for _ in 0..200 {
        if engine.topics.partitions("t").is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let topic_id = engine.topics.list_topics()[0].topic_id;
    let groups = Groups::new();

    // v0: the coordinator names the member.
    let resp: ConsumerGroupHeartbeatResponse = call(
        &engine,
        &groups,
        CONSUMER_GROUP_HEARTBEAT,
        0,
        frame(CONSUMER_GROUP_HEARTBEAT, 0, &join_req("")),
    )
    .await;
    assert_eq!(resp.error_code, 0, "{resp:?}");
    let member = resp.member_id.clone().unwrap().to_string();
    assert_eq!(member.len(), 22, "16 random bytes in base64");
    assert_eq!(resp.member_epoch, 1);
    let tps = resp.assignment.unwrap().topic_partitions;
    assert_eq!(tps[0].topic_id, uuid::Uuid::from_bytes(topic_id.0));
    assert_eq!(tps[0].partitions, vec![0, 1]);

    // v1: the member brings its id.
    let resp: ConsumerGroupHeartbeatResponse = call(
        &engine,
        &groups,
        CONSUMER_GROUP_HEARTBEAT,
        1,
        frame(CONSUMER_GROUP_HEARTBEAT, 1, &join_req("own-id")),
    )
    .await;
    assert_eq!((resp.error_code, resp.member_epoch), (0, 2));

    // Commits: the member's current epoch, else STALE_MEMBER_EPOCH.
    let ok: OffsetCommitResponse = call(&engine, &groups, 8, 7, frame(8, 7, &commit_req(&member, 1))).await;
    assert_eq!(ok.topics[0].partitions[0].error_code, 0);
    let stale: OffsetCommitResponse = call(&engine, &groups, 8, 7, frame(8, 7, &commit_req(&member, 0))).await;
    assert_eq!(stale.topics[0].partitions[0].error_code, code::STALE_MEMBER_EPOCH);
    let unknown: OffsetCommitResponse = call(&engine, &groups, 8, 7, frame(8, 7, &commit_req("zz", 1))).await;
    assert_eq!(unknown.topics[0].partitions[0].error_code, code::UNKNOWN_MEMBER_ID);
    // Fetches (v9) too; no member and no epoch is an admin's fetch.
    for (m, e, want) in [
        (Some(member.as_str()), 1, 0),
        (Some(member.as_str()), 0, code::STALE_MEMBER_EPOCH),
        (Some("zz"), 1, code::UNKNOWN_MEMBER_ID),
        (None, -1, 0),
    ] {
        let r: OffsetFetchResponse = call(&engine, &groups, 9, 9, frame(9, 9, &fetch_req(m, e))).await;
        assert_eq!(r.groups[0].error_code, want, "{m:?} at {e}");
        if want == 0 {
            let offsets: Vec<_> = r.groups[0]
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.committed_offset))
                .collect();
            assert!(!offsets.is_empty(), "the member's commit is there: {r:?}");
        }
    }

    // A new coordinator (nothing in memory) lists the group as its record
    // has it, before any member calls.
    let listing = Groups::new();
    let r: ListGroupsResponse = call(&engine, &listing, 16, 5, frame(16, 5, &ListGroupsRequest::default())).await;
    let listed: Vec<_> = r
        .groups
        .iter()
        .map(|g| (g.group_id.as_str(), g.group_type.as_str(), g.group_state.as_str()))
        .collect();
    assert_eq!(listed.len(), 1, "{r:?}");
    assert_eq!((listed[0].0, listed[0].1), ("g", "consumer"), "{r:?}");
    assert_ne!(listed[0].2, "Empty", "two members: {r:?}");

    // A new coordinator (nothing in memory) loads the group from its
    // record in the metadata log: the member carries on at its epoch.
    let fresh = Groups::new();
    let steady = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(sb("g").into())
        .with_member_id(sb(&member))
        .with_member_epoch(1)
        .with_topic_partitions(Some(vec![
            kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions::default()
                .with_topic_id(uuid::Uuid::from_bytes(topic_id.0))
                .with_partitions(vec![0, 1]),
        ]));
    let resp: ConsumerGroupHeartbeatResponse = call(
        &engine,
        &fresh,
        CONSUMER_GROUP_HEARTBEAT,
        1,
        frame(CONSUMER_GROUP_HEARTBEAT, 1, &steady),
    )
    .await;
    assert_eq!(resp.error_code, 0, "known on the new coordinator: {resp:?}");
    assert_eq!(resp.member_epoch, 1, "still revoking for own-id");
    let ok: OffsetCommitResponse = call(&engine, &fresh, 8, 7, frame(8, 7, &commit_req(&member, 1))).await;
    assert_eq!(
        ok.topics[0].partitions[0].error_code, 0,
        "commits validated from the record"
    );
    let record = engine.group_offsets.group_state("g").expect("a consumer record");
    assert_eq!(record.kind, "consumer");
    // From here on the new coordinator serves (the old one's next write
    // would lose the compare-and-set and answer NOT_COORDINATOR).
    let groups = fresh;

    // A classic member cannot join a consumer group with members.
    let join = JoinGroupRequest::default()
        .with_group_id(sb("g").into())
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(sb("x"))
        .with_protocol_type(sb("consumer"))
        .with_protocols(vec![
            kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                .with_name(sb("range"))
                .with_metadata(Bytes::from_static(&[0, 0])),
        ]);
    let joined: JoinGroupResponse = call(&engine, &groups, 11, 5, frame(11, 5, &join)).await;
    assert_eq!(joined.error_code, 23, "INCONSISTENT_GROUP_PROTOCOL");

    // Describe, at both versions.
    for version in 0..=1 {
        let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![sb("g").into(), sb("nope").into()]);
        let d: ConsumerGroupDescribeResponse = call(
            &engine,
            &groups,
            CONSUMER_GROUP_DESCRIBE,
            version,
            frame(CONSUMER_GROUP_DESCRIBE, version, &req),
        )
        .await;
        assert_eq!(d.groups[0].error_code, 0);
        assert_eq!(d.groups[0].members.len(), 2);
        assert_eq!(d.groups[0].assignor_name.as_str(), "uniform");
        assert_eq!(d.groups[1].error_code, code::GROUP_ID_NOT_FOUND);
    }

    // Both leave; the empty group then converts on a classic join.
    for (id, epoch) in [(member.as_str(), 1), ("own-id", 2)] {
        let leave = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(sb("g").into())
            .with_member_id(sb(id))
            .with_member_epoch(-1);
        let r: ConsumerGroupHeartbeatResponse = call(
            &engine,
            &groups,
            CONSUMER_GROUP_HEARTBEAT,
            1,
            frame(CONSUMER_GROUP_HEARTBEAT, 1, &leave),
        )
        .await;
        assert_eq!((r.error_code, r.member_epoch), (0, -1), "{id} at {epoch}");
    }
    let join = join.with_member_id(sb(""));
    let joined: JoinGroupResponse = call(&engine, &groups, 11, 5, frame(11, 5, &join)).await;
    assert_eq!(joined.error_code, 79, "MEMBER_ID_REQUIRED: the classic join goes on");
    node.shutdown(async {}).await;
}
