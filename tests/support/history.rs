//! A history of what clients did and saw, and a checker of the invariants of
//! `/work/shared/design/README.md` over it, in the style of Jepsen: the
//! checker knows nothing about Sluice, only about appends, acknowledgements,
//! reads and the final contents of each partition.
//!
//! Recording: every append is [`History::invoke`]d *before* its request is
//! sent (which is what makes real-time order checkable), then gets exactly
//! one outcome: [`ack`](History::ack) with the (partition, offset) the server
//! answered, [`fail`](History::fail) when it certainly had no effect (the
//! connection was refused, a 4xx), or [`indeterminate`](History::indeterminate)
//! when it may have (a timeout, a reset connection, a 503 after the write
//! started). An op with no outcome at the end counts as indeterminate.
//! Every read result is [`read`](History::read). Values must be unique per
//! invocation, so that a value identifies its append.
//!
//! Appends may belong to a [`Session`]: an idempotent producer session (a
//! librdkafka producer with `enable.idempotence`), whose retries must never
//! store a record twice and whose records stay in production order per
//! partition; and whose invocations the test may only learn about after the
//! fact (`real_time: false`), so that real-time order is not checked for them.
//!
//! [`History::check`] compares the history with the final state, every
//! partition read whole after the faults were healed, and reports:
//!
//! - `ack-lost` / `ack-changed`: an acknowledged record is missing from its
//!   offset, or a different record is there (invariants 1 and 3);
//! - `conflict`: one (partition, offset) was seen holding two different
//!   records, by any acknowledgements and reads (invariant 3);
//! - `read-lost`: a read returned a record that is gone from the final state:
//!   unacknowledged data was served (invariant 4);
//! - `read-past-high-watermark`, `read-gap`: a read returned a record at or
//!   past the high watermark it reported, or skipped offsets;
//! - `hole`: the final offsets of a partition are not dense from 0;
//! - `duplicate`: a value stored at two offsets although its client sent it
//!   once, or an idempotent session's retry stored twice;
//! - `failed-present`: an append that certainly failed is stored;
//! - `phantom`: a record no client ever sent;
//! - `reordered`: an ordered session's records are out of production order;
//! - `real-time`: append B was invoked after append A was acknowledged, on
//!   the same partition, yet got a lower offset;
//! - `malformed`: the history itself is inconsistent (a bug in the test).

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::Mutex;

/// One append invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(usize);

/// A producer session and what it promises.
#[derive(Debug, Clone)]
pub struct Session {
    pub name: String,
    /// Retries within the session never store a record twice.
    pub idempotent: bool,
    /// Records stay in invocation order per partition.
    pub ordered: bool,
    /// Invocations are recorded before their request is sent. False when the
    /// test only learns of a send afterwards (a client library's own
    /// buffering and retries): real-time order is then not checked.
    pub real_time: bool,
}

/// What happened, in the order the test observed it.
#[derive(Debug, Clone)]
pub enum Event {
    Invoke {
        op: OpId,
        client: String,
        session: Option<SessionId>,
        /// The partition asked for; `None` when the server or the client
        /// library picks (the acknowledgement says where it went).
        partition: Option<u32>,
        value: String,
    },
    Ack {
        op: OpId,
        partition: u32,
        offset: u64,
    },
    /// Certainly had no effect.
    Fail {
        op: OpId,
        why: String,
    },
    /// May or may not have had an effect.
    Indeterminate {
        op: OpId,
        why: String,
    },
    Read {
        client: String,
        partition: u32,
        /// (offset, value) in the order returned.
        records: Vec<(u64, String)>,
        /// The high watermark the read reported, if it did.
        high_watermark: Option<u64>,
        /// A strong (linearizable) read: when it was invoked and where it
        /// read from, for the linearizability check.
        strong: Option<StrongRead>,
    },
}

/// What the linearizability check needs of a strong read besides its answer.
#[derive(Debug, Clone, Copy)]
pub struct StrongRead {
    /// [`History::now`] before the request was sent.
    pub invoked: usize,
    pub from: u64,
}

/// Every partition read whole at the end: (offset, value) in the order read.
pub type FinalState = BTreeMap<u32, Vec<(u64, String)>>;

#[derive(Default)]
struct Inner {
    events: Vec<Event>,
    sessions: Vec<Session>,
    ops: usize,
}

