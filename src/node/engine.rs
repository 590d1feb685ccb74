//! The node as the front doors see it: the [`Engine`] trait.

use super::{Node, Phase};
use crate::api::*;
use crate::ids::{Offset, StreamEpoch, StreamId};
use crate::meta::{Command, ConfigUpdate, MetaError, Outcome, Rejection, StreamState, TopicConfig};
use crate::stream::batch::Record;
use async_trait::async_trait;

/// Kafka producer ids a node reserves in the metadata log at a time.
const PRODUCER_ID_BLOCK: u32 = 1000;

/// See [`Node::read_position`].
struct ReadPosition {
    start: Offset,
    hw: Offset,
    chunks: Vec<crate::meta::IndexedChunk>,
    local: Option<std::sync::Arc<crate::stream::partition::OpenStream>>,
}

fn meta_error(e: MetaError) -> ApiError {
    match e {
        MetaError::Unavailable(m) => ApiError::unavailable(format!("metadata store unavailable: {m}")),
        MetaError::Stopped => ApiError::unavailable("node is stopping"),
        MetaError::Corrupt(m) => ApiError::new(ErrorCode::Internal, m),
    }
}

impl Node {
    fn resolve(&self, topic: &str, partition: u32) -> ApiResult<StreamId> {
        let view = self.meta.view();
        let t = view
            .topics
            .get(topic)
            .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("topic {topic:?} does not exist")))?;
        if partition >= t.partitions {
            return Err(ApiError::new(
                ErrorCode::PartitionNotFound,
                format!("topic {topic:?} has partitions 0-{}, not {partition}", t.partitions - 1),
            ));
        }
        Ok(StreamId::new(t.id, partition))
    }

    /// The local stream, waiting briefly when the view has just opened it
    /// here and the node is still setting it up, or when another node
    /// forwarded the append because it already sees the stream placed here
    /// (an append right after a topic is placed then succeeds instead of
    /// answering 503).
    async fn open_stream_soon(&self, stream: StreamId) -> Option<std::sync::Arc<crate::stream::partition::OpenStream>> {
        const OPENING_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
        let deadline = tokio::time::Instant::now() + OPENING_WAIT;
        loop {
            if let Some(s) = self.open_stream(stream) {
                return Some(s);
            }
            let (opening_here, placing) = match self.meta.view().streams.get(&stream).map(|r| &r.state) {
                Some(StreamState::Open { node, node_epoch }) => (node == &self.id && *node_epoch == self.epoch, false),
                Some(StreamState::Closed) => (false, true),
                _ => (false, false),
            };
            // A request forwarded here by a node whose view already has the
            // stream placed here: our view is behind, catch up.
            let behind = placing && is_forwarded();
            if !(opening_here || behind) || tokio::time::Instant::now() >= deadline {
                return None;
            }
            if behind {
                // Caught up or not, the loop looks again until the deadline.
                let _ = self.meta.sync(std::time::Duration::from_millis(500)).await;
            } else {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        }
    }

    /// [`Node::resolve`], catching up with the metadata log first when the
    /// topic or partition is unknown here: it may have just been created
    /// through another node (read-your-writes across nodes; the chaos test
    /// saw 404s for a topic created a moment earlier through another node).
    async fn resolve_current(&self, topic: &str, partition: u32) -> ApiResult<StreamId> {
        self.current(|| self.resolve(topic, partition)).await
    }

    /// `lookup` against the view; if it finds no such topic or partition,
    /// again after catching up with the metadata log. Only a view that has
    /// read the log to its end may say "does not exist"; one that could not
    /// says "retry" (503).
    async fn current<T>(&self, lookup: impl Fn() -> ApiResult<T>) -> ApiResult<T> {
        let missing = |e: &ApiError| matches!(e.code, ErrorCode::TopicNotFound | ErrorCode::PartitionNotFound);
        match lookup() {
            Err(e) if missing(&e) => {
                let caught_up = self.sync_metadata().await;
                match lookup() {
                    Err(e) if !caught_up && missing(&e) => Err(ApiError::unconfirmed(&e)),
                    r => r,
                }
            }
            r => r,
        }
    }

    /// Why a stream is not served here.
    fn not_here(&self, stream: StreamId) -> ApiError {
        let view = self.meta.view();
        let why = match view.streams.get(&stream).map(|r| &r.state) {
            Some(StreamState::Open { node, .. }) if node != &self.id => format!("stream {stream} is owned by {node}"),
            Some(StreamState::Open { .. }) => format!("stream {stream} is opening on this node"),
            Some(StreamState::Recovering { node, .. }) => {
                format!("stream {stream} is being recovered from {node}'s WAL")
            }
            Some(StreamState::Closed) => format!("stream {stream} is being placed"),
            Some(StreamState::Transferring { from, to, .. }) => {
                format!("stream {stream} is moving from {from} to {to}")
            }
            Some(StreamState::Deleted) | None => format!("stream {stream} was deleted"),
        };
        ApiError::unavailable(why)
    }

    /// The advertised HTTP address of the live owner of `stream`, if that is
    /// another node and this request may be forwarded.
    fn forward_target(&self, stream: StreamId) -> Option<String> {
        if is_forwarded() {
            return None; // one hop only
        }
        let view = self.meta.view();
        match &view.streams.get(&stream)?.state {
            StreamState::Open { node, node_epoch } if node != &self.id && view.is_live(node, *node_epoch) => {
                Some(view.nodes[node].http_addr.clone())
            }
            _ => None,
        }
    }

    fn check_serving(&self) -> ApiResult<()> {
        match self.phase() {
            Phase::Ready | Phase::Draining => Ok(()),
            p => Err(ApiError::unavailable(format!("node is {}", p.as_str()))),
        }
    }

    /// Metadata-changing requests fail at once when the store is unreachable.
    fn check_meta_reachable(&self) -> ApiResult<()> {
        if self.meta.reachable() {
            Ok(())
        } else {
            Err(ApiError::unavailable("metadata store unreachable; retry shortly"))
        }
    }

    /// Where a stream can be read here: its start, the high watermark this
    /// node can vouch for (its own if it owns the stream, else the committed
    /// end of a closed stream), the committed chunks, and the local stream.
    fn read_position(&self, stream: StreamId) -> ApiResult<ReadPosition> {
        let (start, committed_end, chunks, open_elsewhere) = {
            let view = self.meta.view();
            let row = view.streams.get(&stream).ok_or_else(|| self.not_here(stream))?;
            let elsewhere = !matches!(row.state, StreamState::Closed)
                && !matches!(&row.state, StreamState::Open { node, node_epoch } if node == &self.id && *node_epoch == self.epoch);
            (row.start, row.committed_end, row.chunks.clone(), elsewhere)
        };
        let local = self.open_stream(stream);
        let hw = match &local {
            Some(s) => s.high_watermark(),
            None if open_elsewhere => return Err(self.not_here(stream)),
            None => committed_end,
        };
        Ok(ReadPosition {
            start,
            hw,
            chunks,
            local,
        })
    }

    async fn read_once(&self, stream: StreamId, from: ReadFrom, req: &ReadRequest) -> ApiResult<(ReadResult, bool)> {
        let ReadPosition {
            start,
            hw,
            chunks,
            local,
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
}

impl Node {
    async fn read_batches_once(&self, stream: StreamId, from: Offset, max_bytes: usize) -> ApiResult<BatchRead> {
        let ReadPosition {
            start,
            hw,
            chunks,
            local,
        } = self.read_position(stream)?;
        if from < start || from > hw {
            return Err(ApiError {
                code: ErrorCode::OffsetOutOfRange,
                message: format!("offset {} is outside {}..{} of stream {stream}", from.0, start.0, hw.0),
                start_offset: Some(start),
            });
        }
        let mut out = BatchRead {
            batches: Vec::new(),
            high_watermark: hw,
            start_offset: start,
        };
        if from == hw {
            return Ok(out);
        }
        if let Some(s) = &local {
            if let Some(b) = s.read_tail_batches(from, hw, max_bytes) {
                out.batches = b;
                count_read("batches", out.batches.len(), out.batches.iter().map(|b| b.len()).sum());
                return Ok(out);
            }
        }
        let (mut batches, next) = self.reader.read_batches(&chunks, from, max_bytes).await?;
        if let Some(s) = &local {
            let used: usize = batches.iter().map(|b| b.len()).sum();
            if used < max_bytes && next < hw {
                if let Some(more) = s.read_tail_batches(next, hw, max_bytes - used) {
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
        out.batches = batches;
        count_read("batches", out.batches.len(), out.batches.iter().map(|b| b.len()).sum());
        Ok(out)
    }
}

/// Reads served from this node's streams (forwarded reads count on the
/// owner): `read_total{kind}` counts records or batches, `read_bytes_total`
/// their payload bytes.
fn count_read(kind: &str, n: usize, bytes: usize) {
    crate::telemetry::count_n("read_total", &[("kind", kind)], n as u64);
    crate::telemetry::count_n("read_bytes_total", &[("kind", kind)], bytes as u64);
}

#[async_trait]
impl Engine for Node {
    fn limits(&self) -> Limits {
        Limits {
            max_record_bytes: self.config.max_record_bytes,
            max_request_bytes: self.config.max_request_bytes,
            max_wait: self.config.max_wait,
            max_read_bytes: self.config.http_max_read_bytes,
        }
    }

    async fn create_topic(&self, name: &str, partitions: u32, config: TopicConfig) -> ApiResult<TopicSummary> {
        if let Err(e) = crate::meta::view::validate_topic_name(name) {
            return Err(ApiError::new(ErrorCode::InvalidTopicName, e));
        }
        if partitions == 0 || partitions > crate::meta::view::MAX_PARTITIONS {
            return Err(ApiError::new(
                ErrorCode::InvalidPartitionCount,
                format!(
                    "partitions must be 1-{}, got {partitions}",
                    crate::meta::view::MAX_PARTITIONS
                ),
            ));
        }
        self.check_serving()?;
        self.check_meta_reachable()?;
        let cmd = Command::CreateTopic {
            name: name.to_string(),
            partitions,
            config,
        };
        match self.meta.propose(cmd).await.map_err(meta_error)? {
            Outcome::TopicCreated(_) => Ok(TopicSummary {
                name: name.to_string(),
                partitions,
            }),
            Outcome::Rejected(Rejection::TopicExists(n)) => Err(ApiError::new(
                ErrorCode::TopicExists,
                format!("topic {n:?} already exists"),
            )),
            // A Durable Streams fork whose source is gone or deleted.
            Outcome::Rejected(Rejection::Precondition(m)) => Err(ApiError::invalid(m)),
            Outcome::Rejected(r) => Err(ApiError::unavailable(format!("topic not created: {r}"))),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }

    fn list_topics(&self) -> Vec<TopicSummary> {
        let view = self.meta.view();
        view.topics
            .iter()
            .map(|(name, t)| TopicSummary {
                name: name.clone(),
                partitions: t.partitions,
            })
            .collect()
    }

    fn describe_topic(&self, name: &str) -> ApiResult<TopicDescription> {
        let view = self.meta.view();
        let t = view
            .topics
            .get(name)
            .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("topic {name:?} does not exist")))?;
        let partition_info = view
            .topic_streams(t)
            .map(|(id, row)| {
                let owner = match &row.state {
                    StreamState::Open { node, .. } | StreamState::Recovering { node, .. } => Some(node.to_string()),
                    _ => None,
                };
                let end_offset = self.open_stream(*id).map_or(row.committed_end, |s| s.high_watermark());
                PartitionInfo {
                    partition: id.partition,
                    owner,
                    stream_epoch: row.stream_epoch,
                    state: row.state.name().to_string(),
                    start_offset: row.start,
                    end_offset,
                }
            })
            .collect();
        Ok(TopicDescription {
            name: name.to_string(),
            partitions: t.partitions,
            config: t.config.clone(),
            partition_info,
        })
    }

    async fn delete_topic(&self, name: &str) -> ApiResult<()> {
        self.check_serving()?;
        if !self.meta.view().topics.contains_key(name) {
            return Err(ApiError::new(
                ErrorCode::TopicNotFound,
                format!("topic {name:?} does not exist"),
            ));
        }
        self.check_meta_reachable()?;
        match self
            .meta
            .propose(Command::DeleteTopic { name: name.to_string() })
            .await
            .map_err(meta_error)?
        {
            Outcome::Applied => Ok(()),
            Outcome::Rejected(Rejection::TopicNotFound(_)) => Err(ApiError::new(
                ErrorCode::TopicNotFound,
                format!("topic {name:?} does not exist"),
            )),
            other => Err(ApiError::unavailable(format!("topic not deleted: {other:?}"))),
        }
    }

    // admin
    async fn add_partitions(&self, name: &str, partitions: u32) -> ApiResult<()> {
        self.check_serving()?;
        let current = self.partitions(name)?;
        let max = crate::meta::view::MAX_PARTITIONS;
        if partitions <= current || partitions > max {
            return Err(ApiError::new(
                ErrorCode::InvalidPartitionCount,
                format!("topic {name:?} has {current} partitions; the count can only grow, up to {max}, not become {partitions}"),
            ));
        }
        self.check_meta_reachable()?;
        let cmd = Command::AddPartitions {
            name: name.to_string(),
            partitions,
        };
        match self.meta.propose(cmd).await.map_err(meta_error)? {
            Outcome::Applied => Ok(()),
            Outcome::Rejected(Rejection::TopicNotFound(_)) => Err(ApiError::new(
                ErrorCode::TopicNotFound,
                format!("topic {name:?} does not exist"),
            )),
            // Another request grew it first.
            Outcome::Rejected(Rejection::Invalid(m)) => Err(ApiError::new(ErrorCode::InvalidPartitionCount, m)),
            Outcome::Rejected(r) => Err(ApiError::unavailable(format!("partitions not added: {r}"))),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }

    async fn alter_topic_config(&self, name: &str, updates: Vec<ConfigUpdate>) -> ApiResult<TopicConfig> {
        self.check_serving()?;
        self.partitions(name)?;
        if let Some(m) = updates.iter().find_map(|u| u.validate().err()) {
            return Err(ApiError::invalid(m));
        }
        self.check_meta_reachable()?;
        let cmd = Command::AlterTopicConfig {
            name: name.to_string(),
            updates,
        };
        match self.meta.propose(cmd).await.map_err(meta_error)? {
            // The view as of our entry, or later: read back what applied.
            Outcome::Applied => self
                .meta
                .view()
                .topics
                .get(name)
                .map(|t| t.config.clone())
                .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("topic {name:?} was deleted"))),
            Outcome::Rejected(Rejection::TopicNotFound(_)) => Err(ApiError::new(
                ErrorCode::TopicNotFound,
                format!("topic {name:?} does not exist"),
            )),
            Outcome::Rejected(Rejection::Invalid(m)) => Err(ApiError::invalid(m)),
            Outcome::Rejected(r) => Err(ApiError::unavailable(format!("config not altered: {r}"))),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }

    async fn partitions_current(&self, topic: &str) -> ApiResult<u32> {
        self.current(|| self.partitions(topic)).await
    }

    async fn describe_topic_current(&self, name: &str) -> ApiResult<TopicDescription> {
        self.current(|| self.describe_topic(name)).await
    }

    fn partitions(&self, topic: &str) -> ApiResult<u32> {
        self.meta
            .view()
            .topics
            .get(topic)
            .map(|t| t.partitions)
            .ok_or_else(|| ApiError::new(ErrorCode::TopicNotFound, format!("topic {topic:?} does not exist")))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(stream = %format_args!("{topic}/{partition}")))]
    async fn append(&self, topic: &str, partition: u32, records: Vec<Record>) -> ApiResult<Appended> {
        let stream = self.resolve_current(topic, partition).await?;
        if self.phase() != Phase::Ready {
            return Err(ApiError::unavailable(format!("node is {}", self.phase().as_str())));
        }
        let Some(s) = self.open_stream_soon(stream).await else {
            return match self.forward_target(stream) {
                Some(addr) => {
                    self.forwarder
                        .append(&addr, self.meta.applied().0, topic, partition, &records)
                        .await
                }
                None => Err(self.not_here(stream)),
            };
        };
        let started = tokio::time::Instant::now();
        let result = s.append(&self.wal, &records).await;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        crate::telemetry::observe("append_seconds", &[("outcome", outcome)], started.elapsed());
        if result.is_ok() {
            crate::telemetry::count_n("appended_records_total", &[], records.len() as u64);
            let bytes: usize = records.iter().map(crate::stream::partition::record_size).sum();
            crate::telemetry::count_n("appended_bytes_total", &[], bytes as u64);
        }
        result
    }

    #[tracing::instrument(level = "debug", skip_all, fields(stream = %format_args!("{topic}/{partition}")))]
    async fn read(&self, topic: &str, partition: u32, req: ReadRequest) -> ApiResult<ReadResult> {
        let stream = self.resolve_current(topic, partition).await?;
        self.check_serving()?;
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
            if let Some(addr) = self.forward_target(stream) {
                return tokio::select! {
                    r = self.forwarder.read(&addr, self.meta.applied().0, topic, partition, &req) => r,
                    _ = self.live_reads_ended() => Err(ApiError::unavailable("node is shutting down")),
                };
            }
        }
        let (first, at_end) = self.read_once(stream, req.from, &req).await?;
        if !at_end || req.wait.is_zero() {
            return Ok(first);
        }
        // Long poll: wait for the high watermark to pass `from`, the time to
        // run out, or live reads to end.
        let from = ReadFrom::At(first.next_offset);
        let deadline = tokio::time::Instant::now() + req.wait.min(self.config.max_wait);
        // A stream that is not open here (closed, being placed) can only
        // grow once it is opened: wait for the view to open it here.
        let s = loop {
            let mut applied = self.meta.subscribe();
            if let Some(s) = self.open_stream(stream) {
                break s;
            }
            tokio::select! {
                _ = applied.changed() => {}
                _ = tokio::time::sleep_until(deadline) => return Ok(first),
                _ = self.live_reads_ended() => return Err(ApiError::unavailable("node is shutting down")),
            }
        };
        let mut hw = s.watch_high_watermark();
        let target = first.next_offset;
        tokio::select! {
            _ = hw.wait_for(|h| *h > target) => {}
            _ = tokio::time::sleep_until(deadline) => return Ok(first),
            _ = self.live_reads_ended() => return Err(ApiError::unavailable("node is shutting down")),
        }
        Ok(self.read_once(stream, from, &req).await?.0)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(stream = %format_args!("{topic}/{partition}")))]
    async fn append_batch(&self, topic: &str, partition: u32, batch: bytes::Bytes) -> ApiResult<Appended> {
        let stream = self.resolve(topic, partition)?;
        if self.phase() != Phase::Ready {
            return Err(ApiError::unavailable(format!("node is {}", self.phase().as_str())));
        }
        let s = self.open_stream(stream).ok_or_else(|| self.not_here(stream))?;
        let started = tokio::time::Instant::now();
        let result = s.append_batch(&self.wal, &batch).await;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        crate::telemetry::observe("append_seconds", &[("outcome", outcome)], started.elapsed());
        if let Ok(a) = &result {
            crate::telemetry::count_n("appended_records_total", &[], u64::from(a.count));
            crate::telemetry::count_n("appended_bytes_total", &[], batch.len() as u64);
        }
        result
    }

    #[tracing::instrument(level = "debug", skip_all, fields(stream = %format_args!("{topic}/{partition}")))]
    async fn read_batches(
        &self,
        topic: &str,
        partition: u32,
        from: Offset,
        max_bytes: usize,
        wait: std::time::Duration,
    ) -> ApiResult<BatchRead> {
        let stream = self.resolve(topic, partition)?;
        self.check_serving()?;
        let first = self.read_batches_once(stream, from, max_bytes).await?;
        if !first.batches.is_empty() || wait.is_zero() {
            return Ok(first);
        }
        let deadline = tokio::time::Instant::now() + wait.min(self.config.max_wait);
        let s = loop {
            let mut applied = self.meta.subscribe();
            if let Some(s) = self.open_stream(stream) {
                break s;
            }
            tokio::select! {
                _ = applied.changed() => {}
                _ = tokio::time::sleep_until(deadline) => return Ok(first),
                _ = self.live_reads_ended() => return Err(ApiError::unavailable("node is shutting down")),
            }
        };
        let mut hw = s.watch_high_watermark();
        tokio::select! {
            _ = hw.wait_for(|h| *h > from) => {}
            _ = tokio::time::sleep_until(deadline) => return Ok(first),
            _ = self.live_reads_ended() => return Err(ApiError::unavailable("node is shutting down")),
        }
        self.read_batches_once(stream, from, max_bytes).await
    }

    fn ready(&self) -> ReadyStatus {
        let view = self.meta.view();
        let fenced = self.phase() == Phase::Fenced
            || view
                .nodes
                .get(&self.id)
                .is_some_and(|r| r.epoch == self.epoch && r.fenced);
        let reason = match self.phase() {
            Phase::Ready if fenced => Some("fenced".to_string()),
            Phase::Ready => None,
            p => Some(p.as_str().to_string()),
        };
        ReadyStatus {
            ready: reason.is_none(),
            node_id: self.id.to_string(),
            epoch: self.epoch,
            fenced,
            lease_holder: view.holds_lease(&self.id, self.epoch),
            reason,
        }
    }

    fn nodes(&self) -> NodesInfo {
        let view = self.meta.view();
        let nodes = view
            .nodes
            .iter()
            .map(|(id, row)| NodeInfo {
                node_id: id.to_string(),
                epoch: row.epoch,
                heartbeats: row.heartbeats.0,
                fenced: row.fenced,
                live: !row.fenced,
                draining: row.draining,
                http_addr: row.http_addr.clone(),
                kafka_addr: row.kafka_addr.clone(),
                open_streams: view.open_streams_of(id, row.epoch).len(),
            })
            .collect();
        NodesInfo {
            lease_holder: view.lease.as_ref().map(|l| l.holder.to_string()),
            nodes,
        }
    }

    async fn live_reads_ended(&self) {
        Node::live_reads_ended(self).await
    }

    async fn transfer(&self, topic: &str, partition: u32, to: &str) -> ApiResult<()> {
        let stream = self.resolve(topic, partition)?;
        self.check_meta_reachable()?;
        let cmd = {
            let view = self.meta.view();
            let target = view
                .nodes
                .get(&crate::ids::NodeId::new(to))
                .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("node {to:?} is not registered")))?;
            let row = &view.streams[&stream];
            Command::BeginTransfer {
                stream,
                stream_epoch: row.stream_epoch,
                to: crate::ids::NodeId::new(to),
                to_epoch: target.epoch,
            }
        };
        match self.meta.propose(cmd).await.map_err(meta_error)? {
            Outcome::Applied => Ok(()),
            Outcome::Rejected(Rejection::Invalid(m)) => Err(ApiError::invalid(m)),
            Outcome::Rejected(r) => Err(ApiError::unavailable(format!("transfer not started: {r}"))),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }

    async fn drain(&self, node: &str) -> ApiResult<()> {
        self.check_meta_reachable()?;
        let id = crate::ids::NodeId::new(node);
        let epoch = self
            .meta
            .view()
            .nodes
            .get(&id)
            .map(|r| r.epoch)
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("node {node:?} is not registered")))?;
        match self
            .meta
            .propose(Command::DrainNode { node: id, epoch })
            .await
            .map_err(meta_error)?
        {
            Outcome::Applied => Ok(()),
            Outcome::Rejected(r) => Err(ApiError::unavailable(format!("drain refused: {r}"))),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
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

    async fn sync_metadata(&self) -> bool {
        // One log read normally takes milliseconds; during a metadata outage
        // every caller would wait out the bound, so skip the wait once the
        // store is known to be unreachable.
        const WAIT: std::time::Duration = std::time::Duration::from_millis(500);
        if !self.meta.reachable() {
            return false;
        }
        self.meta.sync(WAIT).await
    }

    fn is_peer(&self, presented: &str) -> bool {
        self.peer.verify(presented)
    }

    async fn catch_up_to(&self, index: u64) -> bool {
        const WAIT: std::time::Duration = std::time::Duration::from_secs(1);
        let want = crate::ids::LogIndex(index);
        if self.meta.applied() >= want {
            return true;
        }
        if !self.meta.reachable() {
            // Waiting would only delay the answer during a metadata outage.
            return false;
        }
        // Committed before the forwarder sent it: read the log now. (Whether
        // the sync reached the log's end does not matter, only `index`.)
        let _ = self.meta.sync(WAIT).await;
        tokio::time::timeout(WAIT, self.meta.wait_for(want)).await.is_ok()
    }

    async fn init_producer_id(&self) -> ApiResult<i64> {
        self.check_serving()?;
        let mut ids = self.producer_ids.lock().await;
        if ids.is_empty() {
            self.check_meta_reachable()?;
            let count = PRODUCER_ID_BLOCK;
            match self
                .meta
                .propose(Command::AllocateProducerIds { count })
                .await
                .map_err(meta_error)?
            {
                Outcome::ProducerIds { first } => *ids = first..first + i64::from(count),
                other => return Err(ApiError::unavailable(format!("no producer ids reserved: {other:?}"))),
            }
        }
        let id = ids.start;
        ids.start += 1;
        Ok(id)
    }

    async fn commit_offsets(&self, group: &str, offsets: Vec<GroupOffset>) -> ApiResult<()> {
        self.check_serving()?;
        let mut resolved = Vec::with_capacity(offsets.len());
        for o in offsets {
            resolved.push((self.resolve(&o.topic, o.partition)?, o.offset, o.metadata));
        }
        self.check_meta_reachable()?;
        let cmd = Command::CommitOffsets {
            group: group.to_string(),
            offsets: resolved,
        };
        match self.meta.propose(cmd).await.map_err(meta_error)? {
            Outcome::Applied => Ok(()),
            Outcome::Rejected(Rejection::Precondition(m)) => Err(ApiError::new(ErrorCode::TopicNotFound, m)),
            other => Err(ApiError::unavailable(format!("offsets not committed: {other:?}"))),
        }
    }

    fn committed_offsets(&self, group: &str) -> Vec<GroupOffset> {
        let view = self.meta.view();
        let Some(g) = view.groups.get(group) else {
            return Vec::new();
        };
        let names: std::collections::BTreeMap<_, _> = view.topics.iter().map(|(n, t)| (t.id, n.clone())).collect();
        g.iter()
            .filter_map(|(s, (offset, metadata))| {
                Some(GroupOffset {
                    topic: names.get(&s.topic)?.clone(),
                    partition: s.partition,
                    offset: *offset,
                    metadata: metadata.clone(),
                })
            })
            .collect()
    }

    fn offset_groups(&self) -> Vec<String> {
        self.meta.view().groups.keys().cloned().collect()
    }

    async fn delete_group(&self, group: &str) -> ApiResult<()> {
        self.check_serving()?;
        if !self.meta.view().groups.contains_key(group) {
            return Err(ApiError::new(
                ErrorCode::NotFound,
                format!("group {group:?} has no offsets"),
            ));
        }
        self.check_meta_reachable()?;
        match self
            .meta
            .propose(Command::DeleteGroup {
                group: group.to_string(),
            })
            .await
            .map_err(meta_error)?
        {
            Outcome::Applied => Ok(()),
            Outcome::Rejected(r) => Err(ApiError::new(ErrorCode::NotFound, r.to_string())),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }

    fn auth_required(&self) -> bool {
        self.config.auth
    }

    fn authenticate(&self, secret: &str) -> Result<crate::auth::Principal, crate::auth::AuthFailure> {
        self.auth
            .authenticate(secret, |id| self.meta.view().tokens.get(id).cloned())
    }

    async fn create_token(&self, req: crate::auth::NewToken) -> ApiResult<crate::auth::IssuedToken> {
        self.check_serving()?;
        // With auth off every caller is anonymous: a token issued now would
        // be a credential nobody authorized, valid the day auth is turned on.
        if !self.config.auth {
            return Err(ApiError::new(
                ErrorCode::AuthOff,
                "tokens are issued only with --auth on (this node runs --auth off, where every request is allowed)",
            ));
        }
        let issuer = crate::api::caller_token()
            .and_then(|t| self.authenticate(t.expose()).ok())
            .ok_or_else(|| ApiError::new(ErrorCode::Unauthenticated, "issuing a token needs an admin token"))?;
        if !issuer.is_cluster_admin() {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("token {} lacks admin on all topics (\"*\")", issuer.id),
            ));
        }
        let now = self.auth.now_ms();
        let expires_at = match req.expires_in_sec {
            None => None,
            Some(0) => return Err(ApiError::invalid("expires_in_sec must be at least 1")),
            Some(s) => Some(
                i64::try_from(s)
                    .ok()
                    .and_then(|s| s.checked_mul(1000))
                    .and_then(|ms| now.checked_add(ms))
                    .ok_or_else(|| ApiError::invalid(format!("expires_in_sec {s} is too large")))?,
            ),
        };
        let (secret, record) = crate::auth::token::issue(&req.name, req.scopes, now, expires_at, &issuer.id);
        record.validate().map_err(ApiError::invalid)?;
        self.check_meta_reachable()?;
        let id = record.id.clone();
        match self
            .meta
            .propose(Command::CreateToken { token: record })
            .await
            .map_err(meta_error)?
        {
            Outcome::Applied => {
                tracing::info!(token = %id, name = %req.name, "token issued");
                Ok(crate::auth::IssuedToken {
                    id,
                    token: secret,
                    expires_at,
                })
            }
            Outcome::Rejected(Rejection::Invalid(m)) => Err(ApiError::invalid(m)),
            Outcome::Rejected(r) => Err(ApiError::unavailable(format!("token not issued: {r}"))),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }

    fn list_tokens(&self) -> Vec<crate::auth::TokenInfo> {
        let now = self.auth.now_ms();
        self.meta
            .view()
            .tokens
            .values()
            .map(|r| crate::auth::TokenInfo::of(r, now))
            .collect()
    }

    async fn revoke_token(&self, id: &str) -> ApiResult<()> {
        self.check_serving()?;
        if !self.meta.view().tokens.contains_key(id) {
            return Err(ApiError::new(ErrorCode::TokenNotFound, format!("no token {id:?}")));
        }
        self.check_meta_reachable()?;
        match self
            .meta
            .propose(Command::RevokeToken { id: id.to_string() })
            .await
            .map_err(meta_error)?
        {
            Outcome::Applied => {
                tracing::info!(token = %id, "token revoked");
                Ok(())
            }
            Outcome::Rejected(Rejection::TokenNotFound(_)) => {
                Err(ApiError::new(ErrorCode::TokenNotFound, format!("no token {id:?}")))
            }
            Outcome::Rejected(r) => Err(ApiError::unavailable(format!("token not revoked: {r}"))),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }
}
