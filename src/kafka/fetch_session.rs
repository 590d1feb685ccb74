//! Fetch sessions (KIP-227): a node's bounded cache of the partitions each
//! consumer fetches, so that an incremental Fetch names only what changed and
//! its answer holds only partitions with news. A pure state machine: no I/O,
//! no clock (`now` is a parameter), session ids from a seeded generator.
//!
//! The rules follow Apache Kafka's `FetchSession.scala`:
//!
//! - epoch -1 (any session id): a sessionless fetch; the session named, if
//!   any, is closed. Epoch 0: a full fetch that opens a new session (closing
//!   the one named); the answer carries its id (0 when the cache has no room).
//! - epoch > 0: an incremental fetch of session `id`. Unknown id:
//!   `FETCH_SESSION_ID_NOT_FOUND`; wrong epoch: `INVALID_FETCH_SESSION_EPOCH`;
//!   a session opened with topic ids (v13+) used by an older version or the
//!   other way round: `FETCH_SESSION_TOPIC_ID_ERROR`. Otherwise the request's
//!   partitions are added or updated, its forgotten ones removed, the epoch
//!   moves on, and every partition of the session is fetched; the answer
//!   holds those with records, a changed high watermark or log start, or an
//!   error. A partition that returned records moves to the end of the session
//!   (so the byte budget rotates over partitions). A session left empty is closed.
//! - Full cache: the least recently used session is evicted if it has been
//!   idle longer than the eviction time; else the smallest session older
//!   than the eviction time, if the new one is larger; else no session.
//! - Not in Kafka: a session holds at most `max_partitions` partitions. A full
//!   fetch naming more gets no session; an incremental one growing past it
//!   closes its session (`FETCH_SESSION_ID_NOT_FOUND`, after which a client
//!   starts over with a full fetch).

use super::code;
use super::proto::{FetchHead, FetchPartition, FetchPartitionResponse};
use crate::ids::TopicUuid;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::time::Instant;

pub const INVALID_SESSION_ID: i32 = 0;
pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

/// The epoch after `epoch` (wrapping to 1, never back to 0).
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        FINAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// One partition a fetch asks for: its topic (by id from v13, then `topic`
/// is the name the id resolves to, empty for an unknown id) and the
/// request's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub topic_id: TopicUuid,
    pub topic: String,
    pub fetch: FetchPartition,
}

/// How a partition is told apart in a session: by topic id in sessions
/// opened with ids, by name otherwise.
type Key = (TopicUuid, String, i32);

fn key(uses_topic_ids: bool, p: &Part) -> Key {
    if uses_topic_ids {
        (p.topic_id, String::new(), p.fetch.partition)
    } else {
        (TopicUuid::ZERO, p.topic.clone(), p.fetch.partition)
    }
}

#[derive(Debug, Clone)]
struct Cached {
    part: Part,
    /// What the client last saw: -1 until answered, and after an error so
    /// the partition is sent again once it clears.
    high_watermark: i64,
    /// A read_committed reader's end moves when a transaction ends.
    last_stable_offset: i64,
    log_start_offset: i64,
}

#[derive(Debug)]
struct Session {
    epoch: i32,
    uses_topic_ids: bool,
    created: Instant,
    last_used: Instant,
    /// The partitions in fetch order (by a sequence number moved on when a
    /// partition goes to the end), and where each key sits.
    order: BTreeMap<u64, Cached>,
    at: HashMap<Key, u64>,
    next_seq: u64,
}

impl Session {
    fn push(&mut self, k: Key, c: Cached) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.insert(seq, c);
        self.at.insert(k, seq);
    }
    fn len(&self) -> usize {
        self.order.len()
    }
}

/// What a Fetch request turned out to be, for [`Sessions::respond`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Context {
    /// Answer every partition; no session (id 0).
    Sessionless,
    /// Answer every partition, then open a session of them.
    Full { uses_topic_ids: bool },
    /// Answer what changed in session `id`, which is now at `epoch`.
    Incremental { id: i32, epoch: i32 },
    /// Answer no partition, with this error.
    Error(i16),
}

/// A node's fetch sessions.
#[derive(Debug)]
pub struct Sessions {
    max_sessions: usize,
    max_partitions: usize,
    eviction: Duration,
    sessions: HashMap<i32, Session>,
    ids: SmallRng,
}

impl Sessions {
    /// Kafka's defaults: 1,000 sessions, 2 minutes before one may be evicted.
    pub fn new(seed: u64) -> Self {
        Self::with_limits(1000, 10_000, Duration::from_secs(120), seed)
    }

