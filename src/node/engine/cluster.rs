//! [`Cluster`] for [`Node`]: readiness and members from the view, transfer
//! and drain proposed to the metadata log, catching up with it, and the
//! peer credential.

use super::super::{Node, Phase};
use super::meta_error;
use crate::api::*;
use crate::meta::{Command, Outcome, Rejection};
use async_trait::async_trait;

#[async_trait]
impl Cluster for Node {
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

    async fn node_metrics(&self, node: &str) -> ApiResult<String> {
        if node == self.id.as_str() {
            return Ok(crate::telemetry::render());
        }
        let addr = {
            let view = self.meta.view();
            let row = view
                .nodes
                .get(&crate::ids::NodeId::new(node))
                .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("node {node:?} is not registered")))?;
            if row.fenced {
                return Err(ApiError::unavailable(format!("node {node:?} is fenced")));
            }
            row.http_addr.clone()
        };
        self.router().metrics(&addr).await
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

    fn peer_key_loaded(&self) -> bool {
        self.peer.credential().is_some()
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
}
