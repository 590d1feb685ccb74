//! Reads of committed records: ranged GETs of single chunks through a
//! bounded cache, with read-ahead of the next chunk for sequential readers.
//! Any node can serve these; they need only the index in the view.

use super::partition::record_size;
use crate::api::{ApiError, ErrorCode};
use crate::batch::{batches, decode_records, Record};
use crate::ids::Offset;
use crate::meta::IndexedChunk;
use crate::store::DynStore;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// A byte-bounded LRU cache of chunk bytes.
#[derive(Debug, Default)]
struct Cache {
    limit: usize,
    used: usize,
    tick: u64,
    entries: HashMap<(String, u64), (u64, Bytes)>,
    order: BTreeMap<u64, (String, u64)>,
}

impl Cache {
    fn get(&mut self, key: &(String, u64)) -> Option<Bytes> {
        self.tick += 1;
        let tick = self.tick;
        let (t, bytes) = self.entries.get_mut(key)?;
        self.order.remove(t);
        *t = tick;
        self.order.insert(tick, key.clone());
        Some(bytes.clone())
    }

    fn insert(&mut self, key: (String, u64), bytes: Bytes) {
        if bytes.len() > self.limit || self.entries.contains_key(&key) {
            return;
        }
        self.tick += 1;
        self.used += bytes.len();
        self.order.insert(self.tick, key.clone());
        self.entries.insert(key, (self.tick, bytes));
        while self.used > self.limit {
            let Some((_, victim)) = self.order.pop_first() else {
                break;
            };
            if let Some((_, b)) = self.entries.remove(&victim) {
                self.used -= b.len();
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct ChunkReader {
    store: DynStore,
    cache: Arc<Mutex<Cache>>,
}

impl ChunkReader {
    pub fn new(store: DynStore, cache_bytes: usize) -> Self {
        Self {
            store,
            cache: Arc::new(Mutex::new(Cache {
                limit: cache_bytes,
                ..Cache::default()
            })),
        }
    }

    pub fn cached_bytes(&self) -> usize {
        self.cache.lock().unwrap().used
    }

    /// One chunk's bytes, from the cache or a ranged GET, length- and CRC-checked.
    pub async fn fetch(&self, chunk: &IndexedChunk) -> Result<Bytes, ApiError> {
        let key = (chunk.key.clone(), chunk.byte_start);
        if let Some(b) = self.cache.lock().unwrap().get(&key) {
            crate::telemetry::count("sluice_read_cache_total", &[("outcome", "hit")]);
            return Ok(b);
        }
        crate::telemetry::count("sluice_read_cache_total", &[("outcome", "miss")]);
        let bytes = self
            .store
            .get(&chunk.key, Some(chunk.byte_start..chunk.byte_end))
            .await
            .map_err(|e| ApiError::unavailable(format!("reading {}: {e}", chunk.key)))?
            .ok_or_else(|| ApiError::new(ErrorCode::Internal, format!("indexed object {} is missing", chunk.key)))?;
        if bytes.len() as u64 != chunk.byte_end - chunk.byte_start || crc32c::crc32c(&bytes) != chunk.crc {
            return Err(ApiError::new(
                ErrorCode::Internal,
                format!(
                    "chunk {}[{}..{}] fails its length or CRC check",
                    chunk.key, chunk.byte_start, chunk.byte_end
                ),
            ));
        }
        self.cache.lock().unwrap().insert(key, bytes.clone());
        Ok(bytes)
    }

    /// The stored batches holding offsets from `from` on out of `chunks`
    /// (ordered by offset), as they are in the data objects, up to about
    /// `max_bytes` (the first batch is returned even if larger).
    pub async fn read_batches(
        &self,
        chunks: &[IndexedChunk],
        from: Offset,
        max_bytes: usize,
    ) -> Result<(Vec<Bytes>, Offset), ApiError> {
        let first = chunks.partition_point(|c| c.end <= from);
        let mut out: Vec<Bytes> = Vec::new();
        let mut bytes = 0usize;
        let mut next = from;
        // Read-ahead warms the chunk after the last one this read touches,
        // for the reader's next request. It is not started while this read
        // goes on: the loop would fetch that chunk itself at the same time,
        // and a large read would hold every chunk twice.
        let read_ahead = |i: usize| {
            if let Some(next) = chunks.get(i + 1) {
                let (this, next) = (self.clone(), next.clone());
                tokio::spawn(async move {
                    let _ = this.fetch(&next).await;
                });
            }
        };
        for (i, chunk) in chunks.iter().enumerate().skip(first) {
            let data = self.fetch(chunk).await?;
            let mut pos = 0;
            for batch in batches(&chunk.key, &data) {
                let (info, raw) = batch.map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
                let at = pos;
                pos += raw.len();
                if info.end_offset() <= from {
                    continue;
                }
                if !out.is_empty() && bytes + raw.len() > max_bytes {
                    read_ahead(i);
                    return Ok((out, next));
                }
                bytes += raw.len();
                next = info.end_offset();
                out.push(data.slice(at..pos));
            }
        }
        Ok((out, next))
    }

    /// Records from `from` on out of `chunks` (ordered by offset), bounded
    /// by `limit` and `max_bytes` (at least one record when any exists).
    pub async fn read(
        &self,
        chunks: &[IndexedChunk],
        from: Offset,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<(Offset, Record)>, ApiError> {
        let first = chunks.partition_point(|c| c.end <= from);
        let mut out: Vec<(Offset, Record)> = Vec::new();
        let mut bytes = 0usize;
        for (i, chunk) in chunks.iter().enumerate().skip(first) {
            let data = self.fetch(chunk).await?;
            if let Some(next) = chunks.get(i + 1) {
                // Read-ahead: a sequential reader wants the next chunk soon.
                let (this, next) = (self.clone(), next.clone());
                tokio::spawn(async move {
                    let _ = this.fetch(&next).await;
                });
            }
            for batch in batches(&chunk.key, &data) {
                let (info, raw) = batch.map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
                if info.end_offset() <= from {
                    continue;
                }
                let records =
                    decode_records(&chunk.key, raw).map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
                for (offset, record) in records {
                    if offset < from {
                        continue;
                    }
                    let size = record_size(&record);
                    if out.len() >= limit || (!out.is_empty() && bytes + size > max_bytes) {
                        return Ok(out);
                    }
                    bytes += size;
                    out.push((offset, record));
                }
            }
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_evicts_least_recently_used_chunks_past_its_limit() {
        let mut c = Cache {
            limit: 10,
            ..Cache::default()
        };
        c.insert(("a".into(), 0), Bytes::from_static(b"12345"));
        c.insert(("b".into(), 0), Bytes::from_static(b"12345"));
        assert!(c.get(&("a".into(), 0)).is_some());
        c.insert(("c".into(), 0), Bytes::from_static(b"12345"));
        assert!(c.get(&("b".into(), 0)).is_none(), "b was least recently used");
        assert!(c.get(&("a".into(), 0)).is_some());
        assert!(c.used <= 10);
        c.insert(("huge".into(), 0), Bytes::from(vec![0u8; 11]));
        assert!(c.get(&("huge".into(), 0)).is_none(), "larger than the whole cache");
    }
}
