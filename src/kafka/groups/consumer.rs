//! The KIP-848 consumer-group protocol's state machine, as Kafka's
//! `GroupMetadataManager`, `ConsumerGroup` and `CurrentAssignmentBuilder`
//! define it: members heartbeat (ConsumerGroupHeartbeat), the coordinator
//! computes a target assignment with a server-side assignor
//! ([`super::assignor`]) whenever the group epoch moves past the assignment
//! epoch, and each member is reconciled towards its target: partitions it
//! must give up are revoked first (its member epoch stays), and a partition
//! is handed to its new owner only once nobody else holds it.
//!
//! Pure: every method takes `now`, the topics as the view has them and any
//! fresh member id from the caller; no I/O, no clock, no randomness. Each
//! group's durable part ([`GroupState`]) is a serde value the caller can
//! store: [`ConsumerGroups`] hands each change out as a [`Persist`] for
//! the handler to write (through the metadata log's group-state record),
//! and loads a group from its record on its first request. Session and
//! rebalance deadlines are not stored and restart on a new coordinator.

use super::assignor::{self, Assignment, Subscriptions, TopicMeta};
use crate::ids::TopicUuid;
use crate::kafka::consumer_proto::{HeartbeatAnswer, HeartbeatRequest, TopicPartitions};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::time::Instant;

/// Kafka error codes of the consumer protocol.
pub mod code {
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const INVALID_REQUEST: i16 = 42;
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
    pub const FENCED_MEMBER_EPOCH: i16 = 110;
    pub const UNRELEASED_INSTANCE_ID: i16 = 111;
    pub const UNSUPPORTED_ASSIGNOR: i16 = 112;
    pub const STALE_MEMBER_EPOCH: i16 = 113;
    pub const INVALID_REGULAR_EXPRESSION: i16 = 128;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
}

/// `group.consumer.session.timeout.ms` and `group.consumer.heartbeat.interval.ms`.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(45);
pub const HEARTBEAT_INTERVAL_MS: i32 = 5_000;
/// Most members of one group (`group.consumer.max.size`), and most groups.
pub const MAX_MEMBERS: usize = 1_000;
pub const MAX_GROUPS: usize = 10_000;
/// A subscribed regex: at most this many bytes, compiled within this size.
pub const MAX_REGEX_BYTES: usize = 1_024;
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Topics one member may subscribe to by name.
pub const MAX_SUBSCRIBED: usize = 10_000;

pub const LEAVE_EPOCH: i32 = -1;
pub const STATIC_LEAVE_EPOCH: i32 = -2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemberState {
    /// Owns its target (at the target epoch).
    Stable,
    /// Must give up `pending_revocation` before moving on; epoch unchanged.
    UnrevokedPartitions,
    /// At the target epoch, but some of its target is still held by others.
    UnreleasedPartitions,
}

/// One member, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_names: Vec<String>,
    pub subscribed_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    /// What the member may own now.
    #[serde(with = "assignment_serde")]
    pub assigned: Assignment,
    /// What it must give up before its epoch moves.
    #[serde(with = "assignment_serde")]
    pub pending_revocation: Assignment,
}

/// One consumer group, as stored: what must survive a coordinator change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupState {
    /// The format of this record.
    pub version: u8,
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    /// The target assignment of `assignment_epoch`.
    #[serde(with = "targets_serde")]
    pub target: BTreeMap<String, Assignment>,
    /// The subscribed topics' ids and partition counts when the target was
    /// computed: a change re-triggers the assignment.
    pub subscribed_meta: BTreeMap<String, (String, u32)>,
}

pub const STATE_VERSION: u8 = 1;

impl GroupState {
    fn new(group_id: &str) -> Self {
        Self {
            version: STATE_VERSION,
            group_id: group_id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            subscribed_meta: BTreeMap::new(),
        }
    }

