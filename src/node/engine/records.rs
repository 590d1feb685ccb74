//! [`Records`] for [`Node`]: appends (plain, Kafka batches, Durable Streams
//! writes) go to the stream this node owns (or are forwarded to its owner
//! through `crate::route`), reads come from the committed chunks in the
//! object store and the local tail.

use super::super::{Node, Phase};
use crate::api::*;
use crate::batch::Record;
use crate::ids::{Offset, StreamEpoch, StreamId};
use crate::meta::writers::{DsAppend, DsWrite};
use crate::meta::StreamState;
use crate::route::wire;
use async_trait::async_trait;

/// See [`Node::read_position`].
struct ReadPosition {
    start: Offset,
    hw: Offset,
    /// The last stable offset (see [`OpenStream::last_stable`](crate::stream::partition::OpenStream::last_stable)).
    last_stable: Offset,
    chunks: Vec<crate::meta::IndexedChunk>,
    local: Option<std::sync::Arc<crate::stream::partition::OpenStream>>,
    /// The view's transaction index of a stream no node has open.
    txns: Option<crate::meta::txn_index::TxnIndex>,
}

impl ReadPosition {
    /// The aborted transactions with records in `from..to`.
    fn aborted_in(&self, from: Offset, to: Offset) -> Vec<crate::meta::txn_index::Aborted> {
        match (&self.local, &self.txns) {
            (Some(s), _) => s.aborted_in(from, to),
            (None, Some(t)) => t.aborted_in(from, to),
            (None, None) => Vec::new(),
        }
    }
}

impl Node {
    /// Where a stream can be read here: its start, the high watermark this
    /// node can vouch for (its own if it owns the stream, else the committed
    /// end of a closed stream), the committed chunks, and the local stream.
    fn read_position(&self, stream: StreamId) -> ApiResult<ReadPosition> {
        let (start, committed_end, chunks, open_elsewhere, view_txns) = {
            let view = self.meta.view();
            let row = view.streams.get(&stream).ok_or_else(|| self.not_here(stream))?;
            let elsewhere = !matches!(row.state, StreamState::Closed)
                && !matches!(&row.state, StreamState::Open { node, node_epoch } if node == &self.id && *node_epoch == self.epoch);
            let txns = row.producers.txns();
            let txns = (!txns.is_empty()).then(|| txns.clone());
            (row.start, row.committed_end, row.chunks.clone(), elsewhere, txns)
        };
        let local = self.open_stream(stream);
        let (hw, last_stable, txns) = match &local {
            Some(s) => (s.high_watermark(), s.last_stable(), None),
            None if open_elsewhere => return Err(self.not_here(stream)),
            None => {
                let stable = view_txns
                    .as_ref()
                    .map_or(committed_end, |t| t.last_stable(committed_end));
                (committed_end, stable, view_txns)
            }
        };
        Ok(ReadPosition {
            start,
            hw,
            last_stable: last_stable.max(start),
            chunks,
            local,
            txns,
        })
    }

    async fn read_once(&self, stream: StreamId, from: ReadFrom, req: &ReadRequest) -> ApiResult<(ReadResult, bool)> {
        let ReadPosition {
            start,
            hw,
            chunks,
            local,
            ..
        } = self.read_position(stream)?;
        let from = match from {
            ReadFrom::Start => start,
            ReadFrom::End => hw,
            ReadFrom::At(o) => o,
        };
        if from < start || from > hw {
            return Err(ApiError {
                code: ErrorCode::OffsetOutOfRange,
                message: format!("offset {} is outside {}..{} of stream {stream}", from.0, start.0, hw.0),
                start_offset: Some(start),
            });
        }
        let result = |records: Vec<(Offset, Record)>| {
            count_read(
                "records",
                records.len(),
                records
                    .iter()
                    .map(|(_, r)| crate::stream::partition::record_size(r))
                    .sum(),
            );
            let next_offset = records.last().map_or(from, |(o, _)| o.next());
            ReadResult {
                records,
                next_offset,
                high_watermark: hw,
                start_offset: start,
            }
        };
        if from == hw {
            return Ok((result(Vec::new()), true));
        }
        if let Some(s) = &local {
            if let Some(r) = s.read_tail(from, hw, req.limit, req.max_bytes) {
                return Ok((result(r?), false));
            }
        }
        let mut records = self.reader.read(&chunks, from, req.limit, req.max_bytes).await?;
        // Never past the high watermark this answer reports. The view's
        // chunks can run past it on a node fenced without knowing yet: its
        // view already holds the new owner's flushes while its own stream,
        // not yet closed, stops at `hw` (simulation seed 37296).
        records.truncate(records.partition_point(|(o, _)| *o < hw));
        // The committed chunks ended below the request's bounds: go on in the tail.
        let next = records.last().map_or(from, |(o, _)| o.next());
        if let Some(s) = &local {
            let used: usize = records
                .iter()
                .map(|(_, r)| crate::stream::partition::record_size(r))
                .sum();
            if records.len() < req.limit && used < req.max_bytes && next < hw {
                if let Some(more) = s.read_tail(next, hw, req.limit - records.len(), req.max_bytes - used) {
                    records.extend(more?);
                }
            }
        }
        Ok((result(records), false))
    }

