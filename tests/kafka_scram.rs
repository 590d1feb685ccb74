//! SASL/SCRAM-SHA-256 and -512 on a node with `--auth on`: real clients
//! (confluent-kafka/librdkafka and kafka-python, driven by
//! `tests/kafka/scram_client.py`) log in with a token's id as the user name
//! and the token as the password, produce and consume; a wrong password is
//! refused. The raw-frame test drives the exchange byte by byte (runs
//! everywhere) and checks that revoking the token closes a SCRAM session.
//! Client tests skip when the library is not in `.services/python` (fail
//! under `CI`), like `kafka_auth.rs`.

mod support;

use serde_json::{json, Value};
use sluice::auth::scram::{client_final, Mechanism};
use std::process::Stdio;
use std::time::Duration;
use support::http::bearer_client;
use support::kafka::{python, python_module_installed, repo, start_secured, Secured};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ADMIN: &str = "kafka-scram-admin-secret-0123456789";

fn admin() -> reqwest::Client {
    bearer_client(ADMIN)
}

async fn start() -> Secured {
    start_secured(ADMIN).await
}

async fn create_topic(s: &Secured, topic: &str) {
    let admin = admin();
    let r = admin
        .post(format!("{}/v1/topics", s.url))
        .json(&json!({"name": topic}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert!(support::http::wait_open(&admin, &s.url, topic).await);
}

/// A token for `topics` with read and write: (id, token).
async fn issue(s: &Secured, topics: &str) -> (String, String) {
    let issued: Value = admin()
        .post(format!("{}/v1/tokens", s.url))
        .json(&json!({"name": "scram", "scopes": [{"topics": topics, "ops": ["read", "write"]}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (
        issued["id"].as_str().unwrap().to_string(),
        issued["token"].as_str().unwrap().to_string(),
    )
}

async fn records_in(s: &Secured, topic: &str) -> usize {
    let read: Value = admin()
        .get(format!("{}/v1/topics/{topic}/partitions/0/records", s.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    read["records"].as_array().unwrap().len()
}

/// Runs the driver; its one JSON line.
async fn run(lib: &str, mode: &str, s: &Secured, topic: &str, mechanism: &str, user: &str, password: &str) -> Value {
    let out = python()
        .arg(repo("tests/kafka/scram_client.py"))
        .args([lib, mode, &s.kafka, topic, mechanism])
        .env("SASL_USERNAME", user)
        .env("SASL_PASSWORD", password)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("the client finished")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "client printed no JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

async fn clients_log_in_with_scram(lib: &str) {
    let s = start().await;
    create_topic(&s, "scram-a").await;
    let (id, token) = issue(&s, "scram-*").await;
    let mut produced = 0;
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let r = run(lib, "produce", &s, "scram-a", mechanism, &id, &token).await;
        assert_eq!(r["delivered"], true, "{lib} {mechanism}: {r}");
        produced += 1;
        let r = run(lib, "consume", &s, "scram-a", mechanism, &id, &token).await;
        assert_eq!(r["values"][0], "scram-value", "{lib} {mechanism}: {r}");
    }
    // A wrong password: refused, nothing written.
    let wrong = format!("{token}x");
    let r = run(lib, "produce", &s, "scram-a", "SCRAM-SHA-256", &id, &wrong).await;
    assert_eq!(r["delivered"], false, "{lib}: {r}");
    if lib == "confluent" {
        let errors = r["client_errors"].as_array().unwrap();
        assert!(errors.iter().any(|e| e == "_AUTHENTICATION"), "{r}");
    }
    // A token's id with another token's secret: refused too.
    let (_, other) = issue(&s, "scram-*").await;
    let r = run(lib, "produce", &s, "scram-a", "SCRAM-SHA-512", &id, &other).await;
    assert_eq!(r["delivered"], false, "{lib}: {r}");
    assert_eq!(records_in(&s, "scram-a").await, produced);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_logs_in_with_scram_sha_256_and_512_and_a_wrong_password_is_refused() {
    if python_module_installed("confluent_kafka") {
        clients_log_in_with_scram("confluent").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_logs_in_with_scram_sha_256_and_512_and_a_wrong_password_is_refused() {
    if python_module_installed("kafka") {
        clients_log_in_with_scram("kafka-python").await;
    }
}

// ---------------------------------------------------------------- raw frames

fn request(key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&key.to_be_bytes());
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&7i32.to_be_bytes()); // correlation id
    f.extend_from_slice(&4i16.to_be_bytes());
    f.extend_from_slice(b"test");
    f.extend_from_slice(body);
    let mut framed = (f.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&f);
    framed
}

fn string(s: &str) -> Vec<u8> {
    let mut b = (s.len() as i16).to_be_bytes().to_vec();
    b.extend_from_slice(s.as_bytes());
    b
}

fn bytes(b: &[u8]) -> Vec<u8> {
    let mut v = (b.len() as i32).to_be_bytes().to_vec();
    v.extend_from_slice(b);
    v
}

async fn response(s: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    let read = tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut len))
        .await
        .expect("an answer or a close");
    read.ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).await.ok()?;
    Some(body)
}

/// SaslAuthenticate v1's answer: (error code, error message, auth bytes).
fn authenticate_v1(body: &[u8]) -> (i16, Option<String>, Vec<u8>) {
    let code = i16::from_be_bytes([body[4], body[5]]);
    let mut at = 6;
    let len = i16::from_be_bytes([body[at], body[at + 1]]);
    at += 2;
    let message = (len >= 0).then(|| {
        let m = String::from_utf8(body[at..at + len as usize].to_vec()).unwrap();
        at += len as usize;
        m
    });
    let n = i32::from_be_bytes(body[at..at + 4].try_into().unwrap()) as usize;
    at += 4;
    (code, message, body[at..at + n].to_vec())
}

async fn metadata(s: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    s.write_all(&request(3, 1, &(-1i32).to_be_bytes())).await.ok()?;
    response(s).await
}

/// Handshake and SCRAM exchange on `c`: the final SaslAuthenticate answer.
async fn scram(
    c: &mut tokio::net::TcpStream,
    m: Mechanism,
    user: &str,
    password: &str,
) -> (i16, Option<String>, Vec<u8>) {
    c.write_all(&request(17, 1, &string(m.name()))).await.unwrap();
    let body = response(c).await.unwrap();
    assert_eq!(i16::from_be_bytes([body[4], body[5]]), 0, "handshake");
    let bare = format!("n={user},r=rawclientnonce");
    c.write_all(&request(36, 1, &bytes(format!("n,,{bare}").as_bytes())))
        .await
        .unwrap();
    let (code, message, server_first) = authenticate_v1(&response(c).await.unwrap());
    if code != 0 {
        return (code, message, server_first);
    }
    let server_first = String::from_utf8(server_first).unwrap();
    let (last, expected) = client_final(m, password, &bare, &server_first).unwrap();
    c.write_all(&request(36, 1, &bytes(last.as_bytes()))).await.unwrap();
    let answer = authenticate_v1(&response(c).await.unwrap());
    if answer.0 == 0 {
        assert_eq!(answer.2, expected.as_bytes(), "the server signature");
    }
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scram_session_is_served_until_its_token_is_revoked_and_a_wrong_proof_closes_it() {
    let s = start().await;
    let (id, token) = issue(&s, "*").await;

    // A wrong password: Kafka's message, then the connection is closed.
    let mut bad = tokio::net::TcpStream::connect(&s.kafka).await.unwrap();
    let (code, message, _) = scram(&mut bad, Mechanism::Sha256, &id, &format!("{token}x")).await;
    assert_eq!(code, 58, "SASL_AUTHENTICATION_FAILED");
    assert_eq!(
        message.as_deref(),
        Some(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
        )
    );
    assert!(metadata(&mut bad).await.is_none(), "served after a failed login");

    // The bootstrap admin secret is no SCRAM user.
    let mut c = tokio::net::TcpStream::connect(&s.kafka).await.unwrap();
    let (code, _, _) = scram(&mut c, Mechanism::Sha512, "bootstrap-admin", ADMIN).await;
    assert_eq!(code, 58);

    // The right token, both mechanisms: served, then revoked and closed
    // (the connections stay quiet: the recheck closes them).
    let mut logged = Vec::new();
    for m in Mechanism::ALL {
        let mut c = tokio::net::TcpStream::connect(&s.kafka).await.unwrap();
        let (code, message, _) = scram(&mut c, m, &id, &token).await;
        assert_eq!((code, message), (0, None), "{m}");
        assert!(metadata(&mut c).await.is_some(), "{m}");
        logged.push(c);
    }
    let r = admin()
        .delete(format!("{}/v1/tokens/{id}", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    for mut c in logged {
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
            .await
            .expect("closed within the recheck interval");
        assert!(matches!(read, Ok(0) | Err(_)), "a revoked SCRAM session stayed open");
    }
}

/// kcat (librdkafka 2.0.2) with `-X sasl.mechanisms=SCRAM-…`: one record
/// produced with SHA-256 and read back with SHA-512.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_produces_and_consumes_with_scram() {
    let have = std::process::Command::new("kcat")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        assert!(std::env::var_os("CI").is_none(), "kcat is missing but CI is set");
        eprintln!("skipping: kcat is missing");
        return;
    }
    let s = start().await;
    create_topic(&s, "scram-kcat").await;
    let (id, token) = issue(&s, "scram-kcat").await;
    let kcat = |mechanism: &str, args: &[&str]| {
        let mut cmd = tokio::process::Command::new("kcat");
        cmd.args([
            "-b",
            &s.kafka,
            "-t",
            "scram-kcat",
            "-X",
            "security.protocol=SASL_PLAINTEXT",
        ])
        .arg("-X")
        .arg(format!("sasl.mechanisms={mechanism}"))
        .arg("-X")
        .arg(format!("sasl.username={id}"))
        .arg("-X")
        .arg(format!("sasl.password={token}"))
        .args(["-X", "socket.timeout.ms=10000"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
        cmd
    };
    let mut produce = kcat("SCRAM-SHA-256", &["-P"]).spawn().unwrap();
    let mut input = produce.stdin.take().unwrap();
    input.write_all(b"kcat-scram\n").await.unwrap();
    drop(input);
    let out = tokio::time::timeout(Duration::from_secs(60), produce.wait_with_output())
        .await
        .expect("kcat finished")
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let consume = kcat("SCRAM-SHA-512", &["-C", "-o", "beginning", "-c", "1", "-e"])
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(60), consume.wait_with_output())
        .await
        .expect("kcat finished")
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "kcat-scram");
}

/// DescribeUserScramCredentials v0 (flexible request header v2) on `c`.
async fn describe_scram_users(
    c: &mut tokio::net::TcpStream,
) -> kafka_protocol::messages::DescribeUserScramCredentialsResponse {
    use kafka_protocol::protocol::Decodable;
    let mut f = Vec::new();
    f.extend_from_slice(&50i16.to_be_bytes());
    f.extend_from_slice(&0i16.to_be_bytes());
    f.extend_from_slice(&9i32.to_be_bytes());
    f.extend_from_slice(&4i16.to_be_bytes());
    f.extend_from_slice(b"test");
    f.push(0); // header tagged fields
    f.push(0); // users: null (all)
    f.push(0); // body tagged fields
    let mut framed = (f.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&f);
    c.write_all(&framed).await.unwrap();
    let body = response(c).await.expect("an answer");
    assert_eq!(&body[..4], &9i32.to_be_bytes(), "correlation id");
    assert_eq!(body[4], 0, "response header v1 tagged fields");
    let mut rest = bytes::Bytes::copy_from_slice(&body[5..]);
    kafka_protocol::messages::DescribeUserScramCredentialsResponse::decode(&mut rest, 0).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_user_scram_credentials_lists_token_ids_for_a_cluster_admin_only() {
    let s = start().await;
    let (id, token) = issue(&s, "*").await;

    // The bootstrap admin (PLAIN) sees the token with both mechanisms.
    let mut c = tokio::net::TcpStream::connect(&s.kafka).await.unwrap();
    c.write_all(&request(17, 1, &string("PLAIN"))).await.unwrap();
    assert_eq!(response(&mut c).await.unwrap()[4..6], [0, 0]);
    let plain = sluice::kafka::sasl::plain_message("admin", ADMIN);
    c.write_all(&request(36, 1, &bytes(&plain))).await.unwrap();
    assert_eq!(authenticate_v1(&response(&mut c).await.unwrap()).0, 0);
    let r = describe_scram_users(&mut c).await;
    assert_eq!(r.error_code, 0);
    let me = r
        .results
        .iter()
        .find(|u| u.user.as_str() == id)
        .expect("the token is a SCRAM user");
    let mut infos: Vec<(i8, i32)> = me
        .credential_infos
        .iter()
        .map(|i| (i.mechanism, i.iterations))
        .collect();
    infos.sort();
    assert_eq!(infos, [(1, 4096), (2, 4096)]);

    // The token itself (read/write on "*", not admin) is refused.
    let mut c = tokio::net::TcpStream::connect(&s.kafka).await.unwrap();
    assert_eq!(scram(&mut c, Mechanism::Sha256, &id, &token).await.0, 0);
    let r = describe_scram_users(&mut c).await;
    assert_eq!(r.error_code, 31, "CLUSTER_AUTHORIZATION_FAILED");
    assert!(r.results.is_empty());
}
