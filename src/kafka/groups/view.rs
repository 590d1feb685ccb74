//! What a person is shown of a consumer group (the console, `GET
//! /v1/groups/{group}`): its kind, state and members with the partitions
//! each is assigned, decoded from the membership record the metadata log
//! keeps ([`super::record`] for classic groups, [`super::consumer`] for
//! KIP-848 ones). Read-only and pure: a record that does not decode is
//! shown as such, never an error.

use super::{consumer, record};
use crate::api::GroupState;
use crate::ids::TopicUuid;
use crate::kafka::wire::{DecodeResult, Reader};
use bytes::Bytes;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupView {
    /// `classic`, `consumer` (KIP-848), or `offsets` for a group that only
    /// has committed offsets.
    pub kind: String,
    /// Kafka's state names: Empty, Stable, Assigning, Reconciling, or
    /// `unreadable` for a record this version cannot decode.
    pub state: String,
    /// The generation (classic) or group epoch (consumer).
    pub generation: i32,
    /// The assignment protocol (classic: `range`, `roundrobin`...;
    /// consumer: the server-side assignor).
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: Vec<MemberView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemberView {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub assignment: Vec<TopicPartitions>,
    /// Why the member's assignment could not be read (a classic
    /// assignment is bytes the group's leader wrote); absent when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignment_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicPartitions {
    pub topic: String,
    pub partitions: Vec<i32>,
}

/// The view of a group with no membership record (offsets only).
pub fn offsets_only() -> GroupView {
    GroupView {
        kind: "offsets".into(),
        state: "Empty".into(),
        generation: 0,
        protocol: None,
        leader: None,
        members: Vec::new(),
    }
}

/// The view of `state`; `names` gives a topic id's name (KIP-848 records
/// name topics by id).
pub fn view(state: &GroupState, names: &BTreeMap<TopicUuid, String>) -> GroupView {
    let decoded = match state.kind.as_str() {
        record::KIND => classic(&state.data),
        _ => consumer::decode_state(&state.data).map(|g| kip848(&g, names)),
    };
    decoded.unwrap_or_else(|| GroupView {
        kind: state.kind.clone(),
        state: "unreadable".into(),
        ..offsets_only()
    })
}

fn classic(data: &[u8]) -> Option<GroupView> {
    let g = record::decode(data).ok()?;
    let consumer = g.protocol_type == "consumer";
    let members = g
        .members
        .iter()
        .map(|m| {
            let assignment = if consumer {
                consumer_assignment(&m.assignment).map_err(|e| format!("unreadable assignment: {e}"))
            } else {
                Ok(Vec::new())
            };
            member(
                &m.id,
                m.instance_id.as_deref(),
                &m.client_id,
                &m.client_host,
                assignment,
            )
        })
        .collect::<Vec<_>>();
    Some(GroupView {
        kind: record::KIND.into(),
        state: if members.is_empty() { "Empty" } else { "Stable" }.into(),
        generation: g.generation,
        protocol: g.protocol,
        leader: g.leader,
        members,
    })
}

fn member(
    id: &str,
    instance_id: Option<&str>,
    client_id: &str,
    client_host: &str,
    assignment: Result<Vec<TopicPartitions>, String>,
) -> MemberView {
    let (assignment, assignment_error) = match assignment {
        Ok(a) => (a, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    MemberView {
        member_id: id.to_owned(),
        instance_id: instance_id.map(str::to_owned),
        client_id: client_id.to_owned(),
        client_host: client_host.to_owned(),
        assignment,
        assignment_error,
    }
}

/// A `ConsumerProtocolAssignment` (any version): the topics and partitions
/// before the user data. Bounded like any decoder: counts are checked
/// against the bytes left.
pub fn consumer_assignment(b: &Bytes) -> DecodeResult<Vec<TopicPartitions>> {
    if b.is_empty() {
        return Ok(Vec::new());
    }
    let mut r = Reader::new(b.clone());
    let _version = r.i16()?;
    let topics = r.array_len(2 + 4)?;
    let mut out = Vec::with_capacity(topics);
    for _ in 0..topics {
        let topic = r.string()?;
        let n = r.array_len(4)?;
        let mut partitions = Vec::with_capacity(n);
        for _ in 0..n {
            partitions.push(r.i32()?);
        }
        out.push(TopicPartitions { topic, partitions });
    }
    Ok(out)
}

fn kip848(g: &consumer::GroupState, names: &BTreeMap<TopicUuid, String>) -> GroupView {
    let members = g
        .members
        .values()
        .map(|m| {
            let assignment = m
                .assigned
                .iter()
                .map(|(id, parts)| TopicPartitions {
                    topic: names.get(id).cloned().unwrap_or_else(|| id.to_string()),
                    partitions: parts.iter().copied().collect(),
                })
                .collect();
            member(
                &m.id,
                m.instance_id.as_deref(),
                &m.client_id,
                &m.client_host,
                Ok(assignment),
            )
        })
        .collect();
    GroupView {
        kind: "consumer".into(),
        state: g.state_name().into(),
        generation: g.group_epoch,
        protocol: Some(g.assignor().into()),
        leader: None,
        members,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::wire::Writer;

    fn assignment(topics: &[(&str, &[i32])]) -> Bytes {
        let mut w = Writer::default();
        w.i16(1);
        w.array_len(topics.len());
        for (t, ps) in topics {
            w.string(t);
            w.array_len(ps.len());
            for p in *ps {
                w.i32(*p);
            }
        }
        w.i32(-1); // user data: null
        w.buf.to_vec().into()
    }

    #[test]
    fn a_consumer_assignment_decodes_to_its_topics_and_partitions() {
        let b = assignment(&[("orders", &[0, 2]), ("audit", &[1])]);
        let got = consumer_assignment(&b).unwrap();
        assert_eq!(
            got,
            vec![
                TopicPartitions {
                    topic: "orders".into(),
                    partitions: vec![0, 2]
                },
                TopicPartitions {
                    topic: "audit".into(),
                    partitions: vec![1]
                },
            ]
        );
        assert_eq!(consumer_assignment(&Bytes::new()).unwrap(), vec![]);
    }

    #[test]
    fn a_truncated_or_oversized_assignment_is_an_error_not_a_panic() {
        let b = assignment(&[("orders", &[0, 1, 2])]);
        for cut in 1..b.len() - 4 {
            assert!(consumer_assignment(&b.slice(..cut)).is_err(), "cut at {cut}");
        }
        let mut w = Writer::default();
        w.i16(0);
        w.i32(i32::MAX);
        assert!(consumer_assignment(&w.buf.to_vec().into()).is_err());
    }

    #[test]
    fn an_unreadable_record_is_shown_as_such() {
        let v = view(
            &GroupState {
                kind: "classic".into(),
                version: 3,
                data: b"junk".to_vec(),
            },
            &BTreeMap::new(),
        );
        assert_eq!(v.state, "unreadable");
        assert_eq!(v.kind, "classic");
        assert!(v.members.is_empty());
    }

    #[test]
    fn a_classic_member_whose_assignment_does_not_decode_says_so() {
        let mut g = super::super::Group::new("consumer");
        g.generation = 3;
        let member = |id: &str, assignment: Bytes| {
            let mut m = super::super::Member::for_test(id, &[]);
            m.info.assignment = assignment;
            m
        };
        g.members
            .insert("good".into(), member("good", assignment(&[("orders", &[1])])));
        g.members
            .insert("junk".into(), member("junk", Bytes::from_static(b"\x00\x01\x7f")));
        let v = view(
            &GroupState {
                kind: record::KIND.into(),
                version: 1,
                data: record::encode(&g),
            },
            &BTreeMap::new(),
        );
        assert_eq!((v.state.as_str(), v.generation), ("Stable", 3));
        let good = &v.members[0];
        assert_eq!(
            (good.member_id.as_str(), good.assignment_error.as_deref()),
            ("good", None)
        );
        assert_eq!(good.assignment[0].partitions, vec![1]);
        let junk = &v.members[1];
        assert_eq!(junk.member_id, "junk");
        assert!(junk.assignment.is_empty());
        assert!(
            junk.assignment_error
                .as_deref()
                .unwrap()
                .starts_with("unreadable assignment"),
            "{junk:?}"
        );
        let json = serde_json::to_value(good).unwrap();
        assert!(json.get("assignment_error").is_none(), "{json}");
    }
}
