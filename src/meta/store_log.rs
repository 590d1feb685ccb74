//! Metadata log on an object store: entry N is the object `log/<N>`, created
//! with create-if-absent, so at most one entry can ever exist at an index.
//! Snapshots are `snapshots/<N>`. Used by the embedded default.

use super::log::{AppendOutcome, MetaLog};
use crate::ids::LogIndex;
use crate::store::{DynStore, PutOutcome, StoreResult};
use async_trait::async_trait;
use bytes::Bytes;
use futures::future::join_all;

/// How many indices a read fetches at once, at most, while catching up.
const READ_WINDOW: u64 = 16;

#[derive(Debug, Clone)]
pub struct StoreLog {
    store: DynStore,
    prefix: String,
}

impl StoreLog {
    /// Delete snapshots older than the newest one at or below `index`.
    pub async fn truncate_snapshots_before(&self, index: LogIndex) -> StoreResult<()> {
        let snaps = self.snapshot_indices().await?;
        if let Some(base) = snaps.iter().copied().filter(|s| *s <= index).max() {
            for s in snaps.into_iter().filter(|s| *s < base) {
                self.store.delete(&self.snapshot_key(s)).await?;
            }
        }
        Ok(())
    }

    /// `prefix` is prepended to every key (`""` or ending with `/`).
    pub fn new(store: DynStore, prefix: &str) -> Self {
        Self {
            store,
            prefix: prefix.to_string(),
        }
    }

    fn entry_key(&self, index: LogIndex) -> String {
        format!("{}log/{:020}", self.prefix, index.0)
    }

    fn snapshot_key(&self, index: LogIndex) -> String {
        format!("{}snapshots/{:020}", self.prefix, index.0)
    }

    async fn snapshot_indices(&self) -> StoreResult<Vec<LogIndex>> {
        let listed = self.store.list(&format!("{}snapshots/", self.prefix)).await?;
        Ok(listed
            .iter()
            .filter_map(|o| o.key.rsplit('/').next()?.parse::<u64>().ok())
            .map(LogIndex)
            .collect())
    }
}

#[async_trait]
impl MetaLog for StoreLog {
    async fn append_at(&self, index: LogIndex, entry: Bytes) -> StoreResult<AppendOutcome> {
        Ok(match self.store.put_if_absent(&self.entry_key(index), entry).await? {
            PutOutcome::Created => AppendOutcome::Appended,
            PutOutcome::AlreadyExists => AppendOutcome::IndexTaken,
        })
    }

    async fn read_from(&self, from: LogIndex, max: usize) -> StoreResult<Vec<(LogIndex, Bytes)>> {
        let mut out = Vec::new();
        let mut next = from;
        // The first GET is the next slot alone: a tail that finds nothing,
        // the common case, costs one request, not a window of them. Each
        // round that comes back full doubles the window up to READ_WINDOW.
        let mut grown = 1u64;
        while out.len() < max {
            let window = grown.min((max - out.len()) as u64).max(1);
            grown = (grown * 2).min(READ_WINDOW);
            let gets = (0..window).map(|i| {
                let idx = LogIndex(next.0 + i);
                let key = self.entry_key(idx);
                async move { (idx, self.store.get(&key, None).await) }
            });
            for (idx, got) in join_all(gets).await {
                match got {
                    Ok(Some(bytes)) => out.push((idx, bytes)),
                    Ok(None) => return Ok(out),
                    // What was read before the failure is still good.
                    Err(_) if !out.is_empty() => return Ok(out),
                    Err(e) => return Err(e),
                }
            }
            next = LogIndex(next.0 + window);
        }
        Ok(out)
    }

    async fn put_snapshot(&self, index: LogIndex, snapshot: Bytes) -> StoreResult<()> {
        // A snapshot at an index is a pure function of the log, so an existing
        // one holds the same view.
        self.store.put_if_absent(&self.snapshot_key(index), snapshot).await?;
        Ok(())
    }

    async fn latest_snapshot(&self) -> StoreResult<Option<(LogIndex, Bytes)>> {
        for index in self.snapshot_indices().await?.into_iter().rev() {
            if let Some(bytes) = self.store.get(&self.snapshot_key(index), None).await? {
                return Ok(Some((index, bytes)));
            }
        }
        Ok(None)
    }

    async fn truncate_before(&self, index: LogIndex) -> StoreResult<u64> {
        let listed = self.store.list(&format!("{}log/", self.prefix)).await?;
        let mut removed = 0;
        // Ascending, so a proposer that appended on a freed index can tell by
        // its predecessor being gone (see `client.rs`).
        for o in listed {
            let Some(i) = o.key.rsplit('/').next().and_then(|s| s.parse::<u64>().ok()) else {
                continue;
            };
            if i >= index.0 {
                break;
            }
            self.store.delete(&o.key).await?;
            removed += 1;
        }
        self.truncate_snapshots_before(index).await?;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{CountedStore, MemoryStore};
    use std::sync::Arc;

    fn gets(label: &str) -> u64 {
        let name = format!("sluice_object_store_requests_total{{store=\"{label}\",op=\"get\",outcome=\"ok\"}} ");
        crate::telemetry::render()
            .lines()
            .find_map(|l| l.strip_prefix(&name))
            .map_or(0, |v| v.trim().parse().unwrap())
    }

    #[tokio::test]
    async fn an_empty_tail_costs_one_get_and_a_backlog_is_read_whole() {
        let label = "test-store-log-window";
        let log = StoreLog::new(CountedStore::wrap(Arc::new(MemoryStore::new()), label), "meta/");
        assert!(log.read_from(LogIndex(1), 256).await.unwrap().is_empty());
        assert_eq!(gets(label), 1, "nothing to read: one GET");
        for i in 1..=40 {
            let outcome = log.append_at(LogIndex(i), Bytes::from(format!("e{i}"))).await.unwrap();
            assert_eq!(outcome, AppendOutcome::Appended);
        }
        let before = gets(label);
        let read = log.read_from(LogIndex(1), 256).await.unwrap();
        let indices: Vec<u64> = read.iter().map(|(i, _)| i.0).collect();
        assert_eq!(indices, (1..=40).collect::<Vec<_>>());
        // Windows of 1, 2, 4, 8, 16, 16: 47 GETs for 40 entries and the end.
        assert_eq!(gets(label) - before, 47);
        let capped = log.read_from(LogIndex(5), 3).await.unwrap();
        assert_eq!(capped.iter().map(|(i, _)| i.0).collect::<Vec<_>>(), [5, 6, 7]);
    }
}
