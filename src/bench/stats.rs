//! What the load tasks record while they run: counters, an HDR latency
//! histogram, and the live progress line drawn from them.
//!
//! One [`Recorder`] is shared by every task of a run (behind an `Arc`). The
//! histogram sits behind a mutex: a load task holds it for one `record_n`,
//! which is far cheaper than the request it measures, and the progress line
//! reads percentiles from the same histogram while the run goes on.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Latencies are recorded in microseconds, from 1 µs to one hour, to three
/// significant digits (an error of at most 0.1 %).
const HIGHEST_MICROS: u64 = 3_600_000_000;

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    /// All zero for an empty histogram.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let ms = |micros: u64| micros as f64 / 1000.0;
        Self {
            p50: ms(h.value_at_quantile(0.5)),
            p90: ms(h.value_at_quantile(0.9)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_MICROS, 3).expect("constant bounds are valid")
}

/// Records `n` samples of `d` (saturating at an hour; at least 1 µs).
pub fn record(h: &mut Histogram<u64>, d: Duration, n: u64) {
    let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1);
    h.saturating_record_n(micros, n);
}

/// Counters and a latency histogram shared by the tasks of one run.
pub struct Recorder {
    requests: AtomicU64,
    records: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    errors_by_kind: Mutex<BTreeMap<String, u64>>,
    latency: Mutex<Histogram<u64>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self {
            requests: AtomicU64::new(0),
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            errors_by_kind: Mutex::default(),
            latency: Mutex::new(new_histogram()),
        }
    }
}

/// What a [`Recorder`] holds at one moment.
#[derive(Debug, Clone)]
pub struct Totals {
    pub requests: u64,
    pub records: u64,
    pub bytes: u64,
    pub errors: u64,
    pub errors_by_kind: BTreeMap<String, u64>,
    pub latency_ms: Percentiles,
}

