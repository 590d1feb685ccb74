//! Real Kafka clients against an in-process node with HTTP and Kafka
//! listeners: kcat (librdkafka) and kafka-python produce and consume, and
//! records cross between HTTP and Kafka unchanged.
//!
//! Each test skips when its client is missing — and fails when `CI` is set.
//! `scripts/services.sh install` installs both (kafka-python into
//! `.services/python`).

mod support;

use serde_json::{json, Value};
use sluice::node::Node;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use support::{config, memory_backends};
use tokio::io::AsyncWriteExt;

struct Cluster {
    _node: Arc<Node>,
    url: String,
    kafka: String,
    _stop: tokio::sync::watch::Sender<bool>,
}

async fn start() -> Cluster {
    let kafka_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let kafka = kafka_listener.local_addr().unwrap().to_string();
    let node = Node::start_with(config("n1", &["--advertised-kafka-addr", &kafka]), memory_backends())
        .await
        .unwrap();
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", http.local_addr().unwrap());
    let app = sluice::http::router(node.clone());
    tokio::spawn(async move { axum::serve(http, app).await.unwrap() });
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let opts = sluice::kafka::Options::from_config(&node.config);
    tokio::spawn(sluice::kafka::serve(node.clone(), kafka_listener, opts, stop_rx));
    Cluster {
        _node: node,
        url,
        kafka,
        _stop: stop,
    }
}

/// Whether a client is installed; skips (or, under CI, fails) when not.
fn have(what: &str, probe: &mut std::process::Command) -> bool {
    let ok = probe
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("{what} is missing but CI is set: run scripts/services.sh install");
        }
        eprintln!("skipping: {what} is missing (scripts/services.sh install installs it)");
    }
    ok
}

fn python_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".services/python")
}

