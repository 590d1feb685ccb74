//! What the transactional clients of the simulation did and saw, and the
//! checks on it: atomicity (a transaction's records are visible to
//! read_committed readers in all its partitions or in none), no aborted
//! record ever visible to them, the last stable offset never moving
//! backwards, and committed reads agreeing with the log.

use super::history::show;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// How a transaction ended, as far as its producer knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Still running (or its end not yet answered).
    Open,
    /// EndTxn(commit) answered without error.
    Committed,
    /// EndTxn(abort) was sent, or the producer never sent EndTxn(commit)
    /// and a later InitProducerId succeeded (which aborts it), or a
    /// read_committed reader can never have seen it.
    Aborted,
    /// EndTxn(commit) was sent and its answer was an error or never came.
    Unknown,
}

#[derive(Debug)]
pub struct Txn {
    /// `t<producer>-<n>`, also the prefix of each of its values.
    pub name: String,
    pub outcome: Outcome,
    /// Partitions the transaction added.
    pub partitions: BTreeSet<u32>,
}

/// A committed read's record, as noted: where a reader saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub partition: u32,
    pub offset: u64,
    pub value: Bytes,
    pub who: String,
    pub at_ms: u64,
}

#[derive(Debug, Default)]
pub struct TxnHistory {
    pub txns: Vec<Txn>,
    by_name: HashMap<String, usize>,
    /// Every record a read_committed reader saw.
    pub committed_seen: Vec<Seen>,
    /// Per partition, the highest last stable offset a read reported that
    /// completed (see [`TxnHistory::lso_floor`]).
    lso_floor: BTreeMap<u32, u64>,
}

/// The transaction a value belongs to: values of transactional records are
/// `<seed>-t<producer>-<n>-<k>`.
pub fn txn_of(value: &Bytes) -> Option<String> {
    let s = std::str::from_utf8(value).ok()?;
    let mut parts = s.split('-');
    let (_seed, t, n) = (parts.next()?, parts.next()?, parts.next()?);
    let numbered = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    let producer = t.strip_prefix('t').filter(|i| numbered(i))?;
    (numbered(n) && parts.next().is_some()).then(|| format!("t{producer}-{n}"))
}