    /// Kafka's group states.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.member_epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The assignor the group uses: the one most members name (ties by
    /// name), else `uniform`.
    pub fn assignor(&self) -> &'static str {
        let mut votes: BTreeMap<&'static str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = m.server_assignor.as_deref() {
                if let Some(known) = assignor::ASSIGNORS.iter().find(|k| **k == a) {
                    *votes.entry(known).or_default() += 1;
                }
            }
        }
        votes
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
            .map_or(assignor::DEFAULT_ASSIGNOR, |(k, _)| k)
    }

    /// Who holds `(topic, partition)` (assigned or pending revocation),
    /// other than `except`.
    fn held_by_other(&self, except: &str, t: &TopicUuid, p: i32) -> bool {
        self.members.iter().any(|(id, m)| {
            id != except
                && (m.assigned.get(t).is_some_and(|s| s.contains(&p))
                    || m.pending_revocation.get(t).is_some_and(|s| s.contains(&p)))
        })
    }
}

/// A group state as its stored record (JSON).
pub fn encode_state(g: &GroupState) -> Vec<u8> {
    serde_json::to_vec(g).unwrap_or_default()
}

/// A stored record back; `None` for one that does not decode or is of
/// another format version.
pub fn decode_state(b: &[u8]) -> Option<GroupState> {
    serde_json::from_slice::<GroupState>(b)
        .ok()
        .filter(|g| g.version == STATE_VERSION)
}

/// Deadlines of one member (not stored).
#[derive(Debug, Clone, Copy)]
struct Timers {
    session: Instant,
    /// Set while the member has partitions to revoke.
    rebalance: Option<Instant>,
}

/// One group on this coordinator: its state and its members' timers.
#[derive(Debug, Clone)]
pub struct Group {
    pub state: GroupState,
    timers: BTreeMap<String, Timers>,
}

/// Who is asking, besides the request.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub version: i16,
    pub client_id: String,
    pub client_host: String,
    /// A fresh member id, used when v0 asks the coordinator for one.
    pub fresh_member_id: String,
}

/// What a heartbeat changed, for the caller to persist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub answer: HeartbeatAnswer,
    /// The stored part of the group changed.
    pub changed: bool,
}

fn invalid(msg: &str) -> HeartbeatAnswer {
    HeartbeatAnswer::error(code::INVALID_REQUEST, msg)
}

fn to_assignment(tps: &[TopicPartitions]) -> Assignment {
    let mut a = Assignment::new();
    for tp in tps {
        let set: BTreeSet<i32> = tp.partitions.iter().copied().collect();
        if !set.is_empty() {
            a.entry(tp.topic_id).or_default().extend(set);
        }
    }
    a
}

pub fn to_wire(a: &Assignment) -> Vec<TopicPartitions> {
    a.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| TopicPartitions {
            topic_id: *t,
            partitions: ps.iter().copied().collect(),
        })
        .collect()
}

fn is_subset(a: &Assignment, b: &Assignment) -> bool {
    a.iter()
        .all(|(t, ps)| ps.is_empty() || b.get(t).is_some_and(|q| ps.is_subset(q)))
}

fn overlaps(a: &Assignment, b: &Assignment) -> bool {
    a.iter().any(|(t, ps)| b.get(t).is_some_and(|q| !ps.is_disjoint(q)))
}

/// A subscribed regex, compiled within bounds (RE2-like syntax: no
/// look-around or back-references), matched against the whole name.
pub fn compile_regex(pattern: &str) -> Result<regex_lite::Regex, String> {
    if pattern.len() > MAX_REGEX_BYTES {
        return Err(format!("SubscribedTopicRegex is longer than {MAX_REGEX_BYTES} bytes."));
    }
    regex_lite::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(REGEX_SIZE_LIMIT)
        .nest_limit(64)
        .build()
        .map_err(|e| format!("SubscribedTopicRegex `{pattern}` is not a valid regular expression: {e}"))
}

