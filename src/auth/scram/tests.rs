//! The exchange against RFC 7677's SHA-256 example, a SHA-512 round trip
//! in the shape of RFC 5802's SHA-1 example, and every refusal.

use super::*;

const SALT_7677: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";
const SERVER_NONCE_7677: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";

fn credential_7677() -> Credential {
    let salt = STANDARD.decode(SALT_7677).unwrap();
    Credential::derive(Mechanism::Sha256, b"pencil", &salt, 4096)
}

#[test]
fn rfc7677_sha256_example_is_answered_byte_for_byte() {
    let first = ClientFirst::parse(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
    assert_eq!(first.user, "user");
    assert_eq!(first.gs2_header, "n,,");
    let (challenge, server_first) = Challenge::new(&first, credential_7677(), SERVER_NONCE_7677);
    assert_eq!(
        String::from_utf8(server_first).unwrap(),
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let server_final = challenge
        .finish(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        .unwrap();
    assert_eq!(
        String::from_utf8(server_final).unwrap(),
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    );
}

#[test]
fn rfc7677_example_with_a_changed_proof_or_nonce_is_refused() {
    let first = ClientFirst::parse(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
    let (challenge, _) = Challenge::new(&first, credential_7677(), SERVER_NONCE_7677);
    let wrong_proof =
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVU=";
    assert_eq!(challenge.finish(wrong_proof), Err(ScramError::BadProof));
    let other_nonce =
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k1,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    assert!(matches!(challenge.finish(other_nonce), Err(ScramError::Malformed(_))));
    let bound =
        b"c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    assert!(matches!(challenge.finish(bound), Err(ScramError::Unsupported(_))));
}

/// RFC 5802's example (user "user", password "pencil", 4096 iterations),
/// run with SHA-512 through Sluice's own client side.
fn round_trip(mechanism: Mechanism, password: &str, tried: &str) -> Result<(Vec<u8>, String), ScramError> {
    let cred = Credential::derive(mechanism, password.as_bytes(), b"QSXCR+Q6sek8bf92", 4096);
    cred.validate().unwrap();
    let first = ClientFirst::parse(b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL").unwrap();
    let (challenge, server_first) = Challenge::new(&first, cred, "3rfcNHYJY1ZVvWVs7j");
    let server_first = String::from_utf8(server_first).unwrap();
    assert!(server_first.starts_with("r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s="));
    let (client_final, expected) = client_final(mechanism, tried, &first.bare, &server_first).unwrap();
    challenge.finish(client_final.as_bytes()).map(|v| (v, expected))
}

#[test]
fn sha512_and_sha256_round_trips_succeed_with_the_password_and_fail_without() {
    for m in Mechanism::ALL {
        let (server_final, expected) = round_trip(m, "pencil", "pencil").unwrap();
        assert_eq!(String::from_utf8(server_final).unwrap(), expected, "{m}");
        assert_eq!(
            round_trip(m, "pencil", "pencil!").unwrap_err(),
            ScramError::BadProof,
            "{m}"
        );
    }
}

#[test]
fn old_librdkafkas_doubled_client_nonce_is_accepted_and_nothing_looser() {
    let cred = Credential::derive(Mechanism::Sha256, b"pencil", b"QSXCR+Q6sek8bf92", 4096);
    let first = ClientFirst::parse(b"n,,n=user,r=cnonce").unwrap();
    let (challenge, _) = Challenge::new(&first, cred, "snonce");
    // The proof covers whatever nonce the client sent: build it by hand.
    let prove = |nonce: &str| {
        let server_first = "r=cnoncesnonce,s=UVNYQ1IrUTZzZWs4YmY5Mg==,i=4096";
        let (fin, _) = client_final(Mechanism::Sha256, "pencil", &first.bare, server_first).unwrap();
        let fin = fin.replace("r=cnoncesnonce", &format!("r={nonce}"));
        // Recompute the proof over the changed message.
        let without_proof = fin.rsplit_once(",p=").unwrap().0.to_string();
        let salted = Mechanism::Sha256.salted_password(b"pencil", b"QSXCR+Q6sek8bf92", 4096);
        let client_key = Mechanism::Sha256.hmac(&salted, &[b"Client Key"]);
        let stored = Mechanism::Sha256.hash(&client_key);
        let auth = [
            first.bare.as_bytes(),
            b",",
            server_first.as_bytes(),
            b",",
            without_proof.as_bytes(),
        ];
        let sig = Mechanism::Sha256.hmac(&stored, &auth);
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(k, s)| k ^ s).collect();
        format!("{without_proof},p={}", STANDARD.encode(proof))
    };
    assert!(challenge.finish(prove("cnoncesnonce").as_bytes()).is_ok());
    assert!(challenge.finish(prove("cnoncecnoncesnonce").as_bytes()).is_ok());
    for bad in ["cnonce", "xcnoncesnonce", "snonce", "cnoncesnoncex"] {
        assert!(
            matches!(challenge.finish(prove(bad).as_bytes()), Err(ScramError::Malformed(_))),
            "{bad}"
        );
    }
}

#[test]
fn credentials_keep_no_password_and_issued_ones_are_salted_apart() {
    let a = Credential::issue(Mechanism::Sha512, "slc_0123456789abcdef_x");
    let b = Credential::issue(Mechanism::Sha512, "slc_0123456789abcdef_x");
    assert_ne!(a.salt, b.salt, "two issues share a salt");
    assert_ne!(a.stored_key, b.stored_key);
    assert_eq!((a.iterations, a.salt.len(), a.stored_key.len()), (4096, SALT_BYTES, 64));
    a.validate().unwrap();
    let json = serde_json::to_string(&a).unwrap();
    assert!(!json.contains("slc_"), "{json}");
    assert_eq!(serde_json::from_str::<Credential>(&json).unwrap(), a);
    assert!(!format!("{a:?}").contains("stored_key"));
}

#[test]
fn stored_credentials_outside_the_bounds_are_invalid() {
    let mut c = credential_7677();
    c.iterations = 4095;
    assert!(c.validate().is_err());
    c.iterations = MAX_ITERATIONS + 1;
    assert!(c.validate().is_err());
    let mut c = credential_7677();
    c.salt = vec![0; 8];
    assert!(c.validate().is_err());
    let mut c = credential_7677();
    c.stored_key.pop();
    assert!(c.validate().is_err());
}

#[test]
fn client_first_messages_parse_as_kafka_accepts_them() {
    let f = ClientFirst::parse(b"n,,n=0123456789abcdef,r=abc,tokenauth=true").unwrap();
    assert!(f.token_auth);
    assert_eq!(f.bare, "n=0123456789abcdef,r=abc,tokenauth=true");
    let f = ClientFirst::parse(b"n,a=us=2Cer,n=us=2Cer,r=abc").unwrap();
    assert_eq!((f.user.as_str(), f.gs2_header.as_str()), ("us,er", "n,a=us=2Cer,"));
    let f = ClientFirst::parse(b"n,,n=a=3Db,r=x").unwrap();
    assert_eq!(f.user, "a=b");
}

#[test]
fn client_first_messages_kafka_refuses_are_refused() {
    for bad in [
        &b""[..],
        b"n,,",
        b"n,,r=abc",
        b"n,,n=user",
        b"n,,n=,r=abc",
        b"n,,n=user,r=",
        b"n,,n=user,r=a b",
        b"n,,n=us=er,r=abc",
        b"n,,n=user,r=abc,",
        b"n,,n=user,r=abc,x",
        b"n,,n=user,r=abc,1=2",
        b"x,,n=user,r=abc",
        b"n,b=user,n=user,r=abc",
        b"n,,n=user\xc3\xa9,r=abc",
        b"n,,n=user\0,r=abc",
    ] {
        assert!(
            matches!(ClientFirst::parse(bad), Err(ScramError::Malformed(_))),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    for unsupported in [
        &b"y,,n=user,r=abc"[..],
        b"p=tls-unique,,n=user,r=abc",
        b"n,,m=ext,n=user,r=abc",
        b"n,,n=user,r=abc,ext=1",
        b"n,a=other,n=user,r=abc",
    ] {
        assert!(
            matches!(ClientFirst::parse(unsupported), Err(ScramError::Unsupported(_))),
            "{:?}",
            String::from_utf8_lossy(unsupported)
        );
    }
    let long = format!("n,,n=user,r={}", "a".repeat(MAX_MESSAGE_BYTES));
    assert!(matches!(
        ClientFirst::parse(long.as_bytes()),
        Err(ScramError::Malformed(_))
    ));
    let long_nonce = format!("n,,n=user,r={}", "a".repeat(MAX_NONCE + 1));
    assert!(matches!(
        ClientFirst::parse(long_nonce.as_bytes()),
        Err(ScramError::Malformed(_))
    ));
}

#[test]
fn client_final_messages_that_do_not_fit_are_malformed_not_panics() {
    let first = ClientFirst::parse(b"n,,n=user,r=abc").unwrap();
    let (challenge, _) = Challenge::new(&first, credential_7677(), "def");
    for bad in [
        &b""[..],
        b"p=",
        b"c=biws,p=AAAA",
        b"c=biws,r=abcdef,p=",
        b"c=biws,r=abcdef,p=!!!!",
        b"c=biws,r=abcdef,p=AAAA",
        b"r=abcdef,c=biws,p=AAAA",
        b"c=biws,r=abcdef,x,p=AAAA",
    ] {
        assert!(
            matches!(challenge.finish(bad), Err(ScramError::Malformed(_))),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn mechanism_names_and_kafka_types_round_trip() {
    for m in Mechanism::ALL {
        assert_eq!(Mechanism::from_name(m.name()), Some(m));
        assert_eq!(Mechanism::from_kafka_type(m.kafka_type()), Some(m));
    }
    assert_eq!(Mechanism::from_name("SCRAM-SHA-1"), None);
    assert_eq!(Mechanism::from_kafka_type(0), None);
}
