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
use crate::meta::{IndexedChunk, TopicConfig};
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
    // The run's last record always stays, so the run still ends with a
    // record at its last offset: a reader (Kafka Fetch, an HTTP read)
    // positioned in a gap before it finds a batch ending there, rather
    // than nothing below the high watermark.
    // (A run that ends with a marker ends with it already.)
    let last = (decoded.last())
        .and_then(|(_, _, records)| records.last())
        .map(|(o, _)| *o);
    let keep = |info: &crate::batch::BatchInfo, o: Offset, r: &Record| {
        if Some(o) == last {
            return true;
        }
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

/// The most input one compaction run reads.
pub const MAX_RUN_BYTES: u64 = 256 << 20;

/// What a stream's compaction may look at now.
#[derive(Debug, Clone, Copy)]
pub struct Due {
    /// The offsets below this are stable (no transaction open there) and
    /// committed: compaction never reaches past it.
    pub stable_end: Offset,
    /// Where the last compaction ended ([`StreamRow::compacted_end`](crate::meta::view::StreamRow::compacted_end)).
    pub compacted_end: Offset,
    pub now_ms: i64,
}

/// The run of `chunks` to compact now, by Kafka's rules, or `None`:
///
/// - only chunks wholly below `due.stable_end` whose newest record is at
///   least `min.compaction.lag.ms` old are cleanable, from the first chunk
///   on, up to [`MAX_RUN_BYTES`] of input (at least one chunk);
/// - the run is due when its dirty bytes (chunks past the last
///   compaction's end) are at least `min.cleanable.dirty.ratio` of its
///   bytes, or when a dirty chunk's newest record is older than
///   `max.compaction.lag.ms`.
///
/// A chunk's newest record stands for all of its records: a chunk counts
/// as old enough only once all of them are.
pub fn plan(chunks: &[IndexedChunk], config: &TopicConfig, due: Due) -> Option<Vec<IndexedChunk>> {
    let min_lag = config.min_compaction_lag_ms.unwrap_or(0);
    let old_enough = |c: &IndexedChunk, lag: i64| c.max_timestamp <= due.now_ms.saturating_sub(lag);
    let mut run: Vec<IndexedChunk> = Vec::new();
    let mut bytes = 0;
    for c in chunks {
        let size = c.byte_end - c.byte_start;
        if c.end > due.stable_end || !old_enough(c, min_lag) || (!run.is_empty() && bytes + size > MAX_RUN_BYTES) {
            break;
        }
        bytes += size;
        run.push(c.clone());
    }
    let dirty: Vec<&IndexedChunk> = run.iter().filter(|c| c.end > due.compacted_end).collect();
    if dirty.is_empty() || bytes == 0 {
        return None;
    }
    let dirty_bytes: u64 = dirty.iter().map(|c| c.byte_end - c.byte_start).sum();
    let ratio = dirty_bytes as f64 / bytes as f64;
    let overdue = (config.max_compaction_lag_ms).is_some_and(|lag| dirty.iter().any(|c| old_enough(c, lag)));
    (ratio >= config.min_cleanable_dirty_ratio() || overdue).then_some(run)
}

/// The dirty share of the cleanable bytes a [`plan`] would look at (a
/// gauge; 0 when nothing is cleanable).
pub fn dirty_ratio(chunks: &[IndexedChunk], compacted_end: Offset) -> f64 {
    let size = |c: &&IndexedChunk| c.byte_end - c.byte_start;
    let all: u64 = chunks.iter().map(|c| size(&c)).sum();
    let dirty: u64 = chunks.iter().filter(|c| c.end > compacted_end).map(|c| size(&c)).sum();
    if all == 0 {
        0.0
    } else {
        dirty as f64 / all as f64
    }
}

/// How long the oldest flushed record that no compaction has taken yet
/// has waited (ms; 0 when nothing flushed is dirty): `now_ms` less the
/// newest timestamp of the first chunk past `compacted_end` — a chunk
/// counts as waiting from its newest record, as [`plan`] counts it
/// cleanable. Record timestamps are the producers' (CreateTime), so a
/// producer's skewed clock skews this too; it is a gauge, never a decision.
pub fn lag_ms(chunks: &[IndexedChunk], compacted_end: Offset, now_ms: i64) -> i64 {
    (chunks.iter())
        .find(|c| c.end > compacted_end)
        .map_or(0, |c| now_ms.saturating_sub(c.max_timestamp).max(0))
}

#[cfg(test)]
mod tests;
