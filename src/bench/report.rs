//! What a run reports, as JSON (`--json`, for scripts) or as text: the
//! settings, throughput, latency percentiles, the floor and the ratios to
//! it, and what the server spent.

use super::stats::{Percentiles, Totals};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `produce`, `consume` or `e2e`.
    pub command: String,
    /// `http` or `kafka`.
    pub mode: String,
    pub topic: String,
    pub partitions: u32,
    pub producers: usize,
    pub record_bytes: usize,
    /// Records per request (a consumer's requests carry what they carry).
    pub batch: usize,
    /// Offered records per second across producers; 0 = as fast as acks allow.
    pub rate: u64,
    /// Kafka mode: -1 (all), 0 or 1.
    pub acks: Option<i16>,
    /// Kafka mode: how long a producer holds a record for more to join its request.
    pub linger_ms: Option<u64>,
    /// Kafka mode: requests in flight per connection.
    pub max_in_flight: Option<usize>,
    pub duration_sec: f64,
    pub requests: u64,
    pub records: u64,
    /// Bytes of record values (Kafka consume: of record batches).
    pub bytes: u64,
    pub errors: u64,
    /// Failed requests by kind: an HTTP status, a Kafka error name,
    /// `connect`, `io` or `timeout`.
    pub errors_by_kind: BTreeMap<String, u64>,
    pub records_per_sec: f64,
    /// 10^6 bytes per second.
    pub mb_per_sec: f64,
    /// 2^20 bytes per second.
    pub mib_per_sec: f64,
    /// What `latency_ms` measures: `ack` (send → acknowledgement, durable
    /// in the WAL), `write` (acks=0: until the request was written to the
    /// socket), `e2e` (send → a long-polling consumer received it) or
    /// `fetch` (one read request).
    pub latency_kind: String,
    pub latency_ms: Percentiles,
    /// e2e only: the producers' ack latency in the same run.
    pub ack_latency_ms: Option<Percentiles>,
    pub floor: Option<Floor>,
    /// `latency_ms` divided by the floor's, percentile by percentile.
    pub vs_floor: Option<Ratios>,
    pub server: Option<ServerStats>,
    pub wal: Option<WalStats>,
    /// Compaction runs the node applied during the load.
    pub compaction: Option<CompactionStats>,
    /// The node's object-store and metadata requests during the load, per
    /// GiB of record bytes, and their price.
    pub cost: Option<super::prices::Cost>,
}

/// The floor measured before the load: bare create-if-absent PUTs.
#[derive(Debug, Clone, Serialize)]
pub struct Floor {
    pub store: String,
    pub object_bytes: usize,
    pub count: usize,
    /// The pause between PUTs when the load was paced (see
    /// `floor::paced_gap`); absent: back to back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_ms: Option<f64>,
    pub latency_ms: Percentiles,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ratios {
    pub p50: f64,
    pub p99: f64,
}

impl Ratios {
    /// `None` when the floor has no samples to divide by.
    pub fn of(latency: &Percentiles, floor: &Percentiles) -> Option<Self> {
        (floor.p50 > 0.0 && floor.p99 > 0.0).then(|| Self {
            p50: latency.p50 / floor.p50,
            p99: latency.p99 / floor.p99,
        })
    }
}

/// The node's process over the run (`--server-pid`), from /proc.
#[derive(Debug, Clone, Serialize)]
pub struct ServerStats {
    pub pid: u32,
    /// User + system CPU seconds the process used during the load.
    pub cpu_sec: f64,
    /// CPU milliseconds per 10^6 bytes of record values appended (read,
    /// for consume).
    pub cpu_ms_per_mb: f64,
    /// Share of one core over the run (1.0 = one core busy).
    pub cores: f64,
    pub rss_before_mib: f64,
    /// Highest resident set sampled (every 100 ms) during the load.
    pub rss_peak_mib: f64,
    pub rss_after_mib: f64,
}

/// The node's WAL over the run, from its `/metrics` (deltas).
#[derive(Debug, Clone, Serialize)]
pub struct WalStats {
    /// Segment PUTs that succeeded.
    pub puts: u64,
    pub mean_put_bytes: f64,
    /// Mean PUT latency as the server measured it.
    pub mean_put_ms: f64,
}

/// The node's applied compaction runs over the load, from its `/metrics`.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionStats {
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Seconds inside applied runs.
    pub seconds: f64,
    /// Input bytes per second inside those runs, in 10^6 bytes.
    pub mb_per_sec_in: f64,
}

