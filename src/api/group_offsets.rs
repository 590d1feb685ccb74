//! The consumer-group capability: what groups have committed, and each
//! group's membership record (opaque here: the Kafka front door encodes it),
//! both kept in the metadata log so they survive the coordinator moving.

use super::{ApiResult, GroupOffset, GroupState, GroupStateWrite};
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

    /// Whether the caller may delete `group`'s committed offsets of `topic`
    /// (`forbidden` if not), asked per topic before [`Self::delete_offsets`].
    fn authorize_offset_delete(&self, group: &str, topic: &str) -> ApiResult<()>;

    /// Durably forget a consumer group's committed offsets of `partitions`
    /// (topic, partition). Partitions it has no offset for, and unknown
    /// ones, are skipped: a group with none of them is left as it is. Its
    /// membership record is not touched.
    async fn delete_offsets(&self, group: &str, partitions: Vec<(String, u32)>) -> ApiResult<()>;

    /// A group's membership record as this node's view of the log has it.
    fn group_state(&self, group: &str) -> Option<GroupState>;

    /// The version of a group's record (0: none), without copying it:
    /// what a coordinator checks on every request.
    fn group_state_version(&self, group: &str) -> u64 {
        self.group_state(group).map_or(0, |s| s.version)
    }

    /// Groups with a membership record.
    fn group_states(&self) -> Vec<String>;

    /// Compare-and-set a group's membership record: written only if the
    /// record is still at `expected` (0: no record). `invalid` if `data`
    /// is over [`MAX_GROUP_STATE_BYTES`](super::MAX_GROUP_STATE_BYTES) or
    /// `kind` is not "classic" or "consumer".
    async fn put_group_state(
        &self,
        group: &str,
        kind: &str,
        expected: u64,
        data: Vec<u8>,
    ) -> ApiResult<GroupStateWrite>;

    /// Remove a group's membership record if it is at `expected`
    /// (`None`: whatever it is). Removing a missing record is `Written(0)`.
    async fn delete_group_state(&self, group: &str, expected: Option<u64>) -> ApiResult<GroupStateWrite>;
}