/// Kafka's checks of a heartbeat before any state is read.
fn validate(req: &HeartbeatRequest, version: i16) -> Result<(), HeartbeatAnswer> {
    if req.group_id.is_empty() {
        return Err(invalid("GroupId can't be empty."));
    }
    if req.instance_id.as_deref() == Some("") {
        return Err(invalid("InstanceId can't be empty."));
    }
    if req.rack_id.as_deref() == Some("") {
        return Err(invalid("RackId can't be empty."));
    }
    if version >= 1 && req.member_id.is_empty() {
        return Err(invalid("MemberId can't be empty."));
    }
    match req.member_epoch {
        e if e > 0 || e == LEAVE_EPOCH => {
            if req.member_id.is_empty() {
                return Err(invalid("MemberId can't be empty."));
            }
        }
        0 => {
            if req.rebalance_timeout_ms == -1 {
                return Err(invalid("RebalanceTimeoutMs must be provided in first request."));
            }
            if req.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
                return Err(invalid("TopicPartitions must be empty when (re-)joining."));
            }
            let names = req.subscribed_topic_names.as_ref().is_some_and(|n| !n.is_empty());
            if !names && req.subscribed_topic_regex.is_none() {
                return Err(invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                ));
            }
        }
        STATIC_LEAVE_EPOCH => {
            if req.member_id.is_empty() {
                return Err(invalid("MemberId can't be empty."));
            }
            if req.instance_id.is_none() {
                return Err(invalid("InstanceId can't be null."));
            }
        }
        _ => return Err(invalid("MemberEpoch is invalid.")),
    }
    if let Some(a) = req.server_assignor.as_deref() {
        if !assignor::ASSIGNORS.contains(&a) {
            return Err(HeartbeatAnswer::error(
                code::UNSUPPORTED_ASSIGNOR,
                format!("ServerAssignor {a} is not supported. Supported assignors: uniform, range."),
            ));
        }
    }
    if req
        .subscribed_topic_names
        .as_ref()
        .is_some_and(|n| n.len() > MAX_SUBSCRIBED)
    {
        return Err(invalid("Too many subscribed topic names."));
    }
    if let Some(re) = req.subscribed_topic_regex.as_deref().filter(|r| !r.is_empty()) {
        compile_regex(re).map_err(|m| HeartbeatAnswer::error(code::INVALID_REGULAR_EXPRESSION, m))?;
    }
    Ok(())
}

impl Group {
    pub fn new(group_id: &str) -> Self {
        Self::from_state(GroupState::new(group_id), Instant::now())
    }

    /// A group loaded from its stored state on this coordinator: every
    /// member's session starts now.
    pub fn from_state(state: GroupState, now: Instant) -> Self {
        let timers = state
            .members
            .keys()
            .map(|id| {
                (
                    id.clone(),
                    Timers {
                        session: now + SESSION_TIMEOUT,
                        rebalance: None,
                    },
                )
            })
            .collect();
        Self { state, timers }
    }

    pub fn is_empty(&self) -> bool {
        self.state.members.is_empty()
    }

    fn bump(&mut self) {
        self.state.group_epoch += 1;
    }

    fn remove(&mut self, id: &str) -> bool {
        self.timers.remove(id);
        let gone = self.state.members.remove(id).is_some();
        if gone {
            self.state.target.remove(id);
            self.bump();
        }
        gone
    }

    /// The topics a member subscribes to, present in `topics`.
    fn subscribed(m: &Member, topics: &[TopicMeta]) -> Vec<TopicMeta> {
        let re = m
            .subscribed_regex
            .as_deref()
            .filter(|r| !r.is_empty())
            .and_then(|r| compile_regex(r).ok());
        topics
            .iter()
            .filter(|t| m.subscribed_names.contains(&t.name) || re.as_ref().is_some_and(|r| r.is_match(&t.name)))
            .cloned()
            .collect()
    }

    /// The topics of `topics` any member subscribes to, by name or regex
    /// (Kafka's `ConsumerGroup.isSubscribedToTopic`).
    pub fn subscribed_topics(&self, topics: &[TopicMeta]) -> BTreeSet<String> {
        self.state
            .members
            .values()
            .flat_map(|m| Self::subscribed(m, topics))
            .map(|t| t.name)
            .collect()
    }

