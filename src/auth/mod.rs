//! Authentication and authorization (`--auth on`).
//!
//! # Layout
//!
//! - [`scope`]: operations, topic globs, and the [`Principal`] a request
//!   runs as.
//! - [`token`]: token secrets, their stored hashes, the [`TokenRecord`] the
//!   metadata log keeps, and [`Secret`], a string that never prints.
//! - [`scram`]: the SCRAM verifiers a token record keeps and the server
//!   side of the SCRAM exchange (Kafka's SCRAM-SHA-256/512 login).
//! - [`Auth`] (here): checks a presented secret against the bootstrap admin
//!   secret and the tokens of this node's applied view.
//!
//! Every node checks tokens against its own view, so a `RevokeToken` takes
//! effect on a node as soon as that node applies it. Failures are counted
//! in `sluice_auth_failures_total{door, reason}`; a secret never reaches a
//! log line, a metric label or an error message.

pub mod scope;
pub mod scram;
pub mod token;

#[cfg(test)]
mod tests;

pub use scope::{glob_matches, Op, Principal, Scope, BOOTSTRAP_ADMIN};
pub use token::{Secret, TokenHash, TokenRecord};

use std::sync::Arc;

/// Why a presented credential was refused. The reason goes to metrics;
/// callers see only [`AuthFailure::public_message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No credential at all.
    Missing,
    /// Not a bearer token / not the shape of one.
    Malformed,
    /// No such token id: never issued, or revoked.
    Unknown,
    /// The id exists but the secret does not match its hash.
    BadSecret,
    Expired,
    /// A stored token with no issuer: written while auth was off (or by a
    /// version that did not record issuers), so nobody authorized it.
    Unissued,
}

impl AuthFailure {
    /// The metrics label.
    pub fn reason(self) -> &'static str {
        match self {
            AuthFailure::Missing => "missing",
            AuthFailure::Malformed => "malformed",
            AuthFailure::Unknown => "unknown",
            AuthFailure::BadSecret => "bad_secret",
            AuthFailure::Expired => "expired",
            AuthFailure::Unissued => "unissued",
        }
    }

    /// What the caller is told. Unknown, revoked and wrong secrets read the
    /// same, so an answer does not confirm that an id exists.
    pub fn public_message(self) -> &'static str {
        match self {
            AuthFailure::Missing => "this server requires a token (Authorization: Bearer <token>)",
            AuthFailure::Malformed => "the credentials are not a bearer token",
            AuthFailure::Unknown | AuthFailure::BadSecret | AuthFailure::Expired | AuthFailure::Unissued => {
                "the token is invalid, revoked or expired"
            }
        }
    }
}

/// Count a refused credential (`door`: `http` or `kafka`).
pub fn count_failure(door: &str, reason: &str) {
    crate::telemetry::count("sluice_auth_failures_total", &[("door", door), ("reason", reason)]);
}

/// Milliseconds since the Unix epoch. Injected so tests can move time.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The authenticator's view of a node's [`crate::clock::Clock`].
pub fn clock_from(clock: crate::clock::SharedClock) -> Clock {
    Arc::new(move || clock.now_ms())
}

/// The authenticator of one node.
#[derive(Clone)]
pub struct Auth {
    /// Hash of the `--admin-token-file` secret (the secret itself is dropped).
    admin: Option<TokenHash>,
    clock: Clock,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("bootstrap_admin", &self.admin.is_some())
            .finish()
    }
}

impl Auth {
    pub fn new(admin_secret: Option<&Secret>, clock: Clock) -> Self {
        Self {
            admin: admin_secret.map(|s| TokenHash::of(s.expose())),
            clock,
        }
    }

    pub fn now_ms(&self) -> i64 {
        (self.clock)()
    }

    /// Who `presented` is. `lookup` finds a token record by id in the
    /// caller's applied view. Every presented secret is hashed and compared
    /// with the bootstrap admin hash in constant time, whatever its shape.
    pub fn authenticate(
        &self,
        presented: &str,
        lookup: impl FnOnce(&str) -> Option<TokenRecord>,
    ) -> Result<Principal, AuthFailure> {
        if presented.is_empty() {
            return Err(AuthFailure::Missing);
        }
        let hash = TokenHash::of(presented);
        if self.admin.is_some_and(|a| a.matches(&hash)) {
            return Ok(Principal::bootstrap_admin());
        }
        let id = token::token_id(presented).ok_or(AuthFailure::Unknown)?;
        let record = lookup(id).ok_or(AuthFailure::Unknown)?;
        if !record.hash.matches(&hash) {
            return Err(AuthFailure::BadSecret);
        }
        self.admit(Some(record))
    }

    /// Who the token `record` (looked up by id in the caller's applied
    /// view; `None`: no such token, or revoked) is now, for a login whose
    /// secret was proven otherwise (SCRAM) and is checked again later:
    /// refused once expired, revoked, or never issued by an admin.
    pub fn admit(&self, record: Option<TokenRecord>) -> Result<Principal, AuthFailure> {
        let record = record.ok_or(AuthFailure::Unknown)?;
        if record.expired(self.now_ms()) {
            return Err(AuthFailure::Expired);
        }
        if record.issued_by.as_deref().is_none_or(str::is_empty) {
            return Err(AuthFailure::Unissued);
        }
        Ok(Principal {
            id: record.id,
            scopes: record.scopes,
        })
    }
}

/// `POST /v1/tokens`: what to issue.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    pub name: String,
    pub scopes: Vec<Scope>,
    #[serde(default)]
    pub expires_in_sec: Option<u64>,
}

/// A token just issued: the only time its secret is shown.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IssuedToken {
    pub id: String,
    #[serde(serialize_with = "expose")]
    pub token: Secret,
    pub expires_at: Option<i64>,
}

fn expose<S: serde::Serializer>(s: &Secret, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(s.expose())
}

/// A token as listed: no secret, no hash.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TokenInfo {
    pub id: String,
    pub name: String,
    pub scopes: Vec<Scope>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub expired: bool,
}

impl TokenInfo {
    pub fn of(r: &TokenRecord, now_ms: i64) -> Self {
        Self {
            id: r.id.clone(),
            name: r.name.clone(),
            scopes: r.scopes.clone(),
            created_at: r.created_at_ms,
            expires_at: r.expires_at_ms,
            expired: r.expired(now_ms),
        }
    }
}
