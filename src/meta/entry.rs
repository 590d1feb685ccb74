//! Encodings of log entries and snapshots: a magic, a version, then JSON.
//!
//! JSON keeps the metadata log readable with `cat` while it is small; the
//! version makes a later binary encoding a clean switch. An unknown version is
//! an error naming it, never a silent skip.

use super::command::Command;
use super::view::{Proposer, View};
use serde::{Deserialize, Serialize};

const ENTRY_MAGIC: &[u8; 4] = b"SLML";
const SNAPSHOT_MAGIC: &[u8; 4] = b"SLMS";
const VERSION: u16 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    pub proposer: Proposer,
    /// Random id that lets a proposer recognise its own entry after an
    /// ambiguous append.
    pub proposal_id: u64,
    pub commands: Vec<Command>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot decode {what}: {reason}")]
pub struct DecodeError {
    pub what: String,
    pub reason: String,
}

fn frame(magic: &[u8; 4], body: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + body.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&body);
    out
}

fn unframe<'a>(what: &str, magic: &[u8; 4], buf: &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let err = |reason: String| DecodeError {
        what: what.to_string(),
        reason,
    };
    if buf.len() < 6 {
        return Err(err(format!("{} bytes is shorter than the 6-byte header", buf.len())));
    }
    if &buf[..4] != magic {
        return Err(err(format!("bad magic {:?}", &buf[..4])));
    }
    let version = u16::from_be_bytes([buf[4], buf[5]]);
    if version != VERSION {
        return Err(err(format!(
            "unknown format version {version} (this build reads {VERSION})"
        )));
    }
    Ok(&buf[6..])
}

pub fn encode_entry(e: &LogEntry) -> Vec<u8> {
    frame(ENTRY_MAGIC, serde_json::to_vec(e).expect("entries serialize"))
}

pub fn decode_entry(what: &str, buf: &[u8]) -> Result<LogEntry, DecodeError> {
    let body = unframe(what, ENTRY_MAGIC, buf)?;
    serde_json::from_slice(body).map_err(|e| DecodeError {
        what: what.to_string(),
        reason: e.to_string(),
    })
}

pub fn encode_snapshot(v: &View) -> Vec<u8> {
    frame(SNAPSHOT_MAGIC, serde_json::to_vec(v).expect("views serialize"))
}

pub fn decode_snapshot(what: &str, buf: &[u8]) -> Result<View, DecodeError> {
    let body = unframe(what, SNAPSHOT_MAGIC, buf)?;
    serde_json::from_slice(body).map_err(|e| DecodeError {
        what: what.to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{NodeEpoch, NodeId};

    fn entry() -> LogEntry {
        LogEntry {
            proposer: Proposer {
                node: NodeId::new("n1"),
                epoch: Some(NodeEpoch(2)),
            },
            proposal_id: 7,
            commands: vec![Command::Heartbeat {
                node: NodeId::new("n1"),
                epoch: NodeEpoch(2),
            }],
        }
    }

    #[test]
    fn entries_round_trip() {
        let e = entry();
        assert_eq!(decode_entry("log/1", &encode_entry(&e)).unwrap(), e);
    }

    #[test]
    fn entry_encoding_is_pinned() {
        let bytes = encode_entry(&entry());
        let expected = br#"SLML{"proposer":{"node":"n1","epoch":2},"proposal_id":7,"commands":[{"type":"Heartbeat","node":"n1","epoch":2}]}"#;
        assert_eq!(&bytes[..4], b"SLML");
        assert_eq!(&bytes[4..6], &[0, 1]);
        assert_eq!(&bytes[6..], &expected[4..]);
    }

    #[test]
    fn unknown_versions_and_truncations_are_errors() {
        let mut bytes = encode_entry(&entry());
        for len in 0..bytes.len() {
            assert!(decode_entry("log/1", &bytes[..len]).is_err(), "truncated to {len}");
        }
        bytes[5] = 9;
        let err = decode_entry("log/1", &bytes).unwrap_err();
        assert!(err.to_string().contains("unknown format version 9"), "{err}");
    }

    #[test]
    fn snapshots_round_trip() {
        let v = View::default();
        assert_eq!(decode_snapshot("s", &encode_snapshot(&v)).unwrap(), v);
        assert!(decode_snapshot("s", &encode_entry(&entry())).is_err());
    }
}
