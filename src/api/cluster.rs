//! The cluster capability: this node's readiness and the members it sees,
//! the operator's moves (transfer a stream, drain a node), and keeping
//! this node's view of the metadata as new as a caller needs (after a
//! change through another node, or for a request another node forwarded).

use super::{ApiResult, NodesInfo, ReadyStatus};
use async_trait::async_trait;

#[async_trait]
pub trait Cluster: Send + Sync + 'static {
    /// Whether this node serves requests now, and why not.
    fn ready(&self) -> ReadyStatus;

    /// The registered nodes and the lease holder.
    fn nodes(&self) -> NodesInfo;

    /// Resolves when live reads must end (shutdown step 3).
    async fn live_reads_ended(&self);

    /// Start moving a partition to another node (`BeginTransfer`).
    async fn transfer(&self, topic: &str, partition: u32, to: &str) -> ApiResult<()>;

    /// Mark a node draining: placement avoids it and its streams move away.
    async fn drain(&self, node: &str) -> ApiResult<()>;

    /// A node's Prometheus metrics (this node's own, or another's asked over
    /// HTTP), so one page can show every node: `not_found` for a node that
    /// is not registered, `unavailable` when it does not answer in time.
    async fn node_metrics(&self, node: &str) -> ApiResult<String>;

    /// Bring this node's view of the metadata up to everything committed so
    /// far (bounded wait), so a read follows a change made through another
    /// node. False when that could not be done in time: an absence in the
    /// view then proves nothing.
    async fn sync_metadata(&self) -> bool;

    /// Wait (bounded) until this node's view has applied metadata log entry
    /// `index`; false when it could not. A forwarded request carries the
    /// forwarder's index, so the owner answers from a view at least as new
    /// as the one that routed it there.
    async fn catch_up_to(&self, index: u64) -> bool;

    /// Whether `presented` is the credential of a node of this cluster, so a
    /// request carrying it may be served as forwarded.
    fn is_peer(&self, presented: &str) -> bool;

    /// Whether this node has loaded the cluster's peer key. Until it has
    /// (its store unreachable since it started), it can verify no peer, and
    /// a node-to-node call to it is answered as retryable, not forbidden.
    fn peer_key_loaded(&self) -> bool;
}
