use super::*;

const T: TopicUuid = TopicUuid([1; 16]);

fn topics(partitions: u32) -> Vec<TopicMeta> {
    vec![TopicMeta {
        id: T,
        name: "t".into(),
        partitions,
    }]
}

fn caller(version: i16) -> Caller {
    Caller {
        version,
        client_id: "c".into(),
        client_host: "/h".into(),
        fresh_member_id: "fresh".into(),
    }
}

fn join(id: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: "g".into(),
        member_id: id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        topic_partitions: Some(vec![]),
        ..HeartbeatRequest::default()
    }
}

/// A steady heartbeat reporting what the member owns.
fn beat(id: &str, epoch: i32, owned: &[i32]) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: "g".into(),
        member_id: id.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        topic_partitions: Some(vec![TopicPartitions {
            topic_id: T,
            partitions: owned.to_vec(),
        }]),
        ..HeartbeatRequest::default()
    }
}

fn parts(a: &HeartbeatAnswer) -> Vec<i32> {
    a.assignment
        .as_ref()
        .map(|tps| tps.iter().flat_map(|tp| tp.partitions.clone()).collect())
        .unwrap_or_default()
}

fn hb(g: &mut Group, req: &HeartbeatRequest, now: Instant) -> HeartbeatAnswer {
    g.heartbeat(req, &caller(1), &topics(4), now).answer
}

#[test]
fn a_first_member_gets_every_partition_at_the_first_group_epoch() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let a = hb(&mut g, &join("m1"), now);
    assert_eq!(a.error_code, 0, "{a:?}");
    assert_eq!(a.member_id.as_deref(), Some("m1"));
    assert_eq!(a.member_epoch, 1, "one bump for the join and its subscription");
    assert_eq!(a.heartbeat_interval_ms, HEARTBEAT_INTERVAL_MS);
    assert_eq!(parts(&a), vec![0, 1, 2, 3]);
    assert_eq!(g.state.state_name(), "Stable");
}

#[test]
fn v0_members_get_an_id_from_the_coordinator_and_v1_members_bring_their_own() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let a = g.heartbeat(&join(""), &caller(0), &topics(1), now).answer;
    assert_eq!(a.member_id.as_deref(), Some("fresh"));
    let a = g.heartbeat(&join(""), &caller(1), &topics(1), now).answer;
    assert_eq!(a.error_code, code::INVALID_REQUEST, "v1 requires a member id");
}

#[test]
fn a_partition_moves_only_after_its_previous_owner_revoked_it() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let a1 = hb(&mut g, &join("m1"), now);
    assert_eq!(parts(&a1), vec![0, 1, 2, 3]);
    // m2 joins: the target splits, but m1 still holds everything.
    let a2 = hb(&mut g, &join("m2"), now);
    assert_eq!(a2.member_epoch, 2);
    assert!(parts(&a2).is_empty(), "nothing is free yet: {a2:?}");
    // m1 is told to keep two (its epoch stays until it revokes).
    let a1 = hb(&mut g, &beat("m1", 1, &[0, 1, 2, 3]), now);
    assert_eq!(a1.member_epoch, 1);
    let kept = parts(&a1);
    assert_eq!(kept.len(), 2);
    assert_eq!(g.state.members["m1"].state, MemberState::UnrevokedPartitions);
    // m2 still gets nothing while m1 has not revoked.
    let a2 = hb(&mut g, &beat("m2", 2, &[]), now);
    assert!(parts(&a2).is_empty());
    assert_eq!(g.state.members["m2"].state, MemberState::UnreleasedPartitions);
    // m1 revokes: its epoch catches up.
    let a1 = hb(&mut g, &beat("m1", 1, &kept), now);
    assert_eq!(a1.member_epoch, 2);
    assert_eq!(g.state.members["m1"].state, MemberState::Stable);
    // Now m2 gets the released partitions.
    let a2 = hb(&mut g, &beat("m2", 2, &[]), now);
    let mut all = parts(&a2);
    assert_eq!(all.len(), 2);
    all.extend(kept);
    all.sort();
    assert_eq!(all, vec![0, 1, 2, 3]);
    assert_eq!(g.state.state_name(), "Stable");
}

