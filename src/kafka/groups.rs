//! The classic consumer-group coordinator: membership (generation, members,
//! protocol, leader, assignments) lives in memory on the coordinating node.
//! Committed offsets do not: they go through the metadata log
//! (`CommitOffsets`), so they survive a coordinator failover; membership
//! does not, and members rejoin the new coordinator.
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
}

/// Session timeouts accepted (Kafka's broker defaults).
pub const MIN_SESSION: Duration = Duration::from_millis(1_000);
pub const MAX_SESSION: Duration = Duration::from_secs(30 * 60);
/// Most members per group, and most groups, held in memory.
pub const MAX_MEMBERS: usize = 1_000;
pub const MAX_GROUPS: usize = 10_000;

#[derive(Debug, Clone)]
pub struct Member {
    pub id: String,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    /// (protocol name, metadata), in the member's preference order.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    /// The session expires at this instant unless the member is heard from.
    pub deadline: Instant,
    /// Rejoined in the current rebalance.
    pub joined: bool,
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
        }
    }

    /// Start (or continue) a rebalance: every member must rejoin.
    fn prepare(&mut self, now: Instant) {
        if matches!(self.phase, Phase::PreparingRebalance { .. }) {
            return;
        }
        let wait = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::ZERO);
        for m in self.members.values_mut() {
            m.joined = false;
            m.assignment = Bytes::new();
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
            m.deadline = now + m.session_timeout;
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
            .protocols
            .iter()
            .map(|(n, _)| n)
            .find(|n| self.members.values().all(|m| m.protocols.iter().any(|(p, _)| &p == n)))
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
        let salt: u32 = rand::random();
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
                    .filter(|m| m.id != j.member_id)
                    .all(|m| m.protocols.iter().any(|(q, _)| q == p))
            })
        {
            return Err(Joined::error(code::INCONSISTENT_GROUP_PROTOCOL, &j.member_id));
        }
        let member_id = if j.member_id.is_empty() {
            let id = self.member_id(&j.client_id);
            if j.require_known_member_id {
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
        let member = Member {
            id: member_id.clone(),
            client_id: j.client_id,
            client_host: j.client_host,
            session_timeout: j.session_timeout,
            rebalance_timeout: j.rebalance_timeout,
            protocols: j.protocols,
            assignment: Bytes::new(),
            deadline: now + j.session_timeout,
            joined: true,
        };
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
                        .protocols
                        .iter()
                        .find(|(p, _)| *p == protocol)
                        .map(|(_, b)| b.clone())
                        .unwrap_or_default();
                    (m.id.clone(), meta)
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
        if !g.members.contains_key(member_id) {
            return Err(code::UNKNOWN_MEMBER_ID);
        }
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
            m.deadline = now + m.session_timeout;
        }
        if g.phase == Phase::CompletingRebalance && g.leader.as_deref() == Some(member_id) {
            for (id, a) in assignments {
                if let Some(m) = g.members.get_mut(&id) {
                    m.assignment = a;
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
            Phase::Stable => Some(Ok(g.members[member_id].assignment.clone())),
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
            m.deadline = now + m.session_timeout;
        }
        if let Err(e) = Self::check_member(g, generation, member_id) {
            return e;
        }
        match g.phase {
            Phase::PreparingRebalance { .. } => code::REBALANCE_IN_PROGRESS,
            _ => 0,
        }
    }

    pub fn leave(&self, group: &str, member_id: &str, now: Instant) -> i16 {
        let mut groups = self.lock();
        let Some(g) = groups.get_mut(group) else {
            return code::UNKNOWN_MEMBER_ID;
        };
        if !g.remove_member(member_id, now) {
            return code::UNKNOWN_MEMBER_ID;
        }
        if g.members.is_empty() && g.pending.is_empty() {
            groups.remove(group);
        }
        drop(groups);
        self.changed.notify_waiters();
        0
    }

    /// May `member_id` at `generation` commit offsets for `group`? Simple
    /// commits (generation -1, no member) are allowed when the group has no
    /// members.
    pub fn check_commit(&self, group: &str, generation: i32, member_id: &str) -> i16 {
        let groups = self.lock();
        match groups.get(group) {
            None => {
                if generation < 0 {
                    0
                } else {
                    code::UNKNOWN_MEMBER_ID
                }
            }
            Some(g) if generation < 0 && member_id.is_empty() => {
                if g.members.is_empty() {
                    0
                } else {
                    code::UNKNOWN_MEMBER_ID
                }
            }
            Some(g) => match Self::check_member(g, generation, member_id) {
                Err(e) => e,
                Ok(()) if matches!(g.phase, Phase::PreparingRebalance { .. }) => code::REBALANCE_IN_PROGRESS,
                Ok(()) => 0,
            },
        }
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
                .map(|m| m.id.clone())
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
        groups.retain(|_, g| !g.members.is_empty() || !g.pending.is_empty());
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
