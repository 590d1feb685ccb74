use super::token::{issue, token_id};
use super::*;
use std::sync::atomic::{AtomicI64, Ordering};

fn clock_at(t: Arc<AtomicI64>) -> Clock {
    Arc::new(move || t.load(Ordering::SeqCst))
}

#[test]
fn globs_match_like_shell_wildcards() {
    let cases = [
        ("*", "orders", true),
        ("*", "", true),
        ("orders", "orders", true),
        ("orders", "orders2", false),
        ("orders*", "orders", true),
        ("orders*", "orders.eu", true),
        ("orders*", "order", false),
        ("*.eu", "orders.eu", true),
        ("*.eu", "orders.us", false),
        ("o?ders", "orders", true),
        ("o?ders", "oders", false),
        ("a*b*c", "a-x-b-y-c", true),
        ("a*b*c", "a-x-c-y-b", false),
        ("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false),
        ("**", "x", true),
        ("", "", true),
        ("", "x", false),
    ];
    for (glob, name, want) in cases {
        assert_eq!(glob_matches(glob, name), want, "{glob:?} vs {name:?}");
    }
}

#[test]
fn scopes_validate_their_glob_and_ops() {
    assert!(Scope::new("orders*", &[Op::Read]).validate().is_ok());
    assert!(Scope::new("", &[Op::Read]).validate().is_err());
    assert!(Scope::new("orders/x", &[Op::Read]).validate().is_err());
    assert!(Scope::new(&"a".repeat(250), &[Op::Read]).validate().is_err());
    let e = Scope::new("orders", &[]).validate().unwrap_err();
    assert!(e.contains("grants no ops"), "{e}");
}

#[test]
fn a_principal_may_do_only_what_a_scope_grants() {
    let p = Principal {
        id: "t".into(),
        scopes: vec![
            Scope::new("orders*", &[Op::Read, Op::Write]),
            Scope::new("audit", &[Op::Read]),
        ],
    };
    assert!(p.allows(Op::Write, "orders.eu"));
    assert!(p.allows(Op::Read, "audit"));
    assert!(!p.allows(Op::Write, "audit"), "write is not implied by read");
    assert!(!p.allows(Op::Admin, "orders"), "admin is never implied");
    assert!(!p.allows(Op::Read, "payments"));
    assert!(p.sees("audit") && !p.sees("payments"));
    assert!(!p.is_cluster_admin());
    let topic_admin = Principal {
        id: "a".into(),
        scopes: vec![Scope::new("**", &[Op::Admin])],
    };
    assert!(topic_admin.allows(Op::Admin, "anything"));
    assert!(
        !topic_admin.is_cluster_admin(),
        "only the glob `*` itself is cluster admin"
    );
    assert!(Principal::bootstrap_admin().is_cluster_admin());
}

#[test]
fn issued_tokens_have_the_documented_shape_and_only_their_hash_is_kept() {
    let (secret, record) = issue("ci", vec![Scope::new("t", &[Op::Read])], 1_000, None, "admin");
    let s = secret.expose();
    assert!(s.starts_with("slc_") && s.len() == 4 + 16 + 1 + 43, "{s}");
    assert_eq!(token_id(s), Some(record.id.as_str()));
    record.validate().unwrap();
    assert!(record.hash.matches(&TokenHash::of(s)));
    let json = serde_json::to_string(&record).unwrap();
    assert!(
        !json.contains(&s[21..]),
        "the stored record holds no part of the secret"
    );
    assert_eq!(serde_json::from_str::<TokenRecord>(&json).unwrap(), record);
    // Two tokens never share an id or a secret.
    let (other, other_record) = issue("ci", vec![Scope::new("t", &[Op::Read])], 1_000, None, "admin");
    assert_ne!(other.expose(), s);
    assert_ne!(other_record.id, record.id);
}

#[test]
fn secrets_never_print() {
    let s = Secret::new("hunter2-hunter2-hunter2");
    assert_eq!(format!("{s:?} {s}"), "Secret(***) ***");
    let (secret, record) = issue("ci", vec![Scope::everything()], 0, None, "admin");
    let issued = IssuedToken {
        id: record.id.clone(),
        token: secret.clone(),
        expires_at: None,
    };
    assert!(!format!("{issued:?}").contains(secret.expose()));
    assert!(!format!("{record:?}").contains(secret.expose()));
    // Only the deliberate serialization (the 201 answer) shows it.
    assert!(serde_json::to_string(&issued).unwrap().contains(secret.expose()));
}

#[test]
fn malformed_ids_and_names_are_refused() {
    let (_, good) = issue("ci", vec![Scope::everything()], 10, Some(20), "admin");
    good.validate().unwrap();
    let mut r = good.clone();
    r.id = "ABCDEF0123456789".into();
    assert!(r.validate().is_err());
    let mut r = good.clone();
    r.name = String::new();
    assert!(r.validate().is_err());
    let mut r = good.clone();
    r.name = "a\nb".into();
    assert!(r.validate().is_err());
    let mut r = good.clone();
    r.scopes.clear();
    assert!(r.validate().is_err());
    let mut r = good.clone();
    r.expires_at_ms = Some(10);
    assert!(r.validate().is_err());
    assert!(token_id("slc_0123456789abcdef").is_none());
    assert!(token_id("slc_0123456789abcdeX_secret").is_none());
    assert!(token_id("Bearer slc_0123456789abcdef_x").is_none());
    assert!(serde_json::from_str::<TokenHash>("\"abc\"").is_err());
}

#[test]
fn authentication_checks_the_hash_expiry_and_bootstrap_secret() {
    let now = Arc::new(AtomicI64::new(1_000));
    let admin = Secret::new("bootstrap-secret-0123456789");
    let auth = Auth::new(Some(&admin), clock_at(now.clone()));
    let (secret, record) = issue("ci", vec![Scope::new("t", &[Op::Read])], 1_000, Some(5_000), "admin");
    let lookup = |id: &str| (id == record.id).then(|| record.clone());

    let p = auth.authenticate(secret.expose(), lookup).unwrap();
    assert_eq!(p.id, record.id);
    assert_eq!(p.scopes, record.scopes);

    assert_eq!(
        auth.authenticate(admin.expose(), lookup).unwrap(),
        Principal::bootstrap_admin()
    );
    assert_eq!(auth.authenticate("", lookup), Err(AuthFailure::Missing));
    assert_eq!(auth.authenticate("nope", lookup), Err(AuthFailure::Unknown));
    // Right id, wrong secret.
    let forged = format!("slc_{}_{}", record.id, "A".repeat(43));
    assert_eq!(auth.authenticate(&forged, lookup), Err(AuthFailure::BadSecret));
    // Revoked: the record is gone from the view.
    assert_eq!(auth.authenticate(secret.expose(), |_| None), Err(AuthFailure::Unknown));
    // Expired at exactly expires_at.
    now.store(4_999, Ordering::SeqCst);
    assert!(auth.authenticate(secret.expose(), lookup).is_ok());
    now.store(5_000, Ordering::SeqCst);
    assert_eq!(auth.authenticate(secret.expose(), lookup), Err(AuthFailure::Expired));

    // Without a bootstrap secret nothing matches it, not even an empty file's hash.
    let no_admin = Auth::new(None, clock_at(now));
    assert_eq!(
        no_admin.authenticate(admin.expose(), |_| None),
        Err(AuthFailure::Unknown)
    );
}

#[test]
fn failure_messages_do_not_say_which_check_failed() {
    let m = AuthFailure::Unknown.public_message();
    assert_eq!(AuthFailure::BadSecret.public_message(), m);
    assert_eq!(AuthFailure::Expired.public_message(), m);
    let reasons: std::collections::BTreeSet<_> = [
        AuthFailure::Missing,
        AuthFailure::Malformed,
        AuthFailure::Unknown,
        AuthFailure::BadSecret,
        AuthFailure::Expired,
    ]
    .iter()
    .map(|f| f.reason())
    .collect();
    assert_eq!(reasons.len(), 5, "every failure has its own metrics label");
}

#[test]
fn a_stored_token_without_an_issuer_is_never_honoured() {
    // A record written while auth was off (or before issuers were kept).
    let auth = Auth::new(None, clock_at(Arc::new(AtomicI64::new(1_000))));
    let (secret, mut record) = issue("old", vec![Scope::everything()], 0, None, "admin");
    let lookup = |r: TokenRecord| move |id: &str| (id == r.id).then(|| r.clone());
    assert!(auth.authenticate(secret.expose(), lookup(record.clone())).is_ok());
    record.issued_by = None;
    assert_eq!(
        auth.authenticate(secret.expose(), lookup(record.clone())).unwrap_err(),
        AuthFailure::Unissued
    );
    assert!(record.validate().is_err(), "CreateToken refuses it too");
    let old_json = r#"{"id":"0123456789abcdef","name":"old","hash":"00000000000000000000000000000000000000000000000000000000000000aa","scopes":[{"topics":"*","ops":["admin"]}],"created_at_ms":0}"#;
    let old: TokenRecord = serde_json::from_str(old_json).unwrap();
    assert_eq!(old.issued_by, None, "records of older versions load, without an issuer");
}
