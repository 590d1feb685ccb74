//! SASL on the Kafka port: SaslHandshake (v0–1), SaslAuthenticate (v0–2)
//! and the PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 mechanisms. PLAIN's
//! password is a Sluice token (the user name is free and ignored); SCRAM's
//! user name is the token's id and its password the whole token, checked
//! against the salted verifiers the token record keeps
//! ([`crate::auth::scram`]).
//!
//! Each connection has a [`Session`]. With `--auth on`, until it has
//! authenticated only ApiVersions, SaslHandshake and SaslAuthenticate are
//! answered; any other request closes the connection (as a Kafka broker
//! does). After a v0 handshake the next frames are the bare SASL messages
//! without a request header (Kafka's original framing), answered with bare
//! frames (empty for PLAIN). A failed login is answered (v1 framing) and the
//! connection is closed at its next request. Once authenticated, the token
//! is checked again on every request and, by the connection, every
//! [`super::TOKEN_RECHECK`] while it is quiet ([`Session::recheck`]), so
//! revoking it or its expiry closes the connection within a second even if
//! the client sends nothing — whichever mechanism logged in.

use super::wire::{DecodeError, DecodeResult, Reader, Writer};
use crate::api::Tokens;
use crate::auth::scram::{self, Challenge, ClientFirst, Mechanism, ScramError};
use crate::auth::{AuthFailure, Principal, Secret};
use bytes::{BufMut, Bytes};
use kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;
use std::sync::{Arc, Mutex};

pub const SASL_HANDSHAKE: i16 = 17;
pub const SASL_AUTHENTICATE: i16 = 36;

pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const ILLEGAL_SASL_STATE: i16 = 34;
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;

pub const PLAIN: &str = "PLAIN";

/// The mechanisms offered, in the order SaslHandshake lists them.
pub const MECHANISMS: [&str; 3] = [PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// Longest SASL message accepted (a PLAIN message is two names and a token;
/// SCRAM messages are held to [`scram::MAX_MESSAGE_BYTES`]).
const MAX_SASL_BYTES: usize = 4096;

/// A mechanism chosen by SaslHandshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mech {
    Plain,
    Scram(Mechanism),
}

impl Mech {
    fn from_name(name: &str) -> Option<Self> {
        if name == PLAIN {
            return Some(Mech::Plain);
        }
        Mechanism::from_name(name).map(Mech::Scram)
    }
}

/// Who a session logged in as, checked again on every request.
#[derive(Debug, Clone)]
enum Login {
    /// PLAIN: the token itself.
    Token(Arc<Secret>),
    /// SCRAM: the id of the token whose secret the proof showed.
    TokenId(Arc<str>),
}

/// Where a connection is in the SASL exchange. Small: before login a
/// connection holds at most one [`Challenge`] (under 1 KiB).
#[derive(Debug, Default)]
enum State {
    #[default]
    Start,
    /// A mechanism was chosen; `raw`: a v0 handshake, the next frames are
    /// bare SASL messages.
    Handshaken {
        mech: Mech,
        raw: bool,
    },
    /// SCRAM's server-first message went out; the client-final is next.
    Challenged {
        challenge: Box<Challenge>,
        raw: bool,
    },
    Authenticated(Login),
    /// A login failed; nothing more is answered.
    Failed,
}

/// The SASL state of one connection.
#[derive(Debug, Default)]
pub struct Session {
    state: Mutex<State>,
}

/// Whether a connection's login still holds ([`Session::recheck`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recheck {
    /// Logged in with a token that still authenticates (or auth is off).
    Valid,
    /// Not logged in (yet, or a login failed).
    NotLoggedIn,
    /// Logged in, but the token was revoked or has expired; the session is
    /// now failed.
    Revoked,
}

/// What the connection should do with a request frame.
pub enum Gate {
    /// Serve it as this principal (`None`: auth is off, anything goes).
    Serve(Option<Arc<Principal>>),
    /// A SASL request: serve it without a principal.
    Sasl,
    /// Answer this frame as is: the reply to a bare (v0 framing) SASL message.
    Raw(Bytes),
    /// Close the connection, for this reason (logged; never a secret).
    Close(&'static str),
}

/// One SASL message's outcome.
enum Step {
    /// Logged in; this is the last server message (empty for PLAIN).
    Done(Bytes),
    /// The exchange goes on: this is the server's challenge.
    Continue(Bytes),
}

/// A refused SASL message: the session is failed and the client told this.
struct Refused {
    code: i16,
    message: String,
}

/// What a connection is doing, without the state's contents.
enum Phase {
    Raw,
    Logged(Login),
    Other,
}

impl Session {
    fn phase(&self) -> Phase {
        match &*self.state.lock().unwrap() {
            State::Handshaken { raw: true, .. } | State::Challenged { raw: true, .. } => Phase::Raw,
            State::Authenticated(login) => Phase::Logged(login.clone()),
            _ => Phase::Other,
        }
    }

