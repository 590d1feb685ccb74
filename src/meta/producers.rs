//! Idempotent-producer state of one stream: for each producer id, its
//! epoch and the last few batches it wrote (sequence range and offsets), so
//! a retried batch is answered with its original offsets and a gap in the
//! sequence is refused.
//!
//! The same table lives on the owner (checked under the stream's lock when
//! offsets are assigned) and in the metadata view (updated by the producer
//! batches each committed chunk carries), so the state survives transfers
//! and failover: a new owner starts from the view, and a WAL takeover
//! indexes the replayed entries' producer batches before the stream reopens.
//!
//! Durable Streams writers (keyed by their `Producer-Id` string) are kept in
//! the same table, as a [`WriterTable`] of their own.

use crate::ids::Offset;
use crate::meta::txn_index::{TxnBatch, TxnIndex};
use crate::meta::writers::WriterTable;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Batches remembered per producer: Kafka clients keep at most five
/// requests in flight per partition, so a retry is always among these.
pub const BATCHES_PER_PRODUCER: usize = 5;

/// Producers remembered per stream; past this the one that wrote least
/// recently is forgotten (its next batch is accepted at any sequence).
pub const MAX_PRODUCERS: usize = 1024;

/// One batch an idempotent producer wrote: its identity and where it landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
    pub base: Offset,
    pub count: u32,
}

impl ProducerBatch {
    /// The last sequence of a batch of `count` records from `first_seq`
    /// (sequences wrap from `i32::MAX` to 0).
    pub fn last_seq_of(first_seq: i32, count: u32) -> i32 {
        let span = i64::from(count.max(1)) - 1;
        ((i64::from(first_seq) + span) % (i64::from(i32::MAX) + 1)) as i32
    }
}

/// What to do with an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Append it (and [`ProducerTable::record`] where it landed).
    Append,
    /// A retry of a batch already written at `base`.
    Duplicate { base: Offset, count: u32 },
    /// The sequence does not follow the producer's last batch.
    OutOfOrder { expected: i32 },
    /// The producer epoch is older than one already seen.
    StaleEpoch { current: i16 },
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    epoch: i16,
    batches: VecDeque<ProducerBatch>,
}