pub struct Settings {
    pub command: &'static str,
    pub mode: &'static str,
    pub topic: String,
    pub partitions: u32,
    pub producers: usize,
    pub record_bytes: usize,
    pub batch: usize,
    pub rate: u64,
    pub acks: Option<i16>,
    pub linger_ms: Option<u64>,
    pub max_in_flight: Option<usize>,
    pub latency_kind: &'static str,
}

impl Report {
    pub fn new(s: Settings, totals: Totals, elapsed_sec: f64, ack_latency_ms: Option<Percentiles>) -> Self {
        let elapsed = elapsed_sec.max(1e-9);
        Report {
            command: s.command.into(),
            mode: s.mode.into(),
            topic: s.topic,
            partitions: s.partitions,
            producers: s.producers,
            record_bytes: s.record_bytes,
            batch: s.batch,
            rate: s.rate,
            acks: s.acks,
            linger_ms: s.linger_ms,
            max_in_flight: s.max_in_flight,
            duration_sec: elapsed_sec,
            requests: totals.requests,
            records: totals.records,
            bytes: totals.bytes,
            errors: totals.errors,
            errors_by_kind: totals.errors_by_kind,
            records_per_sec: totals.records as f64 / elapsed,
            mb_per_sec: totals.bytes as f64 / elapsed / 1e6,
            mib_per_sec: totals.bytes as f64 / elapsed / (1 << 20) as f64,
            latency_kind: s.latency_kind.into(),
            latency_ms: totals.latency_ms,
            ack_latency_ms,
            floor: None,
            vs_floor: None,
            server: None,
            wal: None,
            compaction: None,
            cost: None,
        }
    }

    pub fn with_floor(mut self, floor: Floor) -> Self {
        self.vs_floor = Ratios::of(&self.latency_ms, &floor.latency_ms);
        self.floor = Some(floor);
        self
    }

    /// The report as a few lines of text.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let rate = if self.rate == 0 {
            "unlimited".to_string()
        } else {
            format!("{} records/s offered", self.rate)
        };
        let mut kafka = String::new();
        if let Some(acks) = self.acks {
            let _ = write!(
                kafka,
                ", acks={}",
                if acks == -1 { "all".into() } else { acks.to_string() }
            );
        }
        if let Some(l) = self.linger_ms {
            let _ = write!(kafka, ", linger {l} ms");
        }
        if let Some(m) = self.max_in_flight {
            let _ = write!(kafka, ", {m} in flight");
        }
        let load = if self.command == "consume" {
            String::new()
        } else {
            format!(
                ", {} producers, {} B records, batch {}, {rate}{kafka}",
                self.producers, self.record_bytes, self.batch
            )
        };
        let _ = writeln!(
            out,
            "{} ({}, topic {} of {} partitions{load}):",
            self.command, self.mode, self.topic, self.partitions
        );
        let _ = writeln!(
            out,
            "  {} records in {:.1} s = {:.0} records/s, {:.2} MB/s; {} requests, {} errors{}",
            self.records,
            self.duration_sec,
            self.records_per_sec,
            self.mb_per_sec,
            self.requests,
            self.errors,
            if self.errors_by_kind.is_empty() {
                String::new()
            } else {
                format!(" {:?}", self.errors_by_kind)
            }
        );
        let _ = writeln!(
            out,
            "  {} latency ms: {}",
            self.latency_kind,
            percentiles(&self.latency_ms)
        );
        if let Some(a) = &self.ack_latency_ms {
            let _ = writeln!(out, "  ack latency ms: {}", percentiles(a));
        }
        if let Some(f) = &self.floor {
            let _ = write!(
                out,
                "  floor ({} create-if-absent PUTs of {} B to {}): p50 {:.2} p99 {:.2} ms",
                f.count, f.object_bytes, f.store, f.latency_ms.p50, f.latency_ms.p99
            );
            if let Some(r) = &self.vs_floor {
                let _ = write!(
                    out,
                    "; {} p50 = {:.2}x floor, p99 = {:.2}x floor",
                    self.latency_kind, r.p50, r.p99
                );
            }
            out.push('\n');
        }
        if let Some(s) = &self.server {
            let _ = writeln!(
                out,
                "  server pid {}: {:.2} CPU s ({:.2} cores) = {:.1} CPU ms per MB; RSS before {:.0} MiB, peak {:.0} MiB, after {:.0} MiB",
                s.pid, s.cpu_sec, s.cores, s.cpu_ms_per_mb, s.rss_before_mib, s.rss_peak_mib, s.rss_after_mib
            );
        }
        if let Some(w) = self.wal.as_ref().filter(|w| w.puts > 0) {
            let _ = writeln!(
                out,
                "  WAL: {} segment PUTs, mean {:.1} KiB, mean {:.2} ms (server side)",
                w.puts,
                w.mean_put_bytes / 1024.0,
                w.mean_put_ms
            );
        }
        if let Some(c) = &self.compaction {
            let _ = writeln!(
                out,
                "  compaction: {:.1} MB in, {:.1} MB out, {:.2} s in runs = {:.1} MB/s of input",
                c.bytes_in as f64 / 1e6,
                c.bytes_out as f64 / 1e6,
                c.seconds,
                c.mb_per_sec_in
            );
        }
        if let Some(c) = &self.cost {
            let dollars: Vec<String> = c
                .dollars_per_gib
                .iter()
                .map(|(class, d)| format!("${d:.4} on {class}"))
                .collect();
            let _ = writeln!(
                out,
                "  requests per GiB: {:.0} WAL PUTs, {:.0} data PUTs, {:.0} in all; per GiB {} (request prices of {})",
                c.wal_puts_per_gib,
                c.data_puts_per_gib,
                c.requests_per_gib,
                dollars.join(", "),
                c.prices_as_of
            );
        }
        out
    }
}

