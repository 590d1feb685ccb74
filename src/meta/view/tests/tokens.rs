//! `CreateToken` and `RevokeToken`: every acceptance and rejection.

use super::*;
use crate::auth::{Op, Scope, TokenRecord};

fn record(id: &str) -> TokenRecord {
    let (_, mut r) = crate::auth::token::issue(
        "ci",
        vec![Scope::new("orders*", &[Op::Read])],
        1_000,
        Some(2_000),
        "admin",
    );
    r.id = id.to_string();
    r
}

fn create(h: &mut Harness, e: NodeEpoch, token: TokenRecord) -> Outcome {
    h.apply_as("n1", Some(e.0), Command::CreateToken { token })
}

fn revoke(h: &mut Harness, e: NodeEpoch, id: &str) -> Outcome {
    h.apply_as("n1", Some(e.0), Command::RevokeToken { id: id.into() })
}

#[test]
fn a_created_token_is_in_the_view_until_revoked() {
    let mut h = Harness::new();
    let e = h.register("n1");
    let r = record("0123456789abcdef");
    assert_eq!(create(&mut h, e, r.clone()), Outcome::Applied);
    assert_eq!(h.view.tokens["0123456789abcdef"], r);
    assert_eq!(revoke(&mut h, e, "0123456789abcdef"), Outcome::Applied);
    assert!(h.view.tokens.is_empty());
}

#[test]
fn a_duplicate_id_is_rejected_and_keeps_the_first_token() {
    let mut h = Harness::new();
    let e = h.register("n1");
    let first = record("0123456789abcdef");
    create(&mut h, e, first.clone());
    let mut second = record("0123456789abcdef");
    second.name = "other".into();
    assert_eq!(
        create(&mut h, e, second),
        Outcome::Rejected(Rejection::TokenExists("0123456789abcdef".into()))
    );
    assert_eq!(h.view.tokens["0123456789abcdef"], first);
}

#[test]
fn an_invalid_token_is_rejected_and_changes_nothing() {
    let mut h = Harness::new();
    let e = h.register("n1");
    let before = h.view.tokens.clone();
    let mut bad_scope = record("0123456789abcdef");
    bad_scope.scopes = vec![Scope::new("a/b", &[Op::Read])];
    assert!(matches!(
        create(&mut h, e, bad_scope),
        Outcome::Rejected(Rejection::Invalid(_))
    ));
    let bad_id = record("not-hex");
    assert!(matches!(
        create(&mut h, e, bad_id),
        Outcome::Rejected(Rejection::Invalid(_))
    ));
    assert_eq!(h.view.tokens, before);
}

#[test]
fn revoking_an_unknown_token_is_rejected() {
    let mut h = Harness::new();
    let e = h.register("n1");
    assert_eq!(
        revoke(&mut h, e, "0123456789abcdef"),
        Outcome::Rejected(Rejection::TokenNotFound("0123456789abcdef".into()))
    );
}

#[test]
fn a_fenced_proposer_cannot_create_or_revoke_tokens() {
    let mut h = Harness::new();
    let e = h.register("n1");
    create(&mut h, e, record("0123456789abcdef"));
    h.apply_as(
        "n1",
        Some(e.0),
        Command::FenceSelf {
            node: n("n1"),
            epoch: e,
        },
    );
    assert!(matches!(
        create(&mut h, e, record("1111111111111111")),
        Outcome::Rejected(Rejection::ProposerFenced(_))
    ));
    assert!(matches!(
        revoke(&mut h, e, "0123456789abcdef"),
        Outcome::Rejected(Rejection::ProposerFenced(_))
    ));
    assert_eq!(h.view.tokens.len(), 1);
}

#[test]
fn snapshots_without_tokens_stay_readable_and_tokens_round_trip() {
    // A view with no tokens serializes without the field (older nodes read it).
    let view = View::default();
    let json = serde_json::to_value(&view).unwrap();
    assert!(json.get("tokens").is_none());
    let back: View = serde_json::from_value(json).unwrap();
    assert!(back.tokens.is_empty());

    let mut h = Harness::new();
    let e = h.register("n1");
    create(&mut h, e, record("0123456789abcdef"));
    let json = serde_json::to_string(&h.view).unwrap();
    let back: View = serde_json::from_str(&json).unwrap();
    assert_eq!(back, h.view);
}

#[test]
fn a_token_with_a_weak_or_doubled_scram_credential_is_rejected() {
    let mut h = Harness::new();
    let e = h.register("n1");
    let mut weak = record("0123456789abcdef");
    weak.scram[0].iterations = 1;
    assert!(matches!(
        create(&mut h, e, weak),
        Outcome::Rejected(Rejection::Invalid(_))
    ));
    let mut doubled = record("0123456789abcdef");
    doubled.scram.push(doubled.scram[0].clone());
    assert!(matches!(
        create(&mut h, e, doubled),
        Outcome::Rejected(Rejection::Invalid(_))
    ));
    // Without any (issued before SCRAM): accepted, PLAIN-only.
    let mut legacy = record("0123456789abcdef");
    legacy.scram.clear();
    assert_eq!(create(&mut h, e, legacy), Outcome::Applied);
}
