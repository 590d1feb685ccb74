//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; Kafka's KIP-84):
//! the credentials a token record keeps and the server side of the
//! exchange, as pure functions (randomness comes in as arguments).
//!
//! The SCRAM user name is the token's id (16 hex digits) and the password
//! is the whole token (`slc_<id>_<secret>`), the same string PLAIN takes.
//! What is stored per mechanism is RFC 5802's verifier: a random salt, the
//! iteration count, `StoredKey = H(HMAC(SaltedPassword, "Client Key"))` and
//! `ServerKey = HMAC(SaltedPassword, "Server Key")`, where `SaltedPassword
//! = PBKDF2-HMAC-H(token, salt, iterations)`. Neither key lets anyone log in
//! (a client must prove it knows `ClientKey`, which `StoredKey` hashes), and
//! the token's 256 random bits make guessing it from them hopeless.
//!
//! The exchange: [`ClientFirst::parse`] reads `n,,n=<user>,r=<nonce>`,
//! [`Challenge::new`] answers `r=<nonce+server nonce>,s=<salt>,i=<n>`, and
//! [`Challenge::finish`] checks `c=biws,r=..,p=<proof>` in constant time and
//! answers `v=<ServerSignature>`. Every message is bounded by
//! [`MAX_MESSAGE_BYTES`]; a [`Challenge`] holds well under 1 KiB.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use rand::TryRngCore;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256, Sha512};
use std::fmt;
use subtle::ConstantTimeEq;

/// Iterations for credentials Sluice derives: Kafka's default, and the
/// least Kafka (and so Sluice) accepts.
pub const ITERATIONS: u32 = 4096;
/// The most iterations accepted (Kafka's maximum): bounds the work an
/// AlterUserScramCredentials or a stored record can ask of a client.
pub const MAX_ITERATIONS: u32 = 16384;
/// Bytes of random salt in credentials Sluice derives.
pub const SALT_BYTES: usize = 24;
/// Salts accepted, in bytes.
pub const SALT_RANGE: std::ops::RangeInclusive<usize> = 16..=64;
/// Longest SCRAM message accepted from a client.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// Longest client nonce accepted.
const MAX_NONCE: usize = 256;
/// Bytes of server nonce (from the OS CSPRNG), before base64.
pub const SERVER_NONCE_BYTES: usize = 24;

/// A SCRAM mechanism Sluice speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    Sha256,
    Sha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha512];

    /// The SASL mechanism name (`SCRAM-SHA-256`).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha256 => "SCRAM-SHA-256",
            Mechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's `ScramMechanism` type byte (Describe/AlterUserScramCredentials).
    pub fn kafka_type(self) -> i8 {
        match self {
            Mechanism::Sha256 => 1,
            Mechanism::Sha512 => 2,
        }
    }

    pub fn from_kafka_type(t: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.kafka_type() == t)
    }

    /// Bytes of the hash (and of StoredKey, ServerKey and a proof).
    pub fn hash_len(self) -> usize {
        match self {
            Mechanism::Sha256 => 32,
            Mechanism::Sha512 => 64,
        }
    }

    fn hmac(self, key: &[u8], data: &[&[u8]]) -> Vec<u8> {
        fn run<M: Mac + KeyInit>(key: &[u8], data: &[&[u8]]) -> Vec<u8> {
            let mut m = <M as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
            for d in data {
                m.update(d);
            }
            m.finalize().into_bytes().to_vec()
        }
        match self {
            Mechanism::Sha256 => run::<Hmac<Sha256>>(key, data),
            Mechanism::Sha512 => run::<Hmac<Sha512>>(key, data),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
            Mechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// RFC 5802's `Hi(password, salt, i)`: PBKDF2 with HMAC-H.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.hash_len()];
        match self {
            Mechanism::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out),
            Mechanism::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out),
        }
        out
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Mechanism {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Mechanism {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Mechanism::from_name(&s).ok_or_else(|| serde::de::Error::custom("unknown SCRAM mechanism"))
    }
}

