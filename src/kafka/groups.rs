//! The classic consumer-group coordinator: membership (generation, members,
//! protocol, leader, assignments) is worked on in memory on the coordinating
//! node and kept in the metadata log as one record per group ([`record`])
//! whenever a generation completes (Stable) or the group empties, so a
//! new coordinator carries on at the same generation with the same member
//! ids. Committed offsets go through the log too (`CommitOffsets`).
//!
//! Writes are a compare-and-set on the record's version: [`Groups::take_write`]
//! hands out what to write, [`Groups::write_done`] settles it, and
//! [`Groups::sync_with_log`] replaces a group that another node has written
//! since (or loads one this node does not hold).
//!
//! The state machine is synchronous ([`Groups`] methods take `now`), so it
//! is unit-testable without a clock; the request handlers wait on
//! [`Groups::changed`] for joins and syncs to complete.

pub mod assignor;
pub mod consumer;

use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Kafka error codes of the group APIs.
pub mod code {
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const ILLEGAL_GENERATION: i16 = 22;
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    pub const INVALID_GROUP_ID: i16 = 24;
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
    pub const NON_EMPTY_GROUP: i16 = 68;
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    pub const FENCED_INSTANCE_ID: i16 = 82;
}

pub mod record;
pub mod view;

/// Session timeouts accepted (Kafka's broker defaults).
pub const MIN_SESSION: Duration = Duration::from_millis(1_000);
pub const MAX_SESSION: Duration = Duration::from_secs(30 * 60);
/// Most members per group, and most groups, held in memory.
pub const MAX_MEMBERS: usize = 1_000;
pub const MAX_GROUPS: usize = 10_000;

/// What a member is, as the group's record in the metadata log keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    pub id: String,
    /// `group.instance.id` of a static member (KIP-345).
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    /// (protocol name, metadata), in the member's preference order.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
}

/// A member as its coordinator holds it: what the record keeps, and the
/// session state only this coordinator's clock gives.
#[derive(Debug, Clone)]
pub struct Member {
    pub info: MemberInfo,
    /// The session expires at this instant unless the member is heard from.
    pub deadline: Instant,
    /// Rejoined in the current rebalance.
    pub joined: bool,
}

impl Member {
    /// `info` with a session that starts at `now`.
    pub fn new(info: MemberInfo, now: Instant, joined: bool) -> Self {
        let deadline = now + info.session_timeout;
        Member { info, deadline, joined }
    }

