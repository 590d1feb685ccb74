//! A process's resident memory (`VmRSS` from `/proc/PID/status`), read once
//! or sampled by a thread during an attack, for the hostile-client tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Whether this machine has `/proc` to read (otherwise the test says it skips).
pub fn has_proc() -> bool {
    let ok = std::path::Path::new("/proc/self/status").exists();
    if !ok {
        eprintln!("skipping: no /proc to read VmRSS from");
    }
    ok
}

/// `pid`'s resident set now, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Samples a process's VmRSS every 10 ms until finished; keeps the peak.
pub struct RssPeak {
    before: u64,
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssPeak {
    pub fn start(pid: u32) -> RssPeak {
        let before = rss_kib(pid);
        let peak = Arc::new(AtomicU64::new(before));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let (peak, stop) = (peak.clone(), stop.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        });
        RssPeak {
            before,
            peak,
            stop,
            thread: Some(thread),
        }
    }

    /// (baseline KiB, peak KiB).
    pub fn finish(mut self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        (self.before, self.peak.load(Ordering::Relaxed))
    }
}
