//! OffsetDelete (v0): forget some of a consumer group's committed offsets,
//! as Apache Kafka's broker and group coordinator do it. The caller must be
//! allowed to delete the group (else `GROUP_AUTHORIZATION_FAILED` for the
//! whole request) and to read each topic (else `TOPIC_AUTHORIZATION_FAILED`
//! for its partitions); unknown topics and partitions answer
//! `UNKNOWN_TOPIC_OR_PARTITION`. Then the group's coordinator decides: a
//! group that does not exist is `GROUP_ID_NOT_FOUND`; in a group with
//! members, the partitions of topics the members subscribe to keep their
//! offsets (`GROUP_SUBSCRIBED_TO_TOPIC`) and the rest are deleted, and a
//! classic group with members that is not of the consumer protocol refuses
//! it all (`NON_EMPTY_GROUP`); in an empty group every asked partition is
//! deleted. A partition with no committed offset answers `NONE` too.
//!
//! Which topics a group subscribes to ([`Subscribed`]): a classic group's
//! from its members' `ConsumerProtocolSubscription` metadata (the v0 prefix
//! every version shares; metadata that does not parse counts as a
//! subscription to every topic, as in Kafka), a KIP-848 consumer group's
//! from its members' topic names and regexes.

use super::consumer_coordinator;
use super::group_placement::check_coordinator;
use super::groups::{self, code as gcode, Groups, Phase};
use super::proto::Fields;
use super::wire::{DecodeResult, Reader, Writer};
use super::{code, coordinator};
use crate::api::{ErrorCode, Services};
use bytes::Bytes;
use kafka_protocol::messages as km;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeSet;

pub const OFFSET_DELETE: i16 = 47;

pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetDeleteRequest {
    pub group_id: String,
    /// (topic, partitions) as asked.
    pub topics: Vec<(String, Vec<i32>)>,
}

pub fn decode_offset_delete(r: &mut Reader, _version: i16) -> DecodeResult<OffsetDeleteRequest> {
    let mut f = Fields::new(r, false);
    let group_id = f.string()?;
    let topics = f.per_topic(4, |f| f.r.i32())?;
    f.r.expect_end()?;
    Ok(OffsetDeleteRequest { group_id, topics })
}

/// The answer: a request-wide error (then no topics, as Kafka answers), or
/// per partition its error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetDeleteAnswer {
    pub error_code: i16,
    pub topics: Vec<(String, Vec<(i32, i16)>)>,
}

impl OffsetDeleteAnswer {
    fn failed(error_code: i16) -> Self {
        Self {
            error_code,
            topics: Vec::new(),
        }
    }
}

pub fn encode_offset_delete(w: &mut Writer, version: i16, answer: &OffsetDeleteAnswer) -> DecodeResult<()> {
    use km::offset_delete_response as o;
    let topics = answer
        .topics
        .iter()
        .map(|(name, partitions)| {
            o::OffsetDeleteResponseTopic::default()
                .with_name(StrBytes::from_string(name.clone()).into())
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&(p, e)| {
                            o::OffsetDeleteResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(e)
                        })
                        .collect(),
                )
        })
        .collect();
    let resp = km::OffsetDeleteResponse::default()
        .with_error_code(answer.error_code)
        .with_topics(topics);
    w.message(&resp, version)
}

/// The topics whose offsets a group keeps (Kafka's `isSubscribedToTopic`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscribed {
    /// An empty group: none.
    Nothing,
    Topics(BTreeSet<String>),
    /// A consumer-protocol group whose subscriptions cannot be read.
    Everything,
}

impl Subscribed {
    pub fn covers(&self, topic: &str) -> bool {
        match self {
            Subscribed::Nothing => false,
            Subscribed::Topics(t) => t.contains(topic),
            Subscribed::Everything => true,
        }
    }
}

/// A classic group's subscriptions (Kafka's `ClassicGroup`
/// `validateOffsetDelete` and `computeSubscribedTopics`): an Empty group has
/// none; one with members must be of the consumer protocol
/// (`Err(NON_EMPTY_GROUP)` otherwise), and subscribes to what its members'
/// metadata for the group's protocol names (every topic while no protocol is
/// chosen, or when any member's metadata does not parse).
pub fn classic_subscriptions(g: &groups::Group) -> Result<Subscribed, i16> {
    if g.phase == Phase::Empty {
        return Ok(Subscribed::Nothing);
    }
    if g.protocol_type != "consumer" {
        return Err(gcode::NON_EMPTY_GROUP);
    }
    let Some(protocol) = &g.protocol else {
        return Ok(Subscribed::Everything);
    };
    let mut topics = BTreeSet::new();
    for m in g.members.values() {
        let metadata = m
            .info
            .protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, b)| b);
        match metadata.and_then(|b| subscription_topics(b.clone())) {
            Some(t) => topics.extend(t),
            None => return Ok(Subscribed::Everything),
        }
    }
    Ok(Subscribed::Topics(topics))
}

