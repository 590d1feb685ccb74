//! What the clients of the compacted topic observed, and the checks on the
//! final state: compaction may remove a record only when a later record of
//! the same key is there, each key is at most once in the compacted part,
//! an offset never holds two records, and no value is written twice.
//!
//! Tombstones keep their key in the simulation (its `delete.retention.ms`
//! outlasts the run), so the latest record of every key is always present:
//! an acknowledged record that is gone with no later record of its key
//! after it is lost.

use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};

/// One keyed record as the checker sees it: its key, and its value (`None`
/// for a tombstone; the simulation's values are unique).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

impl Kv {
    fn show(&self) -> String {
        let v = self
            .value
            .as_ref()
            .map_or("<tombstone>".into(), |v| format!("{:?}", String::from_utf8_lossy(v)));
        format!("{:?}={v}", String::from_utf8_lossy(&self.key))
    }
}

#[derive(Debug, Default)]
pub struct KvHistory {
    /// Every record an acknowledgement or a read put at (partition, offset),
    /// with who saw it first; a different record there later is invariant 2
    /// broken.
    pub seen: HashMap<(u32, u64), (Kv, String)>,
    /// Acknowledged records: (partition, offset).
    pub acked: Vec<(u32, u64)>,
    /// Highest end offset known per partition (to aim reads).
    pub known_end: BTreeMap<u32, u64>,
}

impl KvHistory {
    /// Note `kv` at `partition@offset`: a violation if another record was
    /// seen there.
    pub fn note(&mut self, partition: u32, offset: u64, kv: &Kv, who: &str) -> Option<String> {
        let end = self.known_end.entry(partition).or_default();
        *end = (*end).max(offset + 1);
        match self.seen.get(&(partition, offset)) {
            Some((old, first)) if old != kv => Some(format!(
                "invariant 2 (offsets immutable): compacted {partition}@{offset} held {} ({first}) and then {} ({who})",
                old.show(),
                kv.show()
            )),
            Some(_) => None,
            None => {
                self.seen.insert((partition, offset), (kv.clone(), who.to_string()));
                None
            }
        }
    }

    pub fn ack(&mut self, partition: u32, offset: u64, kv: &Kv, who: &str) -> Option<String> {
        self.acked.push((partition, offset));
        self.note(partition, offset, kv, who)
    }
}

/// The final state of one compacted partition: its records by offset, and
/// where its compacted part ends.
#[derive(Debug, Default)]
pub struct KvPartition {
    pub records: BTreeMap<u64, Kv>,
    pub compacted_end: u64,
}

/// Check the final state of the compacted partitions against the history.
/// Partitions missing from `finals` are not checked.
pub fn check_final_kv(history: &KvHistory, finals: &BTreeMap<u32, KvPartition>) -> Vec<String> {
    let mut out = Vec::new();
    // The highest offset of each key in each partition's final state.
    let mut latest: HashMap<(u32, &Bytes), u64> = HashMap::new();
    for (p, part) in finals {
        for (o, kv) in &part.records {
            let l = latest.entry((*p, &kv.key)).or_default();
            *l = (*l).max(*o);
        }
    }
    let acked: std::collections::HashSet<&(u32, u64)> = history.acked.iter().collect();
    let mut seen: Vec<_> = history.seen.iter().collect();
    seen.sort_by_key(|(k, _)| **k);
    let mut bad = 0;
    for ((p, o), (kv, who)) in seen {
        let Some(part) = finals.get(p) else { continue };
        let problem = match part.records.get(o) {
            Some(f) if f == kv => None,
            Some(f) => Some(format!(
                "invariant 2 (offsets immutable): {who} saw compacted {p}@{o} = {}, the final state has {}",
                kv.show(),
                f.show()
            )),
            None if latest.get(&(*p, &kv.key)).is_some_and(|l| l > o) => None,
            None => Some(format!(
                "{}: compacted {p}@{o} = {} ({who}) is gone and no later record of its key is there",
                if acked.contains(&(*p, *o)) {
                    "invariant 1 (no acknowledged record lost; the latest of a key survives compaction)"
                } else {
                    "invariant 3 (reads see only durable data; the latest of a key survives compaction)"
                },
                kv.show()
            )),
        };
        if let Some(problem) = problem {
            bad += 1;
            if bad <= 10 {
                out.push(problem);
            }
        }
    }
    if bad > 10 {
        out.push(format!(
            "compacted partitions: ... {bad} records lost or changed in all"
        ));
    }
    let mut values: HashMap<&Bytes, (u32, u64)> = HashMap::new();
    for (p, part) in finals {
        let mut keys: HashMap<&Bytes, u64> = HashMap::new();
        for (o, kv) in part.records.range(..part.compacted_end) {
            if let Some(o0) = keys.insert(&kv.key, *o) {
                out.push(format!(
                    "compaction kept {} twice in partition {p}'s compacted part (below {}): at {o0} and {o}",
                    kv.show(),
                    part.compacted_end
                ));
            }
        }
        for (o, kv) in &part.records {
            if let Some(v) = &kv.value {
                if let Some((p0, o0)) = values.insert(v, (*p, *o)) {
                    out.push(format!(
                        "duplicate: {} is at compacted {p0}@{o0} and at {p}@{o}",
                        kv.show()
                    ));
                }
            }
        }
    }
    out
}
