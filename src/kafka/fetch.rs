//! Fetch: stored batches of each asked partition within the request's and
//! the node's byte bounds, with Kafka's long poll (`max_wait_ms`,
//! `min_bytes`) and fetch sessions ([`super::fetch_session`]). v13+ name
//! topics by id. The leader-epoch check is [`super::leader_epoch`]'s.

use super::fetch_session::{Part, Sessions};
use super::leader_epoch::{check_leader_epoch, stream_epoch};
use super::proto::*;
use super::{code, error_code};
use crate::api::Services;
use crate::ids::{Offset, TopicUuid};
use std::sync::Mutex;
use std::time::Duration;

fn fetch_error(partition: i32, error_code: i16) -> FetchPartitionResponse {
    FetchPartitionResponse {
        partition,
        error_code,
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        aborted: Vec::new(),
        batches: Vec::new(),
    }
}

/// One read of every partition of `parts`, at most `max_bytes` of batches
/// in all (past the first batch, which is always returned so a consumer can
/// make progress, as on Kafka). A partition this node does not know or does
/// not lead yet is looked at again after catching up with the metadata log
/// ([`super::catch_up`]).
///
/// `committed` (read_committed) reads stop at each partition's last stable
/// offset and name the aborted transactions of what they return.
async fn fetch_pass(
    engine: &Services,
    parts: &[Part],
    max_bytes: usize,
    committed: bool,
) -> Vec<FetchPartitionResponse> {
    let mut budget = max_bytes;
    let mut any = false;
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        let (topic, fp) = (&part.topic, &part.fetch);
        if topic.is_empty() && !part.topic_id.is_zero() {
            out.push(fetch_error(fp.partition, code::UNKNOWN_TOPIC_ID));
            continue;
        }
        let (Ok(p), Ok(from)) = (u32::try_from(fp.partition), u64::try_from(fp.fetch_offset)) else {
            out.push(fetch_error(fp.partition, code::UNKNOWN_TOPIC_OR_PARTITION));
            continue;
        };
        if fp.current_leader_epoch >= 0 {
            let epoch = stream_epoch(engine, topic, p);
            if let Some(error) = epoch.and_then(|e| check_leader_epoch(fp.current_leader_epoch, e)) {
                out.push(fetch_error(fp.partition, error));
                continue;
            }
        }
        let max = usize::try_from(fp.partition_max_bytes).unwrap_or(0).min(budget);
        let read = super::catch_up(engine, topic, p, || {
            engine
                .records
                .read_batches(topic, p, Offset(from), max, Duration::ZERO, committed)
        })
        .await;
        match read {
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
                let end = batches.last().map_or(Offset(from), |b| crate::batch::end_offset(b));
                let aborted = (read.aborted.iter())
                    .filter(|a| a.first < end)
                    .map(|a| (a.producer_id, a.first.get() as i64))
                    .collect();
                out.push(FetchPartitionResponse {
                    partition: fp.partition,
                    error_code: code::NONE,
                    high_watermark: read.high_watermark.get() as i64,
                    last_stable_offset: read.last_stable.get() as i64,
                    log_start_offset: read.start_offset.get() as i64,
                    aborted,
                    batches,
                });
            }
            Err(e) => {
                let mut a = fetch_error(fp.partition, error_code(&e));
                if let Some(start) = e.start_offset {
                    a.log_start_offset = start.get() as i64;
                }
                out.push(a);
            }
        }
    }
    out
}

/// The request's partitions, flat, with v13+ topic ids resolved to names
/// (an unknown id keeps an empty name).
async fn parts_of(engine: &Services, req: &mut FetchRequest) -> (Vec<Part>, Vec<Part>) {
    let names = super::topic_names(engine, req.topic_ids.iter().chain(req.forgotten.iter().map(|f| &f.1))).await;
    let name_of = |id: &TopicUuid, name: &str| {
        if id.is_zero() {
            name.to_string()
        } else {
            names.get(id).cloned().unwrap_or_default()
        }
    };
    let mut parts = Vec::new();
    for (i, (name, ps)) in std::mem::take(&mut req.topics).into_iter().enumerate() {
        let topic_id = req.topic_ids.get(i).copied().unwrap_or_default();
        let topic = name_of(&topic_id, &name);
        parts.extend(ps.into_iter().map(|fetch| Part {
            topic_id,
            topic: topic.clone(),
            fetch,
        }));
    }
    let mut forgotten = Vec::new();
    for (name, topic_id, ps) in std::mem::take(&mut req.forgotten) {
        let topic = name_of(&topic_id, &name);
        forgotten.extend(ps.into_iter().map(|partition| Part {
            topic_id,
            topic: topic.clone(),
            fetch: FetchPartition {
                partition,
                current_leader_epoch: -1,
                fetch_offset: 0,
                partition_max_bytes: 0,
            },
        }));
    }
    (parts, forgotten)
}

