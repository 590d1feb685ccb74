//! Layer 3 of the test plan: a deterministic simulation of a whole cluster in
//! one process (see `docs/design/simulation.md`).
//!
//! Three nodes run on a current-thread tokio runtime with paused time, so
//! every timer (heartbeats, node timeouts, backoffs, injected latency) runs in
//! simulated time and a minute of cluster life takes about a second. They
//! share one in-memory object store (data and WAL) and one in-memory store
//! holding the metadata log, each through its own fault-injecting
//! connections. A seeded schedule crashes, shuts down, partitions, stalls and
//! degrades nodes while producers and readers run; afterwards everything is
//! healed and the invariants of `/work/shared/design/README.md` are checked.
//! Transactional producers and read_committed readers run alongside
//! (`simulation/transactions.rs`), checked for atomicity, no aborted record
//! visible, and a last stable offset that never moves backwards.
//!
//! Environment:
//! - `SLUICE_SIM_SEEDS=N`: run N seeds from 1 up (default 20), skipping `KNOWN_BUGS`;
//! - `SLUICE_SIM_FIRST_SEED=F`: start at seed F instead of 1 (to shard long runs);
//! - `SLUICE_SIM_SEED=S`: run only seed S (prints its trace);
//! - `SLUICE_SIM_TRACE_SEEDS=N`: seeds `a_seed_replays_bit_for_bit` runs twice (default 20);
//! - `SLUICE_SIM_TRACE_DIR=<dir>`: write each run's events to `<dir>/<seed>-<n>.trace`;
//! - `SLUICE_SIM_THREADS=N`: seeds run at once (default: the machine's cores);
//! - `SLUICE_SIM_VERBOSE=1`: print the harness's trace as it happens;
//! - `SLUICE_SIM_LOG=<filter>`: the nodes' own logs (e.g. `sluice=info`),
//!   stamped with simulated time.
//!
//! Reproducibility, bit for bit: the fault schedule, every injected fault's
//! RNG and every client's choices come from the seed; so do tokio's RNG
//! (which orders `select!` branches: `Builder::rng_seed`, under the
//! `tokio_unstable` cfg that `.cargo/config.toml` sets) and Sluice's own
//! draws (`sluice::entropy`, seeded per thread: proposal ids, data-object
//! names, member ids). Nodes read wall time from the simulated clock, and
//! nothing a node decides iterates a `HashMap`. Every store operation and
//! harness event is hashed into the seed's `trace-hash`, printed per seed;
//! `a_seed_replays_bit_for_bit` runs seeds twice and fails on any
//! difference.
//!
//! Linearizability: reader 1 reads with `Consistency::Strong`, and its reads
//! and every plain append (with the ticks of their invocation and
//! completion) are checked against the final log by
//! `support::linearizable`.

mod support;

#[path = "simulation/harness.rs"]
mod harness;
#[path = "simulation/history.rs"]
mod history;
#[path = "simulation/kv_history.rs"]
mod kv_history;
#[path = "simulation/recording.rs"]
mod recording;
#[path = "simulation/schedule.rs"]
mod schedule;
#[path = "simulation/trace.rs"]
mod trace;
#[path = "simulation/txn_history.rs"]
mod txn_history;

use harness::{run_seed, SeedReport};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Instant;

