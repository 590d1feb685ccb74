//! `sluice bench`: a load generator that measures what a client sees —
//! records per second and the latency from sending an append to its
//! acknowledgement (durable in the WAL), or from an append to the moment a
//! long-polling consumer receives it (`e2e`) — over the HTTP API or the
//! Kafka protocol, next to the floor of the store underneath.
//!
//! # Layout
//!
//! - this module: the subcommands ([`BenchCmd`]) and their flags; a run
//!   creates the topic, measures the floor (`--floor-store`), samples the
//!   server (`--server-pid`, `/metrics`), runs the load and reports.
//! - `stats`: counters and the HDR latency histogram the load tasks share,
//!   and the live progress line drawn from them.
//! - `report`: the report, its JSON and text forms, ratios to the floor.
//! - `floor`: bare create-if-absent PUTs (`bench floor`, `--floor-store`).
//! - `server`: the node's CPU and memory from /proc, its WAL from /metrics.
//! - `http`: producers and consumers over the HTTP API.
//! - `kafka`, `kafka_proto`: a small native Kafka producer and consumer
//!   (Metadata, pipelined Produce, Fetch, ListOffsets) — no external client.
//! - `ports`: loopback ports for the nodes the failover bench (and the
//!   end-to-end tests) start, picked below the ephemeral range.
//!
//! # What is measured
//!
//! With `--rate`, records are due on a fixed schedule and latency counts
//! from the time a record was due, not from when it was sent, so a server
//! that falls behind shows as latency instead of as a slower client
//! (no coordinated omission). Without a rate, each producer sends a request
//! as soon as it may (HTTP: after the previous ack; Kafka: while fewer than
//! `--max-in-flight` are unanswered), and latency counts from its creation.

use bytes::Bytes;
use clap::{Args, Subcommand, ValueEnum};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

pub mod failover;
mod floor;
mod http;
mod kafka;
pub mod kafka_proto;
pub mod ports;
pub mod prices;
mod report;
mod server;
mod stats;

pub use report::{CompactionStats, Floor, Ratios, Report, ServerStats, WalStats};
pub use stats::{Percentiles, Recorder};

#[derive(Debug, Clone, Subcommand)]
pub enum BenchCmd {
    /// Appends from concurrent producers; reports throughput and ack latency.
    Produce(BenchArgs),
    /// Reads a topic from its start up to its end (as of the start of the
    /// run) as fast as possible; reports throughput and per-request latency.
    Consume(BenchArgs),
    /// Producers and one long-polling consumer per partition; reports the
    /// latency from a record's creation to its arrival at the consumer.
    E2e(BenchArgs),
    /// The floor: bare create-if-absent PUTs of one size to a store, the
    /// least any acknowledged append can cost.
    Floor(FloorArgs),
    /// Failover, clean hand-off and WAL recovery times on a cluster of child `sluice serve` processes.
    Failover(failover::FailoverArgs),
}

#[derive(Debug, Clone, Args)]
pub struct FloorArgs {
    /// Store to write to (file:///PATH, s3://bucket/prefix or memory://); objects go under bench-floor/.
    #[arg(long, env = "SLUICE_BENCH_STORE", default_value = "file:///tmp/sluice-bench-floor")]
    pub store: String,
    /// S3-compatible endpoint for an s3:// store (path-style requests).
    #[arg(long, env = "SLUICE_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// S3 region.
    #[arg(long, env = "SLUICE_S3_REGION")]
    pub s3_region: Option<String>,
    /// Bytes of each object.
    #[arg(long, env = "SLUICE_BENCH_OBJECT_BYTES", default_value_t = 4096)]
    pub object_bytes: usize,
    /// Number of sequential PUTs.
    #[arg(long, env = "SLUICE_BENCH_COUNT", default_value_t = 500)]
    pub count: usize,
    /// Print the result as JSON.
    #[arg(long, env = "SLUICE_BENCH_JSON")]
    pub json: bool,
}

