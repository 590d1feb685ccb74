//! Taking over a dead incarnation's WAL (failover steps 1 and 2).
//!
//! 1. **Fence.** List `wal/<node>/<epoch>/`; let K be the first missing seq
//!    after the lowest present one (the writer deletes only from the front,
//!    always keeps its newest acknowledged segment, and PUTs nothing above
//!    seq 0 until seq 0 landed, so no PUT in flight is below the lowest
//!    present seq and the run is the frontier). Create a fence marker at K. If K was taken meanwhile, list
//!    again. Once the marker is there, the segments below K are the only ones
//!    that can hold acknowledged records: acks are released in seq order.
//! 2. **Replay.** Decode those segments and rebuild, per stream, the records
//!    at or above its committed end written at the dead incarnation's stream
//!    epoch. A gap or a corrupt segment stops the recovery loudly.
//!
//! Both steps are idempotent: a takeover redone by another holder finds the
//! marker and reads the same segments.

use super::segment::{decode_wal_object, encode_fence_marker, FenceMarker, Segment, WalEntry, WalObject};
use super::writer::{incarnation_prefix, segment_key};
use crate::ids::{LogIndex, NodeEpoch, NodeId, Offset, SegmentSeq, StreamEpoch, StreamId};
use crate::store::{DynStore, PutOutcome, StoreError};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum TakeoverError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Corrupt(#[from] crate::format::FormatError),
    #[error("stream {stream}: WAL entry at {found} does not continue {expected}; recovery of this stream stops")]
    Gap {
        stream: StreamId,
        expected: Offset,
        found: Offset,
    },
    #[error("segment {0} is missing below the fence")]
    MissingSegment(String),
}

/// Who fences, for the record in the marker.
#[derive(Debug, Clone)]
pub struct Fencer {
    pub holder: NodeId,
    pub holder_epoch: NodeEpoch,
    pub log_index: LogIndex,
}

/// The segments below the fence, in seq order.
#[derive(Debug)]
pub struct FencedWal {
    pub fence_seq: SegmentSeq,
    pub segments: Vec<Segment>,
}

fn seq_of(key: &str) -> Option<SegmentSeq> {
    key.rsplit('/').next()?.parse().ok().map(SegmentSeq)
}