/// Seeds that once failed, run on every `cargo test` after their fix:
/// - 12, 26, 66, 89, 90, 110, 143: a takeover that met the dead writer's
///   pipelined segments above its own earlier fence marker put a second
///   marker and then refused the first (fixed: the lowest marker is the
///   fence); with that fixed, seed 12 lost acknowledged records because two
///   concurrent WAL truncations popped each other's segments, leaving an old
///   segment below a hole, and the takeover fenced in the hole (fixed:
///   truncations are serialized).
/// - 8, 26: a read reported a high watermark and then returned a tail record
///   at it (fixed: tail reads are bounded by the reported watermark).
/// - 10, 25, 27, 45, 50, 60, 61, 68: transfers stuck forever because an
///   append whose client gave up never advanced the high watermark, so the
///   owner could never become quiescent (fixed: the ack is awaited in a task
///   of its own).
/// - 935: the final read was served by a zombie: a node fenced while its
///   requests stalled, whose view still had it owning the partition, read
///   back a stale prefix without the final acknowledged record (the
///   harness asked it because it agreed with itself; fixed in the harness:
///   the final read goes to the owner as the most advanced view has it).
/// - 6325: a new incarnation's slow seq 0 was overtaken by seq 1; a
///   takeover took seq 1 for the lowest segment, fenced above it, and seq
///   0 then landed and was acknowledged unread (fixed: seq 0 goes alone).
/// - 16: the coordinator aborted an expired transaction before its batch
///   for one partition arrived; the abort marker found nothing open there
///   and appended nothing, so the late batch opened a transaction that the
///   producer's next commit made visible: half a transaction committed
///   (fixed: a marker at a newer epoch is appended anyway, and fences).
/// - 504: a restarting node whose view lagged behind log truncation
///   appended its registration on a freed index, could not read the
///   entry before it (the store was failing requests), took that for "it
///   exists" and registered at its old epoch in a view of its own; as that
///   stale owner it acknowledged appends at offsets already acknowledged
///   (fixed: an append whose predecessor cannot be read is never applied,
///   and nothing is read past it until that is known).
/// - 591: a coordinator's ticker finished a transaction late and its
///   Complete, naming only the producer and epoch, completed the next
///   transaction of that epoch before its marker reached its partition; the
///   partition's last stable offset stayed below it forever (fixed:
///   Complete names the transaction by the index it began at).
/// - 146: a stalled node read its own entries on slots freed by truncation
///   back as the log and deleted WAL segments of acknowledged records
///   (fixed: a read is accepted only if the slot before it is unchanged).
/// - 420: a sync from below the log's truncation read nothing and passed
///   for caught up; a partition leader judged a current abort marker late
///   and an aborted batch stayed visible (fixed: a sync confirms its end).
/// - 7566: the final append to a partition whose owner's store requests
///   had stalled timed out, landed anyway, and the harness sent the same
///   value again: stored twice, reported as a duplicate (fixed in the
///   harness: each attempt of a final append sends a value of its own).
/// - 37296: a node fenced during a stall, not knowing it yet, served a read
///   of a compacted partition from its view's chunks, which already held the
///   new owner's flushes, past the high watermark of its own stream that the
///   answer reported (fixed: a read never returns records at or past the
///   high watermark it reports).
const PINNED: &[u64] = &[
    8, 10, 12, 16, 25, 26, 27, 45, 50, 60, 61, 66, 68, 89, 90, 110, 143, 146, 420, 504, 591, 935, 6325, 7566, 37296,
];

/// Seeds that fail because of a bug in `src/` that is not fixed yet, with
/// the report. Run with `cargo test --test simulation -- --ignored`.
/// They are skipped by the other tests so that they do not block CI.
const KNOWN_BUGS: &[(u64, &str)] = &[];

fn known_bug(seed: u64) -> bool {
    KNOWN_BUGS.iter().any(|(s, _)| *s == seed)
}

thread_local! {
    /// Panics on this thread: with a current-thread runtime every task of a
    /// seed runs here, so a node task that panics (and is swallowed by its
    /// `JoinHandle`) still fails the seed.
    static PANICS: Cell<u64> = const { Cell::new(0) };
    /// Simulated time zero of the seed running on this thread, for log stamps.
    static SIM_T0: Cell<Option<tokio::time::Instant>> = const { Cell::new(None) };
}

fn install_hooks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.with(|p| p.set(p.get() + 1));
            previous(info);
        }));
        if let Ok(filter) = std::env::var("SLUICE_SIM_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_timer(SimClock)
                .with_test_writer()
                .try_init();
        }
    });
}

