//! Request accounting: a wrapper that counts every request an object store
//! is sent, by what the store holds (`wal`, `data`, `meta`), operation and
//! outcome, as `sluice_object_store_requests_total{store,op,outcome}`, and
//! the bytes moved as `sluice_object_store_bytes_total{store,op}`.
//!
//! Operations are named as a per-request price list names them: `put`,
//! `get` (whole object), `get_range`, `list`, `delete`. A LIST that the
//! backend pages counts once here; S3 bills each page of 1,000 keys, so
//! listings of more than 1,000 keys are undercounted (they are rare: the
//! garbage collector's and a takeover's).

use super::{DynStore, ObjectMeta, ObjectStore, PutOutcome, StoreResult};
use crate::telemetry;
use async_trait::async_trait;
use bytes::Bytes;
use std::ops::Range;
use std::sync::Arc;

#[derive(Debug)]
pub struct CountedStore {
    inner: DynStore,
    store: &'static str,
}

impl CountedStore {
    /// Count the requests sent to `inner` under the label `store`.
    pub fn wrap(inner: DynStore, store: &'static str) -> DynStore {
        Arc::new(CountedStore { inner, store })
    }

    fn count<T>(&self, op: &str, result: &StoreResult<T>) {
        let outcome = if result.is_ok() { "ok" } else { "error" };
        telemetry::count(
            "sluice_object_store_requests_total",
            &[("store", self.store), ("op", op), ("outcome", outcome)],
        );
    }

    fn bytes(&self, op: &str, n: usize) {
        // Bytes sent (PUT) and received (GET).
        telemetry::count_n(
            "sluice_object_store_bytes_total",
            &[("store", self.store), ("op", op)],
            n as u64,
        );
    }
}

#[async_trait]
impl ObjectStore for CountedStore {
    async fn put_if_absent(&self, key: &str, body: Bytes) -> StoreResult<PutOutcome> {
        let len = body.len();
        let result = self.inner.put_if_absent(key, body).await;
        self.count("put", &result);
        if matches!(result, Ok(PutOutcome::Created)) {
            self.bytes("put", len);
        }
        result
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> StoreResult<Option<Bytes>> {
        let op = if range.is_some() { "get_range" } else { "get" };
        let result = self.inner.get(key, range).await;
        self.count(op, &result);
        if let Ok(Some(b)) = &result {
            self.bytes(op, b.len());
        }
        result
    }

    async fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        let result = self.inner.list(prefix).await;
        self.count("list", &result);
        result
    }

    async fn delete(&self, key: &str) -> StoreResult<()> {
        let result = self.inner.delete(key).await;
        self.count("delete", &result);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{FaultConfig, FaultyStore, MemoryStore};

    fn counted(text: &str, store: &str, op: &str, outcome: &str) -> u64 {
        let name =
            format!("sluice_object_store_requests_total{{store=\"{store}\",op=\"{op}\",outcome=\"{outcome}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&name))
            .map_or(0, |v| v.trim().parse().unwrap())
    }

    #[tokio::test]
    async fn every_request_is_counted_by_store_operation_and_outcome() {
        // Labels of their own, so tests running beside this one do not move them.
        let s = CountedStore::wrap(Arc::new(MemoryStore::new()), "test-counted");
        let before = telemetry::render();
        s.put_if_absent("a/1", Bytes::from_static(b"hello")).await.unwrap();
        s.put_if_absent("a/1", Bytes::from_static(b"again")).await.unwrap();
        s.get("a/1", None).await.unwrap();
        s.get("a/1", Some(1..3)).await.unwrap();
        s.get("a/missing", None).await.unwrap();
        s.list("a/").await.unwrap();
        s.delete("a/1").await.unwrap();
        let after = telemetry::render();
        let delta =
            |op, outcome| counted(&after, "test-counted", op, outcome) - counted(&before, "test-counted", op, outcome);
        assert_eq!(delta("put", "ok"), 2);
        assert_eq!(delta("get", "ok"), 2);
        assert_eq!(delta("get_range", "ok"), 1);
        assert_eq!(delta("list", "ok"), 1);
        assert_eq!(delta("delete", "ok"), 1);
        assert!(after.contains("sluice_object_store_bytes_total{store=\"test-counted\",op=\"put\"} 5"));

        let failing = FaultyStore::new(
            Arc::new(MemoryStore::new()),
            FaultConfig {
                unavailable: true,
                ..FaultConfig::default()
            },
        );
        let s = CountedStore::wrap(Arc::new(failing), "test-counted-failing");
        assert!(s.put_if_absent("b/1", Bytes::from_static(b"x")).await.is_err());
        let text = telemetry::render();
        assert_eq!(counted(&text, "test-counted-failing", "put", "error"), 1);
    }
}