/// A thread-safe log of events; share it behind an `Arc`.
#[derive(Default)]
pub struct History {
    inner: Mutex<Inner>,
}

impl History {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn session(&self, session: Session) -> SessionId {
        let mut inner = self.inner.lock().unwrap();
        inner.sessions.push(session);
        SessionId(inner.sessions.len() - 1)
    }

    /// An append is about to be sent.
    pub fn invoke(&self, client: &str, session: Option<SessionId>, partition: Option<u32>, value: &str) -> OpId {
        let mut inner = self.inner.lock().unwrap();
        let op = OpId(inner.ops);
        inner.ops += 1;
        inner.events.push(Event::Invoke {
            op,
            client: client.to_string(),
            session,
            partition,
            value: value.to_string(),
        });
        op
    }

    pub fn ack(&self, op: OpId, partition: u32, offset: u64) {
        self.push(Event::Ack { op, partition, offset });
    }

    pub fn fail(&self, op: OpId, why: impl Into<String>) {
        self.push(Event::Fail { op, why: why.into() });
    }

    pub fn indeterminate(&self, op: OpId, why: impl Into<String>) {
        self.push(Event::Indeterminate { op, why: why.into() });
    }

    pub fn read(&self, client: &str, partition: u32, records: Vec<(u64, String)>, high_watermark: Option<u64>) {
        self.push(Event::Read {
            client: client.to_string(),
            partition,
            records,
            high_watermark,
            strong: None,
        });
    }

    /// The history's real-time clock: the number of events so far. An
    /// event recorded after another completed has a larger index.
    pub fn now(&self) -> usize {
        self.inner.lock().unwrap().events.len()
    }

    /// A strong read that completed: invoked at `strong.invoked` (a
    /// [`History::now`] taken before sending it).
    pub fn strong_read(
        &self,
        client: &str,
        partition: u32,
        strong: StrongRead,
        records: Vec<(u64, String)>,
        high_watermark: u64,
    ) {
        self.push(Event::Read {
            client: client.to_string(),
            partition,
            records,
            high_watermark: Some(high_watermark),
            strong: Some(strong),
        });
    }

    /// The linearizability check (`support::linearizable`) of each
    /// partition: every append with its invocation and outcome, and every
    /// strong read, against the final state. Appends of sessions without
    /// real-time order count as invoked at the start; those whose partition
    /// is unknown (failed or indeterminate) are offered to every partition
    /// (values are unique).
    pub fn linearizability(
        &self,
        final_state: &FinalState,
    ) -> (Vec<(u32, super::linearizable::Violation)>, super::linearizable::Sizes) {
        use super::linearizable::{check, Append, FinalLog, Outcome as Lin, Read, Sizes};
        let inner = self.inner.lock().unwrap();
        let mut appends: BTreeMap<Option<u32>, Vec<Append>> = BTreeMap::new();
        let mut reads: BTreeMap<u32, Vec<Read>> = BTreeMap::new();
        let mut invoked: BTreeMap<OpId, (usize, Option<u32>, String)> = BTreeMap::new();
        let mut ended: BTreeMap<OpId, (Lin, Option<u32>)> = BTreeMap::new();
        // The event at index i happened at tick i + 1; a strong read invoked
        // when `now()` was k started at tick k, just after event k - 1.
        for (i, e) in inner.events.iter().enumerate() {
            let i = i + 1;
            match e {
                Event::Invoke {
                    op,
                    session,
                    partition,
                    value,
                    ..
                } => {
                    let real_time = session.is_none_or(|s| inner.sessions[s.0].real_time);
                    invoked.insert(*op, (if real_time { i } else { 0 }, *partition, value.clone()));
                }
                Event::Ack { op, partition, offset } => {
                    ended.insert(
                        *op,
                        (
                            Lin::Acked {
                                offset: *offset,
                                completed: i as u64,
                            },
                            Some(*partition),
                        ),
                    );
                }
                Event::Fail { op, .. } => {
                    ended.insert(*op, (Lin::Failed, None));
                }
                Event::Indeterminate { op, .. } => {
                    ended.insert(*op, (Lin::Unknown, None));
                }
                Event::Read {
                    client,
                    partition,
                    records,
                    high_watermark,
                    strong: Some(s),
                } => reads.entry(*partition).or_default().push(Read {
                    who: client.clone(),
                    invoked: s.invoked as u64,
                    completed: i as u64,
                    from: s.from,
                    records: records.clone(),
                    high_watermark: high_watermark.unwrap_or(s.from),
                }),
                Event::Read { .. } => {}
            }
        }
        for (op, (at, partition, value)) in invoked {
            let (outcome, acked_in) = ended.remove(&op).unwrap_or((Lin::Unknown, None));
            appends.entry(acked_in.or(partition)).or_default().push(Append {
                invoked: at as u64,
                value,
                outcome,
            });
        }
        let anywhere = appends.remove(&None).unwrap_or_default();
        let mut found = Vec::new();
        let mut total = Sizes::default();
        for (p, records) in final_state {
            let start = records.first().map_or(0, |(o, _)| *o);
            let log = FinalLog {
                start,
                values: records.iter().map(|(_, v)| v.clone()).collect(),
            };
            let mut mine = appends.remove(&Some(*p)).unwrap_or_default();
            // Failed ones too: a failed append found in any partition is a violation.
            mine.extend(anywhere.iter().cloned());
            let (f, sizes) = check(&mine, reads.get(p).map_or(&[][..], Vec::as_slice), &log);
            found.extend(f.into_iter().map(|v| (*p, v)));
            total.appends += sizes.appends;
            total.acked += sizes.acked;
            total.reads += sizes.reads;
            total.offsets += sizes.offsets;
        }
        (found, total)
    }

