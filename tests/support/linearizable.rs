//! A linearizability checker for one log (a stream): appends that return
//! the offset they were given, reads that return records from an offset
//! and the high watermark they were served at, each with the instants it
//! was invoked and completed on one real-time clock (nanoseconds, or a
//! logical counter in the simulation).
//!
//! The model: a log, where an append puts its value at the end and a read
//! returns the prefix up to the end. A history is linearizable when each
//! operation can be given a point inside its interval such that, in point
//! order, the appends build the final log offset by offset and every read
//! sees exactly the first `high_watermark` records.
//!
//! The search, and why it is exact. Values are unique, so the final log
//! says which append made each offset: the appends' order is fixed, and
//! only their points (p(o) for offset o) and the reads' points are free.
//! The constraints are: p(o) after the invocation of o's append and before
//! its acknowledgement; p(o-1) < p(o); a read with high watermark h
//! somewhere after p(h-1) and before p(h), inside its own interval. Every
//! lower bound is a non-decreasing function of earlier points, so giving
//! each point the least value its lower bounds allow (the least fixpoint,
//! one pass in offset order) yields a solution whenever one exists: it
//! only makes the upper bounds easier to meet. A history is therefore
//! linearizable exactly when that earliest assignment meets every upper
//! bound, which is checked in time linear in the history (no Wing–Gong
//! backtracking is needed for a log). Points are (instant, k): k
//! infinitesimal steps after the instant, so that several points fit
//! between two events and "strictly after" is exact.
//!
//! Besides the search, the plain facts: an acknowledged append is in the
//! final log at its offset; a read's records are the final log's values at
//! their offsets, contiguous from where it read, below its high watermark;
//! no read reports a high watermark past the final log's end.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// An instant on the history's real-time clock.
pub type Tick = u64;

/// How an append ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged at `offset` at `completed`.
    Acked { offset: u64, completed: Tick },
    /// Failed or timed out in a way that may still have stored it.
    Unknown,
    /// Certainly not stored.
    Failed,
}

#[derive(Debug, Clone)]
pub struct Append {
    pub invoked: Tick,
    pub value: String,
    pub outcome: Outcome,
}

#[derive(Debug, Clone)]
pub struct Read {
    pub who: String,
    pub invoked: Tick,
    pub completed: Tick,
    /// Where the records start (the first record's offset, or the offset
    /// asked for).
    pub from: u64,
    pub records: Vec<(u64, String)>,
    pub high_watermark: u64,
}

/// The log at the end: values from offset `start` on.
#[derive(Debug, Clone, Default)]
pub struct FinalLog {
    pub start: u64,
    pub values: Vec<String>,
}

impl FinalLog {
    fn end(&self) -> u64 {
        self.start + self.values.len() as u64
    }

    fn at(&self, offset: u64) -> Option<&String> {
        offset
            .checked_sub(self.start)
            .and_then(|i| self.values.get(usize::try_from(i).ok()?))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    AckLost {
        offset: u64,
        value: String,
    },
    FailedStored {
        offset: u64,
        value: String,
    },
    ReadWrongValue {
        who: String,
        offset: u64,
        read: String,
        log: Option<String>,
    },
    ReadShape {
        who: String,
        detail: String,
    },
    ReadPastEnd {
        who: String,
        high_watermark: u64,
        end: u64,
    },
    /// No linearization: the detail names the operations that cannot be
    /// ordered.
    NotLinearizable {
        offset: u64,
        detail: String,
    },
}

impl Violation {
    pub fn kind(&self) -> &'static str {
        match self {
            Violation::AckLost { .. } => "ack-lost",
            Violation::FailedStored { .. } => "failed-stored",
            Violation::ReadWrongValue { .. } => "read-wrong-value",
            Violation::ReadShape { .. } => "read-shape",
            Violation::ReadPastEnd { .. } => "read-past-end",
            Violation::NotLinearizable { .. } => "not-linearizable",
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::AckLost { offset, value } => write!(f, "acknowledged {value:?} at {offset} is not there"),
            Violation::FailedStored { offset, value } => write!(f, "{value:?}, refused, is stored at {offset}"),
            Violation::ReadWrongValue { who, offset, read, log } => {
                write!(f, "{who} read {read:?} at {offset}; the log holds {log:?} there")
            }
            Violation::ReadShape { who, detail } => write!(f, "{who}: {detail}"),
            Violation::ReadPastEnd {
                who,
                high_watermark,
                end,
            } => write!(f, "{who} was told the end is {high_watermark}; the log ends at {end}"),
            Violation::NotLinearizable { offset, detail } => write!(f, "not linearizable at offset {offset}: {detail}"),
        }
    }
}

/// A point: `k` infinitesimal steps after instant `t` (k may be negative).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Point(Tick, i64);

