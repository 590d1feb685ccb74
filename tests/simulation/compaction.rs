//! The simulation's compacted topic: a keyed producer updating (and now and
//! then deleting) a few keys, a reader that reads across the gaps
//! compaction leaves, and the final check that only superseded records
//! went (`kv_history.rs`). The owners compact every 2 s of simulated time
//! while the schedule crashes, partitions and stalls them, so swaps race
//! flushes, takeovers, zombies and GC.

use super::*;
use crate::kv_history::{check_final_kv, Kv, KvPartition};
use sluice::meta::{CleanupPolicy, Ratio, TopicConfig};

pub const KV_TOPIC: &str = "kv";
pub const KV_PARTITIONS: u32 = 2;
/// Few keys, so most records are superseded soon and compaction has work.
const KEYS: u32 = 12;

/// Compact as soon as anything is dirty, and keep tombstones for good:
/// the latest record of every key then always stays, which is what the
/// final check holds compaction to (tombstone expiry has tests of its own).
fn config() -> TopicConfig {
    TopicConfig {
        cleanup_policy: Some(CleanupPolicy::Compact),
        min_cleanable_dirty_ratio: Ratio::new(0.01),
        delete_retention_ms: Some(i64::MAX),
        ..TopicConfig::default()
    }
}

pub async fn create_topic(sim: &Sim) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(node) = sim.running().into_iter().next() {
            match node.create_topic(KV_TOPIC, KV_PARTITIONS, config()).await {
                Ok(_) => {}
                Err(e) if e.code == ErrorCode::TopicExists => {}
                Err(e) if Instant::now() < deadline => sim.log(format!("create compacted topic: {e}")),
                Err(e) => return Err(format!("setup: compacted topic not created: {e}")),
            }
            if let Some(t) = node.meta.view().topics.get(KV_TOPIC) {
                let _ = sim.kv_topic.set(t.id);
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            return Err("setup: no node started".into());
        }
        sleep(Duration::from_millis(100)).await;
    }
}

fn keyed(kv: &Kv, ts: u64) -> Record {
    Record {
        timestamp_ms: ts as i64,
        key: Some(kv.key.clone()),
        value: kv.value.clone(),
        headers: vec![],
    }
}

fn seen(rec: &Record) -> Option<Kv> {
    Some(Kv {
        key: rec.key.clone()?,
        value: rec.value.clone(),
    })
}

fn note_all(sim: &Sim, p: u32, base: u64, kvs: &[Kv], who: &str, acked: bool) {
    let mut h = sim.kv.lock().unwrap();
    let found: Vec<String> = (kvs.iter().enumerate())
        .filter_map(|(j, kv)| {
            let o = base + j as u64;
            if acked {
                h.ack(p, o, kv, who)
            } else {
                h.note(p, o, kv, who)
            }
        })
        .collect();
    drop(h);
    for v in found {
        sim.violation(v);
    }
}

/// Updates random keys through random nodes (one record in ten deletes
/// its key) and notes every acknowledgement.
pub async fn producer(sim: Arc<Sim>, mut rng: SmallRng) {
    let mut n = 0u64;
    while !sim.stop.load(Ordering::Relaxed) {
        sleep(millis(&mut rng, 5, 40)).await;
        let p = rng.random_range(0..KV_PARTITIONS);
        let Some(node) = sim.pick_node_for(&mut rng, sim.kv_stream(p), 0.8) else {
            continue;
        };
        let kvs: Vec<Kv> = (0..rng.random_range(1..=4))
            .map(|_| {
                n += 1;
                Kv {
                    key: Bytes::from(format!("key-{}", rng.random_range(0..KEYS))),
                    value: (!rng.random_bool(0.1)).then(|| Bytes::from(format!("{}-kv-{n}", sim.seed))),
                }
            })
            .collect();
        let records = kvs.iter().map(|kv| keyed(kv, sim.ms())).collect();
        match timeout(APPEND_TIMEOUT, node.append(KV_TOPIC, p, records)).await {
            Ok(Ok(a)) => {
                sim.count_n("compacted topic: records acknowledged", kvs.len() as u64);
                if a.count as usize != kvs.len() {
                    sim.violation(format!(
                        "compacted append of {} records acknowledged {}",
                        kvs.len(),
                        a.count
                    ));
                }
                let who = format!("ack by {} {} at {} ms", node.id, node.epoch, sim.ms());
                note_all(&sim, p, a.base.0, &kvs, &who, true);
            }
            Ok(Err(e)) => {
                sim.count(format!("compacted append: {}", e.code.as_str()));
                if e.code == ErrorCode::Internal {
                    sim.violation(format!(
                        "compacted append to {} failed with an internal error: {e}",
                        node.id
                    ));
                }
            }
            Err(_) => sim.count("compacted append: timed out (outcome unknown)"),
        }
    }
}