/// The protocol a load runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// The HTTP API (JSON bodies), one request in flight per producer.
    Http,
    /// The Kafka protocol: one connection per producer and partition, to the
    /// partition's leader, with up to --max-in-flight requests pipelined.
    Kafka,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Http => "http",
            Mode::Kafka => "kafka",
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Protocol of the load.
    #[arg(long, env = "SLUICE_BENCH_MODE", value_enum, default_value_t = Mode::Http)]
    pub mode: Mode,
    /// Base URL of a node. Used in both modes: the topic is created over
    /// HTTP, and the node's /metrics give the WAL figures of the report.
    #[arg(long, env = "SLUICE_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Kafka listener to bootstrap from (--mode kafka).
    #[arg(long, env = "SLUICE_BENCH_BOOTSTRAP", default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Topic to use (created if missing).
    #[arg(long, env = "SLUICE_BENCH_TOPIC", default_value = "bench")]
    pub topic: String,
    /// Partitions of the topic when it is created (an existing topic keeps its own).
    #[arg(long, env = "SLUICE_BENCH_PARTITIONS", default_value_t = 1)]
    pub partitions: u32,
    /// Producers. HTTP: each is one client with one request in flight,
    /// writing to partition (its index mod partitions). Kafka: each has a
    /// connection to every partition's leader.
    #[arg(long, env = "SLUICE_BENCH_PRODUCERS", default_value_t = 1)]
    pub producers: usize,
    /// Bytes of each record's value (at least 16 for e2e, which writes the
    /// creation time into the value).
    #[arg(long, env = "SLUICE_BENCH_RECORD_BYTES", default_value_t = 100)]
    pub record_bytes: usize,
    /// Most records per request (a request goes out with fewer when
    /// --rate and --linger-ms say so).
    #[arg(long, env = "SLUICE_BENCH_BATCH", default_value_t = 1)]
    pub batch: usize,
    /// Seconds of load.
    #[arg(long, env = "SLUICE_BENCH_DURATION_SEC", default_value_t = 10)]
    pub duration_sec: u64,
    /// Records per second offered across all producers (0 = as fast as
    /// acknowledgements allow).
    #[arg(long, env = "SLUICE_BENCH_RATE", default_value_t = 0)]
    pub rate: u64,
    /// Kafka acks: all (or -1), 1 or 0. With 0 there is no answer, and
    /// latency is the time until the request was written to the socket.
    #[arg(long, env = "SLUICE_BENCH_ACKS", default_value = "all", value_parser = parse_acks, allow_hyphen_values = true)]
    pub acks: i16,
    /// Kafka: with --rate, how long a producer holds a record for more to
    /// join its request (like librdkafka's linger.ms).
    #[arg(long, env = "SLUICE_BENCH_LINGER_MS", default_value_t = 0)]
    pub linger_ms: u64,
    /// Kafka: requests in flight per connection.
    #[arg(long, env = "SLUICE_BENCH_MAX_IN_FLIGHT", default_value_t = 5)]
    pub max_in_flight: usize,
    /// Measure the floor on this store before the load: file:///PATH on the
    /// node's disk, or s3://bucket/prefix (with --s3-endpoint for an
    /// S3-compatible server). Latencies are then also reported as ratios.
    /// With --rate the floor's PUTs are paced like the load's requests
    /// (`floor.gap_ms` in the report; at most a second apart).
    #[arg(long, env = "SLUICE_BENCH_FLOOR_STORE")]
    pub floor_store: Option<String>,
    /// S3-compatible endpoint for an s3:// floor store (path-style requests).
    #[arg(long, env = "SLUICE_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// S3 region of an s3:// floor store.
    #[arg(long, env = "SLUICE_S3_REGION")]
    pub s3_region: Option<String>,
    /// Bytes of each floor object (default: the WAL segment that carries
    /// one request of --batch records alone).
    #[arg(long, env = "SLUICE_BENCH_FLOOR_OBJECT_BYTES")]
    pub floor_object_bytes: Option<usize>,
    /// Sequential floor PUTs.
    #[arg(long, env = "SLUICE_BENCH_FLOOR_COUNT", default_value_t = 200)]
    pub floor_count: usize,
    /// The node's process id: report its CPU seconds per MB appended and its
    /// peak resident set over the load (from /proc).
    #[arg(long, env = "SLUICE_BENCH_SERVER_PID")]
    pub server_pid: Option<u32>,
    /// Print the report as one JSON object instead of text.
    #[arg(long, env = "SLUICE_BENCH_JSON")]
    pub json: bool,
    /// Distinct record keys: every record carries one, each producer
    /// cycling through them from its own starting point (0 = records
    /// have no key). A compacted topic needs keys.
    #[arg(long, env = "SLUICE_BENCH_KEYS", default_value_t = 0)]
    pub keys: u64,
}

fn parse_acks(s: &str) -> Result<i16, String> {
    match s {
        "all" | "-1" => Ok(-1),
        "0" => Ok(0),
        "1" => Ok(1),
        other => Err(format!("acks must be all, -1, 0 or 1, not {other:?}")),
    }
}

