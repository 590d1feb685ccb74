//! A fault-injecting wrapper around any [`ObjectStore`].
//!
//! Every failure Sluice must survive from S3 can be produced here on demand
//! and reproducibly: 500s, 503 SlowDown, 409 conflicts on conditional PUTs,
//! replies lost after the write took effect, latency and a full partition.
//! Faults are drawn from an RNG seeded by [`FaultConfig::seed`], so a failing
//! run can be replayed (as far as task scheduling allows).

use super::{DynStore, ObjectMeta, ObjectStore, PutOutcome, StoreError, StoreResult};
use async_trait::async_trait;
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Which faults to inject, and how often. Rates are probabilities per
/// request in `0.0..=1.0` (values outside are clamped). `Default` injects
/// nothing, so `FaultyStore::new(inner, FaultConfig::default())` is a
/// transparent pass-through.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FaultConfig {
    /// Seed of the RNG deciding every fault.
    pub seed: u64,
    /// Any request fails with a 500 InternalError: determinate, retryable.
    pub error_rate: f64,
    /// Any request fails with a 503 SlowDown: determinate, retryable.
    pub slowdown_rate: f64,
    /// A put fails with a 409 ConditionalRequestConflict (a concurrent
    /// conditional write was in flight): determinate, retryable.
    pub conflict_rate: f64,
    /// A put or delete is performed on the inner store, then its reply is
    /// replaced by an indeterminate error, as when a connection drops after
    /// the server committed the request.
    pub lost_reply_rate: f64,
    /// Added latency per request, uniform in `min..=max` milliseconds;
    /// `(0, 0)` adds none.
    pub latency_ms: (u64, u64),
    /// Every request fails determinately without reaching the inner store:
    /// a partition between this node and the store.
    pub unavailable: bool,
}

/// How many faults of each kind were injected since the store was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultStats {
    pub errors: u64,
    pub slowdowns: u64,
    pub conflicts: u64,
    pub lost_replies: u64,
    pub unavailable: u64,
    pub delayed: u64,
}

/// The wrapper. Clones share configuration, RNG and counters.
#[derive(Debug, Clone)]
pub struct FaultyStore {
    inner: DynStore,
    state: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct State {
    config: FaultConfig,
    rng: SmallRng,
    stats: FaultStats,
}

/// The fault chosen for one request.
enum Fault {
    None,
    /// Fail without calling the inner store.
    Fail(StoreError),
    /// Call the inner store, then report an indeterminate error.
    LoseReply,
}

/// The kinds of request, for deciding which faults apply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Put,
    Get,
    List,
    Delete,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Put => "put",
            Op::Get => "get",
            Op::List => "list",
            Op::Delete => "delete",
        }
    }
}

impl FaultyStore {
    pub fn new(inner: DynStore, config: FaultConfig) -> Self {
        let rng = SmallRng::seed_from_u64(config.seed);
        Self {
            inner,
            state: Arc::new(Mutex::new(State {
                config,
                rng,
                stats: FaultStats::default(),
            })),
        }
    }

    /// Replace the configuration at runtime. The RNG is reseeded from the
    /// new seed so the fault sequence from here on is reproducible too;
    /// counters are kept.
    pub fn set_config(&self, config: FaultConfig) {
        let mut state = self.lock();
        state.rng = SmallRng::seed_from_u64(config.seed);
        state.config = config;
    }

    /// Start or end a partition from the store, leaving other faults as set.
    pub fn set_unavailable(&self, unavailable: bool) {
        self.lock().config.unavailable = unavailable;
    }

    /// The current configuration.
    pub fn config(&self) -> FaultConfig {
        self.lock().config.clone()
    }

    /// Counters of injected faults.
    pub fn stats(&self) -> FaultStats {
        self.lock().stats
    }

