//! What a token may do: operations on the topics a glob matches.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An operation a scope grants. None implies another: a token that may
/// only `write` cannot read back what it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Read records, offsets and topic descriptions; commit consumer offsets.
    Read,
    /// Append records.
    Write,
    /// Create, delete and configure the matched topics. `admin` on the
    /// topic glob `*` is cluster administration: nodes, transfers, tokens.
    Admin,
}

impl Op {
    pub const ALL: [Op; 3] = [Op::Read, Op::Write, Op::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Admin => "admin",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Longest topic glob accepted (a topic name is at most 249 characters).
pub const MAX_GLOB_LEN: usize = 249;
/// Most scopes one token carries.
pub const MAX_SCOPES: usize = 32;

/// `ops` on every topic whose name matches the glob `topics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// `*` matches any run of characters, `?` one character; every other
    /// character matches itself.
    pub topics: String,
    pub ops: Vec<Op>,
}

impl Scope {
    pub fn new(topics: &str, ops: &[Op]) -> Self {
        Self {
            topics: topics.to_string(),
            ops: ops.to_vec(),
        }
    }

    /// Every operation on every topic: the bootstrap admin's scope.
    pub fn everything() -> Self {
        Self::new("*", &Op::ALL)
    }

    /// A glob of topic-name characters and wildcards, and at least one op.
    pub fn validate(&self) -> Result<(), String> {
        let g = &self.topics;
        if g.is_empty() || g.len() > MAX_GLOB_LEN {
            return Err(format!("a scope's topics glob must be 1-{MAX_GLOB_LEN} characters"));
        }
        if let Some(c) = g
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '*' | '?')))
        {
            return Err(format!(
                "topics glob {g:?} has invalid character {c:?}; allowed: [a-zA-Z0-9._-] and the wildcards * ?"
            ));
        }
        if self.ops.is_empty() {
            return Err(format!("the scope for {g:?} grants no ops; use read, write or admin"));
        }
        Ok(())
    }

    pub fn allows(&self, op: Op, topic: &str) -> bool {
        self.ops.contains(&op) && glob_matches(&self.topics, topic)
    }
}

/// Whether `name` matches `glob` (`*`: any run, `?`: any one character).
/// Linear in practice: on a mismatch it backtracks only to the last `*`.
pub fn glob_matches(glob: &str, name: &str) -> bool {
    let (g, n) = (glob.as_bytes(), name.as_bytes());
    let (mut gi, mut ni) = (0, 0);
    // Where the last `*` was, and the name position it is matched up to.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match g.get(gi) {
            Some(b'*') => {
                star = Some((gi, ni));
                gi += 1;
            }
            Some(&c) if c == b'?' || c == n[ni] => {
                gi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    // Let the last `*` swallow one more character.
                    gi = sg + 1;
                    ni = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    g[gi..].iter().all(|&c| c == b'*')
}

/// Who made a request, and what they may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token id (`bootstrap-admin` for the `--admin-token-file` secret).
    pub id: String,
    pub scopes: Vec<Scope>,
}

/// The id of the principal of the `--admin-token-file` secret.
pub const BOOTSTRAP_ADMIN: &str = "bootstrap-admin";

impl Principal {
    pub fn bootstrap_admin() -> Self {
        Self {
            id: BOOTSTRAP_ADMIN.to_string(),
            scopes: vec![Scope::everything()],
        }
    }

    pub fn allows(&self, op: Op, topic: &str) -> bool {
        self.scopes.iter().any(|s| s.allows(op, topic))
    }

    /// May see that `topic` exists: any op on it (Kafka's DESCRIBE is
    /// implied by READ and WRITE too).
    pub fn sees(&self, topic: &str) -> bool {
        Op::ALL.iter().any(|op| self.allows(*op, topic))
    }

    /// Cluster administration: `admin` on the glob `*` itself (a glob that
    /// merely happens to match every existing topic does not count).
    pub fn is_cluster_admin(&self) -> bool {
        self.scopes
            .iter()
            .any(|s| s.topics == "*" && s.ops.contains(&Op::Admin))
    }
}
