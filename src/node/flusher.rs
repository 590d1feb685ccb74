//! Moves durable tails into data objects: one object holds chunks of many
//! streams, then `CommitObjects` indexes them and only then do the tails and
//! (in `truncate_loop`) the WAL segments that held them go.

use super::{Node, Phase};
use crate::ids::Offset;
use crate::meta::{ChunkCommit, Command, IndexedChunk, Outcome, StreamState};
use crate::stream::dataobj::DataObjectBuilder;
use crate::stream::keys;
use crate::stream::partition::{Flushable, OpenStream};
use crate::telemetry;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Largest data object one flush writes.
const MAX_OBJECT_BYTES: usize = 64 << 20;

pub async fn run(node: Arc<Node>) {
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if node.phase() == Phase::Fenced {
            return;
        }
        telemetry::gauge("sluice_buffered_bytes", &[], node.budget.used() as f64);
        let due = due_streams(&node);
        if !due.is_empty() {
            flush_now(&node, &due).await;
        }
    }
}

/// Streams whose tail is big enough, old enough, or needed to relieve the
/// node's memory budget, with the tails that are well on their way there
/// riding along (see [`flush_set`]).
fn due_streams(node: &Node) -> Vec<Arc<OpenStream>> {
    let pressure = node.budget.used() > node.budget.limit() / 2;
    let tails = node.open_streams().into_iter().filter_map(|s| {
        let (bytes, oldest) = s.unflushed();
        let tail = Tail {
            bytes,
            age: oldest.map_or(Duration::ZERO, |t| t.elapsed()),
        };
        (bytes > 0).then_some((s, tail))
    });
    flush_set(
        tails.collect(),
        pressure,
        node.config.flush_bytes,
        node.config.flush_interval,
    )
}

/// A stream's unflushed tail, as the flush policy sees it.
#[derive(Debug, Clone, Copy)]
struct Tail {
    bytes: usize,
    /// How long its oldest unflushed record has waited.
    age: Duration,
}

/// Which of the non-empty `tails` (each beside its stream) go into the next data
/// object. Nothing until one is due (`flush_bytes` reached or `interval`
/// waited; all of them under memory `pressure`); then that one, and every
/// other past half of either bound. Each data object is a PUT, and the
/// streams of one node fill at different moments: flushed one by one, 16
/// partitions at 1 MiB/s made a data object every 3-7 s (145-299 PUTs per
/// GiB); riding along, they share one. The half bounds keep a stream that
/// only just started from being cut into slivers.
fn flush_set<T>(tails: Vec<(T, Tail)>, pressure: bool, flush_bytes: usize, interval: Duration) -> Vec<T> {
    let past = |t: &Tail, bytes: usize, age: Duration| t.bytes >= bytes || t.age >= age;
    if !pressure && !tails.iter().any(|(_, t)| past(t, flush_bytes, interval)) {
        return Vec::new();
    }
    tails
        .into_iter()
        .filter(|(_, t)| pressure || past(t, flush_bytes.div_ceil(2), interval / 2))
        .map(|(s, _)| s)
        .collect()
}

