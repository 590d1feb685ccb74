//! How a node stops: a clean shutdown that hands its streams off (the
//! failover page's six steps), and a stop for good once it learns it was
//! fenced (its row in the view, or its WAL taken over).

use super::handoff::Release;
use super::{Node, Phase};
use crate::meta::Command;
use std::sync::Arc;

impl Node {
    /// Stop for good because the node was fenced or replaced: nothing more
    /// is acknowledged, live reads end, and the process should exit.
    pub fn stop_fenced(&self, why: &str) {
        if self.phase() == Phase::Fenced {
            return;
        }
        tracing::warn!(node = %self.id, epoch = %self.epoch, why, "node is fenced; stopping");
        self.wal.stop(why);
        for s in self.open_streams() {
            s.stop_accepting();
        }
        self.phase.send_replace(Phase::Fenced);
        self.end_live_reads();
        self.abort_tasks();
    }

    /// Clean shutdown (the failover page's six steps). `stop_listeners` is
    /// step 4: it resolves once the listeners stopped and in-flight requests
    /// finished or timed out.
    pub async fn shutdown(&self, stop_listeners: impl std::future::Future<Output = ()>) {
        tracing::info!("clean shutdown: readiness fails");
        self.phase.send_replace(Phase::Draining);
        tokio::time::sleep(self.config.shutdown_drain).await;
        tracing::info!("clean shutdown: ending live reads");
        self.end_live_reads();
        let _ = tokio::time::timeout(self.config.shutdown_timeout, stop_listeners).await;
        tracing::info!("clean shutdown: closing streams");
        // Steps 5 and 6. Every stream is flushed at once; then the closes
        // and the self-fence go in one log entry, applied in that order. Were
        // the closes applied first, the lease holder could place the closed
        // streams right back on this node, the least loaded one, and they
        // would wait a tick after the fence to move again.
        let streams = self.open_streams();
        let settles = streams
            .iter()
            .map(|s| self.settle_stream(s, self.config.shutdown_timeout, Release::Close));
        let mut closing = Vec::new();
        let mut commands = Vec::new();
        for (s, settled) in streams.iter().zip(futures::future::join_all(settles).await) {
            match settled {
                Ok(close) => {
                    closing.push(s.id);
                    commands.push(close);
                }
                Err(e) => {
                    tracing::warn!(stream = %s.id, error = %e, "stream not closed cleanly; failover will recover it from the WAL")
                }
            }
        }
        commands.push(Command::FenceSelf {
            node: self.id.clone(),
            epoch: self.epoch,
        });
        match self.meta.propose_all(commands).await {
            Ok(mut outcomes) => {
                let fenced = outcomes.pop().expect("one outcome per command");
                for (id, outcome) in closing.iter().zip(outcomes) {
                    if outcome.is_applied() {
                        self.streams.write().unwrap().remove(id);
                    } else {
                        tracing::warn!(stream = %id, ?outcome, "close refused; failover will recover it from the WAL");
                    }
                }
                if fenced.is_applied() {
                    tracing::info!(
                        closed = closing.len(),
                        "clean shutdown: closed our streams and fenced ourselves"
                    );
                } else {
                    tracing::warn!(?fenced, "could not fence ourselves; the node timeout will");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not close our streams or fence ourselves; the node timeout will")
            }
        }
        self.wal.stop("node stopped");
        self.abort_tasks();
        self.phase.send_replace(Phase::Stopped);
    }
}

/// Stops the node once its WAL was taken over (its next write fails as fenced).
pub(super) async fn watch_wal_fence(node: Arc<Node>) {
    let mut fenced = node.wal.fenced();
    if fenced.wait_for(|f| *f).await.is_ok() && node.phase() == Phase::Ready {
        node.stop_fenced("our WAL was taken over");
    }
}
