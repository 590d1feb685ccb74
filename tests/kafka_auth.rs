//! Kafka with `--auth on`, through a real client: confluent-kafka
//! (librdkafka) with `security.protocol=SASL_PLAINTEXT`,
//! `sasl.mechanism=PLAIN` and a Sluice token as the password, driven by
//! `tests/kafka/sasl_client.py`. Skips when confluent-kafka is not in
//! `.services/python` (fails under `CI`), like `kafka_clients.rs`.

mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::http::bearer_client;
use support::kafka::{python, python_module_installed, repo, start_secured, Secured};

const ADMIN: &str = "kafka-test-admin-secret-0123456789";

fn admin() -> reqwest::Client {
    bearer_client(ADMIN)
}

async fn start() -> Secured {
    start_secured(ADMIN).await
}

/// Runs the driver; its one JSON line.
async fn run(mode: &str, kafka: &str, topic: &str, protocol: &str, password: &str) -> Value {
    let out = python()
        .arg(repo("tests/kafka/sasl_client.py"))
        .args([mode, kafka, topic, protocol])
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_with_sasl_plain_is_admitted_only_with_a_valid_token_and_only_to_its_topics() {
    if !python_module_installed("confluent_kafka") {
        return;
    }
    let s = start().await;
    let admin = admin();
    for topic in ["topic-a", "topic-b"] {
        let r = admin
            .post(format!("{}/v1/topics", s.url))
            .json(&json!({"name": topic}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        assert!(support::http::wait_open(&admin, &s.url, topic).await);
    }
    let issued: Value = admin
        .post(format!("{}/v1/tokens", s.url))
        .json(&json!({"name": "a-only", "scopes": [{"topics": "topic-a", "ops": ["read", "write"]}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = issued["token"].as_str().unwrap();

    // The right token: produce and read back.
    let r = run("produce", &s.kafka, "topic-a", "SASL_PLAINTEXT", token).await;
    assert_eq!(r["delivered"], true, "{r}");
    let r = run("consume", &s.kafka, "topic-a", "SASL_PLAINTEXT", token).await;
    assert_eq!(r["values"], json!(["secret-free-value"]), "{r}");

    // A consumer group (groups are not scoped; its offsets need read).
    let r = run("group", &s.kafka, "topic-a", "SASL_PLAINTEXT", token).await;
    assert_eq!(r["values"], json!(["secret-free-value"]), "{r}");
    assert_eq!(r["committed"], json!([1]), "{r}");

    // Scoped to topic-a: producing to topic-b is refused per topic.
    let r = run("produce", &s.kafka, "topic-b", "SASL_PLAINTEXT", token).await;
    assert_eq!(r["delivered"], false, "{r}");
    assert_eq!(r["error"], "TOPIC_AUTHORIZATION_FAILED", "{r}");

    // A wrong password: authentication fails, nothing is delivered.
    let wrong = format!("{}AA", &token[..token.len() - 2]);
    let r = run("produce", &s.kafka, "topic-a", "SASL_PLAINTEXT", &wrong).await;
    assert_eq!(r["delivered"], false, "{r}");
    assert!(
        r["client_errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "_AUTHENTICATION"),
        "{r}"
    );

    // No SASL at all: the node closes the connection at the first request.
    let r = run("produce", &s.kafka, "topic-a", "PLAINTEXT", "").await;
    assert_eq!(r["delivered"], false, "{r}");

    // Nothing but the first record reached topic-a, and topic-b is empty.
    for (topic, want) in [("topic-a", 1), ("topic-b", 0)] {
        let read: Value = admin
            .get(format!("{}/v1/topics/{topic}/partitions/0/records", s.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(read["records"].as_array().unwrap().len(), want, "{topic}: {read}");
    }
}

// ---------------------------------------------------------------- raw frames
// The SASL gate byte by byte, without any client library (runs everywhere).

use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

fn plain(password: &str) -> Vec<u8> {
    sluice::kafka::sasl::plain_message("user", password).to_vec()
}

/// The next response frame's body (after the length), or `None` once the
/// node closed the connection.
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

/// The error code right after the correlation id (response header v0).
fn error_code(body: &[u8]) -> i16 {
    i16::from_be_bytes([body[4], body[5]])
}

const METADATA_ALL: (i16, i16) = (3, 1);

async fn metadata(s: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    s.write_all(&request(METADATA_ALL.0, METADATA_ALL.1, &(-1i32).to_be_bytes()))
        .await
        .ok()?;
    response(s).await
}

async fn connect(s: &Secured) -> tokio::net::TcpStream {
    tokio::net::TcpStream::connect(&s.kafka).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sasl_gate_admits_only_apiversions_and_sasl_before_login() {
    let s = start().await;
    let admin = admin();
    let issued: Value = admin
        .post(format!("{}/v1/tokens", s.url))
        .json(&json!({"name": "k", "scopes": [{"topics": "*", "ops": ["read"]}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = issued["token"].as_str().unwrap().to_string();
    let id = issued["id"].as_str().unwrap().to_string();

    // Metadata before SASL: closed.
    let mut c = connect(&s).await;
    assert!(metadata(&mut c).await.is_none(), "metadata before SASL was answered");

    // ApiVersions is answered and advertises both SASL APIs.
    let mut c = connect(&s).await;
    c.write_all(&request(18, 0, &[])).await.unwrap();
    let body = response(&mut c).await.unwrap();
    assert_eq!(error_code(&body), 0);
    let n = i32::from_be_bytes(body[6..10].try_into().unwrap()) as usize;
    let apis: Vec<(i16, i16, i16)> = (0..n)
        .map(|i| {
            let at = 10 + 6 * i;
            let g = |o: usize| i16::from_be_bytes([body[at + o], body[at + o + 1]]);
            (g(0), g(2), g(4))
        })
        .collect();
    assert!(apis.contains(&(17, 0, 1)) && apis.contains(&(36, 0, 2)), "{apis:?}");

    // An unknown mechanism, then SaslAuthenticate without a handshake.
    c.write_all(&request(17, 1, &string("GSSAPI"))).await.unwrap();
    assert_eq!(
        error_code(&response(&mut c).await.unwrap()),
        33,
        "UNSUPPORTED_SASL_MECHANISM"
    );
    c.write_all(&request(36, 1, &bytes(&plain(&token)))).await.unwrap();
    assert_eq!(error_code(&response(&mut c).await.unwrap()), 34, "ILLEGAL_SASL_STATE");

    // A wrong password: SASL_AUTHENTICATION_FAILED, then closed.
    let mut c = connect(&s).await;
    c.write_all(&request(17, 1, &string("PLAIN"))).await.unwrap();
    assert_eq!(error_code(&response(&mut c).await.unwrap()), 0);
    c.write_all(&request(36, 1, &bytes(&plain("slc_0123456789abcdef_nope"))))
        .await
        .unwrap();
    let body = response(&mut c).await.unwrap();
    assert_eq!(error_code(&body), 58, "SASL_AUTHENTICATION_FAILED");
    assert!(
        !String::from_utf8_lossy(&body).contains("nope"),
        "the error echoes the password"
    );
    assert!(metadata(&mut c).await.is_none());

    // The right token (v1 handshake, v1 authenticate): served.
    let mut c = connect(&s).await;
    c.write_all(&request(17, 1, &string("PLAIN"))).await.unwrap();
    assert_eq!(error_code(&response(&mut c).await.unwrap()), 0);
    c.write_all(&request(36, 1, &bytes(&plain(&token)))).await.unwrap();
    assert_eq!(error_code(&response(&mut c).await.unwrap()), 0);
    assert!(metadata(&mut c).await.is_some());
    // A second handshake on a logged-in connection is refused.
    c.write_all(&request(17, 1, &string("PLAIN"))).await.unwrap();
    assert_eq!(error_code(&response(&mut c).await.unwrap()), 34);

    // v0 framing: the bare PLAIN message after the handshake, an empty reply.
    let mut old = connect(&s).await;
    old.write_all(&request(17, 0, &string("PLAIN"))).await.unwrap();
    assert_eq!(error_code(&response(&mut old).await.unwrap()), 0);
    let raw = plain(&token);
    let mut framed = (raw.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&raw);
    old.write_all(&framed).await.unwrap();
    assert_eq!(response(&mut old).await.unwrap(), Vec::<u8>::new());
    assert!(metadata(&mut old).await.is_some());

    // Revoking the token closes both logged-in connections at their next request.
    let r = admin.delete(format!("{}/v1/tokens/{id}", s.url)).send().await.unwrap();
    assert_eq!(r.status(), 204);
    assert!(metadata(&mut c).await.is_none(), "a revoked token was still served");
    assert!(metadata(&mut old).await.is_none(), "a revoked token was still served");
}