/// Flush the durable tails of `streams` into one data object and commit it.
/// Commits that cannot land are retried with backoff while the node lives
/// (a metadata outage must not lose or duplicate anything).
pub async fn flush_now(node: &Node, streams: &[Arc<OpenStream>]) {
    let mut taken: Vec<(Arc<OpenStream>, Flushable)> = Vec::new();
    let mut size = 0;
    for s in streams {
        if size >= MAX_OBJECT_BYTES {
            break;
        }
        if let Some(f) = s.begin_flush(node.config.flush_bytes.clamp(1, MAX_OBJECT_BYTES)) {
            size += f.bytes;
            taken.push((s.clone(), f));
        }
    }
    if taken.is_empty() {
        return;
    }
    let started = Instant::now();
    let mut builder = DataObjectBuilder::new();
    for (s, f) in &taken {
        builder.add_chunk(s.id, f.base, f.end, f.max_timestamp, f.end.since(f.base), &f.parts);
    }
    let (body, metas) = builder.finish();
    let key = keys::data_object_key(&node.id, node.epoch, node.clock.now_ms());
    if let Err(e) = put_object(node, &key, body).await {
        tracing::warn!(error = %e, %key, "data object upload failed; will retry");
        for (s, _) in &taken {
            s.abort_flush();
        }
        return;
    }
    let chunks: Vec<ChunkCommit> = taken
        .iter()
        .zip(&metas)
        .map(|((s, f), m)| ChunkCommit {
            stream: s.id,
            stream_epoch: s.epoch,
            producers: f.producers.clone(),
            writers: f.writers.clone(),
            txns: f.txns.clone(),
            chunk: IndexedChunk {
                base: m.base_offset,
                end: m.end_offset,
                key: key.clone(),
                byte_start: m.byte_start,
                byte_end: m.byte_end,
                max_timestamp: m.max_timestamp,
                crc: m.crc,
            },
        })
        .collect();
    let commit = Command::CommitObjects {
        node: node.id.clone(),
        epoch: node.epoch,
        chunks,
    };
    let mut backoff = Duration::from_millis(50);
    loop {
        match node.meta.propose(commit.clone()).await {
            Ok(Outcome::Applied) => {
                for (s, f) in &taken {
                    s.finish_flush(f.end);
                }
                telemetry::observe("sluice_flush_seconds", &[("outcome", "committed")], started.elapsed());
                telemetry::count_n("sluice_flush_bytes_total", &[], size as u64);
                break;
            }
            Ok(outcome) => {
                // An earlier ambiguous attempt may have applied; otherwise the
                // streams moved and the object is an orphan for GC.
                settle_rejected(node, &taken);
                tracing::info!(?outcome, %key, "commit refused");
                break;
            }
            Err(e) => {
                if node.phase() == Phase::Fenced {
                    break;
                }
                tracing::warn!(error = %e, "CommitObjects did not land; retrying");
                telemetry::count("sluice_flush_commit_retries_total", &[]);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

async fn put_object(node: &Node, key: &str, body: bytes::Bytes) -> Result<(), crate::store::StoreError> {
    let mut backoff = Duration::from_millis(20);
    for attempt in 0..8 {
        match node.backends.data.put_if_absent(key, body.clone()).await {
            Ok(_) => return Ok(()),
            Err(e) if attempt == 7 || !e.retryable => return Err(e),
            Err(_) => {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
        }
    }
    unreachable!("the loop returns on its last attempt")
}

fn settle_rejected(node: &Node, taken: &[(Arc<OpenStream>, Flushable)]) {
    let view = node.meta.view();
    for (s, f) in taken {
        let committed = view.streams.get(&s.id).map_or(Offset::ZERO, |r| r.committed_end);
        if committed >= f.end {
            s.finish_flush(f.end);
        } else {
            s.abort_flush();
        }
    }
}

/// Deletes the WAL segments that flushes made redundant. Its own task, so a
/// flush (and a stream being closed or handed over, which waits for one)
/// never waits for deletes: on S3 a backlog of small segments took seconds.
pub async fn truncate_loop(node: Arc<Node>) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if node.phase() == Phase::Fenced {
            return;
        }
        // The last segment is never deleted; with one left there is nothing to do.
        if node.wal.retained_segments() > 1 {
            truncate_wal(&node).await;
        }
    }
}

/// Delete WAL segments whose every entry is in data objects (or belongs to
/// a deleted stream).
pub async fn truncate_wal(node: &Node) {
    // Only the streams in retained segments matter (a handful under load),
    // not every stream in the view.
    let streams = node.wal.retained_streams();
    let committed: std::collections::BTreeMap<_, _> = {
        let view = node.meta.view();
        streams
            .into_iter()
            .filter_map(|id| {
                let r = view.streams.get(&id)?;
                Some((id, (r.committed_end, r.state == StreamState::Deleted)))
            })
            .collect()
    };
    node.wal
        .truncate(|stream, end| committed.get(&stream).is_none_or(|(c, deleted)| *deleted || *c >= end))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn tail(bytes: usize, secs: u64) -> Tail {
        Tail {
            bytes,
            age: Duration::from_secs(secs),
        }
    }

    /// The tails numbered from 0, so a test names the chosen by index.
    fn numbered(tails: &[Tail]) -> Vec<(usize, Tail)> {
        tails.iter().copied().enumerate().collect()
    }

    #[test]
    fn nothing_goes_before_a_tail_is_due() {
        let tails = [tail(MIB, 9), tail(7 * MIB, 1)];
        assert!(flush_set(numbered(&tails), false, 8 * MIB, Duration::from_secs(10)).is_empty());
    }

    #[test]
    fn a_due_tail_takes_those_past_half_way_along() {
        let interval = Duration::from_secs(10);
        // Due by age; one half-aged, one half-full, one fresh and small.
        let tails = [tail(MIB, 10), tail(MIB, 6), tail(5 * MIB, 1), tail(MIB, 2)];
        assert_eq!(flush_set(numbered(&tails), false, 8 * MIB, interval), vec![0, 1, 2]);
        // Due by size.
        let tails = [tail(MIB, 4), tail(8 * MIB, 0)];
        assert_eq!(flush_set(numbered(&tails), false, 8 * MIB, interval), vec![1]);
    }

    #[test]
    fn memory_pressure_flushes_every_tail() {
        let tails = [tail(1, 0), tail(2, 0)];
        assert_eq!(
            flush_set(numbered(&tails), true, 8 * MIB, Duration::from_secs(10)),
            vec![0, 1]
        );
        assert!(flush_set(numbered(&[]), true, 8 * MIB, Duration::from_secs(10)).is_empty());
    }
}
