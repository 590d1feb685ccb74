//! The floor: bare create-if-absent PUTs of one size to a store, one after
//! the other, the least any acknowledged append can cost (an append is
//! acknowledged once its WAL segment is durable, and a segment is one such
//! PUT). `bench floor` measures only this; `--floor-store` measures it
//! before a load so the load's latencies can be read as ratios to it.

use super::report::Floor;
use super::stats::{new_histogram, record, Percentiles};
use super::FloorArgs;
use crate::batch::{encode_batch, Record};
use crate::ids::Offset;
use crate::store::s3::S3Options;
use crate::store::PutOutcome;
use bytes::Bytes;
use std::time::{Duration, Instant};

/// PUTs before the measured ones: the first ones create directories (or a
/// connection pool) that later ones reuse.
const WARMUP: usize = 5;

/// Bytes of a WAL segment besides its batches: the header (magic, version,
/// node id, epoch, sequence), one entry's fixed fields and the trailer
/// (see `wal::segment`), rounded up.
const SEGMENT_OVERHEAD: usize = 128;

/// The size of the WAL segment that carries one request of `batch` records
/// of `record_bytes` each when nothing else shares it: what a lone client's
/// append costs the node. (Under load the node's group commit puts several
/// requests in one segment; the report's `wal.mean_put_bytes` shows how
/// large they really were.)
pub fn segment_bytes(record_bytes: usize, batch: usize) -> usize {
    let record = Record {
        timestamp_ms: 0,
        key: None,
        value: Some(Bytes::from(vec![b'x'; record_bytes])),
        headers: Vec::new(),
    };
    let records = vec![record; batch.max(1)];
    encode_batch(Offset(0), &records).len() + SEGMENT_OVERHEAD
}

/// The pause between floor PUTs that matches a paced load: a load of
/// `rate` records/s in requests of `batch` sends a request every
/// `batch / rate` seconds, and a PUT after a pause can cost more than one
/// right after another (a disk's cache drained, a connection gone cold).
/// None for unpaced loads, and for gaps under a millisecond (back to back
/// is the same then); at most a second.
pub fn paced_gap(rate: u64, batch: usize) -> Option<Duration> {
    if rate == 0 {
        return None;
    }
    let gap = Duration::from_secs_f64(batch.max(1) as f64 / rate as f64);
    (gap >= Duration::from_millis(1)).then_some(gap.min(Duration::from_secs(1)))
}

/// Measures `count` create-if-absent PUTs of `object_bytes` to the store at
/// `url`, under `bench-floor/<random>/`, `gap` apart (back to back if
/// None), and deletes them afterwards.
pub async fn measure(
    url: &str,
    s3: &S3Options,
    object_bytes: usize,
    count: usize,
    gap: Option<Duration>,
) -> anyhow::Result<Floor> {
    let store = crate::store::open_url(url, s3).await?;
    let body = Bytes::from(vec![b'f'; object_bytes]);
    let run = format!("bench-floor/{:016x}", rand::random::<u64>());
    let mut h = new_histogram();
    for i in 0..WARMUP + count {
        if let Some(gap) = gap {
            tokio::time::sleep(gap).await;
        }
        let key = format!("{run}/{i:08}");
        let t = Instant::now();
        let outcome = store.put_if_absent(&key, body.clone()).await?;
        let took = t.elapsed();
        if outcome != PutOutcome::Created {
            anyhow::bail!("floor object {key} already existed in {url}");
        }
        if i >= WARMUP {
            record(&mut h, took, 1);
        }
    }
    for i in 0..WARMUP + count {
        store.delete(&format!("{run}/{i:08}")).await?;
    }
    Ok(Floor {
        store: url.to_string(),
        object_bytes,
        count,
        gap_ms: gap.map(|g| g.as_secs_f64() * 1000.0),
        latency_ms: Percentiles::of(&h),
    })
}

/// `sluice bench floor`.
pub(super) async fn floor(args: &FloorArgs) -> anyhow::Result<()> {
    let s3 = S3Options {
        endpoint: args.s3_endpoint.clone(),
        region: args.s3_region.clone(),
        force_path_style: args.s3_endpoint.is_some(),
    };
    let f = measure(&args.store, &s3, args.object_bytes, args.count, None).await?;
    let p = &f.latency_ms;
    if args.json {
        println!(
            "{}",
            serde_json::json!({"command": "floor", "store": f.store, "object_bytes": f.object_bytes, "count": f.count, "latency_ms": p})
        );
    } else {
        println!(
            "floor: {} create-if-absent PUTs of {} bytes to {}: latency ms p50 {:.2} p90 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}",
            f.count, f.object_bytes, f.store, p.p50, p.p90, p.p99, p.p999, p.max
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_holds_the_request_batch_and_its_framing() {
        let one = segment_bytes(100, 1);
        assert!(
            (100 + SEGMENT_OVERHEAD..100 + SEGMENT_OVERHEAD + 100).contains(&one),
            "{one}"
        );
        let hundred = segment_bytes(1000, 100);
        assert!((100_000..110_000).contains(&hundred), "{hundred}");
    }

    #[tokio::test]
    async fn the_floor_of_a_memory_store_is_measured_and_cleaned_up() {
        let f = measure("memory://", &S3Options::default(), 4096, 20, None)
            .await
            .unwrap();
        assert_eq!((f.count, f.object_bytes), (20, 4096));
        assert!(f.latency_ms.max >= f.latency_ms.p50);
        assert_eq!(f.gap_ms, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_floor_pauses_between_puts_and_says_so() {
        let t = tokio::time::Instant::now();
        let gap = Some(Duration::from_millis(100));
        let f = measure("memory://", &S3Options::default(), 64, 3, gap).await.unwrap();
        // Warm-up PUTs are paced too.
        assert!(t.elapsed() >= Duration::from_millis(100) * (WARMUP as u32 + 3));
        assert_eq!(f.gap_ms, Some(100.0));
    }

    #[test]
    fn the_gap_follows_the_loads_request_rate() {
        assert_eq!(paced_gap(0, 1), None, "unpaced");
        assert_eq!(paced_gap(10, 1), Some(Duration::from_millis(100)));
        assert_eq!(paced_gap(1000, 100), Some(Duration::from_millis(100)));
        assert_eq!(paced_gap(2000, 1), None, "under a millisecond: back to back");
        assert_eq!(paced_gap(1, 10), Some(Duration::from_secs(1)), "at most a second");
    }
}
