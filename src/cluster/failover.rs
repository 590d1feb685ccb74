//! WAL takeover of a dead incarnation (failover steps 1-3): fence its WAL,
//! replay what was not yet in data objects, upload it, and close its streams
//! at their recovered ends in one `FinishWalTakeover`.

use super::Context;
use crate::ids::{NodeEpoch, NodeId, StreamId};
use crate::meta::producers::{ProducerBatch, ProducerTable};
use crate::meta::txn_index::TxnBatch;
use crate::meta::writers::WriterTable;
use crate::meta::{ChunkCommit, Command, IndexedChunk, Outcome, StreamState, View};
use crate::stream::dataobj::DataObjectBuilder;
use crate::stream::keys;
use crate::wal::segment::WalEntry;
use crate::wal::takeover::{fence_and_read, replay, Fencer, Recovering};
use std::collections::BTreeMap;

/// Incarnations that are dead (fenced or replaced) but still have open or
/// recovering streams.
pub fn dead_incarnations(view: &View) -> Vec<(NodeId, NodeEpoch)> {
    let mut out: Vec<(NodeId, NodeEpoch)> = view
        .streams
        .values()
        .filter_map(|r| match &r.state {
            StreamState::Open { node, node_epoch } | StreamState::Recovering { node, node_epoch, .. } => view
                .incarnation_dead(node, *node_epoch)
                .then(|| (node.clone(), *node_epoch)),
            _ => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Where an idempotent producer's WAL entry landed.
fn producer_batch(e: &WalEntry) -> Option<ProducerBatch> {
    e.producer.map(|p| ProducerBatch {
        producer_id: p.producer_id,
        producer_epoch: p.producer_epoch,
        first_seq: p.base_sequence,
        last_seq: ProducerBatch::last_seq_of(p.base_sequence, e.record_count),
        base: e.base_offset,
        count: e.record_count,
    })
}

/// Take over one dead incarnation's WAL. Idempotent: redoing it after an
/// interruption gives the same result.
#[tracing::instrument(name = "wal_takeover", skip_all, fields(dead = %dead, dead_epoch = %dead_epoch))]
pub async fn take_over(node: &dyn Context, dead: &NodeId, dead_epoch: NodeEpoch) -> anyhow::Result<()> {
    let (me, my_epoch) = node.me();
    let (data, wal) = node.stores();
    let started = tokio::time::Instant::now();
    tracing::info!(node = %dead, epoch = %dead_epoch, "taking over WAL");
    let begin = Command::BeginWalTakeover {
        node: dead.clone(),
        epoch: dead_epoch,
    };
    if let Outcome::Rejected(r) = node.propose(begin).await? {
        anyhow::bail!("BeginWalTakeover of {dead} {dead_epoch} refused: {r}");
    }
    let (streams, index) = {
        let view = node.view();
        let streams: BTreeMap<StreamId, Recovering> = view
            .streams
            .iter()
            .filter(|(_, r)| matches!(&r.state, StreamState::Recovering { node, node_epoch, .. } if node == dead && *node_epoch == dead_epoch))
            .map(|(id, r)| (*id, Recovering { stream_epoch: r.stream_epoch, committed_end: r.committed_end }))
            .collect();
        (streams, view.applied)
    };
    let fencer = Fencer {
        holder: me.clone(),
        holder_epoch: my_epoch,
        log_index: index,
    };
    let fenced = fence_and_read(wal, dead, dead_epoch, &fencer).await?;
    let tails = replay(&fenced.segments, &streams)?;
    let mut chunks = Vec::new();
    if !tails.is_empty() {
        let mut builder = DataObjectBuilder::new();
        for (stream, entries) in &tails {
            let base = entries[0].base_offset;
            let end = entries.last().expect("non-empty").end_offset();
            let max_ts = entries.iter().map(|e| e.max_timestamp).max().unwrap_or(0);
            let parts: Vec<bytes::Bytes> = entries.iter().map(|e| e.batch.clone()).collect();
            builder.add_chunk(*stream, base, end, max_ts, end.since(base), &parts);
        }
        let (body, metas) = builder.finish();
        let key = keys::data_object_key(&me, my_epoch, node.clock().now_ms());
        data.put_if_absent(&key, body).await?;
        for m in metas {
            chunks.push(ChunkCommit {
                stream: m.stream,
                stream_epoch: streams[&m.stream].stream_epoch,
                producers: ProducerTable::compact(tails[&m.stream].iter().filter_map(producer_batch)),
                writers: WriterTable::of_batches(tails[&m.stream].iter().map(|e| &e.batch[..])),
                txns: TxnBatch::compact(
                    tails[&m.stream]
                        .iter()
                        .filter_map(|e| TxnBatch::of("a replayed WAL entry", &e.batch)),
                ),
                chunk: IndexedChunk {
                    base: m.base_offset,
                    end: m.end_offset,
                    key: key.clone(),
                    byte_start: m.byte_start,
                    byte_end: m.byte_end,
                    max_timestamp: m.max_timestamp,
                    crc: m.crc,
                },
            });
        }
    }
    let records: u64 = chunks.iter().map(|c| c.chunk.end.since(c.chunk.base)).sum();
    let finish = Command::FinishWalTakeover {
        node: dead.clone(),
        epoch: dead_epoch,
        chunks,
    };
    match node.propose(finish).await? {
        Outcome::Applied => {
            crate::telemetry::count("sluice_wal_takeovers_total", &[("outcome", "finished")]);
            crate::telemetry::observe("sluice_wal_takeover_seconds", &[], started.elapsed());
            tracing::info!(node = %dead, epoch = %dead_epoch, streams = streams.len(), segments = fenced.segments.len(), records, "WAL takeover finished");
            Ok(())
        }
        other => anyhow::bail!("FinishWalTakeover of {dead} {dead_epoch} refused: {other:?}"),
    }
}
