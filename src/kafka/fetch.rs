//! Fetch: stored batches of each asked partition within the request's and
//! the node's byte bounds, with Kafka's long poll (`max_wait_ms`,
//! `min_bytes`). The leader-epoch check is [`super::leader_epoch`]'s.

use super::leader_epoch::{check_leader_epoch, stream_epoch};
use super::proto::*;
use super::{code, error_code};
use crate::api::Services;
use crate::ids::Offset;
use std::time::Duration;

fn fetch_error(partition: i32, error_code: i16) -> FetchPartitionResponse {
    FetchPartitionResponse {
        partition,
        error_code,
        high_watermark: -1,
        log_start_offset: -1,
        batches: Vec::new(),
    }
}

/// One read of every partition of `req`, at most `max_bytes` of batches in
/// all (past the first batch, which is always returned so a consumer can
/// make progress, as on Kafka).
async fn fetch_pass(
    engine: &Services,
    req: &FetchRequest,
    max_bytes: usize,
) -> Vec<(String, Vec<FetchPartitionResponse>)> {
    let mut budget = max_bytes;
    let mut any = false;
    let mut out = Vec::with_capacity(req.topics.len());
    for (topic, parts) in &req.topics {
        let mut answers = Vec::with_capacity(parts.len());
        for fp in parts {
            let (Ok(p), Ok(from)) = (u32::try_from(fp.partition), u64::try_from(fp.fetch_offset)) else {
                answers.push(fetch_error(fp.partition, code::UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            };
            if fp.current_leader_epoch >= 0 {
                let epoch = stream_epoch(engine, topic, p);
                if let Some(error) = epoch.and_then(|e| check_leader_epoch(fp.current_leader_epoch, e)) {
                    answers.push(fetch_error(fp.partition, error));
                    continue;
                }
            }
            let max = usize::try_from(fp.partition_max_bytes).unwrap_or(0).min(budget);
            match engine
                .records
                .read_batches(topic, p, Offset(from), max, Duration::ZERO)
                .await
            {
                Ok(read) => {
                    let mut batches = read.batches;
                    if any {
                        // The engine returns a partition's first batch even
                        // past `max`; only the answer's first may be.
                        let mut used = 0;
                        let fit = batches
                            .iter()
                            .take_while(|b| {
                                used += b.len();
                                used <= max
                            })
                            .count();
                        batches.truncate(fit);
                    }
                    let n: usize = batches.iter().map(|b| b.len()).sum();
                    any |= n > 0;
                    budget = budget.saturating_sub(n);
                    answers.push(FetchPartitionResponse {
                        partition: fp.partition,
                        error_code: code::NONE,
                        high_watermark: read.high_watermark.get() as i64,
                        log_start_offset: read.start_offset.get() as i64,
                        batches,
                    });
                }
                Err(e) => {
                    let mut a = fetch_error(fp.partition, error_code(&e));
                    if let Some(start) = e.start_offset {
                        a.log_start_offset = start.get() as i64;
                    }
                    answers.push(a);
                }
            }
        }
        out.push((topic.clone(), answers));
    }
    out
}

/// A Fetch: one pass over its partitions, and if that has fewer than
/// `min_bytes` and the client may wait, a wait for records on any partition
/// that had none, then a fresh pass. Both passes are bounded by the
/// request's `max_bytes` and the node's `cap` (`--kafka-fetch-max-bytes`),
/// and the first pass's batches are dropped before waiting, so a waiting
/// Fetch holds no records. A partition named twice is fetched once
/// ([`FetchRequest::merge_duplicates`]). `None` when `still_logged_in` says
/// no after the wait: the connection is closed rather than answered.
pub(super) async fn fetch(
    engine: &Services,
    req: FetchRequest,
    cap: usize,
    still_logged_in: &(dyn Fn() -> bool + Sync),
) -> Option<Vec<(String, Vec<FetchPartitionResponse>)>> {
    let req = req.merge_duplicates();
    let max_bytes = usize::try_from(req.max_bytes).unwrap_or(0).min(cap);
    let first = fetch_pass(engine, &req, max_bytes).await;
    let bytes: usize = first
        .iter()
        .flat_map(|(_, ps)| ps.iter())
        .flat_map(|p| p.batches.iter())
        .map(|b| b.len())
        .sum();
    let wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0)).min(engine.limits.max_wait);
    let errors = first
        .iter()
        .flat_map(|(_, ps)| ps.iter())
        .any(|p| p.error_code != code::NONE);
    // Answer at once with enough bytes, on any error, or when asked not to wait.
    if wait.is_zero() || errors || bytes >= usize::try_from(req.min_bytes).unwrap_or(0) {
        return Some(first);
    }
    // Nothing yet: wait until any partition that had nothing gets records,
    // or the wait runs out, then answer with a fresh pass.
    let mut waits = Vec::new();
    for (topic, parts) in &first {
        for a in parts
            .iter()
            .filter(|a| a.error_code == code::NONE && a.batches.is_empty())
        {
            let from = req
                .topics
                .iter()
                .find(|(t, _)| t == topic)
                .and_then(|(_, ps)| ps.iter().find(|p| p.partition == a.partition))
                .map_or(0, |p| p.fetch_offset.max(0) as u64);
            let topic = topic.clone();
            let partition = a.partition as u32;
            waits.push(Box::pin(async move {
                let _ = engine
                    .records
                    .read_batches(&topic, partition, Offset(from), 1, wait)
                    .await;
            }));
        }
    }
    drop(first);
    if waits.is_empty() {
        tokio::time::sleep(wait).await;
    } else {
        futures::future::select_all(waits).await;
    }
    if !still_logged_in() {
        return None;
    }
    Some(fetch_pass(engine, &req, max_bytes).await)
}