    fn push(&self, e: Event) {
        self.inner.lock().unwrap().events.push(e);
    }

    pub fn events(&self) -> Vec<Event> {
        self.inner.lock().unwrap().events.clone()
    }

    /// Write the history as JSON lines (sessions first), for a post-mortem.
    pub fn dump(&self, path: &Path) -> std::io::Result<()> {
        use serde_json::json;
        use std::io::Write;
        let inner = self.inner.lock().unwrap();
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        for (i, s) in inner.sessions.iter().enumerate() {
            let line = json!({"session": i, "name": s.name, "idempotent": s.idempotent,
                "ordered": s.ordered, "real_time": s.real_time});
            writeln!(out, "{line}")?;
        }
        for e in &inner.events {
            let line = match e {
                Event::Invoke {
                    op,
                    client,
                    session,
                    partition,
                    value,
                } => json!({"invoke": op.0, "client": client, "session": session.map(|s| s.0),
                    "partition": partition, "value": value}),
                Event::Ack { op, partition, offset } => json!({"ack": op.0, "partition": partition, "offset": offset}),
                Event::Fail { op, why } => json!({"fail": op.0, "why": why}),
                Event::Indeterminate { op, why } => json!({"indeterminate": op.0, "why": why}),
                Event::Read {
                    client,
                    partition,
                    records,
                    high_watermark,
                    ..
                } => json!({"read": client, "partition": partition, "records": records,
                    "high_watermark": high_watermark}),
            };
            writeln!(out, "{line}")?;
        }
        out.flush()
    }

    /// Check the history against the final state.
    pub fn check(&self, final_state: &FinalState) -> Report {
        let inner = self.inner.lock().unwrap();
        check(&inner.events, &inner.sessions, final_state)
    }
}

/// One violation found by [`History::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anomaly {
    AckLost {
        partition: u32,
        offset: u64,
        value: String,
    },
    AckChanged {
        partition: u32,
        offset: u64,
        acked: String,
        found: String,
    },
    Conflict {
        partition: u32,
        offset: u64,
        /// Each value and who saw it there.
        values: Vec<(String, Vec<String>)>,
    },
    ReadLost {
        partition: u32,
        offset: u64,
        value: String,
        reader: String,
    },
    ReadPastHighWatermark {
        partition: u32,
        offset: u64,
        high_watermark: u64,
        reader: String,
    },
    ReadGap {
        partition: u32,
        after: u64,
        next: u64,
        reader: String,
    },
    Hole {
        partition: u32,
        expected: u64,
        found: u64,
    },
    Duplicate {
        value: String,
        at: Vec<(u32, u64)>,
        /// The idempotent session that sent it, if any.
        session: Option<String>,
    },
    FailedPresent {
        value: String,
        at: (u32, u64),
        why: String,
    },
    Phantom {
        partition: u32,
        offset: u64,
        value: String,
        seen_by: String,
    },
    Reordered {
        session: String,
        partition: u32,
        first: (u64, String),
        then: (u64, String),
    },
    RealTime {
        partition: u32,
        /// Acknowledged before `later` was invoked...
        earlier: (u64, String),
        /// ...yet at a lower offset.
        later: (u64, String),
    },
    Malformed(String),
}

