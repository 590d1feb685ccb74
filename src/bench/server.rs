//! What the node spent on a run: its process's CPU time and resident set
//! from /proc (`--server-pid`, Linux only), and its WAL PUTs from its
//! Prometheus `/metrics`.

use super::report::{CompactionStats, ServerStats, WalStats};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One reading of a process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcSample {
    /// User + system CPU seconds since the process started.
    pub cpu_sec: f64,
    pub rss_bytes: u64,
}

/// Reads /proc/PID/stat and /proc/PID/status.
pub fn sample(pid: u32) -> std::io::Result<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse(&stat, &status, clock_ticks()).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("unexpected /proc/{pid} contents"),
        )
    })
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a constant of the running system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// utime and stime are the 14th and 15th fields of `stat`; the second field
/// (the command) is in parentheses and may hold spaces, so fields are
/// counted after its closing parenthesis. VmRSS is in kB.
fn parse(stat: &str, status: &str, ticks: f64) -> Option<ProcSample> {
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(ProcSample {
        cpu_sec: (utime + stime) as f64 / ticks,
        rss_bytes: rss_kb * 1024,
    })
}

/// Samples a process's resident set every 100 ms until `stop` is set.
pub struct RssWatch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl RssWatch {
    pub fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                if let Ok(s) = sample(pid) {
                    peak = peak.max(s.rss_bytes);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            peak
        });
        Self { stop, task }
    }

    /// The highest resident set seen.
    pub async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or(0)
    }
}

/// The server's figures over a run: `before` and `after` bracket the load,
/// `peak_rss` is from an [`RssWatch`], `bytes` what was appended (or read).
pub fn server_stats(
    pid: u32,
    before: ProcSample,
    after: ProcSample,
    peak_rss: u64,
    bytes: u64,
    elapsed_sec: f64,
) -> ServerStats {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let cpu_sec = (after.cpu_sec - before.cpu_sec).max(0.0);
    let mb = bytes as f64 / 1e6;
    ServerStats {
        pid,
        cpu_sec,
        cpu_ms_per_mb: if mb > 0.0 { cpu_sec * 1000.0 / mb } else { 0.0 },
        cores: cpu_sec / elapsed_sec.max(1e-9),
        rss_before_mib: mib(before.rss_bytes),
        rss_peak_mib: mib(peak_rss.max(before.rss_bytes).max(after.rss_bytes)),
        rss_after_mib: mib(after.rss_bytes),
    }
}

/// Cumulative WAL and compaction counters of a node.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NodeCounters {
    pub puts: f64,
    pub put_seconds: f64,
    pub put_bytes: f64,
    /// Bytes read and written by applied compaction runs.
    pub compaction_bytes_in: f64,
    pub compaction_bytes_out: f64,
    /// Time spent in applied compaction runs (reading, rewriting, writing
    /// and swapping; not the rate limit's pauses between runs).
    pub compaction_seconds: f64,
}

/// Reads `sluice_wal_put_seconds{outcome="ok"}` (count and sum),
/// `sluice_wal_put_bytes_total` and the compaction counters from
/// Prometheus text.
pub fn parse_metrics(text: &str) -> NodeCounters {
    let mut c = NodeCounters::default();
    for line in text.lines() {
        let Some((name, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(v) = value.parse::<f64>() else { continue };
        if name == r#"sluice_wal_put_seconds_count{outcome="ok"}"# {
            c.puts = v;
        } else if name == r#"sluice_wal_put_seconds_sum{outcome="ok"}"# {
            c.put_seconds = v;
        } else if name == "sluice_wal_put_bytes_total" {
            c.put_bytes = v;
        } else if name == "sluice_compaction_bytes_in_total" {
            c.compaction_bytes_in = v;
        } else if name == "sluice_compaction_bytes_out_total" {
            c.compaction_bytes_out = v;
        } else if name == r#"sluice_compaction_seconds_sum{outcome="applied"}"# {
            c.compaction_seconds = v;
        }
    }
    c
}