    /// A read as [`Records::read`] serves it, after the stream is resolved.
    async fn read_stream(
        &self,
        stream: StreamId,
        topic: &str,
        partition: u32,
        req: ReadRequest,
    ) -> ApiResult<ReadResult> {
        // Forwarded here by a node that sees the stream placed here while
        // this view has it unplaced: catch up rather than serve a stale end.
        let unplaced = matches!(
            self.meta.view().streams.get(&stream).map(|r| &r.state),
            Some(StreamState::Closed)
        );
        if is_forwarded() && unplaced {
            // If this fails the read below is answered from the older view,
            // as "not here" (retryable), never as data past what we know.
            let _ = self.meta.sync(std::time::Duration::from_millis(500)).await;
        }
        let req = ReadRequest {
            limit: req.limit.max(1),
            wait: req.wait.min(self.config.max_wait),
            ..req
        };
        if self.open_stream(stream).is_none() {
            let routed = tokio::select! {
                r = self.router().read(self, stream, topic, partition, &req) => r,
                _ = self.live_reads_ended() => Some(Err(ApiError::unavailable("node is shutting down"))),
            };
            if let Some(r) = routed {
                return r;
            }
        }
        let (first, at_end) = if req.committed {
            self.read_committed_once(stream, req.from, &req).await?
        } else {
            self.read_once(stream, req.from, &req).await?
        };
        if !at_end || req.wait.is_zero() {
            return Ok(first);
        }
        // Long poll: wait for the high watermark to pass `from`, the time to
        // run out, or live reads to end.
        let from = ReadFrom::At(first.next_offset);
        let deadline = tokio::time::Instant::now() + req.wait.min(self.config.max_wait);
        let Some(s) = self.open_here_by(stream, deadline).await? else {
            return Ok(first);
        };
        let mut hw = s.watch_high_watermark();
        let target = first.next_offset;
        // The last stable offset moves only as the high watermark does.
        let visible = |s: &crate::stream::partition::OpenStream| {
            if req.committed {
                s.last_stable()
            } else {
                s.high_watermark()
            }
        };
        while visible(&s) <= target {
            tokio::select! {
                changed = hw.changed() => if changed.is_err() { return Ok(first) },
                _ = tokio::time::sleep_until(deadline) => return Ok(first),
                _ = self.live_reads_ended() => return Err(ApiError::unavailable("node is shutting down")),
            }
        }
        if req.committed {
            return Ok(self.read_committed_once(stream, from, &req).await?.0);
        }
        Ok(self.read_once(stream, from, &req).await?.0)
    }
}

/// How often a marker is judged again when its partition's open
/// transactions changed meanwhile, before the coordinator is told to retry.
const MARKER_JUDGEMENTS: usize = 4;

impl Node {
    /// Whether the marker of `of` may end `producer_id`'s transaction open
    /// in a partition: the log's newest record of the transactional id
    /// still has that transaction (begun at `of.started_at`) ending. The
    /// log is read first: a view that has not seen the transaction
    /// complete and the producer's next one begin (the batch open in the
    /// partition may be that one's, verified on another node) would take
    /// a late marker for a current one. A record of another producer id
    /// (the id was given a new one) leaves the marker unjudged.
    async fn marker_is_current(&self, of: &MarkerOf, producer_id: i64) -> ApiResult<bool> {
        const WAIT: std::time::Duration = std::time::Duration::from_secs(1);
        if !self.meta.sync(WAIT).await {
            return Err(ApiError::unavailable(
                "the metadata log could not be read to check a transaction marker",
            ));
        }
        let view = self.meta.view();
        let Some(row) = view.txns.get(&of.transactional_id) else {
            return Ok(true);
        };
        let ending = matches!(
            row.state,
            crate::meta::txn::TxnState::PrepareCommit | crate::meta::txn::TxnState::PrepareAbort
        );
        Ok(row.producer_id != producer_id || (row.started_at.0 == of.started_at && ending))
    }

