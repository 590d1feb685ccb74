//! The SASL session over an in-memory token table: PLAIN, SCRAM-SHA-256
//! and -512 logins, refusals, revocation, and the wire at every version
//! (requests built by kafka-protocol, responses decoded by it).

use super::*;
use crate::auth::scram::client_final;
use crate::auth::{Auth, IssuedToken, NewToken, Op, Scope, TokenInfo, TokenRecord};
use async_trait::async_trait;
use bytes::BytesMut;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::{Decodable, Encodable};
use std::collections::BTreeMap;

struct Table {
    auth: Auth,
    tokens: Mutex<BTreeMap<String, TokenRecord>>,
}

impl Table {
    fn new() -> Self {
        Self {
            auth: Auth::new(None, Arc::new(|| 1_000)),
            tokens: Mutex::new(BTreeMap::new()),
        }
    }

    fn issue(&self) -> (String, String) {
        let (secret, record) = crate::auth::token::issue("t", vec![Scope::new("*", &[Op::Read])], 500, None, "admin");
        let id = record.id.clone();
        self.tokens.lock().unwrap().insert(id.clone(), record);
        (id, secret.expose().to_string())
    }
}

#[async_trait]
impl Tokens for Table {
    fn auth_required(&self) -> bool {
        true
    }
    fn authenticate(&self, secret: &str) -> Result<Principal, AuthFailure> {
        self.auth
            .authenticate(secret, |id| self.tokens.lock().unwrap().get(id).cloned())
    }
    fn scram_credential(
        &self,
        user: &str,
        mechanism: Mechanism,
    ) -> Result<Option<crate::auth::scram::Credential>, AuthFailure> {
        let record = self.tokens.lock().unwrap().get(user).cloned();
        let c = record.as_ref().and_then(|r| r.scram(mechanism).cloned());
        self.auth.admit(record)?;
        Ok(c)
    }
    fn authenticate_id(&self, id: &str) -> Result<Principal, AuthFailure> {
        self.auth.admit(self.tokens.lock().unwrap().get(id).cloned())
    }
    fn scram_users(&self) -> crate::api::ApiResult<Vec<crate::auth::scram::UserInfo>> {
        Ok(Vec::new())
    }
    async fn create_token(&self, _req: NewToken) -> crate::api::ApiResult<IssuedToken> {
        unimplemented!()
    }
    fn list_tokens(&self) -> crate::api::ApiResult<Vec<TokenInfo>> {
        Ok(Vec::new())
    }
    async fn revoke_token(&self, id: &str) -> crate::api::ApiResult<()> {
        self.tokens.lock().unwrap().remove(id);
        Ok(())
    }
}

fn encode(m: &impl Encodable, version: i16) -> Bytes {
    let mut b = BytesMut::new();
    m.encode(&mut b, version).unwrap();
    b.freeze()
}

fn handshake(s: &Session, version: i16, mechanism: &str) -> kafka_protocol::messages::SaslHandshakeResponse {
    let req = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into()));
    let mut w = Writer::default();
    s.handshake(version, &mut Reader::new(encode(&req, version)), &mut w)
        .unwrap();
    let mut out = w.finish().into_bytes();
    kafka_protocol::messages::SaslHandshakeResponse::decode(&mut out, version).unwrap()
}

fn authenticate(
    s: &Session,
    t: &dyn Tokens,
    version: i16,
    message: &[u8],
) -> kafka_protocol::messages::SaslAuthenticateResponse {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(message));
    let mut w = Writer::default();
    s.authenticate(t, version, &mut Reader::new(encode(&req, version)), &mut w)
        .unwrap();
    let mut out = w.finish().into_bytes();
    kafka_protocol::messages::SaslAuthenticateResponse::decode(&mut out, version).unwrap()
}

/// A whole SCRAM login; the server-final message, or the refusal.
fn scram_login(
    s: &Session,
    t: &dyn Tokens,
    version: i16,
    m: Mechanism,
    user: &str,
    password: &str,
) -> Result<String, (i16, String)> {
    assert_eq!(handshake(s, 1, m.name()).error_code, 0);
    let bare = format!("n={user},r=clientnonce0123456789");
    let r = authenticate(s, t, version, format!("n,,{bare}").as_bytes());
    if r.error_code != 0 {
        return Err((r.error_code, r.error_message.unwrap().to_string()));
    }
    let server_first = String::from_utf8(r.auth_bytes.to_vec()).unwrap();
    assert!(server_first.starts_with("r=clientnonce0123456789"), "{server_first}");
    assert!(server_first.ends_with(",i=4096"), "{server_first}");
    let (last, expected) = client_final(m, password, &bare, &server_first).unwrap();
    let r = authenticate(s, t, version, last.as_bytes());
    if r.error_code != 0 {
        return Err((r.error_code, r.error_message.unwrap().to_string()));
    }
    let server_final = String::from_utf8(r.auth_bytes.to_vec()).unwrap();
    assert_eq!(server_final, expected);
    Ok(server_final)
}

