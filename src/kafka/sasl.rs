//! SASL on the Kafka port: SaslHandshake (v0–1), SaslAuthenticate (v0–2)
//! and the PLAIN mechanism, whose password is a Sluice token (the user
//! name is free and ignored).
//!
//! Each connection has a [`Session`]. With `--auth on`, until it has
//! authenticated only ApiVersions, SaslHandshake and SaslAuthenticate are
//! answered; any other request closes the connection (as a Kafka broker
//! does). After a v0 handshake the next frame is the bare PLAIN message
//! without a request header (Kafka's original framing), answered with an
//! empty frame. Once authenticated, the token is checked again on every
//! request and, by the connection, every [`super::TOKEN_RECHECK`] while it
//! is quiet ([`Session::recheck`]), so revoking it or its expiry closes the
//! connection within a second even if the client sends nothing.

use super::wire::{DecodeError, DecodeResult, Reader, Writer};
use crate::api::Tokens;
use crate::auth::{AuthFailure, Principal, Secret};
use bytes::{BufMut, Bytes};
use std::sync::{Arc, Mutex};

pub const SASL_HANDSHAKE: i16 = 17;
pub const SASL_AUTHENTICATE: i16 = 36;

pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const ILLEGAL_SASL_STATE: i16 = 34;
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// The one mechanism offered.
pub const PLAIN: &str = "PLAIN";

/// Longest SASL message accepted (a PLAIN message is two names and a token).
const MAX_SASL_BYTES: usize = 4096;

/// Where a connection is in the SASL exchange.
#[derive(Debug, Clone, Default)]
enum State {
    #[default]
    Start,
    /// PLAIN was chosen; `raw`: a v0 handshake, the next frame is the bare token.
    Handshaken { raw: bool },
    /// Logged in with this token (checked again on every request).
    Authenticated(Arc<Secret>),
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
    /// Answer this frame as is: the reply to a bare v0 PLAIN message.
    Raw(Bytes),
    /// Close the connection, for this reason (logged; never a secret).
    Close(&'static str),
}

impl Session {
    /// Decide what to do with a frame of api `key` before decoding it.
    pub fn gate(&self, tokens: &dyn Tokens, key: i16, frame: &Bytes) -> Gate {
        let state = self.state.lock().unwrap().clone();
        if let State::Handshaken { raw: true } = state {
            return match self.login(tokens, frame) {
                Ok(()) => Gate::Raw(Bytes::new()),
                Err(_) => Gate::Close("SASL/PLAIN (v0 framing) authentication failed"),
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
        match state {
            State::Authenticated(token) => match self.principal(tokens, &token) {
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
        let state = self.state.lock().unwrap().clone();
        match state {
            State::Authenticated(token) => match self.principal(tokens, &token) {
                Some(_) => Recheck::Valid,
                None => Recheck::Revoked,
            },
            _ => Recheck::NotLoggedIn,
        }
    }

    /// Who `token` is now; `None` (counted, and the session failed) if it
    /// no longer authenticates.
    fn principal(&self, tokens: &dyn Tokens, token: &Secret) -> Option<Principal> {
        match tokens.authenticate(token.expose()) {
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
        } else if mechanism != PLAIN {
            UNSUPPORTED_SASL_MECHANISM
        } else {
            *state = State::Handshaken { raw: version == 0 };
            super::code::NONE
        };
        w.i16(error);
        w.array_len(1);
        w.string(PLAIN);
        Ok(())
    }

    /// SaslAuthenticate: check a PLAIN message. A failure is answered with
    /// `SASL_AUTHENTICATION_FAILED`, and the next request closes the connection.
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
        let handshaken = matches!(*self.state.lock().unwrap(), State::Handshaken { raw: false });
        let (error, message) = if !handshaken {
            (ILLEGAL_SASL_STATE, Some("SaslHandshake with PLAIN must come first"))
        } else {
            match self.login(tokens, &message) {
                Ok(()) => (super::code::NONE, None),
                Err(f) => (SASL_AUTHENTICATION_FAILED, Some(f.public_message())),
            }
        };
        w.i16(error);
        if version >= 2 {
            w.compact_nullable_string(message);
            w.uvarint(1); // empty compact bytes
        } else {
            w.nullable_string(message);
            w.i32(0); // empty auth_bytes
        }
        if version >= 1 {
            w.i64(0); // session_lifetime_ms: no re-authentication required
        }
        if version >= 2 {
            w.no_tagged_fields();
        }
        Ok(())
    }

    /// Check a PLAIN message and move to `Authenticated` or `Failed`.
    fn login(&self, tokens: &dyn Tokens, message: &[u8]) -> Result<(), AuthFailure> {
        let result = parse_plain(message).and_then(|token| {
            if !tokens.auth_required() {
                return Ok(token);
            }
            tokens.authenticate(token.expose()).map(|p| {
                tracing::debug!(token = %p.id, "kafka client authenticated");
                token
            })
        });
        let mut state = self.state.lock().unwrap();
        match result {
            Ok(token) => {
                *state = State::Authenticated(Arc::new(token));
                Ok(())
            }
            Err(f) => {
                crate::auth::count_failure("kafka", f.reason());
                *state = State::Failed;
                Err(f)
            }
        }
    }
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
mod tests {
    use super::*;

    #[test]
    fn plain_messages_yield_the_password_and_nothing_else_parses() {
        assert_eq!(parse_plain(&plain_message("u", "slc_x")).unwrap().expose(), "slc_x");
        assert_eq!(parse_plain(b"authz\0user\0pw").unwrap().expose(), "pw");
        assert_eq!(parse_plain(b"user\0pw"), Err(AuthFailure::Malformed));
        assert_eq!(parse_plain(b"\0user\0pw\0extra"), Err(AuthFailure::Malformed));
        assert_eq!(parse_plain(b"\0user\0"), Err(AuthFailure::Missing));
        assert_eq!(parse_plain(b"\0u\0\xff\xfe"), Err(AuthFailure::Malformed));
        assert_eq!(parse_plain(&vec![0u8; 5000]), Err(AuthFailure::Malformed));
    }
}
