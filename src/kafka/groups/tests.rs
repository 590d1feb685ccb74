//! The membership state machine: join, sync, rebalance, leave, expiry.

use super::*;

fn join_req(member: &str, protocols: &[&str], known: bool) -> Join {
    Join {
        group: "g".into(),
        member_id: member.into(),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(30),
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(p.to_string())))
            .collect(),
        require_known_member_id: known,
        instance_id: None,
    }
}

/// A member joins through the two-round handshake; returns its id.
fn join_new(g: &Groups, now: Instant) -> String {
    let id = match g.join(join_req("", &["range"], true), now) {
        Err(j) => {
            assert_eq!(j.error_code, code::MEMBER_ID_REQUIRED);
            j.member_id
        }
        Ok(_) => panic!("a new member must first get an id"),
    };
    assert_eq!(g.join(join_req(&id, &["range"], true), now), Ok(id.clone()));
    id
}

#[test]
fn a_lone_member_joins_leads_and_syncs() {
    let g = Groups::new();
    let now = Instant::now();
    let a = join_new(&g, now);
    let j = g.join_result("g", &a).expect("the round completed");
    assert_eq!((j.error_code, j.generation, j.leader.as_str()), (0, 1, a.as_str()));
    assert_eq!(j.protocol, "range");
    assert_eq!(j.members, vec![(a.clone(), Bytes::from("range"))]);
    assert_eq!(g.sync_result("g", 1, &a), None, "waiting for the leader");
    g.sync("g", 1, &a, vec![(a.clone(), Bytes::from("p0"))], now).unwrap();
    assert_eq!(g.sync_result("g", 1, &a), Some(Ok(Bytes::from("p0"))));
    assert_eq!(g.heartbeat("g", 1, &a, now), 0);
    assert_eq!(g.describe("g").unwrap().phase, Phase::Stable);
}

#[test]
fn an_unknown_member_id_and_bad_requests_are_refused() {
    let g = Groups::new();
    let now = Instant::now();
    assert_eq!(
        g.join(join_req("nobody", &["range"], true), now)
            .unwrap_err()
            .error_code,
        code::UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        g.join(join_req("", &[], true), now).unwrap_err().error_code,
        code::INCONSISTENT_GROUP_PROTOCOL
    );
    let mut short = join_req("", &["range"], true);
    short.session_timeout = Duration::from_millis(10);
    assert_eq!(
        g.join(short, now).unwrap_err().error_code,
        code::INVALID_SESSION_TIMEOUT
    );
    let a = join_new(&g, now);
    assert_eq!(
        g.join(join_req("", &["other"], false), now).unwrap_err().error_code,
        code::INCONSISTENT_GROUP_PROTOCOL
    );
    assert_eq!(g.heartbeat("g", 7, &a, now), code::ILLEGAL_GENERATION);
    assert_eq!(g.heartbeat("g", 1, "nobody", now), code::UNKNOWN_MEMBER_ID);
}

#[test]
fn a_second_member_triggers_a_rebalance_that_completes_when_all_rejoin() {
    let g = Groups::new();
    let now = Instant::now();
    let a = join_new(&g, now);
    g.sync("g", 1, &a, vec![], now).unwrap();
    let b = join_new(&g, now);
    assert_eq!(g.join_result("g", &b), None, "a has not rejoined");
    assert_eq!(g.heartbeat("g", 1, &a, now), code::REBALANCE_IN_PROGRESS);
    assert_eq!(g.sync("g", 1, &a, vec![], now), Err(code::REBALANCE_IN_PROGRESS));
    g.join(join_req(&a, &["range"], true), now).unwrap();
    let ja = g.join_result("g", &a).unwrap();
    let jb = g.join_result("g", &b).unwrap();
    assert_eq!((ja.generation, jb.generation), (2, 2));
    assert_eq!(ja.leader, a, "the leader stays");
    assert_eq!(ja.members.len(), 2);
    assert!(jb.members.is_empty(), "only the leader sees the members");
    g.sync(
        "g",
        2,
        &a,
        vec![(a.clone(), Bytes::from("p0")), (b.clone(), Bytes::from("p1"))],
        now,
    )
    .unwrap();
    assert_eq!(g.sync_result("g", 2, &b), Some(Ok(Bytes::from("p1"))));
    assert_eq!(g.sync_result("g", 1, &b), Some(Err(code::ILLEGAL_GENERATION)));
}

#[test]
fn leaving_rebalances_the_rest_and_the_last_leave_empties_the_group() {
    let g = Groups::new();
    let now = Instant::now();
    let a = join_new(&g, now);
    let b = join_new(&g, now);
    g.join(join_req(&a, &["range"], true), now).unwrap();
    g.sync("g", 2, &a, vec![], now).unwrap();
    assert_eq!(g.leave("g", &a, None, now), 0);
    assert_eq!(g.heartbeat("g", 2, &b, now), code::REBALANCE_IN_PROGRESS);
    g.join(join_req(&b, &["range"], true), now).unwrap();
    let jb = g.join_result("g", &b).unwrap();
    assert_eq!((jb.generation, jb.leader.as_str()), (3, b.as_str()), "b leads now");
    assert_eq!(g.leave("g", &a, None, now), code::UNKNOWN_MEMBER_ID);
    assert_eq!(g.leave("g", &b, None, now), 0);
    assert!(g.describe("g").is_none());
    assert!(g.list().is_empty());
}