/// Stamps log lines with the simulated time of the running seed.
struct SimClock;

impl tracing_subscriber::fmt::time::FormatTime for SimClock {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        match SIM_T0.with(Cell::get) {
            Some(t0) if tokio::runtime::Handle::try_current().is_ok() => {
                write!(w, "{:>7} ms", t0.elapsed().as_millis())
            }
            _ => write!(w, "      - ms"),
        }
    }
}

/// Run one seed on a fresh runtime. `Err` is the reason it failed.
fn run_one(seed: u64) -> (Result<(), String>, SeedReport) {
    install_hooks();
    let panics_before = PANICS.with(Cell::get);
    // Bit-exactness: the runtime's RNG (which orders `select!` branches)
    // and Sluice's own draws on this thread come from the seed.
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all().start_paused(true);
    #[cfg(tokio_unstable)]
    builder.rng_seed(tokio::runtime::RngSeed::from_bytes(&seed.to_le_bytes()));
    let runtime = builder.build().expect("a runtime");
    sluice::entropy::seed_this_thread(Some(seed ^ 0x5eed_5eed_5eed_5eed));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            SIM_T0.with(|t| t.set(Some(tokio::time::Instant::now())));
            run_seed(seed).await
        })
    }));
    drop(runtime);
    sluice::entropy::seed_this_thread(None);
    SIM_T0.with(|t| t.set(None));
    let mut report = match result {
        Ok(report) => report,
        Err(_) => {
            let mut r = SeedReport::default();
            r.violations.push("the harness panicked".into());
            r
        }
    };
    let panics = PANICS.with(Cell::get) - panics_before;
    if panics > 0 {
        report.violations.push(format!("{panics} task(s) panicked"));
    }
    let outcome = match report.violations.first() {
        None => Ok(()),
        Some(first) if report.violations.len() == 1 => Err(first.clone()),
        Some(first) => Err(format!("{first} (and {} more)", report.violations.len() - 1)),
    };
    (outcome, report)
}

/// Run `seeds`, print a summary, and fail if any seed failed. With
/// `tolerate_known_bugs` (and without `SLUICE_SIM_STRICT`), a seed whose only
/// failure carries the signature of a known, unfixed bug in `src/` is
/// reported but does not fail the test: task interleavings are not exactly
/// reproducible, so any seed may hit it now and then, not only those pinned.
fn run_seeds(label: &str, seeds: &[u64], print_trace: bool, tolerate_known_bugs: bool) {
    let tolerate = tolerate_known_bugs && std::env::var_os("SLUICE_SIM_STRICT").is_none();
    let started = Instant::now();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut acked = 0;
    let mut failed = Vec::new();
    let mut known_hits = Vec::new();
    for (seed, outcome, report, t) in run_parallel(seeds) {
        acked += report.acked;
        for (k, v) in &report.counts {
            *counts.entry(k.clone()).or_default() += v;
        }
        if let (Err(reason), Some(bug), true) = (&outcome, report.known_bug, tolerate) {
            eprintln!("seed {seed}: hit known bug {bug} (not counted as a failure): {reason}");
            known_hits.push(seed);
            continue;
        }
        eprintln!("trace-hash {seed} {:016x}", report.trace_hash);
        write_trace(seed, &report);
        let failed_now = outcome.is_err();
        if print_trace || failed_now {
            for line in &report.trace {
                eprintln!("seed {seed}: {line}");
            }
        }
        match outcome {
            Ok(()) => eprintln!(
                "seed {seed}: ok ({} acked records, {:.1} s wall)",
                report.acked,
                t.as_secs_f64()
            ),
            Err(reason) => {
                eprintln!("simulation failed for seed {seed}: {reason}");
                for v in report.violations.iter().skip(1) {
                    eprintln!("seed {seed}:   also: {v}");
                }
                failed.push(seed);
            }
        }
    }
    eprintln!("---- simulation summary ({label}) ----");
    eprintln!("seeds run: {} ({:?})", seeds.len(), seeds);
    eprintln!("acknowledged records: {acked}");
    if !known_hits.is_empty() {
        eprintln!("seeds that hit a known bug in src/ (tolerated): {known_hits:?}");
    }
    for (k, v) in &counts {
        eprintln!("  {k}: {v}");
    }
    eprintln!("wall time: {:.1} s", started.elapsed().as_secs_f64());
    assert!(failed.is_empty(), "simulation failed for seeds {failed:?}");
}