#[test]
fn the_handshake_offers_plain_and_both_scram_mechanisms_at_every_version() {
    for v in 0..=1 {
        let s = Session::default();
        let r = handshake(&s, v, "GSSAPI");
        assert_eq!(r.error_code, UNSUPPORTED_SASL_MECHANISM);
        let names: Vec<String> = r.mechanisms.iter().map(|m| m.to_string()).collect();
        assert_eq!(names, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
        assert_eq!(handshake(&s, v, "SCRAM-SHA-512").error_code, 0);
        assert_eq!(handshake(&s, v, "PLAIN").error_code, ILLEGAL_SASL_STATE);
    }
}

#[test]
fn scram_logins_succeed_with_the_token_at_every_version_and_recheck_by_id() {
    let t = Table::new();
    let (id, token) = t.issue();
    for m in Mechanism::ALL {
        for v in 0..=2 {
            let s = Session::default();
            scram_login(&s, &t, v, m, &id, &token).unwrap();
            assert!(s.is_authenticated());
            assert_eq!(s.recheck(&t), Recheck::Valid);
            match s.gate(&t, super::super::proto::METADATA, &Bytes::new()) {
                Gate::Serve(Some(p)) => assert_eq!(p.id, id),
                _ => panic!("a SCRAM login was not served"),
            }
        }
    }
}

#[test]
fn a_wrong_scram_password_is_refused_with_kafkas_message_and_fails_the_session() {
    let t = Table::new();
    let (id, token) = t.issue();
    let s = Session::default();
    let wrong = format!("{token}x");
    let (code, message) = scram_login(&s, &t, 2, Mechanism::Sha256, &id, &wrong).unwrap_err();
    assert_eq!(code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        message,
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    );
    assert!(!s.is_authenticated());
    assert!(matches!(
        s.gate(&t, super::super::proto::METADATA, &Bytes::new()),
        Gate::Close(_)
    ));
    // Another attempt on the same connection is refused too.
    assert_eq!(handshake(&s, 1, "SCRAM-SHA-256").error_code, ILLEGAL_SASL_STATE);
}

#[test]
fn unknown_users_and_tokens_without_scram_credentials_are_refused_clearly() {
    let t = Table::new();
    let (id, token) = t.issue();
    let s = Session::default();
    let (code, message) = scram_login(&s, &t, 2, Mechanism::Sha512, "ffffffffffffffff", &token).unwrap_err();
    assert_eq!(
        (code, message.contains("invalid credentials")),
        (SASL_AUTHENTICATION_FAILED, true)
    );
    t.tokens.lock().unwrap().get_mut(&id).unwrap().scram.clear();
    let s = Session::default();
    let (code, message) = scram_login(&s, &t, 2, Mechanism::Sha512, &id, &token).unwrap_err();
    assert_eq!(code, SASL_AUTHENTICATION_FAILED);
    assert!(
        message.contains("no SCRAM-SHA-512 credential") && message.contains("PLAIN"),
        "{message}"
    );
    assert!(!message.contains(&token));
    // PLAIN still logs that token in.
    let s = Session::default();
    assert_eq!(handshake(&s, 1, "PLAIN").error_code, 0);
    assert_eq!(authenticate(&s, &t, 1, &plain_message("u", &token)).error_code, 0);
}

#[test]
fn revoking_a_token_fails_its_scram_sessions_at_the_next_recheck() {
    let t = Table::new();
    let (id, token) = t.issue();
    let s = Session::default();
    scram_login(&s, &t, 1, Mechanism::Sha512, &id, &token).unwrap();
    t.tokens.lock().unwrap().remove(&id);
    assert_eq!(s.recheck(&t), Recheck::Revoked);
    assert!(!s.is_authenticated());
    assert!(matches!(
        s.gate(&t, super::super::proto::METADATA, &Bytes::new()),
        Gate::Close(_)
    ));
}

#[test]
fn bare_v0_frames_carry_the_scram_exchange() {
    let t = Table::new();
    let (id, token) = t.issue();
    let s = Session::default();
    assert_eq!(handshake(&s, 0, "SCRAM-SHA-256").error_code, 0);
    let bare = format!("n={id},r=abcdefgh");
    let Gate::Raw(server_first) = s.gate(&t, -1, &Bytes::from(format!("n,,{bare}"))) else {
        panic!("no raw challenge")
    };
    let server_first = String::from_utf8(server_first.to_vec()).unwrap();
    let (last, expected) = client_final(Mechanism::Sha256, &token, &bare, &server_first).unwrap();
    let Gate::Raw(server_final) = s.gate(&t, -1, &Bytes::from(last)) else {
        panic!("no raw server-final")
    };
    assert_eq!(server_final, expected.as_bytes());
    assert!(s.is_authenticated());
    // And a bad bare message closes the connection.
    let s = Session::default();
    assert_eq!(handshake(&s, 0, "SCRAM-SHA-256").error_code, 0);
    assert!(matches!(
        s.gate(&t, -1, &Bytes::from_static(b"garbage")),
        Gate::Close(_)
    ));
}

#[test]
fn sasl_authenticate_before_a_handshake_is_an_illegal_state_and_changes_nothing() {
    let t = Table::new();
    let s = Session::default();
    let r = authenticate(&s, &t, 2, b"n,,n=user,r=abc");
    assert_eq!(r.error_code, ILLEGAL_SASL_STATE);
    assert_eq!(handshake(&s, 1, "PLAIN").error_code, 0);
}

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
