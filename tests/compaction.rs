//! Log compaction on one node in process: the owner of a compacted stream
//! rewrites its flushed chunks so that each key keeps its latest record,
//! at its offset; reads from the start see each key once, in offset
//! order, and the records after the compacted part as written; a
//! tombstone takes its key once past `delete.retention.ms`.

mod support;

use bytes::Bytes;
use sluice::api::{Records, Topics};
use sluice::batch::Record;
use sluice::ids::{Offset, StreamId};
use sluice::meta::{CleanupPolicy, Ratio, TopicConfig};
use sluice::node::Node;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use support::{config, eventually, memory_backends, read_from};

fn keyed(key: &str, value: Option<&str>) -> Record {
    Record {
        timestamp_ms: 1,
        key: Some(Bytes::copy_from_slice(key.as_bytes())),
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers: vec![],
    }
}

/// Every record from offset 0 on: (offset, key, value).
async fn read_all(node: &Arc<Node>) -> Vec<(u64, String, Option<String>)> {
    let r = node.read("k", 0, read_from(0)).await.unwrap();
    let s = |b: Option<Bytes>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
    (r.records.into_iter())
        .map(|(o, rec)| (o.get(), s(rec.key).unwrap(), s(rec.value)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_compacts_flushed_chunks_to_the_latest_record_of_each_key() {
    let args = ["--flush-interval-sec", "1", "--compaction-interval-sec", "1"];
    let node = Node::start_with(config("n1", &args), memory_backends()).await.unwrap();
    let topic = TopicConfig {
        cleanup_policy: Some(CleanupPolicy::Compact),
        min_cleanable_dirty_ratio: Ratio::new(0.01),
        delete_retention_ms: Some(0),
        ..TopicConfig::default()
    };
    node.create_topic("k", 1, topic).await.unwrap();
    let stream = StreamId::new(node.meta.view().topics["k"].id, 0);
    assert!(eventually(Duration::from_secs(10), || node.open_stream(stream).is_some()).await);

    // Three rounds of updates to five keys, each flushed into its own chunk;
    // key 4 is deleted in the last round.
    let mut latest: BTreeMap<String, (u64, Option<String>)> = BTreeMap::new();
    for round in 0..3 {
        let records: Vec<Record> = (0..5)
            .map(|k| {
                let value = (round < 2 || k != 4).then(|| format!("v{round}-{k}"));
                keyed(&format!("key{k}"), value.as_deref())
            })
            .collect();
        let a = node.append("k", 0, records.clone()).await.unwrap();
        for (i, r) in records.iter().enumerate() {
            let key = String::from_utf8(r.key.clone().unwrap().to_vec()).unwrap();
            let value = r.value.clone().map(|v| String::from_utf8(v.to_vec()).unwrap());
            latest.insert(key, (a.base.get() + i as u64, value));
        }
        let end = a.base.plus(u64::from(a.count));
        let flushed = eventually(Duration::from_secs(10), || {
            node.meta.view().streams[&stream].committed_end == end
        })
        .await;
        assert!(flushed, "round {round} was not flushed");
    }
    // Compacted: every key is there once, with its latest value, at the
    // offset it was written at. key4's tombstone is past
    // delete.retention.ms (0) but is the run's last record, which always
    // stays (so the run still ends at its last offset); it goes once a
    // later record follows it.
    let compacted = eventually(Duration::from_secs(20), || {
        let row = &node.meta.view().streams[&stream];
        row.compacted_end == Offset(15)
    })
    .await;
    assert!(compacted, "not compacted: {:?}", node.meta.view().streams[&stream]);
    let want: Vec<(u64, String, Option<String>)> = (latest.iter())
        .filter(|(k, (_, v))| v.is_some() || k.as_str() == "key4")
        .map(|(k, (o, v))| (*o, k.clone(), v.clone()))
        .collect();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(read_all(&node).await, want_sorted);
    let row = node.meta.view().streams[&stream].clone();
    assert_eq!(row.chunks.len(), 1, "one compacted chunk: {:?}", row.chunks);
    assert_eq!((row.chunks[0].base, row.chunks[0].end), (Offset(0), Offset(15)));
    assert_eq!(row.committed_end, Offset(15), "no offset moved");

    // A read starting at a removed offset starts at the next present one.
    let r = node.read("k", 0, read_from(1)).await.unwrap();
    assert_eq!(r.records[0].0, Offset(want_sorted[0].0));
    // New records go after, and compaction takes them in the next round.
    let a = node.append("k", 0, vec![keyed("key0", Some("last"))]).await.unwrap();
    assert_eq!(a.base, Offset(15));
    let again = eventually(Duration::from_secs(20), || {
        node.meta.view().streams[&stream].compacted_end == Offset(16)
    })
    .await;
    assert!(again, "the new record was not compacted in");
    let all = read_all(&node).await;
    assert_eq!(all.iter().filter(|(_, k, _)| k == "key0").count(), 1);
    assert!(
        !all.iter().any(|(_, k, _)| k == "key4"),
        "the tombstone took key4: {all:?}"
    );
    assert_eq!(all.last().unwrap(), &(15, "key0".to_string(), Some("last".to_string())));
    // Kafka's view of the same: batches whose offsets skip the removed ones.
    let batches = node
        .read_batches("k", 0, Offset(0), 1 << 20, Duration::ZERO, false)
        .await
        .unwrap();
    let offsets: Vec<u64> = (batches.batches.iter())
        .flat_map(|b| sluice::batch::decode_records("t", b).unwrap())
        .map(|(o, _)| o.get())
        .collect();
    let expect: Vec<u64> = all.iter().map(|(o, _, _)| *o).collect();
    assert_eq!(offsets, expect);
    node.describe_topic("k").unwrap();
}

/// Bytes a stream's index holds: what the object store keeps for it.
fn stored_bytes(node: &Arc<Node>, stream: StreamId) -> (u64, u64) {
    let row = node.meta.view().streams[&stream].clone();
    let all = row.chunks.iter().map(|c| c.byte_end - c.byte_start).sum();
    let head = (row.chunks.iter())
        .filter(|c| c.end > row.compacted_end)
        .map(|c| c.byte_end - c.byte_start)
        .sum();
    (all, head)
}

/// The workload, scaled by `SLUICE_COMPACTION_UPDATES` (default
/// 20,000 updates over 2,000 keys; by hand 1,000,000 over 10,000): keyed
/// 1 KiB updates in a scattered key order; after compaction the stored
/// bytes are at most 1.2 × the latest values' bytes plus the head not yet
/// compacted, and a read from the start sees each key once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_keeps_stored_bytes_near_the_latest_values() {
    let updates: u64 = std::env::var("SLUICE_COMPACTION_UPDATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let keys = (updates / 10).min(10_000);
    let args = [
        "--flush-interval-sec",
        "1",
        "--flush-bytes",
        "4194304",
        "--compaction-interval-sec",
        "1",
        "--compaction-bytes-per-sec",
        "1073741824",
        "--max-buffered-bytes",
        "268435456",
    ];
    let node = Node::start_with(config("n1", &args), memory_backends()).await.unwrap();
    let topic = TopicConfig {
        cleanup_policy: Some(CleanupPolicy::Compact),
        ..TopicConfig::default()
    };
    node.create_topic("k", 1, topic).await.unwrap();
    let stream = StreamId::new(node.meta.view().topics["k"].id, 0);
    assert!(eventually(Duration::from_secs(10), || node.open_stream(stream).is_some()).await);
    let value = "x".repeat(1024);
    let mut key = 7u64;
    let mut batch = Vec::new();
    let started = std::time::Instant::now();
    for i in 0..updates {
        key = key
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        batch.push(keyed(&format!("key{:05}", (key >> 33) % keys), Some(&value)));
        if batch.len() == 100 || i + 1 == updates {
            loop {
                match node.append("k", 0, batch.clone()).await {
                    Ok(_) => break,
                    // Throttled while the flusher catches up.
                    Err(e) if e.code.retryable() => tokio::time::sleep(Duration::from_millis(50)).await,
                    Err(e) => panic!("append: {e:?}"),
                }
            }
            batch.clear();
        }
    }
    let appended = started.elapsed();
    let end = Offset(updates);
    let settled = eventually(Duration::from_secs(600), || {
        let row = &node.meta.view().streams[&stream];
        row.committed_end == end && row.compacted_end == end
    })
    .await;
    assert!(settled, "not flushed and compacted to the end");
    let (stored, head) = stored_bytes(&node, stream);
    let r = node.read("k", 0, read_from(0)).await.unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut all = r.records;
    let mut next = r.next_offset;
    while next < end {
        let more = node.read("k", 0, read_from(next.get())).await.unwrap();
        next = more.next_offset;
        all.extend(more.records);
    }
    for (_, rec) in &all {
        assert!(
            seen.insert(rec.key.clone().unwrap()),
            "a key twice in the compacted part"
        );
    }
    let latest_bytes = seen.len() as u64 * 1024;
    eprintln!(
        "compaction: {updates} updates of 1 KiB over {keys} keys ({} live) appended in {:.1} s; \
         stored {stored} bytes ({:.3} of the latest values' {latest_bytes}), head {head} bytes",
        seen.len(),
        appended.as_secs_f64(),
        stored as f64 / latest_bytes as f64
    );
    assert!(seen.len() as u64 <= keys);
    assert!(
        stored as f64 <= 1.2 * latest_bytes as f64 + head as f64,
        "stored {stored} > 1.2 × {latest_bytes} + {head}"
    );
}