/// Step 1, then read every segment below the fence.
///
/// The fence is the *lowest* marker in the run of objects from the lowest
/// present seq: segments of the dead writer may have landed above a marker
/// (up to `--wal-max-inflight` PUTs run at once, and none of them was ever
/// acknowledged), so a redone takeover must find the marker an earlier one
/// placed rather than add another at the end.
pub async fn fence_and_read(
    store: &DynStore,
    node: &NodeId,
    epoch: NodeEpoch,
    fencer: &Fencer,
) -> Result<FencedWal, TakeoverError> {
    let prefix = incarnation_prefix(node, epoch);
    let mut backoff = Duration::from_millis(10);
    let mut read: BTreeMap<SegmentSeq, WalObject> = BTreeMap::new();
    loop {
        let listed = store.list(&prefix).await?;
        let seqs: Vec<SegmentSeq> = listed.iter().filter_map(|o| seq_of(&o.key)).collect();
        let low = seqs.first().copied().unwrap_or(SegmentSeq::ZERO);
        prefetch(store, node, epoch, low, &seqs, &mut read).await?;
        // Walk the contiguous run from `low`, stopping at the first marker.
        let mut k = low;
        let mut fenced_at = None;
        let mut vanished = false;
        for s in &seqs {
            if *s != k {
                break;
            }
            if !read.contains_key(s) {
                let key = segment_key(node, epoch, *s);
                let Some(bytes) = store.get(&key, None).await? else {
                    // Truncated from the front meanwhile (its records are
                    // committed). Never fence at a freed key: list again.
                    vanished = true;
                    break;
                };
                read.insert(*s, decode_wal_object(&key, &bytes)?);
            }
            if let Some(WalObject::Fence(_)) = read.get(s) {
                fenced_at = Some(*s);
                break;
            }
            k = k.next();
        }
        tracing::debug!(%node, %epoch, listed = seqs.len(), first = ?seqs.first(), last = ?seqs.last(), run_end = %k, fenced_at = ?fenced_at, "takeover listing");
        if let Some(fence_seq) = fenced_at {
            return Ok(collect(read, low, fence_seq));
        }
        if vanished {
            continue;
        }
        let marker = FenceMarker {
            fenced_node: node.clone(),
            fenced_epoch: epoch,
            seq: k,
            holder: fencer.holder.clone(),
            holder_epoch: fencer.holder_epoch,
            log_index: fencer.log_index,
        };
        let key = segment_key(node, epoch, k);
        match store.put_if_absent(&key, encode_fence_marker(&marker)).await {
            Ok(PutOutcome::Created) => {
                crate::telemetry::count("sluice_wal_fences_total", &[]);
                return Ok(collect(read, low, k));
            }
            // The writer raced us (or our earlier attempt landed): list again.
            Ok(PutOutcome::AlreadyExists) => {}
            Err(e) if e.retryable => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// GETs in flight at once while reading a dead incarnation's WAL.
const READ_PARALLELISM: usize = 16;

/// Read the contiguous run from `low` concurrently (the walk then finds them
/// in `read`); objects that vanished meanwhile are simply not cached.
async fn prefetch(
    store: &DynStore,
    node: &NodeId,
    epoch: NodeEpoch,
    low: SegmentSeq,
    seqs: &[SegmentSeq],
    read: &mut BTreeMap<SegmentSeq, WalObject>,
) -> Result<(), TakeoverError> {
    use futures::StreamExt;
    let run: Vec<SegmentSeq> = seqs
        .iter()
        .enumerate()
        .take_while(|(i, s)| s.0 == low.0 + *i as u64)
        .map(|(_, s)| *s)
        .filter(|s| !read.contains_key(s))
        .collect();
    let mut fetched = futures::stream::iter(run)
        .map(|seq| async move {
            let key = segment_key(node, epoch, seq);
            (seq, key.clone(), store.get(&key, None).await)
        })
        .buffered(READ_PARALLELISM);
    while let Some((seq, key, got)) = fetched.next().await {
        if let Some(bytes) = got? {
            read.insert(seq, decode_wal_object(&key, &bytes)?);
        }
    }
    Ok(())
}

/// The segments `low..fence_seq`, in order.
fn collect(mut read: BTreeMap<SegmentSeq, WalObject>, low: SegmentSeq, fence_seq: SegmentSeq) -> FencedWal {
    let mut segments = Vec::new();
    let mut seq = low;
    while seq < fence_seq {
        if let Some(WalObject::Segment(s)) = read.remove(&seq) {
            segments.push(s);
        }
        seq = seq.next();
    }
    FencedWal { fence_seq, segments }
}

/// What replay needs to know of a stream being recovered.
#[derive(Debug, Clone, Copy)]
pub struct Recovering {
    /// The stream epoch the dead incarnation held.
    pub stream_epoch: StreamEpoch,
    pub committed_end: Offset,
}

/// Step 2: per stream, the entries at or above its committed end, in order
/// and contiguous. Streams without such entries are absent from the result.
pub fn replay(
    segments: &[Segment],
    streams: &BTreeMap<StreamId, Recovering>,
) -> Result<BTreeMap<StreamId, Vec<WalEntry>>, TakeoverError> {
    let mut tails: BTreeMap<StreamId, Vec<WalEntry>> = BTreeMap::new();
    let mut next: BTreeMap<StreamId, Offset> = streams.iter().map(|(s, r)| (*s, r.committed_end)).collect();
    for segment in segments {
        for entry in &segment.entries {
            let Some(r) = streams.get(&entry.stream) else { continue };
            if entry.stream_epoch != r.stream_epoch || entry.end_offset() <= r.committed_end {
                continue; // an earlier epoch's, or already in data objects
            }
            let expected = next[&entry.stream];
            if entry.base_offset != expected {
                return Err(TakeoverError::Gap {
                    stream: entry.stream,
                    expected,
                    found: entry.base_offset,
                });
            }
            next.insert(entry.stream, entry.end_offset());
            tails.entry(entry.stream).or_default().push(entry.clone());
        }
    }
    Ok(tails)
}

#[cfg(test)]
mod tests;
