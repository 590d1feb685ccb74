//! The transaction coordinator's request handling: what InitProducerId
//! with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
//! TxnOffsetCommit, EndTxn, DescribeTransactions and ListTransactions
//! answer. Every change is one op on the transactional id's record in the
//! metadata log (`meta::txn`, applied purely); this module only checks that
//! this node coordinates the id, turns refusals into Kafka's error codes,
//! and finishes a transaction it finds ending.
//!
//! A transactional id is placed like a consumer group
//! ([`group_placement`](super::group_placement)): every node computes the
//! same coordinator from its view of the live nodes, so when the
//! coordinator dies the next one carries on from the record.
//!
//! [`tick`], on the front door's ticker, is the coordinator's own work:
//! it finishes every transaction it finds ending (one a dead coordinator
//! left in a Prepare state) and aborts an ongoing one that outlived its
//! `transaction.timeout.ms` on this node's clock (the abort bumps the
//! epoch, so the producer that let it expire is fenced). A new coordinator
//! times a transaction from when it first sees it.
//!
//! See `docs/design/transactions.md` for the whole design.

use super::code;
use super::group_placement::check_coordinator;
use super::groups::code as gcode;
use super::txn_proto::{self as tp, DescribedTxn};
use super::wire::{DecodeResult, Reader, Writer};
use crate::api::{ErrorCode, GroupOffset, Services, TxnRequest, TxnSummary};
use crate::batch::marker::{encode_marker, Marker};
use crate::meta::txn::{TxnDone, TxnRefusal, TxnState, MAX_TXN_TIMEOUT_MS};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

pub const INVALID_TXN_STATE: i16 = 48;
pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
pub const CONCURRENT_TRANSACTIONS: i16 = 51;
pub const PRODUCER_FENCED: i16 = 90;
pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

/// How often one request finishes an ending transaction and tries again
/// before answering `CONCURRENT_TRANSACTIONS` (the client retries).
const FINISH_ATTEMPTS: usize = 3;

/// Which code a fenced producer gets: `PRODUCER_FENCED` from the request
/// version on which Kafka introduced it (KIP-588), `INVALID_PRODUCER_EPOCH`
/// before.
#[derive(Debug, Clone, Copy)]
pub struct Fencing {
    pub producer_fenced: bool,
}

impl Fencing {
    pub fn since(version: i16, first: i16) -> Self {
        Self {
            producer_fenced: version >= first,
        }
    }
}

/// Kafka's code for a refusal of the record.
pub fn refusal_code(why: TxnRefusal, fencing: Fencing) -> i16 {
    match why {
        TxnRefusal::Fenced if fencing.producer_fenced => PRODUCER_FENCED,
        TxnRefusal::Fenced => code::INVALID_PRODUCER_EPOCH,
        TxnRefusal::UnknownProducer => INVALID_PRODUCER_ID_MAPPING,
        TxnRefusal::Concurrent => CONCURRENT_TRANSACTIONS,
        TxnRefusal::InvalidState => INVALID_TXN_STATE,
        TxnRefusal::Invalid => code::INVALID_REQUEST,
    }
}

/// Apply `req` to `id`'s record, on the coordinator of `placed` (the
/// transactional id; for TxnOffsetCommit the group, whose coordinator
/// clients send it to). A transaction found ending (a Prepare state the
/// previous request or a dead coordinator left) is finished first and
/// `req` tried again.
async fn run(engine: &Services, placed: &str, id: &str, req: TxnRequest, fencing: Fencing) -> Result<TxnDone, i16> {
    check_coordinator(engine, placed)?;
    for _ in 0..FINISH_ATTEMPTS {
        match engine.producer_ids.transaction(id, req.clone()).await {
            Ok(Ok(TxnDone::Fencing)) | Ok(Err((TxnRefusal::Concurrent, _))) => finish(engine, id).await?,
            Ok(Ok(done)) => return Ok(done),
            Ok(Err((why, message))) => {
                tracing::debug!(transactional_id = id, ?why, "transaction op refused: {message}");
                return Err(refusal_code(why, fencing));
            }
            Err(e) => return Err(api_code(e.code)),
        }
    }
    Err(CONCURRENT_TRANSACTIONS)
}