#[test]
fn epochs_ahead_are_fenced_and_a_lost_response_is_forgiven() {
    let now = Instant::now();
    let mut g = Group::new("g");
    hb(&mut g, &join("m1"), now);
    let a = hb(&mut g, &beat("m1", 7, &[0, 1, 2, 3]), now);
    assert_eq!(a.error_code, code::FENCED_MEMBER_EPOCH);
    // m2 joins and m1 (epoch 1) settles at epoch 2 after revoking.
    hb(&mut g, &join("m2"), now);
    let kept = parts(&hb(&mut g, &beat("m1", 1, &[0, 1, 2, 3]), now));
    let a = hb(&mut g, &beat("m1", 1, &kept), now);
    assert_eq!(a.member_epoch, 2);
    // The answer was lost: m1 comes again with epoch 1 and a subset.
    let a = hb(&mut g, &beat("m1", 1, &kept), now);
    assert_eq!(a.error_code, 0, "previous epoch with a subset is accepted: {a:?}");
    // Not with partitions it no longer has.
    let a = hb(&mut g, &beat("m1", 1, &[0, 1, 2, 3]), now);
    assert_eq!(a.error_code, code::FENCED_MEMBER_EPOCH);
    let a = hb(&mut g, &beat("nobody", 1, &[]), now);
    assert_eq!(a.error_code, code::UNKNOWN_MEMBER_ID);
}

#[test]
fn leaving_frees_partitions_and_bumps_the_group_epoch() {
    let now = Instant::now();
    let mut g = Group::new("g");
    hb(&mut g, &join("m1"), now);
    hb(&mut g, &join("m2"), now);
    let before = g.state.group_epoch;
    let a = hb(&mut g, &beat("m1", LEAVE_EPOCH, &[]), now);
    assert_eq!((a.error_code, a.member_epoch), (0, LEAVE_EPOCH));
    assert!(g.state.group_epoch > before);
    assert!(!g.state.members.contains_key("m1"));
    let a = hb(&mut g, &beat("m2", 2, &[]), now);
    assert_eq!(parts(&a), vec![0, 1, 2, 3], "m2 takes everything");
    let a = hb(&mut g, &beat("m1", LEAVE_EPOCH, &[]), now);
    assert_eq!(a.error_code, code::UNKNOWN_MEMBER_ID);
}

#[test]
fn a_static_member_leaves_temporarily_and_its_instance_comes_back_with_its_assignment() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let mut j = join("m1");
    j.instance_id = Some("i1".into());
    let a = hb(&mut g, &j, now);
    let epoch = a.member_epoch;
    // Another process with the same instance id while m1 is active.
    let mut dup = join("m9");
    dup.instance_id = Some("i1".into());
    assert_eq!(hb(&mut g, &dup, now).error_code, code::UNRELEASED_INSTANCE_ID);
    let mut leave = beat("m1", STATIC_LEAVE_EPOCH, &[]);
    leave.instance_id = Some("i1".into());
    let a = hb(&mut g, &leave, now);
    assert_eq!(a.member_epoch, STATIC_LEAVE_EPOCH);
    let group_epoch = g.state.group_epoch;
    let a = hb(&mut g, &dup, now);
    assert_eq!(a.error_code, 0, "{a:?}");
    assert_eq!(a.member_epoch, epoch, "the same epoch, no rebalance");
    assert_eq!(parts(&a), vec![0, 1, 2, 3]);
    assert_eq!(g.state.group_epoch, group_epoch);
    assert!(!g.state.members.contains_key("m1"));
    let mut no_instance = beat("m9", STATIC_LEAVE_EPOCH, &[]);
    no_instance.instance_id = None;
    assert_eq!(hb(&mut g, &no_instance, now).error_code, code::INVALID_REQUEST);
}