/// The topics of a `ConsumerProtocolSubscription`: its version (not
/// negative), then the v0 fields every version starts with (topics, user
/// data); later fields are not read. `None` if that much does not parse.
pub fn subscription_topics(metadata: Bytes) -> Option<Vec<String>> {
    let mut r = Reader::new(metadata);
    if r.i16().ok()? < 0 {
        return None;
    }
    let n = r.array_len(2).ok()?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        topics.push(r.string().ok()?);
    }
    r.nullable_bytes().ok()?;
    Some(topics)
}

/// One topic's partitions, each with its verdict before the coordinator
/// decides: `None` while it may still be deleted.
type Checked = (String, Vec<(i32, Option<i16>)>);

/// The broker's checks of each asked topic: READ on it, and that it and
/// the partition exist.
fn check_topics(engine: &Services, group: &str, topics: Vec<(String, Vec<i32>)>) -> Vec<Checked> {
    let mut out: Vec<Checked> = Vec::with_capacity(topics.len());
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (topic, partitions) in topics {
        let count = if engine.group_offsets.authorize_offset_delete(group, &topic).is_err() {
            Err(code::TOPIC_AUTHORIZATION_FAILED)
        } else {
            engine.topics.partitions(&topic).map_err(|e| match e.code {
                ErrorCode::Forbidden => code::TOPIC_AUTHORIZATION_FAILED,
                _ => code::UNKNOWN_TOPIC_OR_PARTITION,
            })
        };
        let verdicts = partitions.into_iter().map(|p| {
            let verdict = match count {
                Err(e) => Some(e),
                Ok(n) if u32::try_from(p).is_ok_and(|p| p < n) => None,
                Ok(_) => Some(code::UNKNOWN_TOPIC_OR_PARTITION),
            };
            (p, verdict)
        });
        // A topic named twice is answered once, with all its partitions.
        match seen.get(&topic) {
            Some(&i) => out[i].1.extend(verdicts),
            None => {
                seen.insert(topic.clone(), out.len());
                out.push((topic, verdicts.collect()));
            }
        }
    }
    out
}

/// The group's subscriptions on its coordinator, or the request-wide error.
async fn subscriptions(engine: &Services, groups: &Groups, group: &str) -> Result<Subscribed, i16> {
    check_coordinator(engine, group)?;
    coordinator::load(engine, groups, group);
    let classic = groups.describe(group);
    let consumer = consumer_coordinator::subscribed_topics(engine, groups, group);
    let exists = classic.is_some()
        || consumer.is_some()
        || engine.group_offsets.group_state(group).is_some()
        || engine.group_offsets.offset_groups().iter().any(|g| g == group);
    if !exists {
        return Err(gcode::GROUP_ID_NOT_FOUND);
    }
    match (classic, consumer) {
        (Some(g), _) if g.phase != Phase::Empty => classic_subscriptions(&g),
        (_, Some(topics)) => Ok(Subscribed::Topics(topics)),
        _ => Ok(Subscribed::Nothing),
    }
}

pub async fn offset_delete(engine: &Services, groups: &Groups, req: OffsetDeleteRequest) -> OffsetDeleteAnswer {
    let group = req.group_id.as_str();
    if engine.group_offsets.authorize_group_delete(group).is_err() {
        return OffsetDeleteAnswer::failed(gcode::GROUP_AUTHORIZATION_FAILED);
    }
    let checked = check_topics(engine, group, req.topics);
    if group.is_empty() {
        return OffsetDeleteAnswer::failed(gcode::INVALID_GROUP_ID);
    }
    let subscribed = match subscriptions(engine, groups, group).await {
        Ok(s) => s,
        Err(e) => return OffsetDeleteAnswer::failed(e),
    };
    let mut doomed = Vec::new();
    let topics: Vec<(String, Vec<(i32, i16)>)> = checked
        .into_iter()
        .map(|(topic, partitions)| {
            let keep = subscribed.covers(&topic);
            let answers = partitions
                .into_iter()
                .map(|(p, verdict)| match verdict {
                    Some(e) => (p, e),
                    None if keep => (p, GROUP_SUBSCRIBED_TO_TOPIC),
                    None => {
                        doomed.push((topic.clone(), p as u32));
                        (p, code::NONE)
                    }
                })
                .collect();
            (topic, answers)
        })
        .collect();
    if !doomed.is_empty() {
        if let Err(e) = engine.group_offsets.delete_offsets(group, doomed).await {
            tracing::info!(group, error = %e, "offsets not deleted");
            return OffsetDeleteAnswer::failed(match e.code {
                ErrorCode::Unavailable => gcode::COORDINATOR_NOT_AVAILABLE,
                ErrorCode::Forbidden => gcode::GROUP_AUTHORIZATION_FAILED,
                _ => code::UNKNOWN_SERVER_ERROR,
            });
        }
    }
    OffsetDeleteAnswer {
        error_code: code::NONE,
        topics,
    }
}

pub(super) async fn request(
    engine: &Services,
    groups: &Groups,
    version: i16,
    r: &mut Reader,
    w: &mut Writer,
) -> DecodeResult<()> {
    let req = decode_offset_delete(r, version)?;
    let answer = offset_delete(engine, groups, req).await;
    encode_offset_delete(w, version, &answer)
}