impl TxnHistory {
    pub fn begin(&mut self, name: String) {
        self.by_name.insert(name.clone(), self.txns.len());
        self.txns.push(Txn {
            name,
            outcome: Outcome::Open,
            partitions: BTreeSet::new(),
        });
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Txn> {
        self.by_name.get(name).map(|&i| &mut self.txns[i])
    }

    pub fn outcome(&self, name: &str) -> Option<Outcome> {
        self.by_name.get(name).map(|&i| self.txns[i].outcome)
    }

    /// The floor a read starting now must not go below.
    pub fn lso_floor(&self, partition: u32) -> u64 {
        self.lso_floor.get(&partition).copied().unwrap_or(0)
    }

    /// A read that started when the floor was `floor` reported `lso`:
    /// `Err` when it went backwards; the floor rises for later reads.
    pub fn note_lso(&mut self, partition: u32, floor: u64, lso: u64) -> Result<(), String> {
        let f = self.lso_floor.entry(partition).or_default();
        *f = (*f).max(lso);
        if lso < floor {
            return Err(format!(
                "the last stable offset of partition {partition} moved backwards: {lso} after a read that completed earlier reported {floor}"
            ));
        }
        Ok(())
    }

    /// A record a read_committed reader saw: `Err` if its transaction is
    /// known to be aborted.
    pub fn note_committed(&mut self, seen: Seen) -> Result<(), String> {
        if let Some(name) = txn_of(&seen.value) {
            if self.outcome(&name) == Some(Outcome::Aborted) {
                return Err(format!(
                    "read_committed: {} saw {}@{} = {} of the aborted transaction {name} at {} ms",
                    seen.who,
                    seen.partition,
                    seen.offset,
                    show(&seen.value),
                    seen.at_ms
                ));
            }
        }
        self.committed_seen.push(seen);
        Ok(())
    }
}

/// Check the committed final state (`committed[p]`: (offset, value) of every
/// record a read_committed read from the start returned) against the log's
/// final state (`log[p][o]`, control records included as
/// [`MARKER`](super::history::MARKER)) and the history.
pub fn check_final_txns(
    history: &TxnHistory,
    log: &BTreeMap<u32, Vec<Bytes>>,
    committed: &BTreeMap<u32, Vec<(u64, Bytes)>>,
    is_marker: impl Fn(&Bytes) -> bool,
) -> (Vec<String>, BTreeMap<String, u64>) {
    let mut out = Vec::new();
    let mut bad = 0;
    let mut push = |out: &mut Vec<String>, v: String| {
        bad += 1;
        if bad <= 20 {
            out.push(v);
        }
    };
    // Committed reads return the log's records, in order, markers never.
    let mut visible: HashMap<(u32, u64), &Bytes> = HashMap::new();
    for (p, records) in committed {
        let mut last = None;
        for (o, v) in records {
            if last.is_some_and(|l| l >= *o) {
                push(
                    &mut out,
                    format!("read_committed: partition {p} returned {o} after {last:?}"),
                );
            }
            last = Some(*o);
            match log.get(p).and_then(|l| l.get(*o as usize)) {
                Some(f) if f == v && !is_marker(v) => {}
                other => push(
                    &mut out,
                    format!(
                        "read_committed: {p}@{o} = {} but the log has {}",
                        show(v),
                        other.map_or("nothing".into(), show)
                    ),
                ),
            }
            visible.insert((*p, *o), v);
        }
    }
    // Per transaction: its records in the log, and those committed reads show.
    let mut in_log: HashMap<String, Vec<(u32, u64)>> = HashMap::new();
    for (p, values) in log {
        for (o, v) in values.iter().enumerate() {
            let o = o as u64;
            if is_marker(v) {
                continue;
            }
            match txn_of(v) {
                Some(name) => in_log.entry(name).or_default().push((*p, o)),
                // Plain records are always visible to read_committed.
                None if committed.contains_key(p) && !visible.contains_key(&(*p, o)) => {
                    push(
                        &mut out,
                        format!("read_committed: the plain record {p}@{o} = {} is not visible", show(v)),
                    );
                }
                None => {}
            }
        }
    }
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for txn in &history.txns {
        let records = in_log.remove(&txn.name).unwrap_or_default();
        let checked: Vec<_> = records.iter().filter(|(p, _)| committed.contains_key(p)).collect();
        let shown = checked.iter().filter(|k| visible.contains_key(k)).count();
        let all = shown == checked.len();
        let what = match (txn.outcome, shown) {
            (_, 0) if checked.is_empty() => "empty",
            (Outcome::Committed, _) if all => "committed, all visible",
            (Outcome::Aborted, 0) => "aborted, none visible",
            (Outcome::Unknown | Outcome::Open, 0) => "unknown, none visible",
            (Outcome::Unknown | Outcome::Open, _) if all => "unknown, all visible",
            (outcome, _) => {
                push(
                    &mut out,
                    format!(
                        "atomicity: transaction {} ({outcome:?}) has {shown} of its {} records in partitions {:?} visible to read_committed: {:?}",
                        txn.name,
                        checked.len(),
                        txn.partitions,
                        checked.iter().map(|k| (k.0, k.1, visible.contains_key(k))).collect::<Vec<_>>()
                    ),
                );
                continue;
            }
        };
        *counts.entry(format!("final: transactions {what}")).or_default() += 1;
    }
    for (name, records) in in_log {
        push(
            &mut out,
            format!("transaction {name} that no producer began has records at {records:?}"),
        );
    }
    // What readers saw committed stays so, at the same place.
    for s in &history.committed_seen {
        if !committed.contains_key(&s.partition) {
            continue;
        }
        if visible.get(&(s.partition, s.offset)) != Some(&&s.value) {
            push(
                &mut out,
                format!(
                    "read_committed: {} saw {}@{} = {} at {} ms, which the final committed read does not show there",
                    s.who,
                    s.partition,
                    s.offset,
                    show(&s.value),
                    s.at_ms
                ),
            );
        }
    }
    if bad > 20 {
        out.push(format!("transactions: ... {bad} violations in all"));
    }
    (out, counts)
}

/// How many transactions ended each way, for the seed's report.
pub fn outcome_counts(history: &TxnHistory) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for t in &history.txns {
        *out.entry(format!("txn: {:?}", t.outcome).to_lowercase()).or_default() += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::from(s.to_string())
    }

    #[test]
    fn values_name_their_transaction() {
        assert_eq!(txn_of(&b("7-t1-12-3")).as_deref(), Some("t1-12"));
        assert_eq!(txn_of(&b("7-producer-1-12")), None);
        assert_eq!(txn_of(&b("7-final-3")), None);
    }

    #[test]
    fn a_transaction_half_visible_is_an_atomicity_violation() {
        let mut h = TxnHistory::default();
        h.begin("t0-1".into());
        h.get_mut("t0-1").unwrap().outcome = Outcome::Unknown;
        let log = BTreeMap::from([(0, vec![b("1-t0-1-0")]), (1, vec![b("1-t0-1-1")])]);
        let marker = |_: &Bytes| false;
        let all = BTreeMap::from([(0, vec![(0, b("1-t0-1-0"))]), (1, vec![(0, b("1-t0-1-1"))])]);
        assert!(check_final_txns(&h, &log, &all, marker).0.is_empty());
        let none = BTreeMap::from([(0, vec![]), (1, vec![])]);
        assert!(check_final_txns(&h, &log, &none, marker).0.is_empty());
        let half = BTreeMap::from([(0, vec![(0, b("1-t0-1-0"))]), (1, vec![])]);
        let (v, _) = check_final_txns(&h, &log, &half, marker);
        assert!(v[0].starts_with("atomicity"), "{v:?}");
        h.get_mut("t0-1").unwrap().outcome = Outcome::Aborted;
        assert!(!check_final_txns(&h, &log, &all, marker).0.is_empty());
    }

    #[test]
    fn the_last_stable_offset_may_not_go_below_an_earlier_reads() {
        let mut h = TxnHistory::default();
        let floor = h.lso_floor(0);
        assert!(h.note_lso(0, floor, 10).is_ok());
        let floor = h.lso_floor(0);
        assert!(h.note_lso(0, floor, 9).is_err());
        // A read that started before the first completed may report less.
        assert!(h.note_lso(0, 0, 5).is_ok());
    }
}
