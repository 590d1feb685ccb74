//! Object-store access: the one narrow trait every durable byte goes through.
//!
//! The WAL, data objects and the object-store metadata log all use
//! [`ObjectStore`]. It has exactly what Sluice needs: create-if-absent,
//! ranged get, list and delete. Outcomes of a conditional create are values
//! ([`PutOutcome`]); failures are [`StoreError`]s classified where they are
//! produced as *determinate* (definitely did not take effect; safe to retry or
//! give up) or *indeterminate* (may have taken effect; settle by reading back).

pub mod conformance;
pub mod counted;
pub mod faulty;
pub mod latency;
pub mod local;
pub mod memory;
pub mod s3;

use async_trait::async_trait;
use bytes::Bytes;
use std::ops::Range;
use std::sync::Arc;

pub use counted::CountedStore;
pub use faulty::{FaultConfig, FaultStats, FaultyStore};
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
        Self {
            op,
            key: key.to_string(),
            certainty: Certainty::Determinate,
            retryable,
            reason: reason.into(),
        }
    }

    pub fn indeterminate(op: &'static str, key: &str, reason: impl Into<String>) -> Self {
        Self {
            op,
            key: key.to_string(),
            certainty: Certainty::Indeterminate,
            retryable: true,
            reason: reason.into(),
        }
    }

    pub fn is_indeterminate(&self) -> bool {
        self.certainty == Certainty::Indeterminate
    }

    /// Classify an I/O error of a local-filesystem operation that could not
    /// have taken effect (it failed before the final link/rename).
    pub fn from_io(op: &'static str, key: &str, err: &std::io::Error) -> Self {
        use std::io::ErrorKind::*;
        let retryable = matches!(
            err.kind(),
            Interrupted | TimedOut | WouldBlock | StorageFull | ResourceBusy
        );
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
        if !seg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        {
            return Err(format!("object key {key:?} has characters outside [A-Za-z0-9._-/]"));
        }
    }
    Ok(())
}

/// Check a listing prefix: every complete segment must be a valid key
/// segment and the trailing partial segment (possibly empty) may only use the
/// key alphabet, so a prefix may end mid-segment (`meta/log/000`) or at a
/// separator (`wal/n1/3/`). The empty prefix lists everything.
pub fn validate_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Ok(());
    }
    if prefix.len() > 1024 {
        return Err(format!("list prefix must be at most 1024 bytes, got {}", prefix.len()));
    }
    let (complete, partial) = match prefix.rsplit_once('/') {
        Some((complete, partial)) => (Some(complete), partial),
        None => (None, prefix),
    };
    if let Some(complete) = complete {
        validate_key(complete).map_err(|e| format!("list prefix {prefix:?}: {e}"))?;
    }
    if !partial
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(format!("list prefix {prefix:?} has characters outside [A-Za-z0-9._-/]"));
    }
    Ok(())
}

/// [`validate_key`] as a [`StoreError`] for operation `op`: a refused key is
/// determinate (nothing was attempted) and not retryable (it never will be valid).
pub fn check_key(op: &'static str, key: &str) -> StoreResult<()> {
    validate_key(key).map_err(|reason| StoreError::determinate(op, key, false, reason))
}

/// [`validate_prefix`] as a [`StoreError`] for `list`.
pub fn check_prefix(prefix: &str) -> StoreResult<()> {
    validate_prefix(prefix).map_err(|reason| StoreError::determinate("list", prefix, false, reason))
}

/// Resolve an optional byte range against an object of `size` bytes, with the
/// semantics every backend must share: `None` is the whole object, an end
/// past the object is cut at the end, a start past the end (or after the
/// range's end) is an error. A start exactly at the end yields no bytes.
pub fn resolve_range(size: u64, range: Option<Range<u64>>) -> Result<Range<u64>, String> {
    let Some(range) = range else {
        return Ok(0..size);
    };
    if range.start > range.end {
        return Err(format!("inverted range {}..{}", range.start, range.end));
    }
    if range.start > size {
        return Err(format!(
            "range {}..{} starts past the end of a {size}-byte object",
            range.start, range.end
        ));
    }
    Ok(range.start..range.end.min(size))
}

/// Open a store from its URL: `memory://`, `file:///path`, `s3://bucket/prefix`.
pub async fn open_url(url: &str, s3: &s3::S3Options) -> anyhow::Result<DynStore> {
    if url.starts_with("memory://") {
        return Ok(Arc::new(MemoryStore::new()));
    }
    if let Some(path) = url.strip_prefix("file://") {
        if path.is_empty() {
            anyhow::bail!("store URL {url:?} has no path");
        }
        return Ok(Arc::new(LocalStore::open(path)?));
    }
    if url.starts_with("s3://") {
        return Ok(Arc::new(s3::S3Store::open(url, s3).await?));
    }
    anyhow::bail!("unsupported store URL {url:?} (expected memory://, file:///path or s3://bucket/prefix)")
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

    #[test]
    fn prefixes_may_end_mid_segment() {
        assert!(validate_prefix("").is_ok());
        assert!(validate_prefix("meta/log/000").is_ok());
        assert!(validate_prefix("wal/n1/3/").is_ok());
        assert!(validate_prefix("wal//").is_err());
        assert!(validate_prefix("../x").is_err());
        assert!(validate_prefix("a b").is_err());
    }

    #[test]
    fn ranges_are_cut_at_the_end() {
        assert_eq!(resolve_range(10, None), Ok(0..10));
        assert_eq!(resolve_range(10, Some(2..5)), Ok(2..5));
        assert_eq!(resolve_range(10, Some(8..50)), Ok(8..10));
        assert_eq!(resolve_range(10, Some(10..12)), Ok(10..10));
        assert!(resolve_range(10, Some(11..12)).is_err());
        #[allow(clippy::reversed_empty_ranges)]
        let inverted = 5..4;
        assert!(resolve_range(10, Some(inverted)).is_err());
    }
}
