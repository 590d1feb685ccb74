//! A recording wrapper around the shared object store: every WAL segment that
//! is really created is decoded, and its writers are noted per stream epoch.
//!
//! It sits *under* each node's `FaultyStore`, so a PUT whose reply is lost on
//! the way back to the node is still recorded: it did land.

use super::trace::Trace;
use async_trait::async_trait;
use bytes::Bytes;
use sluice::ids::{NodeEpoch, NodeId, StreamEpoch, StreamId};
use sluice::store::{DynStore, ObjectMeta, ObjectStore, PutOutcome, StoreResult};
use sluice::wal::segment::{decode_wal_object, WalObject};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// What landed under `wal/`.
#[derive(Debug, Default)]
pub struct WalLedger {
    /// Per (stream, stream epoch), every (node, node epoch) whose segments
    /// hold entries at that epoch. Invariant 4: one element each.
    pub writers: BTreeMap<(StreamId, StreamEpoch), BTreeSet<(NodeId, NodeEpoch)>>,
    pub segments: u64,
    pub fence_markers: u64,
    /// Keys under `wal/` that did not decode: always a violation.
    pub undecodable: Vec<String>,
    /// Keys of the fence markers that landed.
    pub marker_keys: BTreeSet<String>,
    /// Deletions by garbage collection (and WAL truncation): WAL objects,
    /// data objects.
    pub wal_deleted: u64,
    pub data_deleted: u64,
    /// Fence markers deleted: always a violation (a paused writer could
    /// then create-if-absent at the freed key).
    pub markers_deleted: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct RecordingStore {
    inner: DynStore,
    ledger: Arc<Mutex<WalLedger>>,
    /// Where every operation is noted, for bit-exactness.
    trace: Option<Arc<Trace>>,
}

impl RecordingStore {
    pub fn new(inner: DynStore) -> Self {
        Self {
            inner,
            ledger: Arc::default(),
            trace: None,
        }
    }

    /// Also note every operation and its outcome in `trace`.
    pub fn traced(inner: DynStore, trace: Arc<Trace>) -> Self {
        Self {
            trace: Some(trace),
            ..Self::new(inner)
        }
    }

    fn note(&self, what: std::fmt::Arguments<'_>) {
        if let Some(t) = &self.trace {
            t.event(what);
        }
    }

    pub fn ledger(&self) -> Arc<Mutex<WalLedger>> {
        self.ledger.clone()
    }

    fn record(&self, key: &str, body: &[u8]) {
        let mut ledger = self.ledger.lock().unwrap();
        match decode_wal_object(key, body) {
            Ok(WalObject::Segment(s)) => {
                ledger.segments += 1;
                for e in &s.entries {
                    ledger
                        .writers
                        .entry((e.stream, e.stream_epoch))
                        .or_default()
                        .insert((s.node.clone(), s.epoch));
                }
            }
            Ok(WalObject::Fence(_)) => {
                ledger.fence_markers += 1;
                ledger.marker_keys.insert(key.to_string());
            }
            Err(e) => ledger.undecodable.push(format!("{key}: {e}")),
        }
    }
}

#[async_trait]
impl ObjectStore for RecordingStore {
    async fn put_if_absent(&self, key: &str, body: Bytes) -> StoreResult<PutOutcome> {
        let outcome = self.inner.put_if_absent(key, body.clone()).await;
        self.note(format_args!(
            "put {key} {} {:?}",
            body.len(),
            outcome.as_ref().map_err(|e| e.to_string())
        ));
        let outcome = outcome?;
        if outcome == PutOutcome::Created && key.starts_with("wal/") {
            self.record(key, &body);
        }
        Ok(outcome)
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> StoreResult<Option<Bytes>> {
        let r = self.inner.get(key, range.clone()).await;
        if self.trace.is_some() {
            let got = r
                .as_ref()
                .map(|b| b.as_ref().map(Bytes::len))
                .map_err(|e| e.to_string());
            self.note(format_args!("get {key} {range:?} {got:?}"));
        }
        r
    }

    async fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        let r = self.inner.list(prefix).await;
        if self.trace.is_some() {
            let got = r.as_ref().map(Vec::len).map_err(|e| e.to_string());
            self.note(format_args!("list {prefix} {got:?}"));
        }
        r
    }

    async fn delete(&self, key: &str) -> StoreResult<()> {
        let r = self.inner.delete(key).await;
        self.note(format_args!("delete {key} {:?}", r.as_ref().map_err(|e| e.to_string())));
        r?;
        let mut ledger = self.ledger.lock().unwrap();
        if key.starts_with("wal/") {
            ledger.wal_deleted += 1;
            if ledger.marker_keys.contains(key) {
                ledger.markers_deleted.push(key.to_string());
            }
        } else if key.starts_with("data/") {
            ledger.data_deleted += 1;
        }
        Ok(())
    }
}
