//! What a Durable Streams stream needs beyond an ordinary topic: its content
//! type, its lifetime (TTL or an absolute expiry) and whether it is closed.
//!
//! The writer state that makes appends idempotent (`Stream-Seq` and the
//! `Producer-*` headers) is not here any more: the stream's sequencer keeps
//! it with the records (`crate::meta::writers`). Older releases kept it
//! here; those fields and updates are still decoded and applied so old
//! snapshots and log entries read the same, and are only used to seed the
//! sequencer's check for a writer it knows nothing of.
//!
//! It lives in the topic's configuration ([`super::TopicConfig::durable`]),
//! so it is in the metadata log and in every node's view, survives restarts
//! and failover, and is dropped with the topic. Changes after creation are
//! [`DurableUpdate`]s carried by `AlterTopicConfig`; applying one is pure
//! (the time of a touch is chosen by the proposer, never by `apply`).

use crate::ids::Offset;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Producers remembered per stream; past this the one that wrote least
/// recently is forgotten (its next append is judged as a new producer's).
pub const MAX_PRODUCERS: usize = 1024;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DurableMeta {
    /// The stream's path below `/v1/stream/` (as the client spelled it).
    pub path: String,
    /// The content type given at creation, fixed for the stream's life.
    pub content_type: String,
    /// Sliding lifetime: the stream expires this many seconds after the
    /// last read or write (`touched_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_secs: Option<u64>,
    /// Absolute expiry (Unix milliseconds); never extended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
    /// When the stream was created or last read or written, as recorded
    /// (touches are written at most about twice per TTL).
    #[serde(default)]
    pub touched_ms: i64,
    /// Set once: the end offset of the stream when it was closed. Nothing
    /// is appended through the protocol after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_at: Option<Offset>,
    /// The producer append that closed the stream, so its retry is
    /// recognised as a duplicate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_by: Option<ProducerMark>,
    /// Legacy (older releases): the highest `Stream-Seq` accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<String>,
    /// Legacy (older releases): idempotent producers by `Producer-Id`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub producers: BTreeMap<String, ProducerState>,
    /// Set on a fork: the stream whose prefix it starts with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<Box<ForkOf>>,
    /// Deleted (or expired) while forks still read its records: it answers
    /// 410 and is removed with its last fork.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// Where a fork comes from. A fork's offsets are its source's up to
/// `offset`, then (with `partial`) one record holding the first `partial`
/// bytes of the source's record at `offset`, then the fork's own records
/// from [`ForkOf::base`] on: its topic's offset 0 is `base`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOf {
    /// The source's topic name.
    pub source: String,
    /// The fork inherits the source's offsets below this.
    pub offset: Offset,
    /// A binary sub-offset: the fork also inherits this many bytes of the
    /// source's record at `offset`, as one record of its own length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<u64>,
    /// `Stream-Fork-Offset` as the client gave it (`None`: the source's
    /// tail then) and `Stream-Fork-Sub-Offset`, to judge a repeated create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_offset: Option<Offset>,
    #[serde(default)]
    pub sub_offset: u64,
    /// The create gave no lifetime; the source's was copied.
    #[serde(default)]
    pub inherited_lifetime: bool,
}

impl ForkOf {
    /// The offset of the fork's first own record (its topic's offset 0).
    pub fn base(&self) -> Offset {
        Offset(self.offset.get() + u64::from(self.partial.is_some()))
    }
}

/// One producer's position: its epoch, the last sequence accepted in it,
/// and the stream's end offset after that append.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerState {
    pub epoch: u64,
    pub seq: u64,
    pub next_offset: Offset,
    /// When it last wrote (Unix ms), to forget the least recent one.
    #[serde(default)]
    pub at_ms: i64,
}

/// A producer append identified by its id, epoch and sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerMark {
    pub id: String,
    pub epoch: u64,
    pub seq: u64,
}

/// A change to a stream's [`DurableMeta`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DurableUpdate {
    /// The stream was read or written at `at_ms` (sliding TTL).
    Touch { at_ms: i64 },
    /// Close the stream at end offset `at` (a no-op when already closed).
    Close { at: Offset, by: Option<ProducerMark> },
    /// Legacy (older releases): a `Stream-Seq` was accepted.
    Seq(String),
    /// Legacy (older releases): a producer's append was accepted.
    Producer { id: String, state: ProducerState },
}