impl Anomaly {
    pub fn kind(&self) -> &'static str {
        match self {
            Anomaly::AckLost { .. } => "ack-lost",
            Anomaly::AckChanged { .. } => "ack-changed",
            Anomaly::Conflict { .. } => "conflict",
            Anomaly::ReadLost { .. } => "read-lost",
            Anomaly::ReadPastHighWatermark { .. } => "read-past-high-watermark",
            Anomaly::ReadGap { .. } => "read-gap",
            Anomaly::Hole { .. } => "hole",
            Anomaly::Duplicate { .. } => "duplicate",
            Anomaly::FailedPresent { .. } => "failed-present",
            Anomaly::Phantom { .. } => "phantom",
            Anomaly::Reordered { .. } => "reordered",
            Anomaly::RealTime { .. } => "real-time",
            Anomaly::Malformed(_) => "malformed",
        }
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.kind())?;
        match self {
            Anomaly::AckLost {
                partition,
                offset,
                value,
            } => write!(
                f,
                "{value:?} acknowledged at {partition}@{offset}, which the final state lacks"
            ),
            Anomaly::AckChanged {
                partition,
                offset,
                acked,
                found,
            } => write!(
                f,
                "{acked:?} acknowledged at {partition}@{offset}, the final state has {found:?} there"
            ),
            Anomaly::Conflict {
                partition,
                offset,
                values,
            } => {
                write!(f, "{partition}@{offset} held")?;
                for (i, (v, who)) in values.iter().enumerate() {
                    let sep = if i == 0 { "" } else { " and" };
                    write!(f, "{sep} {v:?} (seen by {})", who.join(", "))?;
                }
                Ok(())
            }
            Anomaly::ReadLost {
                partition,
                offset,
                value,
                reader,
            } => write!(
                f,
                "{reader} read {value:?} at {partition}@{offset}, which the final state lacks"
            ),
            Anomaly::ReadPastHighWatermark {
                partition,
                offset,
                high_watermark,
                reader,
            } => write!(
                f,
                "{reader} got {partition}@{offset} with high watermark {high_watermark}"
            ),
            Anomaly::ReadGap {
                partition,
                after,
                next,
                reader,
            } => write!(f, "{reader} got {partition}@{after} then {partition}@{next}"),
            Anomaly::Hole {
                partition,
                expected,
                found,
            } => write!(f, "partition {partition} has offset {found} where {expected} was due"),
            Anomaly::Duplicate { value, at, session } => {
                let at: Vec<String> = at.iter().map(|(p, o)| format!("{p}@{o}")).collect();
                write!(f, "{value:?} stored at {}", at.join(", "))?;
                match session {
                    Some(s) => write!(f, " by idempotent session {s}"),
                    None => write!(f, " though sent once"),
                }
            }
            Anomaly::FailedPresent { value, at, why } => {
                write!(f, "{value:?} failed ({why}) yet is stored at {}@{}", at.0, at.1)
            }
            Anomaly::Phantom {
                partition,
                offset,
                value,
                seen_by,
            } => write!(
                f,
                "{value:?} at {partition}@{offset} (seen by {seen_by}) was never sent"
            ),
            Anomaly::Reordered {
                session,
                partition,
                first,
                then,
            } => write!(
                f,
                "session {session} sent {:?} before {:?}, partition {partition} holds them at {} and {}",
                first.1, then.1, first.0, then.0
            ),
            Anomaly::RealTime {
                partition,
                earlier,
                later,
            } => write!(
                f,
                "{:?} acknowledged at {partition}@{} before {:?} was sent, which got {partition}@{}",
                earlier.1, earlier.0, later.1, later.0
            ),
            Anomaly::Malformed(m) => write!(f, "{m}"),
        }
    }
}

