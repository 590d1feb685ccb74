//! [`ProducerIds`] for [`Node`]: ids reserved from the metadata log a block
//! at a time and handed out from memory.

use super::super::Node;
use super::meta_error;
use crate::api::*;
use crate::meta::{Command, Outcome};
use async_trait::async_trait;

/// Kafka producer ids a node reserves in the metadata log at a time.
const PRODUCER_ID_BLOCK: u32 = 1000;

#[async_trait]
impl ProducerIds for Node {
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
}