/// A SCRAM verifier as the metadata log keeps it (bytes as base64 in JSON).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    pub mechanism: Mechanism,
    #[serde(with = "b64")]
    pub salt: Vec<u8>,
    pub iterations: u32,
    #[serde(with = "b64")]
    pub stored_key: Vec<u8>,
    #[serde(with = "b64")]
    pub server_key: Vec<u8>,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// The verifier of `password` under `salt` and `iterations`.
    pub fn derive(mechanism: Mechanism, password: &[u8], salt: &[u8], iterations: u32) -> Self {
        let salted = mechanism.salted_password(password, salt, iterations);
        Self::from_salted_password(mechanism, &salted, salt, iterations)
    }

    /// The verifier of a password a client already salted (Kafka's
    /// AlterUserScramCredentials upsertion sends `SaltedPassword`).
    pub fn from_salted_password(mechanism: Mechanism, salted: &[u8], salt: &[u8], iterations: u32) -> Self {
        let client_key = mechanism.hmac(salted, &[b"Client Key"]);
        Self {
            mechanism,
            salt: salt.to_vec(),
            iterations,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted, &[b"Server Key"]),
        }
    }

    /// A new verifier of `token` with a fresh random salt (OS CSPRNG) and
    /// [`ITERATIONS`].
    pub fn issue(mechanism: Mechanism, token: &str) -> Self {
        let mut salt = [0u8; SALT_BYTES];
        rand::rngs::OsRng
            .try_fill_bytes(&mut salt)
            .expect("the OS random source works");
        Self::derive(mechanism, token.as_bytes(), &salt, ITERATIONS)
    }

    /// What a stored or altered credential must be.
    pub fn validate(&self) -> Result<(), String> {
        if !(ITERATIONS..=MAX_ITERATIONS).contains(&self.iterations) {
            return Err(format!(
                "{} iterations must be {ITERATIONS}-{MAX_ITERATIONS}, got {}",
                self.mechanism, self.iterations
            ));
        }
        if !SALT_RANGE.contains(&self.salt.len()) {
            return Err(format!(
                "a SCRAM salt is {}-{} bytes, got {}",
                SALT_RANGE.start(),
                SALT_RANGE.end(),
                self.salt.len()
            ));
        }
        let n = self.mechanism.hash_len();
        if self.stored_key.len() != n || self.server_key.len() != n {
            return Err(format!("{} keys are {n} bytes", self.mechanism));
        }
        Ok(())
    }
}

mod b64 {
    use super::*;
    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        if s.len() > 256 {
            return Err(serde::de::Error::custom("SCRAM bytes too long"));
        }
        STANDARD.decode(s).map_err(serde::de::Error::custom)
    }
}

/// A SCRAM user as DescribeUserScramCredentials lists it: a token id and
/// the mechanisms (with iterations) it has verifiers for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub user: String,
    pub credentials: Vec<(Mechanism, u32)>,
}

/// Why an exchange failed. [`ScramError::public_message`] is what a
/// client is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScramError {
    /// The message is not SCRAM as Kafka speaks it (or too long).
    Malformed(&'static str),
    /// The client asked for something Kafka does not do (channel binding,
    /// `m=`, an extension other than `tokenauth`, a different authzid).
    Unsupported(&'static str),
    /// The proof does not match: wrong password.
    BadProof,
}

impl ScramError {
    pub fn reason(&self) -> &'static str {
        match self {
            ScramError::Malformed(_) | ScramError::Unsupported(_) => "malformed",
            ScramError::BadProof => "bad_secret",
        }
    }
}

impl fmt::Display for ScramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScramError::Malformed(m) => write!(f, "invalid SCRAM message: {m}"),
            ScramError::Unsupported(m) => write!(f, "unsupported SCRAM request: {m}"),
            ScramError::BadProof => f.write_str("invalid client proof"),
        }
    }
}

/// A parsed client-first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// `n,,` or `n,a=<user>,`: what `c=` must carry, base64ed.
    pub gs2_header: String,
    /// The user name, `=2C`/`=3D` decoded.
    pub user: String,
    pub nonce: String,
    /// `n=..,r=..[,ext]`: the first part of the AuthMessage.
    pub bare: String,
    /// Kafka's `tokenauth=true` extension (delegation tokens); Sluice's
    /// users are all tokens, so it changes nothing.
    pub token_auth: bool,
}

