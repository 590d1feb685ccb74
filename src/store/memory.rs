//! An in-memory [`ObjectStore`] for tests and single-process experiments.
//!
//! Nothing here is durable; it exists so that higher layers (and the
//! conformance suite) can run without a filesystem or network, and so that
//! [`FaultyStore`](super::FaultyStore) has something cheap to wrap.

use super::{check_key, check_prefix, resolve_range, ObjectMeta, ObjectStore, PutOutcome, StoreError, StoreResult};
use async_trait::async_trait;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::ops::{Bound, Range};
use std::sync::{Arc, Mutex, MutexGuard};

/// Objects in a `BTreeMap` behind a mutex.
///
/// A `BTreeMap` keeps keys sorted, so `list` is a range scan with the same
/// byte-wise order a real store returns. Cloning shares the map: clones are
/// handles to one store, like two clients of one bucket.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    objects: Arc<Mutex<BTreeMap<String, Bytes>>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of stored objects (handy in tests).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The map. A panic while holding the lock cannot leave it half-updated
    /// (every critical section is a single map operation), so poisoning is
    /// ignored rather than propagated.
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Bytes>> {
        self.objects.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl ObjectStore for MemoryStore {
    async fn put_if_absent(&self, key: &str, body: Bytes) -> StoreResult<PutOutcome> {
        check_key("put", key)?;
        let mut objects = self.lock();
        if objects.contains_key(key) {
            return Ok(PutOutcome::AlreadyExists);
        }
        objects.insert(key.to_string(), body);
        Ok(PutOutcome::Created)
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> StoreResult<Option<Bytes>> {
        check_key("get", key)?;
        let Some(body) = self.lock().get(key).cloned() else {
            return Ok(None);
        };
        let range = resolve_range(body.len() as u64, range)
            .map_err(|reason| StoreError::determinate("get", key, false, reason))?;
        // `resolve_range` bounds the range by the body length, so both ends fit in usize.
        Ok(Some(body.slice(range.start as usize..range.end as usize)))
    }

    async fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        check_prefix(prefix)?;
        let objects = self.lock();
        Ok(objects
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, body)| ObjectMeta {
                key: key.clone(),
                size: body.len() as u64,
            })
            .collect())
    }

    async fn delete(&self, key: &str) -> StoreResult<()> {
        check_key("delete", key)?;
        self.lock().remove(key);
        Ok(())
    }
}
