//! Load over the HTTP API.

use super::report::{Percentiles, Report};
use super::BenchArgs;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

pub(super) async fn produce(args: &BenchArgs) -> anyhow::Result<Report> {
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

pub(super) async fn consume(args: &BenchArgs) -> anyhow::Result<Report> {
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

pub(super) async fn e2e(args: &BenchArgs) -> anyhow::Result<Report> {
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
    fn record_values_have_the_asked_size() {
        assert_eq!(record_value(100, 7).len(), 100);
        assert_eq!(record_value(4, 7).len(), 4);
    }
}