#[test]
fn requests_are_checked_as_kafka_checks_them() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let mut r = join("m1");
    r.rebalance_timeout_ms = -1;
    assert_eq!(hb(&mut g, &r, now).error_code, code::INVALID_REQUEST);
    let mut r = join("m1");
    r.topic_partitions = None;
    assert_eq!(hb(&mut g, &r, now).error_code, code::INVALID_REQUEST);
    let mut r = join("m1");
    r.subscribed_topic_names = None;
    assert_eq!(hb(&mut g, &r, now).error_code, code::INVALID_REQUEST);
    let mut r = join("m1");
    r.server_assignor = Some("sticky".into());
    assert_eq!(hb(&mut g, &r, now).error_code, code::UNSUPPORTED_ASSIGNOR);
    let mut r = join("m1");
    r.subscribed_topic_regex = Some("(unclosed".into());
    assert_eq!(hb(&mut g, &r, now).error_code, code::INVALID_REGULAR_EXPRESSION);
    let r = beat("m1", -3, &[]);
    assert_eq!(hb(&mut g, &r, now).error_code, code::INVALID_REQUEST);
    let mut r = join("m1");
    r.instance_id = Some(String::new());
    assert_eq!(hb(&mut g, &r, now).error_code, code::INVALID_REQUEST);
    assert!(g.is_empty(), "nothing joined");
}

#[test]
fn a_regex_subscription_matches_whole_topic_names() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let mut r = join("m1");
    r.subscribed_topic_names = None;
    r.subscribed_topic_regex = Some("t.*".into());
    let topics = vec![
        TopicMeta {
            id: T,
            name: "t1".into(),
            partitions: 1,
        },
        TopicMeta {
            id: TopicUuid([2; 16]),
            name: "xt".into(),
            partitions: 1,
        },
    ];
    let a = g.heartbeat(&r, &caller(1), &topics, now).answer;
    assert_eq!(
        a.assignment.unwrap(),
        vec![TopicPartitions {
            topic_id: T,
            partitions: vec![0]
        }]
    );
}

#[test]
fn more_partitions_in_the_view_retrigger_the_assignment() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let a = g.heartbeat(&join("m1"), &caller(1), &topics(2), now).answer;
    assert_eq!(parts(&a), vec![0, 1]);
    let epoch = g.state.group_epoch;
    let a = g
        .heartbeat(&beat("m1", a.member_epoch, &[0, 1]), &caller(1), &topics(3), now)
        .answer;
    assert_eq!(g.state.group_epoch, epoch + 1);
    assert_eq!(parts(&a), vec![0, 1, 2]);
    assert_eq!(a.member_epoch, epoch + 1);
}

#[test]
fn the_range_assignor_is_used_when_members_ask_for_it() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let mut r = join("m1");
    r.server_assignor = Some("range".into());
    hb(&mut g, &r, now);
    assert_eq!(g.state.assignor(), "range");
}

#[test]
fn sessions_and_revocations_expire() {
    let now = Instant::now();
    let mut g = Group::new("g");
    hb(&mut g, &join("m1"), now);
    hb(&mut g, &join("m2"), now + Duration::from_secs(30));
    // m1 does not heartbeat: its session ends 45 s after its last one.
    assert!(!g.tick(now + Duration::from_secs(44)));
    assert!(g.tick(now + SESSION_TIMEOUT));
    assert!(!g.state.members.contains_key("m1"));
    assert!(g.state.members.contains_key("m2"));
    // A member that never revokes is removed after its rebalance timeout.
    let mut g = Group::new("g");
    hb(&mut g, &join("m1"), now);
    hb(&mut g, &join("m2"), now);
    hb(&mut g, &beat("m1", 1, &[0, 1, 2, 3]), now);
    assert_eq!(g.state.members["m1"].state, MemberState::UnrevokedPartitions);
    hb(&mut g, &beat("m2", 2, &[]), now + Duration::from_secs(29));
    assert!(g.tick(now + Duration::from_secs(30)), "rebalance timeout 30 s");
    assert!(!g.state.members.contains_key("m1"));
}

