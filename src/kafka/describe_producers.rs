//! DescribeProducers (v0, flexible): the idempotent producers a partition
//! remembers, answered by the partition's owner from its stream's producer
//! table ([`Records::producers`]) as a Kafka leader answers from its
//! producer state. Per producer: its epoch, the last sequence it wrote,
//! the largest timestamp of its last batch while that batch is in the
//! owner's tail (-1 once it is in a data object), and -1 for the
//! coordinator epoch and the current transaction's start offset (there are
//! no transactions). A node that does not own the partition answers
//! `NOT_LEADER_OR_FOLLOWER` (no node holds a follower copy); an unknown one
//! `UNKNOWN_TOPIC_OR_PARTITION`; a caller without READ on the topic
//! `TOPIC_AUTHORIZATION_FAILED`.
//!
//! [`Records::producers`]: crate::api::Records::producers

use super::proto::Fields;
use super::wire::{DecodeResult, Reader, Writer};
use super::{code, error_code};
use crate::api::{ProducerState, Services};
use kafka_protocol::messages as km;
use kafka_protocol::protocol::StrBytes;

pub const DESCRIBE_PRODUCERS: i16 = 61;

/// (topic, partitions) as asked.
pub type DescribeProducersRequest = Vec<(String, Vec<i32>)>;

pub fn decode_describe_producers(r: &mut Reader, _version: i16) -> DecodeResult<DescribeProducersRequest> {
    let mut f = Fields::new(r, true);
    let n = f.array_len(f.min_string() + f.min_array() + f.min_tags())?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = f.string()?;
        let m = f.array_len(4)?;
        let mut partitions = Vec::with_capacity(m);
        for _ in 0..m {
            partitions.push(f.r.i32()?);
        }
        f.tags()?;
        topics.push((name, partitions));
    }
    f.tags()?;
    f.r.expect_end()?;
    Ok(topics)
}

/// One partition of the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionProducers {
    pub partition: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub producers: Vec<ProducerState>,
}

impl PartitionProducers {
    fn failed(partition: i32, error_code: i16, message: String) -> Self {
        Self {
            partition,
            error_code,
            error_message: Some(message),
            producers: Vec::new(),
        }
    }
}

pub fn encode_describe_producers(
    w: &mut Writer,
    version: i16,
    topics: &[(String, Vec<PartitionProducers>)],
) -> DecodeResult<()> {
    use km::describe_producers_response as d;
    let state = |p: &ProducerState| {
        d::ProducerState::default()
            .with_producer_id(p.producer_id.into())
            .with_producer_epoch(i32::from(p.producer_epoch))
            .with_last_sequence(p.last_sequence)
            .with_last_timestamp(p.last_timestamp.unwrap_or(-1))
            .with_coordinator_epoch(-1)
            .with_current_txn_start_offset(-1)
    };
    let topics = topics
        .iter()
        .map(|(name, partitions)| {
            d::TopicResponse::default()
                .with_name(StrBytes::from_string(name.clone()).into())
                .with_partitions(
                    partitions
                        .iter()
                        .map(|p| {
                            d::PartitionResponse::default()
                                .with_partition_index(p.partition)
                                .with_error_code(p.error_code)
                                .with_error_message(p.error_message.clone().map(StrBytes::from_string))
                                .with_active_producers(p.producers.iter().map(state).collect())
                        })
                        .collect(),
                )
        })
        .collect();
    w.message(&km::DescribeProducersResponse::default().with_topics(topics), version)
}

pub async fn describe_producers(
    engine: &Services,
    req: DescribeProducersRequest,
) -> Vec<(String, Vec<PartitionProducers>)> {
    let mut out = Vec::with_capacity(req.len());
    for (topic, partitions) in req {
        let invalid = crate::meta::view::validate_topic_name(&topic).err();
        let mut answers = Vec::with_capacity(partitions.len());
        for p in partitions {
            let answer = match (&invalid, u32::try_from(p)) {
                (Some(why), _) => PartitionProducers::failed(p, code::INVALID_TOPIC_EXCEPTION, why.clone()),
                (None, Err(_)) => PartitionProducers::failed(
                    p,
                    code::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("partition {p} does not exist"),
                ),
                (None, Ok(partition)) => match engine.records.producers(&topic, partition).await {
                    Ok(producers) => PartitionProducers {
                        partition: p,
                        error_code: code::NONE,
                        error_message: None,
                        producers,
                    },
                    Err(e) => PartitionProducers::failed(p, error_code(&e), e.message),
                },
            };
            answers.push(answer);
        }
        out.push((topic, answers));
    }
    out
}

pub(super) async fn request(engine: &Services, version: i16, r: &mut Reader, w: &mut Writer) -> DecodeResult<()> {
    let req = decode_describe_producers(r, version)?;
    let topics = describe_producers(engine, req).await;
    encode_describe_producers(w, version, &topics)
}
