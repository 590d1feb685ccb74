//! The seed's trace for bit-exactness: every operation on the shared stores
//! (data, WAL and the metadata log, as they reach the store, with the
//! simulated instant and the outcome) and every line of the harness's own
//! log, folded into one 64-bit FNV-1a hash. Two runs of a seed are the same
//! run exactly when their hashes agree (up to a hash collision).
//!
//! With `SLUICE_SIM_TRACE_DIR=<dir>` each run also writes its events to
//! `<dir>/<seed>-<run>.trace`, to diff two runs that disagree.

use std::sync::Mutex;
use tokio::time::Instant;

#[derive(Debug)]
pub struct Trace {
    t0: Instant,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    hash: u64,
    events: u64,
    /// Kept only when the trace is to be written out.
    lines: Option<Vec<String>>,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over `bytes`, continuing from `hash`.
pub fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

impl Trace {
    pub fn new(keep_lines: bool) -> Self {
        Self {
            t0: Instant::now(),
            inner: Mutex::new(Inner {
                hash: FNV_OFFSET,
                events: 0,
                lines: keep_lines.then(Vec::new),
            }),
        }
    }

    /// One event, stamped with the simulated time in microseconds.
    pub fn event(&self, what: std::fmt::Arguments<'_>) {
        let line = format!("{:>10} {what}", self.t0.elapsed().as_micros());
        let mut inner = self.inner.lock().unwrap();
        inner.hash = fnv1a(inner.hash, line.as_bytes());
        inner.hash = fnv1a(inner.hash, b"\n");
        inner.events += 1;
        if let Some(lines) = &mut inner.lines {
            lines.push(line);
        }
    }

    /// The hash of every event so far, and how many there were.
    pub fn digest(&self) -> (u64, u64) {
        let inner = self.inner.lock().unwrap();
        (inner.hash, inner.events)
    }

    /// The events, if they were kept.
    pub fn lines(&self) -> Option<Vec<String>> {
        self.inner.lock().unwrap().lines.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::fnv1a;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a(super::FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(super::FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(super::FNV_OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
    }
}