/// Complete the transaction `id`'s record says is ending: its marker
/// (commit or abort, at the record's epoch) is written into every partition
/// of the transaction through the ordinary append path, and only once all
/// are durable is the record completed. A marker that fails leaves the
/// record in its Prepare state; the next request or the ticker (this
/// coordinator's or, after failover, the next one's) writes the markers
/// again, and a partition that has one already appends nothing.
async fn finish(engine: &Services, id: &str) -> Result<(), i16> {
    let _turn = engine.producer_ids.finishing(id).await;
    let Some(row) = engine.producer_ids.txn(id) else {
        return Ok(());
    };
    let marker = match row.state {
        TxnState::PrepareCommit => Marker::Commit,
        TxnState::PrepareAbort => Marker::Abort,
        _ => return Ok(()),
    };
    let batch = encode_marker(row.producer_id, row.producer_epoch, marker, 0, engine.clock.now_ms());
    let of = crate::api::MarkerOf {
        transactional_id: id.to_string(),
        started_at: row.started_at,
    };
    let writes = (row.partitions.iter())
        .map(|(topic, p)| (engine.records).append_marker(topic, *p, batch.clone(), Some(of.clone())));
    for (written, (topic, p)) in futures::future::join_all(writes).await.into_iter().zip(&row.partitions) {
        match written {
            Ok(a) => tracing::debug!(
                transactional_id = id,
                topic,
                partition = p,
                producer_epoch = row.producer_epoch,
                "{marker:?} marker at {} (count {})",
                a.base,
                a.count
            ),
            // A deleted topic has no partition left to mark.
            Err(e) if matches!(e.code, ErrorCode::TopicNotFound | ErrorCode::PartitionNotFound) => {}
            Err(e) => {
                tracing::debug!(
                    transactional_id = id,
                    topic,
                    partition = p,
                    "marker not written: {}",
                    e.message
                );
                return Err(api_code(e.code));
            }
        }
    }
    let req = TxnRequest::Complete {
        producer_id: row.producer_id,
        epoch: row.producer_epoch,
        started_at: row.started_at,
    };
    match engine.producer_ids.transaction(id, req).await {
        // Refused: another request completed it meanwhile.
        Ok(_) => Ok(()),
        Err(e) => Err(api_code(e.code)),
    }
}

/// An error reaching the log or resolving a partition, as Kafka answers it.
fn api_code(e: ErrorCode) -> i16 {
    match e {
        ErrorCode::TopicNotFound | ErrorCode::PartitionNotFound => code::UNKNOWN_TOPIC_OR_PARTITION,
        e if e.retryable() => gcode::COORDINATOR_NOT_AVAILABLE,
        _ => code::UNKNOWN_SERVER_ERROR,
    }
}

/// InitProducerId with a transactional id: the producer id and a bumped
/// epoch (the previous instance is fenced; a transaction it left open is
/// aborted first). `(error, producer id, epoch)`.
pub async fn init(engine: &Services, id: &str, timeout_ms: i32, expected: (i64, i16), version: i16) -> (i16, i64, i16) {
    let Ok(timeout_ms) = u32::try_from(timeout_ms) else {
        return (INVALID_TRANSACTION_TIMEOUT, -1, -1);
    };
    if timeout_ms == 0 || timeout_ms > MAX_TXN_TIMEOUT_MS {
        return (INVALID_TRANSACTION_TIMEOUT, -1, -1);
    }
    let expected = (expected.0 >= 0).then_some(expected);
    let req = TxnRequest::Init { timeout_ms, expected };
    match run(engine, id, id, req, Fencing::since(version, 4)).await {
        Ok(TxnDone::Producer { producer_id, epoch }) => (code::NONE, producer_id, epoch),
        Ok(_) => (CONCURRENT_TRANSACTIONS, -1, -1),
        Err(e) => (e, -1, -1),
    }
}

