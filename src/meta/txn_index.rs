//! One partition's transaction index: the transactions open in it (each
//! producer's first offset since its last marker) and the aborted ones
//! (producer id, first offset, marker offset), built by feeding it the
//! partition's batches in offset order. From it come the last stable
//! offset (the first offset of the oldest open transaction, or the high
//! watermark) and the aborted transactions a read_committed Fetch answers
//! with. Like the producer table it is meant to be kept by the owner and
//! carried by committed chunks, and rebuilt from replayed batches on a WAL
//! takeover (see `docs/design/transactions.md`).

use crate::ids::Offset;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Aborted transactions remembered per partition; the oldest go first (a
/// reader far behind then sees an aborted transaction's records, which is
/// why the limit is generous and trims below the stream's start first).
pub const MAX_ABORTED: usize = 10_000;

/// What one batch means to the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TxnBatch {
    /// A transactional data batch of `producer_id` at `base`.
    Data { producer_id: i64, base: Offset },
    /// A marker of `producer_id` (written at `producer_epoch`) at
    /// `offset`: the end of its transaction.
    Marker {
        producer_id: i64,
        producer_epoch: i16,
        offset: Offset,
        commit: bool,
    },
}

impl TxnBatch {
    /// Where the batch is stored.
    pub fn offset(&self) -> Offset {
        match self {
            TxnBatch::Data { base, .. } => *base,
            TxnBatch::Marker { offset, .. } => *offset,
        }
    }

    /// What a stored batch means to the index (`None`: not transactional),
    /// from its header and, for a control batch, its marker. A control
    /// batch that is not a transaction marker means nothing.
    pub fn of(object: &str, batch: &[u8]) -> Option<TxnBatch> {
        let info = crate::batch::parse_batch(object, batch).ok()?;
        if !info.is_transactional {
            return None;
        }
        if !info.is_control {
            return Some(TxnBatch::Data {
                producer_id: info.producer_id,
                base: info.base_offset,
            });
        }
        let (marker, _) = crate::batch::marker::decode_marker(object, batch).ok()??;
        Some(TxnBatch::Marker {
            producer_id: info.producer_id,
            producer_epoch: info.producer_epoch,
            offset: info.base_offset,
            commit: marker == crate::batch::marker::Marker::Commit,
        })
    }

    /// The events of `batches` (in offset order) a committed chunk needs to
    /// carry: every marker, and a producer's first data batch since its
    /// last marker (the later ones change nothing in an index).
    pub fn compact(batches: impl IntoIterator<Item = TxnBatch>) -> Vec<TxnBatch> {
        let mut open = std::collections::BTreeSet::new();
        batches
            .into_iter()
            .filter(|b| match b {
                TxnBatch::Data { producer_id, .. } => open.insert(*producer_id),
                TxnBatch::Marker { producer_id, .. } => {
                    open.remove(producer_id);
                    true
                }
            })
            .collect()
    }
}

/// An aborted transaction: its producer, its first offset and the offset of
/// its abort marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Aborted {
    pub producer_id: i64,
    pub first: Offset,
    pub marker: Offset,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnIndex {
    /// Producer id -> first offset of its open transaction.
    #[serde(with = "crate::format::map_as_pairs")]
    open: BTreeMap<i64, Offset>,
    /// Oldest marker first.
    aborted: VecDeque<Aborted>,
}

impl TxnIndex {
    pub fn is_empty(&self) -> bool {
        self.open.is_empty() && self.aborted.is_empty()
    }

    /// Take one batch, in offset order (a batch seen again, as a replay
    /// does, changes nothing: a data batch of an open transaction keeps its
    /// first offset, a marker with no open transaction is ignored).
    pub fn record(&mut self, b: TxnBatch) {
        match b {
            TxnBatch::Data { producer_id, base } => {
                self.open.entry(producer_id).or_insert(base);
            }
            TxnBatch::Marker {
                producer_id,
                offset,
                commit,
                ..
            } => {
                let Some(first) = self.open.remove(&producer_id) else {
                    return;
                };
                if !commit {
                    self.aborted.push_back(Aborted {
                        producer_id,
                        first,
                        marker: offset,
                    });
                    if self.aborted.len() > MAX_ABORTED {
                        self.aborted.pop_front();
                    }
                }
            }
        }
    }