#[test]
fn silent_members_expire_and_overdue_rounds_drop_stragglers() {
    let g = Groups::new();
    let now = Instant::now();
    let a = join_new(&g, now);
    g.sync("g", 1, &a, vec![], now).unwrap();
    let later = now + Duration::from_secs(5);
    let b = join_new(&g, later);
    // a never rejoins: at its session timeout it is dropped and b's round completes.
    assert!(!g.tick(now + Duration::from_secs(9)));
    assert!(g.tick(now + Duration::from_secs(11)));
    let jb = g.join_result("g", &b).unwrap();
    assert_eq!((jb.error_code, jb.leader.as_str()), (0, b.as_str()));
    assert_eq!(g.join_result("g", &a).unwrap().error_code, code::UNKNOWN_MEMBER_ID);
    // b waited in the round past its join-time deadline (15 s) but its
    // session restarted with the generation.
    assert!(!g.tick(now + Duration::from_secs(16)));
    g.sync("g", jb.generation, &b, vec![], later).unwrap();
    // Heartbeats keep b; silence expires it.
    assert_eq!(g.heartbeat("g", jb.generation, &b, now + Duration::from_secs(14)), 0);
    assert!(!g.tick(now + Duration::from_secs(20)));
    assert!(g.tick(now + Duration::from_secs(25)));
    assert!(g.describe("g").is_none());
}

fn commit<'a>(group: &'a str, generation: i32, member_id: &'a str) -> CommitCheck<'a> {
    CommitCheck {
        group,
        generation,
        member_id,
        instance_id: None,
        version: 8,
        has_offsets: false,
    }
}

#[test]
fn commits_need_the_current_generation_unless_the_group_is_empty() {
    let g = Groups::new();
    let now = Instant::now();
    assert_eq!(g.check_commit(&commit("g", -1, "")), 0, "a simple commit");
    let a = join_new(&g, now);
    assert_eq!(g.check_commit(&commit("g", -1, "")), code::UNKNOWN_MEMBER_ID);
    assert_eq!(g.check_commit(&commit("g", 0, &a)), code::ILLEGAL_GENERATION);
    assert_eq!(g.check_commit(&commit("g", 1, "nobody")), code::UNKNOWN_MEMBER_ID);
    g.sync("g", 1, &a, vec![], now).unwrap();
    assert_eq!(g.check_commit(&commit("g", 1, &a)), 0);
    assert_eq!(g.delete("g"), Err(code::NON_EMPTY_GROUP));
    g.leave("g", &a, None, now);
    assert_eq!(g.delete("g"), Ok(()));
}

#[test]
fn commits_are_stored_during_preparing_rebalance_but_not_completing_rebalance() {
    let g = Groups::new();
    let now = Instant::now();
    let a = join_new(&g, now);
    // Joined, before the leader's sync: REBALANCE_IN_PROGRESS.
    assert_eq!(g.describe("g").unwrap().phase, Phase::CompletingRebalance);
    assert_eq!(g.check_commit(&commit("g", 1, &a)), code::REBALANCE_IN_PROGRESS);
    g.sync("g", 1, &a, vec![(a.clone(), Bytes::from("p0"))], now).unwrap();
    assert_eq!(g.check_commit(&commit("g", 1, &a)), 0, "Stable");
    // b joining starts a rebalance; a may still commit at generation 1.
    let _b = g.join(join_req("", &["range"], false), now).unwrap();
    assert!(matches!(
        g.describe("g").unwrap().phase,
        Phase::PreparingRebalance { .. }
    ));
    assert_eq!(g.check_commit(&commit("g", 1, &a)), 0, "PreparingRebalance");
    assert_eq!(g.check_commit(&commit("g", 2, &a)), code::ILLEGAL_GENERATION);
}

#[test]
fn commits_for_a_group_this_node_does_not_hold_follow_kafka() {
    let g = Groups::new();
    let at = |version, has_offsets| CommitCheck {
        version,
        has_offsets,
        ..commit("g", 3, "m")
    };
    assert_eq!(g.check_commit(&at(8, false)), code::ILLEGAL_GENERATION);
    assert_eq!(g.check_commit(&at(9, false)), code::GROUP_ID_NOT_FOUND);
    assert_eq!(g.check_commit(&at(9, true)), code::UNKNOWN_MEMBER_ID, "an Empty group");
}

/// A static member joins (no MEMBER_ID_REQUIRED round) and syncs alone.
fn join_static(g: &Groups, instance: &str, now: Instant) -> String {
    let j = Join {
        instance_id: Some(instance.into()),
        ..join_req("", &["range"], true)
    };
    g.join(j, now).expect("a static member joins at once")
}