/// AddPartitionsToTxn for one transaction: every partition's code (all the
/// same: the op is one change to the record). `verify_only` (KIP-890, a
/// partition leader asking) changes nothing and answers, per partition,
/// whether the transaction is ongoing and writes it.
pub async fn add_partitions(
    engine: &Services,
    id: &str,
    producer: (i64, i16),
    partitions: &[(String, Vec<i32>)],
    verify_only: bool,
    version: i16,
) -> Vec<(String, Vec<(i32, i16)>)> {
    let fencing = Fencing::since(version, 2);
    let answer = |f: &dyn Fn(&str, i32) -> i16| {
        partitions
            .iter()
            .map(|(t, ps)| (t.clone(), ps.iter().map(|&p| (p, f(t, p))).collect()))
            .collect()
    };
    if let Err(e) = check_coordinator(engine, id) {
        return answer(&|_, _| e);
    }
    if verify_only {
        let row = engine.producer_ids.txn(id);
        return answer(&|t, p| verify(row.as_ref(), producer, t, p, fencing));
    }
    let mut named = Vec::new();
    for (t, ps) in partitions {
        for &p in ps {
            match u32::try_from(p) {
                Ok(p) => named.push((t.clone(), p)),
                Err(_) => return answer(&|_, _| code::UNKNOWN_TOPIC_OR_PARTITION),
            }
        }
    }
    let req = TxnRequest::AddPartitions {
        producer_id: producer.0,
        epoch: producer.1,
        partitions: named,
    };
    let e = match run(engine, id, id, req, fencing).await {
        Ok(_) => code::NONE,
        Err(e) => e,
    };
    answer(&|_, _| e)
}

/// Whether `row` says `producer`'s ongoing transaction holds `partition`:
/// `NONE`, or Kafka's code for why not (also the check a partition leader
/// makes before it accepts a transactional batch, see `kafka::produce`).
pub fn verify(row: Option<&TxnSummary>, producer: (i64, i16), topic: &str, partition: i32, fencing: Fencing) -> i16 {
    let Some(row) = row else {
        return INVALID_PRODUCER_ID_MAPPING;
    };
    if row.producer_id != producer.0 {
        return INVALID_PRODUCER_ID_MAPPING;
    }
    if row.producer_epoch != producer.1 {
        return refusal_code(TxnRefusal::Fenced, fencing);
    }
    let added = u32::try_from(partition).is_ok_and(|p| row.partitions.iter().any(|(t, q)| t == topic && *q == p));
    if row.state == TxnState::Ongoing && added {
        code::NONE
    } else {
        INVALID_TXN_STATE
    }
}

/// AddOffsetsToTxn: the transaction commits offsets of `group`.
pub async fn add_offsets(engine: &Services, id: &str, producer: (i64, i16), group: &str, version: i16) -> i16 {
    let req = TxnRequest::AddGroup {
        producer_id: producer.0,
        epoch: producer.1,
        group: group.to_string(),
    };
    match run(engine, id, id, req, Fencing::since(version, 2)).await {
        Ok(_) => code::NONE,
        Err(e) => e,
    }
}

/// TxnOffsetCommit: offsets the transaction commits for `group`, held in
/// the record until it commits. Every partition gets the same code.
pub async fn commit_offsets(
    engine: &Services,
    id: &str,
    producer: (i64, i16),
    group: &str,
    offsets: Vec<GroupOffset>,
) -> i16 {
    let req = TxnRequest::CommitOffsets {
        producer_id: producer.0,
        epoch: producer.1,
        group: group.to_string(),
        offsets,
    };
    // Kafka has answered PRODUCER_FENCED here at every version.
    match run(engine, group, id, req, Fencing::since(0, 0)).await {
        Ok(_) => code::NONE,
        Err(e) => e,
    }
}

/// EndTxn: commit or abort, then finish the transaction.
pub async fn end(engine: &Services, id: &str, producer: (i64, i16), commit: bool, version: i16) -> i16 {
    let req = TxnRequest::End {
        producer_id: producer.0,
        epoch: producer.1,
        commit,
    };
    match run(engine, id, id, req, Fencing::since(version, 2)).await {
        Ok(_) => match finish(engine, id).await {
            Ok(()) => code::NONE,
            Err(e) => e,
        },
        Err(e) => e,
    }
}

/// DescribeTransactions: per id, its record (or `TRANSACTIONAL_ID_NOT_FOUND`,
/// `NOT_COORDINATOR`).
pub fn describe(engine: &Services, ids: &[String]) -> Vec<(String, Result<TxnSummary, i16>)> {
    let all = engine.producer_ids.transactions();
    ids.iter()
        .map(|id| {
            let found = check_coordinator(engine, id).and_then(|()| {
                all.iter()
                    .find(|(t, _)| t == id)
                    .map(|(_, s)| s.clone())
                    .ok_or(TRANSACTIONAL_ID_NOT_FOUND)
            });
            (id.clone(), found)
        })
        .collect()
}

