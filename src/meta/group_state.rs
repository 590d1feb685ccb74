//! Consumer groups' membership records in the metadata log: one opaque,
//! size-capped record per group, written by compare-and-set on its version
//! so two nodes that both believe they coordinate a group cannot overwrite
//! each other's generations. The Kafka front door encodes the bytes; the
//! log only checks their size, their kind and the version.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::Rejection;

/// The most bytes one record may hold. A write must fit an entry a
/// DynamoDB item carries inline (items are at most 400 KB and the log
/// inlines entries up to 350 KiB); the bytes travel base64-encoded (4/3
/// of their size) inside the entry's JSON, so 192 KiB becomes 256 KiB.
pub const MAX_STATE_BYTES: usize = 192 * 1024;

/// The most groups with a record.
pub const MAX_GROUPS: usize = 10_000;

/// The protocols that write records.
pub const KINDS: &[&str] = &["classic", "consumer"];

/// A group's record as the log holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStateRow {
    pub kind: String,
    /// Writes so far: 1 after the first (a missing record is at 0).
    pub version: u64,
    #[serde(with = "base64_bytes")]
    pub data: Vec<u8>,
}

/// Bytes as a base64 string (JSON arrays of numbers would triple them).
pub mod base64_bytes {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        STANDARD.decode(s).map_err(serde::de::Error::custom)
    }
}

/// The version a group's record is at (0: none).
pub fn version_of(states: &BTreeMap<String, GroupStateRow>, group: &str) -> u64 {
    states.get(group).map_or(0, |r| r.version)
}

/// `PutGroupState`: applies only if the record is at `expected`.
pub fn put(
    states: &mut BTreeMap<String, GroupStateRow>,
    group: &str,
    kind: &str,
    expected: u64,
    data: &[u8],
) -> Result<(), Rejection> {
    if group.is_empty() {
        return Err(Rejection::Invalid("group id is empty".into()));
    }
    if !KINDS.contains(&kind) {
        return Err(Rejection::Invalid(format!(
            "group state kind {kind:?} is not one of {KINDS:?}"
        )));
    }
    if data.len() > MAX_STATE_BYTES {
        return Err(Rejection::Invalid(format!(
            "group {group:?} state is {} bytes, over the {MAX_STATE_BYTES}-byte limit",
            data.len()
        )));
    }
    let current = version_of(states, group);
    if current != expected {
        return Err(Rejection::Precondition(format!(
            "group {group:?} state is at version {current}, not {expected}"
        )));
    }
    if current == 0 && states.len() >= MAX_GROUPS {
        return Err(Rejection::Invalid(format!(
            "a cluster holds at most {MAX_GROUPS} group states"
        )));
    }
    states.insert(
        group.to_string(),
        GroupStateRow {
            kind: kind.to_string(),
            version: current + 1,
            data: data.to_vec(),
        },
    );
    Ok(())
}

/// `DeleteGroupState`: applies if the record is at `expected` (`None`:
/// any); deleting a missing record with `None` or `Some(0)` applies.
pub fn delete(
    states: &mut BTreeMap<String, GroupStateRow>,
    group: &str,
    expected: Option<u64>,
) -> Result<(), Rejection> {
    let current = version_of(states, group);
    if let Some(e) = expected {
        if e != current {
            return Err(Rejection::Precondition(format!(
                "group {group:?} state is at version {current}, not {e}"
            )));
        }
    }
    states.remove(group);
    Ok(())
}
