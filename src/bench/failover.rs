//! `sluice bench failover`: how long a partition cannot take appends when its
//! owner dies (`kill -9`) or shuts down cleanly (SIGTERM), and how long a node
//! takes to recover a WAL full of unflushed data, all measured on real
//! `sluice serve` child processes of this same executable.
//!
//! # Layout
//!
//! - [`FailoverArgs`]: the flags; serve flags pass through to every child.
//! - `Proc` / `Cluster`: child processes sharing one data directory (or the
//!   stores the pass-through flags name), on free loopback ports.
//! - `Load`: steady single-record appends through every live node while the
//!   cluster scenarios run; every acknowledged record is read back at the end.
//! - `kill9` / `sigterm`: rounds of stopping the owner of a partition and
//!   timing the first successful append to each partition it owned, through
//!   a survivor (HTTP forwards to whichever node owns it by then).
//! - `recovery`: one node with flushing held back fills its WAL, is killed,
//!   and is restarted; the restart is timed until the partitions serve again
//!   and every acknowledged record is checked.
//! - [`FailoverReport`]: the result, printed as a table or as JSON.

use super::ports::free_port;
use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOPIC: &str = "failover";
const RECOVERY_TOPIC: &str = "recovery";
/// Each attempt of a probe append gives up after this long (a forwarded
/// request to a dead owner normally fails at once: connection refused).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between failed probe attempts.
const PROBE_PAUSE: Duration = Duration::from_millis(20);
/// Flags the bench sets for each child itself.
const RESERVED: [&str; 4] = ["--node-id", "--data-dir", "--http-addr", "--kafka-addr"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// `kill -9` of a partition's owner: failover by node timeout and WAL takeover.
    Kill9,
    /// SIGTERM of a partition's owner: clean hand-off.
    Sigterm,
    /// One node with a full WAL killed and restarted: WAL recovery time.
    Recovery,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Victim {
    /// The owner of partition `round % partitions`.
    Owner,
    /// The lease holder (the node that fences, takes over and places), stopped
    /// with a partition it owns as the round's target.
    LeaseHolder,
}

#[derive(Debug, Clone, Args)]
pub struct FailoverArgs {
    /// Scenarios to run, comma-separated.
    #[arg(
        long,
        env = "SLUICE_BENCH_FAILOVER_SCENARIOS",
        value_delimiter = ',',
        default_value = "kill9,sigterm,recovery"
    )]
    pub scenarios: Vec<Scenario>,
    /// Nodes of the cluster for kill9 and sigterm (at least 2).
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_NODES", default_value_t = 3)]
    pub nodes: usize,
    /// Partitions of the topic for kill9 and sigterm.
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_PARTITIONS", default_value_t = 6)]
    pub partitions: u32,
    /// Rounds of kill9 and of sigterm each; the stopped node is restarted between rounds.
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_ROUNDS", default_value_t = 5)]
    pub rounds: usize,
    /// Which node each round of kill9 and sigterm stops.
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_VICTIM", value_enum, default_value = "owner")]
    pub victim: Victim,
    /// Background single-record appends per second (across partitions, through every live node)
    /// during kill9 and sigterm; each acknowledged one is read back at the end. 0 = none.
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_RATE", default_value_t = 100)]
    pub rate: u64,
    /// Give up on a partition that takes no append this many seconds after the event.
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_GIVE_UP_SEC", default_value_t = 120)]
    pub give_up_sec: u64,
    /// MiB of record values left in the WAL for the recovery scenario.
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_RECOVERY_MIB", default_value_t = 256)]
    pub recovery_mib: u64,
    /// Bytes of each record's value in the recovery scenario.
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_RECOVERY_RECORD_BYTES", default_value_t = 1000)]
    pub recovery_record_bytes: usize,
    /// Records per append request in the recovery scenario.
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_RECOVERY_BATCH", default_value_t = 1000)]
    pub recovery_batch: usize,
    /// Concurrent producers filling the WAL in the recovery scenario.
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_RECOVERY_PRODUCERS", default_value_t = 4)]
    pub recovery_producers: usize,
    /// Partitions of the topic in the recovery scenario.
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_RECOVERY_PARTITIONS", default_value_t = 1)]
    pub recovery_partitions: u32,
    /// Parent of the run's directory (node data and logs). Default: the system temp dir.
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Keep the run's directory afterwards (it is always kept when the run fails).
    #[arg(long, env = "SLUICE_BENCH_FAILOVER_KEEP_DATA_DIR")]
    pub keep_data_dir: bool,
    /// One more flag for every `sluice serve` child, e.g. `--serve-arg=--node-timeout-sec=4`
    /// (repeatable). A flag given here replaces the bench's default for it. `{run}` in a value
    /// becomes a name unique to the run and scenario, e.g. `--object-store=s3://bucket/{run}`.
    #[arg(long = "serve-arg", allow_hyphen_values = true, value_name = "FLAG")]
    pub serve_args: Vec<String>,
    /// More serve flags, after `--`.
    #[arg(last = true, value_name = "SERVE_FLAGS")]
    pub serve_rest: Vec<String>,
    /// Print the result as one JSON object instead of tables.
    #[arg(long, env = "SLUICE_BENCH_JSON")]
    pub json: bool,
}

// ---------------------------------------------------------------- report --

