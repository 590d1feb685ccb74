//! A latency model for benchmarks: a wrapper that delays every request by
//! a time drawn from a distribution shaped like a cloud object store's, so
//! a run on a local disk or a loopback S3 server reports what the same
//! workload would wait for on S3 Standard or S3 Express One Zone.
//!
//! Only for measurement (`--store-latency-model`); it changes no outcome,
//! it only makes each request take longer. Each delay is a log-normal
//! draw fixed by its median and 99th percentile, plus a transfer time per
//! MiB moved: object-store latencies are long-tailed and never below a
//! floor, which a log-normal captures with two numbers one can read off a
//! published figure. Where the numbers come from is in
//! `docs/benchmarks.md` ("The latency model").

use super::{DynStore, ObjectMeta, ObjectStore, PutOutcome, StoreResult};
use async_trait::async_trait;
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One operation's latency: log-normal with this median and 99th
/// percentile, plus `per_mib` for each MiB sent or received.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpLatency {
    pub p50: Duration,
    pub p99: Duration,
    pub per_mib: Duration,
}

impl OpLatency {
    /// The 99th percentile of a standard normal.
    const Z99: f64 = 2.326_347_874;

    /// The delay for `bytes` moved, given a standard-normal draw `z`.
    pub fn delay(&self, z: f64, bytes: usize) -> Duration {
        let mu = self.p50.as_secs_f64().max(1e-9).ln();
        let sigma = ((self.p99.as_secs_f64().max(1e-9).ln() - mu) / Self::Z99).max(0.0);
        let base = (mu + sigma * z).exp();
        let transfer = self.per_mib.as_secs_f64() * bytes as f64 / f64::from(1u32 << 20);
        Duration::from_secs_f64((base + transfer).min(60.0))
    }
}

/// A store's latency: PUTs (and DELETEs), GETs, LISTs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyModel {
    pub name: &'static str,
    pub put: OpLatency,
    pub get: OpLatency,
    pub list: OpLatency,
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

impl LatencyModel {
    /// S3 Standard: AWS's guidance for small objects is 100–200 ms of
    /// first-byte latency; read here as the median and the 99th percentile
    /// of a PUT, GETs somewhat quicker, and about 100 MiB/s per request.
    pub const S3_STANDARD: LatencyModel = LatencyModel {
        name: "s3-standard",
        put: OpLatency {
            p50: ms(100),
            p99: ms(200),
            per_mib: ms(10),
        },
        get: OpLatency {
            p50: ms(60),
            p99: ms(150),
            per_mib: ms(10),
        },
        list: OpLatency {
            p50: ms(80),
            p99: ms(200),
            per_mib: ms(0),
        },
    };

    /// S3 Express One Zone: AWS describes its requests as single-digit
    /// milliseconds; a median of 5 ms for a PUT, 4 ms for a GET, and a tail
    /// of 2.5 times the median.
    pub const S3_EXPRESS: LatencyModel = LatencyModel {
        name: "s3-express",
        put: OpLatency {
            p50: ms(5),
            p99: ms(12),
            per_mib: ms(5),
        },
        get: OpLatency {
            p50: ms(4),
            p99: ms(10),
            per_mib: ms(5),
        },
        list: OpLatency {
            p50: ms(8),
            p99: ms(20),
            per_mib: ms(0),
        },
    };

    /// `none`, `s3-standard` or `s3-express`.
    pub fn parse(name: &str) -> Result<Option<LatencyModel>, String> {
        match name {
            "none" => Ok(None),
            "s3-standard" => Ok(Some(Self::S3_STANDARD)),
            "s3-express" => Ok(Some(Self::S3_EXPRESS)),
            other => Err(format!(
                "--store-latency-model must be none, s3-standard or s3-express, not {other:?}"
            )),
        }
    }
}