/// Reads compacted partitions from random offsets (often from the start,
/// across the compacted part) and checks each read's shape.
pub async fn reader(sim: Arc<Sim>, mut rng: SmallRng) {
    while !sim.stop.load(Ordering::Relaxed) {
        sleep(millis(&mut rng, 10, 60)).await;
        let p = rng.random_range(0..KV_PARTITIONS);
        let Some(node) = sim.pick_node_for(&mut rng, sim.kv_stream(p), 0.9) else {
            continue;
        };
        let known_end = sim.kv.lock().unwrap().known_end.get(&p).copied().unwrap_or(0);
        let from = match rng.random_range(0..4) {
            0 => ReadFrom::Start,
            _ => ReadFrom::At(Offset(rng.random_range(0..=known_end + 2))),
        };
        let req = ReadRequest {
            from,
            limit: rng.random_range(1..=200),
            max_bytes: 64 << 10,
            wait: Duration::ZERO,
            committed: false,
            consistency: Default::default(),
        };
        match timeout(Duration::from_secs(5), node.read(KV_TOPIC, p, req)).await {
            Ok(Ok(r)) => {
                sim.count_n("compacted read: records", r.records.len() as u64);
                let who = format!("compacted reader via {} {} at {} ms", node.id, node.epoch, sim.ms());
                check_read(&sim, &who, p, from, &r);
            }
            Ok(Err(e)) => {
                sim.count(format!("compacted read: {}", e.code.as_str()));
                if e.code == ErrorCode::Internal {
                    sim.violation(format!(
                        "compacted read from {} failed with an internal error: {e}",
                        node.id
                    ));
                }
            }
            Err(_) => sim.count("compacted read: timed out"),
        }
    }
}

/// A read of a compacted partition: offsets increase from where it was
/// asked (gaps allowed), stay below the high watermark, every record has a
/// key, and `next_offset` follows the last record.
fn check_read(sim: &Sim, who: &str, p: u32, from: ReadFrom, r: &ReadResult) {
    let mut floor = match from {
        ReadFrom::At(o) => o.max(r.start_offset),
        _ => r.start_offset,
    };
    for (o, rec) in &r.records {
        if *o < floor {
            sim.violation(format!(
                "{who}: compacted read of {p} from {from:?} returned {o} below {floor}"
            ));
        }
        if *o >= r.high_watermark {
            sim.violation(format!(
                "invariant 4 (readers never see unacknowledged data): {who} got compacted {p}@{o} at or past the high watermark {}",
                r.high_watermark
            ));
        }
        match seen(rec) {
            Some(kv) => note_all(sim, p, o.0, &[kv], who, false),
            None => sim.violation(format!("{who}: compacted {p}@{o} has no key")),
        }
        floor = o.next();
    }
    if let Some((last, _)) = r.records.last() {
        if r.next_offset != last.next() {
            sim.violation(format!(
                "{who}: next_offset {} after a last record at {last}",
                r.next_offset
            ));
        }
    }
}

/// After healing: one more update per compacted partition must be
/// acknowledged.
pub async fn final_append(sim: &Sim, p: u32) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    let mut attempt = 0;
    while Instant::now() < deadline {
        if let Some(node) = sim.settled_owner_of(sim.kv_stream(p)) {
            let kv = Kv {
                key: Bytes::from_static(b"key-final"),
                value: Some(final_value(sim, &format!("kv-final-{p}"), &mut attempt, &last)),
            };
            match timeout(APPEND_TIMEOUT, node.append(KV_TOPIC, p, vec![keyed(&kv, sim.ms())])).await {
                Ok(Ok(a)) => {
                    let who = format!("final ack by {} {}", node.id, node.epoch);
                    note_all(sim, p, a.base.0, &[kv], &who, true);
                    return Ok(());
                }
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "timed out".into(),
            }
        }
        sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "liveness: compacted partition {p} accepted no append within 30 s after healing (last: {last})"
    ))
}

/// Read a whole compacted partition from its owner, following
/// `next_offset` across gaps to the high watermark.
async fn final_read(sim: &Sim, p: u32) -> Result<KvPartition, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    'attempt: while Instant::now() < deadline {
        let Some(node) = sim.settled_owner_of(sim.kv_stream(p)) else {
            sleep(Duration::from_millis(200)).await;
            continue;
        };
        let mut part = KvPartition {
            compacted_end: node.meta.view().streams[&sim.kv_stream(p)].compacted_end.0,
            ..KvPartition::default()
        };
        let mut at = Offset(0);
        loop {
            let req = ReadRequest {
                from: ReadFrom::At(at),
                limit: 1_000,
                max_bytes: usize::MAX,
                wait: Duration::ZERO,
                committed: false,
                consistency: Default::default(),
            };
            let r = match timeout(Duration::from_secs(5), node.read(KV_TOPIC, p, req)).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    last = e.to_string();
                    sleep(Duration::from_millis(200)).await;
                    continue 'attempt;
                }
                Err(_) => {
                    last = "timed out".into();
                    continue 'attempt;
                }
            };
            if r.records.is_empty() {
                if r.high_watermark == at {
                    return Ok(part);
                }
                return Err(format!(
                    "compacted partition {p}: empty read at {at} below the high watermark {}",
                    r.high_watermark
                ));
            }
            for (o, rec) in &r.records {
                if *o < at {
                    return Err(format!("compacted partition {p}: offset {o} read after {at}"));
                }
                let Some(kv) = seen(rec) else {
                    return Err(format!("compacted partition {p}: {o} has no key"));
                };
                part.records.insert(o.0, kv);
                at = o.next();
            }
        }
    }
    Err(format!("final read of compacted partition {p} failed for 30 s: {last}"))
}

/// The final state of every compacted partition, checked; counts how much
/// compaction removed.
pub async fn final_check(sim: &Sim) -> Result<Vec<String>, String> {
    let mut finals = BTreeMap::new();
    for p in 0..KV_PARTITIONS {
        let part = final_read(sim, p).await?;
        let end = part.records.keys().next_back().map_or(0, |o| o + 1);
        sim.count_n("compacted topic: final records", part.records.len() as u64);
        sim.count_n(
            "compacted topic: offsets removed by compaction",
            end - part.records.len() as u64,
        );
        if part.compacted_end > 0 {
            sim.count("compacted topic: partitions compacted");
        }
        finals.insert(p, part);
    }
    Ok(check_final_kv(&sim.kv.lock().unwrap(), &finals))
}
