//! Produce: every partition's batches are checked (CRC, size, no control
//! batches from clients) before any is appended, then handed to the
//! [`Records`](crate::api::Records) capability as stored RecordBatch v2
//! bytes. Idempotent producers' sequences are checked where offsets are
//! assigned (`stream::partition`); producer ids come from
//! [`producer_ids`](super::producer_ids).
//!
//! A transactional producer's batches are accepted only for a partition
//! its transactional id's record (in this node's view of the metadata log)
//! says is in its ongoing transaction at its epoch — KIP-890's check,
//! made here by the leader itself, so a fenced zombie cannot leave a
//! transaction hanging in a partition. A view that has not seen the
//! AddPartitionsToTxn yet catches up first. The requests of one
//! connection pass this check one at a time, in arrival order, through its
//! [`ProduceOrder`], so their offsets are still assigned in that order.
//!
//! A partition this node does not know or lead yet is tried again after
//! catching up with the metadata log ([`super::catch_up`]), unless its
//! batches carry producer sequences (those must land in arrival order).
//!
//! A connection polls a Produce once on arrival and relies on that first
//! poll assigning all of the request's offsets (see `connection` in
//! `kafka/mod.rs`), so every append is started before any is awaited.

use super::proto::*;
use super::{code, error_code};
use crate::api::Services;
use crate::ids::TopicUuid;
use bytes::Bytes;

/// One connection's turn for transactional Produce requests: each holds it
/// from its arrival until its offsets are assigned (see the module doc).
#[derive(Debug, Default)]
pub struct ProduceOrder(tokio::sync::Mutex<()>);

/// A Produce's answers per topic, and each topic's id (v13 names topics
/// by id; an id naming no topic answers `UNKNOWN_TOPIC_ID`).
pub(super) async fn produce(
    engine: &Services,
    order: &ProduceOrder,
    mut req: ProduceRequest,
) -> (Vec<(String, Vec<ProducePartitionResponse>)>, Vec<TopicUuid>) {
    // Taken on the request's first poll, in arrival order (the lock is fair).
    let turn = match req.transactional_id {
        Some(_) => Some(order.0.lock().await),
        None => None,
    };
    let ids = std::mem::take(&mut req.topic_ids);
    let names = if ids.is_empty() {
        Default::default()
    } else {
        super::topic_names(engine, ids.iter()).await
    };
    for (i, id) in ids.iter().enumerate() {
        req.topics[i].0 = names.get(id).cloned().unwrap_or_default();
    }
    let verdicts = match &req.transactional_id {
        Some(id) => verify_all(engine, id, &req).await,
        None => Vec::new(),
    };
    let mut answers = std::pin::pin!(append_all(engine, req, verdicts, ids));
    // One poll assigns every offset of the request; then the turn passes on.
    let first = futures::poll!(answers.as_mut());
    drop(turn);
    match first {
        std::task::Poll::Ready(a) => a,
        std::task::Poll::Pending => answers.await,
    }
}

/// For each partition of a transactional request, in request order: `None`
/// when its batches may be appended, else the code and message refusing
/// them. If the view refuses any for a reason a later change to the record
/// could explain (it has not seen the AddPartitionsToTxn yet), it is
/// caught up once and asked again; a newer epoch is final at once.
async fn verify_all(engine: &Services, id: &str, req: &ProduceRequest) -> Vec<Option<(i16, String)>> {
    // (topic, partition, the transactional producer of its first batch)
    let parts: Vec<_> = (req.topics.iter())
        .flat_map(|(topic, parts)| parts.iter().map(move |(p, records)| (topic.as_str(), *p, records)))
        .map(|(topic, p, records)| {
            let info = records
                .as_ref()
                .and_then(|r| crate::batch::parse_batch("produce", r).ok());
            let producer = info
                .filter(|i| i.is_transactional)
                .map(|i| (i.producer_id, i.producer_epoch));
            (topic, p, producer)
        })
        .collect();
    let fencing = super::txn_coordinator::Fencing::since(0, 1);
    // (code, final) per refused partition.
    let check = || -> Vec<Option<(i16, bool)>> {
        let row = engine.producer_ids.txn(id);
        (parts.iter())
            .map(|&(topic, p, producer)| {
                let producer = producer?; // not transactional: refused with the rest
                let code = super::txn_coordinator::verify(row.as_ref(), producer, topic, p, fencing);
                let fenced =
                    (row.as_ref()).is_some_and(|r| r.producer_id == producer.0 && r.producer_epoch > producer.1);
                (code != code::NONE).then_some((code, fenced))
            })
            .collect()
    };
    let mut verdicts = check();
    if verdicts.iter().flatten().any(|(_, fenced)| !fenced) {
        let _ = engine.cluster.sync_metadata().await;
        verdicts = check();
    }
    verdicts
        .into_iter()
        .map(|v| {
            v.map(|(code, fenced)| {
                let why = if fenced {
                    "the producer was fenced by a newer epoch"
                } else {
                    "the partition is not in an ongoing transaction of this producer at this epoch"
                };
                (code, format!("transactional id {id:?}: {why}"))
            })
        })
        .collect()
}