    /// Decide what to do with a frame of api `key` before decoding it.
    pub fn gate(&self, tokens: &dyn Tokens, key: i16, frame: &Bytes) -> Gate {
        let phase = self.phase();
        if let Phase::Raw = phase {
            return match self.step(tokens, frame) {
                Ok(Step::Done(reply) | Step::Continue(reply)) => Gate::Raw(reply),
                Err(_) => Gate::Close("SASL (v0 framing) authentication failed"),
            };
        }
        if matches!(key, SASL_HANDSHAKE | SASL_AUTHENTICATE) {
            return Gate::Sasl;
        }
        if key == super::proto::API_VERSIONS {
            return Gate::Serve(None);
        }
        if !tokens.auth_required() {
            return Gate::Serve(None);
        }
        match phase {
            Phase::Logged(login) => match self.principal(tokens, &login) {
                Some(p) => Gate::Serve(Some(Arc::new(p))),
                None => Gate::Close("the connection's token was revoked or expired"),
            },
            _ => {
                crate::auth::count_failure("kafka", "no_sasl");
                Gate::Close("request before SASL authentication")
            }
        }
    }

    /// Whether this connection has logged in (and not failed since).
    pub fn is_authenticated(&self) -> bool {
        matches!(*self.state.lock().unwrap(), State::Authenticated(_))
    }

    /// Check the login's token again, as a request would: a revoked or
    /// expired token fails the session.
    pub fn recheck(&self, tokens: &dyn Tokens) -> Recheck {
        if !tokens.auth_required() {
            return Recheck::Valid;
        }
        match self.phase() {
            Phase::Logged(login) => match self.principal(tokens, &login) {
                Some(_) => Recheck::Valid,
                None => Recheck::Revoked,
            },
            _ => Recheck::NotLoggedIn,
        }
    }

    /// Who `login` is now; `None` (counted, and the session failed) if its
    /// token no longer authenticates.
    fn principal(&self, tokens: &dyn Tokens, login: &Login) -> Option<Principal> {
        let now = match login {
            Login::Token(token) => tokens.authenticate(token.expose()),
            Login::TokenId(id) => tokens.authenticate_id(id),
        };
        match now {
            Ok(p) => Some(p),
            Err(f) => {
                crate::auth::count_failure("kafka", f.reason());
                *self.state.lock().unwrap() = State::Failed;
                None
            }
        }
    }

    /// SaslHandshake: choose the mechanism.
    pub fn handshake(&self, version: i16, r: &mut Reader, w: &mut Writer) -> DecodeResult<()> {
        let mechanism = r.string()?;
        r.expect_end()?;
        let mut state = self.state.lock().unwrap();
        let error = if !matches!(*state, State::Start) {
            ILLEGAL_SASL_STATE
        } else if let Some(mech) = Mech::from_name(&mechanism) {
            *state = State::Handshaken {
                mech,
                raw: version == 0,
            };
            super::code::NONE
        } else {
            UNSUPPORTED_SASL_MECHANISM
        };
        drop(state);
        let resp = SaslHandshakeResponse::default()
            .with_error_code(error)
            .with_mechanisms(MECHANISMS.iter().map(|m| StrBytes::from_static_str(m)).collect());
        w.message(&resp, version)
    }

    /// SaslAuthenticate: one message of the chosen mechanism. A failure is
    /// answered with `SASL_AUTHENTICATION_FAILED`, and the next request
    /// closes the connection.
    pub fn authenticate(&self, tokens: &dyn Tokens, version: i16, r: &mut Reader, w: &mut Writer) -> DecodeResult<()> {
        let message = if version >= 2 {
            let len = r.uvarint()? as usize;
            let len = len.checked_sub(1).ok_or_else(|| decode_error(r, "null SASL bytes"))?;
            let b = r.bytes_exact(len)?;
            r.tagged_fields()?;
            b
        } else {
            r.nullable_bytes()?.unwrap_or_default()
        };
        r.expect_end()?;
        let (error, message, reply) = match self.step(tokens, &message) {
            Ok(Step::Done(reply) | Step::Continue(reply)) => (super::code::NONE, None, reply),
            Err(Refused { code, message }) => (code, Some(message), Bytes::new()),
        };
        let resp = SaslAuthenticateResponse::default()
            .with_error_code(error)
            .with_error_message(message.map(StrBytes::from_string))
            .with_auth_bytes(reply)
            .with_session_lifetime_ms(0); // no re-authentication required
        w.message(&resp, version)
    }