impl BenchArgs {
    fn validate(&self, command: &str) -> anyhow::Result<()> {
        anyhow::ensure!(self.producers >= 1, "--producers must be at least 1");
        anyhow::ensure!(self.partitions >= 1, "--partitions must be at least 1");
        anyhow::ensure!(self.batch >= 1, "--batch must be at least 1");
        anyhow::ensure!(self.record_bytes >= 1, "--record-bytes must be at least 1");
        anyhow::ensure!(self.max_in_flight >= 1, "--max-in-flight must be at least 1");
        anyhow::ensure!(self.duration_sec >= 1, "--duration-sec must be at least 1");
        if command == "e2e" {
            anyhow::ensure!(
                self.record_bytes >= STAMP_LEN,
                "e2e writes the creation time into each value: --record-bytes must be at least {STAMP_LEN}"
            );
        }
        Ok(())
    }

    fn s3(&self) -> crate::store::s3::S3Options {
        crate::store::s3::S3Options {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            force_path_style: self.s3_endpoint.is_some(),
        }
    }
}

impl BenchCmd {
    pub async fn run(self) -> anyhow::Result<()> {
        if let BenchCmd::Floor(f) = &self {
            return floor::floor(f).await;
        }
        if let BenchCmd::Failover(f) = &self {
            return failover::run(f).await;
        }
        let json = match &self {
            BenchCmd::Produce(a) | BenchCmd::Consume(a) | BenchCmd::E2e(a) => a.json,
            BenchCmd::Floor(_) | BenchCmd::Failover(_) => unreachable!("handled above"),
        };
        let report = self.report().await?;
        if json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            print!("{}", report.text());
        }
        Ok(())
    }

    /// Runs a load (not `floor`) and returns its report.
    pub async fn report(self) -> anyhow::Result<Report> {
        let (command, args) = match self {
            BenchCmd::Produce(a) => ("produce", a),
            BenchCmd::Consume(a) => ("consume", a),
            BenchCmd::E2e(a) => ("e2e", a),
            BenchCmd::Floor(_) | BenchCmd::Failover(_) => anyhow::bail!("bench floor and failover have no load report"),
        };
        args.validate(command)?;
        LazyLock::force(&EPOCH);
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(args.producers + args.partitions as usize + 4)
            .build()?;
        let partitions = http::ensure_topic(&client, &args).await?;

        let floor = match &args.floor_store {
            Some(url) => {
                let bytes = args
                    .floor_object_bytes
                    .unwrap_or_else(|| floor::segment_bytes(args.record_bytes, args.batch));
                let gap = floor::paced_gap(args.rate, args.batch);
                eprintln!(
                    "measuring the floor: {} PUTs of {bytes} B to {url}{}",
                    args.floor_count,
                    gap.map(|g| format!(", {g:?} apart as the load's requests"))
                        .unwrap_or_default()
                );
                Some(floor::measure(url, &args.s3(), bytes, args.floor_count, gap).await?)
            }
            None => None,
        };

        let metrics_before = server::scrape(&client, &args.url).await;
        let proc_before = args.server_pid.map(server::sample).transpose()?;
        let rss = args.server_pid.map(server::RssWatch::start);

        let main = Recorder::new();
        let stop = Arc::new(AtomicBool::new(false));
        let latency_kind = match (command, args.mode, args.acks) {
            ("consume", _, _) => "fetch",
            ("e2e", _, _) => "e2e",
            (_, Mode::Kafka, 0) => "write",
            _ => "ack",
        };
        let total = Duration::from_secs(args.duration_sec);
        let bar = stats::progress(latency_kind, main.clone(), total, stop.clone());
        let started = Instant::now();
        let deadline = started + total;
        let mut ack_latency = None;
        let mut ack_requests = None;
        let elapsed = match command {
            "produce" => {
                produce(&args, partitions, main.clone(), false, deadline).await?;
                started.elapsed()
            }
            "consume" => {
                consume(&args, partitions, main.clone(), deadline).await?;
                started.elapsed()
            }
            _ => {
                let acks = Recorder::new();
                let elapsed = e2e(&args, partitions, main.clone(), acks.clone(), started, deadline).await?;
                let t = acks.totals();
                (ack_latency, ack_requests) = (Some(t.latency_ms), Some(t.requests));
                elapsed
            }
        };
        stop.store(true, Ordering::Relaxed);
        let _ = bar.await;

        // Producer settings of the Kafka client; a consumer has none.
        let kafka = args.mode == Mode::Kafka && command != "consume";
        let settings = report::Settings {
            command,
            mode: args.mode.name(),
            topic: args.topic.clone(),
            partitions,
            producers: if command == "consume" { 0 } else { args.producers },
            record_bytes: args.record_bytes,
            batch: args.batch,
            rate: args.rate,
            acks: kafka.then_some(args.acks),
            linger_ms: kafka.then_some(args.linger_ms),
            max_in_flight: kafka.then_some(args.max_in_flight),
            latency_kind,
        };
        let mut report = Report::new(settings, main.totals(), elapsed.as_secs_f64(), ack_latency);
        if let Some(r) = ack_requests {
            report.requests = r; // e2e: the producers' requests (the consumers' are long polls)
        }
        if let Some(f) = floor {
            report = report.with_floor(f);
        }
        if let (Some(pid), Some(before), Some(rss)) = (args.server_pid, proc_before, rss) {
            let peak = rss.finish().await;
            let after = server::sample(pid)?;
            report.server = Some(server::server_stats(
                pid,
                before,
                after,
                peak,
                report.bytes,
                report.duration_sec,
            ));
        }
        if let (Some(before), Some(after)) = (metrics_before, server::scrape(&client, &args.url).await) {
            let (b, a) = (server::parse_metrics(&before), server::parse_metrics(&after));
            report.wal = Some(server::wal_stats(b, a));
            report.compaction = server::compaction_stats(b, a);
            let requests = prices::parse_requests(&after).since(&prices::parse_requests(&before));
            report.cost = prices::Cost::of(requests, report.bytes);
        }
        Ok(report)
    }
}