/// The appends of a request whose transactional partitions were verified
/// (`verdicts`, see [`verify_all`]).
async fn append_all(
    engine: &Services,
    req: ProduceRequest,
    verdicts: Vec<Option<(i16, String)>>,
    ids: Vec<TopicUuid>,
) -> (Vec<(String, Vec<ProducePartitionResponse>)>, Vec<TopicUuid>) {
    let transactional = req.transactional_id.is_some();
    let request_error = if !matches!(req.acks, -1..=1) {
        Some((code::INVALID_REQUIRED_ACKS, "acks must be -1, 0 or 1"))
    } else {
        None
    };
    let mut verdicts = verdicts.into_iter();
    // Every partition of every topic at once: polling this future once
    // assigns all of the request's offsets (the connection relies on it).
    let counts: Vec<(String, usize)> = req.topics.iter().map(|(t, p)| (t.clone(), p.len())).collect();
    let by_id = !ids.is_empty();
    let all = (req.topics.into_iter())
        .flat_map(|(topic, parts)| parts.into_iter().map(move |(p, records)| (topic.clone(), p, records)))
        .map(|(topic, p, records)| (topic, p, records, verdicts.next().flatten()));
    let all: Vec<_> = all.collect();
    let mut answers =
        futures::future::join_all(all.into_iter().map(|(topic, partition, records, refused)| async move {
            if let Some((error_code, message)) = request_error {
                return produce_error(partition, error_code, message.to_string());
            }
            if by_id && topic.is_empty() {
                return produce_error(partition, code::UNKNOWN_TOPIC_ID, "no topic has this id".into());
            }
            if let Some((error_code, message)) = refused {
                return produce_error(partition, error_code, message);
            }
            produce_partition(engine, &topic, partition, records, transactional).await
        }))
        .await
        .into_iter();
    let topics = counts
        .into_iter()
        .map(|(topic, n)| (topic, answers.by_ref().take(n).collect()))
        .collect();
    (topics, ids)
}

fn produce_error(partition: i32, error_code: i16, message: String) -> ProducePartitionResponse {
    ProducePartitionResponse {
        partition,
        error_code,
        base_offset: -1,
        log_start_offset: -1,
        error_message: Some(message),
    }
}

/// Validates every batch of one partition's records (nothing is appended
/// unless all are valid), then appends them in order. Transactional
/// batches only come with a `transactional` request (already verified).
pub async fn produce_partition(
    engine: &Services,
    topic: &str,
    partition: i32,
    records: Option<Bytes>,
    transactional: bool,
) -> ProducePartitionResponse {
    let fail = |error_code, message: String| produce_error(partition, error_code, message);
    let Ok(p) = u32::try_from(partition) else {
        return fail(code::UNKNOWN_TOPIC_OR_PARTITION, format!("partition {partition}"));
    };
    let records = match records {
        Some(r) if !r.is_empty() => r,
        _ => return fail(code::CORRUPT_MESSAGE, "no records".into()),
    };
    let limits = engine.limits;
    if records.len() > limits.max_request_bytes {
        return fail(
            code::MESSAGE_TOO_LARGE,
            format!(
                "{} bytes of records (limit {})",
                records.len(),
                limits.max_request_bytes
            ),
        );
    }
    // A compacted topic keeps the latest record of each key: a record
    // without one is refused, as Kafka refuses it.
    let keyed = engine.topics.config(topic).is_ok_and(|c| c.compacts());
    let mut to_append = Vec::new();
    let mut sequenced = false;
    for batch in crate::batch::batches("produce", &records) {
        let (info, raw) = match batch {
            Ok(b) => b,
            Err(e) => return fail(code::CORRUPT_MESSAGE, e.to_string()),
        };
        sequenced |= info.producer_id >= 0 && info.base_sequence >= 0;
        if info.is_control {
            return fail(
                code::INVALID_RECORD,
                "control batches are written by the broker only".into(),
            );
        }
        if info.is_transactional != transactional {
            let why = if transactional {
                "a transactional request's batches must all be transactional"
            } else {
                "a transactional batch needs the request's transactional id"
            };
            return fail(code::INVALID_REQUEST, why.into());
        }
        match crate::batch::decode_producer_records("produce", raw) {
            Ok(rs) => {
                if let Some(big) = rs
                    .iter()
                    .map(|(_, r)| crate::stream::partition::record_size(r))
                    .find(|&n| n > limits.max_record_bytes)
                {
                    return fail(
                        code::MESSAGE_TOO_LARGE,
                        format!("a {big}-byte record (limit {})", limits.max_record_bytes),
                    );
                }
                if keyed && rs.iter().any(|(_, r)| r.key.is_none()) {
                    return fail(
                        code::INVALID_RECORD,
                        format!("compacted topic {topic} cannot accept a record without a key (partition {partition})"),
                    );
                }
            }
            Err(e) => return fail(code::CORRUPT_MESSAGE, e.to_string()),
        }
        to_append.push(records.slice_ref(raw));
    }
    // All batches are handed to the engine at once, in order, so their
    // offsets are assigned on this future's first poll.
    // On a partition this node does not know or lead yet (a topic just
    // created through another node), catch up with the metadata log first.
    //
    // Not for an idempotent producer's batches: their sequence numbers
    // must be assigned in the order the connection received them, and the
    // pipelined requests waiting in a catch-up retry in no particular
    // order. (The chaos test saw librdkafka's request with sequence 308
    // retried before 305-307 had landed: OUT_OF_ORDER_SEQUENCE_NUMBER, then
    // acks for 305-307 in request order, and a fatal "sequence
    // desynchronization".) They get the first answer, as from a Kafka
    // broker, and the client retries them in order.
    let appended = futures::future::join_all(to_append.into_iter().map(|batch| async move {
        let append = move || engine.records.append_batch(topic, p, batch.clone());
        if sequenced {
            append().await
        } else {
            super::catch_up(engine, topic, p, append).await
        }
    }))
    .await;
    let mut base = None;
    for a in appended {
        match a {
            Ok(a) => {
                base.get_or_insert(a.base);
            }
            Err(e) => return fail(error_code(&e), e.message),
        }
    }
    ProducePartitionResponse {
        partition,
        error_code: code::NONE,
        base_offset: base.map_or(-1, |b| b.get() as i64),
        log_start_offset: -1,
        error_message: None,
    }
}
