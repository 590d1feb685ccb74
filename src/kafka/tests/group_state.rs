//! The group-state capability (`GroupOffsets::put_group_state` and
//! friends) over a real in-memory node and over the HTTP tests' fake: one
//! conformance function, run on both.

use super::*;
use crate::api::{GroupOffsets, GroupState, GroupStateWrite, MAX_GROUP_STATE_BYTES};

async fn conformance(g: &dyn GroupOffsets) {
    assert_eq!(g.group_state("g"), None);
    assert_eq!(
        g.put_group_state("g", "classic", 0, b"one".to_vec()).await.unwrap(),
        GroupStateWrite::Written(1)
    );
    let one = GroupState {
        kind: "classic".into(),
        version: 1,
        data: b"one".to_vec(),
    };
    assert_eq!(g.group_state("g"), Some(one.clone()));
    assert_eq!(g.group_state_version("g"), 1);
    assert_eq!(g.group_states(), vec!["g".to_string()]);
    // A writer that saw no record loses and is told what won.
    assert_eq!(
        g.put_group_state("g", "classic", 0, b"two".to_vec()).await.unwrap(),
        GroupStateWrite::Conflict(Some(one.clone()))
    );
    assert_eq!(
        g.put_group_state("g", "classic", 1, b"two".to_vec()).await.unwrap(),
        GroupStateWrite::Written(2)
    );
    // Too large is an error naming the size, not a conflict.
    let e = g
        .put_group_state("g", "classic", 2, vec![0; MAX_GROUP_STATE_BYTES + 1])
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RequestTooLarge);
    assert_eq!(g.group_state("g").unwrap().version, 2);
    assert!(matches!(
        g.delete_group_state("g", Some(1)).await.unwrap(),
        GroupStateWrite::Conflict(Some(GroupState { version: 2, .. }))
    ));
    assert_eq!(
        g.delete_group_state("g", Some(2)).await.unwrap(),
        GroupStateWrite::Written(0)
    );
    assert_eq!(g.group_state("g"), None);
    assert_eq!(
        g.delete_group_state("g", None).await.unwrap(),
        GroupStateWrite::Written(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_state_capability_conforms_on_a_node() {
    let node = node().await;
    conformance(&*node.services().group_offsets).await;
    // DeleteGroups of a group with only a record removes it.
    node.put_group_state("h", "consumer", 0, b"x".to_vec()).await.unwrap();
    node.delete_group("h").await.unwrap();
    assert_eq!(node.group_state("h"), None);
}

#[tokio::test]
async fn group_state_capability_conforms_on_the_fake() {
    let fake = FakeEngine::new(FakeEngine::default_limits());
    conformance(&*fake).await;
}

async fn call_groups(engine: &Services, groups: &Groups, key: i16, version: i16, body: &[u8]) -> Reader {
    let resp = handle_in(engine, groups, OPTS, request(key, version, 5, body), "peer")
        .await
        .unwrap()
        .unwrap();
    let mut r = Reader::new(resp);
    assert_eq!(r.i32().unwrap(), 5);
    r
}

/// JoinGroup v5 of a static member: (error, generation, member id).
async fn join_static(engine: &Services, groups: &Groups, instance: &str) -> (i16, i32, String) {
    let mut w = Writer::default();
    w.string("sg");
    w.i32(10_000);
    w.i32(10_000);
    w.string("");
    w.nullable_string(Some(instance));
    w.string("consumer");
    w.array_len(1);
    w.string("range");
    w.bytes_parts(&[Bytes::from_static(b"meta")]);
    let mut r = call_groups(engine, groups, JOIN_GROUP, 5, &w.buf).await;
    r.i32().unwrap();
    let e = r.i16().unwrap();
    let generation = r.i32().unwrap();
    r.string().unwrap();
    r.string().unwrap();
    (e, generation, r.string().unwrap())
}

/// Heartbeat v3 (with the instance id): the error code.
async fn heartbeat(engine: &Services, groups: &Groups, generation: i32, member: &str, instance: &str) -> i16 {
    let mut w = Writer::default();
    w.string("sg");
    w.i32(generation);
    w.string(member);
    w.nullable_string(Some(instance));
    let mut r = call_groups(engine, groups, HEARTBEAT, 3, &w.buf).await;
    r.i32().unwrap();
    r.i16().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_coordinator_over_the_same_log_carries_on_with_the_same_members() {
    let node = node().await;
    node.create_topic("t", 1, Default::default()).await.unwrap();
    let engine = node.services();
    wait_open(&engine, "t").await;
    let first = Groups::new();
    let (e, generation, member) = join_static(&engine, &first, "i1").await;
    assert_eq!((e, generation), (0, 1));
    let mut w = Writer::default();
    w.string("sg");
    w.i32(1);
    w.string(&member);
    w.nullable_string(Some("i1"));
    w.array_len(1);
    w.string(&member);
    w.bytes_parts(&[Bytes::from_static(b"assigned")]);
    let mut r = call_groups(&engine, &first, SYNC_GROUP, 3, &w.buf).await;
    r.i32().unwrap();
    assert_eq!(r.i16().unwrap(), 0);
    assert_eq!(
        node.group_state("sg").unwrap().version,
        1,
        "the generation is in the log"
    );
    // The coordinator "moves": a fresh Groups over the same services.
    let second = Groups::new();
    assert_eq!(heartbeat(&engine, &second, 1, &member, "i1").await, 0);
    let mut w = Writer::default();
    w.string("sg");
    w.i32(1);
    w.string(&member);
    w.nullable_string(Some("i1"));
    w.array_len(1);
    w.string("t");
    w.array_len(1);
    w.i32(0);
    w.i64(9);
    w.i32(-1);
    w.nullable_string(None);
    let mut r = call_groups(&engine, &second, OFFSET_COMMIT, 7, &w.buf).await;
    r.i32().unwrap();
    r.array_len(1).unwrap();
    r.string().unwrap();
    r.array_len(1).unwrap();
    assert_eq!(
        (r.i32().unwrap(), r.i16().unwrap()),
        (0, 0),
        "committed at generation 1"
    );
    // The static member restarts against the second coordinator: same
    // generation, no rebalance, the old member id fenced; the replacement
    // is written, so the first coordinator (stale) reloads it.
    let (e, generation, member2) = join_static(&engine, &second, "i1").await;
    assert_eq!((e, generation), (0, 1));
    assert_ne!(member2, member);
    assert_eq!(
        heartbeat(&engine, &second, 1, &member, "i1").await,
        groups::code::FENCED_INSTANCE_ID
    );
    assert_eq!(node.group_state("sg").unwrap().version, 2);
    assert_eq!(heartbeat(&engine, &first, 1, &member2, "i1").await, 0);
    // DeleteGroups needs the group empty; LeaveGroup by instance empties it.
    let mut w = Writer::default();
    w.string("sg");
    w.array_len(1);
    w.string("");
    w.nullable_string(Some("i1"));
    let mut r = call_groups(&engine, &first, LEAVE_GROUP, 3, &w.buf).await;
    r.i32().unwrap();
    assert_eq!(r.i16().unwrap(), 0);
    r.array_len(1).unwrap();
    r.string().unwrap();
    r.nullable_string().unwrap();
    assert_eq!(r.i16().unwrap(), 0);
    let state = node.group_state("sg").unwrap();
    assert_eq!(state.version, 3, "the Empty group is written");
    let mut w = Writer::default();
    w.array_len(1);
    w.string("sg");
    let mut r = call_groups(&engine, &first, DELETE_GROUPS, 1, &w.buf).await;
    r.i32().unwrap();
    r.array_len(1).unwrap();
    assert_eq!((r.string().unwrap(), r.i16().unwrap()), ("sg".into(), 0));
    assert_eq!(node.group_state("sg"), None);
    assert!(node.committed_offsets("sg").is_empty());
}
