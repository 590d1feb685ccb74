//! In-memory metadata log: a mutex is the arbiter of order. For tests and
//! simulation.

use super::log::{AppendOutcome, MetaLog};
use crate::ids::LogIndex;
use crate::store::StoreResult;
use async_trait::async_trait;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct State {
    entries: BTreeMap<LogIndex, Bytes>,
    snapshots: BTreeMap<LogIndex, Bytes>,
}

#[derive(Debug, Clone, Default)]
pub struct MemoryLog {
    state: Arc<Mutex<State>>,
}

impl MemoryLog {
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl MetaLog for MemoryLog {
    async fn append_at(&self, index: LogIndex, entry: Bytes) -> StoreResult<AppendOutcome> {
        let mut s = self.state.lock().unwrap();
        if s.entries.contains_key(&index) {
            return Ok(AppendOutcome::IndexTaken);
        }
        s.entries.insert(index, entry);
        Ok(AppendOutcome::Appended)
    }

    async fn read_from(&self, from: LogIndex, max: usize) -> StoreResult<Vec<(LogIndex, Bytes)>> {
        let s = self.state.lock().unwrap();
        let mut out = Vec::new();
        let mut want = from;
        for (i, e) in s.entries.range(from..) {
            if *i != want || out.len() >= max {
                break;
            }
            out.push((*i, e.clone()));
            want = want.next();
        }
        Ok(out)
    }

    async fn put_snapshot(&self, index: LogIndex, snapshot: Bytes) -> StoreResult<()> {
        self.state.lock().unwrap().snapshots.insert(index, snapshot);
        Ok(())
    }

    async fn latest_snapshot(&self) -> StoreResult<Option<(LogIndex, Bytes)>> {
        Ok(self
            .state
            .lock()
            .unwrap()
            .snapshots
            .iter()
            .next_back()
            .map(|(i, b)| (*i, b.clone())))
    }

    async fn truncate_before(&self, index: LogIndex) -> StoreResult<u64> {
        let mut s = self.state.lock().unwrap();
        let keep = s.entries.split_off(&index);
        let removed = s.entries.len() as u64;
        s.entries = keep;
        if let Some(base) = s.snapshots.range(..=index).next_back().map(|(i, _)| *i) {
            s.snapshots = s.snapshots.split_off(&base);
        }
        Ok(removed)
    }
}