    /// Recompute the target if the group epoch moved past the assignment
    /// epoch, or the subscribed topics changed in the view (which moves the
    /// group epoch first).
    fn maybe_assign(&mut self, topics: &[TopicMeta]) -> bool {
        let mut subs = Subscriptions::new();
        let mut metas: BTreeMap<TopicUuid, TopicMeta> = BTreeMap::new();
        for (id, m) in &self.state.members {
            let mine = Self::subscribed(m, topics);
            subs.insert(id.clone(), mine.iter().map(|t| t.id).collect());
            for t in mine {
                metas.insert(t.id, t);
            }
        }
        let seen: BTreeMap<String, (String, u32)> = metas
            .values()
            .map(|t| (t.name.clone(), (t.id.to_string(), t.partitions)))
            .collect();
        let mut changed = false;
        if seen != self.state.subscribed_meta {
            if self.state.group_epoch == self.state.assignment_epoch {
                self.bump();
            }
            self.state.subscribed_meta = seen;
            changed = true;
        }
        if self.state.group_epoch > self.state.assignment_epoch {
            let assignor = self.state.assignor();
            self.state.target = assignor::assign(assignor, &subs, &metas, &self.state.target);
            self.state.assignment_epoch = self.state.group_epoch;
            changed = true;
        }
        changed
    }

    /// Move `id` towards its target (Kafka's `CurrentAssignmentBuilder`).
    /// `owned`: what the member reported owning (`None`: not reported).
    fn reconcile(&mut self, id: &str, owned: Option<&Assignment>, now: Instant) -> bool {
        let Some(m) = self.state.members.get(id) else {
            return false;
        };
        let target_epoch = self.state.assignment_epoch;
        let target = self.state.target.get(id).cloned().unwrap_or_default();
        let before = m.clone();
        match m.state {
            MemberState::UnrevokedPartitions => {
                let revoked = owned.is_some_and(|o| !overlaps(o, &m.pending_revocation));
                if !revoked {
                    return false;
                }
            }
            MemberState::Stable if m.member_epoch == target_epoch => return false,
            _ => {}
        }
        let m = before.clone();
        let mut kept = Assignment::new();
        let mut revoke = Assignment::new();
        for (t, ps) in &m.assigned {
            for p in ps {
                if target.get(t).is_some_and(|s| s.contains(p)) {
                    kept.entry(*t).or_default().insert(*p);
                } else {
                    revoke.entry(*t).or_default().insert(*p);
                }
            }
        }
        let mut next = m.clone();
        if !revoke.is_empty() {
            next.state = MemberState::UnrevokedPartitions;
            next.assigned = kept;
            next.pending_revocation = revoke;
            let timeout = Duration::from_millis(u64::try_from(m.rebalance_timeout_ms).unwrap_or(0));
            if let Some(t) = self.timers.get_mut(id) {
                t.rebalance = Some(now + timeout);
            }
        } else {
            let mut unreleased = false;
            for (t, ps) in &target {
                for p in ps {
                    if kept.get(t).is_some_and(|s| s.contains(p)) {
                        continue;
                    }
                    if self.state.held_by_other(id, t, *p) {
                        unreleased = true;
                    } else {
                        kept.entry(*t).or_default().insert(*p);
                    }
                }
            }
            if next.member_epoch != target_epoch {
                next.previous_member_epoch = next.member_epoch;
                next.member_epoch = target_epoch;
            }
            next.assigned = kept;
            next.pending_revocation = Assignment::new();
            next.state = if unreleased {
                MemberState::UnreleasedPartitions
            } else {
                MemberState::Stable
            };
            if let Some(t) = self.timers.get_mut(id) {
                t.rebalance = None;
            }
        }
        let changed = next != before;
        self.state.members.insert(id.to_string(), next);
        changed
    }