/// ListTransactions: the ids this node coordinates, filtered by state name
/// and producer id (empty filters match all). Also the asked state names
/// that are not states.
pub fn list(
    engine: &Services,
    states: &[String],
    producer_ids: &[i64],
) -> (Vec<(String, i64, &'static str)>, Vec<String>) {
    const ALL: [TxnState; 6] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
    ];
    let unknown = states
        .iter()
        .filter(|s| !ALL.iter().any(|a| a.name() == s.as_str()))
        .cloned()
        .collect();
    let listed = engine
        .producer_ids
        .transactions()
        .into_iter()
        .filter(|(id, s)| {
            check_coordinator(engine, id).is_ok()
                && (states.is_empty() || states.iter().any(|n| n == s.state.name()))
                && (producer_ids.is_empty() || producer_ids.contains(&s.producer_id))
        })
        .map(|(id, s)| (id, s.producer_id, s.state.name()))
        .collect();
    (listed, unknown)
}

/// Whether `key` is a transaction request this module answers
/// (InitProducerId is `producer_ids`, which hands transactional ids here).
pub fn is_txn_api(key: i16) -> bool {
    matches!(
        key,
        tp::ADD_PARTITIONS_TO_TXN
            | tp::ADD_OFFSETS_TO_TXN
            | tp::END_TXN
            | tp::TXN_OFFSET_COMMIT
            | tp::DESCRIBE_TRANSACTIONS
            | tp::LIST_TRANSACTIONS
    )
}

/// Decode, answer and encode one transaction request.
pub async fn request(engine: &Services, key: i16, version: i16, r: &mut Reader, w: &mut Writer) -> DecodeResult<()> {
    match key {
        tp::ADD_PARTITIONS_TO_TXN => {
            let txns = tp::decode_add_partitions_to_txn(r, version)?;
            let mut results = Vec::with_capacity(txns.len());
            for t in txns {
                let producer = (t.producer_id, t.producer_epoch);
                let answer =
                    add_partitions(engine, &t.transactional_id, producer, &t.topics, t.verify_only, version).await;
                results.push((t.transactional_id, answer));
            }
            tp::encode_add_partitions_to_txn(w, version, code::NONE, &results)
        }
        tp::ADD_OFFSETS_TO_TXN => {
            let q = tp::decode_add_offsets_to_txn(r, version)?;
            let e = add_offsets(
                engine,
                &q.transactional_id,
                (q.producer_id, q.producer_epoch),
                &q.group_id,
                version,
            )
            .await;
            tp::encode_add_offsets_to_txn(w, version, e)
        }
        tp::TXN_OFFSET_COMMIT => {
            let q = tp::decode_txn_offset_commit(r, version)?;
            let mut offsets = Vec::new();
            let mut bad = false;
            for (topic, ps) in &q.topics {
                for (p, offset, _epoch, metadata) in ps {
                    match u32::try_from(*p) {
                        Ok(partition) => offsets.push(GroupOffset {
                            topic: topic.clone(),
                            partition,
                            offset: *offset,
                            metadata: metadata.clone(),
                        }),
                        Err(_) => bad = true,
                    }
                }
            }
            let e = if bad {
                code::UNKNOWN_TOPIC_OR_PARTITION
            } else {
                let producer = (q.producer_id, q.producer_epoch);
                commit_offsets(engine, &q.transactional_id, producer, &q.group_id, offsets).await
            };
            let answer: Vec<_> = q
                .topics
                .iter()
                .map(|(t, ps)| (t.clone(), ps.iter().map(|p| (p.0, e)).collect()))
                .collect();
            tp::encode_txn_offset_commit(w, version, &answer)
        }
        tp::END_TXN => {
            let q = tp::decode_end_txn(r, version)?;
            let producer = (q.producer_id, q.producer_epoch);
            let e = end(engine, &q.transactional_id, producer, q.committed, version).await;
            tp::encode_end_txn(w, version, e, producer)
        }
        tp::DESCRIBE_TRANSACTIONS => {
            let ids = tp::decode_describe_transactions(r, version)?;
            let described: Vec<DescribedTxn> = describe(engine, &ids)
                .into_iter()
                .map(|(id, found)| match found {
                    Ok(s) => DescribedTxn {
                        error_code: code::NONE,
                        transactional_id: id,
                        state: s.state.name().to_string(),
                        timeout_ms: i32::try_from(s.timeout_ms).unwrap_or(i32::MAX),
                        producer_id: s.producer_id,
                        producer_epoch: s.producer_epoch,
                        topics: by_topic(&s.partitions),
                    },
                    Err(e) => DescribedTxn {
                        error_code: e,
                        transactional_id: id,
                        state: String::new(),
                        timeout_ms: 0,
                        producer_id: -1,
                        producer_epoch: -1,
                        topics: Vec::new(),
                    },
                })
                .collect();
            tp::encode_describe_transactions(w, version, &described)
        }
        tp::LIST_TRANSACTIONS => {
            let q = tp::decode_list_transactions(r, version)?;
            let (listed, unknown) = list(engine, &q.state_filters, &q.producer_id_filters);
            // The duration filter needs a start time the record does not
            // keep (it holds the log index); the pattern is matched here.
            let listed: Vec<_> = match q
                .transactional_id_pattern
                .as_deref()
                .map(super::groups::consumer::compile_regex)
            {
                Some(Ok(re)) => listed.into_iter().filter(|(id, _, _)| re.is_match(id)).collect(),
                Some(Err(_)) => return tp::encode_list_transactions(w, version, code::INVALID_REQUEST, &[], &[]),
                None => listed,
            };
            tp::encode_list_transactions(w, version, code::NONE, &unknown, &listed)
        }
        _ => unreachable!("is_txn_api admits only the keys above"),
    }
}