fn percentiles(p: &Percentiles) -> String {
    format!(
        "p50 {:.2} p90 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}",
        p.p50, p.p90, p.p99, p.p999, p.max
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            command: "produce",
            mode: "kafka",
            topic: "t".into(),
            partitions: 4,
            producers: 2,
            record_bytes: 1000,
            batch: 10,
            rate: 0,
            acks: Some(-1),
            linger_ms: Some(5),
            max_in_flight: Some(5),
            latency_kind: "ack",
        }
    }

    fn totals() -> Totals {
        Totals {
            requests: 100,
            records: 1000,
            bytes: 1_000_000,
            errors: 0,
            errors_by_kind: BTreeMap::new(),
            latency_ms: Percentiles {
                p50: 2.0,
                p90: 3.0,
                p99: 8.0,
                p999: 9.0,
                max: 10.0,
            },
        }
    }

    #[test]
    fn throughput_is_per_second_of_the_run() {
        let r = Report::new(settings(), totals(), 2.0, None);
        assert_eq!(r.records_per_sec, 500.0);
        assert_eq!(r.mb_per_sec, 0.5);
        assert!((r.mib_per_sec - 0.476_837).abs() < 1e-5);
    }

    #[test]
    fn ratios_divide_by_the_floor_percentile_by_percentile() {
        let floor = Floor {
            store: "file:///x".into(),
            object_bytes: 4096,
            count: 10,
            gap_ms: None,
            latency_ms: Percentiles {
                p50: 0.5,
                p99: 2.0,
                ..Default::default()
            },
        };
        let r = Report::new(settings(), totals(), 1.0, None).with_floor(floor);
        assert_eq!(r.vs_floor, Some(Ratios { p50: 4.0, p99: 4.0 }));
        let text = r.text();
        assert!(text.contains("ack p50 = 4.00x floor, p99 = 4.00x floor"), "{text}");
        assert!(text.contains("acks=all, linger 5 ms, 5 in flight"), "{text}");
        assert_eq!(Ratios::of(&totals().latency_ms, &Percentiles::default()), None);
    }

    #[test]
    fn the_json_report_has_the_fields_scripts_read() {
        let r = Report::new(settings(), totals(), 1.0, None);
        let v = serde_json::to_value(&r).unwrap();
        for key in [
            "command",
            "mode",
            "records",
            "errors",
            "records_per_sec",
            "mb_per_sec",
            "latency_kind",
            "latency_ms",
            "floor",
            "vs_floor",
            "server",
            "wal",
            "compaction",
            "cost",
        ] {
            assert!(v.get(key).is_some(), "missing {key} in {v}");
        }
        assert_eq!(v["latency_ms"]["p999"], 9.0);
        assert_eq!(v["acks"], -1);
    }
}