    /// One ConsumerGroupHeartbeat.
    pub fn heartbeat(
        &mut self,
        req: &HeartbeatRequest,
        caller: &Caller,
        topics: &[TopicMeta],
        now: Instant,
    ) -> Outcome {
        let unchanged = |answer| Outcome { answer, changed: false };
        if let Err(a) = validate(req, caller.version) {
            return unchanged(a);
        }
        let mut changed = false;
        let mut bump = false;
        let owned = req.topic_partitions.as_deref().map(to_assignment);
        match req.member_epoch {
            LEAVE_EPOCH | STATIC_LEAVE_EPOCH => {
                let Some(m) = self.state.members.get_mut(&req.member_id) else {
                    return unchanged(HeartbeatAnswer::error(
                        code::UNKNOWN_MEMBER_ID,
                        format!("Member {} is not a member of group {}.", req.member_id, req.group_id),
                    ));
                };
                let epoch = req.member_epoch;
                if epoch == STATIC_LEAVE_EPOCH {
                    // Kept, with its assignment, until its session expires
                    // or its instance id joins again (at the epoch it had).
                    if m.member_epoch != STATIC_LEAVE_EPOCH {
                        m.previous_member_epoch = m.member_epoch;
                    }
                    m.member_epoch = STATIC_LEAVE_EPOCH;
                } else {
                    self.remove(&req.member_id);
                    self.maybe_assign(topics);
                }
                Outcome {
                    answer: HeartbeatAnswer {
                        member_id: Some(req.member_id.clone()),
                        member_epoch: epoch,
                        heartbeat_interval_ms: 0,
                        ..HeartbeatAnswer::default()
                    },
                    changed: true,
                }
            }
            0 => {
                let mut id = if req.member_id.is_empty() {
                    caller.fresh_member_id.clone()
                } else {
                    req.member_id.clone()
                };
                // Static membership: the instance id names the member.
                if let Some(instance) = &req.instance_id {
                    let holder = self
                        .state
                        .members
                        .values()
                        .find(|m| m.instance_id.as_deref() == Some(instance))
                        .map(|m| (m.id.clone(), m.member_epoch));
                    match holder {
                        Some((old, _)) if old == id => {}
                        Some((old, STATIC_LEAVE_EPOCH)) => {
                            // The new incarnation takes the old one's place,
                            // epoch and assignment, without a rebalance.
                            if let Some(mut m) = self.state.members.remove(&old) {
                                self.timers.remove(&old);
                                let target = self.state.target.remove(&old).unwrap_or_default();
                                m.id = id.clone();
                                m.member_epoch = m.previous_member_epoch.max(0);
                                self.state.target.insert(id.clone(), target);
                                self.state.members.insert(id.clone(), m);
                            }
                            changed = true;
                        }
                        Some(_) => {
                            return unchanged(HeartbeatAnswer::error(
                                code::UNRELEASED_INSTANCE_ID,
                                format!("Static member with instance id {instance} is still in use."),
                            ))
                        }
                        None => {}
                    }
                }
                if !self.state.members.contains_key(&id) {
                    if self.state.members.len() >= MAX_MEMBERS {
                        return unchanged(HeartbeatAnswer::error(
                            code::GROUP_MAX_SIZE_REACHED,
                            format!("The consumer group has reached its maximum capacity of {MAX_MEMBERS} members."),
                        ));
                    }
                    if id.is_empty() {
                        id = caller.fresh_member_id.clone();
                    }
                    self.state.members.insert(
                        id.clone(),
                        Member {
                            id: id.clone(),
                            instance_id: req.instance_id.clone(),
                            rack_id: req.rack_id.clone(),
                            client_id: caller.client_id.clone(),
                            client_host: caller.client_host.clone(),
                            subscribed_names: Vec::new(),
                            subscribed_regex: None,
                            server_assignor: None,
                            rebalance_timeout_ms: req.rebalance_timeout_ms,
                            member_epoch: 0,
                            previous_member_epoch: 0,
                            state: MemberState::Stable,
                            assigned: Assignment::new(),
                            pending_revocation: Assignment::new(),
                        },
                    );
                    bump = true;
                    changed = true;
                }
                bump |= self.update_member(&id, req, caller, &mut changed);
                if bump {
                    self.bump();
                }
                self.finish(&id, req, owned.as_ref(), topics, now, changed)
            }
            epoch => {
                let Some(m) = self.state.members.get(&req.member_id) else {
                    return unchanged(HeartbeatAnswer::error(
                        code::UNKNOWN_MEMBER_ID,
                        format!("Member {} is not a member of group {}.", req.member_id, req.group_id),
                    ));
                };
                if epoch > m.member_epoch {
                    return unchanged(HeartbeatAnswer::error(
                        code::FENCED_MEMBER_EPOCH,
                        format!(
                            "The member epoch {epoch} is greater than the coordinator's {}; rejoin.",
                            m.member_epoch
                        ),
                    ));
                }
                if epoch < m.member_epoch
                    && (epoch != m.previous_member_epoch || !owned.as_ref().is_some_and(|o| is_subset(o, &m.assigned)))
                {
                    return unchanged(HeartbeatAnswer::error(
                        code::FENCED_MEMBER_EPOCH,
                        format!(
                            "The member epoch {epoch} is smaller than the coordinator's {}; rejoin.",
                            m.member_epoch
                        ),
                    ));
                }
                let id = req.member_id.clone();
                if self.update_member(&id, req, caller, &mut changed) {
                    self.bump();
                }
                self.finish(&id, req, owned.as_ref(), topics, now, changed)
            }
        }
    }