async fn produce(
    args: &BenchArgs,
    partitions: u32,
    rec: Arc<Recorder>,
    stamp: bool,
    deadline: Instant,
) -> anyhow::Result<()> {
    match args.mode {
        Mode::Http => http::produce(args, partitions, rec, stamp, deadline).await,
        Mode::Kafka => kafka::produce(args, rec, stamp, deadline).await,
    }
}

async fn consume(args: &BenchArgs, partitions: u32, rec: Arc<Recorder>, deadline: Instant) -> anyhow::Result<()> {
    match args.mode {
        Mode::Http => http::consume(args, partitions, rec, deadline).await,
        Mode::Kafka => kafka::consume(args, rec, deadline).await,
    }
}

/// How long consumers get, after the producers stop, to receive what was
/// acknowledged.
const E2E_DRAIN: Duration = Duration::from_secs(5);

/// Tail consumers start at each partition's end, then the producers run;
/// returns the producers' elapsed time.
async fn e2e(
    args: &BenchArgs,
    partitions: u32,
    received: Arc<Recorder>,
    acks: Arc<Recorder>,
    started: Instant,
    deadline: Instant,
) -> anyhow::Result<Duration> {
    let stop = Arc::new(AtomicBool::new(false));
    let consumers = match args.mode {
        Mode::Http => http::tail(args, partitions, received.clone(), stop.clone()).await?,
        Mode::Kafka => kafka::tail(args, received.clone(), stop.clone()).await?,
    };
    produce(args, partitions, acks.clone(), true, deadline).await?;
    let elapsed = started.elapsed();
    let drain = Instant::now() + E2E_DRAIN;
    while received.records() < acks.records() && Instant::now() < drain {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for c in consumers {
        let _ = c.await;
    }
    Ok(elapsed)
}

/// Waits until a record is due and returns the instant its latency counts
/// from: `due` itself when the producer is already late (the server held it
/// up, and counting from `due` keeps that in the latency), or the moment the
/// timer woke when the producer had to wait (tokio's timer wakes up to a
/// millisecond late: the client's own delay, not the server's).
async fn wait_due(due: Instant) -> Instant {
    if Instant::now() >= due {
        return due;
    }
    tokio::time::sleep_until(due.into()).await;
    Instant::now()
}

// ------------------------------------------------------------ record values

/// The instant e2e creation times count from (forced before any load).
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Bytes at the start of an e2e value that carry its creation time.
const STAMP_LEN: usize = 16;

/// A record value of `len` ASCII bytes (so it is also a JSON string as is).
/// With `created`, the first 16 are that instant as hex nanoseconds since
/// [`EPOCH`], which [`created_at`] reads back in the consumer.
fn record_value(len: usize, created: Option<Instant>) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(STAMP_LEN));
    if let Some(t) = created {
        let ns = u64::try_from(t.saturating_duration_since(*EPOCH).as_nanos()).unwrap_or(u64::MAX);
        v.extend_from_slice(format!("{ns:016x}").as_bytes());
    }
    v.resize(len, b'x');
    v
}