/// Run `seeds` on `SLUICE_SIM_THREADS` threads (default: the machine's
/// cores), each seed on a runtime of its own; results in seed order.
fn run_parallel(seeds: &[u64]) -> Vec<(u64, Result<(), String>, SeedReport, std::time::Duration)> {
    let threads = env_u64("SLUICE_SIM_THREADS")
        .map(|n| n.max(1) as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(seeds.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else { break };
                let t = Instant::now();
                let (outcome, report) = run_one(seed);
                results.lock().unwrap().push((i, seed, outcome, report, t.elapsed()));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.0);
    results.into_iter().map(|(_, s, o, r, t)| (s, o, r, t)).collect()
}

/// With `SLUICE_SIM_TRACE_DIR`, the seed's events go to
/// `<dir>/<seed>-<n>.trace`, `n` counting the runs of that seed.
fn write_trace(seed: u64, report: &SeedReport) {
    let (Some(dir), Some(lines)) = (std::env::var_os("SLUICE_SIM_TRACE_DIR"), &report.trace_lines) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).expect("the trace directory");
    let path = (1..)
        .map(|n| dir.join(format!("{seed}-{n}.trace")))
        .find(|p| !p.exists())
        .expect("a free name");
    std::fs::write(&path, lines.join("\n") + "\n").expect("the trace file");
    eprintln!(
        "trace of seed {seed}: {} ({} events)",
        path.display(),
        report.trace_events
    );
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
    )
}

#[test]
fn simulated_cluster_keeps_the_invariants_under_faults() {
    match env_u64("SLUICE_SIM_SEED") {
        Some(seed) => run_seeds("one seed", &[seed], true, false),
        None => {
            // N seeds counting up from 1, skipping those of known bugs.
            let n = env_u64("SLUICE_SIM_SEEDS").unwrap_or(20) as usize;
            let first = env_u64("SLUICE_SIM_FIRST_SEED").unwrap_or(1);
            let seeds: Vec<u64> = (first..).filter(|s| !known_bug(*s)).take(n).collect();
            let skipped: Vec<u64> = (first..=seeds.last().copied().unwrap_or(0))
                .filter(|s| known_bug(*s))
                .collect();
            if !skipped.is_empty() {
                eprintln!("skipping seeds {skipped:?} of known bugs in src/ (run them with --ignored)");
            }
            run_seeds("seeds", &seeds, false, false);
        }
    }
}

/// Bit-exactness: each seed run twice gives the same trace (every store
/// operation and harness event at the same simulated instant, in the same
/// order). `SLUICE_SIM_TRACE_SEEDS=N` seeds from 1 (default 20), or only
/// `SLUICE_SIM_SEED`.
#[test]
fn a_seed_replays_bit_for_bit() {
    #[cfg(not(tokio_unstable))]
    panic!(
        "built without --cfg tokio_unstable (.cargo/config.toml sets it; a RUSTFLAGS variable replaces it): \
         tokio's select! order cannot be seeded"
    );
    let seeds: Vec<u64> = match env_u64("SLUICE_SIM_SEED") {
        Some(seed) => vec![seed],
        None => (1..=env_u64("SLUICE_SIM_TRACE_SEEDS").unwrap_or(20)).collect(),
    };
    let first = run_parallel(&seeds);
    let second = run_parallel(&seeds);
    let mut differ = Vec::new();
    for ((seed, _, a, _), (_, _, b, _)) in first.iter().zip(&second) {
        eprintln!(
            "trace-hash {seed} {:016x} {:016x} ({} and {} events)",
            a.trace_hash, b.trace_hash, a.trace_events, b.trace_events
        );
        write_trace(*seed, a);
        write_trace(*seed, b);
        if a.trace_hash != b.trace_hash {
            differ.push(*seed);
        }
    }
    eprintln!("bit-exact: {} of {} seeds", seeds.len() - differ.len(), seeds.len());
    assert!(
        differ.is_empty(),
        "seeds {differ:?} ran differently twice (SLUICE_SIM_TRACE_DIR=<dir> writes both traces to diff)"
    );
}