#[derive(Debug, Clone, Serialize)]
pub struct FailoverReport {
    pub mode: &'static str,
    pub settings: Settings,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill9: Option<EventReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sigterm: Option<EventReport>,
    /// The background load of kill9 and sigterm, and its read-back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub cores: usize,
    pub nodes: usize,
    pub partitions: u32,
    pub rounds: usize,
    pub victim: Victim,
    pub load_rate: u64,
    pub heartbeat_interval_sec: u64,
    pub node_timeout_sec: u64,
    pub lease_timeout_sec: u64,
    pub shutdown_drain_sec: u64,
    pub object_store: String,
    pub wal_store: String,
    pub metadata: String,
    /// Flags of the cluster's children (besides id, data dir and addresses).
    pub serve_flags: Vec<String>,
    /// Flags of the recovery scenario's child.
    pub recovery_serve_flags: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub n: usize,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    fn of(samples: impl IntoIterator<Item = f64>) -> Self {
        let mut v: Vec<f64> = samples.into_iter().collect();
        if v.is_empty() {
            return Self::default();
        }
        v.sort_by(f64::total_cmp);
        Self {
            n: v.len(),
            min_ms: v[0],
            // The same rank as bench's percentiles: ceil(n / 2).
            p50_ms: v[v.len().div_ceil(2) - 1],
            max_ms: v[v.len() - 1],
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct EventReport {
    pub rounds: Vec<Round>,
    /// Event → first successful append to the round's target partition on its new owner.
    pub target_ms: Summary,
    /// Event → every partition the stopped node owned has taken an append on its new owner.
    pub all_partitions_ms: Summary,
    /// Per round, the longest time one of those partitions took no append.
    pub unavailable_ms: Summary,
    /// Partitions that took no append within --give-up-sec.
    pub gave_up: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Round {
    pub round: usize,
    /// The stopped node: the owner of `target_partition` at the time.
    pub node: String,
    pub node_held_lease: bool,
    pub target_partition: u32,
    /// Event → first successful append, per partition the node owned (None: gave up).
    pub partitions_ms: BTreeMap<u32, Option<f64>>,
    pub target_ms: Option<f64>,
    pub all_partitions_ms: Option<f64>,
    /// Event → the last append the stopped node itself acknowledged, per partition where it
    /// acknowledged one after the event (a clean shutdown serves until it releases a stream).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub old_owner_last_ms: BTreeMap<u32, f64>,
    /// Longest time one of its partitions took no append: from the event or from the stopped
    /// node's last acknowledged append, to the new owner's first.
    pub unavailable_ms: Option<f64>,
    /// SIGTERM → process exit (sigterm only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub rate: u64,
    /// Acknowledged appends (background load and probes).
    pub acked: usize,
    pub failed: u64,
    /// Records read back from all partitions.
    pub read_back: usize,
    /// Acknowledged records missing or changed.
    pub lost: usize,
    /// Every partition's offsets run 0, 1, 2, ... without a gap.
    pub offsets_dense: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RecoveryReport {
    pub partitions: u32,
    pub record_bytes: usize,
    pub records_acked: u64,
    /// Bytes of acknowledged record values (what the per-GiB figures scale by).
    pub bytes_acked: u64,
    pub write_sec: f64,
    /// The node's `sluice_buffered_bytes` gauge just before the kill: unflushed data.
    pub buffered_bytes_at_kill: Option<f64>,
    /// Bytes flushed to data objects before the kill (0: everything was only in the WAL).
    pub flushed_bytes_before_kill: Option<f64>,
    /// WAL objects and their bytes at the kill, when the WAL is on the local filesystem.
    pub wal_objects_at_kill: Option<u64>,
    pub wal_bytes_at_kill: Option<u64>,
    /// Restarted process → `/ready` answers 200.
    pub ready_ms: f64,
    /// The new incarnation's own measure of its WAL takeover (`sluice_wal_takeover_seconds`).
    pub takeover_ms: Option<f64>,
    /// The "WAL takeover finished" log line: segments read, records replayed.
    pub takeover_segments: Option<u64>,
    pub takeover_records: Option<u64>,
    /// Restarted process → every partition has taken an append.
    pub first_append_ms: f64,
    /// Restarted process → the last acknowledged record of every partition is readable.
    pub read_end_ms: f64,
    /// `kill -9` → the restarted node serves (append and read at the end).
    pub kill_to_serving_ms: f64,
    pub takeover_sec_per_gib: Option<f64>,
    pub serving_sec_per_gib: f64,
    /// Reading every record back after recovery.
    pub read_back_sec: f64,
    /// Chunk reads that missed the node's read cache during the reads after the restart.
    pub read_cache_misses: Option<f64>,
    pub records_read: u64,
    pub lost: u64,
    pub offsets_dense: bool,
    /// The first append after recovery landed right after the last acknowledged record.
    pub appends_continue_at_end: bool,
}

// ------------------------------------------------------------- processes --

/// One `sluice serve` child; keeps its id, directory and ports across restarts.
struct Proc {
    id: String,
    dir: PathBuf,
    http_port: u16,
    kafka_port: u16,
    url: String,
    child: Option<tokio::process::Child>,
}

impl Proc {
    fn new(id: &str, dir: &Path) -> anyhow::Result<Self> {
        let http_port = free_port()?;
        Ok(Self {
            id: id.to_string(),
            dir: dir.to_path_buf(),
            http_port,
            kafka_port: free_port()?,
            url: format!("http://127.0.0.1:{http_port}"),
            child: None,
        })
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.id))
    }

    fn spawn(&mut self, flags: &[String]) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())?;
        let child = tokio::process::Command::new(std::env::current_exe()?)
            .arg("serve")
            .args(["--node-id", &self.id])
            .arg("--data-dir")
            .arg(&self.dir)
            .args(["--http-addr", &format!("127.0.0.1:{}", self.http_port)])
            .args(["--kafka-addr", &format!("127.0.0.1:{}", self.kafka_port)])
            .args(flags)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()?;
        self.child = Some(child);
        Ok(())
    }

    fn pid(&self) -> Option<i32> {
        self.child.as_ref().and_then(|c| c.id()).map(|p| p as i32)
    }

    /// SIGKILL and reap.
    async fn kill9(&mut self) -> anyhow::Result<()> {
        if let Some(mut c) = self.child.take() {
            c.start_kill()?;
            c.wait().await?;
        }
        Ok(())
    }

    fn sigterm(&self) {
        if let Some(pid) = self.pid() {
            // SAFETY: sending a signal to our own child, which we have not reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }

    async fn wait_ready(&mut self, client: &reqwest::Client, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                anyhow::bail!(
                    "node {} exited ({status}); log {}:\n{}",
                    self.id,
                    self.log_path().display(),
                    self.log_tail()
                );
            }
            let ready = client
                .get(format!("{}/ready", self.url))
                .timeout(Duration::from_secs(1))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!("node {} not ready in {timeout:?}; log:\n{}", self.id, self.log_tail());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

/// Serve flags: the bench's defaults for flags the pass-through list does not
/// set, then the pass-through list.
fn with_defaults(passed: &[String], defaults: &[(&str, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (flag, value) in defaults {
        let eq = format!("{flag}=");
        if !passed.iter().any(|a| a == flag || a.starts_with(&eq)) {
            out.push(flag.to_string());
            out.push(value.clone());
        }
    }
    out.extend(passed.iter().cloned());
    out
}

/// Parse and validate serve flags as a child would see them (with
/// placeholder id, directory and addresses), so a bad flag fails before
/// anything is started.
fn validate_flags(flags: &[String], dir: &Path) -> anyhow::Result<(crate::config::ServeArgs, crate::config::Config)> {
    let mut all: Vec<String> = vec![
        "--node-id".into(),
        "bench".into(),
        "--data-dir".into(),
        dir.display().to_string(),
        "--http-addr".into(),
        "127.0.0.1:1".into(),
        "--kafka-addr".into(),
        "127.0.0.1:2".into(),
    ];
    all.extend(flags.iter().cloned());
    let args = crate::config::ServeArgs::parse_from(all).map_err(|e| anyhow::anyhow!("serve flags {flags:?}: {e}"))?;
    let config = args
        .validate()
        .map_err(|e| anyhow::anyhow!("serve flags {flags:?}: {e}"))?;
    Ok((args, config))
}

/// Nodes of one scenario, sharing `dir`.
struct Cluster {
    nodes: Vec<Proc>,
    flags: Vec<String>,
    client: reqwest::Client,
}

impl Cluster {
    async fn start(ids: &[String], dir: &Path, flags: Vec<String>, client: &reqwest::Client) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut nodes = Vec::new();
        for id in ids {
            let mut p = Proc::new(id, dir)?;
            p.spawn(&flags)?;
            nodes.push(p);
        }
        for p in &mut nodes {
            p.wait_ready(client, Duration::from_secs(60)).await?;
        }
        Ok(Self {
            nodes,
            flags,
            client: client.clone(),
        })
    }

    fn index_of(&self, id: &str) -> anyhow::Result<usize> {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .ok_or_else(|| anyhow::anyhow!("owner {id:?} is not one of the bench's nodes"))
    }

    async fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        let flags = self.flags.clone();
        self.nodes[i].spawn(&flags)?;
        self.nodes[i].wait_ready(&self.client, Duration::from_secs(60)).await
    }

    async fn stop_all(&mut self) {
        for n in &mut self.nodes {
            let _ = n.kill9().await;
        }
    }
}

// ------------------------------------------------------------------ http --

async fn create_topic(client: &reqwest::Client, url: &str, name: &str, partitions: u32) -> anyhow::Result<()> {
    let r = client
        .post(format!("{url}/v1/topics"))
        .json(&json!({"name": name, "partitions": partitions}))
        .send()
        .await?;
    if !(r.status().is_success() || r.status() == reqwest::StatusCode::CONFLICT) {
        anyhow::bail!(
            "creating topic {name}: {} {}",
            r.status(),
            r.text().await.unwrap_or_default()
        );
    }
    Ok(())
}

/// Owner and state of each partition, as one node sees them.
async fn describe(client: &reqwest::Client, url: &str, topic: &str) -> Option<Vec<(Option<String>, String)>> {
    let d: Value = client
        .get(format!("{url}/v1/topics/{topic}"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    let parts = d["partition_info"].as_array()?;
    Some(
        parts
            .iter()
            .map(|p| {
                (
                    p["owner"].as_str().map(str::to_string),
                    p["state"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect(),
    )
}

/// Wait until every partition is open and, if given, `node` owns at least
/// one (placement and rebalancing have settled around it).
async fn wait_settled(client: &reqwest::Client, url: &str, topic: &str, owners: &[&str], timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(d) = describe(client, url, topic).await {
            let open = !d.is_empty() && d.iter().all(|(_, s)| s == "open");
            let owning = owners.iter().all(|n| d.iter().any(|(o, _)| o.as_deref() == Some(*n)));
            if open && owning {
                return true;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

async fn lease_holder(client: &reqwest::Client, url: &str) -> Option<String> {
    let v: Value = client
        .get(format!("{url}/admin/nodes"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    v["lease_holder"].as_str().map(str::to_string)
}

/// Append one record to one partition; the base offset when acknowledged.
async fn append_one(client: &reqwest::Client, url: &str, topic: &str, p: u32, value: &str) -> Option<u64> {
    let r = client
        .post(format!("{url}/v1/topics/{topic}/partitions/{p}/records"))
        .timeout(PROBE_TIMEOUT)
        .json(&json!({"records": [{"value": value}]}))
        .send()
        .await
        .ok()?;
    if !r.status().is_success() {
        return None;
    }
    r.json::<Value>().await.ok()?["base_offset"].as_u64()
}

/// Every record of a partition from offset 0: (offset, value).
async fn read_partition(
    client: &reqwest::Client,
    url: &str,
    topic: &str,
    p: u32,
    mut each: impl FnMut(u64, &str),
) -> anyhow::Result<u64> {
    let mut offset = 0;
    let mut n = 0;
    loop {
        let r = client
            .get(format!(
                "{url}/v1/topics/{topic}/partitions/{p}/records?offset={offset}&limit=10000&max_bytes=8388608"
            ))
            .timeout(Duration::from_secs(60))
            .send()
            .await?;
        if !r.status().is_success() {
            anyhow::bail!(
                "reading {topic}/{p} at {offset}: {} {}",
                r.status(),
                r.text().await.unwrap_or_default()
            );
        }
        let body: Value = r.json().await?;
        let records = body["records"]
            .as_array()
            .ok_or_else(|| anyhow::anyhow!("read answered {body}"))?;
        if records.is_empty() {
            return Ok(n);
        }
        for rec in records {
            each(
                rec["offset"].as_u64().unwrap_or(u64::MAX),
                rec["value"].as_str().unwrap_or(""),
            );
            n += 1;
        }
        offset = body["next_offset"]
            .as_u64()
            .ok_or_else(|| anyhow::anyhow!("read answered {body}"))?;
    }
}

/// One line of Prometheus text: the value of `name` (no labels).
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == name).then(|| v.trim().parse().ok()).flatten()
    })
}

async fn metrics(client: &reqwest::Client, url: &str) -> Option<String> {
    client
        .get(format!("{url}/metrics"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()
}

/// `key=value` of a log line, ignoring terminal colour codes.
fn log_field(line: &str, key: &str) -> Option<u64> {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    let at = plain.find(&format!(" {key}="))? + key.len() + 2;
    plain[at..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

// ------------------------------------------------------------------ load --

/// Steady appends through the live nodes; remembers what was acknowledged.
struct Load {
    stop: Arc<AtomicBool>,
    live: Arc<Mutex<Vec<String>>>,
    acked: Arc<Mutex<BTreeMap<(u32, u64), String>>>,
    failed: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Load {
    fn start(client: &reqwest::Client, urls: Vec<String>, partitions: u32, rate: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let live = Arc::new(Mutex::new(urls));
        let acked: Arc<Mutex<BTreeMap<(u32, u64), String>>> = Arc::default();
        let failed = Arc::new(AtomicU64::new(0));
        let (c, s, l, a, f) = (
            client.clone(),
            stop.clone(),
            live.clone(),
            acked.clone(),
            failed.clone(),
        );
        let task = tokio::spawn(async move {
            if rate == 0 {
                return;
            }
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut inflight = tokio::task::JoinSet::new();
            let mut seq = 0u64;
            while !s.load(Ordering::Relaxed) {
                tick.tick().await;
                let url = {
                    let live = l.lock().unwrap();
                    if live.is_empty() {
                        continue;
                    }
                    live[seq as usize % live.len()].clone()
                };
                let p = (seq % u64::from(partitions)) as u32;
                let value = format!("load-{seq}");
                seq += 1;
                let (c, a, f) = (c.clone(), a.clone(), f.clone());
                inflight.spawn(async move {
                    match append_one(&c, &url, TOPIC, p, &value).await {
                        Some(o) => {
                            a.lock().unwrap().insert((p, o), value);
                        }
                        None => {
                            f.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
                while inflight.try_join_next().is_some() {}
            }
            while inflight.join_next().await.is_some() {}
        });
        Self {
            stop,
            live,
            acked,
            failed,
            task,
        }
    }

    fn route_to(&self, urls: Vec<String>) {
        *self.live.lock().unwrap() = urls;
    }

    fn record(&self, p: u32, offset: u64, value: String) {
        self.acked.lock().unwrap().insert((p, offset), value);
    }

    async fn finish(self) -> (BTreeMap<(u32, u64), String>, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        let acked = std::mem::take(&mut *self.acked.lock().unwrap());
        (acked, self.failed.load(Ordering::Relaxed))
    }
}

// ------------------------------------------------------- kill9 / sigterm --

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Kill9,
    Sigterm,
}

/// What a probe of one partition saw after the event.
struct Probe {
    /// Event → the first acknowledged append served by a new owner.
    new_owner_ms: Option<f64>,
    /// Event → the last append the stopped node still acknowledged (a node
    /// shutting down cleanly serves until it releases the stream).
    old_owner_last_ms: Option<f64>,
    /// Every acknowledged probe record: (offset, value).
    acked: Vec<(u64, String)>,
}

/// Append to `p` through the survivors in turn until an append is
/// acknowledged and, right after it, the survivor names an owner other than
/// `stopped`: then that append was served by the new owner.
async fn probe_partition(
    client: reqwest::Client,
    survivors: Vec<String>,
    stopped: String,
    p: u32,
    tag: String,
    since: Instant,
    give_up: Duration,
) -> Probe {
    let mut probe = Probe {
        new_owner_ms: None,
        old_owner_last_ms: None,
        acked: Vec::new(),
    };
    for attempt in 0usize.. {
        let url = &survivors[attempt % survivors.len()];
        let value = format!("{tag}-a{attempt}");
        if let Some(offset) = append_one(&client, url, TOPIC, p, &value).await {
            let t = ms(since.elapsed());
            probe.acked.push((offset, value));
            let owner = describe(&client, url, TOPIC)
                .await
                .and_then(|d| d.get(p as usize).and_then(|(o, _)| o.clone()));
            match owner {
                Some(o) if o != stopped => {
                    probe.new_owner_ms = Some(t);
                    return probe;
                }
                Some(_) => probe.old_owner_last_ms = Some(t),
                None => {} // owner unknown for now: try again
            }
        }
        if since.elapsed() > give_up {
            return probe;
        }
        tokio::time::sleep(PROBE_PAUSE).await;
    }
    probe
}

async fn run_round(
    cluster: &mut Cluster,
    load: &Load,
    how: Stop,
    round: usize,
    args: &FailoverArgs,
) -> anyhow::Result<Round> {
    let (partitions, victim_kind) = (args.partitions, args.victim);
    let give_up = Duration::from_secs(args.give_up_sec);
    let client = cluster.client.clone();
    let any = cluster.nodes[0].url.clone();
    let owners = describe(&client, &any, TOPIC)
        .await
        .ok_or_else(|| anyhow::anyhow!("describing {TOPIC} failed"))?;
    let holder = lease_holder(&client, &any).await;
    // The round's partition: by round, or the first the lease holder owns.
    let by_round = (round % partitions as usize) as u32;
    let target = match (victim_kind, &holder) {
        (Victim::LeaseHolder, Some(h)) => owners
            .iter()
            .position(|(o, _)| o.as_deref() == Some(h.as_str()))
            .map_or(by_round, |p| p as u32),
        _ => by_round,
    };
    let victim_id = owners[target as usize]
        .0
        .clone()
        .ok_or_else(|| anyhow::anyhow!("partition {target} has no owner"))?;
    let victim = cluster.index_of(&victim_id)?;
    let owned: Vec<u32> = owners
        .iter()
        .enumerate()
        .filter(|(_, (o, _))| o.as_deref() == Some(victim_id.as_str()))
        .map(|(p, _)| p as u32)
        .collect();
    let held_lease = holder.as_deref() == Some(victim_id.as_str());
    let survivors: Vec<String> = cluster
        .nodes
        .iter()
        .filter(|n| n.id != victim_id)
        .map(|n| n.url.clone())
        .collect();
    load.route_to(survivors.clone());
    let what = if how == Stop::Kill9 { "kill -9" } else { "SIGTERM" };
    eprintln!(
        "[failover] round {}: {what} {victim_id} (owns partitions {owned:?}{})",
        round + 1,
        if held_lease { ", holds the lease" } else { "" }
    );

    let started = Instant::now();
    let mut exited = None;
    match how {
        Stop::Kill9 => cluster.nodes[victim].kill9().await?,
        Stop::Sigterm => {
            cluster.nodes[victim].sigterm();
            let mut child = cluster.nodes[victim].child.take().expect("running");
            exited = Some(tokio::spawn(async move {
                let status = child.wait().await;
                (ms(started.elapsed()), status.ok().and_then(|s| s.code()))
            }));
        }
    }
    let probes: Vec<_> = owned
        .iter()
        .map(|&p| {
            let tag = format!("{}-r{round}-p{p}", if how == Stop::Kill9 { "kill9" } else { "sigterm" });
            tokio::spawn(probe_partition(
                client.clone(),
                survivors.clone(),
                victim_id.clone(),
                p,
                tag,
                started,
                give_up,
            ))
        })
        .collect();
    let mut partitions_ms = BTreeMap::new();
    let mut old_owner_last_ms = BTreeMap::new();
    for (p, probe) in owned.iter().zip(probes) {
        let probe = probe.await?;
        for (offset, value) in probe.acked {
            load.record(*p, offset, value);
        }
        partitions_ms.insert(*p, probe.new_owner_ms);
        if let Some(t) = probe.old_owner_last_ms {
            old_owner_last_ms.insert(*p, t);
        }
    }
    // The longest time a partition took no append: from the event, or from
    // the stopped node's last acknowledged append after it.
    let unavailable_ms = partitions_ms
        .iter()
        .map(|(p, t)| t.map(|t| t - old_owner_last_ms.get(p).copied().unwrap_or(0.0)))
        .collect::<Option<Vec<f64>>>()
        .map(|v| v.into_iter().fold(0.0, f64::max));
    let (exit_ms, exit_code) = match exited {
        Some(task) => {
            let (t, code) = task.await?;
            (Some(t), code)
        }
        None => (None, None),
    };
    let all = partitions_ms.values().copied().collect::<Option<Vec<f64>>>();
    let round_report = Round {
        round,
        node: victim_id.clone(),
        node_held_lease: held_lease,
        target_partition: target,
        target_ms: partitions_ms.get(&target).copied().flatten(),
        all_partitions_ms: all.map(|v| v.into_iter().fold(0.0, f64::max)),
        partitions_ms,
        old_owner_last_ms,
        unavailable_ms,
        exit_ms,
        exit_code,
    };
    eprintln!(
        "[failover] round {}: partition {target} took an append after {}, all {} partitions after {}{}",
        round + 1,
        fmt_ms(round_report.target_ms),
        owned.len(),
        fmt_ms(round_report.all_partitions_ms),
        exit_ms.map_or(String::new(), |t| format!("; the process exited after {t:.0} ms"))
    );

    // Bring the node back and let placement give it partitions again.
    cluster.restart(victim).await?;
    let ids: Vec<&str> = cluster.nodes.iter().map(|n| n.id.as_str()).collect();
    if !wait_settled(
        &client,
        &any_live(cluster, victim),
        TOPIC,
        &ids,
        Duration::from_secs(60),
    )
    .await
    {
        eprintln!("[failover] warning: after restarting {victim_id}, not every node owns a partition");
    }
    load.route_to(cluster.nodes.iter().map(|n| n.url.clone()).collect());
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(round_report)
}

fn any_live(cluster: &Cluster, not: usize) -> String {
    cluster.nodes[(not + 1) % cluster.nodes.len()].url.clone()
}

fn fmt_ms(t: Option<f64>) -> String {
    t.map_or("(gave up)".to_string(), |t| format!("{:.2} s", t / 1000.0))
}

fn event_report(rounds: Vec<Round>) -> EventReport {
    EventReport {
        target_ms: Summary::of(rounds.iter().filter_map(|r| r.target_ms)),
        all_partitions_ms: Summary::of(rounds.iter().filter_map(|r| r.all_partitions_ms)),
        unavailable_ms: Summary::of(rounds.iter().filter_map(|r| r.unavailable_ms)),
        gave_up: rounds
            .iter()
            .map(|r| r.partitions_ms.values().filter(|t| t.is_none()).count())
            .sum(),
        rounds,
    }
}

async fn verify_load(
    client: &reqwest::Client,
    url: &str,
    partitions: u32,
    acked: &BTreeMap<(u32, u64), String>,
) -> anyhow::Result<(usize, usize, bool)> {
    if !wait_settled(client, url, TOPIC, &[], Duration::from_secs(60)).await {
        anyhow::bail!("not every partition of {TOPIC} is open for the read-back");
    }
    let mut found = BTreeMap::new();
    let mut dense = true;
    for p in 0..partitions {
        let mut next = 0;
        read_partition(client, url, TOPIC, p, |o, v| {
            dense &= o == next;
            next = o + 1;
            found.insert((p, o), v.to_string());
        })
        .await?;
    }
    let lost = acked.iter().filter(|(k, v)| found.get(k) != Some(v)).count();
    Ok((found.len(), lost, dense))
}

// -------------------------------------------------------------- recovery --

struct AckedBatch {
    partition: u32,
    base: u64,
    count: u64,
    producer: usize,
    request: u64,
}

fn recovery_value(producer: usize, request: u64, i: usize, size: usize) -> String {
    let mut v = format!("k{producer}j{request}i{i}-");
    if v.len() < size {
        v.extend(std::iter::repeat_n('x', size - v.len()));
    }
    v
}

async fn recovery(
    args: &FailoverArgs,
    dir: &Path,
    flags: Vec<String>,
    client: &reqwest::Client,
) -> anyhow::Result<RecoveryReport> {
    let (_, config) = validate_flags(&flags, dir)?;
    let target_bytes = args.recovery_mib << 20;
    let mut cluster = Cluster::start(&["r1".to_string()], dir, flags, client).await?;
    let url = cluster.nodes[0].url.clone();
    create_topic(client, &url, RECOVERY_TOPIC, args.recovery_partitions).await?;
    if !wait_settled(client, &url, RECOVERY_TOPIC, &[], Duration::from_secs(60)).await {
        anyhow::bail!("topic {RECOVERY_TOPIC} was not placed");
    }

    // Fill the WAL.
    eprintln!(
        "[failover] recovery: appending {} MiB of {} B records, {} per request, {} producers",
        args.recovery_mib, args.recovery_record_bytes, args.recovery_batch, args.recovery_producers
    );
    let acked_bytes = Arc::new(AtomicU64::new(0));
    let batches: Arc<Mutex<Vec<AckedBatch>>> = Arc::default();
    let started = Instant::now();
    let mut producers = Vec::new();
    for k in 0..args.recovery_producers.max(1) {
        let (client, url, acked_bytes, batches) = (client.clone(), url.clone(), acked_bytes.clone(), batches.clone());
        let (size, batch, parts) = (
            args.recovery_record_bytes,
            args.recovery_batch.max(1),
            args.recovery_partitions,
        );
        producers.push(tokio::spawn(async move {
            let mut failures = 0u32;
            let mut j = 0u64;
            while acked_bytes.load(Ordering::Relaxed) < target_bytes {
                let p = ((k as u64 + j) % u64::from(parts)) as u32;
                let records: Vec<Value> = (0..batch)
                    .map(|i| json!({"value": recovery_value(k, j, i, size)}))
                    .collect();
                let r = client
                    .post(format!("{url}/v1/topics/{RECOVERY_TOPIC}/partitions/{p}/records"))
                    .timeout(Duration::from_secs(60))
                    .json(&json!({"records": records}))
                    .send()
                    .await;
                let base = match r {
                    Ok(r) if r.status().is_success() => {
                        r.json::<Value>().await.ok().and_then(|v| v["base_offset"].as_u64())
                    }
                    Ok(r) if r.status() == reqwest::StatusCode::TOO_MANY_REQUESTS => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue; // the same request again
                    }
                    _ => None,
                };
                match base {
                    Some(base) => {
                        batches.lock().unwrap().push(AckedBatch {
                            partition: p,
                            base,
                            count: batch as u64,
                            producer: k,
                            request: j,
                        });
                        acked_bytes.fetch_add((batch * size) as u64, Ordering::Relaxed);
                    }
                    None => {
                        failures += 1;
                        anyhow::ensure!(failures < 100, "producer {k}: 100 failed appends");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                j += 1;
            }
            Ok(())
        }));
    }
    let bar = {
        let acked_bytes = acked_bytes.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let b = acked_bytes.load(Ordering::Relaxed);
                eprintln!(
                    "[failover] recovery: {} / {} MiB acknowledged ({:.0} MiB/s)",
                    b >> 20,
                    target_bytes >> 20,
                    b as f64 / (1 << 20) as f64 / started.elapsed().as_secs_f64()
                );
            }
        })
    };
    for p in producers {
        p.await??;
    }
    bar.abort();
    let write_sec = started.elapsed().as_secs_f64();
    let batches = std::mem::take(&mut *batches.lock().unwrap());
    let records_acked: u64 = batches.iter().map(|b| b.count).sum();
    let bytes_acked = records_acked * args.recovery_record_bytes as u64;
    let mut acked_end: BTreeMap<u32, u64> = BTreeMap::new();
    for b in &batches {
        let e = acked_end.entry(b.partition).or_default();
        *e = (*e).max(b.base + b.count);
    }

    // What is unflushed, then kill -9.
    let before = metrics(client, &url).await.unwrap_or_default();
    let buffered_bytes_at_kill = metric(&before, "sluice_buffered_bytes");
    // The counter appears with the first flush.
    let flushed_bytes_before_kill =
        (!before.is_empty()).then(|| metric(&before, "sluice_flush_bytes_total").unwrap_or(0.0));
    let wal = wal_on_disk(&config.wal_store, "r1");
    eprintln!(
        "[failover] recovery: {} MiB acknowledged in {write_sec:.1} s; buffered {} MiB, flushed {} MiB; kill -9",
        bytes_acked >> 20,
        buffered_bytes_at_kill.map_or(-1.0, |b| b / (1 << 20) as f64).round(),
        flushed_bytes_before_kill.map_or(-1.0, |b| b / (1 << 20) as f64).round(),
    );
    let killed = Instant::now();
    cluster.nodes[0].kill9().await?;

    // Restart and time it.
    let restarted = Instant::now();
    let flags = cluster.flags.clone();
    cluster.nodes[0].spawn(&flags)?;
    let give_up = Duration::from_secs(args.give_up_sec);
    let appends: Vec<_> = acked_end
        .iter()
        .map(|(&p, &end)| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                loop {
                    let r = client
                        .post(format!("{url}/v1/topics/{RECOVERY_TOPIC}/partitions/{p}/records"))
                        .timeout(PROBE_TIMEOUT)
                        .json(&json!({"records": [{"value": "after-recovery"}]}))
                        .send()
                        .await;
                    if let Ok(r) = r {
                        if r.status().is_success() {
                            let base = r.json::<Value>().await.ok().and_then(|v| v["base_offset"].as_u64());
                            return Some((ms(restarted.elapsed()), base == Some(end)));
                        }
                    }
                    if restarted.elapsed() > give_up {
                        return None;
                    }
                    tokio::time::sleep(PROBE_PAUSE).await;
                }
            })
        })
        .collect();
    let reads: Vec<_> = acked_end
        .iter()
        .map(|(&p, &end)| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let last = end - 1;
                loop {
                    let r = client
                        .get(format!(
                            "{url}/v1/topics/{RECOVERY_TOPIC}/partitions/{p}/records?offset={last}&limit=1"
                        ))
                        .timeout(PROBE_TIMEOUT)
                        .send()
                        .await;
                    if let Ok(r) = r {
                        if r.status().is_success() {
                            let v: Value = r.json().await.unwrap_or_default();
                            if v["records"][0]["offset"].as_u64() == Some(last) {
                                return Some(ms(restarted.elapsed()));
                            }
                        }
                    }
                    if restarted.elapsed() > give_up {
                        return None;
                    }
                    tokio::time::sleep(PROBE_PAUSE).await;
                }
            })
        })
        .collect();
    cluster.nodes[0].wait_ready(client, give_up).await?;
    let ready_ms = ms(restarted.elapsed());
    let mut first_append_ms: f64 = 0.0;
    let mut appends_continue_at_end = true;
    for (p, a) in acked_end.keys().zip(appends) {
        let (t, at_end) = a
            .await?
            .ok_or_else(|| anyhow::anyhow!("partition {p} took no append {give_up:?} after the restart"))?;
        first_append_ms = first_append_ms.max(t);
        appends_continue_at_end &= at_end;
    }
    let mut read_end_ms: f64 = 0.0;
    for (p, r) in acked_end.keys().zip(reads) {
        let t = r
            .await?
            .ok_or_else(|| anyhow::anyhow!("partition {p}: its last acknowledged record was not readable"))?;
        read_end_ms = read_end_ms.max(t);
    }
    let kill_to_serving_ms = ms(killed.elapsed() - restarted.elapsed()) + first_append_ms.max(read_end_ms);
    let after = metrics(client, &url).await.unwrap_or_default();
    let takeover_ms = metric(&after, "sluice_wal_takeover_seconds_sum").map(|s| s * 1000.0);
    let log = std::fs::read_to_string(cluster.nodes[0].log_path()).unwrap_or_default();
    let finished = log.lines().rfind(|l| l.contains("WAL takeover finished"));
    let takeover_segments = finished.and_then(|l| log_field(l, "segments"));
    let takeover_records = finished.and_then(|l| log_field(l, "records"));
    eprintln!(
        "[failover] recovery: restarted node ready after {ready_ms:.0} ms, WAL takeover {} ms, serving after {:.0} ms",
        takeover_ms.map_or("?".into(), |t| format!("{t:.0}")),
        first_append_ms.max(read_end_ms)
    );

    // Read everything back.
    eprintln!("[failover] recovery: reading every record back");
    let read_started = Instant::now();
    let mut by_partition: BTreeMap<u32, Vec<&AckedBatch>> = BTreeMap::new();
    for b in &batches {
        by_partition.entry(b.partition).or_default().push(b);
    }
    let (mut matched, mut records_read, mut offsets_dense) = (0u64, 0u64, true);
    for p in 0..args.recovery_partitions {
        let mut mine = by_partition.remove(&p).unwrap_or_default();
        mine.sort_by_key(|b| b.base);
        let mut at = 0;
        let mut next = 0;
        records_read += read_partition(client, &url, RECOVERY_TOPIC, p, |o, v| {
            offsets_dense &= o == next;
            next = o + 1;
            while at < mine.len() && mine[at].base + mine[at].count <= o {
                at += 1;
            }
            if let Some(b) = mine.get(at).filter(|b| b.base <= o) {
                let i = (o - b.base) as usize;
                if v == recovery_value(b.producer, b.request, i, args.recovery_record_bytes) {
                    matched += 1;
                }
            }
        })
        .await?;
    }
    let read_back_sec = read_started.elapsed().as_secs_f64();
    let after_reads = metrics(client, &url).await.unwrap_or_default();
    let read_cache_misses = metric(&after_reads, "sluice_read_cache_total{outcome=\"miss\"}");
    cluster.stop_all().await;
    let gib = bytes_acked as f64 / (1u64 << 30) as f64;
    Ok(RecoveryReport {
        partitions: args.recovery_partitions,
        record_bytes: args.recovery_record_bytes,
        records_acked,
        bytes_acked,
        write_sec,
        buffered_bytes_at_kill,
        flushed_bytes_before_kill,
        wal_objects_at_kill: wal.map(|(n, _)| n),
        wal_bytes_at_kill: wal.map(|(_, b)| b),
        ready_ms,
        takeover_ms,
        takeover_segments,
        takeover_records,
        first_append_ms,
        read_end_ms,
        kill_to_serving_ms,
        takeover_sec_per_gib: takeover_ms.filter(|_| gib > 0.0).map(|t| t / 1000.0 / gib),
        serving_sec_per_gib: if gib > 0.0 {
            first_append_ms.max(read_end_ms) / 1000.0 / gib
        } else {
            0.0
        },
        read_back_sec,
        read_cache_misses,
        records_read,
        lost: records_acked - matched,
        offsets_dense,
        appends_continue_at_end,
    })
}

/// WAL objects of `node` and their bytes, when the WAL store is a local directory.
fn wal_on_disk(wal_store: &str, node: &str) -> Option<(u64, u64)> {
    fn walk(dir: &Path, acc: &mut (u64, u64)) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => walk(&e.path(), acc),
                Ok(m) => {
                    acc.0 += 1;
                    acc.1 += m.len();
                }
                Err(_) => {}
            }
        }
    }
    let root = Path::new(wal_store.strip_prefix("file://")?).join("wal").join(node);
    let mut acc = (0, 0);
    walk(&root, &mut acc);
    Some(acc)
}

// ------------------------------------------------------------------- run --

/// `sluice bench failover`.
pub async fn run(args: &FailoverArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.nodes >= 2, "--nodes must be at least 2 (someone has to take over)");
    anyhow::ensure!(args.partitions >= 1, "--partitions must be at least 1");
    anyhow::ensure!(
        args.recovery_partitions >= 1,
        "--recovery-partitions must be at least 1"
    );
    let passed: Vec<String> = args.serve_args.iter().chain(&args.serve_rest).cloned().collect();
    for flag in RESERVED {
        let eq = format!("{flag}=");
        if passed.iter().any(|a| a == flag || a.starts_with(&eq)) {
            anyhow::bail!("{flag} is set by the bench for each node; leave it out of the serve flags");
        }
    }
    let run_id = format!("sluice-bench-failover-{:08x}", rand::random::<u32>());
    let base = args.data_dir.clone().unwrap_or_else(std::env::temp_dir).join(&run_id);
    let run_flags = |scenario: &str| -> Vec<String> {
        passed
            .iter()
            .map(|a| a.replace("{run}", &format!("{run_id}-{scenario}")))
            .collect()
    };
    // A cluster that fails over in seconds, and a shutdown that hands over at once.
    let cluster_defaults = [
        ("--heartbeat-interval-sec", "1".to_string()),
        ("--node-timeout-sec", "4".to_string()),
        ("--shutdown-drain-sec", "0".to_string()),
    ];
    let cluster_flags = with_defaults(&run_flags("cluster"), &cluster_defaults);
    // Nothing is flushed: every acknowledged byte stays in the WAL (and in memory).
    let wal_bytes = (args.recovery_mib as usize) << 20;
    let mut recovery_defaults = cluster_defaults.to_vec();
    recovery_defaults.extend([
        ("--flush-interval-sec", "86400".to_string()),
        ("--flush-bytes", (2 * wal_bytes + (64 << 20)).to_string()),
        ("--max-buffered-bytes", (3 * wal_bytes).max(512 << 20).to_string()),
    ]);
    let recovery_flags = with_defaults(&run_flags("recovery"), &recovery_defaults);
    let (serve, config) = validate_flags(&cluster_flags, &base.join("cluster"))?;
    validate_flags(&recovery_flags, &base.join("recovery"))?;

    let settings = Settings {
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        nodes: args.nodes,
        partitions: args.partitions,
        rounds: args.rounds,
        victim: args.victim,
        load_rate: args.rate,
        heartbeat_interval_sec: serve.heartbeat_interval_sec,
        node_timeout_sec: serve.node_timeout_sec,
        lease_timeout_sec: serve.resolved_lease_timeout_sec(),
        shutdown_drain_sec: serve.shutdown_drain_sec,
        object_store: config.object_store.replace(&base.display().to_string(), "<run dir>"),
        wal_store: config.wal_store.replace(&base.display().to_string(), "<run dir>"),
        metadata: config.metadata.replace(&base.display().to_string(), "<run dir>"),
        serve_flags: cluster_flags.clone(),
        recovery_serve_flags: recovery_flags.clone(),
    };
    std::fs::create_dir_all(&base)?;
    eprintln!("[failover] run directory {} (node logs there)", base.display());
    let result = scenarios(args, &base, cluster_flags, recovery_flags, settings).await;
    match &result {
        Ok(_) if !args.keep_data_dir => {
            let _ = std::fs::remove_dir_all(&base);
        }
        _ => eprintln!("[failover] kept {}", base.display()),
    }
    let report = result?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

async fn scenarios(
    args: &FailoverArgs,
    base: &Path,
    cluster_flags: Vec<String>,
    recovery_flags: Vec<String>,
    settings: Settings,
) -> anyhow::Result<FailoverReport> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(16).build()?;
    let mut report = FailoverReport {
        mode: "failover",
        settings,
        kill9: None,
        sigterm: None,
        load: None,
        recovery: None,
    };
    let events: Vec<Stop> = [(Scenario::Kill9, Stop::Kill9), (Scenario::Sigterm, Stop::Sigterm)]
        .into_iter()
        .filter(|(s, _)| args.scenarios.contains(s))
        .map(|(_, h)| h)
        .collect();
    if !events.is_empty() {
        let ids: Vec<String> = (1..=args.nodes).map(|i| format!("n{i}")).collect();
        eprintln!("[failover] starting {} nodes", args.nodes);
        let mut cluster = Cluster::start(&ids, &base.join("cluster"), cluster_flags, &client).await?;
        let url = cluster.nodes[0].url.clone();
        create_topic(&client, &url, TOPIC, args.partitions).await?;
        let spread: Vec<&str> = ids.iter().map(String::as_str).take(args.partitions as usize).collect();
        if !wait_settled(&client, &url, TOPIC, &spread, Duration::from_secs(60)).await {
            eprintln!("[failover] warning: the partitions are not spread over every node");
        }
        let load = Load::start(
            &client,
            cluster.nodes.iter().map(|n| n.url.clone()).collect(),
            args.partitions,
            args.rate,
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        for how in events {
            let name = if how == Stop::Kill9 { "kill9" } else { "sigterm" };
            eprintln!("[failover] scenario {name}: {} rounds", args.rounds);
            let mut rounds = Vec::new();
            for r in 0..args.rounds {
                rounds.push(run_round(&mut cluster, &load, how, r, args).await?);
            }
            let e = event_report(rounds);
            match how {
                Stop::Kill9 => report.kill9 = Some(e),
                Stop::Sigterm => report.sigterm = Some(e),
            }
        }
        let (acked, failed) = load.finish().await;
        eprintln!("[failover] reading back {} acknowledged records", acked.len());
        let (read_back, lost, offsets_dense) = verify_load(&client, &url, args.partitions, &acked).await?;
        report.load = Some(LoadReport {
            rate: args.rate,
            acked: acked.len(),
            failed,
            read_back,
            lost,
            offsets_dense,
        });
        cluster.stop_all().await;
    }
    if args.scenarios.contains(&Scenario::Recovery) {
        report.recovery = Some(recovery(args, &base.join("recovery"), recovery_flags, &client).await?);
    }
    Ok(report)
}

fn render(r: &FailoverReport) -> String {
    use std::fmt::Write;
    let s = &r.settings;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "failover bench on {} cores: heartbeat {} s, node timeout {} s, lease timeout {} s, shutdown drain {} s",
        s.cores, s.heartbeat_interval_sec, s.node_timeout_sec, s.lease_timeout_sec, s.shutdown_drain_sec
    );
    let _ = writeln!(
        out,
        "stores: objects {}, WAL {}, metadata {}",
        s.object_store, s.wal_store, s.metadata
    );
    for (name, e) in [("kill -9", &r.kill9), ("SIGTERM", &r.sigterm)] {
        let Some(e) = e else { continue };
        let _ = writeln!(
            out,
            "\n{name} of a partition's owner ({} nodes, {} partitions); time to the first append acknowledged by the new owner, through a survivor:",
            s.nodes, s.partitions
        );
        let _ = writeln!(
            out,
            "{:>5}  {:<6} {:<5}  {:>9}  {:>9}  {:>13}  {:>11}  {:>9}",
            "round", "node", "lease", "partition", "its time", "all its parts", "unavailable", "exited"
        );
        for rd in &e.rounds {
            let _ = writeln!(
                out,
                "{:>5}  {:<6} {:<5}  {:>9}  {:>9}  {:>13}  {:>11}  {:>9}",
                rd.round + 1,
                rd.node,
                if rd.node_held_lease { "yes" } else { "no" },
                rd.target_partition,
                fmt_ms(rd.target_ms),
                format!("{} ({})", fmt_ms(rd.all_partitions_ms), rd.partitions_ms.len()),
                fmt_ms(rd.unavailable_ms),
                rd.exit_ms.map_or("-".into(), |t| format!("{:.2} s", t / 1000.0)),
            );
        }
        let _ = writeln!(
            out,
            "partition: p50 {:.2} s, max {:.2} s; all its partitions: p50 {:.2} s, max {:.2} s; unavailable: p50 {:.2} s, max {:.2} s; gave up on {}",
            e.target_ms.p50_ms / 1000.0,
            e.target_ms.max_ms / 1000.0,
            e.all_partitions_ms.p50_ms / 1000.0,
            e.all_partitions_ms.max_ms / 1000.0,
            e.unavailable_ms.p50_ms / 1000.0,
            e.unavailable_ms.max_ms / 1000.0,
            e.gave_up
        );
    }
    if let Some(l) = &r.load {
        let _ = writeln!(
            out,
            "\nbackground load {} appends/s: {} acknowledged ({} failed while nodes were down), {} read back, {} lost, offsets {}",
            l.rate,
            l.acked,
            l.failed,
            l.read_back,
            l.lost,
            if l.offsets_dense { "dense" } else { "NOT DENSE" }
        );
    }
    if let Some(v) = &r.recovery {
        let mib = v.bytes_acked as f64 / (1 << 20) as f64;
        let _ = writeln!(
            out,
            "\nrecovery: {mib:.0} MiB ({} records of {} B, {} partition(s)) written in {:.1} s, then kill -9 and restart",
            v.records_acked, v.record_bytes, v.partitions, v.write_sec
        );
        let _ = writeln!(
            out,
            "  at the kill: buffered {:.0} MiB, flushed {:.0} MiB{}",
            v.buffered_bytes_at_kill.unwrap_or(-1.0) / (1 << 20) as f64,
            v.flushed_bytes_before_kill.unwrap_or(-1.0) / (1 << 20) as f64,
            match (v.wal_objects_at_kill, v.wal_bytes_at_kill) {
                (Some(n), Some(b)) => format!(", WAL {n} objects, {:.0} MiB on disk", b as f64 / (1 << 20) as f64),
                _ => String::new(),
            }
        );
        let _ = writeln!(
            out,
            "  restart → ready {:.2} s, WAL takeover {} ({} segments, {} records), first append {:.2} s, last record readable {:.2} s; kill → serving {:.2} s",
            v.ready_ms / 1000.0,
            v.takeover_ms.map_or("?".into(), |t| format!("{:.2} s", t / 1000.0)),
            v.takeover_segments.map_or("?".into(), |n| n.to_string()),
            v.takeover_records.map_or("?".into(), |n| n.to_string()),
            v.first_append_ms / 1000.0,
            v.read_end_ms / 1000.0,
            v.kill_to_serving_ms / 1000.0
        );
        let _ = writeln!(
            out,
            "  per GiB: WAL takeover {}, restart to serving {:.2} s",
            v.takeover_sec_per_gib.map_or("?".into(), |t| format!("{t:.2} s")),
            v.serving_sec_per_gib
        );
        let _ = writeln!(
            out,
            "  read back {} records in {:.1} s ({:.1} MiB/s, {} read-cache misses): {} acknowledged lost, offsets {}, next append {}",
            v.records_read,
            v.read_back_sec,
            mib / v.read_back_sec.max(1e-9),
            v.read_cache_misses.map_or("?".into(), |n| n.to_string()),
            v.lost,
            if v.offsets_dense { "dense" } else { "NOT DENSE" },
            if v.appends_continue_at_end {
                "right after the last acknowledged record"
            } else {
                "NOT at the acknowledged end"
            }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passed_flags_replace_the_defaults() {
        let passed = vec!["--node-timeout-sec=2".to_string(), "--flush-bytes".into(), "9".into()];
        let out = with_defaults(
            &passed,
            &[
                ("--node-timeout-sec", "4".into()),
                ("--flush-bytes", "1".into()),
                ("--heartbeat-interval-sec", "1".into()),
            ],
        );
        assert_eq!(
            out,
            [
                "--heartbeat-interval-sec",
                "1",
                "--node-timeout-sec=2",
                "--flush-bytes",
                "9"
            ]
        );
    }

    #[test]
    fn summary_takes_the_median_rank() {
        let s = Summary::of([5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!((s.n, s.min_ms, s.p50_ms, s.max_ms), (5, 1.0, 3.0, 5.0));
        assert_eq!(Summary::of([]).n, 0);
    }

    #[test]
    fn reads_metrics_and_log_fields() {
        let text = "# TYPE x counter\nsluice_wal_takeover_seconds_sum 1.5\nsluice_wal_takeover_seconds_count 1\n";
        assert_eq!(metric(text, "sluice_wal_takeover_seconds_sum"), Some(1.5));
        assert_eq!(metric(text, "nope"), None);
        let line = "2026 \u{1b}[32m INFO\u{1b}[0m WAL takeover finished \u{1b}[3msegments\u{1b}[0m\u{1b}[2m=\u{1b}[0m412 \u{1b}[3mrecords\u{1b}[0m\u{1b}[2m=\u{1b}[0m262144";
        assert_eq!(log_field(line, "segments"), Some(412));
        assert_eq!(log_field(line, "records"), Some(262144));
    }

    #[test]
    fn recovery_values_have_the_record_size() {
        assert_eq!(recovery_value(3, 17, 999, 1000).len(), 1000);
        assert!(recovery_value(3, 17, 999, 1000).starts_with("k3j17i999-x"));
    }
}