    /// Subscription, assignor, rack, instance and timeout updates. `true`
    /// when the group epoch must move (what the assignor sees changed).
    fn update_member(&mut self, id: &str, req: &HeartbeatRequest, caller: &Caller, changed: &mut bool) -> bool {
        let Some(m) = self.state.members.get_mut(id) else {
            return false;
        };
        let before = m.clone();
        if let Some(names) = &req.subscribed_topic_names {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            m.subscribed_names = names;
        }
        if let Some(re) = &req.subscribed_topic_regex {
            m.subscribed_regex = Some(re.clone()).filter(|r| !r.is_empty());
        }
        if req.server_assignor.is_some() {
            m.server_assignor = req.server_assignor.clone();
        }
        if req.rack_id.is_some() {
            m.rack_id = req.rack_id.clone();
        }
        if req.rebalance_timeout_ms != -1 {
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        m.instance_id = req.instance_id.clone().or(m.instance_id.take());
        m.client_id = caller.client_id.clone();
        m.client_host = caller.client_host.clone();
        let epoch_moves = m.subscribed_names != before.subscribed_names
            || m.subscribed_regex != before.subscribed_regex
            || m.server_assignor != before.server_assignor
            || m.rack_id != before.rack_id;
        if *m != before {
            *changed = true;
        }
        epoch_moves
    }

    fn finish(
        &mut self,
        id: &str,
        req: &HeartbeatRequest,
        owned: Option<&Assignment>,
        topics: &[TopicMeta],
        now: Instant,
        mut changed: bool,
    ) -> Outcome {
        changed |= self.maybe_assign(topics);
        let before = self.state.members.get(id).map(|m| m.assigned.clone());
        // A (re)joining member owns nothing (its request says so).
        let empty = Assignment::new();
        let owned = if req.member_epoch == 0 { Some(&empty) } else { owned };
        changed |= self.reconcile(id, owned, now);
        let timers = self.timers.entry(id.to_string()).or_insert(Timers {
            session: now,
            rebalance: None,
        });
        timers.session = now + SESSION_TIMEOUT;
        let m = &self.state.members[id];
        let full = req.member_epoch == 0
            || (req.rebalance_timeout_ms != -1
                && req.subscribed_topic_names.is_some()
                && req.topic_partitions.is_some());
        let assignment = (full || before.as_ref() != Some(&m.assigned)).then(|| to_wire(&m.assigned));
        Outcome {
            answer: HeartbeatAnswer {
                member_id: Some(id.to_string()),
                member_epoch: m.member_epoch,
                heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
                assignment,
                ..HeartbeatAnswer::default()
            },
            changed,
        }
    }

    /// Expire sessions and overdue revocations; `true` if the stored state changed.
    pub fn tick(&mut self, now: Instant) -> bool {
        let expired: Vec<String> = self
            .timers
            .iter()
            .filter(|(_, t)| t.session <= now || t.rebalance.is_some_and(|r| r <= now))
            .map(|(id, _)| id.clone())
            .collect();
        let mut changed = false;
        for id in expired {
            tracing::info!(group = %self.state.group_id, member = %id, "consumer group member expired (session or rebalance timeout)");
            changed |= self.remove(&id);
        }
        changed
    }

    /// OffsetCommit by `member_id` at `epoch` (Kafka's
    /// `ConsumerGroup.validateOffsetCommit`): `0` or the error code.
    pub fn validate_offset_commit(&self, member_id: &str, epoch: i32) -> i16 {
        if epoch < 0 && self.state.members.is_empty() {
            return 0;
        }
        match self.state.members.get(member_id) {
            None => code::UNKNOWN_MEMBER_ID,
            Some(m) if m.member_epoch != epoch => code::STALE_MEMBER_EPOCH,
            Some(_) => 0,
        }
    }

    /// OffsetFetch (v9+) by `member_id` at `epoch`: `0` or the error code.
    pub fn validate_offset_fetch(&self, member_id: Option<&str>, epoch: i32) -> i16 {
        let Some(member_id) = member_id else {
            return if epoch < 0 { 0 } else { code::UNKNOWN_MEMBER_ID };
        };
        match self.state.members.get(member_id) {
            None => code::UNKNOWN_MEMBER_ID,
            Some(m) if m.member_epoch != epoch => code::STALE_MEMBER_EPOCH,
            Some(_) => 0,
        }
    }
}

/// A record to write for a group: its state, at the record version it
/// replaces (0: none yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persist {
    pub group: String,
    pub expected: u64,
    pub data: Vec<u8>,
}