/// The keys one producer writes: `k` and a zero-padded number, cycling
/// through `keys` of them from producer `p`'s own starting point so that
/// producers do not write the same key at the same moment.
#[derive(Debug, Clone)]
struct KeyCycle {
    keys: u64,
    next: u64,
}

impl KeyCycle {
    /// `None` when records have no key (`keys` = 0).
    fn new(keys: u64, producer: usize, producers: usize) -> Option<Self> {
        (keys > 0).then(|| KeyCycle {
            keys,
            next: keys * producer as u64 / producers.max(1) as u64,
        })
    }

    fn next_key(&mut self) -> Bytes {
        let k = Bytes::from(format!("k{:08}", self.next));
        self.next = (self.next + 1) % self.keys;
        k
    }
}

/// The creation time [`record_value`] wrote into a value.
fn created_at(value: &[u8]) -> Option<Instant> {
    let hex = std::str::from_utf8(value.get(..STAMP_LEN)?).ok()?;
    let ns = u64::from_str_radix(hex, 16).ok()?;
    Some(*EPOCH + Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn producers_cycle_through_the_keys_from_their_own_start() {
        assert!(KeyCycle::new(0, 0, 4).is_none());
        let mut a = KeyCycle::new(10, 0, 2).unwrap();
        let mut b = KeyCycle::new(10, 1, 2).unwrap();
        let a_keys: Vec<_> = (0..11).map(|_| a.next_key()).collect();
        assert_eq!(a_keys[0], Bytes::from("k00000000"));
        assert_eq!(a_keys[9], Bytes::from("k00000009"));
        assert_eq!(a_keys[10], a_keys[0], "the cycle wraps");
        assert_eq!(b.next_key(), Bytes::from("k00000005"));
    }

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: BenchCmd,
    }

    fn parse(args: &[&str]) -> BenchArgs {
        let mut argv = vec!["x"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv).unwrap().cmd {
            BenchCmd::Produce(a) | BenchCmd::Consume(a) | BenchCmd::E2e(a) => a,
            BenchCmd::Floor(_) | BenchCmd::Failover(_) => panic!("not a load"),
        }
    }

    #[test]
    fn values_have_the_asked_size_and_carry_their_creation_time() {
        LazyLock::force(&EPOCH);
        assert_eq!(record_value(100, None).len(), 100);
        assert_eq!(record_value(4, None), b"xxxx");
        let t = Instant::now();
        let v = record_value(1024, Some(t));
        assert_eq!(v.len(), 1024);
        assert!(v.is_ascii());
        let back = created_at(&v).unwrap();
        assert!(back <= t && t - back < Duration::from_micros(1), "nanosecond precision");
        assert_eq!(created_at(b"xxxxxxxxxxxxxxxxxxxx"), None);
        assert_eq!(created_at(b"short"), None);
    }

    #[test]
    fn flags_parse_with_their_defaults() {
        let a = parse(&["produce"]);
        assert_eq!(
            (a.mode, a.acks, a.linger_ms, a.max_in_flight, a.batch),
            (Mode::Http, -1, 0, 5, 1)
        );
        let a = parse(&["produce", "--mode", "kafka", "--acks", "1", "--rate", "2000"]);
        assert_eq!((a.mode, a.acks, a.rate), (Mode::Kafka, 1, 2000));
        assert_eq!(parse(&["e2e", "--acks", "-1"]).acks, -1);
        assert_eq!(parse(&["e2e", "--acks", "0"]).acks, 0);
        assert!(Cli::try_parse_from(["x", "produce", "--acks", "2"]).is_err());
        assert!(Cli::try_parse_from(["x", "produce", "--mode", "grpc"]).is_err());
    }

    #[test]
    fn nonsense_settings_are_refused_before_any_load() {
        assert!(parse(&["produce"]).validate("produce").is_ok());
        assert!(parse(&["produce", "--batch", "0"]).validate("produce").is_err());
        assert!(parse(&["produce", "--producers", "0"]).validate("produce").is_err());
        assert!(parse(&["e2e", "--record-bytes", "8"]).validate("e2e").is_err());
        assert!(parse(&["produce", "--record-bytes", "8"]).validate("produce").is_ok());
    }
}