/// Partitions grouped by topic, in order.
fn by_topic(partitions: &[(String, u32)]) -> Vec<(String, Vec<i32>)> {
    let mut out: Vec<(String, Vec<i32>)> = Vec::new();
    for (t, p) in partitions {
        let p = i32::try_from(*p).unwrap_or(i32::MAX);
        match out.last_mut() {
            Some((last, ps)) if last == t => ps.push(p),
            _ => out.push((t.clone(), vec![p])),
        }
    }
    out
}

/// Which transaction of an id: (producer id, epoch, log index it started at).
type TxnKey = (i64, i16, u64);

/// When this node first saw each ongoing transaction it coordinates:
/// transactional id -> (which transaction, first seen).
#[derive(Debug, Default)]
pub struct TxnTimers {
    seen: Mutex<BTreeMap<String, (TxnKey, Instant)>>,
}

/// What the coordinator should do about one record now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    Nothing,
    Finish,
    Abort,
}

impl TxnTimers {
    /// Decide for every record (`coordinated`: this node coordinates it),
    /// and forget the timers of transactions no longer ongoing here.
    fn due(
        &self,
        rows: &[(String, TxnSummary)],
        coordinated: impl Fn(&str) -> bool,
        now: Instant,
    ) -> Vec<(String, Due)> {
        let mut seen = self.seen.lock().unwrap();
        let mut out = Vec::new();
        let mut live = std::collections::BTreeSet::new();
        for (id, s) in rows {
            if !coordinated(id) {
                continue;
            }
            let due = match s.state {
                TxnState::PrepareCommit | TxnState::PrepareAbort => Due::Finish,
                TxnState::Ongoing => {
                    live.insert(id.as_str());
                    let key = (s.producer_id, s.producer_epoch, s.started_at);
                    let entry = seen.entry(id.clone()).or_insert((key, now));
                    if entry.0 != key {
                        *entry = (key, now);
                    }
                    if now.duration_since(entry.1) >= Duration::from_millis(u64::from(s.timeout_ms)) {
                        Due::Abort
                    } else {
                        Due::Nothing
                    }
                }
                _ => Due::Nothing,
            };
            if due != Due::Nothing {
                out.push((id.clone(), due));
            }
        }
        seen.retain(|id, _| live.contains(id.as_str()));
        out
    }
}

