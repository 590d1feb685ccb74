//! Durable Streams writer state of one stream: each idempotent producer's
//! epoch, last accepted `Producer-Seq` and where its last append ended, and
//! the highest `Stream-Seq` accepted.
//!
//! It is kept beside Kafka's producer state ([`crate::meta::producers`]) and
//! decided the same way: the owner checks a writer's append and assigns its
//! offsets in one step under the stream's lock ([`crate::stream::partition`]).
//! Every batch such an append stores carries a [`WriterMark`] in a reserved
//! header of its first record ([`WRITER_HEADER`]), so the state is rebuilt
//! from stored batches: a flush hands the marks of its range to the view
//! with the chunk, and a WAL takeover reads them back from the replayed
//! batches ([`WriterTable::of_batch`]).

use crate::batch::{first_record, parse_batch, Record};
use crate::ids::Offset;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The record header that marks a batch a Durable Streams writer stored.
/// Durable Streams readers only see record values; native and Kafka readers
/// see the header on the batch's first record.
pub const WRITER_HEADER: &str = "sluice-ds-writer";

/// Producers remembered per stream; past this the one whose last append
/// ended earliest is forgotten (its next append is judged as a new one's).
pub const MAX_WRITERS: usize = 1024;

/// An idempotent producer's identity and the sequence of one append.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerSeq {
    pub id: String,
    pub epoch: u64,
    pub seq: u64,
}

/// What a Durable Streams append asks to be checked: its `Stream-Seq` and
/// its producer, either optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DsWrite {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer: Option<ProducerSeq>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_seq: Option<String>,
    /// What an older release kept of this producer and `Stream-Seq` in the
    /// stream's metadata, used only while the stream's own state knows
    /// nothing of them (streams written before the state moved here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legacy_producer: Option<WriterState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legacy_stream_seq: Option<String>,
}

impl DsWrite {
    /// The write as a batch carries it (no legacy state).
    pub fn stored(&self) -> DsWrite {
        DsWrite {
            producer: self.producer.clone(),
            stream_seq: self.stream_seq.clone(),
            legacy_producer: None,
            legacy_stream_seq: None,
        }
    }

    /// Nothing to check.
    pub fn is_empty(&self) -> bool {
        self.producer.is_none() && self.stream_seq.is_none()
    }
}

/// The mark a stored batch carries: the write it came from and the offset
/// after its last record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterMark {
    pub write: DsWrite,
    pub end: Offset,
}

/// One producer's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterState {
    pub epoch: u64,
    /// The last sequence accepted in `epoch`.
    pub seq: u64,
    /// The stream's end offset after that append.
    pub next: Offset,
}

/// The sequencer's answer to a Durable Streams append.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum DsVerdict {
    /// Append it.
    Accept,
    /// The producer's append is stored already; `last_seq` is the highest
    /// sequence accepted in `epoch` and `next` the end after it.
    Duplicate { epoch: u64, last_seq: u64, next: Offset },
    /// The epoch is older than the producer's current one.
    StaleEpoch { current: u64 },
    /// A newer epoch must start at sequence 0.
    EpochNotAtZero,
    /// The sequence skips ahead.
    Gap { expected: u64, received: u64 },
    /// The `Stream-Seq` does not follow the last one accepted.
    SeqNotAfter { last: String },
}

/// The answer to a Durable Streams append ([`crate::stream::partition::OpenStream::append_durable`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum DsAppend {
    /// Stored at `base..base + count` (the stream's own offsets).
    Stored { base: Offset, count: u32 },
    /// Nothing to append and the write is accepted; the stream ends at `end`.
    Checked { end: Offset },
    /// Not appended: a duplicate, or refused.
    Declined(DsVerdict),
}

/// Every writer of one stream, as of the stream's end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterTable {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    producers: BTreeMap<String, WriterState>,
    /// The highest `Stream-Seq` accepted (compared as bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stream_seq: Option<String>,
}

