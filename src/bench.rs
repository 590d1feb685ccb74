//! `sluice bench`: a load generator over the HTTP API. It measures what a
//! client sees: records per second and the latency from sending an append to
//! its acknowledgement (durable in the WAL), or from an append to the moment
//! a long-polling consumer receives it (`e2e`).

use clap::{Args, Subcommand};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// Failover, clean hand-off and WAL recovery times on a cluster of child `sluice serve` processes.
    Failover(crate::bench_failover::FailoverArgs),
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

impl BenchCmd {
    pub async fn run(self) -> anyhow::Result<()> {
        if let BenchCmd::Floor(f) = &self {
            return floor(f).await;
        }
        if let BenchCmd::Failover(f) = &self {
            return crate::bench_failover::run(f).await;
        }
        let (mode, args) = match &self {
            BenchCmd::Produce(a) => ("produce", a),
            BenchCmd::Consume(a) => ("consume", a),
            BenchCmd::E2e(a) => ("e2e", a),
            BenchCmd::Floor(_) | BenchCmd::Failover(_) => unreachable!("handled above"),
        };
        let report = match self {
            BenchCmd::Produce(ref a) => produce(a).await?,
            BenchCmd::Consume(ref a) => consume(a).await?,
            BenchCmd::E2e(ref a) => e2e(a).await?,
            BenchCmd::Floor(_) | BenchCmd::Failover(_) => unreachable!("handled above"),
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

async fn ensure_topic(client: &reqwest::Client, args: &BenchArgs) -> anyhow::Result<()> {
    let resp = client
        .post(format!("{}/v1/topics", args.url))
        .json(&serde_json::json!({"name": args.topic, "partitions": args.partitions}))
        .send()
        .await?;
    if !(resp.status().is_success() || resp.status() == reqwest::StatusCode::CONFLICT) {
        anyhow::bail!(
            "creating topic {}: {} {}",
            args.topic,
            resp.status(),
            resp.text().await.unwrap_or_default()
        );
    }
    // Wait for placement: every partition open on some node.
    for _ in 0..100 {
        let d: serde_json::Value = client
            .get(format!("{}/v1/topics/{}", args.url, args.topic))
            .send()
            .await?
            .json()
            .await?;
        if d["partition_info"]
            .as_array()
            .is_some_and(|ps| ps.iter().all(|p| p["state"] == "open"))
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("topic {} was not placed in 10 s", args.topic)
}

/// Live progress on stderr until `shared.stop` is set.
fn progress(shared: Arc<Shared>, total: Duration) -> tokio::task::JoinHandle<()> {
    let start = Instant::now();
    tokio::spawn(async move {
        while !shared.stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let e = start.elapsed().as_secs_f64().max(0.001);
            let done = shared.done.load(Ordering::Relaxed);
            eprint!(
                "\r[{e:>5.1}/{:.0}s] {done} records, {:.0}/s   ",
                total.as_secs_f64(),
                done as f64 / e
            );
        }
        eprintln!();
    })
}

async fn floor(args: &FloorArgs) -> anyhow::Result<()> {
    let s3 = crate::store::s3::S3Options {
        endpoint: args.s3_endpoint.clone(),
        region: args.s3_region.clone(),
        force_path_style: args.s3_endpoint.is_some(),
    };
    let store = crate::store::open_url(&args.store, &s3).await?;
    let body = bytes::Bytes::from(vec![b'f'; args.object_bytes]);
    let run = format!("bench-floor/{:016x}", rand::random::<u64>());
    let mut lat = Vec::with_capacity(args.count);
    for i in 0..args.count {
        let t = Instant::now();
        store.put_if_absent(&format!("{run}/{i:08}"), body.clone()).await?;
        lat.push(t.elapsed());
    }
    for i in 0..args.count {
        store.delete(&format!("{run}/{i:08}")).await?;
    }
    let p = Percentiles::of(&mut lat);
    if args.json {
        println!(
            "{}",
            serde_json::json!({"mode": "floor", "object_bytes": args.object_bytes, "count": args.count, "latency_ms": p})
        );
    } else {
        println!(
            "floor: {} create-if-absent PUTs of {} bytes to {}: latency ms p50 {:.2} p90 {:.2} p99 {:.2} max {:.2}",
            args.count, args.object_bytes, args.store, p.p50, p.p90, p.p99, p.max
        );
    }
    Ok(())
}

fn record_value(size: usize, seq: u64) -> String {
    let mut v = format!("{seq:016x}");
    while v.len() < size {
        v.push('x');
    }
    v.truncate(size.max(1));
    v
}

struct Shared {
    done: AtomicU64,
    stop: AtomicBool,
    errors: AtomicU64,
    errors_by_status: Mutex<std::collections::BTreeMap<String, u64>>,
    latencies: Mutex<Vec<Duration>>,
}

async fn produce(args: &BenchArgs) -> anyhow::Result<Report> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.producers.max(1))
        .build()?;
    ensure_topic(&client, args).await?;
    let shared = Arc::new(Shared {
        done: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        errors: AtomicU64::new(0),
        errors_by_status: Mutex::default(),
        latencies: Mutex::new(Vec::new()),
    });
    let total = Duration::from_secs(args.duration_sec);
    let bar = progress(shared.clone(), total);
    let started = Instant::now();
    let per_producer_interval =
        (args.rate > 0).then(|| Duration::from_secs_f64(args.producers as f64 / args.rate as f64));
    let mut tasks = Vec::new();
    for p in 0..args.producers {
        let (client, shared, args) = (client.clone(), shared.clone(), args.clone());
        tasks.push(tokio::spawn(async move {
            let url = format!("{}/v1/topics/{}/records", args.url, args.topic);
            let mut seq = 0u64;
            let mut next_send = Instant::now();
            while started.elapsed() < total {
                if let Some(iv) = per_producer_interval {
                    tokio::time::sleep_until(next_send.into()).await;
                    next_send += iv;
                }
                let records: Vec<serde_json::Value> = (0..args.batch)
                    .map(|_| {
                        seq += 1;
                        serde_json::json!({"value": record_value(args.record_bytes, seq), "partition": (p as u32) % args.partitions})
                    })
                    .collect();
                let t = Instant::now();
                let status = match client.post(&url).json(&serde_json::json!({"records": records})).send().await {
                    Ok(r) if r.status().is_success() => None,
                    Ok(r) => Some(r.status().as_u16().to_string()),
                    Err(_) => Some("connect".to_string()),
                };
                let took = t.elapsed();
                if let Some(status) = status {
                    *shared.errors_by_status.lock().unwrap().entry(status).or_default() += 1;
                    shared.errors.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                } else {
                    shared.done.fetch_add(args.batch as u64, Ordering::Relaxed);
                    shared.latencies.lock().unwrap().push(took);
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    shared.stop.store(true, Ordering::Relaxed);
    bar.await?;
    let elapsed = started.elapsed().as_secs_f64();
    let mut lat = std::mem::take(&mut *shared.latencies.lock().unwrap());
    let records = shared.done.load(Ordering::Relaxed);
    let errors_by_status = std::mem::take(&mut *shared.errors_by_status.lock().unwrap());
    Ok(Report {
        mode: "produce".into(),
        producers: args.producers,
        record_bytes: args.record_bytes,
        batch: args.batch,
        duration_sec: elapsed,
        requests: lat.len() as u64,
        records,
        errors: shared.errors.load(Ordering::Relaxed),
        errors_by_status,
        records_per_sec: records as f64 / elapsed,
        mib_per_sec: records as f64 * args.record_bytes as f64 / elapsed / (1 << 20) as f64,
        latency_ms: Percentiles::of(&mut lat),
    })
}

async fn consume(args: &BenchArgs) -> anyhow::Result<Report> {
    let client = reqwest::Client::new();
    let started = Instant::now();
    let total = Duration::from_secs(args.duration_sec);
    let mut records = 0u64;
    let mut bytes = 0u64;
    let mut lat = Vec::new();
    for p in 0..args.partitions {
        let mut offset = 0u64;
        while started.elapsed() < total {
            let url = format!(
                "{}/v1/topics/{}/partitions/{p}/records?offset={offset}&limit=10000",
                args.url, args.topic
            );
            let t = Instant::now();
            let body: serde_json::Value = client.get(&url).send().await?.error_for_status()?.json().await?;
            lat.push(t.elapsed());
            let got = body["records"].as_array().map_or(0, |a| a.len());
            if got == 0 {
                break;
            }
            records += got as u64;
            bytes += body["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["value"].as_str().map_or(0, str::len) as u64)
                .sum::<u64>();
            offset = body["next_offset"].as_u64().unwrap_or(offset);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok(Report {
        mode: "consume".into(),
        producers: 0,
        record_bytes: args.record_bytes,
        batch: 10_000,
        duration_sec: elapsed,
        requests: lat.len() as u64,
        records,
        errors: 0,
        errors_by_status: Default::default(),
        records_per_sec: records as f64 / elapsed,
        mib_per_sec: bytes as f64 / elapsed / (1 << 20) as f64,
        latency_ms: Percentiles::of(&mut lat),
    })
}

async fn e2e(args: &BenchArgs) -> anyhow::Result<Report> {
    let client = reqwest::Client::new();
    ensure_topic(&client, args).await?;
    let tail: serde_json::Value = client
        .get(format!(
            "{}/v1/topics/{}/partitions/0/records?offset=-1",
            args.url, args.topic
        ))
        .send()
        .await?
        .json()
        .await?;
    let mut offset = tail["high_watermark"].as_u64().unwrap_or(0);
    let started = Instant::now();
    let total = Duration::from_secs(args.duration_sec);
    let mut lat = Vec::new();
    let mut errors = 0;
    // One record at a time: send, then long-poll until it arrives.
    while started.elapsed() < total {
        let t = Instant::now();
        let send = client
            .post(format!("{}/v1/topics/{}/partitions/0/records", args.url, args.topic))
            .json(&serde_json::json!({"records": [{"value": record_value(args.record_bytes, offset)}]}));
        let poll = client.get(format!(
            "{}/v1/topics/{}/partitions/0/records?offset={offset}&wait_ms=5000",
            args.url, args.topic
        ));
        let (sent, got) = tokio::join!(send.send(), poll.send());
        let ok = sent.is_ok_and(|r| r.status().is_success());
        match got {
            Ok(r) if ok && r.status().is_success() => {
                let body: serde_json::Value = r.json().await?;
                if body["records"].as_array().is_some_and(|a| !a.is_empty()) {
                    lat.push(t.elapsed());
                    offset = body["next_offset"].as_u64().unwrap_or(offset + 1);
                    continue;
                }
                errors += 1;
            }
            _ => errors += 1,
        }
        let hw: serde_json::Value = client
            .get(format!(
                "{}/v1/topics/{}/partitions/0/records?offset=-1",
                args.url, args.topic
            ))
            .send()
            .await?
            .json()
            .await?;
        offset = hw["high_watermark"].as_u64().unwrap_or(offset);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let records = lat.len() as u64;
    Ok(Report {
        mode: "e2e".into(),
        producers: 1,
        record_bytes: args.record_bytes,
        batch: 1,
        duration_sec: elapsed,
        requests: records,
        records,
        errors,
        errors_by_status: Default::default(),
        records_per_sec: records as f64 / elapsed,
        mib_per_sec: records as f64 * args.record_bytes as f64 / elapsed / (1 << 20) as f64,
        latency_ms: Percentiles::of(&mut lat),
    })
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

    #[test]
    fn record_values_have_the_asked_size() {
        assert_eq!(record_value(100, 7).len(), 100);
        assert_eq!(record_value(4, 7).len(), 4);
    }
}
