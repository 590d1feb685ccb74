//! Object-store access: the one narrow trait every durable byte goes through.
//!
//! The WAL, data objects and the object-store metadata log all use
//! [`ObjectStore`]. It has exactly what Sluice needs: create-if-absent,
//! ranged get, list and delete. Outcomes of a conditional create are values
//! ([`PutOutcome`]); failures are [`StoreError`]s classified where they are
//! produced as *determinate* (definitely did not take effect; safe to retry or
//! give up) or *indeterminate* (may have taken effect; settle by reading back).

pub mod conformance;
pub mod faulty;
pub mod local;
pub mod memory;

use async_trait::async_trait;
use bytes::Bytes;
use std::ops::Range;
use std::sync::Arc;

pub use faulty::{FaultConfig, FaultyStore};
pub use local::LocalStore;
pub use memory::MemoryStore;

/// What a create-if-absent PUT did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The object did not exist and now holds our bytes.
    Created,
    /// An object already existed under the key; nothing was written.
    AlreadyExists,
}

/// Metadata of one listed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub key: String,
    pub size: u64,
}

/// Whether a failed request may nevertheless have taken effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Certainty {
    /// The request definitely did not take effect.
    Determinate,
    /// The request may have taken effect (timeout after sending, reply lost).
    Indeterminate,
}

/// A failure of an object-store request.
#[derive(Debug, Clone, thiserror::Error)]
#[error("object store {op} {key:?} failed ({certainty:?}{}): {reason}", if *.retryable { ", retryable" } else { "" })]
pub struct StoreError {
    pub op: &'static str,
    pub key: String,
    pub certainty: Certainty,
    /// A transient condition (5xx, 503 SlowDown, 409 conflict, timeout):
    /// retrying the same request later may succeed.
    pub retryable: bool,
    pub reason: String,
}

impl StoreError {
    pub fn determinate(op: &'static str, key: &str, retryable: bool, reason: impl Into<String>) -> Self {
        Self { op, key: key.to_string(), certainty: Certainty::Determinate, retryable, reason: reason.into() }
    }

    pub fn indeterminate(op: &'static str, key: &str, reason: impl Into<String>) -> Self {
        Self { op, key: key.to_string(), certainty: Certainty::Indeterminate, retryable: true, reason: reason.into() }
    }

    pub fn is_indeterminate(&self) -> bool {
        self.certainty == Certainty::Indeterminate
    }

    /// Classify an I/O error of a local-filesystem operation that could not
    /// have taken effect (it failed before the final link/rename).
    pub fn from_io(op: &'static str, key: &str, err: &std::io::Error) -> Self {
        use std::io::ErrorKind::*;
        let retryable = matches!(err.kind(), Interrupted | TimedOut | WouldBlock | StorageFull | ResourceBusy);
        Self::determinate(op, key, retryable, err.to_string())
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The object store as Sluice needs it.
///
/// Keys are `/`-separated relative paths of `[A-Za-z0-9._-]` segments; no
/// segment is empty, `.` or `..`. Objects are immutable once created.
#[async_trait]
pub trait ObjectStore: Send + Sync + std::fmt::Debug + 'static {
    /// Create `key` holding `body` only if no object exists under it.
    /// Durable when it returns `Created`.
    async fn put_if_absent(&self, key: &str, body: Bytes) -> StoreResult<PutOutcome>;

    /// Read an object, or the byte `range` of it. `Ok(None)` if it does not
    /// exist. A range reaching past the end is cut at the end; a range
    /// starting past the end is an error.
    async fn get(&self, key: &str, range: Option<Range<u64>>) -> StoreResult<Option<Bytes>>;

    /// Every object whose key starts with `prefix`, sorted by key.
    async fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>>;

    /// Delete an object; deleting a missing object succeeds.
    async fn delete(&self, key: &str) -> StoreResult<()>;
}

pub type DynStore = Arc<dyn ObjectStore>;

/// Check a key against the rules of [`ObjectStore`].
pub fn validate_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > 1024 {
        return Err(format!("object key must be 1-1024 bytes, got {}", key.len()));
    }
    for seg in key.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(format!("object key {key:?} has an empty, '.' or '..' segment"));
        }
        if !seg.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
            return Err(format!("object key {key:?} has characters outside [A-Za-z0-9._-/]"));
        }
    }
    Ok(())
}

/// Open a store from its URL: `memory://`, `file:///path`.
/// (`s3://` arrives with the AWS backends.)
pub fn open_url(url: &str) -> anyhow::Result<DynStore> {
    if url == "memory://" || url.starts_with("memory://") {
        return Ok(Arc::new(MemoryStore::new()));
    }
    if let Some(path) = url.strip_prefix("file://") {
        if path.is_empty() {
            anyhow::bail!("store URL {url:?} has no path");
        }
        return Ok(Arc::new(LocalStore::open(path)?));
    }
    anyhow::bail!("unsupported store URL {url:?} (expected memory:// or file:///path)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_validated() {
        assert!(validate_key("wal/n1/1/00000000000000000000").is_ok());
        assert!(validate_key("").is_err());
        assert!(validate_key("a//b").is_err());
        assert!(validate_key("a/../b").is_err());
        assert!(validate_key("/abs").is_err());
        assert!(validate_key("a b").is_err());
    }
}
