//! Load over the HTTP API: producers that POST JSON batches to one
//! partition each, one request in flight per producer; a reader per
//! partition for `consume`; long-polling tail readers for `e2e`.

use super::stats::Recorder;
use super::{created_at, record_value, wait_due, BenchArgs, KeyCycle};
use bytes::Bytes;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Creates the topic (409 when it exists is fine), waits until every
/// partition is open on some node, and returns its partition count.
pub(super) async fn ensure_topic(client: &reqwest::Client, args: &BenchArgs) -> anyhow::Result<u32> {
    let resp = client
        .post(format!("{}/v1/topics", args.url))
        .json(&serde_json::json!({"name": args.topic, "partitions": args.partitions}))
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("creating topic {} at {}: {e}", args.topic, args.url))?;
    if !(resp.status().is_success() || resp.status() == reqwest::StatusCode::CONFLICT) {
        anyhow::bail!(
            "creating topic {}: {} {}",
            args.topic,
            resp.status(),
            resp.text().await.unwrap_or_default()
        );
    }
    for _ in 0..200 {
        let d: Value = client
            .get(format!("{}/v1/topics/{}", args.url, args.topic))
            .send()
            .await?
            .json()
            .await?;
        if let Some(ps) = d["partition_info"].as_array() {
            if !ps.is_empty() && ps.iter().all(|p| p["state"] == "open") {
                return Ok(ps.len() as u32);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("topic {} was not placed in 20 s", args.topic)
}

/// The JSON body of one append of `values`, each with the next key of
/// `keys` when there is one.
fn body(values: &[Vec<u8>], keys: &mut Option<KeyCycle>) -> Bytes {
    let len: usize = values.iter().map(|v| v.len() + 32).sum();
    let mut b = Vec::with_capacity(len + 16);
    b.extend_from_slice(b"{\"records\":[");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            b.push(b',');
        }
        b.push(b'{');
        if let Some(k) = keys.as_mut() {
            // Keys are ASCII letters and digits: nothing to escape.
            b.extend_from_slice(b"\"key\":\"");
            b.extend_from_slice(&k.next_key());
            b.extend_from_slice(b"\",");
        }
        b.extend_from_slice(b"\"value\":\"");
        // record_value writes hex digits and 'x' only: nothing to escape.
        b.extend_from_slice(v);
        b.extend_from_slice(b"\"}");
    }
    b.extend_from_slice(b"]}");
    Bytes::from(b)
}

