//! Token secrets, their stored hashes, and the record the metadata log keeps.
//!
//! A token is `slc_<id>_<secret>`: `id` is 16 hex digits (public: it names
//! the token in lists and revocations), `secret` is 32 random bytes in
//! unpadded base64url. The log stores only `SHA-256("sluice-token-v1:" ||
//! token)`. A plain hash (no slow KDF) is enough because the secret has 256
//! bits of entropy: there is nothing to guess from the hash. The bootstrap
//! admin secret is chosen by the operator and never enters the log.

use super::scope::Scope;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand::TryRngCore;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};
use std::fmt;
use subtle::ConstantTimeEq;

/// A secret string that never prints: `Debug` and `Display` show `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself, for the one place that must send or compare it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_string()))
    }
}

/// The SHA-256 of a token, as stored. Compared only in constant time.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TokenHash(pub [u8; 32]);

impl TokenHash {
    /// The stored hash of `token` (domain-separated and versioned).
    pub fn of(token: &str) -> Self {
        let mut h = Sha256::new();
        h.update(b"sluice-token-v1:");
        h.update(token.as_bytes());
        TokenHash(h.finalize().into())
    }

    /// Constant-time equality: how long it takes says nothing about how
    /// many leading bytes matched.
    pub fn matches(&self, other: &TokenHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }

    fn to_hex(self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn from_hex(s: &str) -> Option<Self> {
        if s.len() != 64 || !s.is_ascii() {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(TokenHash(out))
    }
}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not a secret, but no reason to print it either.
        f.write_str("TokenHash(..)")
    }
}

impl Serialize for TokenHash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for TokenHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TokenHash::from_hex(&s).ok_or_else(|| serde::de::Error::custom("a token hash is 64 hex digits"))
    }
}

/// A token as the metadata log keeps it: everything but the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// 16 lowercase hex digits; also the first part of the token itself.
    pub id: String,
    /// A label for people (`ci`, `orders-consumer`).
    pub name: String,
    pub hash: TokenHash,
    pub scopes: Vec<Scope>,
    /// Milliseconds since the Unix epoch, by the issuing node's clock.
    pub created_at_ms: i64,
    /// Refused from this instant on (by each checking node's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
    /// The principal that issued it (a token id, or `admin` for the
    /// bootstrap secret). Tokens are issued only with `--auth on`, by an
    /// authenticated cluster admin; a record without an issuer (one written
    /// before this field existed, possibly while auth was off) is never
    /// honoured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_by: Option<String>,
    /// SCRAM verifiers of the token (salted, iterated: see
    /// [`super::scram`]), at most one per mechanism, for the SCRAM user
    /// named by [`Self::id`]. Tokens issued before Sluice spoke SCRAM have
    /// none (they log in with PLAIN).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scram: Vec<super::scram::Credential>,
}

/// Longest token name accepted.
pub const MAX_NAME_LEN: usize = 128;

impl TokenRecord {
    /// What `CreateToken` accepts: a well-formed id and name and valid scopes.
    pub fn validate(&self) -> Result<(), String> {
        if !is_token_id(&self.id) {
            return Err("a token id is 16 lowercase hex digits".into());
        }
        if self.name.is_empty() || self.name.len() > MAX_NAME_LEN || self.name.chars().any(char::is_control) {
            return Err(format!(
                "a token name is 1-{MAX_NAME_LEN} characters without control characters"
            ));
        }
        if self.scopes.is_empty() || self.scopes.len() > super::scope::MAX_SCOPES {
            return Err(format!(
                "a token needs 1-{} scopes, got {}",
                super::scope::MAX_SCOPES,
                self.scopes.len()
            ));
        }
        for s in &self.scopes {
            s.validate()?;
        }
        if self.issued_by.as_deref().is_none_or(str::is_empty) {
            return Err("a token needs its issuer".into());
        }
        if let Some(e) = self.expires_at_ms {
            if e <= self.created_at_ms {
                return Err("a token must expire after it is created".into());
            }
        }
        for (i, c) in self.scram.iter().enumerate() {
            c.validate()?;
            if self.scram[..i].iter().any(|o| o.mechanism == c.mechanism) {
                return Err(format!("a token has one {} credential", c.mechanism));
            }
        }
        Ok(())
    }

    /// The token's SCRAM verifier for `mechanism`, if it has one.
    pub fn scram(&self, mechanism: super::scram::Mechanism) -> Option<&super::scram::Credential> {
        self.scram.iter().find(|c| c.mechanism == mechanism)
    }

    pub fn expired(&self, now_ms: i64) -> bool {
        self.expires_at_ms.is_some_and(|e| now_ms >= e)
    }
}

fn is_token_id(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

const PREFIX: &str = "slc_";

/// A new token: its secret (shown once) and the record to store, with its
/// SCRAM-SHA-256 and -512 verifiers (the whole token is the SCRAM
/// password). Secrets and salts come from the operating system's CSPRNG,
/// never from a seeded generator (the injected, reproducible randomness is
/// for simulation, not secrets).
pub fn issue(
    name: &str,
    scopes: Vec<Scope>,
    created_at_ms: i64,
    expires_at_ms: Option<i64>,
    issued_by: &str,
) -> (Secret, TokenRecord) {
    let mut id = [0u8; 8];
    let mut secret = [0u8; 32];
    let mut rng = rand::rngs::OsRng;
    rng.try_fill_bytes(&mut id).expect("the OS random source works");
    rng.try_fill_bytes(&mut secret).expect("the OS random source works");
    let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let token = format!("{PREFIX}{id}_{}", URL_SAFE_NO_PAD.encode(secret));
    let record = TokenRecord {
        id,
        name: name.to_string(),
        hash: TokenHash::of(&token),
        scopes,
        created_at_ms,
        expires_at_ms,
        issued_by: Some(issued_by.to_string()),
        scram: super::scram::Mechanism::ALL
            .into_iter()
            .map(|m| super::scram::Credential::issue(m, &token))
            .collect(),
    };
    (Secret(token), record)
}

/// The id part of a presented token, if it has the issued shape.
pub fn token_id(presented: &str) -> Option<&str> {
    let rest = presented.strip_prefix(PREFIX)?;
    let (id, secret) = (rest.get(..16)?, rest.get(16..)?);
    (is_token_id(id) && secret.starts_with('_') && secret.len() > 1).then_some(id)
}