    /// Take one SASL message in the current state: log in, challenge, or
    /// refuse (and fail the session, counted).
    fn step(&self, tokens: &dyn Tokens, message: &[u8]) -> Result<Step, Refused> {
        let mut state = self.state.lock().unwrap();
        let taken = std::mem::replace(&mut *state, State::Failed);
        let (next, result) = match taken {
            State::Handshaken { mech: Mech::Plain, .. } => match plain_login(tokens, message) {
                Ok(token) => (
                    State::Authenticated(Login::Token(Arc::new(token))),
                    Ok(Step::Done(Bytes::new())),
                ),
                Err(f) => (State::Failed, Err((f.reason(), refused(f.public_message())))),
            },
            State::Handshaken {
                mech: Mech::Scram(m),
                raw,
            } => match scram_first(tokens, m, message) {
                Ok((challenge, server_first)) => (
                    State::Challenged {
                        challenge: Box::new(challenge),
                        raw,
                    },
                    Ok(Step::Continue(server_first.into())),
                ),
                Err(e) => (State::Failed, Err(e)),
            },
            State::Challenged { challenge, .. } => match challenge.finish(message) {
                Ok(server_final) => {
                    tracing::debug!(token = %challenge.user, mechanism = %challenge.mechanism(), "kafka client authenticated");
                    (
                        State::Authenticated(Login::TokenId(challenge.user.as_str().into())),
                        Ok(Step::Done(server_final.into())),
                    )
                }
                Err(e) => (
                    State::Failed,
                    Err((e.reason(), scram_refusal(challenge.mechanism(), &e))),
                ),
            },
            other => {
                // Not mid-exchange: refused, but the state stays as it was.
                *state = other;
                return Err(Refused {
                    code: ILLEGAL_SASL_STATE,
                    message: "SaslHandshake must come first (once per connection)".into(),
                });
            }
        };
        *state = next;
        result.map_err(|(reason, message)| {
            crate::auth::count_failure("kafka", reason);
            Refused {
                code: SASL_AUTHENTICATION_FAILED,
                message,
            }
        })
    }
}

fn refused(message: &str) -> String {
    message.to_string()
}

/// Check a PLAIN message: its token, if it authenticates (or auth is off).
fn plain_login(tokens: &dyn Tokens, message: &[u8]) -> Result<Secret, AuthFailure> {
    let token = parse_plain(message)?;
    if tokens.auth_required() {
        let p = tokens.authenticate(token.expose())?;
        tracing::debug!(token = %p.id, "kafka client authenticated");
    }
    Ok(token)
}

/// Kafka's answer to a failed SCRAM login (it names no user, no reason).
fn invalid_credentials(m: Mechanism) -> String {
    format!("Authentication failed during authentication due to invalid credentials with SASL mechanism {m}")
}

fn scram_refusal(m: Mechanism, e: &ScramError) -> String {
    match e {
        ScramError::BadProof => invalid_credentials(m),
        other => format!("Authentication failed: {other}"),
    }
}

/// A SCRAM client-first message: the challenge to hold and the
/// server-first message, if the user is a token with a verifier.
fn scram_first(
    tokens: &dyn Tokens,
    m: Mechanism,
    message: &[u8],
) -> Result<(Challenge, Vec<u8>), (&'static str, String)> {
    let first = ClientFirst::parse(message).map_err(|e| (e.reason(), scram_refusal(m, &e)))?;
    let credential = tokens
        .scram_credential(&first.user, m)
        .map_err(|f| (f.reason(), invalid_credentials(m)))?
        .ok_or_else(|| {
            (
                "no_scram_credential",
                format!(
                    "Authentication failed: token {} has no {m} credential (it was issued before Sluice spoke SCRAM): log in with PLAIN, or issue a new token",
                    first.user
                ),
            )
        })?;
    if credential.iterations < scram::ITERATIONS {
        return Err(("malformed", invalid_credentials(m)));
    }
    Ok(Challenge::new(&first, credential, &scram::server_nonce()))
}

fn decode_error(r: &Reader, message: &str) -> DecodeError {
    DecodeError {
        at: r.position(),
        message: message.to_string(),
    }
}

/// The password of a PLAIN message `authzid NUL authcid NUL passwd` (RFC 4616).
pub fn parse_plain(message: &[u8]) -> Result<Secret, AuthFailure> {
    if message.len() > MAX_SASL_BYTES {
        return Err(AuthFailure::Malformed);
    }
    let mut parts = message.split(|b| *b == 0);
    let (Some(_authzid), Some(_authcid), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthFailure::Malformed);
    };
    let password = std::str::from_utf8(password).map_err(|_| AuthFailure::Malformed)?;
    if password.is_empty() {
        return Err(AuthFailure::Missing);
    }
    Ok(Secret::new(password))
}

/// A PLAIN message (for tests and the benchmark client).
pub fn plain_message(user: &str, password: &str) -> Bytes {
    let mut b = bytes::BytesMut::new();
    b.put_u8(0);
    b.put_slice(user.as_bytes());
    b.put_u8(0);
    b.put_slice(password.as_bytes());
    b.freeze()
}

#[cfg(test)]
mod tests;
