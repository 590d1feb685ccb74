//! A classic group's membership as it is kept in the metadata log (the
//! opaque `GroupState` record of kind "classic"): what a new coordinator
//! needs to carry on at the same generation with the same member ids.
//! Session deadlines are not kept: a loaded member gets a fresh session.
//!
//! Layout (version 1), Kafka wire primitives: magic `SCG`, version byte,
//! protocol type, protocol (nullable), generation (i32), leader (nullable),
//! then an i32 count of members, each: id, group instance id (nullable),
//! client id, client host, session and rebalance timeouts (i32 ms),
//! an i32 count of (protocol name, metadata bytes), assignment bytes.
//! Decoding is bounded like a request decoder and never panics.

use super::{Group, Member, MemberInfo, Phase};
use crate::kafka::wire::{DecodeError, DecodeResult, Reader, Writer};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// The kind name the log stores classic groups under.
pub const KIND: &str = "classic";
const MAGIC: &[u8; 3] = b"SCG";
const VERSION: u8 = 1;

fn ms(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// The record of `g` as it stands.
pub fn encode(g: &Group) -> Vec<u8> {
    let mut w = Writer::default();
    for b in MAGIC {
        w.i8(*b as i8);
    }
    w.i8(VERSION as i8);
    w.string(&g.protocol_type);
    w.nullable_string(g.protocol.as_deref());
    w.i32(g.generation);
    w.nullable_string(g.leader.as_deref());
    w.array_len(g.members.len());
    for m in g.members.values().map(|m| &m.info) {
        w.string(&m.id);
        w.nullable_string(m.instance_id.as_deref());
        w.string(&m.client_id);
        w.string(&m.client_host);
        w.i32(ms(m.session_timeout));
        w.i32(ms(m.rebalance_timeout));
        w.array_len(m.protocols.len());
        for (name, meta) in &m.protocols {
            w.string(name);
            w.bytes_parts(std::slice::from_ref(meta));
        }
        w.bytes_parts(std::slice::from_ref(&m.assignment));
    }
    w.buf.to_vec()
}

fn refuse<T>(r: &Reader, message: String) -> DecodeResult<T> {
    Err(DecodeError {
        at: r.position(),
        message,
    })
}

fn duration(v: i32) -> Duration {
    Duration::from_millis(u64::try_from(v).unwrap_or(0))
}

/// A classic group's record as stored: everything a group holds except
/// session deadlines, which only a coordinator's clock can give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGroup {
    pub protocol_type: String,
    pub protocol: Option<String>,
    pub generation: i32,
    pub leader: Option<String>,
    pub members: Vec<MemberInfo>,
}

impl StoredGroup {
    /// The group a coordinator loads: Stable with its members (each with
    /// a fresh session from `now`), or Empty without any.
    pub fn into_group(self, now: Instant) -> Group {
        let members: BTreeMap<String, Member> = (self.members.into_iter())
            .map(|info| (info.id.clone(), Member::new(info, now, false)))
            .collect();
        let phase = if members.is_empty() {
            Phase::Empty
        } else {
            Phase::Stable
        };
        Group {
            generation: self.generation,
            phase,
            protocol_type: self.protocol_type,
            protocol: self.protocol,
            leader: self.leader,
            members,
            pending: BTreeMap::new(),
            stored: Default::default(),
        }
    }
}

/// The record `data` holds, its members in the order they were written
/// (`encode` writes them in id order; the order is not checked). A member
/// id given twice is refused.
pub fn decode(data: &[u8]) -> DecodeResult<StoredGroup> {
    let mut r = Reader::new(Bytes::copy_from_slice(data));
    let magic = r.bytes_exact(3)?;
    if magic.as_ref() != MAGIC {
        return refuse(&r, "not a classic group record".into());
    }
    let version = r.i8()?;
    if version as u8 != VERSION {
        return refuse(&r, format!("classic group record version {version}"));
    }
    let protocol_type = r.string()?;
    let protocol = r.nullable_string()?;
    let generation = r.i32()?;
    let leader = r.nullable_string()?;
    let n = r.array_len(2 + 2 + 2 + 2 + 4 + 4 + 4 + 4)?;
    let mut members: Vec<MemberInfo> = Vec::with_capacity(n);
    let mut ids = std::collections::BTreeSet::new();
    for _ in 0..n {
        let id = r.string()?;
        let instance_id = r.nullable_string()?;
        let client_id = r.string()?;
        let client_host = r.string()?;
        let session_timeout = duration(r.i32()?);
        let rebalance_timeout = duration(r.i32()?);
        let np = r.array_len(2 + 4)?;
        let mut protocols = Vec::with_capacity(np);
        for _ in 0..np {
            let name = r.string()?;
            let meta = r.nullable_bytes()?.unwrap_or_default();
            protocols.push((name, meta));
        }
        let assignment = r.nullable_bytes()?.unwrap_or_default();
        if !ids.insert(id.clone()) {
            return refuse(&r, format!("member {id} given twice"));
        }
        members.push(MemberInfo {
            id,
            instance_id,
            client_id,
            client_host,
            session_timeout,
            rebalance_timeout,
            protocols,
            assignment,
        });
    }
    r.expect_end()?;
    Ok(StoredGroup {
        protocol_type,
        protocol,
        generation,
        leader,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_loads_stable_with_fresh_sessions() {
        let now = Instant::now();
        let mut g = Group::new("consumer");
        g.generation = 7;
        g.protocol = Some("range".into());
        g.leader = Some("m1".into());
        g.phase = Phase::Stable;
        let mut m1 = Member::for_test("m1", &[("range", Bytes::from_static(b"meta"))]);
        m1.info.instance_id = Some("i1".into());
        m1.info.assignment = Bytes::from_static(b"p0");
        m1.joined = true;
        g.members.insert("m1".into(), m1);
        let later = now + Duration::from_secs(100);
        let back = decode(&encode(&g)).unwrap().into_group(later);
        assert_eq!((back.generation, back.phase), (7, Phase::Stable));
        assert_eq!(back.leader.as_deref(), Some("m1"));
        let m = &back.members["m1"];
        assert_eq!(m.info.instance_id.as_deref(), Some("i1"));
        assert_eq!(m.info.assignment, Bytes::from_static(b"p0"));
        assert!(!m.joined);
        assert_eq!(m.deadline, later + Duration::from_secs(10));
        assert_eq!(encode(&back), encode(&g));
        g.members.clear();
        assert_eq!(decode(&encode(&g)).unwrap().into_group(now).phase, Phase::Empty);
    }

    #[test]
    fn hostile_records_are_refused_without_panic() {
        let g = Group::new("consumer");
        let good = encode(&g);
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err());
        }
        let mut huge = good.clone();
        let n = huge.len();
        huge[n - 4..].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode(&huge).is_err());
        assert!(decode(b"XYZ\x01").is_err());
    }

    #[test]
    fn a_record_naming_a_member_twice_is_refused() {
        let mut g = Group::new("consumer");
        let member = |id: &str| Member::for_test(id, &[]);
        g.members.insert("a".into(), member("a"));
        g.members.insert("b".into(), member("a"));
        let e = decode(&encode(&g)).unwrap_err();
        assert!(e.message.contains("given twice"), "{e:?}");
    }
}
