//! The consumer-group offsets capability: what groups have committed, kept
//! in the metadata log. (Group membership lives in the Kafka front door.)

use super::{ApiResult, GroupOffset};
use async_trait::async_trait;

#[async_trait]
pub trait GroupOffsets: Send + Sync + 'static {
    /// Durably commit a consumer group's offsets (all or nothing).
    async fn commit_offsets(&self, group: &str, offsets: Vec<GroupOffset>) -> ApiResult<()>;

    /// A consumer group's committed offsets.
    fn committed_offsets(&self, group: &str) -> Vec<GroupOffset>;

    /// Groups with committed offsets.
    fn offset_groups(&self) -> Vec<String>;

    /// Whether the caller may delete `group` (`forbidden` if not), asked
    /// before anything of the group is touched.
    fn authorize_group_delete(&self, group: &str) -> ApiResult<()>;

    /// Forget a consumer group's committed offsets (`not_found` if it has none).
    async fn delete_group(&self, group: &str) -> ApiResult<()>;
}