/// The consumer groups this node coordinates: each with the version of its
/// stored record. Writers take [`ConsumerGroups::writes`] around a change
/// and its write, so the versions they compare against are their own.
#[derive(Default)]
pub struct ConsumerGroups {
    groups: std::sync::Mutex<BTreeMap<String, (Group, u64)>>,
    /// Held (async) from a change to the end of its write.
    pub writes: tokio::sync::Mutex<()>,
}

impl ConsumerGroups {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (Group, u64)>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `f` on the group: held here, else loaded by `load` (its record
    /// version and bytes), else new when `create`. `None` when it exists
    /// nowhere and `create` is false. When `f` says the state changed, the
    /// record to write comes back with its answer.
    pub fn with_group<T>(
        &self,
        group: &str,
        create: bool,
        now: Instant,
        load: impl FnOnce() -> Option<(u64, Vec<u8>)>,
        f: impl FnOnce(&mut Group) -> (T, bool),
    ) -> Result<Option<(T, Option<Persist>)>, i16> {
        let mut groups = self.lock();
        if !groups.contains_key(group) {
            let loaded = load().and_then(|(v, b)| decode_state(&b).map(|s| (v, s)));
            match loaded {
                Some((version, state)) => {
                    groups.insert(group.to_string(), (Group::from_state(state, now), version));
                }
                None if create => {
                    if groups.len() >= MAX_GROUPS {
                        return Err(code::COORDINATOR_NOT_AVAILABLE);
                    }
                    groups.insert(group.to_string(), (Group::from_state(GroupState::new(group), now), 0));
                }
                None => return Ok(None),
            }
        }
        let (g, version) = groups.get_mut(group).expect("inserted above");
        let (out, changed) = f(g);
        let persist = changed.then(|| Persist {
            group: group.to_string(),
            expected: *version,
            data: encode_state(&g.state),
        });
        Ok(Some((out, persist)))
    }

    /// The record of `group` is now at `version`.
    pub fn saved(&self, group: &str, version: u64) {
        if let Some((_, v)) = self.lock().get_mut(group) {
            *v = version;
        }
    }

    /// Drop what this node holds of `group` (a write failed or lost a
    /// race): the next request loads it from its record again.
    pub fn forget(&self, group: &str) {
        self.lock().remove(group);
    }

    /// Is `group` a consumer group with members (held here or in `load`)?
    pub fn has_members(&self, group: &str, now: Instant, load: impl FnOnce() -> Option<(u64, Vec<u8>)>) -> bool {
        self.with_group(group, false, now, load, |g| (!g.is_empty(), false))
            .ok()
            .flatten()
            .is_some_and(|(m, _)| m)
    }

    /// Forget an empty consumer group (it is becoming a classic one);
    /// `Some(record version)` when it was one, for the caller to delete.
    pub fn forget_if_empty(&self, group: &str) -> Option<u64> {
        let mut groups = self.lock();
        if groups.get(group).is_some_and(|(g, _)| !g.is_empty()) {
            return None;
        }
        groups.remove(group).map(|(_, v)| v)
    }

    /// Expire sessions and revocations in every group: the records to write.
    pub fn tick(&self, now: Instant) -> Vec<Persist> {
        let mut groups = self.lock();
        let mut out = Vec::new();
        for (id, (g, version)) in groups.iter_mut() {
            if g.tick(now) {
                out.push(Persist {
                    group: id.clone(),
                    expected: *version,
                    data: encode_state(&g.state),
                });
            }
        }
        out
    }

    /// (group id, "consumer") of each consumer group held here.
    pub fn list(&self) -> Vec<(String, String)> {
        self.lock()
            .keys()
            .map(|k| (k.clone(), "consumer".to_string()))
            .collect()
    }

    /// A copy of a group's state (ConsumerGroupDescribe).
    pub fn describe(
        &self,
        group: &str,
        now: Instant,
        load: impl FnOnce() -> Option<(u64, Vec<u8>)>,
    ) -> Option<GroupState> {
        self.with_group(group, false, now, load, |g| (g.state.clone(), false))
            .ok()
            .flatten()
            .map(|(s, _)| s)
    }
}

mod assignment_serde {
    use super::Assignment;
    use crate::ids::TopicUuid;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeSet;

