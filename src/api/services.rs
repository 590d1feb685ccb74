//! [`Services`]: the capabilities a front door is given, one handle each.

use super::{Cluster, GroupOffsets, Limits, ProducerIds, Records, Tokens, Topics};
use crate::clock::SharedClock;
use std::sync::Arc;

/// Every capability a front door may call, and the limits it enforces
/// before calling them. Cloning copies eight pointers.
///
/// A node builds it over itself (`Node::services`); the Kafka front door
/// builds one per authenticated principal whose handles refuse what the
/// principal's scopes do not grant (`kafka::authz`); tests build one over a
/// fake.
#[derive(Clone)]
pub struct Services {
    pub limits: Limits,
    pub records: Arc<dyn Records>,
    pub topics: Arc<dyn Topics>,
    pub group_offsets: Arc<dyn GroupOffsets>,
    pub producer_ids: Arc<dyn ProducerIds>,
    pub tokens: Arc<dyn Tokens>,
    pub cluster: Arc<dyn Cluster>,
    /// The node's clock: front doors read time through it, never on their own.
    pub clock: SharedClock,
}

impl Services {
    /// Every capability served by one `backend`, on `clock`.
    pub fn of<B>(backend: Arc<B>, limits: Limits, clock: SharedClock) -> Self
    where
        B: Records + Topics + GroupOffsets + ProducerIds + Tokens + Cluster,
    {
        Self {
            limits,
            records: backend.clone(),
            topics: backend.clone(),
            group_offsets: backend.clone(),
            producer_ids: backend.clone(),
            tokens: backend.clone(),
            cluster: backend,
            clock,
        }
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}
