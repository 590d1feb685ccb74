//! The node as the front doors see it: [`Node`] implements each capability
//! trait of [`crate::api`], one file per capability, and builds the
//! [`Services`] bundle the front doors are given ([`Node::services`]).
//!
//! - `records`: append and read (records and raw batches), leader epochs.
//! - `trim`: moving a partition's start (DeleteRecords), for `records`.
//! - `strong`: confirming a strong read's placement through the log, for `records`.
//! - `topics`: create, list, describe, grow, configure, delete.
//! - `group_offsets`: consumer groups' committed offsets.
//! - `producer_ids`: Kafka producer ids, reserved in blocks.
//! - `tokens`: authentication and tokens.
//! - `cluster`: readiness, members, transfer and drain, catching up.
//!
//! This file holds what they share: finding a stream, why it is not
//! served here, and the checks before proposing (where to forward is
//! `crate::route`'s decision, asked through `node/routing.rs`).

mod cluster;
mod group_offsets;
mod producer_ids;
mod records;
mod strong;
mod tokens;
mod topics;
mod trim;

use super::{Node, Phase};
use crate::api::*;
use crate::ids::StreamId;
use crate::meta::{MetaError, StreamState};
use std::sync::Arc;

fn meta_error(e: MetaError) -> ApiError {
    match e {
        MetaError::Unavailable(m) => ApiError::unavailable(format!("metadata store unavailable: {m}")),
        MetaError::Stopped => ApiError::unavailable("node is stopping"),
        MetaError::Corrupt(m) => ApiError::new(ErrorCode::Internal, m),
    }
}

impl Node {
    /// Every capability of this node, for its front doors.
    pub fn services(self: &Arc<Self>) -> Services {
        let limits = Limits {
            max_record_bytes: self.config.max_record_bytes,
            max_request_bytes: self.config.max_request_bytes,
            max_wait: self.config.max_wait,
            max_read_bytes: self.config.http_max_read_bytes,
        };
        Services::of(self.clone(), limits, self.clock.clone())
    }
}

impl From<Arc<Node>> for Services {
    fn from(node: Arc<Node>) -> Self {
        node.services()
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
}
