//! `PutGroupState`, `DeleteGroupState` and `DeleteGroup` on membership
//! records: every acceptance and rejection.

use super::*;
use crate::meta::group_state::{MAX_GROUPS, MAX_STATE_BYTES};

fn put(h: &mut Harness, e: NodeEpoch, group: &str, kind: &str, expected: u64, data: &[u8]) -> Outcome {
    h.apply_as(
        "n1",
        Some(e.0),
        Command::PutGroupState {
            group: group.into(),
            kind: kind.into(),
            expected_version: expected,
            data: data.to_vec(),
        },
    )
}

fn delete(h: &mut Harness, e: NodeEpoch, group: &str, expected: Option<u64>) -> Outcome {
    h.apply_as(
        "n1",
        Some(e.0),
        Command::DeleteGroupState {
            group: group.into(),
            expected_version: expected,
        },
    )
}

fn precondition(o: &Outcome) -> bool {
    matches!(o, Outcome::Rejected(Rejection::Precondition(_)))
}

#[test]
fn group_state_is_written_by_compare_and_set_on_its_version() {
    let (mut h, e, _) = Harness::with_open_stream();
    assert_eq!(put(&mut h, e, "g", "classic", 0, b"gen1"), Outcome::Applied);
    assert_eq!(h.view.group_states["g"].version, 1);
    // A second writer that also saw no record loses.
    assert!(precondition(&put(&mut h, e, "g", "classic", 0, b"other")));
    assert_eq!(h.view.group_states["g"].data, b"gen1");
    assert_eq!(put(&mut h, e, "g", "classic", 1, b"gen2"), Outcome::Applied);
    assert!(precondition(&put(&mut h, e, "g", "classic", 1, b"stale")));
    let row = &h.view.group_states["g"];
    assert_eq!(
        (row.kind.as_str(), row.version, row.data.as_slice()),
        ("classic", 2, &b"gen2"[..])
    );
    // The view (and so a snapshot) round-trips with the bytes as base64.
    let json = serde_json::to_string(&h.view).unwrap();
    assert!(json.contains("Z2VuMg=="), "{json}");
    assert_eq!(serde_json::from_str::<View>(&json).unwrap(), h.view);
}

#[test]
fn group_state_refuses_bad_kinds_empty_ids_and_oversized_records() {
    let (mut h, e, _) = Harness::with_open_stream();
    let invalid = |o: Outcome| matches!(o, Outcome::Rejected(Rejection::Invalid(_)));
    assert!(invalid(put(&mut h, e, "g", "share", 0, b"")));
    assert!(invalid(put(&mut h, e, "", "classic", 0, b"")));
    let big = vec![0u8; MAX_STATE_BYTES + 1];
    assert!(invalid(put(&mut h, e, "g", "consumer", 0, &big)));
    assert_eq!(
        put(&mut h, e, "g", "consumer", 0, &big[..MAX_STATE_BYTES]),
        Outcome::Applied
    );
    assert!(h.view.group_states.len() == 1);
    // A log entry with the largest record fits a DynamoDB item inline.
    let cmd = Command::PutGroupState {
        group: "g".repeat(249),
        kind: "consumer".into(),
        expected_version: 1,
        data: big[..MAX_STATE_BYTES].to_vec(),
    };
    assert!(serde_json::to_vec(&cmd).unwrap().len() < 350 * 1024);
}

#[test]
fn group_state_count_is_capped_but_rewrites_are_not() {
    let (mut h, e, _) = Harness::with_open_stream();
    for i in 0..MAX_GROUPS {
        h.view.group_states.insert(
            format!("g{i}"),
            crate::meta::group_state::GroupStateRow {
                kind: "classic".into(),
                version: 1,
                data: Vec::new(),
            },
        );
    }
    assert!(matches!(
        put(&mut h, e, "new", "classic", 0, b""),
        Outcome::Rejected(Rejection::Invalid(_))
    ));
    assert_eq!(put(&mut h, e, "g0", "classic", 1, b"x"), Outcome::Applied);
}

#[test]
fn delete_group_state_checks_the_version_unless_told_not_to() {
    let (mut h, e, _) = Harness::with_open_stream();
    assert_eq!(
        delete(&mut h, e, "g", None),
        Outcome::Applied,
        "nothing to delete is fine"
    );
    assert_eq!(delete(&mut h, e, "g", Some(0)), Outcome::Applied);
    put(&mut h, e, "g", "classic", 0, b"a");
    assert!(precondition(&delete(&mut h, e, "g", Some(0))));
    assert!(precondition(&delete(&mut h, e, "g", Some(2))));
    assert_eq!(delete(&mut h, e, "g", Some(1)), Outcome::Applied);
    assert!(h.view.group_states.is_empty());
    put(&mut h, e, "g", "classic", 0, b"a");
    assert_eq!(delete(&mut h, e, "g", None), Outcome::Applied);
    assert!(h.view.group_states.is_empty());
}

#[test]
fn delete_group_forgets_the_membership_record_too() {
    let (mut h, e, s) = Harness::with_open_stream();
    let delete_group = |h: &mut Harness| h.apply_as("n1", Some(e.0), Command::DeleteGroup { group: "g".into() });
    // A group with only a record (no offsets yet) can be deleted.
    put(&mut h, e, "g", "classic", 0, b"a");
    assert_eq!(delete_group(&mut h), Outcome::Applied);
    assert!(h.view.group_states.is_empty());
    assert!(rejected(&delete_group(&mut h)));
    // And with both, both go.
    commit(&mut h, e, "g", vec![(s, 3, None)]);
    put(&mut h, e, "g", "classic", 0, b"a");
    assert_eq!(delete_group(&mut h), Outcome::Applied);
    assert!(h.view.groups.is_empty() && h.view.group_states.is_empty());
}