    pub fn hex(t: &TopicUuid) -> String {
        t.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn unhex(s: &str) -> Option<TopicUuid> {
        if s.len() != 32 || !s.is_ascii() {
            return None;
        }
        let mut a = [0u8; 16];
        for (i, out) in a.iter_mut().enumerate() {
            *out = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(TopicUuid(a))
    }

    pub fn serialize<S: Serializer>(a: &Assignment, s: S) -> Result<S::Ok, S::Error> {
        let v: Vec<(String, &BTreeSet<i32>)> = a.iter().map(|(t, p)| (hex(t), p)).collect();
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Assignment, D::Error> {
        let v: Vec<(String, BTreeSet<i32>)> = Vec::deserialize(d)?;
        v.into_iter()
            .map(|(t, p)| {
                unhex(&t)
                    .map(|t| (t, p))
                    .ok_or_else(|| serde::de::Error::custom("bad topic id"))
            })
            .collect()
    }
}

mod targets_serde {
    use super::Assignment;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    #[derive(Serialize, Deserialize)]
    struct One(#[serde(with = "super::assignment_serde")] Assignment);

    pub fn serialize<S: Serializer>(t: &BTreeMap<String, Assignment>, s: S) -> Result<S::Ok, S::Error> {
        let v: BTreeMap<&String, One> = t.iter().map(|(k, a)| (k, One(a.clone()))).collect();
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Assignment>, D::Error> {
        let v: BTreeMap<String, One> = BTreeMap::deserialize(d)?;
        Ok(v.into_iter().map(|(k, o)| (k, o.0)).collect())
    }
}

#[cfg(test)]
mod tests;