fn ascii(message: &[u8]) -> Result<&str, ScramError> {
    if message.len() > MAX_MESSAGE_BYTES {
        return Err(ScramError::Malformed("longer than 1024 bytes"));
    }
    if !message.iter().all(|b| (0x01..=0x7f).contains(b)) {
        return Err(ScramError::Malformed("not ASCII"));
    }
    Ok(std::str::from_utf8(message).expect("ASCII"))
}

/// RFC 5802's saslname: `=2C` is `,`, `=3D` is `=`, and no other `=`.
fn decode_saslname(s: &str) -> Result<String, ScramError> {
    if s.is_empty() {
        return Err(ScramError::Malformed("empty user name"));
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("bad escape in user name")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

fn printable(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// Kafka's extension syntax: `key=value`, key letters only, value without `,`.
fn extension(part: &str) -> Result<(&str, &str), ScramError> {
    let (k, v) = part
        .split_once('=')
        .ok_or(ScramError::Malformed("extension without ="))?;
    if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphabetic()) || v.is_empty() {
        return Err(ScramError::Malformed("bad extension"));
    }
    Ok((k, v))
}

impl ClientFirst {
    /// Parse `gs2-header client-first-message-bare` as Kafka accepts it.
    pub fn parse(message: &[u8]) -> Result<Self, ScramError> {
        let m = ascii(message)?;
        let rest = match m.get(..2) {
            Some("n,") => &m[2..],
            Some("y,") | Some("p=") => return Err(ScramError::Unsupported("channel binding")),
            _ => return Err(ScramError::Malformed("a client-first message starts with n,")),
        };
        let (authzid, bare) = rest.split_once(',').ok_or(ScramError::Malformed("no gs2 header"))?;
        let authzid = match authzid {
            "" => None,
            a => Some(decode_saslname(
                a.strip_prefix("a=").ok_or(ScramError::Malformed("bad authzid"))?,
            )?),
        };
        let gs2_header = format!("n,{},", &rest[..rest.len() - bare.len() - 1]);
        if bare.starts_with("m=") {
            return Err(ScramError::Unsupported("mandatory extensions (m=)"));
        }
        let mut parts = bare.split(',');
        let user = parts
            .next()
            .and_then(|p| p.strip_prefix("n="))
            .ok_or(ScramError::Malformed("no n="))?;
        let user = decode_saslname(user)?;
        let nonce = parts
            .next()
            .and_then(|p| p.strip_prefix("r="))
            .ok_or(ScramError::Malformed("no r="))?;
        if !printable(nonce) || nonce.len() > MAX_NONCE {
            return Err(ScramError::Malformed("bad nonce"));
        }
        let mut token_auth = false;
        for part in parts {
            match extension(part)? {
                ("tokenauth", v) => token_auth = v.eq_ignore_ascii_case("true"),
                _ => return Err(ScramError::Unsupported("extensions other than tokenauth")),
            }
        }
        if authzid.as_ref().is_some_and(|a| *a != user) {
            return Err(ScramError::Unsupported(
                "an authorization id different from the user name",
            ));
        }
        Ok(Self {
            gs2_header,
            user,
            nonce: nonce.to_string(),
            bare: bare.to_string(),
            token_auth,
        })
    }
}

/// A fresh server nonce: [`SERVER_NONCE_BYTES`] from the OS CSPRNG, base64url.
pub fn server_nonce() -> String {
    let mut b = [0u8; SERVER_NONCE_BYTES];
    rand::rngs::OsRng
        .try_fill_bytes(&mut b)
        .expect("the OS random source works");
    URL_SAFE_NO_PAD.encode(b)
}

/// The server's side after its server-first message: what the client-final
/// message is checked against.
#[derive(Clone)]
pub struct Challenge {
    credential: Credential,
    gs2_header: String,
    /// client nonce + server nonce
    nonce: String,
    /// Bytes of `nonce` that are the client's.
    client_nonce_len: usize,
    /// client-first-message-bare "," server-first-message
    auth_prefix: String,
    /// Who logs in once the proof checks out.
    pub user: String,
}

impl fmt::Debug for Challenge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Challenge")
            .field("mechanism", &self.credential.mechanism)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl Challenge {
    /// The server-first message for `first` with the user's `credential`
    /// and a `server_nonce` (printable, no `,`: see [`server_nonce`]).
    pub fn new(first: &ClientFirst, credential: Credential, server_nonce: &str) -> (Self, Vec<u8>) {
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            STANDARD.encode(&credential.salt),
            credential.iterations
        );
        let challenge = Self {
            credential,
            gs2_header: first.gs2_header.clone(),
            client_nonce_len: first.nonce.len(),
            nonce,
            auth_prefix: format!("{},{server_first}", first.bare),
            user: first.user.clone(),
        };
        (challenge, server_first.into_bytes())
    }

    pub fn mechanism(&self) -> Mechanism {
        self.credential.mechanism
    }

    /// Check a client-final message `c=..,r=..[,ext],p=..`; the server-final
    /// message `v=<ServerSignature>` if its proof holds.
    pub fn finish(&self, message: &[u8]) -> Result<Vec<u8>, ScramError> {
        let m = ascii(message)?;
        let (without_proof, proof) = m.rsplit_once(",p=").ok_or(ScramError::Malformed("no p="))?;
        let mut parts = without_proof.split(',');
        let binding = parts
            .next()
            .and_then(|p| p.strip_prefix("c="))
            .ok_or(ScramError::Malformed("no c="))?;
        if binding != STANDARD.encode(&self.gs2_header) {
            return Err(ScramError::Unsupported(
                "channel binding (c= must repeat the gs2 header)",
            ));
        }
        let nonce = parts
            .next()
            .and_then(|p| p.strip_prefix("r="))
            .ok_or(ScramError::Malformed("no r="))?;
        // librdkafka before 2.6.1 sends the client nonce twice (client +
        // client + server); Kafka accepts any nonce ending in the server's,
        // Sluice that one buggy form besides the right one. Either carries
        // this exchange's fresh server nonce, so neither can be replayed.
        let doubled = nonce
            .strip_suffix(self.nonce.as_str())
            .is_some_and(|head| head == &self.nonce[..self.client_nonce_len]);
        if nonce != self.nonce && !doubled {
            return Err(ScramError::Malformed("the nonce is not the server's"));
        }
        for part in parts {
            extension(part)?;
        }
        let mechanism = self.credential.mechanism;
        let proof = STANDARD
            .decode(proof)
            .map_err(|_| ScramError::Malformed("the proof is not base64"))?;
        if proof.len() != mechanism.hash_len() {
            return Err(ScramError::Malformed("the proof has the wrong length"));
        }
        let auth_message = [self.auth_prefix.as_bytes(), b",", without_proof.as_bytes()];
        let signature = mechanism.hmac(&self.credential.stored_key, &auth_message);
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        let stored = mechanism.hash(&client_key);
        if !bool::from(stored.ct_eq(&self.credential.stored_key)) {
            return Err(ScramError::BadProof);
        }
        let server_signature = mechanism.hmac(&self.credential.server_key, &auth_message);
        Ok(format!("v={}", STANDARD.encode(server_signature)).into_bytes())
    }
}

/// The client's side, for tests and the benchmark client: the
/// client-final message for `password` answering `server_first`, and the
/// server-final message to expect.
pub fn client_final(
    mechanism: Mechanism,
    password: &str,
    client_first_bare: &str,
    server_first: &str,
) -> Option<(String, String)> {
    let mut nonce = None;
    let mut salt = None;
    let mut iterations = None;
    for part in server_first.split(',') {
        match part.split_at_checked(2)? {
            ("r=", v) => nonce = Some(v),
            ("s=", v) => salt = STANDARD.decode(v).ok(),
            ("i=", v) => iterations = v.parse::<u32>().ok(),
            _ => {}
        }
    }
    let (nonce, salt, iterations) = (nonce?, salt?, iterations?);
    let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
    let client_key = mechanism.hmac(&salted, &[b"Client Key"]);
    let stored_key = mechanism.hash(&client_key);
    let server_key = mechanism.hmac(&salted, &[b"Server Key"]);
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = [
        client_first_bare.as_bytes(),
        b",",
        server_first.as_bytes(),
        b",",
        without_proof.as_bytes(),
    ];
    let signature = mechanism.hmac(&stored_key, &auth_message);
    let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
    let server_signature = mechanism.hmac(&server_key, &auth_message);
    Some((
        format!("{without_proof},p={}", STANDARD.encode(proof)),
        format!("v={}", STANDARD.encode(server_signature)),
    ))
}

#[cfg(test)]
mod tests;
