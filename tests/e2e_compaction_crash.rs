//! `kill -9` of a node while it compacts, over and over: a real `sluice serve`
//! process owns a compacted topic that HTTP clients keep updating (1 KiB
//! values over a few hundred keys); each round waits until the node logs
//! that a compaction run starts, lets a random 0–300 ms pass (so the kill
//! lands before the run's object is written, between the write and the
//! swap, or after the swap), kills the node with SIGKILL, restarts it, and
//! reads every partition from offset 0.
//!
//! After every restart:
//! - no acknowledged record, and nothing a reader saw, is gone unless a
//!   later record of its key is there (compaction may remove only
//!   superseded records; the latest of each key stays);
//! - no offset ever holds two different records (across all rounds);
//! - every record read is below the high watermark of its read;
//! - below the partition's `compacted_end` each key is there once.
//!
//! `SLUICE_COMPACTION_KILLS` sets the number of rounds (default 20).

mod support;

use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::process::{free_port, Server};

const TOPIC: &str = "state";
const PARTITIONS: u64 = 2;
const KEYS: u64 = 300;
const CLIENTS: usize = 4;
const PER_REQUEST: usize = 16;

/// (key, value) of one record.
type Kv = (String, String);

fn kills() -> usize {
    std::env::var("SLUICE_COMPACTION_KILLS").map_or(20, |v| v.parse().expect("SLUICE_COMPACTION_KILLS"))
}

/// Every record of partition `p` from 0 on, following `next_offset`
/// across gaps; each record must be below its read's high watermark.
async fn read_partition(client: &reqwest::Client, url: &str, p: u64) -> Result<BTreeMap<u64, Kv>, String> {
    let mut out = BTreeMap::new();
    let mut at = 0u64;
    let mut refusals = 0;
    loop {
        let r: Value = client
            .get(format!(
                "{url}/v1/topics/{TOPIC}/partitions/{p}/records?offset={at}&limit=1000"
            ))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        if r["error"]["retryable"] == true && refusals < 200 {
            refusals += 1;
            tokio::time::sleep(Duration::from_millis(25)).await;
            continue;
        }
        let records = r["records"].as_array().ok_or_else(|| format!("read failed: {r}"))?;
        let high = r["high_watermark"].as_u64().unwrap();
        if records.is_empty() {
            if at != high {
                return Err(format!(
                    "partition {p}: empty read at {at} below the high watermark {high}"
                ));
            }
            return Ok(out);
        }
        for rec in records {
            let o = rec["offset"].as_u64().unwrap();
            if o < at || o >= high {
                return Err(format!(
                    "partition {p}: offset {o} read from {at} with high watermark {high}"
                ));
            }
            let key = rec["key"]
                .as_str()
                .ok_or_else(|| format!("{p}@{o} has no key: {rec}"))?;
            let value = rec["value"].as_str().unwrap_or("<tombstone>");
            out.insert(o, (key.to_string(), value.to_string()));
            at = o + 1;
        }
    }
}

async fn compacted_ends(client: &reqwest::Client, url: &str) -> Vec<u64> {
    let t: Value = client
        .get(format!("{url}/v1/topics/{TOPIC}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let parts = t["partition_info"].as_array().unwrap();
    parts.iter().map(|p| p["compacted_end"].as_u64().unwrap()).collect()
}

/// What was acknowledged or read at each (partition, offset), and by whom.
#[derive(Default)]
struct Seen {
    at: HashMap<(u64, u64), (Kv, String)>,
    acked: u64,
}

impl Seen {
    fn note(&mut self, p: u64, o: u64, kv: &Kv, who: &str) -> Result<(), String> {
        match self.at.get(&(p, o)) {
            Some((old, first)) if old != kv => Err(format!(
                "{p}@{o} held {old:?} ({first}) and then {kv:?} ({who}): an offset with two values"
            )),
            Some(_) => Ok(()),
            None => {
                self.at.insert((p, o), (kv.clone(), who.to_string()));
                Ok(())
            }
        }
    }
}

/// Check the partitions as read after a restart against everything seen
/// before, then note what was read.
fn check(seen: &mut Seen, read: &BTreeMap<u64, BTreeMap<u64, Kv>>, compacted: &[u64], round: usize) -> Vec<String> {
    let mut bad = Vec::new();
    let mut latest: HashMap<(u64, &str), u64> = HashMap::new();
    for (p, records) in read {
        for (o, (k, _)) in records {
            latest.insert((*p, k.as_str()), *o);
        }
    }
    for ((p, o), (kv, who)) in &seen.at {
        match read[p].get(o) {
            Some(now) if now == kv => {}
            Some(now) => bad.push(format!("{p}@{o} was {kv:?} ({who}), now {now:?}")),
            None if latest.get(&(*p, kv.0.as_str())).is_some_and(|l| l > o) => {}
            None => bad.push(format!(
                "{p}@{o} = {kv:?} ({who}) is gone with no later record of key {:?}: a latest value lost",
                kv.0
            )),
        }
    }
    for (p, records) in read {
        let mut keys: HashMap<&str, u64> = HashMap::new();
        for (o, (k, _)) in records.range(..compacted[*p as usize]) {
            if let Some(o0) = keys.insert(k, *o) {
                bad.push(format!(
                    "key {k:?} twice below compacted_end {}: at {o0} and {o}",
                    compacted[*p as usize]
                ));
            }
        }
        let mut values: HashMap<&str, u64> = HashMap::new();
        for (o, (_, v)) in records {
            if let Some(o0) = values.insert(v, *o) {
                bad.push(format!("value {v:?} at {p}@{o0} and {p}@{o}"));
            }
        }
        for (o, kv) in records {
            if let Err(e) = seen.note(*p, *o, kv, &format!("read after restart {round}")) {
                bad.push(e);
            }
        }
    }
    bad
}

fn producer(
    client: reqwest::Client,
    url: String,
    c: usize,
    round: usize,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<(u64, u64, Kv)>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut rng = rand::rngs::SmallRng::seed_from_u64((round * 100 + c) as u64);
        let mut i = 0u64;
        let pad = "x".repeat(1000);
        while !stop.load(Ordering::Relaxed) {
            let p = rng.random_range(0..PARTITIONS);
            let kvs: Vec<Kv> = (0..PER_REQUEST)
                .map(|_| {
                    i += 1;
                    let key = format!("key-{}", rng.random_range(0..KEYS));
                    (key, format!("r{round}-c{c}-{i}-{pad}"))
                })
                .collect();
            let body = json!({"records": kvs.iter().map(|(k, v)| json!({"key": k, "value": v, "partition": p})).collect::<Vec<_>>()});
            let Ok(resp) = client
                .post(format!("{url}/v1/topics/{TOPIC}/records"))
                .json(&body)
                .send()
                .await
            else {
                continue; // the node is gone: not acknowledged
            };
            if resp.status() != 200 {
                continue;
            }
            let Ok(r) = resp.json::<Value>().await else { continue };
            let mut acked = acked.lock().unwrap();
            for (kv, o) in kvs.into_iter().zip(r["offsets"].as_array().unwrap()) {
                acked.push((o["partition"].as_u64().unwrap(), o["offset"].as_u64().unwrap(), kv));
            }
        }
    })
}