/// A Fetch's answer: its head (session error and id) and its topics, each
/// with its id.
pub(super) struct Fetched {
    pub head: FetchHead,
    pub topics: Vec<(String, Vec<FetchPartitionResponse>)>,
    pub ids: Vec<TopicUuid>,
}

/// A Fetch: the session decides which partitions to read
/// ([`Sessions::begin`]); one pass over them, and if that has fewer than
/// `min_bytes` and the client may wait, a wait for records on any partition
/// that had none, then a fresh pass; then the session decides what of it to
/// answer ([`Sessions::respond`]). Both passes are bounded by the request's
/// `max_bytes` and the node's `cap` (`--kafka-fetch-max-bytes`), and the
/// first pass's batches are dropped before waiting, so a waiting Fetch holds
/// no records. A partition named twice is fetched once
/// ([`FetchRequest::merge_duplicates`]). `None` when `still_logged_in` says
/// no after the wait: the connection is closed rather than answered.
pub(super) async fn fetch(
    engine: &Services,
    sessions: &Mutex<Sessions>,
    version: i16,
    req: FetchRequest,
    cap: usize,
    still_logged_in: &(dyn Fn() -> bool + Sync),
) -> Option<Fetched> {
    let mut req = req.merge_duplicates();
    let (parts, forgotten) = parts_of(engine, &mut req).await;
    let now = tokio::time::Instant::now();
    let (ctx, parts) = sessions.lock().expect("not poisoned").begin(
        version,
        req.session_id,
        req.session_epoch,
        parts,
        &forgotten,
        now,
    );
    let max_bytes = usize::try_from(req.max_bytes).unwrap_or(0).min(cap);
    let mut answers = fetch_waiting(engine, &req, &parts, max_bytes, still_logged_in).await?;
    let mut paired: Vec<(Part, FetchPartitionResponse)> = parts.into_iter().zip(answers.drain(..)).collect();
    let head = sessions
        .lock()
        .expect("not poisoned")
        .respond(&ctx, &mut paired, tokio::time::Instant::now());
    // Consecutive partitions of one topic make one topic entry.
    let mut topics: Vec<(String, Vec<FetchPartitionResponse>)> = Vec::new();
    let mut ids: Vec<TopicUuid> = Vec::new();
    let mut last: Option<(TopicUuid, String)> = None;
    for (p, a) in paired {
        let this = (p.topic_id, p.topic);
        if last.as_ref() != Some(&this) {
            topics.push((this.1.clone(), Vec::new()));
            ids.push(this.0);
            last = Some(this);
        }
        topics.last_mut().expect("pushed").1.push(a);
    }
    Some(Fetched { head, topics, ids })
}

/// The passes of [`fetch`] over `parts`, with the long poll between them.
async fn fetch_waiting(
    engine: &Services,
    req: &FetchRequest,
    parts: &[Part],
    max_bytes: usize,
    still_logged_in: &(dyn Fn() -> bool + Sync),
) -> Option<Vec<FetchPartitionResponse>> {
    let committed = req.isolation_level == 1;
    let first = fetch_pass(engine, parts, max_bytes, committed).await;
    let bytes: usize = first.iter().flat_map(|p| p.batches.iter()).map(|b| b.len()).sum();
    let wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0)).min(engine.limits.max_wait);
    let errors = first.iter().any(|p| p.error_code != code::NONE);
    // Answer at once with enough bytes, on any error, or when asked not to wait.
    if wait.is_zero() || errors || bytes >= usize::try_from(req.min_bytes).unwrap_or(0) {
        return Some(first);
    }
    // Nothing yet: wait until any partition that had nothing gets records,
    // or the wait runs out, then answer with a fresh pass.
    let mut waits = Vec::new();
    for (part, a) in parts.iter().zip(&first) {
        if a.error_code != code::NONE || !a.batches.is_empty() {
            continue;
        }
        let from = part.fetch.fetch_offset.max(0) as u64;
        let topic = part.topic.clone();
        let partition = a.partition as u32;
        waits.push(Box::pin(async move {
            let _ = engine
                .records
                .read_batches(&topic, partition, Offset(from), 1, wait, committed)
                .await;
        }));
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
    Some(fetch_pass(engine, parts, max_bytes, committed).await)
}