/// Producer `p` appends to partition `p mod partitions` until `deadline`.
/// With `stamp`, every value carries its creation time (for e2e).
pub(super) async fn produce(
    args: &BenchArgs,
    partitions: u32,
    rec: Arc<Recorder>,
    stamp: bool,
    deadline: Instant,
) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.producers)
        .build()?;
    // Each producer's share of the offered rate, as the gap between its requests.
    let interval =
        (args.rate > 0).then(|| Duration::from_secs_f64((args.producers * args.batch) as f64 / args.rate as f64));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(args.producers);
    for p in 0..args.producers {
        let (client, rec) = (client.clone(), rec.clone());
        let url = format!(
            "{}/v1/topics/{}/partitions/{}/records",
            args.url,
            args.topic,
            p as u32 % partitions
        );
        let (batch, record_bytes) = (args.batch, args.record_bytes);
        let mut keys = KeyCycle::new(args.keys, p, args.producers);
        // Spread the producers' schedules over one interval.
        let mut next_due = start + interval.map_or(Duration::ZERO, |iv| iv.mul_f64(p as f64 / args.producers as f64));
        tasks.push(tokio::spawn(async move {
            let value = vec![record_value(record_bytes, None); batch];
            let fixed = body(&value, &mut None);
            loop {
                let created = match interval {
                    Some(iv) => {
                        if next_due >= deadline {
                            break;
                        }
                        let due = next_due;
                        next_due += iv;
                        wait_due(due).await
                    }
                    None if Instant::now() >= deadline => break,
                    None => Instant::now(),
                };
                let payload = if stamp {
                    body(&vec![record_value(record_bytes, Some(created)); batch], &mut keys)
                } else if keys.is_some() {
                    body(&value, &mut keys)
                } else {
                    fixed.clone()
                };
                let sent = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(payload)
                    .send()
                    .await;
                let failure = match sent {
                    Ok(r) if r.status().is_success() => {
                        // Read the answer: the ack is complete only with its body.
                        match r.bytes().await {
                            Ok(_) => None,
                            Err(_) => Some("io".to_string()),
                        }
                    }
                    Ok(r) => Some(r.status().as_u16().to_string()),
                    Err(e) if e.is_connect() => Some("connect".to_string()),
                    Err(_) => Some("io".to_string()),
                };
                match failure {
                    None => {
                        rec.ok(batch as u64, (batch * record_bytes) as u64);
                        rec.latency(created.elapsed(), batch as u64);
                    }
                    Some(kind) => {
                        rec.error(kind);
                        // Back off a little: a 429 or a refused connection
                        // would otherwise spin.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    Ok(())
}

/// One GET of a partition's records from `offset`: (records, next offset,
/// high watermark, the JSON records).
async fn read(
    client: &reqwest::Client,
    base: &str,
    offset: Option<u64>,
    wait_ms: u64,
) -> Result<(Vec<Value>, u64, u64), String> {
    let url = match offset {
        Some(o) => format!("{base}?offset={o}&limit=10000&wait_ms={wait_ms}"),
        None => format!("{base}?offset=-1"),
    };
    let resp = client.get(&url).send().await.map_err(|e| {
        if e.is_connect() {
            "connect".to_string()
        } else {
            "io".to_string()
        }
    })?;
    if !resp.status().is_success() {
        return Err(resp.status().as_u16().to_string());
    }
    let mut body: Value = resp.json().await.map_err(|_| "io".to_string())?;
    let next = body["next_offset"].as_u64().unwrap_or(offset.unwrap_or(0));
    let hw = body["high_watermark"].as_u64().unwrap_or(next);
    let records = match body["records"].take() {
        Value::Array(a) => a,
        _ => Vec::new(),
    };
    Ok((records, next, hw))
}

fn value_len(r: &Value) -> u64 {
    r["value"].as_str().map_or(0, str::len) as u64
}

/// Every partition read concurrently from its start up to its end as of
/// the start of the run, or until `deadline`.
pub(super) async fn consume(
    args: &BenchArgs,
    partitions: u32,
    rec: Arc<Recorder>,
    deadline: Instant,
) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let mut tasks = Vec::new();
    for p in 0..partitions {
        let (client, rec) = (client.clone(), rec.clone());
        let base = format!("{}/v1/topics/{}/partitions/{p}/records", args.url, args.topic);
        tasks.push(tokio::spawn(async move {
            let end = match read(&client, &base, None, 0).await {
                Ok((_, _, hw)) => hw,
                Err(kind) => return rec.error(kind),
            };
            let mut offset = 0;
            while offset < end && Instant::now() < deadline {
                let t = Instant::now();
                match read(&client, &base, Some(offset), 0).await {
                    Ok((records, next, _)) => {
                        rec.ok(records.len() as u64, records.iter().map(value_len).sum());
                        rec.latency(t.elapsed(), 1);
                        if records.is_empty() || next <= offset {
                            break;
                        }
                        offset = next;
                    }
                    Err(kind) => {
                        rec.error(kind);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    Ok(())
}

/// Long-polling readers, one per partition, from each partition's current
/// end; each received record's latency is from its creation (read from its
/// value). They stop when `stop` is set.
pub(super) async fn tail(
    args: &BenchArgs,
    partitions: u32,
    rec: Arc<Recorder>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let client = reqwest::Client::new();
    let mut tasks = Vec::new();
    for p in 0..partitions {
        let base = format!("{}/v1/topics/{}/partitions/{p}/records", args.url, args.topic);
        let (_, _, mut offset) = read(&client, &base, None, 0)
            .await
            .map_err(|e| anyhow::anyhow!("reading the end of partition {p}: {e}"))?;
        let (client, rec, stop) = (client.clone(), rec.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match read(&client, &base, Some(offset), 200).await {
                    Ok((records, next, _)) => {
                        let now = Instant::now();
                        let bytes = records.iter().map(value_len).sum();
                        rec.received(records.len() as u64, bytes);
                        rec.latencies(records.iter().filter_map(|r| {
                            let created = created_at(r["value"].as_str()?.as_bytes())?;
                            Some((now.saturating_duration_since(created), 1))
                        }));
                        offset = next.max(offset);
                    }
                    Err(kind) => {
                        rec.error(kind);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }));
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_bodies_are_the_json_the_api_takes() {
        let b = body(&[b"abc".to_vec(), b"de".to_vec()], &mut None);
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v, serde_json::json!({"records": [{"value": "abc"}, {"value": "de"}]}));
        let keyed = body(&[b"abc".to_vec(), b"de".to_vec()], &mut KeyCycle::new(2, 1, 2));
        let v: Value = serde_json::from_slice(&keyed).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"records": [{"key": "k00000001", "value": "abc"}, {"key": "k00000000", "value": "de"}]})
        );
        let stamped = body(&[record_value(64, Some(Instant::now()))], &mut None);
        let v: Value = serde_json::from_slice(&stamped).unwrap();
        assert_eq!(v["records"][0]["value"].as_str().unwrap().len(), 64);
    }
}