#[test]
fn offset_commits_need_the_current_member_epoch() {
    let now = Instant::now();
    let mut g = Group::new("g");
    assert_eq!(g.validate_offset_commit("", -1), 0, "simple commit to an empty group");
    let a = hb(&mut g, &join("m1"), now);
    assert_eq!(g.validate_offset_commit("m1", a.member_epoch), 0);
    assert_eq!(
        g.validate_offset_commit("m1", a.member_epoch - 1),
        code::STALE_MEMBER_EPOCH
    );
    assert_eq!(
        g.validate_offset_commit("m1", a.member_epoch + 1),
        code::STALE_MEMBER_EPOCH
    );
    assert_eq!(g.validate_offset_commit("zz", a.member_epoch), code::UNKNOWN_MEMBER_ID);
    assert_eq!(
        g.validate_offset_commit("", -1),
        code::UNKNOWN_MEMBER_ID,
        "not while members exist"
    );
    assert_eq!(g.validate_offset_fetch(None, -1), 0);
    assert_eq!(g.validate_offset_fetch(Some("m1"), 0), code::STALE_MEMBER_EPOCH);
}

#[test]
fn the_group_limit_is_group_max_size_reached() {
    let now = Instant::now();
    let mut g = Group::new("g");
    for i in 0..MAX_MEMBERS {
        let a = g.heartbeat(&join(&format!("m{i}")), &caller(1), &[], now).answer;
        assert_eq!(a.error_code, 0);
    }
    let a = g.heartbeat(&join("one-more"), &caller(1), &[], now).answer;
    assert_eq!(a.error_code, code::GROUP_MAX_SIZE_REACHED);
}

#[test]
fn state_survives_a_new_coordinator_through_its_record() {
    let now = Instant::now();
    let first = ConsumerGroups::default();
    let (a, persist) = first
        .with_group(
            "g",
            true,
            now,
            || None,
            |g| {
                let o = g.heartbeat(&join("m1"), &caller(1), &topics(4), now);
                (o.answer, o.changed)
            },
        )
        .unwrap()
        .unwrap();
    let persist = persist.expect("a join is written");
    assert_eq!(persist.expected, 0, "no record yet");
    first.saved("g", 1);
    // Another node takes over: it loads the record on the first request.
    let second = ConsumerGroups::default();
    let record = persist.data.clone();
    let (a2, again) = second
        .with_group(
            "g",
            false,
            now,
            || Some((1, record)),
            |g| {
                let o = g.heartbeat(&beat("m1", a.member_epoch, &[0, 1, 2, 3]), &caller(1), &topics(4), now);
                (o.answer, o.changed)
            },
        )
        .unwrap()
        .unwrap();
    assert_eq!(a2.error_code, 0, "the member is known: {a2:?}");
    assert_eq!(a2.member_epoch, a.member_epoch);
    assert!(again.is_none(), "a steady heartbeat writes nothing");
    let state = second.describe("g", now, || None).unwrap();
    assert_eq!(decode_state(&encode_state(&state)), Some(state.clone()));
    assert_eq!(state.members["m1"].assigned[&T].len(), 4);
    assert!(decode_state(b"{\"version\":9}").is_none());
    assert!(decode_state(b"not json").is_none());
    // The record stays small: well under a KiB for one member.
    assert!(encode_state(&state).len() < 1024);
    // A member leaving is written at the version the record is at.
    let (_, p) = second
        .with_group(
            "g",
            false,
            now,
            || None,
            |g| {
                let o = g.heartbeat(&beat("m1", LEAVE_EPOCH, &[]), &caller(1), &topics(4), now);
                (o.answer, o.changed)
            },
        )
        .unwrap()
        .unwrap();
    assert_eq!(p.unwrap().expected, 1);
    assert_eq!(second.forget_if_empty("g"), Some(1));
    assert!(second.describe("g", now, || None).is_none());
}

#[test]
fn a_consumer_group_with_members_is_not_forgotten() {
    let now = Instant::now();
    let groups = ConsumerGroups::default();
    groups
        .with_group(
            "g",
            true,
            now,
            || None,
            |g| {
                let o = g.heartbeat(&join("m1"), &caller(1), &topics(1), now);
                (o.answer, o.changed)
            },
        )
        .unwrap();
    assert!(groups.has_members("g", now, || None));
    assert_eq!(groups.forget_if_empty("g"), None);
    assert!(!groups.has_members("nope", now, || None));
    assert_eq!(groups.tick(now + SESSION_TIMEOUT).len(), 1, "the expiry is written");
    assert!(!groups.has_members("g", now, || None));
}