    /// A member for tests: client `c` on `/h`, sessions of 10 s, rebalances
    /// of 30 s, no assignment, its session starting now.
    #[cfg(test)]
    pub fn for_test(id: &str, protocols: &[(&str, Bytes)]) -> Self {
        let info = MemberInfo {
            id: id.into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/h".into(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(30),
            protocols: protocols.iter().map(|(n, b)| (n.to_string(), b.clone())).collect(),
            assignment: Bytes::new(),
        };
        Member::new(info, Instant::now(), false)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Empty,
    /// Waiting for every member to (re)join, until `deadline`.
    PreparingRebalance {
        deadline: Instant,
    },
    /// Joined: waiting for the leader's assignments.
    CompletingRebalance,
    Stable,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Empty => "Empty",
            Phase::PreparingRebalance { .. } => "PreparingRebalance",
            Phase::CompletingRebalance => "CompletingRebalance",
            Phase::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Group {
    pub generation: i32,
    pub phase: Phase,
    pub protocol_type: String,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out by a MEMBER_ID_REQUIRED answer, not yet joined.
    pub pending: BTreeMap<String, Instant>,
    /// What the metadata log holds for the group.
    pub stored: Stored,
}

/// The group's record in the metadata log, as this node last wrote or read it.
#[derive(Debug, Clone, Default)]
pub struct Stored {
    /// The record's version (0: none).
    pub version: u64,
    pub bytes: Option<Vec<u8>>,
    /// A write is in flight (one at a time per group).
    pub writing: bool,
}

impl Group {
    fn new(protocol_type: &str) -> Self {
        Self {
            generation: 0,
            phase: Phase::Empty,
            protocol_type: protocol_type.to_string(),
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            stored: Stored::default(),
        }
    }

    /// The record to keep for the group now: only between rebalances
    /// (Stable, or Empty once it had a record); mid-rebalance the log
    /// keeps the last completed generation.
    fn record(&self) -> Option<Vec<u8>> {
        match self.phase {
            Phase::Stable => Some(record::encode(self)),
            Phase::Empty if self.stored.bytes.is_some() => Some(record::encode(self)),
            _ => None,
        }
    }

    /// The log's record differs from what the group now is.
    fn dirty(&self) -> bool {
        self.record().is_some_and(|b| self.stored.bytes.as_ref() != Some(&b))
    }

    /// May leave memory: nothing to write, nobody in it.
    fn idle(&self) -> bool {
        self.members.is_empty() && self.pending.is_empty() && !self.stored.writing && !self.dirty()
    }

    /// The member id of the static member `instance`.
    fn static_member(&self, instance: &str) -> Option<&str> {
        self.members
            .values()
            .find(|m| m.info.instance_id.as_deref() == Some(instance))
            .map(|m| m.info.id.as_str())
    }

    /// Kafka's member check: a static member's instance id must be held by
    /// this member id (`FENCED_INSTANCE_ID` if a newer one replaced it),
    /// and the member must exist.
    fn validate_member(&self, member_id: &str, instance: Option<&str>) -> Result<(), i16> {
        if let Some(i) = instance {
            match self.static_member(i) {
                None => return Err(code::UNKNOWN_MEMBER_ID),
                Some(id) if id != member_id => return Err(code::FENCED_INSTANCE_ID),
                Some(_) => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(code::UNKNOWN_MEMBER_ID);
        }
        Ok(())
    }

    /// Start (or continue) a rebalance: every member must rejoin.
    fn prepare(&mut self, now: Instant) {
        if matches!(self.phase, Phase::PreparingRebalance { .. }) {
            return;
        }
        let wait = self
            .members
            .values()
            .map(|m| m.info.rebalance_timeout)
            .max()
            .unwrap_or(Duration::ZERO);
        for m in self.members.values_mut() {
            m.joined = false;
            m.info.assignment = Bytes::new();
        }
        self.phase = if self.members.is_empty() {
            Phase::Empty
        } else {
            Phase::PreparingRebalance { deadline: now + wait }
        };
    }

    /// Finish the join round if every member rejoined (or `force`: the
    /// rebalance timeout passed and the stragglers are dropped).
    fn maybe_complete(&mut self, force: bool, now: Instant) -> bool {
        if !matches!(self.phase, Phase::PreparingRebalance { .. }) {
            return false;
        }
        if !force && self.members.values().any(|m| !m.joined) {
            return false;
        }
        self.members.retain(|_, m| m.joined);
        // Sessions restart with the new generation: a long round must not
        // expire members that have been waiting in it.
        for m in self.members.values_mut() {
            m.deadline = now + m.info.session_timeout;
        }
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            self.leader = None;
            self.protocol = None;
            self.generation += 1;
            return true;
        }
        self.generation += 1;
        if !self.leader.as_ref().is_some_and(|l| self.members.contains_key(l)) {
            self.leader = self.members.keys().next().cloned();
        }
        self.protocol = self.choose_protocol();
        self.phase = Phase::CompletingRebalance;
        true
    }

    /// The first protocol of the leader's list that every member supports.
    fn choose_protocol(&self) -> Option<String> {
        let leader = self.members.get(self.leader.as_ref()?)?;
        leader
            .info
            .protocols
            .iter()
            .map(|(n, _)| n)
            .find(|n| {
                self.members
                    .values()
                    .all(|m| m.info.protocols.iter().any(|(p, _)| &p == n))
            })
            .cloned()
    }

    fn remove_member(&mut self, id: &str, now: Instant) -> bool {
        if self.members.remove(id).is_none() {
            return false;
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            self.protocol = None;
            self.generation += 1;
        } else if matches!(self.phase, Phase::PreparingRebalance { .. }) {
            self.maybe_complete(false, now);
        } else {
            self.prepare(now);
        }
        true
    }
}

/// What a JoinGroup asks.
#[derive(Debug, Clone)]
pub struct Join {
    pub group: String,
    pub member_id: String,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// Newer versions: an unknown member first gets an id to rejoin with.
    pub require_known_member_id: bool,
    /// `group.instance.id` (JoinGroup v5+): a static member.
    pub instance_id: Option<String>,
}

impl Join {
    /// The member this join makes: id `id`, holding `assignment`.
    fn into_info(self, id: String, assignment: Bytes) -> MemberInfo {
        MemberInfo {
            id,
            instance_id: self.instance_id,
            client_id: self.client_id,
            client_host: self.client_host,
            session_timeout: self.session_timeout,
            rebalance_timeout: self.rebalance_timeout,
            protocols: self.protocols,
            assignment,
        }
    }
}

/// The answer to a JoinGroup once the join round completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub error_code: i16,
    pub generation: i32,
    pub protocol: String,
    pub leader: String,
    pub member_id: String,
    /// (member id, metadata of the chosen protocol), for the leader only.
    pub members: Vec<(String, Bytes)>,
}

impl Joined {
    pub fn error(error_code: i16, member_id: &str) -> Self {
        Self {
            error_code,
            generation: -1,
            protocol: String::new(),
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

/// What an OffsetCommit asks of the group (see [`Groups::check_commit`]).
#[derive(Debug, Clone, Copy)]
pub struct CommitCheck<'a> {
    pub group: &'a str,
    pub generation: i32,
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    /// The request's OffsetCommit version.
    pub version: i16,
    /// The group has committed offsets (it exists, Empty, in Kafka's terms).
    pub has_offsets: bool,
}

/// The in-memory groups this node coordinates.
#[derive(Default)]
pub struct Groups {
    state: Mutex<BTreeMap<String, Group>>,
    next_member: std::sync::atomic::AtomicU64,
    /// Notified on every change, for joins and syncs waiting to complete.
    pub changed: Notify,
    /// The KIP-848 consumer groups (`consumer_coordinator`).
    pub consumer: consumer::ConsumerGroups,
}

impl Groups {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Group>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn member_id(&self, client_id: &str) -> String {
        let n = self.next_member.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let salt: u32 = crate::entropy::random();
        format!("{client_id}-{n}-{salt:08x}")
    }

    /// Register a join. `Err` is an immediate answer; `Ok(member_id)` means
    /// wait (on `changed`) and then ask [`Groups::join_result`].
    pub fn join(&self, j: Join, now: Instant) -> Result<String, Joined> {
        if j.group.is_empty() {
            return Err(Joined::error(code::INVALID_GROUP_ID, &j.member_id));
        }
        if !(MIN_SESSION..=MAX_SESSION).contains(&j.session_timeout) {
            return Err(Joined::error(code::INVALID_SESSION_TIMEOUT, &j.member_id));
        }
        if j.protocols.is_empty() || j.protocol_type.is_empty() {
            return Err(Joined::error(code::INCONSISTENT_GROUP_PROTOCOL, &j.member_id));
        }
        let mut groups = self.lock();
        if !groups.contains_key(&j.group) && groups.len() >= MAX_GROUPS {
            return Err(Joined::error(code::COORDINATOR_NOT_AVAILABLE, &j.member_id));
        }
        let g = groups
            .entry(j.group.clone())
            .or_insert_with(|| Group::new(&j.protocol_type));
        if g.members.is_empty() {
            g.protocol_type = j.protocol_type.clone();
        } else if g.protocol_type != j.protocol_type
            || !j.protocols.iter().any(|(p, _)| {
                g.members
                    .values()
                    .filter(|m| m.info.id != j.member_id)
                    .all(|m| m.info.protocols.iter().any(|(q, _)| q == p))
            })
        {
            return Err(Joined::error(code::INCONSISTENT_GROUP_PROTOCOL, &j.member_id));
        }
        if let Some(instance) = j.instance_id.as_deref() {
            match (g.static_member(instance).map(str::to_string), j.member_id.is_empty()) {
                // The static member came back under a new member id:
                // it takes over the old one's place (and assignment).
                (Some(old), true) => {
                    let id = self.member_id(&j.client_id);
                    let stable = g.phase == Phase::Stable;
                    Self::replace_static(g, &old, &id, j, now);
                    if !stable {
                        if g.phase == Phase::CompletingRebalance {
                            g.prepare(now);
                        }
                        if let Some(m) = g.members.get_mut(&id) {
                            m.joined = true;
                        }
                        g.maybe_complete(false, now);
                    }
                    drop(groups);
                    self.changed.notify_waiters();
                    return Ok(id);
                }
                (Some(old), false) if old != j.member_id => {
                    return Err(Joined::error(code::FENCED_INSTANCE_ID, &j.member_id));
                }
                (None, false) => return Err(Joined::error(code::UNKNOWN_MEMBER_ID, &j.member_id)),
                _ => {}
            }
        }
        let member_id = if j.member_id.is_empty() {
            let id = self.member_id(&j.client_id);
            // Static members skip the MEMBER_ID_REQUIRED round (KIP-345).
            if j.require_known_member_id && j.instance_id.is_none() {
                g.pending.insert(id.clone(), now + j.session_timeout);
                return Err(Joined::error(code::MEMBER_ID_REQUIRED, &id));
            }
            id
        } else if g.members.contains_key(&j.member_id) || g.pending.remove(&j.member_id).is_some() {
            j.member_id.clone()
        } else {
            return Err(Joined::error(code::UNKNOWN_MEMBER_ID, &j.member_id));
        };
        if !g.members.contains_key(&member_id) && g.members.len() >= MAX_MEMBERS {
            return Err(Joined::error(code::COORDINATOR_NOT_AVAILABLE, &member_id));
        }
        let member = Member::new(j.into_info(member_id.clone(), Bytes::new()), now, true);
        g.members.insert(member_id.clone(), member);
        // Any join outside a join round starts one; the joiner has rejoined.
        g.prepare(now);
        if let Some(m) = g.members.get_mut(&member_id) {
            m.joined = true;
        }
        g.maybe_complete(false, now);
        drop(groups);
        self.changed.notify_waiters();
        Ok(member_id)
    }

    /// A static member rejoined as `new`: `old` is fenced, `new` keeps its
    /// assignment (and leadership). In Stable with the same protocols the
    /// generation does not change; otherwise a rebalance starts.
    fn replace_static(g: &mut Group, old: &str, new: &str, j: Join, now: Instant) {
        let Some(prev) = g.members.remove(old) else {
            return;
        };
        let same_protocols = prev.info.protocols == j.protocols;
        if g.leader.as_deref() == Some(old) {
            g.leader = Some(new.to_string());
        }
        tracing::info!(old, new, "static member replaced");
        g.members.insert(
            new.to_string(),
            Member::new(j.into_info(new.to_string(), prev.info.assignment), now, prev.joined),
        );
        if g.phase == Phase::Stable && !same_protocols {
            g.prepare(now);
        }
    }

    /// A SyncGroup's or Heartbeat's static-member check: 0, or the error
    /// (FENCED_INSTANCE_ID for a replaced member id).
    pub fn check_instance(&self, group: &str, member_id: &str, instance: Option<&str>) -> i16 {
        let Some(i) = instance else {
            return 0;
        };
        match self.lock().get(group) {
            None => code::UNKNOWN_MEMBER_ID,
            Some(g) => g.validate_member(member_id, Some(i)).err().unwrap_or(0),
        }
    }

    /// `None` while the join round is still open.
    pub fn join_result(&self, group: &str, member_id: &str) -> Option<Joined> {
        let groups = self.lock();
        let Some(g) = groups.get(group) else {
            return Some(Joined::error(code::UNKNOWN_MEMBER_ID, member_id));
        };
        if !g.members.contains_key(member_id) {
            return Some(Joined::error(code::UNKNOWN_MEMBER_ID, member_id));
        }
        if matches!(g.phase, Phase::PreparingRebalance { .. }) {
            return None;
        }
        let leader = g.leader.clone().unwrap_or_default();
        let protocol = g.protocol.clone().unwrap_or_default();
        let members = if leader == member_id {
            g.members
                .values()
                .map(|m| {
                    let meta = m
                        .info
                        .protocols
                        .iter()
                        .find(|(p, _)| *p == protocol)
                        .map(|(_, b)| b.clone())
                        .unwrap_or_default();
                    (m.info.id.clone(), meta)
                })
                .collect()
        } else {
            Vec::new()
        };
        Some(Joined {
            error_code: 0,
            generation: g.generation,
            protocol,
            leader,
            member_id: member_id.to_string(),
            members,
        })
    }

    /// Common checks of SyncGroup, Heartbeat and OffsetCommit.
    fn check_member(g: &Group, generation: i32, member_id: &str) -> Result<(), i16> {
        Self::check_static(g, generation, member_id, None)
    }

    fn check_static(g: &Group, generation: i32, member_id: &str, instance: Option<&str>) -> Result<(), i16> {
        g.validate_member(member_id, instance)?;
        if generation != g.generation {
            return Err(code::ILLEGAL_GENERATION);
        }
        Ok(())
    }

    /// A SyncGroup: the leader's assignments are stored. `Err` is the
    /// immediate answer; `Ok` means wait and ask [`Groups::sync_result`].
    pub fn sync(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
        assignments: Vec<(String, Bytes)>,
        now: Instant,
    ) -> Result<(), i16> {
        let mut groups = self.lock();
        let g = groups.get_mut(group).ok_or(code::UNKNOWN_MEMBER_ID)?;
        Self::check_member(g, generation, member_id)?;
        if matches!(g.phase, Phase::PreparingRebalance { .. }) {
            return Err(code::REBALANCE_IN_PROGRESS);
        }
        if let Some(m) = g.members.get_mut(member_id) {
            m.deadline = now + m.info.session_timeout;
        }
        if g.phase == Phase::CompletingRebalance && g.leader.as_deref() == Some(member_id) {
            for (id, a) in assignments {
                if let Some(m) = g.members.get_mut(&id) {
                    m.info.assignment = a;
                }
            }
            g.phase = Phase::Stable;
            drop(groups);
            self.changed.notify_waiters();
        }
        Ok(())
    }

    /// `None` while the leader has not sent the assignments.
    pub fn sync_result(&self, group: &str, generation: i32, member_id: &str) -> Option<Result<Bytes, i16>> {
        let groups = self.lock();
        let Some(g) = groups.get(group) else {
            return Some(Err(code::UNKNOWN_MEMBER_ID));
        };
        if let Err(e) = Self::check_member(g, generation, member_id) {
            return Some(Err(e));
        }
        match g.phase {
            Phase::Stable => Some(Ok(g.members[member_id].info.assignment.clone())),
            Phase::CompletingRebalance => None,
            _ => Some(Err(code::REBALANCE_IN_PROGRESS)),
        }
    }

    pub fn heartbeat(&self, group: &str, generation: i32, member_id: &str, now: Instant) -> i16 {
        let mut groups = self.lock();
        let Some(g) = groups.get_mut(group) else {
            return code::UNKNOWN_MEMBER_ID;
        };
        if let Some(m) = g.members.get_mut(member_id) {
            m.deadline = now + m.info.session_timeout;
        }
        if let Err(e) = Self::check_member(g, generation, member_id) {
            return e;
        }
        match g.phase {
            Phase::PreparingRebalance { .. } => code::REBALANCE_IN_PROGRESS,
            _ => 0,
        }
    }

    /// A LeaveGroup of one member. A static member (v3+) may be named by
    /// its instance id alone (empty member id); a member id that is not
    /// the instance's current one is fenced.
    pub fn leave(&self, group: &str, member_id: &str, instance: Option<&str>, now: Instant) -> i16 {
        let mut groups = self.lock();
        let Some(g) = groups.get_mut(group) else {
            return code::UNKNOWN_MEMBER_ID;
        };
        let mut member_id = member_id.to_string();
        if let Some(i) = instance {
            match g.static_member(i) {
                None => return code::UNKNOWN_MEMBER_ID,
                Some(id) if member_id.is_empty() => member_id = id.to_string(),
                Some(id) if id != member_id => return code::FENCED_INSTANCE_ID,
                Some(_) => {}
            }
        }
        if !g.remove_member(&member_id, now) {
            return code::UNKNOWN_MEMBER_ID;
        }
        if g.idle() {
            groups.remove(group);
        }
        drop(groups);
        self.changed.notify_waiters();
        0
    }

    /// May `member_id` at `generation` commit offsets for `group`? Kafka's
    /// rules (ClassicGroup.validateOffsetCommit): a commit without a
    /// generation (-1) is a simple consumer's or an admin's and is taken
    /// while the group has no members; otherwise the member (and its
    /// static instance id) must be current, at the current generation.
    /// Offsets are stored in Stable and PreparingRebalance (a member
    /// commits what it has before rejoining); only CompletingRebalance,
    /// between join and sync, answers REBALANCE_IN_PROGRESS. A group this
    /// node does not hold: taken at generation -1; otherwise
    /// UNKNOWN_MEMBER_ID if it exists as an Empty group (`has_offsets`),
    /// else ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from v9).
    pub fn check_commit(&self, c: &CommitCheck<'_>) -> i16 {
        let groups = self.lock();
        let Some(g) = groups.get(c.group) else {
            return if c.generation < 0 {
                0
            } else if c.has_offsets {
                code::UNKNOWN_MEMBER_ID
            } else if c.version >= 9 {
                code::GROUP_ID_NOT_FOUND
            } else {
                code::ILLEGAL_GENERATION
            };
        };
        if c.generation < 0 && g.phase == Phase::Empty {
            return 0;
        }
        if c.generation >= 0 || !c.member_id.is_empty() || c.instance_id.is_some() {
            if let Err(e) = Self::check_static(g, c.generation, c.member_id, c.instance_id) {
                return e;
            }
        } else if g.phase != Phase::Empty {
            return code::UNKNOWN_MEMBER_ID;
        }
        if g.phase == Phase::CompletingRebalance {
            return code::REBALANCE_IN_PROGRESS;
        }
        0
    }

    /// Expire sessions and overdue join rounds. Returns whether anything changed.
    pub fn tick(&self, now: Instant) -> bool {
        let mut groups = self.lock();
        let mut any = false;
        for g in groups.values_mut() {
            g.pending.retain(|_, d| *d > now);
            let expired: Vec<String> = g
                .members
                .values()
                .filter(|m| m.deadline <= now && !(m.joined && matches!(g.phase, Phase::PreparingRebalance { .. })))
                .map(|m| m.info.id.clone())
                .collect();
            for id in expired {
                tracing::info!(member = %id, "consumer group member session expired");
                any |= g.remove_member(&id, now);
            }
            if let Phase::PreparingRebalance { deadline } = g.phase {
                if deadline <= now {
                    any |= g.maybe_complete(true, now);
                }
            }
        }
        groups.retain(|_, g| !g.idle());
        drop(groups);
        if any {
            self.changed.notify_waiters();
        }
        any
    }

    /// A snapshot of one group (DescribeGroups).
    pub fn describe(&self, group: &str) -> Option<Group> {
        self.lock().get(group).cloned()
    }

    /// (group id, protocol type) of every group with members.
    pub fn list(&self) -> Vec<(String, String)> {
        self.lock()
            .iter()
            .map(|(k, g)| (k.clone(), g.protocol_type.clone()))
            .collect()
    }

    /// Forget a group's membership; `Err(NON_EMPTY_GROUP)` if it has members.
    pub fn delete(&self, group: &str) -> Result<(), i16> {
        let mut groups = self.lock();
        if groups.get(group).is_some_and(|g| !g.members.is_empty()) {
            return Err(code::NON_EMPTY_GROUP);
        }
        groups.remove(group);
        Ok(())
    }
}

/// Why a record write failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteFailed {
    /// Maybe transient (the metadata store unreachable): write again.
    Retry,
    /// The log refuses this record (over the size cap): do not retry it.
    Refused,
}

/// Keeping groups in the metadata log (see the module doc).
impl Groups {
    /// What to write for `group`, if its record is behind: (the version
    /// the log should be at, the record). Marks the write in flight; settle
    /// it with [`Groups::write_done`].
    pub fn take_write(&self, group: &str) -> Option<(u64, Vec<u8>)> {
        let mut groups = self.lock();
        let g = groups.get_mut(group)?;
        if g.stored.writing || !g.dirty() {
            return None;
        }
        let bytes = g.record()?;
        g.stored.writing = true;
        Some((g.stored.version, bytes))
    }