/// The coordinator's periodic work (see the module doc).
pub async fn tick(engine: &Services, timers: &TxnTimers, now: Instant) {
    let rows = engine.producer_ids.transactions();
    if rows.is_empty() {
        return;
    }
    let due = timers.due(&rows, |id| check_coordinator(engine, id).is_ok(), now);
    for (id, due) in due {
        if due == Due::Abort {
            let Some((_, s)) = rows.iter().find(|(t, _)| *t == id) else {
                continue;
            };
            let req = TxnRequest::Abort {
                producer_id: s.producer_id,
                epoch: s.producer_epoch,
            };
            match engine.producer_ids.transaction(&id, req).await {
                Ok(Ok(_)) => {
                    tracing::info!(transactional_id = %id, "transaction timed out after {} ms: aborted", s.timeout_ms)
                }
                Ok(Err(_)) => continue, // changed meanwhile
                Err(_) => return,       // the log is out of reach: next tick
            }
        }
        if finish(engine, &id).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_producer_gets_the_code_of_its_request_version() {
        let old = Fencing::since(1, 2);
        let new = Fencing::since(2, 2);
        assert_eq!(refusal_code(TxnRefusal::Fenced, old), code::INVALID_PRODUCER_EPOCH);
        assert_eq!(refusal_code(TxnRefusal::Fenced, new), PRODUCER_FENCED);
        assert_eq!(refusal_code(TxnRefusal::Concurrent, new), CONCURRENT_TRANSACTIONS);
        assert_eq!(refusal_code(TxnRefusal::InvalidState, new), INVALID_TXN_STATE);
        assert_eq!(
            refusal_code(TxnRefusal::UnknownProducer, new),
            INVALID_PRODUCER_ID_MAPPING
        );
    }

    fn summary(state: TxnState, epoch: i16, started_at: u64) -> TxnSummary {
        TxnSummary {
            producer_id: 7,
            producer_epoch: epoch,
            state,
            timeout_ms: 1_000,
            started_at,
            partitions: Vec::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_ongoing_transaction_is_aborted_once_its_timeout_passed_since_first_seen() {
        let timers = TxnTimers::default();
        let t0 = Instant::now();
        let rows = vec![("a".to_string(), summary(TxnState::Ongoing, 0, 5))];
        let mine = |_: &str| true;
        assert!(timers.due(&rows, mine, t0).is_empty());
        assert!(timers.due(&rows, mine, t0 + Duration::from_millis(999)).is_empty());
        assert_eq!(
            timers.due(&rows, mine, t0 + Duration::from_millis(1_000)),
            vec![("a".to_string(), Due::Abort)]
        );
        // A new transaction (another start) is timed afresh.
        let next = vec![("a".to_string(), summary(TxnState::Ongoing, 0, 9))];
        assert!(timers.due(&next, mine, t0 + Duration::from_millis(1_500)).is_empty());
        assert_eq!(
            timers.due(&next, mine, t0 + Duration::from_millis(2_500)),
            vec![("a".to_string(), Due::Abort)]
        );
        // Another node's transactions are not this node's to time.
        assert!(timers.due(&next, |_| false, t0 + Duration::from_secs(60)).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_ending_transaction_is_finished_and_an_idle_one_left_alone() {
        let timers = TxnTimers::default();
        let now = Instant::now();
        let rows = vec![
            ("p".to_string(), summary(TxnState::PrepareCommit, 1, 3)),
            ("q".to_string(), summary(TxnState::PrepareAbort, 1, 3)),
            ("e".to_string(), summary(TxnState::CompleteCommit, 1, 3)),
            ("f".to_string(), summary(TxnState::Empty, 1, 0)),
        ];
        assert_eq!(
            timers.due(&rows, |_| true, now + Duration::from_secs(3_600)),
            vec![("p".to_string(), Due::Finish), ("q".to_string(), Due::Finish)]
        );
    }

    #[test]
    fn verify_only_answers_per_partition_whether_the_transaction_writes_it() {
        let row = TxnSummary {
            producer_id: 7,
            producer_epoch: 2,
            state: TxnState::Ongoing,
            timeout_ms: 60_000,
            started_at: 4,
            partitions: vec![("t".into(), 0)],
        };
        let f = Fencing::since(4, 2);
        assert_eq!(verify(Some(&row), (7, 2), "t", 0, f), code::NONE);
        assert_eq!(verify(Some(&row), (7, 2), "t", 1, f), INVALID_TXN_STATE);
        assert_eq!(verify(Some(&row), (7, 1), "t", 0, f), PRODUCER_FENCED);
        assert_eq!(verify(Some(&row), (8, 2), "t", 0, f), INVALID_PRODUCER_ID_MAPPING);
        assert_eq!(verify(None, (7, 2), "t", 0, f), INVALID_PRODUCER_ID_MAPPING);
        let ended = TxnSummary {
            state: TxnState::CompleteCommit,
            ..row
        };
        assert_eq!(verify(Some(&ended), (7, 2), "t", 0, f), INVALID_TXN_STATE);
    }
}