#[test]
fn pinned_seeds_stay_fixed() {
    if std::env::var_os("SLUICE_SIM_SEED").is_some() || PINNED.is_empty() {
        return;
    }
    run_seeds("pinned", PINNED, false, false);
}

#[test]
#[ignore = "seeds that expose known bugs in src/; see KNOWN_BUGS"]
fn known_bug_seeds() {
    for (seed, why) in KNOWN_BUGS {
        eprintln!("seed {seed}: {why}");
    }
    run_seeds(
        "known bugs (strict)",
        &KNOWN_BUGS.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        false,
        false,
    );
}

/// The checker itself: it must notice what it is there to notice.
mod checker_checks {
    use super::history::{check_final, History, Origin};
    use super::recording::RecordingStore;
    use bytes::Bytes;
    use sluice::batch::{encode_batch, Record};
    use sluice::ids::{NodeEpoch, NodeId, Offset, SegmentSeq, StreamEpoch, StreamId, TopicId};
    use sluice::store::{FaultConfig, FaultyStore, MemoryStore, ObjectStore};
    use sluice::wal::segment::{encode_segment, Segment, WalEntry};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn origin() -> Origin {
        Origin {
            what: "test".into(),
            at_ms: 0,
        }
    }

    fn b(s: &str) -> Bytes {
        Bytes::from(s.to_string())
    }

    #[test]
    fn two_values_at_one_offset_are_a_violation() {
        let mut h = History::default();
        h.ack(0, 3, b("a"), origin());
        h.note(0, 3, &b("a"), origin());
        assert!(h.violations.is_empty());
        h.note(0, 3, &b("b"), origin());
        assert_eq!(h.violations.len(), 1, "{:?}", h.violations);
    }

    #[test]
    fn lost_acks_vanished_reads_and_duplicates_are_violations() {
        let mut h = History::default();
        h.ack(0, 0, b("a"), origin());
        h.ack(0, 1, b("b"), origin());
        h.note(1, 0, &b("c"), origin());
        let fine = BTreeMap::from([(0, vec![b("a"), b("b")]), (1, vec![b("c")])]);
        assert_eq!(check_final(&h, &fine), Vec::<String>::new());
        let lost_ack = BTreeMap::from([(0, vec![b("a")]), (1, vec![b("c")])]);
        assert!(check_final(&h, &lost_ack)[0].contains("invariant 1"));
        let vanished_read = BTreeMap::from([(0, vec![b("a"), b("b")]), (1, vec![])]);
        assert!(check_final(&h, &vanished_read)[0].contains("invariant 3"));
        let duplicate = BTreeMap::from([(0, vec![b("a"), b("b")]), (1, vec![b("c"), b("a")])]);
        assert!(check_final(&h, &duplicate)[0].contains("duplicate"));
    }

    fn kv(k: &str, v: Option<&str>) -> super::kv_history::Kv {
        super::kv_history::Kv {
            key: b(k),
            value: v.map(b),
        }
    }

    fn part(records: &[(u64, super::kv_history::Kv)], compacted_end: u64) -> super::kv_history::KvPartition {
        super::kv_history::KvPartition {
            records: records.iter().cloned().collect(),
            compacted_end,
        }
    }

