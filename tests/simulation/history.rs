//! What the clients of the simulation observed, and the invariant checks on it.

use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};

/// The value a control record (a transaction marker) is noted as, in the
/// history and the final state: producers never write it.
pub const MARKER: &[u8] = b"<control record>";

/// Where a value at an offset was first observed.
#[derive(Debug, Clone)]
pub struct Origin {
    pub what: String,
    pub at_ms: u64,
}

#[derive(Debug, Default)]
pub struct History {
    /// Every value any acknowledgement or read put at (partition, offset).
    /// A second, different value at the same place is invariant 2 broken.
    pub seen: HashMap<(u32, u64), (Bytes, Origin)>,
    /// Every acknowledged record: (partition, offset, value).
    pub acked: Vec<(u32, u64, Bytes)>,
    /// Highest end offset known per partition (to aim reads).
    pub known_end: BTreeMap<u32, u64>,
    /// Invariant violations found while running.
    pub violations: Vec<String>,
}

impl History {
    /// Note `value` at `partition@offset`; a different earlier value there is a violation.
    pub fn note(&mut self, partition: u32, offset: u64, value: &Bytes, origin: Origin) {
        let end = self.known_end.entry(partition).or_default();
        *end = (*end).max(offset + 1);
        match self.seen.get(&(partition, offset)) {
            Some((old, first)) if old != value => {
                let v = format!(
                    "invariant 2 (offsets immutable): {partition}@{offset} held {} ({} at {} ms) and then {} ({} at {} ms)",
                    show(old),
                    first.what,
                    first.at_ms,
                    show(value),
                    origin.what,
                    origin.at_ms
                );
                self.violations.push(v);
            }
            Some(_) => {}
            None => {
                self.seen.insert((partition, offset), (value.clone(), origin));
            }
        }
    }

    pub fn ack(&mut self, partition: u32, offset: u64, value: Bytes, origin: Origin) {
        self.note(partition, offset, &value, origin);
        self.acked.push((partition, offset, value));
    }
}

pub fn show(b: &Bytes) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

/// Check the final state (`final_state[p][o]` = value at offset `o`) against
/// the history. Partitions missing from `final_state` (not readable after a
/// hang) are not checked. Returns every violation.
pub fn check_final(history: &History, final_state: &BTreeMap<u32, Vec<Bytes>>) -> Vec<String> {
    let mut out = Vec::new();
    let at = |p: u32, o: u64| final_state.get(&p).map(|values| values.get(o as usize));
    // Invariant 1: every acknowledged record is there, unchanged.
    let mut lost = 0;
    for (p, o, v) in &history.acked {
        let Some(final_value) = at(*p, *o) else { continue };
        match final_value {
            Some(f) if f == v => {}
            other => {
                lost += 1;
                if lost <= 10 {
                    out.push(format!(
                        "invariant 1 (no acknowledged record lost): acked {p}@{o} = {} but the final state has {}",
                        show(v),
                        other.map_or("nothing".to_string(), show)
                    ));
                }
            }
        }
    }
    if lost > 10 {
        out.push(format!(
            "invariant 1: ... {lost} acknowledged records lost or changed in all"
        ));
    }
    // Invariants 2 and 3: whatever any reader saw is in the final state.
    let mut bad = 0;
    let mut seen: Vec<_> = history.seen.iter().collect();
    seen.sort_by_key(|(k, _)| **k);
    for ((p, o), (v, origin)) in seen {
        let Some(final_value) = at(*p, *o) else { continue };
        match final_value {
            Some(f) if f == v => {}
            other => {
                bad += 1;
                if bad <= 10 {
                    out.push(format!(
                        "invariant 3 (reads see only durable data): {} saw {p}@{o} = {} at {} ms, the final state has {}",
                        origin.what,
                        show(v),
                        origin.at_ms,
                        other.map_or("nothing".to_string(), show)
                    ));
                }
            }
        }
    }
    if bad > 10 {
        out.push(format!(
            "invariant 3: ... {bad} observed records not in the final state in all"
        ));
    }
    // Every value once: producers never send a value twice.
    let mut where_: HashMap<&Bytes, (u32, usize)> = HashMap::new();
    for (p, values) in final_state {
        for (o, v) in values.iter().enumerate().filter(|(_, v)| v.as_ref() != MARKER) {
            if let Some((p0, o0)) = where_.insert(v, (*p, o)) {
                out.push(format!(
                    "duplicate: {} is at {p0}@{o0} and at {p}@{o} in the final state",
                    show(v)
                ));
            }
        }
    }
    out
}