/// A standard-normal draw (Box–Muller).
fn standard_normal(rng: &mut SmallRng) -> f64 {
    let u1: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.random_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[derive(Debug)]
pub struct LatencyStore {
    inner: DynStore,
    model: LatencyModel,
    rng: Mutex<SmallRng>,
}

impl LatencyStore {
    /// Delay every request to `inner` as `model` says; `seed` makes the
    /// draws repeatable.
    pub fn wrap(inner: DynStore, model: LatencyModel, seed: u64) -> DynStore {
        Arc::new(LatencyStore {
            inner,
            model,
            rng: Mutex::new(SmallRng::seed_from_u64(seed)),
        })
    }

    fn draw(&self, op: &OpLatency, bytes: usize) -> Duration {
        let z = standard_normal(&mut self.rng.lock().unwrap_or_else(|p| p.into_inner()));
        op.delay(z, bytes)
    }
}

#[async_trait]
impl ObjectStore for LatencyStore {
    async fn put_if_absent(&self, key: &str, body: Bytes) -> StoreResult<PutOutcome> {
        tokio::time::sleep(self.draw(&self.model.put, body.len())).await;
        self.inner.put_if_absent(key, body).await
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> StoreResult<Option<Bytes>> {
        let result = self.inner.get(key, range).await;
        let bytes = match &result {
            Ok(Some(b)) => b.len(),
            _ => 0,
        };
        tokio::time::sleep(self.draw(&self.model.get, bytes)).await;
        result
    }

    async fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        tokio::time::sleep(self.draw(&self.model.list, 0)).await;
        self.inner.list(prefix).await
    }

    async fn delete(&self, key: &str) -> StoreResult<()> {
        tokio::time::sleep(self.draw(&self.model.put, 0)).await;
        self.inner.delete(key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn the_median_and_the_99th_percentile_are_where_the_model_puts_them() {
        let op = LatencyModel::S3_STANDARD.put;
        assert_eq!(op.delay(0.0, 0), ms(100));
        let p99 = op.delay(OpLatency::Z99, 0);
        assert!((p99.as_secs_f64() - 0.2).abs() < 1e-6, "{p99:?}");
        // One MiB adds the transfer time.
        assert_eq!(op.delay(0.0, 1 << 20), ms(110));
    }

    #[test]
    fn draws_follow_the_distribution() {
        let mut rng = SmallRng::seed_from_u64(7);
        let op = LatencyModel::S3_EXPRESS.put;
        let mut d: Vec<Duration> = (0..20_000).map(|_| op.delay(standard_normal(&mut rng), 0)).collect();
        d.sort();
        let p50 = d[10_000].as_secs_f64() * 1e3;
        let p99 = d[19_800].as_secs_f64() * 1e3;
        assert!((4.6..5.4).contains(&p50), "p50 {p50} ms");
        assert!((10.5..13.5).contains(&p99), "p99 {p99} ms");
    }

    #[test]
    fn models_are_named() {
        assert_eq!(LatencyModel::parse("none"), Ok(None));
        assert_eq!(LatencyModel::parse("s3-express").unwrap().unwrap().name, "s3-express");
        assert!(LatencyModel::parse("s3").is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn requests_wait_and_keep_their_outcomes() {
        let s = LatencyStore::wrap(Arc::new(MemoryStore::new()), LatencyModel::S3_STANDARD, 1);
        let t = tokio::time::Instant::now();
        assert_eq!(
            s.put_if_absent("a/1", Bytes::from_static(b"x")).await.unwrap(),
            PutOutcome::Created
        );
        assert!(t.elapsed() >= ms(20), "a PUT on S3 Standard takes tens of ms");
        assert_eq!(
            s.put_if_absent("a/1", Bytes::from_static(b"y")).await.unwrap(),
            PutOutcome::AlreadyExists
        );
        assert_eq!(s.get("a/1", None).await.unwrap().unwrap(), Bytes::from_static(b"x"));
        assert_eq!(s.list("a/").await.unwrap().len(), 1);
        s.delete("a/1").await.unwrap();
        assert!(s.get("a/1", None).await.unwrap().is_none());
    }
}