    /// The wrapped store, to inspect the truth behind injected faults.
    pub fn inner(&self) -> &DynStore {
        &self.inner
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sleep for the injected latency, then pick this request's fault.
    /// The decision is made under one lock so that concurrent requests draw
    /// from the RNG one at a time.
    async fn decide(&self, op: Op, key: &str) -> Fault {
        let delay = {
            let mut state = self.lock();
            let (min, max) = state.config.latency_ms;
            if max == 0 {
                None
            } else {
                state.stats.delayed += 1;
                let ms = state.rng.random_range(min.min(max)..=max);
                Some(Duration::from_millis(ms))
            }
        };
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }

        let mut guard = self.lock();
        let State { config, rng, stats } = &mut *guard;
        let name = op.name();
        if config.unavailable {
            stats.unavailable += 1;
            return Fault::Fail(StoreError::determinate(
                name,
                key,
                true,
                "injected: object store unreachable",
            ));
        }
        if roll(rng, config.error_rate) {
            stats.errors += 1;
            return Fault::Fail(StoreError::determinate(name, key, true, "injected: 500 InternalError"));
        }
        if roll(rng, config.slowdown_rate) {
            stats.slowdowns += 1;
            return Fault::Fail(StoreError::determinate(name, key, true, "injected: 503 SlowDown"));
        }
        if op == Op::Put && roll(rng, config.conflict_rate) {
            stats.conflicts += 1;
            return Fault::Fail(StoreError::determinate(
                name,
                key,
                true,
                "injected: 409 ConditionalRequestConflict",
            ));
        }
        if matches!(op, Op::Put | Op::Delete) && roll(rng, config.lost_reply_rate) {
            // Counted when the inner request succeeds; see `lost_reply`.
            return Fault::LoseReply;
        }
        Fault::None
    }

    /// Turn a successful inner result into the indeterminate error a client
    /// sees when the reply is lost. An inner failure is passed through: the
    /// request did not take effect, so there is no reply to lose.
    fn lose_reply<T>(&self, op: Op, key: &str, result: StoreResult<T>) -> StoreResult<T> {
        result?;
        self.lock().stats.lost_replies += 1;
        Err(StoreError::indeterminate(
            op.name(),
            key,
            "injected: reply lost after the request took effect",
        ))
    }
}

