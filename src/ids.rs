//! Newtypes for every number that fences or orders something.
//!
//! Mixing an offset with an epoch must not compile, so each gets its own type,
//! and each `Display` says what it is (`e7` for an epoch, `@41` for an offset).

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! counter_newtype {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl $name {
            pub const ZERO: Self = Self(0);

            pub fn get(self) -> u64 {
                self.0
            }

            /// The next value; saturates rather than wrapping (2^64 is never reached).
            pub fn next(self) -> Self {
                Self(self.0.saturating_add(1))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

counter_newtype!(
    /// Registration epoch of a node: new (previous + 1) at every start.
    NodeEpoch,
    "e"
);
counter_newtype!(
    /// Incremented every time a stream is opened by a new owner.
    StreamEpoch,
    "se"
);
counter_newtype!(
    /// Position of a record in a stream; dense from 0.
    Offset,
    "@"
);
counter_newtype!(
    /// Index of an entry in the metadata log; the first entry is 1.
    LogIndex,
    "#"
);
counter_newtype!(
    /// Sequence number of a WAL segment within one node incarnation, from 0.
    SegmentSeq,
    "seq"
);
counter_newtype!(
    /// How many heartbeats of a node have been applied in the log.
    HeartbeatCount,
    "hb"
);
counter_newtype!(
    /// Identity of a topic, never reused (a re-created name gets a new id).
    TopicId,
    "t"
);

impl Offset {
    /// `self + n` records.
    pub fn plus(self, n: u64) -> Offset {
        Offset(self.0 + n)
    }

    /// Number of records between `earlier` and `self` (0 if `earlier` is later).
    pub fn since(self, earlier: Offset) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// A node's stable identity (by default the host name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub String);

impl NodeId {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Node ids appear in object keys, so they are restricted to a safe alphabet.
    pub fn validate(s: &str) -> Result<(), String> {
        if s.is_empty() || s.len() > 128 {
            return Err(format!("node id must be 1-128 characters, got {}", s.len()));
        }
        if !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            || s == "."
            || s == ".."
        {
            return Err(format!("node id {s:?} may only contain [A-Za-z0-9._-]"));
        }
        Ok(())
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A topic's Kafka topic id: 16 bytes, stable for the topic's life and
/// different for a topic re-created under the same name. Derived from the
/// topic's [`TopicId`] (never reused) and name, so every node computes the
/// same id from its view of the metadata log without a field in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TopicUuid(pub [u8; 16]);

impl TopicUuid {
    /// The all-zero id Kafka reads as "no id".
    pub const ZERO: TopicUuid = TopicUuid([0; 16]);

    pub fn derive(id: TopicId, name: &str) -> Self {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(b"sluice topic id\0");
        h.update(id.0.to_be_bytes());
        h.update(name.as_bytes());
        let digest = h.finalize();
        let mut b = [0u8; 16];
        b.copy_from_slice(&digest[..16]);
        // A random-style (version 4, RFC 4122 variant) UUID, never zero and
        // never Kafka's reserved metadata-topic id (0...01).
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        TopicUuid(b)
    }

    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }
}

/// Kafka prints topic ids as URL-safe base64 without padding.
impl fmt::Display for TopicUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use base64::Engine;
        f.write_str(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(self.0))
    }
}

impl Serialize for TopicUuid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One partition of one topic: the unit of ordering, ownership and movement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct StreamId {
    pub topic: TopicId,
    pub partition: u32,
}

impl StreamId {
    pub fn new(topic: TopicId, partition: u32) -> Self {
        Self { topic, partition }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/p{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_says_what_a_number_is() {
        assert_eq!(NodeEpoch(7).to_string(), "e7");
        assert_eq!(Offset(41).to_string(), "@41");
        assert_eq!(StreamId::new(TopicId(3), 2).to_string(), "t3/p2");
    }

    #[test]
    fn node_ids_are_restricted_to_key_safe_characters() {
        assert!(NodeId::validate("node-1.a_b").is_ok());
        assert!(NodeId::validate("").is_err());
        assert!(NodeId::validate("a/b").is_err());
        assert!(NodeId::validate("..").is_err());
        assert!(NodeId::validate(&"x".repeat(129)).is_err());
    }

    #[test]
    fn offsets_count_records_between_them() {
        assert_eq!(Offset(10).since(Offset(4)), 6);
        assert_eq!(Offset(4).since(Offset(10)), 0);
        assert_eq!(Offset(4).plus(3), Offset(7));
    }

    #[test]
    fn topic_uuids_are_stable_per_topic_and_differ_for_a_recreated_name() {
        let a = TopicUuid::derive(TopicId(1), "orders");
        assert_eq!(a, TopicUuid::derive(TopicId(1), "orders"));
        assert_ne!(a, TopicUuid::derive(TopicId(2), "orders"), "re-created");
        assert_ne!(a, TopicUuid::derive(TopicId(1), "order"));
        assert!(!a.is_zero());
        assert_eq!(a.0[6] >> 4, 4, "version 4");
        assert_eq!(a.to_string().len(), 22, "Kafka's unpadded base64");
    }
}
