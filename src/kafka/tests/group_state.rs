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