    #[test]
    fn compaction_may_remove_superseded_records_but_not_the_latest_of_a_key() {
        use super::kv_history::{check_final_kv, KvHistory};
        let mut h = KvHistory::default();
        assert!(h.ack(0, 0, &kv("a", Some("1")), "test").is_none());
        assert!(h.ack(0, 1, &kv("b", Some("2")), "test").is_none());
        assert!(h.ack(0, 2, &kv("a", None), "test").is_none());
        assert!(h.note(0, 3, &kv("b", Some("3")), "test").is_none());
        // Compacted below 4: a's value and b's first value superseded.
        let fine = BTreeMap::from([(0, part(&[(2, kv("a", None)), (3, kv("b", Some("3")))], 4))]);
        assert_eq!(check_final_kv(&h, &fine), Vec::<String>::new());
        // Nothing compacted yet is fine as well.
        let all = [
            (0, kv("a", Some("1"))),
            (1, kv("b", Some("2"))),
            (2, kv("a", None)),
            (3, kv("b", Some("3"))),
        ];
        assert_eq!(
            check_final_kv(&h, &BTreeMap::from([(0, part(&all, 0))])),
            Vec::<String>::new()
        );
        // The tombstone, a's latest, gone: a lost acknowledged record.
        let lost = BTreeMap::from([(0, part(&[(3, kv("b", Some("3")))], 4))]);
        let found = check_final_kv(&h, &lost);
        assert!(found[0].contains("invariant 1"), "{found:?}");
        // b's latest (only read, not acknowledged) gone with b's first.
        let vanished = BTreeMap::from([(0, part(&[(2, kv("a", None))], 4))]);
        let found = check_final_kv(&h, &vanished);
        assert!(found.iter().any(|v| v.contains("invariant 3")), "{found:?}");
        // Another record at an acknowledged offset.
        let changed = BTreeMap::from([(0, part(&[(2, kv("a", Some("9"))), (3, kv("b", Some("3")))], 4))]);
        assert!(check_final_kv(&h, &changed)[0].contains("invariant 2"));
        // A key twice in the compacted part.
        let twice = BTreeMap::from([(0, part(&all, 4))]);
        assert!(check_final_kv(&h, &twice).iter().any(|v| v.contains("twice")));
        // A second record noted at an offset.
        assert!(h
            .note(0, 1, &kv("b", Some("x")), "test")
            .unwrap()
            .contains("invariant 2"));
    }

    #[tokio::test]
    async fn a_segment_whose_reply_was_lost_is_still_recorded() {
        let recording = RecordingStore::new(Arc::new(MemoryStore::new()));
        let faulty = FaultyStore::new(
            Arc::new(recording.clone()),
            FaultConfig {
                lost_reply_rate: 1.0,
                ..FaultConfig::default()
            },
        );
        let stream = StreamId::new(TopicId(1), 0);
        let record = Record {
            timestamp_ms: 1,
            key: None,
            value: Some(b("v")),
            headers: vec![],
        };
        for node in ["n1", "n2"] {
            let segment = Segment {
                node: NodeId::new(node),
                epoch: NodeEpoch(1),
                seq: SegmentSeq(0),
                entries: vec![WalEntry {
                    stream,
                    stream_epoch: StreamEpoch(1),
                    base_offset: Offset(0),
                    record_count: 1,
                    max_timestamp: 1,
                    producer: None,
                    batch: encode_batch(Offset(0), std::slice::from_ref(&record)),
                }],
            };
            let key = format!("wal/{node}/1/{:020}", 0);
            let err = faulty.put_if_absent(&key, encode_segment(&segment)).await.unwrap_err();
            assert!(err.is_indeterminate());
        }
        let ledger = recording.ledger();
        let ledger = ledger.lock().unwrap();
        assert_eq!(ledger.segments, 2);
        assert_eq!(
            ledger.writers[&(stream, StreamEpoch(1))].len(),
            2,
            "two writers at one epoch are seen"
        );
    }
}