/// Counts, for the summary of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub invoked: u64,
    pub acked: u64,
    pub failed: u64,
    /// Including ops that never got an outcome.
    pub indeterminate: u64,
    /// Indeterminate ops whose record is in the final state.
    pub indeterminate_stored: u64,
    /// The same, by the reason's class: its text up to the first `:`
    /// (say `503` or `timeout`). Says which failures are in fact determinate.
    pub indeterminate_stored_by: BTreeMap<String, u64>,
    pub reads: u64,
    pub records_read: u64,
    pub final_records: u64,
    /// Values stored more than once, legitimately: the client sent them more
    /// than once outside an idempotent session.
    pub allowed_duplicates: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub anomalies: Vec<Anomaly>,
    pub stats: Stats,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.anomalies.is_empty()
    }

    pub fn of_kind(&self, kind: &str) -> Vec<&Anomaly> {
        self.anomalies.iter().filter(|a| a.kind() == kind).collect()
    }

    /// Anomaly counts by kind.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut out = BTreeMap::new();
        for a in &self.anomalies {
            *out.entry(a.kind()).or_default() += 1;
        }
        out
    }
}

impl fmt::Display for Report {
    /// The stats, then at most 20 anomalies of each kind.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        writeln!(
            f,
            "{} appends invoked: {} acknowledged, {} failed, {} indeterminate ({} of them stored); \
             {} reads returned {} records; the final state holds {} records; {} allowed duplicates",
            s.invoked,
            s.acked,
            s.failed,
            s.indeterminate,
            s.indeterminate_stored,
            s.reads,
            s.records_read,
            s.final_records,
            s.allowed_duplicates
        )?;
        if !s.indeterminate_stored_by.is_empty() {
            writeln!(
                f,
                "indeterminate and stored, by reason: {:?}",
                s.indeterminate_stored_by
            )?;
        }
        if self.anomalies.is_empty() {
            return writeln!(f, "no anomalies");
        }
        writeln!(f, "{} anomalies: {:?}", self.anomalies.len(), self.counts())?;
        let mut shown: HashMap<&str, usize> = HashMap::new();
        for a in &self.anomalies {
            let n = shown.entry(a.kind()).or_default();
            *n += 1;
            if *n <= 20 {
                writeln!(f, "  {a}")?;
            } else if *n == 21 {
                writeln!(f, "  ... more {}", a.kind())?;
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
struct Op {
    client: String,
    session: Option<SessionId>,
    partition: Option<u32>,
    value: String,
    invoked_at: usize,
    outcome: Option<(Outcome, usize)>,
}

#[derive(Debug, Clone)]
enum Outcome {
    Acked(u32, u64),
    Failed(String),
    Indeterminate(String),
}

/// Who saw one value at one place: the first few, and how many in all
/// (a long run has millions of observations).
#[derive(Debug, Default)]
struct Witnesses {
    first: Vec<String>,
    count: u64,
}

impl Witnesses {
    fn add(&mut self, who: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.len() < 3 {
            self.first.push(who());
        }
    }

    fn names(&self) -> Vec<String> {
        let mut out = self.first.clone();
        if self.count > out.len() as u64 {
            out.push(format!("{} more", self.count - out.len() as u64));
        }
        out
    }
}

fn check(events: &[Event], sessions: &[Session], final_state: &FinalState) -> Report {
    let mut out = Vec::new();
    let mut stats = Stats::default();

    // Ops, from their invocations and outcomes.
    let mut ops: BTreeMap<OpId, Op> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let (op, outcome) = match e {
            Event::Invoke {
                op,
                client,
                session,
                partition,
                value,
            } => {
                if session.is_some_and(|s| s.0 >= sessions.len()) {
                    out.push(Anomaly::Malformed(format!("op {} names an unknown session", op.0)));
                }
                ops.insert(
                    *op,
                    Op {
                        client: client.clone(),
                        session: *session,
                        partition: *partition,
                        value: value.clone(),
                        invoked_at: i,
                        outcome: None,
                    },
                );
                continue;
            }
            Event::Ack { op, partition, offset } => (op, Outcome::Acked(*partition, *offset)),
            Event::Fail { op, why } => (op, Outcome::Failed(why.clone())),
            Event::Indeterminate { op, why } => (op, Outcome::Indeterminate(why.clone())),
            Event::Read { .. } => continue,
        };
        match ops.get_mut(op) {
            None => out.push(Anomaly::Malformed(format!("an outcome for op {}, never invoked", op.0))),
            Some(o) if o.outcome.is_some() => out.push(Anomaly::Malformed(format!(
                "op {} ({:?}) has two outcomes",
                op.0, o.value
            ))),
            Some(o) => {
                if let (Outcome::Acked(p, _), Some(asked)) = (&outcome, o.partition) {
                    if *p != asked {
                        out.push(Anomaly::Malformed(format!(
                            "op {} ({:?}) asked for partition {asked}, acknowledged on {p}",
                            op.0, o.value
                        )));
                    }
                }
                o.outcome = Some((outcome, i));
            }
        }
    }
    let mut by_value: HashMap<&str, Vec<OpId>> = HashMap::new();
    for (id, op) in &ops {
        by_value.entry(op.value.as_str()).or_default().push(*id);
    }
    let session_of = |s: Option<SessionId>| s.and_then(|s| sessions.get(s.0));

    // The final state, indexed; holes.
    let mut final_at: HashMap<(u32, u64), &str> = HashMap::new();
    let mut final_where: HashMap<&str, Vec<(u32, u64)>> = HashMap::new();
    for (p, records) in final_state {
        let mut expected = 0u64;
        let mut reported = false;
        for (o, v) in records {
            if *o != expected && !reported {
                out.push(Anomaly::Hole {
                    partition: *p,
                    expected,
                    found: *o,
                });
                reported = true;
            }
            expected = o + 1;
            stats.final_records += 1;
            if let Some(prev) = final_at.insert((*p, *o), v.as_str()) {
                out.push(Anomaly::Conflict {
                    partition: *p,
                    offset: *o,
                    values: vec![
                        (prev.to_string(), vec!["the final read".into()]),
                        (v.clone(), vec!["the final read".into()]),
                    ],
                });
            }
            final_where.entry(v.as_str()).or_default().push((*p, *o));
        }
    }

    // Everything anyone saw at each (partition, offset), and who saw it.
    let mut seen: BTreeMap<(u32, u64), BTreeMap<&str, Witnesses>> = BTreeMap::new();
    for ((p, o), v) in &final_at {
        seen.entry((*p, *o))
            .or_default()
            .entry(v)
            .or_default()
            .add(|| "the final read".into());
    }

    // Acknowledged records are in the final state, unchanged.
    for op in ops.values() {
        match &op.outcome {
            Some((Outcome::Acked(p, o), _)) => {
                stats.acked += 1;
                seen.entry((*p, *o))
                    .or_default()
                    .entry(&op.value)
                    .or_default()
                    .add(|| format!("the ack to {}", op.client));
                match final_at.get(&(*p, *o)) {
                    None => out.push(Anomaly::AckLost {
                        partition: *p,
                        offset: *o,
                        value: op.value.clone(),
                    }),
                    Some(f) if *f != op.value => out.push(Anomaly::AckChanged {
                        partition: *p,
                        offset: *o,
                        acked: op.value.clone(),
                        found: f.to_string(),
                    }),
                    Some(_) => {}
                }
            }
            Some((Outcome::Failed(why), _)) => {
                stats.failed += 1;
                if let Some(at) = final_where.get(op.value.as_str()) {
                    out.push(Anomaly::FailedPresent {
                        value: op.value.clone(),
                        at: at[0],
                        why: why.clone(),
                    });
                }
            }
            Some((Outcome::Indeterminate(_), _)) | None => {
                stats.indeterminate += 1;
                if final_where.contains_key(op.value.as_str()) {
                    stats.indeterminate_stored += 1;
                    let why = match &op.outcome {
                        Some((Outcome::Indeterminate(why), _)) => why.split(':').next().unwrap_or("").trim(),
                        _ => "no outcome",
                    };
                    *stats.indeterminate_stored_by.entry(why.to_string()).or_default() += 1;
                }
            }
        }
    }
    stats.invoked = ops.len() as u64;

    // Reads: below their high watermark, consecutive, and never lost.
    let mut reads_seen = 0usize;
    for e in events {
        let Event::Read {
            client,
            partition,
            records,
            high_watermark,
            ..
        } = e
        else {
            continue;
        };
        reads_seen += 1;
        stats.reads += 1;
        stats.records_read += records.len() as u64;
        let reader = format!("{client} (read #{reads_seen})");
        for (i, (o, v)) in records.iter().enumerate() {
            if let Some(hw) = high_watermark {
                if o >= hw {
                    out.push(Anomaly::ReadPastHighWatermark {
                        partition: *partition,
                        offset: *o,
                        high_watermark: *hw,
                        reader: reader.clone(),
                    });
                }
            }
            if i > 0 && records[i - 1].0 + 1 != *o {
                out.push(Anomaly::ReadGap {
                    partition: *partition,
                    after: records[i - 1].0,
                    next: *o,
                    reader: reader.clone(),
                });
            }
            seen.entry((*partition, *o))
                .or_default()
                .entry(v)
                .or_default()
                .add(|| reader.clone());
            if !final_at.contains_key(&(*partition, *o)) {
                out.push(Anomaly::ReadLost {
                    partition: *partition,
                    offset: *o,
                    value: v.clone(),
                    reader: reader.clone(),
                });
            }
        }
    }

    // One record per offset; every record was sent by someone.
    for ((p, o), values) in &seen {
        if values.len() > 1 {
            out.push(Anomaly::Conflict {
                partition: *p,
                offset: *o,
                values: values.iter().map(|(v, who)| (v.to_string(), who.names())).collect(),
            });
        }
        for (v, who) in values {
            if !by_value.contains_key(v) {
                out.push(Anomaly::Phantom {
                    partition: *p,
                    offset: *o,
                    value: v.to_string(),
                    seen_by: who.names().join(", "),
                });
            }
        }
    }

    // Duplicates: a value stored more often than it was sent, or twice by an
    // idempotent session.
    let mut dups: Vec<_> = final_where.iter().filter(|(_, at)| at.len() > 1).collect();
    dups.sort();
    for (v, at) in dups {
        let Some(ids) = by_value.get(v) else { continue };
        let idempotent = ids
            .iter()
            .find_map(|id| session_of(ops[id].session).filter(|s| s.idempotent));
        if let Some(s) = idempotent {
            out.push(Anomaly::Duplicate {
                value: v.to_string(),
                at: at.clone(),
                session: Some(s.name.clone()),
            });
        } else if at.len() > ids.len() {
            out.push(Anomaly::Duplicate {
                value: v.to_string(),
                at: at.clone(),
                session: None,
            });
        } else {
            stats.allowed_duplicates += 1;
        }
    }

    // Ordered sessions: per partition, the final offsets follow invocation order.
    for (si, s) in sessions.iter().enumerate() {
        if !s.ordered {
            continue;
        }
        let mut per_partition: BTreeMap<u32, Vec<(usize, u64, &str)>> = BTreeMap::new();
        for op in ops.values().filter(|o| o.session == Some(SessionId(si))) {
            if let Some(at) = final_where.get(op.value.as_str()) {
                let (p, o) = at[0];
                per_partition.entry(p).or_default().push((op.invoked_at, o, &op.value));
            }
        }
        for (p, mut stored) in per_partition {
            stored.sort();
            if let Some(w) = stored.windows(2).find(|w| w[0].1 > w[1].1) {
                out.push(Anomaly::Reordered {
                    session: s.name.clone(),
                    partition: p,
                    first: (w[0].1, w[0].2.to_string()),
                    then: (w[1].1, w[1].2.to_string()),
                });
            }
        }
    }

    // Real time: an append invoked after another was acknowledged, on the
    // same partition, lands above it. Per partition, over the acknowledged
    // ops in offset order: the earliest acknowledgement among higher offsets
    // must not precede this op's invocation.
    let mut acked: BTreeMap<u32, Vec<(u64, usize, usize, &str)>> = BTreeMap::new();
    for op in ops.values() {
        if session_of(op.session).is_some_and(|s| !s.real_time) {
            continue;
        }
        if let Some((Outcome::Acked(p, o), acked_at)) = &op.outcome {
            acked
                .entry(*p)
                .or_default()
                .push((*o, op.invoked_at, *acked_at, &op.value));
        }
    }
    for (p, mut list) in acked {
        list.sort();
        // (earliest ack index, its op) among list[i+1..].
        let mut earliest: Option<(usize, usize)> = None;
        for i in (0..list.len()).rev() {
            let (o, invoked_at, _, v) = list[i];
            if let Some((ack_at, j)) = earliest {
                if ack_at < invoked_at && list[j].0 > o {
                    out.push(Anomaly::RealTime {
                        partition: p,
                        earlier: (list[j].0, list[j].3.to_string()),
                        later: (o, v.to_string()),
                    });
                }
            }
            if earliest.is_none_or(|(a, _)| list[i].2 < a) {
                earliest = Some((list[i].2, i));
            }
        }
    }
    Report { anomalies: out, stats }
}