impl WriterTable {
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty() && self.stream_seq.is_none()
    }

    pub fn producer(&self, id: &str) -> Option<&WriterState> {
        self.producers.get(id)
    }

    pub fn stream_seq(&self) -> Option<&str> {
        self.stream_seq.as_deref()
    }

    /// Decide on `w`: the producer first (a retry is a duplicate whatever
    /// its `Stream-Seq`), then the `Stream-Seq`.
    pub fn check(&self, w: &DsWrite) -> DsVerdict {
        if let Some(p) = &w.producer {
            let v = judge(self.producers.get(&p.id).or(w.legacy_producer.as_ref()), p);
            if v != DsVerdict::Accept {
                return v;
            }
        }
        match (&w.stream_seq, self.stream_seq.as_ref().or(w.legacy_stream_seq.as_ref())) {
            (Some(seq), Some(last)) if seq <= last => DsVerdict::SeqNotAfter { last: last.clone() },
            _ => DsVerdict::Accept,
        }
    }

    /// Remember a stored mark. Recording marks again, or an older one after
    /// a newer, changes nothing: replays and flushes may overlap.
    pub fn record(&mut self, m: &WriterMark) {
        if let Some(seq) = &m.write.stream_seq {
            if self.stream_seq.as_ref().is_none_or(|last| seq > last) {
                self.stream_seq = Some(seq.clone());
            }
        }
        let Some(p) = &m.write.producer else { return };
        let state = WriterState {
            epoch: p.epoch,
            seq: p.seq,
            next: m.end,
        };
        match self.producers.get_mut(&p.id) {
            Some(s) if (s.epoch, s.seq) >= (p.epoch, p.seq) => {}
            Some(s) => *s = state,
            None => {
                self.producers.insert(p.id.clone(), state);
                if self.producers.len() > MAX_WRITERS {
                    let oldest = self
                        .producers
                        .iter()
                        .min_by_key(|(id, s)| (s.next, (*id).clone()))
                        .map(|(id, _)| id.clone());
                    if let Some(id) = oldest {
                        self.producers.remove(&id);
                    }
                }
            }
        }
    }

    /// Bring this table up to date with `later` (the state of a range
    /// after the one this table describes).
    pub fn merge(&mut self, later: &WriterTable) {
        for m in later.marks() {
            self.record(&m);
        }
    }

    /// The table as marks: recording them into an empty table rebuilds it.
    pub fn marks(&self) -> Vec<WriterMark> {
        let mut out: Vec<WriterMark> = self
            .producers
            .iter()
            .map(|(id, s)| WriterMark {
                write: DsWrite {
                    producer: Some(ProducerSeq {
                        id: id.clone(),
                        epoch: s.epoch,
                        seq: s.seq,
                    }),
                    ..Default::default()
                },
                end: s.next,
            })
            .collect();
        out.sort_by_key(|m| m.end);
        if let Some(seq) = &self.stream_seq {
            out.push(WriterMark {
                write: DsWrite {
                    stream_seq: Some(seq.clone()),
                    ..Default::default()
                },
                end: Offset::ZERO,
            });
        }
        out
    }

    /// The mark of one stored batch, if a Durable Streams writer stored it:
    /// read from the reserved header of its first record. Compressed and
    /// Kafka-producer batches are never marked and are not decoded.
    pub fn of_batch(batch: &[u8]) -> Option<WriterMark> {
        let info = parse_batch("replayed batch", batch).ok()?;
        if info.compression != 0 || info.producer_id >= 0 {
            return None;
        }
        // The mark is on the first record: the others are not decoded.
        let first = first_record("replayed batch", &batch[..info.batch_len]).ok()??;
        let write = read_mark(&first)?;
        Some(WriterMark {
            write,
            end: info.end_offset(),
        })
    }

    /// The state the marks of `batches` (stored in offset order) add up to.
    pub fn of_batches<'a>(batches: impl IntoIterator<Item = &'a [u8]>) -> WriterTable {
        let mut t = WriterTable::default();
        for b in batches {
            for one in crate::batch::batches("replayed batch", b).flatten() {
                if let Some(m) = Self::of_batch(one.1) {
                    t.record(&m);
                }
            }
        }
        t
    }
}

/// The producer check of the Durable Streams protocol: a new producer
/// starts at 0, a newer epoch restarts at 0, an older epoch is fenced, a
/// sequence already accepted is a duplicate, a skip is a gap.
pub fn judge(state: Option<&WriterState>, p: &ProducerSeq) -> DsVerdict {
    let Some(s) = state else {
        return if p.seq == 0 {
            DsVerdict::Accept
        } else {
            DsVerdict::Gap {
                expected: 0,
                received: p.seq,
            }
        };
    };
    if p.epoch < s.epoch {
        return DsVerdict::StaleEpoch { current: s.epoch };
    }
    if p.epoch > s.epoch {
        return if p.seq == 0 {
            DsVerdict::Accept
        } else {
            DsVerdict::EpochNotAtZero
        };
    }
    match p.seq {
        n if n <= s.seq => DsVerdict::Duplicate {
            epoch: s.epoch,
            last_seq: s.seq,
            next: s.next,
        },
        n if n == s.seq + 1 => DsVerdict::Accept,
        n => DsVerdict::Gap {
            expected: s.seq + 1,
            received: n,
        },
    }
}

/// `records` with `w`'s mark added to the first record's headers.
pub fn stamp(records: &[Record], w: &DsWrite) -> Vec<Record> {
    let mut out = records.to_vec();
    if let Some(first) = out.first_mut() {
        let value = serde_json::to_vec(&w.stored()).expect("a write serializes");
        first.headers.push((WRITER_HEADER.to_string(), Some(value.into())));
    }
    out
}

/// The write a record's reserved header names, if it has one.
pub fn read_mark(r: &Record) -> Option<DsWrite> {
    let (_, v) = r.headers.iter().rev().find(|(k, _)| k == WRITER_HEADER)?;
    serde_json::from_slice(v.as_ref()?).ok()
}

#[cfg(test)]
mod tests;