    /// Groups whose record is behind.
    pub fn dirty_groups(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, g)| !g.stored.writing && g.dirty())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Settle a write [`Groups::take_write`] handed out: `Ok(Written(v))`
    /// records the new version; a `Conflict` whose winner is another
    /// record means another node coordinated the group meanwhile, so the
    /// group is replaced by the winner (or dropped if there is none); a
    /// `Retry` failure leaves the group behind, to be written again.
    pub fn write_done(
        &self,
        group: &str,
        expected: u64,
        bytes: Vec<u8>,
        outcome: Result<crate::api::GroupStateWrite, WriteFailed>,
        now: Instant,
    ) {
        use crate::api::GroupStateWrite;
        let mut groups = self.lock();
        let Some(g) = groups.get_mut(group) else {
            return;
        };
        g.stored.writing = false;
        match outcome {
            Ok(GroupStateWrite::Written(v)) if g.stored.version == expected => {
                g.stored.version = v;
                g.stored.bytes = Some(bytes);
            }
            Ok(GroupStateWrite::Written(_)) | Err(WriteFailed::Retry) => {}
            // Refused for what it is (too large): not retried until the
            // group changes again; the log keeps the previous record.
            Err(WriteFailed::Refused) => g.stored.bytes = Some(bytes),
            Ok(GroupStateWrite::Conflict(Some(w))) if w.data == bytes => {
                g.stored.version = w.version;
                g.stored.bytes = Some(bytes);
            }
            Ok(GroupStateWrite::Conflict(winner)) => {
                tracing::warn!(group, "group record changed under this coordinator; reloading it");
                match winner.and_then(|w| Self::loaded(&w, now)) {
                    Some(fresh) => {
                        groups.insert(group.to_string(), fresh);
                    }
                    None => {
                        groups.remove(group);
                    }
                }
            }
        }
        drop(groups);
        self.changed.notify_waiters();
    }