/// The node's `{url}/metrics` text; `None` when it does not answer (the
/// report then has no `wal`, `compaction` or `cost` figures).
pub async fn scrape(client: &reqwest::Client, url: &str) -> Option<String> {
    let resp = client
        .get(format!("{url}/metrics"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    resp.text().await.ok()
}

pub fn wal_stats(before: NodeCounters, after: NodeCounters) -> WalStats {
    let puts = (after.puts - before.puts).max(0.0);
    let per = |v: f64| if puts > 0.0 { v / puts } else { 0.0 };
    WalStats {
        puts: puts as u64,
        mean_put_bytes: per(after.put_bytes - before.put_bytes),
        mean_put_ms: per(after.put_seconds - before.put_seconds) * 1000.0,
    }
}

/// What compaction did over the run; `None` when no run was applied.
pub fn compaction_stats(before: NodeCounters, after: NodeCounters) -> Option<CompactionStats> {
    let bytes_in = after.compaction_bytes_in - before.compaction_bytes_in;
    let seconds = after.compaction_seconds - before.compaction_seconds;
    (bytes_in > 0.0).then(|| CompactionStats {
        bytes_in: bytes_in as u64,
        bytes_out: (after.compaction_bytes_out - before.compaction_bytes_out).max(0.0) as u64,
        seconds,
        mb_per_sec_in: if seconds > 0.0 { bytes_in / seconds / 1e6 } else { 0.0 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_fields_are_counted_after_the_command() {
        let stat = "4242 (sluice serve) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 12 0 100 0 0";
        let status = "Name:\tsluice\nVmPeak:\t  99999 kB\nVmRSS:\t   20480 kB\nThreads:\t12\n";
        let s = parse(stat, status, 100.0).unwrap();
        assert_eq!(s.cpu_sec, 3.0);
        assert_eq!(s.rss_bytes, 20 << 20);
        assert_eq!(parse("garbage", status, 100.0), None);
    }

    #[test]
    fn this_process_can_be_sampled() {
        let s = sample(std::process::id()).unwrap();
        assert!(s.rss_bytes > 0);
    }

    #[test]
    fn cpu_is_per_mb_appended_and_peak_rss_is_the_highest_seen() {
        let before = ProcSample {
            cpu_sec: 1.0,
            rss_bytes: 10 << 20,
        };
        let after = ProcSample {
            cpu_sec: 3.0,
            rss_bytes: 30 << 20,
        };
        let s = server_stats(7, before, after, 50 << 20, 100_000_000, 4.0);
        assert_eq!(s.cpu_sec, 2.0);
        assert_eq!(s.cpu_ms_per_mb, 20.0);
        assert_eq!(s.cores, 0.5);
        assert_eq!((s.rss_before_mib, s.rss_peak_mib, s.rss_after_mib), (10.0, 50.0, 30.0));
        let idle = server_stats(7, before, after, 0, 0, 4.0);
        assert_eq!(idle.cpu_ms_per_mb, 0.0);
        assert_eq!(idle.rss_peak_mib, 30.0, "never below what was sampled around the run");
    }

    #[test]
    fn wal_counters_are_read_from_prometheus_text() {
        let text = "# TYPE sluice_wal_put_bytes_total counter\nsluice_wal_put_bytes_total 40960\n\
                    sluice_wal_put_seconds_bucket{outcome=\"ok\",le=\"0.001\"} 3\n\
                    sluice_wal_put_seconds_sum{outcome=\"ok\"} 0.02\nsluice_wal_put_seconds_count{outcome=\"ok\"} 10\n\
                    sluice_wal_put_seconds_count{outcome=\"error\"} 1\n";
        let after = parse_metrics(text);
        assert_eq!(
            after,
            NodeCounters {
                puts: 10.0,
                put_seconds: 0.02,
                put_bytes: 40960.0,
                ..NodeCounters::default()
            }
        );
        let w = wal_stats(NodeCounters::default(), after);
        assert_eq!(w.puts, 10);
        assert_eq!(w.mean_put_bytes, 4096.0);
        assert!((w.mean_put_ms - 2.0).abs() < 1e-9);
    }

    #[test]
    fn compaction_throughput_is_input_bytes_over_the_time_of_applied_runs() {
        let text = "sluice_compaction_bytes_in_total 30000000\nsluice_compaction_bytes_out_total 1000000\n\
                    sluice_compaction_seconds_sum{outcome=\"applied\"} 1.5\n\
                    sluice_compaction_seconds_sum{outcome=\"rejected\"} 9\n";
        let before = NodeCounters {
            compaction_bytes_in: 10_000_000.0,
            compaction_seconds: 0.5,
            ..NodeCounters::default()
        };
        let c = compaction_stats(before, parse_metrics(text)).unwrap();
        assert_eq!((c.bytes_in, c.bytes_out), (20_000_000, 1_000_000));
        assert!((c.mb_per_sec_in - 20.0).abs() < 1e-9);
        assert!(compaction_stats(before, before).is_none(), "no run, no figures");
    }
}
