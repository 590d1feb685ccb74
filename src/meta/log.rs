//! The `MetaLog` trait: an append-only log whose append is a conditional
//! create at the next index, plus snapshots. Backends: memory, object store
//! (and DynamoDB later). Entry and snapshot encodings live in `entry.rs`.

use crate::ids::LogIndex;
use crate::store::StoreResult;
use async_trait::async_trait;
use bytes::Bytes;

/// What a conditional append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    /// Our entry is now at the index.
    Appended,
    /// Another entry already holds the index; nothing was written.
    IndexTaken,
}

#[async_trait]
pub trait MetaLog: Send + Sync + std::fmt::Debug + 'static {
    /// Create the entry at `index` only if no entry exists there.
    async fn append_at(&self, index: LogIndex, entry: Bytes) -> StoreResult<AppendOutcome>;

    /// Up to `max` entries from `from` on, contiguous (stops at the first gap).
    async fn read_from(&self, from: LogIndex, max: usize) -> StoreResult<Vec<(LogIndex, Bytes)>>;

    /// Store the encoded view as of `index`.
    async fn put_snapshot(&self, index: LogIndex, snapshot: Bytes) -> StoreResult<()>;

    /// The newest snapshot, if any.
    async fn latest_snapshot(&self) -> StoreResult<Option<(LogIndex, Bytes)>>;

    /// Delete entries below `index` in ascending order, and snapshots older
    /// than the newest one at or below `index`. Returns how many entries went.
    async fn truncate_before(&self, index: LogIndex) -> StoreResult<u64>;
}

pub type DynLog = std::sync::Arc<dyn MetaLog>;
