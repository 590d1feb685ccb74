//! The rewrite of log compaction, as a pure function over a run of stored
//! batches (what a run of indexed chunks holds): every key keeps only its
//! latest record, as Kafka's log cleaner keeps it.
//!
//! - A record is kept when no later record of the run has its key. Records
//!   past the run (a later chunk, the tail) are not looked at: they make
//!   the next compaction's work, and leaving a record that a later one
//!   supersedes is always safe, dropping the latest one never is.
//! - A tombstone (a keyed record with no value) is kept too, until it is
//!   older than the tombstone horizon; then it goes, and its key with it.
//! - Records of aborted transactions go; control batches (transaction
//!   markers) are kept as they are, so read_committed readers still find
//!   where each transaction ended.
//! - A batch keeps its base offset's place only if its first record stays:
//!   the rewritten batch starts at its first kept record and still ends at
//!   the original batch's last offset ([`encode_batch_at`]), with the
//!   producer's identity, sequence and transactional flag. A batch left
//!   with no record goes.
//!
//! Offsets never change. Nothing here reads a clock: the horizon comes in.

use crate::batch::{batches, decode_records, encode_batch_at, leader_epoch, Identity, Record};
use crate::format::FormatError;
use crate::ids::Offset;
use crate::meta::txn_index::Aborted;
use bytes::Bytes;
use std::collections::HashMap;

/// What the rewrite goes by besides the records.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Tombstones with a timestamp before this (ms) are dropped:
    /// `delete.retention.ms` after they became compactable.
    pub tombstones_before_ms: i64,
    /// The aborted transactions with records in the run.
    pub aborted: Vec<Aborted>,
}

/// A run rewritten.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rewrite {
    /// The kept batches, in offset order.
    pub batches: Vec<Bytes>,
    pub records_in: u64,
    pub records_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// Rewrite `data` (stored batches, concatenated, in offset order, as
/// chunks hold them) by `rules`. `object` names the data in errors.
pub fn rewrite(object: &str, data: &[Bytes], rules: &Rules) -> Result<Rewrite, FormatError> {
    let mut decoded = Vec::new();
    let mut out = Rewrite::default();
    for chunk in data {
        out.bytes_in += chunk.len() as u64;
        for batch in batches(object, chunk) {
            let (info, raw) = batch?;
            let records = if info.is_control {
                Vec::new()
            } else {
                decode_records(object, raw)?
            };
            out.records_in += u64::from(info.record_count);
            decoded.push((info, chunk.slice_ref(raw), records));
        }
    }
    let aborted = |producer_id: i64, o: Offset| {
        (rules.aborted.iter()).any(|a| a.producer_id == producer_id && a.first <= o && o < a.marker)
    };
    let live = |info: &crate::batch::BatchInfo, o: Offset| !(info.is_transactional && aborted(info.producer_id, o));
    let mut latest: HashMap<&Bytes, Offset> = HashMap::new();
    for (info, _, records) in &decoded {
        for (o, r) in records.iter().filter(|(o, _)| live(info, *o)) {
            if let Some(k) = &r.key {
                latest.insert(k, *o);
            }
        }
    }
    let keep = |info: &crate::batch::BatchInfo, o: Offset, r: &Record| {
        let Some(k) = &r.key else {
            // Never stored on a compacted topic; kept rather than lost.
            return live(info, o);
        };
        latest.get(k) == Some(&o) && (r.value.is_some() || r.timestamp_ms >= rules.tombstones_before_ms)
    };
    for (info, raw, records) in &decoded {
        if info.is_control {
            out.batches.push(raw.clone());
            out.records_out += u64::from(info.record_count);
            continue;
        }
        let kept: Vec<(Offset, Record)> = (records.iter()).filter(|(o, r)| keep(info, *o, r)).cloned().collect();
        if kept.is_empty() {
            continue;
        }
        out.records_out += kept.len() as u64;
        if kept.len() == records.len() {
            out.batches.push(raw.clone());
            continue;
        }
        let identity = Identity {
            producer_id: info.producer_id,
            producer_epoch: info.producer_epoch,
            base_sequence: info.base_sequence,
            transactional: info.is_transactional,
            leader_epoch: leader_epoch(raw),
        };
        let last = Offset(info.end_offset().get() - 1);
        out.batches.push(encode_batch_at(&kept, last, &identity));
    }
    out.bytes_out = out.batches.iter().map(|b| b.len() as u64).sum();
    Ok(out)
}

#[cfg(test)]
mod tests;