impl Point {
    fn after(self) -> Self {
        Point(self.0, self.1 + 1)
    }
}

/// What a check covered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sizes {
    pub appends: usize,
    pub acked: usize,
    pub reads: usize,
    pub offsets: u64,
}

/// Check one stream's history against its final log.
pub fn check(appends: &[Append], reads: &[Read], log: &FinalLog) -> (Vec<Violation>, Sizes) {
    let mut found = Vec::new();
    let sizes = Sizes {
        appends: appends.len(),
        acked: appends
            .iter()
            .filter(|a| matches!(a.outcome, Outcome::Acked { .. }))
            .count(),
        reads: reads.len(),
        offsets: log.end(),
    };
    let at: HashMap<&str, u64> = log
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| (v.as_str(), log.start + i as u64))
        .collect();
    // Each offset's append interval: (invoked, acknowledged).
    let mut interval: BTreeMap<u64, (Tick, Option<Tick>)> = BTreeMap::new();
    for a in appends {
        let stored = at.get(a.value.as_str()).copied();
        match (&a.outcome, stored) {
            (Outcome::Acked { offset, completed }, Some(o)) if o == *offset => {
                interval.insert(o, (a.invoked, Some(*completed)));
            }
            (Outcome::Acked { offset, .. }, _) if *offset < log.start => {}
            (Outcome::Acked { offset, .. }, _) => found.push(Violation::AckLost {
                offset: *offset,
                value: a.value.clone(),
            }),
            (Outcome::Failed, Some(o)) => found.push(Violation::FailedStored {
                offset: o,
                value: a.value.clone(),
            }),
            (Outcome::Unknown, Some(o)) => {
                interval.insert(o, (a.invoked, None));
            }
            (_, None) => {}
        }
    }
    // The plain facts about each read, and the reads by high watermark.
    let mut by_end: BTreeMap<u64, Vec<&Read>> = BTreeMap::new();
    for r in reads {
        if r.high_watermark > log.end() {
            found.push(Violation::ReadPastEnd {
                who: r.who.clone(),
                high_watermark: r.high_watermark,
                end: log.end(),
            });
            continue;
        }
        let mut next = r.from;
        for (o, v) in &r.records {
            if *o != next || *o >= r.high_watermark {
                found.push(Violation::ReadShape {
                    who: r.who.clone(),
                    detail: format!(
                        "record at {o} where {next} was due, high watermark {}",
                        r.high_watermark
                    ),
                });
                break;
            }
            next = o + 1;
            if *o >= log.start && log.at(*o) != Some(v) {
                found.push(Violation::ReadWrongValue {
                    who: r.who.clone(),
                    offset: *o,
                    read: v.clone(),
                    log: log.at(*o).cloned(),
                });
            }
        }
        by_end.entry(r.high_watermark).or_default().push(r);
    }
    // The earliest linearization, offset by offset.
    let never = Point(0, i64::MIN / 2);
    let mut previous = never; // p(o - 1)
    let describe_read = |r: &Read| {
        format!(
            "{} read [{}..{}] and saw the end at {}",
            r.who, r.invoked, r.completed, r.high_watermark
        )
    };
    // A read that sees the end at h sits after p(h - 1): its earliest point.
    let read_point = |r: &Read, previous: Point| Point(r.invoked, 1).max(previous.after());
    for o in 0..log.end() {
        for r in by_end.get(&o).into_iter().flatten() {
            let t = read_point(r, previous);
            if t > Point(r.completed, -1) {
                found.push(Violation::NotLinearizable {
                    offset: o,
                    detail: format!(
                        "{}, but offset {} cannot take effect before the read completed",
                        describe_read(r),
                        o.saturating_sub(1)
                    ),
                });
            }
        }
        let (invoked, acked) = interval.get(&o).copied().unwrap_or((0, None));
        let mut p = Point(invoked, 1).max(previous.after());
        let mut why = format!("its append was invoked at {invoked}");
        for r in by_end.get(&o).into_iter().flatten() {
            let t = read_point(r, previous).after();
            if t > p {
                p = t;
                why = format!("{} (without it)", describe_read(r));
            }
        }
        if let Some(acked) = acked {
            if p > Point(acked, -1) {
                found.push(Violation::NotLinearizable {
                    offset: o,
                    detail: format!("acknowledged at {acked}, yet it must take effect later: {why}"),
                });
            }
        }
        previous = p;
    }
    // Reads that saw the whole final log sit after its last point.
    for r in by_end.get(&log.end()).into_iter().flatten() {
        if read_point(r, previous) > Point(r.completed, -1) {
            found.push(Violation::NotLinearizable {
                offset: log.end(),
                detail: format!("{}, before the last record could take effect", describe_read(r)),
            });
        }
    }
    (found, sizes)
}
