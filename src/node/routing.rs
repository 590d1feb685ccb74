//! The node's side of routing: what [`crate::route`] asks of it (its view
//! of who owns a stream, the index it has applied, a catch-up).

use super::Node;
use crate::ids::StreamId;
use async_trait::async_trait;

#[async_trait]
impl crate::route::Placement for Node {
    fn forward_target(&self, stream: StreamId) -> Option<String> {
        crate::route::forward_target(&self.meta.view(), &self.id, self.epoch, stream)
    }

    fn applied(&self) -> u64 {
        self.meta.applied().0
    }

    async fn sync(&self) -> bool {
        crate::api::Cluster::sync_metadata(self).await
    }
}

impl Node {
    /// The forwarding client, for the engine's routed calls.
    pub(super) fn router(&self) -> &crate::route::Forwarder {
        &self.forwarder
    }
}
