//! Stream paths and topic names.
//!
//! A Durable Streams stream at `/v1/stream/{path}` is the single-partition
//! topic `ds.` + the path with every byte outside `[A-Za-z0-9-]` written as
//! `_` and two upper-case hex digits (`orders/eu` → `ds.orders_2Feu`). The
//! escape is injective and reversible, and its output never contains `.`,
//! so the prefix cannot be forged by a path. Paths whose topic name would
//! pass Kafka's 249-character limit are refused.

use crate::meta::view::validate_topic_name;

/// Prefix of every Durable Streams topic.
pub const PREFIX: &str = "ds.";

/// The topic name of a stream path, or why the path is not accepted.
pub fn topic_for(path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("the stream path is empty".into());
    }
    let mut name = String::with_capacity(PREFIX.len() + path.len());
    name.push_str(PREFIX);
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' {
            name.push(b as char);
        } else {
            name.push_str(&format!("_{b:02X}"));
        }
    }
    validate_topic_name(&name).map_err(|e| format!("stream path {path:?} maps to an invalid topic name: {e}"))?;
    Ok(name)
}

/// The stream path of a Durable Streams topic name (`None` for any other).
pub fn path_for(topic: &str) -> Option<String> {
    let rest = topic.strip_prefix(PREFIX)?.as_bytes();
    let mut out = Vec::with_capacity(rest.len());
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            b'_' => {
                let hex = std::str::from_utf8(rest.get(i + 1..i + 3)?).ok()?;
                if hex.bytes().any(|c| c.is_ascii_lowercase()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b if b.is_ascii_alphanumeric() || b == b'-' => {
                out.push(b);
                i += 1;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok().filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_valid_topic_names_and_back() {
        for path in ["create-test-1", "a/b/c", "x.y_z", "ünï code", "..", "A_2F"] {
            let topic = topic_for(path).unwrap();
            assert!(topic.starts_with(PREFIX));
            validate_topic_name(&topic).unwrap();
            assert_eq!(path_for(&topic).as_deref(), Some(path), "{topic}");
        }
        assert_eq!(topic_for("orders/eu").unwrap(), "ds.orders_2Feu");
    }

    #[test]
    fn distinct_paths_never_share_a_topic() {
        let paths = ["a_2Fb", "a/b", "a.b", "a_b", "a-b", "A-b"];
        let topics: std::collections::BTreeSet<_> = paths.iter().map(|p| topic_for(p).unwrap()).collect();
        assert_eq!(topics.len(), paths.len());
    }

    #[test]
    fn empty_and_overlong_paths_are_refused() {
        assert!(topic_for("").is_err());
        assert!(topic_for(&"a".repeat(246)).is_ok());
        assert!(topic_for(&"a".repeat(247)).is_err());
        assert!(topic_for(&"/".repeat(100)).is_err(), "escapes count toward the limit");
    }

    #[test]
    fn other_topics_are_not_streams() {
        for topic in ["orders", "ds.", "ds.a.b", "ds.a_2", "ds.a_zz", "ds.a_2f", "ds.a b"] {
            assert_eq!(path_for(topic), None, "{topic}");
        }
    }
}