    pub fn with_limits(max_sessions: usize, max_partitions: usize, eviction: Duration, seed: u64) -> Self {
        Self {
            max_sessions,
            max_partitions,
            eviction,
            sessions: HashMap::new(),
            ids: SmallRng::seed_from_u64(seed),
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The partitions of session `id` in fetch order (for tests and metrics).
    pub fn partitions(&self, id: i32) -> Option<Vec<Part>> {
        self.sessions
            .get(&id)
            .map(|s| s.order.values().map(|c| c.part.clone()).collect())
    }

    /// Decides what a Fetch of `version` with this session id and epoch is,
    /// applying an incremental one's changes to its session. Returns the
    /// context and the partitions to fetch, in order.
    pub fn begin(
        &mut self,
        version: i16,
        session_id: i32,
        epoch: i32,
        parts: Vec<Part>,
        forgotten: &[Part],
        now: Instant,
    ) -> (Context, Vec<Part>) {
        let uses_topic_ids = version >= 13;
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            // A full fetch closes any session it names.
            self.sessions.remove(&session_id);
            let ctx = if epoch == FINAL_EPOCH {
                Context::Sessionless
            } else {
                Context::Full { uses_topic_ids }
            };
            return (ctx, parts);
        }
        let max_partitions = self.max_partitions;
        let Some(s) = self.sessions.get_mut(&session_id) else {
            return (Context::Error(code::FETCH_SESSION_ID_NOT_FOUND), Vec::new());
        };
        if s.epoch != epoch {
            return (Context::Error(code::INVALID_FETCH_SESSION_EPOCH), Vec::new());
        }
        if s.uses_topic_ids != uses_topic_ids {
            return (Context::Error(code::FETCH_SESSION_TOPIC_ID_ERROR), Vec::new());
        }
        for p in parts {
            let k = key(uses_topic_ids, &p);
            match s.at.get(&k).and_then(|seq| s.order.get_mut(seq)) {
                Some(c) => c.part = p,
                None => s.push(
                    k,
                    Cached {
                        part: p,
                        high_watermark: -1,
                        last_stable_offset: -1,
                        log_start_offset: -1,
                    },
                ),
            }
        }
        for p in forgotten {
            if let Some(seq) = s.at.remove(&key(uses_topic_ids, p)) {
                s.order.remove(&seq);
            }
        }
        if s.len() > max_partitions {
            self.sessions.remove(&session_id);
            return (Context::Error(code::FETCH_SESSION_ID_NOT_FOUND), Vec::new());
        }
        if s.order.is_empty() {
            self.sessions.remove(&session_id);
            return (Context::Sessionless, Vec::new());
        }
        s.last_used = now;
        s.epoch = next_epoch(s.epoch);
        let fetch = s.order.values().map(|c| c.part.clone()).collect();
        (
            Context::Incremental {
                id: session_id,
                epoch: s.epoch,
            },
            fetch,
        )
    }

    /// The answer's head for `ctx` once `answers` (one per partition
    /// fetched, in order) are known: opens the session of a full fetch, and
    /// for an incremental one updates its session and keeps only the
    /// answers the client has not seen.
    pub fn respond(
        &mut self,
        ctx: &Context,
        answers: &mut Vec<(Part, FetchPartitionResponse)>,
        now: Instant,
    ) -> FetchHead {
        match *ctx {
            Context::Sessionless => FetchHead::default(),
            Context::Error(error_code) => {
                answers.clear();
                FetchHead {
                    error_code,
                    session_id: INVALID_SESSION_ID,
                }
            }
            Context::Full { uses_topic_ids } => FetchHead {
                error_code: code::NONE,
                session_id: self.open(uses_topic_ids, answers, now),
            },
            Context::Incremental { id, epoch } => {
                let Some(s) = self.sessions.get_mut(&id).filter(|s| s.epoch == epoch) else {
                    // Another fetch of the session came in between.
                    answers.clear();
                    return FetchHead {
                        error_code: code::INVALID_FETCH_SESSION_EPOCH,
                        session_id: id,
                    };
                };
                let uses_topic_ids = s.uses_topic_ids;
                answers.retain(|(p, a)| {
                    let k = key(uses_topic_ids, p);
                    let Some(&seq) = s.at.get(&k) else { return true };
                    let Some(c) = s.order.get_mut(&seq) else { return true };
                    let has_records = a.batches.iter().any(|b| !b.is_empty());
                    let mut respond = has_records || a.error_code != code::NONE;
                    if c.high_watermark != a.high_watermark {
                        respond = true;
                        c.high_watermark = a.high_watermark;
                    }
                    if c.last_stable_offset != a.last_stable_offset {
                        respond = true;
                        c.last_stable_offset = a.last_stable_offset;
                    }
                    if c.log_start_offset != a.log_start_offset {
                        respond = true;
                        c.log_start_offset = a.log_start_offset;
                    }
                    if a.error_code != code::NONE {
                        c.high_watermark = -1;
                    }
                    if has_records {
                        let c = s.order.remove(&seq).expect("present");
                        s.push(k, c);
                    }
                    respond
                });
                FetchHead {
                    error_code: code::NONE,
                    session_id: id,
                }
            }
        }
    }

    /// A new session of a full fetch's partitions, if there is room: its id,
    /// or 0.
    fn open(&mut self, uses_topic_ids: bool, answers: &[(Part, FetchPartitionResponse)], now: Instant) -> i32 {
        let size = answers.len();
        if size == 0 || size > self.max_partitions {
            return INVALID_SESSION_ID;
        }
        if self.sessions.len() >= self.max_sessions && !self.evict_for(size, now) {
            return INVALID_SESSION_ID;
        }
        let id = loop {
            let id = self.ids.random_range(1..=i32::MAX);
            if !self.sessions.contains_key(&id) {
                break id;
            }
        };
        let mut s = Session {
            epoch: next_epoch(INITIAL_EPOCH),
            uses_topic_ids,
            created: now,
            last_used: now,
            order: BTreeMap::new(),
            at: HashMap::new(),
            next_seq: 0,
        };
        for (p, a) in answers {
            let k = key(uses_topic_ids, p);
            if s.at.contains_key(&k) {
                continue;
            }
            let errored = a.error_code != code::NONE;
            s.push(
                k,
                Cached {
                    part: p.clone(),
                    high_watermark: if errored { -1 } else { a.high_watermark },
                    last_stable_offset: a.last_stable_offset,
                    log_start_offset: a.log_start_offset,
                },
            );
        }
        self.sessions.insert(id, s);
        id
    }

    /// Makes room for a session of `size` partitions: evicts a session idle
    /// past the eviction time, else the smallest one older than it if that is
    /// smaller than `size`.
    fn evict_for(&mut self, size: usize, now: Instant) -> bool {
        let eviction = self.eviction;
        let idle = self
            .sessions
            .iter()
            .min_by_key(|(id, s)| (s.last_used, **id))
            .filter(|(_, s)| now.saturating_duration_since(s.last_used) > eviction)
            .map(|(id, _)| *id);
        if let Some(id) = idle {
            self.sessions.remove(&id);
            return true;
        }
        let smallest = self
            .sessions
            .iter()
            .filter(|(_, s)| now.saturating_duration_since(s.created) > eviction)
            .min_by_key(|(id, s)| (s.len(), **id))
            .filter(|(_, s)| size > s.len())
            .map(|(id, _)| *id);
        match smallest {
            Some(id) => {
                self.sessions.remove(&id);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn part(topic: &str, partition: i32, fetch_offset: i64) -> Part {
        Part {
            topic_id: TopicUuid::ZERO,
            topic: topic.into(),
            fetch: FetchPartition {
                partition,
                current_leader_epoch: -1,
                fetch_offset,
                partition_max_bytes: 1 << 20,
            },
        }
    }

    fn answer(p: &Part, hw: i64, records: bool) -> (Part, FetchPartitionResponse) {
        (
            p.clone(),
            FetchPartitionResponse {
                partition: p.fetch.partition,
                error_code: 0,
                high_watermark: hw,
                last_stable_offset: hw,
                aborted: Vec::new(),
                log_start_offset: 0,
                batches: if records {
                    vec![Bytes::from_static(b"batch")]
                } else {
                    Vec::new()
                },
            },
        )
    }

    /// Opens a session of `parts` (high watermark 5 each); its id.
    fn open(s: &mut Sessions, parts: &[Part], now: Instant) -> i32 {
        let (ctx, fetch) = s.begin(12, 0, INITIAL_EPOCH, parts.to_vec(), &[], now);
        assert_eq!(ctx, Context::Full { uses_topic_ids: false });
        let mut answers: Vec<_> = fetch.iter().map(|p| answer(p, 5, false)).collect();
        let head = s.respond(&ctx, &mut answers, now);
        assert_eq!(answers.len(), parts.len(), "a full fetch answers everything");
        head.session_id
    }

    #[test]
    fn sessionless_fetches_open_nothing() {
        let mut s = Sessions::new(1);
        let now = Instant::now();
        let (ctx, fetch) = s.begin(11, 0, FINAL_EPOCH, vec![part("t", 0, 0)], &[], now);
        assert_eq!((ctx.clone(), fetch.len()), (Context::Sessionless, 1));
        let mut answers = vec![answer(&fetch[0], 1, false)];
        assert_eq!(s.respond(&ctx, &mut answers, now), FetchHead::default());
        assert!(s.is_empty());
    }

    #[test]
    fn incremental_fetches_answer_only_what_changed() {
        let mut s = Sessions::new(1);
        let now = Instant::now();
        let (a, b) = (part("t", 0, 0), part("t", 1, 0));
        let id = open(&mut s, &[a.clone(), b.clone()], now);
        assert_ne!(id, INVALID_SESSION_ID);
        // Epoch 1 names nothing: both partitions are fetched from the session.
        let (ctx, fetch) = s.begin(12, id, 1, Vec::new(), &[], now);
        assert_eq!(ctx, Context::Incremental { id, epoch: 2 });
        assert_eq!(fetch, vec![a.clone(), b.clone()]);
        // Only b has news: records.
        let mut answers = vec![answer(&a, 5, false), answer(&b, 5, true)];
        let head = s.respond(&ctx, &mut answers, now);
        assert_eq!(
            head,
            FetchHead {
                error_code: 0,
                session_id: id
            }
        );
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0].0, b);
        // b moved to the end; the client now asks b from a new offset.
        let b2 = part("t", 1, 3);
        let (ctx, fetch) = s.begin(12, id, 2, vec![b2.clone()], &[], now);
        assert_eq!(fetch, vec![a.clone(), b2.clone()], "b updated in place at the end");
        // a's high watermark moved: a is answered.
        let mut answers = vec![answer(&a, 6, false), answer(&b2, 5, false)];
        s.respond(&ctx, &mut answers, now);
        assert_eq!(
            answers.iter().map(|(p, _)| p.fetch.partition).collect::<Vec<_>>(),
            vec![0]
        );
        // Only a's last stable offset moved (a transaction ended): a is
        // answered, so a read_committed reader reads on.
        let (ctx, _) = s.begin(12, id, 3, Vec::new(), &[], now);
        let mut moved = answer(&a, 6, false);
        moved.1.last_stable_offset = 4;
        let mut answers = vec![answer(&a, 6, false), answer(&b2, 5, false)];
        s.respond(&ctx, &mut answers, now);
        assert!(answers.is_empty(), "nothing changed");
        let (ctx, _) = s.begin(12, id, 4, Vec::new(), &[], now);
        let mut answers = vec![moved, answer(&b2, 5, false)];
        s.respond(&ctx, &mut answers, now);
        assert_eq!(
            answers.iter().map(|(p, _)| p.fetch.partition).collect::<Vec<_>>(),
            vec![0]
        );
    }

    #[test]
    fn errors_are_always_answered_and_answered_again_when_they_clear() {
        let mut s = Sessions::new(1);
        let now = Instant::now();
        let a = part("t", 0, 0);
        let id = open(&mut s, std::slice::from_ref(&a), now);
        let (ctx, _) = s.begin(12, id, 1, Vec::new(), &[], now);
        let mut failed = answer(&a, -1, false);
        failed.1.error_code = code::NOT_LEADER_OR_FOLLOWER;
        let mut answers = vec![failed];
        s.respond(&ctx, &mut answers, now);
        assert_eq!(answers.len(), 1);
        let (ctx, _) = s.begin(12, id, 2, Vec::new(), &[], now);
        let mut answers = vec![answer(&a, 5, false)];
        s.respond(&ctx, &mut answers, now);
        assert_eq!(answers.len(), 1, "the high watermark the client saw was reset");
    }

    #[test]
    fn session_errors() {
        let mut s = Sessions::new(1);
        let now = Instant::now();
        let id = open(&mut s, &[part("t", 0, 0)], now);
        let begin = |s: &mut Sessions, v, id, e| s.begin(v, id, e, Vec::new(), &[], now).0;
        assert_eq!(
            begin(&mut s, 12, id.wrapping_add(1), 1),
            Context::Error(code::FETCH_SESSION_ID_NOT_FOUND)
        );
        assert_eq!(
            begin(&mut s, 12, id, 5),
            Context::Error(code::INVALID_FETCH_SESSION_EPOCH)
        );
        assert_eq!(
            begin(&mut s, 13, id, 1),
            Context::Error(code::FETCH_SESSION_TOPIC_ID_ERROR)
        );
        let ctx = begin(&mut s, 12, id, 1);
        // A duplicate of the same request, decided before the first answered.
        assert_eq!(
            begin(&mut s, 12, id, 1),
            Context::Error(code::INVALID_FETCH_SESSION_EPOCH)
        );
        let mut answers = Vec::new();
        assert_eq!(s.respond(&ctx, &mut answers, now).error_code, code::NONE);
        let mut answers = vec![answer(&part("t", 0, 0), 5, true)];
        let head = s.respond(&Context::Error(code::INVALID_FETCH_SESSION_EPOCH), &mut answers, now);
        assert_eq!((head.error_code, head.session_id, answers.len()), (71, 0, 0));
    }

    #[test]
    fn a_full_fetch_closes_the_session_it_names_and_forgetting_everything_closes_it() {
        let mut s = Sessions::new(1);
        let now = Instant::now();
        let a = part("t", 0, 0);
        let id = open(&mut s, std::slice::from_ref(&a), now);
        let (ctx, _) = s.begin(12, id, FINAL_EPOCH, Vec::new(), &[], now);
        assert_eq!((ctx, s.len()), (Context::Sessionless, 0));
        let id = open(&mut s, std::slice::from_ref(&a), now);
        let (ctx, fetch) = s.begin(12, id, 1, Vec::new(), std::slice::from_ref(&a), now);
        assert_eq!((ctx, fetch.len(), s.len()), (Context::Sessionless, 0, 0));
    }

    #[test]
    fn topic_id_sessions_key_partitions_by_id() {
        let mut s = Sessions::new(1);
        let now = Instant::now();
        let mut a = part("t", 0, 0);
        a.topic_id = TopicUuid([7; 16]);
        let (ctx, fetch) = s.begin(13, 0, 0, vec![a.clone()], &[], now);
        assert_eq!(ctx, Context::Full { uses_topic_ids: true });
        let mut answers = vec![answer(&fetch[0], 1, false)];
        let id = s.respond(&ctx, &mut answers, now).session_id;
        let mut forget = a.clone();
        forget.topic = String::new();
        let (ctx, _) = s.begin(13, id, 1, Vec::new(), &[forget], now);
        assert_eq!(ctx, Context::Sessionless, "forgotten by id alone");
    }

    #[test]
    fn a_full_cache_evicts_idle_sessions_then_smaller_old_ones() {
        let eviction = Duration::from_secs(120);
        let mut s = Sessions::with_limits(2, 100, eviction, 1);
        let t0 = Instant::now();
        let small = open(&mut s, &[part("a", 0, 0)], t0);
        let big = open(&mut s, &[part("b", 0, 0), part("b", 1, 0), part("b", 2, 0)], t0);
        // Both in use and young: no room.
        let t1 = t0 + Duration::from_secs(60);
        for id in [small, big] {
            let (ctx, _) = s.begin(12, id, 1, Vec::new(), &[], t1);
            s.respond(&ctx, &mut Vec::new(), t1);
        }
        assert_eq!(
            open(&mut s, &[part("c", 0, 0), part("c", 1, 0)], t1),
            INVALID_SESSION_ID
        );
        // Old but not idle: the smaller one gives way to a larger session only.
        let t2 = t0 + Duration::from_secs(150);
        assert_eq!(open(&mut s, &[part("d", 0, 0)], t2), INVALID_SESSION_ID, "not larger");
        let c = open(&mut s, &[part("c", 0, 0), part("c", 1, 0)], t2);
        assert_ne!(c, INVALID_SESSION_ID);
        assert!(s.partitions(small).is_none() && s.partitions(big).is_some());
        // Idle past the eviction time: the least recently used goes first.
        let t3 = t1 + eviction + Duration::from_secs(1);
        let d = open(&mut s, &[part("d", 0, 0)], t3);
        assert_ne!(d, INVALID_SESSION_ID);
        assert!(s.partitions(big).is_none() && s.partitions(c).is_some());
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn sessions_are_bounded_in_partitions() {
        let mut s = Sessions::with_limits(10, 2, Duration::from_secs(120), 1);
        let now = Instant::now();
        let three = [part("t", 0, 0), part("t", 1, 0), part("t", 2, 0)];
        assert_eq!(open(&mut s, &three, now), INVALID_SESSION_ID);
        let id = open(&mut s, &three[..2], now);
        let (ctx, _) = s.begin(12, id, 1, vec![three[2].clone()], &[], now);
        assert_eq!(ctx, Context::Error(code::FETCH_SESSION_ID_NOT_FOUND));
        assert!(s.is_empty());
    }

    #[test]
    fn epochs_wrap_to_one() {
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(-1), -1);
    }
}