    /// A committed read (see [`ReadRequest::committed`]) of what is below
    /// the last stable offset, as records; `true` when `from` is at it.
    async fn read_committed_once(
        &self,
        stream: StreamId,
        from: ReadFrom,
        req: &ReadRequest,
    ) -> ApiResult<(ReadResult, bool)> {
        let mut at = match from {
            ReadFrom::At(o) => o,
            ReadFrom::Start => self.read_position(stream)?.start,
            ReadFrom::End => self.read_position(stream)?.last_stable,
        };
        // A range of markers and aborted batches only: read on past it (a
        // few times) rather than answer nothing.
        let mut tries = 8;
        loop {
            let read = self.read_batches_once(stream, at, req.max_bytes, true).await?;
            let scanned_end = read.batches.last().map_or(at, |b| crate::batch::end_offset(b));
            let scanned_none = read.batches.is_empty();
            let data = crate::meta::txn_index::committed_data(read.batches, &read.aborted);
            let (records, next) = wire::committed_records(&data, at, scanned_end, req.limit, req.max_bytes)?;
            let at_end = records.is_empty() && next >= read.last_stable;
            tries -= 1;
            if !records.is_empty() || scanned_none || at_end || tries == 0 {
                let result = ReadResult {
                    records,
                    next_offset: next,
                    high_watermark: read.high_watermark,
                    start_offset: read.start_offset,
                };
                return Ok((result, at_end));
            }
            at = next;
        }
    }

    async fn read_batches_once(
        &self,
        stream: StreamId,
        from: Offset,
        max_bytes: usize,
        committed: bool,
    ) -> ApiResult<BatchRead> {
        let position = self.read_position(stream)?;
        let ReadPosition {
            start,
            hw,
            last_stable,
            ref chunks,
            ref local,
            ..
        } = position;
        if from < start || from > hw {
            return Err(ApiError {
                code: ErrorCode::OffsetOutOfRange,
                message: format!("offset {} is outside {}..{} of stream {stream}", from.0, start.0, hw.0),
                start_offset: Some(start),
            });
        }
        let out = BatchRead {
            batches: Vec::new(),
            high_watermark: hw,
            start_offset: start,
            last_stable,
            aborted: Vec::new(),
        };
        // A read_committed reader stops at the last stable offset (it falls
        // on a batch boundary: the first batch of a transaction, or the end).
        let end = if committed { last_stable } else { hw };
        if from >= end {
            return Ok(out);
        }
        let answer = |mut out: BatchRead, batches: Vec<bytes::Bytes>| {
            if committed {
                let to = batches.last().map_or(from, |b| crate::batch::end_offset(b));
                out.aborted = position.aborted_in(from, to);
            }
            count_read("batches", batches.len(), batches.iter().map(|b| b.len()).sum());
            out.batches = batches;
            out
        };
        if let Some(s) = local {
            if let Some(b) = s.read_tail_batches(from, end, max_bytes) {
                return Ok(answer(out, b));
            }
        }
        let (mut batches, mut next) = self.reader.read_batches(chunks, from, max_bytes).await?;
        if let Some(past) = batches.iter().position(|b| crate::batch::base_offset(b) >= end) {
            batches.truncate(past);
            next = end;
        }
        if let Some(s) = local {
            let used: usize = batches.iter().map(|b| b.len()).sum();
            if used < max_bytes && next < end {
                if let Some(more) = s.read_tail_batches(next, end, max_bytes - used) {
                    let room = max_bytes - used;
                    let mut taken = 0;
                    for b in more {
                        if (!batches.is_empty() || taken > 0) && taken + b.len() > room {
                            break;
                        }
                        taken += b.len();
                        batches.push(b);
                    }
                }
            }
        }
        Ok(answer(out, batches))
    }

    /// The stream once this node has it open, waiting for the view to open
    /// it here (a stream being placed or moved can only grow once it is);
    /// `None` at `deadline`, an error when live reads end (shutdown).
    async fn open_here_by(
        &self,
        stream: StreamId,
        deadline: tokio::time::Instant,
    ) -> ApiResult<Option<std::sync::Arc<crate::stream::partition::OpenStream>>> {
        loop {
            let mut applied = self.meta.subscribe();
            if let Some(s) = self.open_stream(stream) {
                return Ok(Some(s));
            }
            tokio::select! {
                _ = applied.changed() => {}
                _ = tokio::time::sleep_until(deadline) => return Ok(None),
                _ = self.live_reads_ended() => return Err(ApiError::unavailable("node is shutting down")),
            }
        }
    }
}

