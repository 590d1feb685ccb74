//! Time, injected. Every reading of the wall clock in Sluice goes through a
//! [`Clock`]; [`SystemClock`] is the only code that asks the operating system
//! (clippy's `disallowed-methods` refuses `SystemTime::now` anywhere else),
//! so tests and the simulation can drive time by hand with [`ManualClock`].
//!
//! Two readings: wall time (Unix milliseconds: record timestamps, token and
//! stream lifetimes, retention by time) and monotonic time (durations that
//! feed a decision, such as the garbage collector's grace period). Pure
//! timeouts and backoff stay on `tokio::time`: they decide nothing.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A source of time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Wall time in milliseconds since the Unix epoch. May jump (NTP, a
    /// moved clock); never use it to measure a duration.
    fn now_ms(&self) -> i64;
    /// Time since an arbitrary origin that never goes backwards.
    fn monotonic(&self) -> Duration;
}

/// A clock shared by everything one node runs.
pub type SharedClock = Arc<dyn Clock>;

/// The operating system's clocks. Monotonic time is tokio's, so a runtime
/// with paused time (the simulation) moves it as it moves its timers.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: tokio::time::Instant,
}

impl Default for SystemClock {
    fn default() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // the one place that reads the wall clock
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }

    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// `clock`'s wall time as a [`std::time::SystemTime`], for APIs that
/// speak it (credential expiry).
pub fn system_time(clock: &dyn Clock) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(clock.now_ms()).unwrap_or(0))
}

/// The real clock, shared.
pub fn system() -> SharedClock {
    Arc::new(SystemClock::default())
}

/// A clock that moves only when told to (tests, simulation).
#[derive(Debug, Default)]
pub struct ManualClock {
    wall_ms: AtomicI64,
    monotonic_ns: AtomicU64,
}

impl ManualClock {
    /// A clock whose wall time starts at `wall_ms`.
    pub fn at(wall_ms: i64) -> Arc<Self> {
        Arc::new(Self {
            wall_ms: AtomicI64::new(wall_ms),
            monotonic_ns: AtomicU64::new(0),
        })
    }

    /// Move both readings forward by `by`.
    pub fn advance(&self, by: Duration) {
        let ns = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.monotonic_ns.fetch_add(ns, Ordering::SeqCst);
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.wall_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Set the wall time alone (a jump: monotonic time does not move).
    pub fn set_wall_ms(&self, ms: i64) {
        self.wall_ms.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.wall_ms.load(Ordering::SeqCst)
    }

    fn monotonic(&self) -> Duration {
        Duration::from_nanos(self.monotonic_ns.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_reads_a_plausible_wall_time_and_never_goes_back() {
        let c = SystemClock::default();
        // 2020-01-01 in Unix ms: any real clock is past it.
        assert!(c.now_ms() > 1_577_836_800_000);
        let (a, b) = (c.monotonic(), c.monotonic());
        assert!(b >= a);
    }

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = ManualClock::at(1_000);
        assert_eq!((c.now_ms(), c.monotonic()), (1_000, Duration::ZERO));
        c.advance(Duration::from_millis(1_500));
        assert_eq!((c.now_ms(), c.monotonic()), (2_500, Duration::from_millis(1_500)));
        c.set_wall_ms(0);
        assert_eq!((c.now_ms(), c.monotonic()), (0, Duration::from_millis(1_500)));
    }
}