    /// The last stable offset: no read_committed reader reads at or past
    /// the first offset of a transaction still open.
    pub fn last_stable(&self, high_watermark: Offset) -> Offset {
        self.open
            .values()
            .copied()
            .min()
            .map_or(high_watermark, |f| f.min(high_watermark))
    }

    /// The first offset of `producer_id`'s open transaction.
    pub fn open_since(&self, producer_id: i64) -> Option<Offset> {
        self.open.get(&producer_id).copied()
    }

    /// The aborted transactions with records in `from..to` (a Fetch answer's
    /// range), as Kafka lists them: by first offset.
    pub fn aborted_in(&self, from: Offset, to: Offset) -> Vec<Aborted> {
        let mut out: Vec<Aborted> = self
            .aborted
            .iter()
            .filter(|a| a.first < to && a.marker >= from)
            .copied()
            .collect();
        out.sort_by_key(|a| (a.first, a.producer_id));
        out
    }

    /// Forget aborted transactions that ended below `start` (the stream's
    /// start moved past them: no reader can reach their records).
    pub fn trim_below(&mut self, start: Offset) {
        self.aborted.retain(|a| a.marker >= start);
    }
}

/// What a read_committed reader is given of `batches` (stored batches in
/// offset order, read below the last stable offset, with `aborted` the
/// aborted transactions of their range): every batch of data except those
/// an aborted transaction wrote (its producer's transactional batches from
/// its first offset up to its marker); control batches (the markers) are
/// never data. A batch that does not parse is kept, for the decoder to
/// report.
pub fn committed_data(batches: Vec<bytes::Bytes>, aborted: &[Aborted]) -> Vec<bytes::Bytes> {
    batches
        .into_iter()
        .filter(|b| match crate::batch::parse_batch("a committed read", b) {
            Ok(i) if i.is_control => false,
            Ok(i) if i.is_transactional => !aborted
                .iter()
                .any(|a| a.producer_id == i.producer_id && a.first <= i.base_offset && i.base_offset < a.marker),
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_committed_read_drops_markers_and_the_batches_of_aborted_transactions_only() {
        use crate::batch::marker::{encode_marker, Marker};
        use crate::batch::{encode_batch, set_base_offset, transactional, with_producer, Record};
        let record = Record {
            timestamp_ms: 0,
            key: None,
            value: Some(bytes::Bytes::from_static(b"v")),
            headers: vec![],
        };
        let txn = |p: i64, base: u64| {
            transactional(
                &with_producer(&encode_batch(Offset(base), std::slice::from_ref(&record)), p, 0, 0),
                false,
            )
        };
        let mut abort = encode_marker(7, 0, Marker::Abort, 0, 0).to_vec();
        set_base_offset(&mut abort, Offset(3));
        let batches = vec![
            txn(7, 0),                                              // 7's transaction, aborted at 3
            txn(8, 1),                                              // 8's, committed later
            encode_batch(Offset(2), std::slice::from_ref(&record)), // not transactional
            bytes::Bytes::from(abort),                              // 7's abort marker
            txn(7, 4),                                              // 7's next transaction
        ];
        let aborted = [Aborted {
            producer_id: 7,
            first: Offset(0),
            marker: Offset(3),
        }];
        let kept: Vec<u64> = committed_data(batches, &aborted)
            .iter()
            .map(|b| crate::batch::base_offset(b).get())
            .collect();
        assert_eq!(kept, vec![1, 2, 4]);
    }

    fn data(p: i64, o: u64) -> TxnBatch {
        TxnBatch::Data {
            producer_id: p,
            base: Offset(o),
        }
    }
    fn marker(p: i64, o: u64, commit: bool) -> TxnBatch {
        TxnBatch::Marker {
            producer_id: p,
            producer_epoch: 0,
            offset: Offset(o),
            commit,
        }
    }

    #[test]
    fn the_last_stable_offset_waits_for_the_oldest_open_transaction() {
        let mut t = TxnIndex::default();
        assert_eq!(t.last_stable(Offset(10)), Offset(10));
        t.record(data(1, 10));
        t.record(data(2, 12));
        t.record(data(1, 14));
        assert_eq!(t.open_since(1), Some(Offset(10)));
        assert_eq!(t.last_stable(Offset(16)), Offset(10));
        t.record(marker(1, 16, true));
        assert_eq!(t.last_stable(Offset(17)), Offset(12), "producer 2 is still open");
        t.record(marker(2, 17, false));
        assert_eq!(t.last_stable(Offset(18)), Offset(18));
        assert!(t.open.is_empty());
    }

    #[test]
    fn aborted_transactions_are_listed_for_the_ranges_they_touch() {
        let mut t = TxnIndex::default();
        t.record(data(1, 0));
        t.record(marker(1, 5, false));
        t.record(data(2, 6));
        t.record(marker(2, 8, true));
        t.record(data(3, 9));
        t.record(marker(3, 12, false));
        let aborted = |t: &TxnIndex, f, to| -> Vec<i64> {
            t.aborted_in(Offset(f), Offset(to))
                .iter()
                .map(|a| a.producer_id)
                .collect()
        };
        assert_eq!(aborted(&t, 0, 20), vec![1, 3], "the committed one is not listed");
        assert_eq!(aborted(&t, 6, 9), Vec::<i64>::new());
        assert_eq!(
            aborted(&t, 4, 7),
            vec![1],
            "a range holding only its marker still lists it"
        );
        assert_eq!(aborted(&t, 10, 11), vec![3]);
        t.trim_below(Offset(6));
        assert_eq!(aborted(&t, 0, 20), vec![3]);
    }

    #[test]
    fn replayed_batches_change_nothing_and_a_stray_marker_is_ignored() {
        let mut t = TxnIndex::default();
        t.record(marker(9, 3, false));
        assert!(t.is_empty(), "no transaction of producer 9 was open");
        t.record(data(1, 4));
        t.record(data(1, 4));
        t.record(data(1, 6));
        assert_eq!(t.open_since(1), Some(Offset(4)));
        t.record(marker(1, 7, false));
        t.record(marker(1, 7, false));
        assert_eq!(t.aborted.len(), 1);
    }

    #[test]
    fn compacting_keeps_markers_and_first_batches_and_indexes_the_same() {
        let all = vec![
            data(1, 0),
            data(1, 2),
            data(2, 3),
            marker(1, 4, false),
            data(1, 5),
            data(1, 6),
            marker(9, 7, true),
        ];
        let compact = TxnBatch::compact(all.clone());
        assert_eq!(
            compact,
            vec![
                data(1, 0),
                data(2, 3),
                marker(1, 4, false),
                data(1, 5),
                marker(9, 7, true)
            ]
        );
        let (mut a, mut b) = (TxnIndex::default(), TxnIndex::default());
        all.into_iter().for_each(|x| a.record(x));
        compact.into_iter().for_each(|x| b.record(x));
        assert_eq!(a, b);
    }

    #[test]
    fn stored_batches_are_read_as_data_markers_or_nothing() {
        use crate::batch::marker::{encode_marker, Marker};
        use crate::batch::{encode_batch, set_base_offset, transactional, with_producer, Record};
        let record = Record {
            timestamp_ms: 0,
            key: None,
            value: Some(bytes::Bytes::from_static(b"v")),
            headers: vec![],
        };
        let plain = encode_batch(Offset(5), &[record]);
        assert_eq!(TxnBatch::of("t", &plain), None);
        let data = transactional(&with_producer(&plain, 4, 2, 0), false);
        assert_eq!(
            TxnBatch::of("t", &data),
            Some(TxnBatch::Data {
                producer_id: 4,
                base: Offset(5)
            })
        );
        let mut m = bytes::BytesMut::from(&encode_marker(4, 2, Marker::Abort, 0, 0)[..]);
        set_base_offset(&mut m, Offset(9));
        assert_eq!(
            TxnBatch::of("t", &m),
            Some(TxnBatch::Marker {
                producer_id: 4,
                producer_epoch: 2,
                offset: Offset(9),
                commit: false
            })
        );
        let idempotent = with_producer(&plain, 4, 2, 0);
        assert_eq!(TxnBatch::of("t", &idempotent), None, "idempotent, not transactional");
        assert_eq!(TxnBatch::of("t", b"garbage"), None);
    }

    #[test]
    fn the_aborted_list_is_bounded_and_round_trips_through_json() {
        let mut t = TxnIndex::default();
        for i in 0..(MAX_ABORTED as u64 + 5) {
            t.record(data(1, 2 * i));
            t.record(marker(1, 2 * i + 1, false));
        }
        assert_eq!(t.aborted.len(), MAX_ABORTED);
        assert_eq!(t.aborted.front().unwrap().first, Offset(10), "the oldest went first");
        t.record(data(7, 1_000_000));
        let back: TxnIndex = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }
}