    fn loaded(state: &crate::api::GroupState, now: Instant) -> Option<Group> {
        if state.kind != record::KIND {
            return None;
        }
        match record::decode(&state.data) {
            Ok(stored) => {
                let mut g = stored.into_group(now);
                g.stored = Stored {
                    version: state.version,
                    bytes: Some(state.data.clone()),
                    writing: false,
                };
                Some(g)
            }
            Err(e) => {
                tracing::warn!(error = %e, "unreadable classic group record ignored");
                None
            }
        }
    }

    /// Bring `group` in line with the log's record (`state`, as this node's
    /// view has it): load it if this node does not hold the group, replace
    /// the group if another node wrote a newer record (or deleted it), and
    /// otherwise keep what is in memory. Loaded members get fresh sessions.
    pub fn sync_with_log(&self, group: &str, state: Option<crate::api::GroupState>, now: Instant) {
        let mut groups = self.lock();
        let held = groups.get(group).map(|g| (g.stored.writing, g.stored.version));
        match (held, state) {
            (None, Some(st)) => {
                if groups.len() < MAX_GROUPS {
                    if let Some(g) = Self::loaded(&st, now) {
                        tracing::info!(group, generation = g.generation, "classic group loaded from the log");
                        groups.insert(group.to_string(), g);
                    }
                }
            }
            (Some((false, version)), Some(st)) if st.version > version => match Self::loaded(&st, now) {
                Some(fresh) => {
                    groups.insert(group.to_string(), fresh);
                }
                None => {
                    groups.remove(group);
                }
            },
            (Some((false, version)), None) if version > 0 => {
                groups.remove(group);
            }
            _ => return,
        }
        drop(groups);
        self.changed.notify_waiters();
    }

    /// Drop `group` from memory without writing (this node no longer
    /// coordinates it; the log's record stands).
    pub fn forget(&self, group: &str) {
        self.lock().remove(group);
    }

    /// The version of the log's record this node's copy of `group` was
    /// last written or loaded at (`None`: not held).
    pub fn stored_version(&self, group: &str) -> Option<u64> {
        self.lock().get(group).map(|g| g.stored.version)
    }

    /// Whether this node holds `group` in memory.
    pub fn holds(&self, group: &str) -> bool {
        self.lock().contains_key(group)
    }
}

/// Wait until `f` answers, re-checking after every change and at most
/// every `poll`, giving up at `deadline` (then `f` is asked one last time
/// and `timeout` answers if it still has nothing).
pub async fn wait_for<T>(groups: &Groups, deadline: Instant, mut f: impl FnMut() -> Option<T>, timeout: T) -> T {
    loop {
        let notified = groups.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(v) = f() {
            return v;
        }
        let now = Instant::now();
        if now >= deadline {
            return timeout;
        }
        let _ = tokio::time::timeout_at(deadline.min(now + Duration::from_millis(500)), notified).await;
    }
}

#[cfg(test)]
mod tests;
