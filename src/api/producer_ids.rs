//! The producer-ids capability: ids for Kafka idempotent producers, unique
//! in the cluster. (Their sequence checks happen where offsets are
//! assigned, in `stream`.)

use super::ApiResult;
use async_trait::async_trait;

#[async_trait]
pub trait ProducerIds: Send + Sync + 'static {
    /// A Kafka producer id unique in the cluster (InitProducerId).
    async fn init_producer_id(&self) -> ApiResult<i64>;
}