/// Draw a fault with probability `rate` (clamped to `0..=1`); a zero rate
/// does not consume randomness, so enabling one fault kind does not shift
/// the sequence of the others.
fn roll(rng: &mut SmallRng, rate: f64) -> bool {
    rate > 0.0 && rng.random_bool(rate.min(1.0))
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_if_absent(&self, key: &str, body: Bytes) -> StoreResult<PutOutcome> {
        match self.decide(Op::Put, key).await {
            Fault::Fail(err) => Err(err),
            Fault::None => self.inner.put_if_absent(key, body).await,
            Fault::LoseReply => {
                let result = self.inner.put_if_absent(key, body).await;
                self.lose_reply(Op::Put, key, result)
            }
        }
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> StoreResult<Option<Bytes>> {
        match self.decide(Op::Get, key).await {
            Fault::Fail(err) => Err(err),
            Fault::None | Fault::LoseReply => self.inner.get(key, range).await,
        }
    }

    async fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        match self.decide(Op::List, prefix).await {
            Fault::Fail(err) => Err(err),
            Fault::None | Fault::LoseReply => self.inner.list(prefix).await,
        }
    }

    async fn delete(&self, key: &str) -> StoreResult<()> {
        match self.decide(Op::Delete, key).await {
            Fault::Fail(err) => Err(err),
            Fault::None => self.inner.delete(key).await,
            Fault::LoseReply => {
                let result = self.inner.delete(key).await;
                self.lose_reply(Op::Delete, key, result)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn faulty(config: FaultConfig) -> (MemoryStore, FaultyStore) {
        let memory = MemoryStore::new();
        let store = FaultyStore::new(Arc::new(memory.clone()), config);
        (memory, store)
    }

    fn assert_determinate_retryable(err: &StoreError, reason: &str) {
        assert!(!err.is_indeterminate(), "{err}");
        assert!(err.retryable, "{err}");
        assert!(err.reason.contains(reason), "{err}");
    }

    #[tokio::test]
    async fn no_faults_by_default() {
        let (memory, store) = faulty(FaultConfig::default());
        assert_eq!(
            store.put_if_absent("k", Bytes::from_static(b"v")).await.unwrap(),
            PutOutcome::Created
        );
        assert_eq!(store.get("k", None).await.unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(memory.len(), 1);
        assert_eq!(store.stats(), FaultStats::default());
    }

    #[tokio::test]
    async fn errors_are_determinate_500s_and_write_nothing() {
        let (memory, store) = faulty(FaultConfig {
            error_rate: 1.0,
            ..Default::default()
        });
        let err = store.put_if_absent("k", Bytes::from_static(b"v")).await.unwrap_err();
        assert_determinate_retryable(&err, "500");
        assert_determinate_retryable(&store.get("k", None).await.unwrap_err(), "500");
        assert_determinate_retryable(&store.list("").await.unwrap_err(), "500");
        assert!(memory.is_empty());
        assert_eq!(store.stats().errors, 3);
    }

    #[tokio::test]
    async fn slowdowns_are_determinate_503s() {
        let (memory, store) = faulty(FaultConfig {
            slowdown_rate: 1.0,
            ..Default::default()
        });
        let err = store.put_if_absent("k", Bytes::from_static(b"v")).await.unwrap_err();
        assert_determinate_retryable(&err, "503 SlowDown");
        assert!(memory.is_empty());
        assert_eq!(store.stats().slowdowns, 1);
    }

    #[tokio::test]
    async fn conflicts_hit_puts_only() {
        let (memory, store) = faulty(FaultConfig {
            conflict_rate: 1.0,
            ..Default::default()
        });
        let err = store.put_if_absent("k", Bytes::from_static(b"v")).await.unwrap_err();
        assert_determinate_retryable(&err, "409");
        assert!(memory.is_empty());
        assert_eq!(store.get("k", None).await.unwrap(), None);
        store.delete("k").await.unwrap();
        assert_eq!(store.stats().conflicts, 1);
    }

    #[tokio::test]
    async fn lost_reply_writes_the_object_then_reports_indeterminate() {
        let (memory, store) = faulty(FaultConfig {
            lost_reply_rate: 1.0,
            ..Default::default()
        });
        let err = store.put_if_absent("k", Bytes::from_static(b"v")).await.unwrap_err();
        assert!(err.is_indeterminate(), "{err}");
        // The write really happened: reading back settles the outcome.
        assert_eq!(memory.get("k", None).await.unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(store.get("k", None).await.unwrap().as_deref(), Some(&b"v"[..]));

        let err = store.delete("k").await.unwrap_err();
        assert!(err.is_indeterminate(), "{err}");
        assert_eq!(memory.get("k", None).await.unwrap(), None, "the delete happened");
        assert_eq!(store.stats().lost_replies, 2);
    }

    #[tokio::test]
    async fn unavailable_fails_everything_until_healed() {
        let (memory, store) = faulty(FaultConfig::default());
        store.set_unavailable(true);
        let err = store.put_if_absent("k", Bytes::from_static(b"v")).await.unwrap_err();
        assert!(!err.is_indeterminate(), "{err}");
        assert!(store.get("k", None).await.is_err());
        assert!(store.list("").await.is_err());
        assert!(store.delete("k").await.is_err());
        assert!(memory.is_empty());
        assert_eq!(store.stats().unavailable, 4);

        store.set_unavailable(false);
        assert_eq!(
            store.put_if_absent("k", Bytes::from_static(b"v")).await.unwrap(),
            PutOutcome::Created
        );
    }

    #[tokio::test]
    async fn latency_is_injected() {
        let (_, store) = faulty(FaultConfig {
            latency_ms: (30, 40),
            ..Default::default()
        });
        let started = tokio::time::Instant::now();
        store.get("k", None).await.unwrap();
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(30), "{waited:?}");
        assert_eq!(store.stats().delayed, 1);
    }

    #[tokio::test]
    async fn same_seed_same_faults_and_config_changes_at_runtime() {
        let config = FaultConfig {
            seed: 7,
            error_rate: 0.5,
            ..Default::default()
        };
        let mut runs = Vec::new();
        for _ in 0..2 {
            let (_, store) = faulty(config.clone());
            let mut pattern = Vec::new();
            for i in 0..64 {
                pattern.push(store.get(&format!("k{i}"), None).await.is_err());
            }
            runs.push(pattern);
        }
        assert_eq!(runs[0], runs[1]);
        assert!(runs[0].contains(&true) && runs[0].contains(&false));

        let (_, store) = faulty(config);
        store.set_config(FaultConfig::default());
        for i in 0..16 {
            store.get(&format!("k{i}"), None).await.unwrap();
        }
        assert_eq!(store.stats().errors, 0);
    }
}