impl Recorder {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// A request that succeeded, carrying `records` records of `bytes` bytes.
    pub fn ok(&self, records: u64, bytes: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.records.fetch_add(records, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records received without a request of their own (a consumer's).
    pub fn received(&self, records: u64, bytes: u64) {
        self.records.fetch_add(records, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// `n` latency samples of `d`.
    pub fn latency(&self, d: Duration, n: u64) {
        record(&mut self.latency.lock().unwrap(), d, n);
    }

    /// One sample per element, all under one lock.
    pub fn latencies(&self, ds: impl IntoIterator<Item = (Duration, u64)>) {
        let mut h = self.latency.lock().unwrap();
        for (d, n) in ds {
            record(&mut h, d, n);
        }
    }

    /// A failed request, counted by kind (an HTTP status, a Kafka error
    /// name, `connect`, `io`, `timeout`).
    pub fn error(&self, kind: impl Into<String>) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.errors_by_kind.lock().unwrap().entry(kind.into()).or_default() += 1;
    }

    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    pub fn percentiles(&self) -> Percentiles {
        Percentiles::of(&self.latency.lock().unwrap())
    }

    pub fn totals(&self) -> Totals {
        Totals {
            requests: self.requests.load(Ordering::Relaxed),
            records: self.records(),
            bytes: self.bytes(),
            errors: self.errors(),
            errors_by_kind: self.errors_by_kind.lock().unwrap().clone(),
            latency_ms: self.percentiles(),
        }
    }
}

/// The progress line: once a second on stderr (rates over that second,
/// percentiles so far), and once more when `stop` is set with the rates of
/// the whole run (so even a run shorter than a second shows one). It is redrawn in
/// place (`\r`) on a terminal and written as separate lines otherwise, so
/// a log file gets one line per second.
pub fn progress(
    label: &'static str,
    rec: Arc<Recorder>,
    total: Duration,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let tty = std::io::stderr().is_terminal();
    let start = Instant::now();
    tokio::spawn(async move {
        let (mut last_records, mut last_bytes, mut last_at) = (0u64, 0u64, start);
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let stopped = stop.load(Ordering::Relaxed);
            let now = Instant::now();
            if !stopped && now - last_at < Duration::from_secs(1) {
                continue;
            }
            let (records, bytes) = (rec.records(), rec.bytes());
            if stopped {
                // The last line shows the whole run, not its last moments.
                (last_records, last_bytes, last_at) = (0, 0, start);
            }
            let secs = (now - last_at).as_secs_f64().max(1e-3);
            let line = progress_line(
                label,
                now - start,
                total,
                (records - last_records) as f64 / secs,
                (bytes - last_bytes) as f64 / secs,
                &rec.percentiles(),
                rec.errors(),
            );
            if tty {
                eprint!("\r{line}   ");
            } else {
                eprintln!("{line}");
            }
            (last_records, last_bytes, last_at) = (records, bytes, now);
            if stopped {
                break;
            }
        }
        if tty {
            eprintln!();
        }
    })
}

pub fn progress_line(
    label: &str,
    elapsed: Duration,
    total: Duration,
    records_per_sec: f64,
    bytes_per_sec: f64,
    latency: &Percentiles,
    errors: u64,
) -> String {
    format!(
        "[{:>5.1}/{:.0}s] {records_per_sec:>9.0} records/s {:>8.2} MB/s  {label} p50 {:.2} ms p99 {:.2} ms  errors {errors}",
        elapsed.as_secs_f64(),
        total.as_secs_f64(),
        bytes_per_sec / 1e6,
        latency.p50,
        latency.p99,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_histogram_within_its_precision() {
        let mut h = new_histogram();
        for ms in 1..=1000 {
            record(&mut h, Duration::from_millis(ms), 1);
        }
        let p = Percentiles::of(&h);
        let near = |got: f64, want: f64| (got - want).abs() <= want * 0.001 + 0.001;
        assert!(near(p.p50, 500.0), "{p:?}");
        assert!(near(p.p90, 900.0), "{p:?}");
        assert!(near(p.p99, 990.0), "{p:?}");
        assert!(near(p.p999, 999.0), "{p:?}");
        assert!(near(p.max, 1000.0), "{p:?}");
        assert_eq!(Percentiles::of(&new_histogram()), Percentiles::default());
    }

    #[test]
    fn weighted_samples_count_once_per_record() {
        let rec = Recorder::default();
        rec.latency(Duration::from_millis(1), 99);
        rec.latency(Duration::from_millis(100), 1);
        let p = rec.percentiles();
        assert!(p.p50 < 1.01 && p.p90 < 1.01, "{p:?}");
        assert!(p.max > 99.0, "{p:?}");
    }

    #[test]
    fn sub_microsecond_and_huge_samples_are_clamped_not_lost() {
        let mut h = new_histogram();
        record(&mut h, Duration::from_nanos(10), 1);
        record(&mut h, Duration::from_secs(10 * 3600), 1);
        assert_eq!(h.len(), 2);
        assert_eq!(h.min(), 1);
        assert!(h.max() >= HIGHEST_MICROS / 2);
    }

    #[test]
    fn totals_count_requests_records_and_errors_by_kind() {
        let rec = Recorder::default();
        rec.ok(10, 1000);
        rec.ok(5, 500);
        rec.received(1, 100);
        rec.error("429");
        rec.error("429");
        rec.error("connect");
        let t = rec.totals();
        assert_eq!((t.requests, t.records, t.bytes, t.errors), (2, 16, 1600, 3));
        assert_eq!(t.errors_by_kind["429"], 2);
        assert_eq!(t.errors_by_kind["connect"], 1);
    }

    #[test]
    fn the_progress_line_shows_rate_throughput_and_percentiles() {
        let p = Percentiles {
            p50: 1.5,
            p99: 9.25,
            ..Default::default()
        };
        let line = progress_line(
            "ack",
            Duration::from_millis(3000),
            Duration::from_secs(5),
            1234.0,
            2_500_000.0,
            &p,
            2,
        );
        assert_eq!(
            line,
            "[  3.0/5s]      1234 records/s     2.50 MB/s  ack p50 1.50 ms p99 9.25 ms  errors 2"
        );
    }
}