#[test]
fn a_static_member_rejoining_gets_its_assignment_back_without_a_rebalance() {
    let g = Groups::new();
    let now = Instant::now();
    let a = join_static(&g, "i-a", now);
    assert_eq!(g.join_result("g", &a).unwrap().generation, 1);
    g.sync("g", 1, &a, vec![(a.clone(), Bytes::from("p0"))], now).unwrap();
    // It restarts: a new member id under the same instance id.
    let a2 = join_static(&g, "i-a", now);
    assert_ne!(a2, a);
    let j = g.join_result("g", &a2).expect("no join round");
    assert_eq!((j.error_code, j.generation, j.leader.as_str()), (0, 1, a2.as_str()));
    assert_eq!(g.describe("g").unwrap().phase, Phase::Stable);
    assert_eq!(g.sync_result("g", 1, &a2), Some(Ok(Bytes::from("p0"))));
    assert_eq!(g.heartbeat("g", 1, &a2, now), 0);
    // The old member id is fenced wherever it names the instance.
    assert_eq!(g.check_instance("g", &a, Some("i-a")), code::FENCED_INSTANCE_ID);
    let old = CommitCheck {
        instance_id: Some("i-a"),
        ..commit("g", 1, &a)
    };
    assert_eq!(g.check_commit(&old), code::FENCED_INSTANCE_ID);
    let known_old = Join {
        instance_id: Some("i-a".into()),
        ..join_req(&a, &["range"], true)
    };
    assert_eq!(g.join(known_old, now).unwrap_err().error_code, code::FENCED_INSTANCE_ID);
    assert_eq!(g.leave("g", &a, Some("i-a"), now), code::FENCED_INSTANCE_ID);
    // LeaveGroup naming only the instance removes the current member.
    assert_eq!(g.leave("g", "", Some("i-a"), now), 0);
    assert!(g.describe("g").is_none(), "gone: nothing of it was ever written");
}

#[test]
fn a_completed_generation_is_written_and_a_second_coordinator_carries_on() {
    use crate::api::{GroupState, GroupStateWrite};
    let g = Groups::new();
    let now = Instant::now();
    let a = join_new(&g, now);
    assert_eq!(g.take_write("g"), None, "nothing is written mid-rebalance");
    g.sync("g", 1, &a, vec![(a.clone(), Bytes::from("p0"))], now).unwrap();
    let (expected, bytes) = g.take_write("g").expect("Stable is written");
    assert_eq!(expected, 0);
    assert_eq!(g.take_write("g"), None, "one write in flight");
    g.write_done("g", 0, bytes.clone(), Ok(GroupStateWrite::Written(1)), now);
    assert_eq!(g.take_write("g"), None, "up to date");
    // Another coordinator loads the record and knows a at generation 1.
    let later = now + Duration::from_secs(60);
    let other = Groups::new();
    let state = GroupState {
        kind: "classic".into(),
        version: 1,
        data: bytes,
    };
    other.sync_with_log("g", Some(state.clone()), later);
    assert_eq!(other.heartbeat("g", 1, &a, later), 0);
    assert_eq!(other.check_commit(&commit("g", 1, &a)), 0);
    assert_eq!(other.sync_result("g", 1, &a), Some(Ok(Bytes::from("p0"))));
    assert!(!other.tick(later + Duration::from_secs(5)), "a fresh session");
    // a leaves there: the Empty group is written before it leaves memory.
    assert_eq!(other.leave("g", &a, None, later), 0);
    assert!(other.tick(later) || other.holds("g"));
    let (v, empty) = other.take_write("g").expect("Empty is written");
    assert_eq!(v, 1);
    // The first node, stale, loses its next write and reloads the winner.
    g.join(join_req("", &["range"], false), now).unwrap();
    other.write_done("g", 1, empty.clone(), Ok(GroupStateWrite::Written(2)), later);
    let winner = GroupState {
        kind: "classic".into(),
        version: 2,
        data: empty,
    };
    g.sync_with_log("g", Some(winner), now);
    let back = g.describe("g").unwrap();
    assert_eq!((back.phase, back.members.len(), back.generation), (Phase::Empty, 0, 2));
}

#[test]
fn a_record_the_log_refuses_is_not_retried_until_the_group_changes() {
    let g = Groups::new();
    let now = Instant::now();
    let a = join_new(&g, now);
    g.sync("g", 1, &a, vec![], now).unwrap();
    let (v, bytes) = g.take_write("g").unwrap();
    g.write_done("g", v, bytes.clone(), Err(WriteFailed::Retry), now);
    let (v, bytes) = g.take_write("g").expect("retried");
    g.write_done("g", v, bytes, Err(WriteFailed::Refused), now);
    assert_eq!(g.take_write("g"), None);
    assert!(g.dirty_groups().is_empty());
}
