//! `sluice bench`: a load generator over the HTTP API. It measures what a
//! client sees: records per second and the latency from sending an append to
//! its acknowledgement (durable in the WAL), or from an append to the moment
//! a long-polling consumer receives it (`e2e`).

use clap::{Args, Subcommand};

mod floor;
mod http;
mod report;

pub use report::{Percentiles, Report};

#[derive(Debug, Clone, Subcommand)]
pub enum BenchCmd {
    /// Appends from concurrent producers; reports throughput and ack latency.
    Produce(BenchArgs),
    /// Reads a topic from the beginning as fast as possible.
    Consume(BenchArgs),
    /// Producers and a long-polling consumer; reports append-to-receive latency.
    E2e(BenchArgs),
    /// The floor: bare create-if-absent PUTs of one size to a store, the
    /// least any acknowledged append can cost.
    Floor(FloorArgs),
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

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Base URL of a node.
    #[arg(long, env = "SLUICE_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Topic to use (created if missing).
    #[arg(long, env = "SLUICE_BENCH_TOPIC", default_value = "bench")]
    pub topic: String,
    /// Partitions of the topic when it is created.
    #[arg(long, env = "SLUICE_BENCH_PARTITIONS", default_value_t = 1)]
    pub partitions: u32,
    /// Concurrent producers (each waits for its ack before the next request).
    #[arg(long, env = "SLUICE_BENCH_PRODUCERS", default_value_t = 1)]
    pub producers: usize,
    /// Bytes of each record's value.
    #[arg(long, env = "SLUICE_BENCH_RECORD_BYTES", default_value_t = 100)]
    pub record_bytes: usize,
    /// Records per request.
    #[arg(long, env = "SLUICE_BENCH_BATCH", default_value_t = 1)]
    pub batch: usize,
    /// Seconds to run.
    #[arg(long, env = "SLUICE_BENCH_DURATION_SEC", default_value_t = 10)]
    pub duration_sec: u64,
    /// Total requests per second across producers (0 = as fast as acks allow).
    #[arg(long, env = "SLUICE_BENCH_RATE", default_value_t = 0)]
    pub rate: u64,
    /// Print the result as one JSON object instead of text.
    #[arg(long, env = "SLUICE_BENCH_JSON")]
    pub json: bool,
}

impl BenchCmd {
    pub async fn run(self) -> anyhow::Result<()> {
        if let BenchCmd::Floor(f) = &self {
            return floor::floor(f).await;
        }
        let (mode, args) = match &self {
            BenchCmd::Produce(a) => ("produce", a),
            BenchCmd::Consume(a) => ("consume", a),
            BenchCmd::E2e(a) => ("e2e", a),
            BenchCmd::Floor(_) => unreachable!("handled above"),
        };
        let report = match self {
            BenchCmd::Produce(ref a) => http::produce(a).await?,
            BenchCmd::Consume(ref a) => http::consume(a).await?,
            BenchCmd::E2e(ref a) => http::e2e(a).await?,
            BenchCmd::Floor(_) => unreachable!("handled above"),
        };
        if args.json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            let l = &report.latency_ms;
            println!(
                "{mode}: {} records in {:.1}s = {:.0} records/s ({:.2} MiB/s), {} errors {:?}; latency ms p50 {:.2} p90 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}",
                report.records, report.duration_sec, report.records_per_sec, report.mib_per_sec, report.errors, report.errors_by_status, l.p50, l.p90, l.p99, l.p999, l.max
            );
        }
        Ok(())
    }
}
