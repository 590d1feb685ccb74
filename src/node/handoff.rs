//! Releasing a stream: stop its appends, flush its tail, then close it or
//! complete its transfer at its committed end. Transfers hand off here;
//! a clean shutdown settles every stream the same way.

use super::{flusher, Node};
use crate::meta::{Command, Outcome};
use crate::stream::partition::OpenStream;
use std::sync::Arc;
use std::time::Duration;

/// How a stream leaves this node.
#[derive(Debug, Clone, Copy)]
pub(super) enum Release {
    Close,
    Transfer,
}

impl Node {
    /// Stop appends, wait for in-flight WAL writes and flush the tail; then
    /// the command that closes the stream or completes its transfer at its
    /// committed end.
    pub(super) async fn settle_stream(
        &self,
        stream: &Arc<OpenStream>,
        timeout: Duration,
        how: Release,
    ) -> Result<Command, String> {
        stream.stop_accepting();
        let started = tokio::time::Instant::now();
        let deadline = started + timeout;
        while !stream.quiescent() {
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("stream {} still has appends in flight", stream.id));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tracing::debug!(stream = %stream.id, took = ?started.elapsed(), "release: appends quiescent");
        while stream.committed_end() < stream.high_watermark() {
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("stream {} could not be flushed in time", stream.id));
            }
            flusher::flush_now(self, std::slice::from_ref(stream)).await;
            if stream.committed_end() < stream.high_watermark() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        tracing::debug!(stream = %stream.id, took = ?started.elapsed(), "release: flushed");
        let (stream_id, stream_epoch, end) = (stream.id, stream.epoch, stream.committed_end());
        Ok(match how {
            Release::Close => Command::CloseStream {
                stream: stream_id,
                stream_epoch,
                end,
            },
            Release::Transfer => Command::CompleteTransfer {
                stream: stream_id,
                stream_epoch,
                end,
            },
        })
    }

    /// [`Self::settle_stream`], then propose its command.
    async fn release_stream(&self, stream: &Arc<OpenStream>, timeout: Duration, how: Release) -> Result<(), String> {
        let command = self.settle_stream(stream, timeout, how).await?;
        match self.meta.propose(command).await {
            Ok(Outcome::Applied) => {
                self.streams.write().unwrap().remove(&stream.id);
                Ok(())
            }
            Ok(other) => Err(format!("releasing {} was refused: {other:?}", stream.id)),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Hand a stream over to its transfer target (ownership step 2-3).
    pub(super) async fn hand_off(self: Arc<Self>, stream: Arc<OpenStream>) {
        let started = tokio::time::Instant::now();
        let result = self
            .release_stream(&stream, self.config.shutdown_timeout, Release::Transfer)
            .await;
        self.handing_off.lock().unwrap().remove(&stream.id);
        match result {
            Ok(()) => {
                crate::telemetry::observe("sluice_transfer_seconds", &[], started.elapsed());
                tracing::info!(stream = %stream.id, took = ?started.elapsed(), "stream handed over");
            }
            Err(e) => {
                tracing::warn!(stream = %stream.id, error = %e, "transfer not completed");
                // A cancelled transfer gives the stream back: serve it again.
                self.reconcile();
            }
        }
    }
}