impl Entry {
    fn last_offset(&self) -> Offset {
        self.batches.back().map_or(Offset::ZERO, |b| b.base)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerTable {
    #[serde(with = "crate::format::map_as_pairs")]
    producers: BTreeMap<i64, Entry>,
    /// The Durable Streams writers of the stream, beside Kafka's producers.
    #[serde(default, skip_serializing_if = "WriterTable::is_empty")]
    writers: WriterTable,
    /// The stream's open and aborted transactions.
    #[serde(default, skip_serializing_if = "TxnIndex::is_empty")]
    txns: TxnIndex,
}

impl ProducerTable {
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty() && self.writers.is_empty() && self.txns.is_empty()
    }

    pub fn txns(&self) -> &TxnIndex {
        &self.txns
    }

    /// Take one transactional batch into the transaction index. A marker
    /// also fences the producer's older epochs (the coordinator writes it at
    /// the epoch it bumped to when it aborted on a timeout or a new
    /// instance), so a zombie's later batches are refused.
    pub fn record_txn(&mut self, b: TxnBatch) {
        self.txns.record(b);
        if let TxnBatch::Marker {
            producer_id,
            producer_epoch,
            ..
        } = b
        {
            let entry = self.producers.entry(producer_id).or_default();
            if producer_epoch > entry.epoch {
                entry.epoch = producer_epoch;
                entry.batches.clear();
            }
        }
    }

    pub fn writers(&self) -> &WriterTable {
        &self.writers
    }

    pub fn writers_mut(&mut self) -> &mut WriterTable {
        &mut self.writers
    }

    /// The newest epoch of `producer_id` this stream knows (from its
    /// batches or a marker).
    pub fn epoch_of(&self, producer_id: i64) -> Option<i16> {
        self.producers.get(&producer_id).map(|e| e.epoch)
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Decide on a batch of `count` records from `first_seq`.
    ///
    /// As in Kafka, a producer this stream knows nothing of is accepted at
    /// any sequence, and a new epoch must start at sequence 0.
    pub fn check(&self, producer_id: i64, epoch: i16, first_seq: i32, count: u32) -> Verdict {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Verdict::Append;
        };
        if epoch < entry.epoch {
            return Verdict::StaleEpoch { current: entry.epoch };
        }
        if epoch > entry.epoch {
            return if first_seq == 0 {
                Verdict::Append
            } else {
                Verdict::OutOfOrder { expected: 0 }
            };
        }
        let last_seq = ProducerBatch::last_seq_of(first_seq, count);
        if let Some(b) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
        {
            return Verdict::Duplicate {
                base: b.base,
                count: b.count,
            };
        }
        let expected = entry
            .batches
            .back()
            .map_or(0, |b| ProducerBatch::last_seq_of(b.last_seq, 2));
        if entry.batches.is_empty() || first_seq == expected {
            Verdict::Append
        } else {
            Verdict::OutOfOrder { expected }
        }
    }

    /// Remember a batch written (or indexed) at its offsets. A newer epoch
    /// replaces what was known of the producer.
    pub fn record(&mut self, b: ProducerBatch) {
        let entry = self.producers.entry(b.producer_id).or_default();
        if b.producer_epoch < entry.epoch {
            return; // an older epoch never rolls state back
        }
        if b.producer_epoch != entry.epoch || entry.batches.is_empty() {
            entry.epoch = b.producer_epoch;
            entry.batches.clear();
        }
        if entry
            .batches
            .iter()
            .any(|x| x.first_seq == b.first_seq && x.base == b.base)
        {
            return; // recorded already (a replayed entry)
        }
        entry.batches.push_back(b);
        while entry.batches.len() > BATCHES_PER_PRODUCER {
            entry.batches.pop_front();
        }
        if self.producers.len() > MAX_PRODUCERS {
            let oldest = self
                .producers
                .iter()
                .min_by_key(|(id, e)| (e.last_offset(), **id))
                .map(|(id, _)| *id);
            if let Some(id) = oldest {
                self.producers.remove(&id);
            }
        }
    }

    /// The last batch of each remembered producer, by producer id.
    pub fn latest(&self) -> Vec<ProducerBatch> {
        self.producers
            .values()
            .filter_map(|e| e.batches.back().copied())
            .collect()
    }

    /// The remembered batches, oldest offset first: recording them into
    /// another table brings that table up to date with this one's producers.
    pub fn batches(&self) -> Vec<ProducerBatch> {
        let mut all: Vec<ProducerBatch> = self
            .producers
            .values()
            .flat_map(|e| e.batches.iter().copied())
            .collect();
        all.sort_by_key(|b| (b.base, b.producer_id));
        all
    }

    /// The remembered batches of `batches` after recording them in order:
    /// at most [`BATCHES_PER_PRODUCER`] per producer, in offset order.
    pub fn compact(batches: impl IntoIterator<Item = ProducerBatch>) -> Vec<ProducerBatch> {
        let mut t = ProducerTable::default();
        for b in batches {
            t.record(b);
        }
        t.batches()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(pid: i64, epoch: i16, first_seq: i32, count: u32, base: u64) -> ProducerBatch {
        ProducerBatch {
            producer_id: pid,
            producer_epoch: epoch,
            first_seq,
            last_seq: ProducerBatch::last_seq_of(first_seq, count),
            base: Offset(base),
            count,
        }
    }

    #[test]
    fn an_unknown_producer_is_accepted_at_any_sequence() {
        let t = ProducerTable::default();
        assert_eq!(t.check(7, 0, 0, 3), Verdict::Append);
        assert_eq!(t.check(7, 0, 42, 3), Verdict::Append);
    }

    #[test]
    fn the_next_batch_must_follow_the_last_sequence() {
        let mut t = ProducerTable::default();
        t.record(batch(7, 0, 0, 3, 100));
        assert_eq!(t.check(7, 0, 3, 2), Verdict::Append);
        assert_eq!(t.check(7, 0, 4, 2), Verdict::OutOfOrder { expected: 3 });
        assert_eq!(t.check(7, 0, 1, 2), Verdict::OutOfOrder { expected: 3 });
    }

    #[test]
    fn a_retry_of_any_of_the_last_five_batches_is_a_duplicate_with_its_offsets() {
        let mut t = ProducerTable::default();
        for i in 0..7u32 {
            t.record(batch(7, 0, (i * 2) as i32, 2, 100 + u64::from(i) * 10));
        }
        // Batches 2..=6 are remembered; 0 and 1 are not.
        assert_eq!(
            t.check(7, 0, 4, 2),
            Verdict::Duplicate {
                base: Offset(120),
                count: 2
            }
        );
        assert_eq!(
            t.check(7, 0, 12, 2),
            Verdict::Duplicate {
                base: Offset(160),
                count: 2
            }
        );
        assert_eq!(t.check(7, 0, 0, 2), Verdict::OutOfOrder { expected: 14 });
        // Same first sequence, different length: not the same batch.
        assert_eq!(t.check(7, 0, 12, 3), Verdict::OutOfOrder { expected: 14 });
    }

    #[test]
    fn epochs_fence_older_producers_and_restart_sequences() {
        let mut t = ProducerTable::default();
        t.record(batch(7, 1, 0, 5, 0));
        assert_eq!(t.check(7, 0, 5, 1), Verdict::StaleEpoch { current: 1 });
        assert_eq!(t.check(7, 2, 5, 1), Verdict::OutOfOrder { expected: 0 });
        assert_eq!(t.check(7, 2, 0, 1), Verdict::Append);
        t.record(batch(7, 2, 0, 1, 5));
        assert_eq!(t.check(7, 1, 5, 1), Verdict::StaleEpoch { current: 2 });
        // An older epoch's batch arriving late does not roll state back.
        t.record(batch(7, 1, 5, 1, 6));
        assert_eq!(t.check(7, 2, 1, 1), Verdict::Append);
    }

    #[test]
    fn sequences_wrap_after_i32_max() {
        let mut t = ProducerTable::default();
        let first = i32::MAX - 1;
        assert_eq!(ProducerBatch::last_seq_of(first, 3), 0);
        t.record(batch(7, 0, first, 3, 0));
        assert_eq!(t.check(7, 0, 1, 1), Verdict::Append);
        assert_eq!(t.check(7, 0, 0, 1), Verdict::OutOfOrder { expected: 1 });
    }

    #[test]
    fn latest_is_each_producers_last_batch_at_its_current_epoch() {
        let mut t = ProducerTable::default();
        assert!(t.latest().is_empty());
        t.record(batch(9, 0, 0, 2, 0));
        t.record(batch(3, 0, 0, 1, 2));
        t.record(batch(9, 0, 2, 3, 3));
        t.record(batch(3, 1, 0, 4, 6));
        assert_eq!(t.latest(), vec![batch(3, 1, 0, 4, 6), batch(9, 0, 2, 3, 3)]);
    }

    #[test]
    fn a_marker_at_a_newer_epoch_fences_the_older_one_and_indexes_the_transaction() {
        let mut t = ProducerTable::default();
        t.record(batch(7, 1, 0, 2, 10));
        t.record_txn(TxnBatch::Data {
            producer_id: 7,
            base: Offset(10),
        });
        assert_eq!(t.txns().open_since(7), Some(Offset(10)));
        t.record_txn(TxnBatch::Marker {
            producer_id: 7,
            producer_epoch: 2,
            offset: Offset(12),
            commit: false,
        });
        assert_eq!(t.txns().open_since(7), None);
        assert_eq!(t.check(7, 1, 2, 1), Verdict::StaleEpoch { current: 2 });
        assert_eq!(t.check(7, 2, 0, 1), Verdict::Append);
        // A marker at the producer's own epoch keeps its sequences.
        t.record(batch(7, 2, 0, 1, 13));
        t.record_txn(TxnBatch::Marker {
            producer_id: 7,
            producer_epoch: 2,
            offset: Offset(14),
            commit: true,
        });
        assert_eq!(t.check(7, 2, 1, 1), Verdict::Append);
        // A producer first seen through a marker is fenced below its epoch.
        t.record_txn(TxnBatch::Marker {
            producer_id: 8,
            producer_epoch: 3,
            offset: Offset(15),
            commit: false,
        });
        assert_eq!(t.check(8, 2, 0, 1), Verdict::StaleEpoch { current: 3 });
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<ProducerTable>(&json).unwrap(), t);
    }

    #[test]
    fn producers_are_independent() {
        let mut t = ProducerTable::default();
        t.record(batch(1, 0, 0, 1, 0));
        t.record(batch(2, 0, 0, 1, 1));
        assert_eq!(t.check(1, 0, 1, 1), Verdict::Append);
        assert_eq!(t.check(2, 0, 1, 1), Verdict::Append);
        assert_eq!(t.check(2, 0, 2, 1), Verdict::OutOfOrder { expected: 1 });
    }

    #[test]
    fn recording_a_replayed_batch_twice_changes_nothing() {
        let mut t = ProducerTable::default();
        t.record(batch(7, 0, 0, 2, 10));
        let once = t.clone();
        t.record(batch(7, 0, 0, 2, 10));
        assert_eq!(t, once);
    }

    #[test]
    fn the_least_recent_producer_is_forgotten_past_the_cap() {
        let mut t = ProducerTable::default();
        for pid in 0..=MAX_PRODUCERS as i64 {
            t.record(batch(pid, 0, 0, 1, pid as u64));
        }
        assert_eq!(t.len(), MAX_PRODUCERS);
        assert_eq!(t.check(0, 0, 9, 1), Verdict::Append, "producer 0 was forgotten");
        assert_eq!(t.check(1, 0, 9, 1), Verdict::OutOfOrder { expected: 1 });
    }

    #[test]
    fn compacting_keeps_what_recording_everything_would() {
        let all: Vec<ProducerBatch> = (0..20u32)
            .map(|i| batch(i64::from(i % 3), 0, (i / 3) as i32, 1, u64::from(i)))
            .collect();
        let compact = ProducerTable::compact(all.iter().copied());
        assert!(compact.len() <= 3 * BATCHES_PER_PRODUCER);
        let (mut a, mut b) = (ProducerTable::default(), ProducerTable::default());
        all.into_iter().for_each(|x| a.record(x));
        compact.into_iter().for_each(|x| b.record(x));
        assert_eq!(a, b);
        // The table round-trips through JSON (it lives in view snapshots).
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<ProducerTable>(&json).unwrap(), a);
    }
}
