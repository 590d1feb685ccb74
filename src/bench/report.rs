//! What a run reports: throughput and latency percentiles.

use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub mode: String,
    pub producers: usize,
    pub record_bytes: usize,
    pub batch: usize,
    pub duration_sec: f64,
    pub requests: u64,
    pub records: u64,
    pub errors: u64,
    /// Failed requests by HTTP status (`"connect"` when there was no answer).
    pub errors_by_status: std::collections::BTreeMap<String, u64>,
    pub records_per_sec: f64,
    pub mib_per_sec: f64,
    pub latency_ms: Percentiles,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(samples: &mut [Duration]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let at = |q: f64| {
            let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[i].as_secs_f64() * 1000.0
        };
        Self {
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            p999: at(0.999),
            max: at(1.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_right_samples() {
        let mut s: Vec<Duration> = (1..=1000).map(Duration::from_millis).collect();
        let p = Percentiles::of(&mut s);
        assert_eq!((p.p50, p.p99, p.max), (500.0, 990.0, 1000.0));
        assert_eq!(Percentiles::of(&mut []).p50, 0.0);
    }
}