/// Runs a command with `stdin`, returning stdout; panics on failure or timeout.
async fn run(cmd: &mut tokio::process::Command, stdin: &str) -> String {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("client timed out")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn kcat(c: &Cluster, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("kcat");
    cmd.args(["-b", &c.kafka, "-X", "socket.timeout.ms=10000"]).args(args);
    cmd
}

async fn create(client: &reqwest::Client, c: &Cluster, topic: &str) {
    create_n(client, c, topic, 1).await
}

async fn create_n(client: &reqwest::Client, c: &Cluster, topic: &str, partitions: u32) {
    let r = client
        .post(format!("{}/v1/topics", c.url))
        .json(&json!({"name": topic, "partitions": partitions}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert!(support::http::wait_open(client, &c.url, topic).await);
}

/// Every record of partition 0 over HTTP: (offset, key, value).
async fn http_records(client: &reqwest::Client, c: &Cluster, topic: &str) -> Vec<(u64, String, String)> {
    let r: Value = client
        .get(format!(
            "{}/v1/topics/{topic}/partitions/0/records?offset=0&limit=1000",
            c.url
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["offset"].as_u64().unwrap(),
                r["key"].as_str().unwrap_or("").to_string(),
                r["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_produces_and_consumes() {
    if !have("kcat", std::process::Command::new("kcat").arg("-V")) {
        return;
    }
    let c = start().await;
    let client = reqwest::Client::new();
    create(&client, &c, "kc").await;

    let lines: String = (0..20).map(|i| format!("k{i}:v{i}\n")).collect();
    run(&mut kcat(&c, &["-P", "-t", "kc", "-K:", "-X", "acks=all"]), &lines).await;
    let out = run(
        &mut kcat(&c, &["-C", "-t", "kc", "-o", "beginning", "-e", "-f", "%o|%k|%s\n"]),
        "",
    )
    .await;
    let want: String = (0..20).map(|i| format!("{i}|k{i}|v{i}\n")).collect();
    assert_eq!(out, want);
    // From an offset, and from the end (nothing).
    let out = run(&mut kcat(&c, &["-C", "-t", "kc", "-o", "15", "-e", "-f", "%o\n"]), "").await;
    assert_eq!(out, "15\n16\n17\n18\n19\n");
    let out = run(&mut kcat(&c, &["-C", "-t", "kc", "-o", "end", "-e", "-f", "%o\n"]), "").await;
    assert_eq!(out, "");

    // Keyed records spread over three partitions (several per Produce request).
    create_n(&client, &c, "kc3", 3).await;
    let lines: String = (0..60).map(|i| format!("key{i}:v{i}\n")).collect();
    run(&mut kcat(&c, &["-P", "-t", "kc3", "-K:"]), &lines).await;
    let out = run(
        &mut kcat(&c, &["-C", "-t", "kc3", "-o", "beginning", "-e", "-f", "%p|%k|%s\n"]),
        "",
    )
    .await;
    let mut got: Vec<&str> = out.lines().collect();
    assert_eq!(got.len(), 60, "{out}");
    let used: std::collections::BTreeSet<&str> = got.iter().map(|l| &l[..1]).collect();
    assert!(used.len() > 1, "keys spread over partitions: {used:?}");
    got.sort_by_key(|l| l[2..].to_string());
    let mut want: Vec<String> = (0..60).map(|i| format!("key{i}|v{i}")).collect();
    want.sort();
    assert_eq!(got.iter().map(|l| l[2..].to_string()).collect::<Vec<_>>(), want);

    // A topic kcat names first is auto-created.
    run(&mut kcat(&c, &["-P", "-t", "kc-auto", "-K:"]), "a:1\n").await;
    let out = run(
        &mut kcat(&c, &["-C", "-t", "kc-auto", "-o", "beginning", "-e", "-f", "%k=%s\n"]),
        "",
    )
    .await;
    assert_eq!(out, "a=1\n");
    let meta = run(&mut kcat(&c, &["-L", "-J"]), "").await;
    let meta: Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(meta["brokers"][0]["name"], c.kafka.as_str());
    assert!(meta["topics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["topic"] == "kc-auto"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_cross_between_http_and_kcat() {
    if !have("kcat", std::process::Command::new("kcat").arg("-V")) {
        return;
    }
    let c = start().await;
    let client = reqwest::Client::new();
    create(&client, &c, "x").await;

    let r = client
        .post(format!("{}/v1/topics/x/partitions/0/records", c.url))
        .json(&json!({"records": [{"key": "hk", "value": "hv"}, {"key": "hk2", "value": "hv2"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let out = run(
        &mut kcat(&c, &["-C", "-t", "x", "-o", "beginning", "-e", "-f", "%o|%k|%s\n"]),
        "",
    )
    .await;
    assert_eq!(out, "0|hk|hv\n1|hk2|hv2\n");

    run(&mut kcat(&c, &["-P", "-t", "x", "-p", "0", "-K:"]), "kk:kv\n").await;
    let records = http_records(&client, &c, "x").await;
    assert_eq!(
        records,
        vec![
            (0, "hk".into(), "hv".into()),
            (1, "hk2".into(), "hv2".into()),
            (2, "kk".into(), "kv".into())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_produces_and_consumes() {
    let mut check = std::process::Command::new("python3");
    check.env("PYTHONPATH", python_path()).args(["-c", "import kafka"]);
    if !have("kafka-python", &mut check) {
        return;
    }
    let c = start().await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/kafka_python_roundtrip.py");
    let out = run(
        tokio::process::Command::new("python3")
            .env("PYTHONPATH", python_path())
            .arg(script)
            .args([&c.kafka, "py", "25"]),
        "",
    )
    .await;
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v, json!({"consumed": 25, "end_offset": 25}));
    let client = reqwest::Client::new();
    let records = http_records(&client, &c, "py").await;
    assert_eq!(records.len(), 25);
    assert_eq!(records[24], (24, "k24".into(), "v24".into()));
}

async fn kafka_python_groups(mode: &str, topic: &str, partitions: u32) -> Option<Value> {
    let mut check = std::process::Command::new("python3");
    check.env("PYTHONPATH", python_path()).args(["-c", "import kafka"]);
    if !have("kafka-python", &mut check) {
        return None;
    }
    let c = start().await;
    create_n(&reqwest::Client::new(), &c, topic, partitions).await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/kafka_python_groups.py");
    let out = run(
        tokio::process::Command::new("python3")
            .env("PYTHONPATH", python_path())
            .arg(script)
            .args([&c.kafka, mode, topic, "g1"]),
        "",
    )
    .await;
    Some(serde_json::from_str(out.trim()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_group_resumes_from_the_committed_offset() {
    if let Some(v) = kafka_python_groups("resume", "pg", 1).await {
        assert_eq!(v, json!({"first": 10, "second": 5}));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_group_members_split_partitions_and_rebalance_on_leave() {
    if let Some(v) = kafka_python_groups("split", "ps", 2).await {
        assert_eq!(v["after"], json!([0, 1]));
        assert_eq!(v["listed"], json!(["g1"]), "ListGroups");
        assert_eq!(
            (v["members"].clone(), v["state"].clone()),
            (json!(2), json!("Stable")),
            "DescribeGroups"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_balanced_consumer_reads_and_commits() {
    if !have("kcat", std::process::Command::new("kcat").arg("-V")) {
        return;
    }
    let c = start().await;
    create_n(&reqwest::Client::new(), &c, "kg", 2).await;
    let input: String = (0..20).map(|i| format!("k{i}:v{i}\n")).collect();
    run(&mut kcat(&c, &["-P", "-t", "kg", "-K:"]), &input).await;
    let group = ["-X", "auto.offset.reset=earliest", "-X", "enable.auto.commit=true"];
    let consume = |c: &Cluster| {
        let mut cmd = kcat(c, &group);
        cmd.args(["-G", "kgroup", "kg", "-e", "-q", "-f", "%s\n"]);
        cmd
    };
    let out = run(&mut consume(&c), "").await;
    let mut got: Vec<&str> = out.lines().collect();
    got.sort();
    let mut want: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
    want.sort();
    assert_eq!(got, want);
    // The group committed its offsets on close: a rerun reads nothing old.
    run(&mut kcat(&c, &["-P", "-t", "kg", "-p", "0"]), "late\n").await;
    let out = run(&mut consume(&c), "").await;
    assert_eq!(out, "late\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_admin_client_manages_topics_and_configs() {
    let mut check = std::process::Command::new("python3");
    check.env("PYTHONPATH", python_path()).args(["-c", "import kafka"]);
    if !have("kafka-python", &mut check) {
        return;
    }
    let c = start().await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/kafka_python_admin.py");
    let out = run(
        tokio::process::Command::new("python3")
            .env("PYTHONPATH", python_path())
            .arg(script)
            .arg(&c.kafka),
        "",
    )
    .await;
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let dynamic = "DYNAMIC_TOPIC_CONFIG";
    let default = "DEFAULT_CONFIG";
    assert_eq!(v["created"], json!({"adm": 0, "adm2": 0}), "{v}");
    assert_eq!(v["validated"], json!({"adm-v": 0}));
    assert_eq!(v["listed"], json!(["adm", "adm2"]), "validate_only created nothing");
    assert_eq!(v["again"], "TopicAlreadyExistsError");
    assert_eq!(v["compact"], "InvalidConfigurationError");
    assert_eq!(v["partitions"], 3);
    assert_eq!(v["shrink"], "InvalidPartitionsError");
    assert_eq!(
        v["described"],
        json!({
            "cleanup.policy": ["delete", default],
            "retention.bytes": ["-1", default],
            "retention.ms": ["60000", dynamic],
        })
    );
    assert_eq!(v["modified"], json!({"retention.ms": ["60000", dynamic]}));
    assert_eq!(v["altered"], json!({"topic": {"adm": "OK"}}));
    assert_eq!(
        v["after_alter"],
        json!({"retention.bytes": ["1048576", dynamic], "retention.ms": ["60000", dynamic]})
    );
    assert_eq!(v["altered_legacy"], json!({"topic": {"adm": "OK"}}));
    assert_eq!(
        v["after_legacy"],
        json!({"retention.bytes": ["1048576", dynamic], "retention.ms": ["120000", dynamic]})
    );
    assert_eq!(v["reset"], json!({"topic": {"adm": "OK"}}));
    assert_eq!(v["after_reset"], json!({"retention.bytes": ["1048576", dynamic]}));
    assert_eq!(v["bad_alter"], "[Error 40] InvalidConfigurationError");
    assert_eq!(
        v["cluster"],
        json!({"cluster_id": "sluice", "brokers": 1, "controller_is_a_broker": true})
    );
    assert_eq!(v["deleted"], json!({"adm": 0, "adm2": 0}));
    assert_eq!(v["listed_after"], json!([]));
    // Over HTTP too: the topics are gone.
    let r = reqwest::get(format!("{}/v1/topics/adm", c.url)).await.unwrap();
    assert_eq!(r.status(), 404);
}