/// Reads served from this node's streams (forwarded reads count on the
/// owner): `sluice_read_total{kind}` counts records or batches, `sluice_read_bytes_total`
/// their payload bytes.
fn count_read(kind: &str, n: usize, bytes: usize) {
    crate::telemetry::count_n("sluice_read_total", &[("kind", kind)], n as u64);
    crate::telemetry::count_n("sluice_read_bytes_total", &[("kind", kind)], bytes as u64);
}

#[async_trait]
impl Records for Node {
    #[tracing::instrument(level = "debug", skip_all, fields(stream = %format_args!("{topic}/{partition}")))]
    async fn append(&self, topic: &str, partition: u32, records: Vec<Record>) -> ApiResult<Appended> {
        let stream = self.resolve_current(topic, partition).await?;
        if self.phase() != Phase::Ready {
            return Err(ApiError::unavailable(format!("node is {}", self.phase().as_str())));
        }
        let Some(s) = self.open_stream_soon(stream).await else {
            let routed = self.router().append(self, stream, topic, partition, &records).await;
            return routed.unwrap_or_else(|| Err(self.not_here(stream)));
        };
        let started = tokio::time::Instant::now();
        let result = s.append(&self.wal, &records).await;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        crate::telemetry::observe("sluice_append_seconds", &[("outcome", outcome)], started.elapsed());
        if result.is_ok() {
            crate::telemetry::count_n("sluice_appended_records_total", &[], records.len() as u64);
            let bytes: usize = records.iter().map(crate::stream::partition::record_size).sum();
            crate::telemetry::count_n("sluice_appended_bytes_total", &[], bytes as u64);
        }
        result
    }

    #[tracing::instrument(level = "debug", skip_all, fields(stream = %format_args!("{topic}/{partition}")))]
    async fn append_durable(
        &self,
        topic: &str,
        partition: u32,
        write: DsWrite,
        records: Vec<Record>,
    ) -> ApiResult<DsAppend> {
        let stream = self.resolve_current(topic, partition).await?;
        if self.phase() != Phase::Ready {
            return Err(ApiError::unavailable(format!("node is {}", self.phase().as_str())));
        }
        let Some(s) = self.open_stream_soon(stream).await else {
            let routed = (self.router())
                .append_durable(self, stream, topic, partition, &write, &records)
                .await;
            return routed.unwrap_or_else(|| Err(self.not_here(stream)));
        };
        let result = s.append_durable(&self.wal, &write, &records).await;
        if let Ok(DsAppend::Stored { count, .. }) = &result {
            crate::telemetry::count_n("sluice_appended_records_total", &[], u64::from(*count));
        }
        result
    }

