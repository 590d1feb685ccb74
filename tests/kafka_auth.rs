//! Kafka with `--auth on`, through a real client: confluent-kafka
//! (librdkafka) with `security.protocol=SASL_PLAINTEXT`,
//! `sasl.mechanism=PLAIN` and a Sluice token as the password, driven by
//! `tests/kafka/sasl_client.py`. Skips when confluent-kafka is not in
//! `.services/python` (fails under `CI`), like `kafka_clients.rs`.

mod support;

use serde_json::{json, Value};
use sluice::node::Node;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use support::{config, memory_backends};

const ADMIN: &str = "kafka-test-admin-secret-0123456789";

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn python() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("python3");
    cmd.env("PYTHONPATH", repo(".services/python"));
    cmd
}

fn confluent_installed() -> bool {
    let ok = std::process::Command::new("python3")
        .env("PYTHONPATH", repo(".services/python"))
        .args(["-c", "import confluent_kafka"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("confluent-kafka is missing but CI is set: run scripts/services.sh install");
        }
        eprintln!("skipping: confluent-kafka is missing (scripts/services.sh install installs it)");
    }
    ok
}

struct Secured {
    _node: Arc<Node>,
    url: String,
    kafka: String,
    _admin_file: tempfile::NamedTempFile,
    _stop: tokio::sync::watch::Sender<bool>,
}

async fn start() -> Secured {
    let admin_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(admin_file.path(), ADMIN).unwrap();
    let kafka_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let kafka = kafka_listener.local_addr().unwrap().to_string();
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_addr = http.local_addr().unwrap().to_string();
    let path = admin_file.path().to_str().unwrap().to_string();
    let flags = [
        "--advertised-kafka-addr",
        &kafka,
        "--advertised-http-addr",
        &http_addr,
        "--auth",
        "on",
        "--admin-token-file",
        &path,
    ];
    let node = Node::start_with(config("n1", &flags), memory_backends()).await.unwrap();
    let app = sluice::http::router(node.clone());
    tokio::spawn(async move { axum::serve(http, app).await.unwrap() });
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let opts = sluice::kafka::Options::from_config(&node.config);
    tokio::spawn(sluice::kafka::serve(node.clone(), kafka_listener, opts, stop_rx));
    Secured {
        _node: node,
        url: format!("http://{http_addr}"),
        kafka,
        _admin_file: admin_file,
        _stop: stop,
    }
}

fn admin() -> reqwest::Client {
    let mut h = reqwest::header::HeaderMap::new();
    h.insert(
        reqwest::header::AUTHORIZATION,
        reqwest::header::HeaderValue::from_str(&format!("Bearer {ADMIN}")).unwrap(),
    );
    reqwest::Client::builder().default_headers(h).build().unwrap()
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
    if !confluent_installed() {
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
