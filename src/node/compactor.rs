//! Log compaction of the compacted streams this node owns (see
//! `docs/design/compaction.md`): every `--compaction-interval-sec` each
//! open stream of a `compact` / `compact,delete` topic is planned
//! ([`compact::plan`]); a due run of chunks is read, rewritten
//! ([`compact::rewrite`]), written as a new data object, and swapped in
//! with `CompactChunks`. The swap names the chunks it replaces, the
//! stream's epoch and start, so a stale view, a move of the stream, a
//! trim, or a concurrent flush or compaction makes it rejected, and the
//! new object is then an orphan for GC. The replaced objects are deleted
//! only by GC, after its grace, once nothing indexes them.
//!
//! The owner compacts because it alone commits the stream's chunks, so
//! its epoch is the one the swap checks. A compactor that dies mid-way
//! leaves at most an unreferenced object. After each run it pauses for as
//! long as `--compaction-bytes-per-sec` asks for the bytes it read.

use super::{Node, Phase};
use crate::meta::{Command, IndexedChunk, Outcome};
use crate::stream::compact::{self, Due, Rules};
use crate::stream::dataobj::DataObjectBuilder;
use crate::stream::keys;
use crate::stream::partition::OpenStream;
use crate::telemetry;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

pub async fn run(node: Arc<Node>) {
    let every = node.config.compaction_interval;
    if every.is_zero() {
        return;
    }
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if node.phase() == Phase::Fenced {
            return;
        }
        for s in node.open_streams() {
            if node.phase() != Phase::Ready {
                break;
            }
            match compact_stream(&node, &s).await {
                Ok(Some(read)) => {
                    let pause = read as f64 / node.config.compaction_bytes_per_sec as f64;
                    tokio::time::sleep(Duration::from_secs_f64(pause.min(60.0))).await;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(stream = %s.id, "compaction failed: {e}"),
            }
        }
    }
}

/// Compact `s` if a run of its chunks is due: the bytes read when one was
/// (whether or not its swap applied).
pub async fn compact_stream(node: &Node, s: &OpenStream) -> Result<Option<u64>, String> {
    let now_ms = node.clock.now_ms();
    let (run, config, start, rules) = {
        let view = node.meta.view();
        let Some(row) = view.streams.get(&s.id) else {
            return Ok(None);
        };
        let Some(topic) = view.topics.get(&row.topic_name).filter(|t| t.config.compacts()) else {
            return Ok(None);
        };
        let txns = row.producers.txns();
        let due = Due {
            stable_end: txns.last_stable(row.committed_end),
            compacted_end: row.compacted_end,
            now_ms,
        };
        let stream = s.id.to_string();
        let ratio = compact::dirty_ratio(&row.chunks, row.compacted_end);
        telemetry::gauge("sluice_compaction_dirty_ratio", &[("stream", &stream)], ratio);
        let lag_ms = compact::lag_ms(&row.chunks, row.compacted_end, now_ms);
        telemetry::gauge(
            "sluice_compaction_lag_seconds",
            &[("stream", &stream)],
            lag_ms as f64 / 1e3,
        );
        let Some(run) = compact::plan(&row.chunks, &topic.config, due) else {
            return Ok(None);
        };
        let (first, last) = (run[0].base, run[run.len() - 1].end);
        let min_lag = topic.config.min_compaction_lag_ms.unwrap_or(0);
        let rules = Rules {
            tombstones_before_ms: now_ms
                .saturating_sub(min_lag)
                .saturating_sub(topic.config.delete_retention_ms()),
            aborted: txns.aborted_in(first, last),
        };
        (run, topic.config.clone(), row.start, rules)
    };
    let started = Instant::now();
    tracing::info!(
        stream = %s.id,
        offsets = %format_args!("{}..{}", run[0].base, run[run.len() - 1].end),
        chunks = run.len(),
        "compaction run starts"
    );
    let mut data = Vec::with_capacity(run.len());
    for c in &run {
        data.push(node.reader.fetch(c).await.map_err(|e| e.message)?);
    }
    let read: u64 = run.iter().map(|c| c.byte_end - c.byte_start).sum();
    let object = format!("compaction of {}", s.id);
    let rewrite = compact::rewrite(&object, &data, &rules).map_err(|e| e.to_string())?;
    if rewrite.batches.is_empty() {
        // The run's last record always stays, so only a run with no
        // record at all gets here; an empty chunk could not be read back.
        return Ok(Some(read));
    }
    let (base, end) = (run[0].base, run[run.len() - 1].end);
    let max_timestamp = run.iter().map(|c| c.max_timestamp).max().unwrap_or(0);
    let mut builder = DataObjectBuilder::new();
    builder.add_chunk(s.id, base, end, max_timestamp, rewrite.records_out, &rewrite.batches);
    let (body, metas) = builder.finish();
    let key = keys::data_object_key(&node.id, node.epoch, now_ms);
    node.backends
        .data
        .put_if_absent(&key, body)
        .await
        .map_err(|e| format!("writing {key}: {e}"))?;
    let m = &metas[0];
    let chunk = IndexedChunk {
        base: m.base_offset,
        end: m.end_offset,
        key: key.clone(),
        byte_start: m.byte_start,
        byte_end: m.byte_end,
        max_timestamp: m.max_timestamp,
        crc: m.crc,
    };
    let swap = Command::CompactChunks {
        stream: s.id,
        stream_epoch: s.epoch,
        start,
        replaced: run,
        chunks: vec![chunk],
    };
    let outcome = node.meta.propose(swap).await.map_err(|e| e.to_string())?;
    let applied = outcome == Outcome::Applied;
    let label = if applied { "applied" } else { "rejected" };
    telemetry::observe("sluice_compaction_seconds", &[("outcome", label)], started.elapsed());
    if applied {
        telemetry::count_n("sluice_compaction_bytes_in_total", &[], rewrite.bytes_in);
        telemetry::count_n("sluice_compaction_bytes_out_total", &[], rewrite.bytes_out);
        telemetry::count_n(
            "sluice_compaction_records_removed_total",
            &[],
            rewrite.records_in - rewrite.records_out,
        );
        tracing::info!(
            stream = %s.id,
            offsets = %format_args!("{base}..{end}"),
            bytes_in = rewrite.bytes_in,
            bytes_out = rewrite.bytes_out,
            records_in = rewrite.records_in,
            records_out = rewrite.records_out,
            policy = config.cleanup_policy.map_or("delete", |p| p.as_str()),
            "compacted"
        );
    } else {
        tracing::info!(stream = %s.id, ?outcome, %key, "compaction swap refused; the object is left to GC");
    }
    Ok(Some(read))
}