    #[tracing::instrument(level = "debug", skip_all, fields(stream = %format_args!("{topic}/{partition}")))]
    async fn read(&self, topic: &str, partition: u32, req: ReadRequest) -> ApiResult<ReadResult> {
        let stream = self.resolve_current(topic, partition).await?;
        self.check_serving()?;
        if req.consistency == Consistency::Strong {
            let before = self.placement(stream);
            let result = self.read_stream(stream, topic, partition, req).await?;
            self.confirm_placement(stream, &before).await?;
            return Ok(result);
        }
        self.read_stream(stream, topic, partition, req).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(stream = %format_args!("{topic}/{partition}")))]
    async fn append_batch(&self, topic: &str, partition: u32, batch: bytes::Bytes) -> ApiResult<Appended> {
        let stream = self.resolve(topic, partition)?;
        if self.phase() != Phase::Ready {
            return Err(ApiError::unavailable(format!("node is {}", self.phase().as_str())));
        }
        // Forwarded by a node that may see the stream placed here first.
        let open = if is_forwarded() {
            self.open_stream_soon(stream).await
        } else {
            self.open_stream(stream)
        };
        let s = open.ok_or_else(|| self.not_here(stream))?;
        let started = tokio::time::Instant::now();
        let result = s.append_batch(&self.wal, &batch).await;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        crate::telemetry::observe("sluice_append_seconds", &[("outcome", outcome)], started.elapsed());
        if let Ok(a) = &result {
            crate::telemetry::count_n("sluice_appended_records_total", &[], u64::from(a.count));
            crate::telemetry::count_n("sluice_appended_bytes_total", &[], batch.len() as u64);
        }
        result
    }

    #[tracing::instrument(level = "debug", skip_all, fields(stream = %format_args!("{topic}/{partition}")))]
    async fn append_marker(
        &self,
        topic: &str,
        partition: u32,
        marker: bytes::Bytes,
        of: Option<crate::api::MarkerOf>,
    ) -> ApiResult<Appended> {
        let stream = self.resolve_current(topic, partition).await?;
        if self.phase() != Phase::Ready {
            return Err(ApiError::unavailable(format!("node is {}", self.phase().as_str())));
        }
        let info = crate::batch::parse_batch("a transaction marker", &marker)
            .ok()
            .filter(|i| i.is_control)
            .ok_or_else(|| ApiError::invalid("a transaction marker must be a control batch"))?;
        let Some(s) = self.open_stream_soon(stream).await else {
            let routed = self
                .router()
                .append_marker(self, stream, topic, partition, marker, of.as_ref())
                .await;
            return routed.unwrap_or_else(|| Err(self.not_here(stream)));
        };
        let Some(of) = of else {
            return s.append_batch(&self.wal, &marker).await;
        };
        // Judged away from the stream's lock (the log is read), then
        // appended only if what was judged still holds.
        for _ in 0..MARKER_JUDGEMENTS {
            let open = s.open_txn(info.producer_id);
            if open.is_some() && !self.marker_is_current(&of, info.producer_id).await? {
                tracing::info!(
                    stream = %stream,
                    transactional_id = of.transactional_id,
                    started_at = of.started_at,
                    "a late marker of a completed transaction appends nothing"
                );
                crate::telemetry::count("sluice_txn_late_markers_total", &[]);
                return Ok(Appended {
                    base: s.high_watermark(),
                    count: 0,
                });
            }
            if let Some(a) = s.append_marker(&self.wal, &marker, open).await? {
                return Ok(a);
            }
        }
        Err(ApiError::unavailable(format!(
            "the open transactions of {stream} kept changing while a marker was checked"
        )))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(stream = %format_args!("{topic}/{partition}")))]
    async fn read_batches(
        &self,
        topic: &str,
        partition: u32,
        from: Offset,
        max_bytes: usize,
        wait: std::time::Duration,
        committed: bool,
    ) -> ApiResult<BatchRead> {
        let stream = self.resolve(topic, partition)?;
        self.check_serving()?;
        let first = self.read_batches_once(stream, from, max_bytes, committed).await?;
        if !first.batches.is_empty() || wait.is_zero() {
            return Ok(first);
        }
        let deadline = tokio::time::Instant::now() + wait.min(self.config.max_wait);
        let Some(s) = self.open_here_by(stream, deadline).await? else {
            return Ok(first);
        };
        // The last stable offset moves only as the high watermark does (a
        // marker is durable, or the data of no transaction).
        let mut hw = s.watch_high_watermark();
        let visible = |s: &crate::stream::partition::OpenStream| {
            if committed {
                s.last_stable()
            } else {
                s.high_watermark()
            }
        };
        while visible(&s) <= from {
            tokio::select! {
                changed = hw.changed() => if changed.is_err() { return Ok(first) },
                _ = tokio::time::sleep_until(deadline) => return Ok(first),
                _ = self.live_reads_ended() => return Err(ApiError::unavailable("node is shutting down")),
            }
        }
        self.read_batches_once(stream, from, max_bytes, committed).await
    }

    async fn relay_subscription(
        &self,
        topic: &str,
        partition: u32,
        path_and_query: &str,
        last_event_id: Option<&str>,
    ) -> Option<ApiResult<ByteStream>> {
        let stream = self.resolve(topic, partition).ok()?;
        if self.open_stream(stream).is_some() {
            return None;
        }
        self.router().relay(self, stream, path_and_query, last_event_id).await
    }

    async fn leader_epoch_end(&self, topic: &str, partition: u32, epoch: StreamEpoch) -> ApiResult<Offset> {
        let id = self.resolve(topic, partition)?;
        let Some(open) = self.open_stream(id) else {
            return Err(self.not_here(id));
        };
        let view = self.meta.view();
        let ended = view.streams.get(&id).and_then(|row| row.epoch_end(epoch));
        Ok(ended.unwrap_or_else(|| open.high_watermark()))
    }

    async fn delete_before(&self, topic: &str, partition: u32, before: Option<Offset>) -> ApiResult<Offset> {
        self.trim_before(topic, partition, before).await
    }

    async fn producers(&self, topic: &str, partition: u32) -> ApiResult<Vec<ProducerState>> {
        let id = self.resolve(topic, partition)?;
        match self.open_stream_soon(id).await {
            Some(open) => Ok(open.producers()),
            None => Err(self.not_here(id)),
        }
    }
}