fn compaction_lines(log: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("compact") || l.contains("starting"))
        .collect();
    lines.join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_compacting_loses_no_latest_value() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--flush-interval-sec", "1", "--compaction-interval-sec", "1"];
    let mut node = Server::start("n1", dir.path(), free_port(), &flags);
    let client = reqwest::Client::new();
    let created = client
        .post(format!("{}/v1/topics", node.url))
        .json(&json!({"name": TOPIC, "partitions": PARTITIONS,
            "config": {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": 0.01}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    assert!(support::http::wait_open(&client, &node.url, TOPIC).await);

    let mut seen = Seen::default();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let (mut mid_run, mut after_swap) = (0, 0);
    let starts = |log: &str| log.matches("compaction run starts").count();
    for round in 0..kills() {
        let before = starts(&node.log());
        let stop = Arc::new(AtomicBool::new(false));
        let acked: Arc<Mutex<Vec<(u64, u64, Kv)>>> = Arc::default();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| producer(client.clone(), node.url.clone(), c, round, stop.clone(), acked.clone()))
            .collect();
        // Wait for a compaction run to start, then kill at a random point.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while starts(&node.log()) == before {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: no compaction started in 60 s; log:\n{}",
                node.log()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..300))).await;
        node.kill9();
        let log = node.log();
        let tail = &log[log.rfind("compaction run starts").unwrap()..];
        if tail.contains("compactor: compacted") || tail.contains("compaction swap refused") {
            after_swap += 1;
        } else {
            mid_run += 1;
        }
        stop.store(true, Ordering::Relaxed);
        for c in clients {
            c.await.unwrap();
        }
        let acked = std::mem::take(&mut *acked.lock().unwrap());
        for (p, o, kv) in &acked {
            seen.note(*p, *o, kv, &format!("acked in round {round}")).unwrap();
        }
        seen.acked += acked.len() as u64;

        node = node.restart();
        assert!(
            support::http::wait_open(&client, &node.url, TOPIC).await,
            "round {round}: not recovered; log:\n{}",
            node.log()
        );
        // Where the compacted parts end before the read: a compaction
        // that swaps during it only compacts more.
        let compacted = compacted_ends(&client, &node.url).await;
        let mut read = BTreeMap::new();
        for p in 0..PARTITIONS {
            let records = read_partition(&client, &node.url, p).await;
            read.insert(p, records.unwrap_or_else(|e| panic!("round {round}: {e}")));
        }
        let bad = check(&mut seen, &read, &compacted, round);
        assert!(
            bad.is_empty(),
            "round {round}: {} problems, first: {:#?}; the node's compactions:\n{}",
            bad.len(),
            &bad[..bad.len().min(10)],
            compaction_lines(&node.log())
        );
        let records: usize = read.values().map(BTreeMap::len).sum();
        let ends: u64 = read.values().map(|r| r.keys().next_back().map_or(0, |o| o + 1)).sum();
        eprintln!(
            "round {round}: {} acked; after restart {records} records of {ends} offsets, compacted_end {compacted:?}",
            acked.len()
        );
    }
    let log = node.log();
    eprintln!(
        "{} kills: {mid_run} before the run's swap, {after_swap} after it; {} records acknowledged; \
         {} compactions applied in all",
        kills(),
        seen.acked,
        log.matches("compactor: compacted").count()
    );
}