impl DurableMeta {
    /// When the stream expires (Unix ms), if it has a lifetime.
    pub fn expiry_ms(&self) -> Option<i64> {
        let ttl = self
            .ttl_secs
            .map(|t| self.touched_ms.saturating_add((t as i64).saturating_mul(1000)));
        match (ttl, self.expires_at_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn expired(&self, now_ms: i64) -> bool {
        self.expiry_ms().is_some_and(|e| now_ms >= e)
    }

    pub fn closed(&self) -> bool {
        self.closed_at.is_some()
    }

    /// Where the stream's own records start (its topic's offset 0).
    pub fn base(&self) -> Offset {
        self.fork.as_ref().map_or(Offset::ZERO, |f| f.base())
    }

    pub fn apply(&mut self, update: &DurableUpdate) {
        match update {
            DurableUpdate::Touch { at_ms } => self.touched_ms = self.touched_ms.max(*at_ms),
            DurableUpdate::Close { at, by } => {
                if self.closed_at.is_none() {
                    self.closed_at = Some(*at);
                    self.closed_by = by.clone();
                }
            }
            DurableUpdate::Seq(s) => {
                if self.last_seq.as_ref().is_none_or(|last| s > last) {
                    self.last_seq = Some(s.clone());
                }
            }
            DurableUpdate::Producer { id, state } => {
                self.producers.insert(id.clone(), *state);
                while self.producers.len() > MAX_PRODUCERS {
                    let oldest = self
                        .producers
                        .iter()
                        .min_by_key(|(_, p)| p.at_ms)
                        .map(|(k, _)| k.clone());
                    match oldest {
                        Some(k) => self.producers.remove(&k),
                        None => break,
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> DurableMeta {
        DurableMeta {
            path: "a/b".into(),
            content_type: "text/plain".into(),
            touched_ms: 1_000,
            ..Default::default()
        }
    }

    #[test]
    fn ttl_slides_with_touches_and_expires_at_does_not() {
        let mut m = meta();
        m.ttl_secs = Some(2);
        assert_eq!(m.expiry_ms(), Some(3_000));
        assert!(!m.expired(2_999) && m.expired(3_000));
        m.apply(&DurableUpdate::Touch { at_ms: 2_500 });
        assert_eq!(m.expiry_ms(), Some(4_500));
        // An older touch arriving late does not shorten the life.
        m.apply(&DurableUpdate::Touch { at_ms: 1_500 });
        assert_eq!(m.expiry_ms(), Some(4_500));
        m.expires_at_ms = Some(4_000);
        assert_eq!(m.expiry_ms(), Some(4_000), "the earlier of the two wins");
        let mut fixed = meta();
        fixed.expires_at_ms = Some(5_000);
        fixed.apply(&DurableUpdate::Touch { at_ms: 4_900 });
        assert_eq!(fixed.expiry_ms(), Some(5_000));
        assert_eq!(meta().expiry_ms(), None);
    }

    #[test]
    fn a_stream_closes_once() {
        let mut m = meta();
        let by = ProducerMark {
            id: "p".into(),
            epoch: 0,
            seq: 3,
        };
        m.apply(&DurableUpdate::Close {
            at: Offset(5),
            by: Some(by.clone()),
        });
        m.apply(&DurableUpdate::Close {
            at: Offset(9),
            by: None,
        });
        assert_eq!(m.closed_at, Some(Offset(5)));
        assert_eq!(m.closed_by, Some(by));
    }

    #[test]
    fn stream_seq_only_moves_forward() {
        let mut m = meta();
        m.apply(&DurableUpdate::Seq("09".into()));
        m.apply(&DurableUpdate::Seq("10".into()));
        m.apply(&DurableUpdate::Seq("0".into()));
        assert_eq!(m.last_seq.as_deref(), Some("10"));
    }

    #[test]
    fn the_least_recent_producer_is_forgotten_past_the_limit() {
        let mut m = meta();
        for i in 0..=MAX_PRODUCERS {
            m.apply(&DurableUpdate::Producer {
                id: format!("p{i}"),
                state: ProducerState {
                    at_ms: i as i64 + 10,
                    ..Default::default()
                },
            });
        }
        assert_eq!(m.producers.len(), MAX_PRODUCERS);
        assert!(!m.producers.contains_key("p0"));
        assert!(m.producers.contains_key(&format!("p{MAX_PRODUCERS}")));
    }

    #[test]
    fn meta_round_trips_and_old_fields_default() {
        let mut m = meta();
        m.ttl_secs = Some(60);
        m.last_seq = Some("x".into());
        let s = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<DurableMeta>(&s).unwrap(), m);
        let minimal: DurableMeta = serde_json::from_str(r#"{"path":"p","content_type":"text/plain"}"#).unwrap();
        assert_eq!(minimal.touched_ms, 0);
        assert!(minimal.producers.is_empty() && !minimal.closed());
    }
}
