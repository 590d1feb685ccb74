//! Real Kafka clients against a 2-node in-process cluster: two `Node`s on
//! shared in-memory stores, each with its own HTTP and Kafka listener.
//!
//! Every client — kcat (librdkafka 2.0.2), confluent-kafka (Python, with
//! the librdkafka 2.x of its wheel), kafka-python and kafkajs (node) — runs
//! the same scenarios on a 2-partition topic with one partition on each node,
//! bootstrapping from the first node only, so it must follow the leader to
//! the other: produce with acks=all and consume from the beginning; a
//! consumer group that commits and a second member (a new process) that
//! resumes from the committed offsets; and records crossing between HTTP and
//! Kafka with their keys, values and headers. The Python and node clients
//! are driven by the scripts in `tests/kafka/` (JSON lines in and out; see
//! `clientlib.py`), kcat directly.
//!
//! Each test skips when its client is missing — and fails when `CI` is set.
//! `scripts/services.sh install` installs them all (the Python ones into
//! `.services/python`, kafkajs into `.services/npm`).

mod support;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use support::kafka::{installed, Cluster};
use tokio::io::AsyncWriteExt;

/// Creates `topic` over HTTP, waits until every node sees every partition
/// open and returns each partition's owner.
async fn create(c: &Cluster, topic: &str, partitions: u32) -> Vec<String> {
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{}/v1/topics", c.urls[0]))
        .json(&json!({"name": topic, "partitions": partitions}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    // Every node's view: HTTP requests go through either.
    for url in &c.urls {
        assert!(support::http::wait_open(&client, url, topic).await);
    }
    let t: Value = client
        .get(format!("{}/v1/topics/{topic}", c.urls[0]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    t["partition_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["owner"].as_str().unwrap().to_string())
        .collect()
}

/// A 2-partition topic with one partition on each node.
async fn create_spread(c: &Cluster, topic: &str) {
    let owners = create(c, topic, 2).await;
    assert_ne!(owners[0], owners[1], "both partitions of {topic} on one node");
}

/// A record as the client drivers read and write it (one JSON line; see
/// tests/kafka/clientlib.py).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Rec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partition: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
    key: Option<String>,
    value: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

fn rec(partition: Option<u32>, key: &str, value: &str, headers: &[(&str, &str)]) -> Rec {
    Rec {
        partition,
        offset: None,
        key: Some(key.to_string()),
        value: value.to_string(),
        headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    }
}

/// Appends over HTTP (one POST through `url`); returns the records with the
/// partition and offset each got.
async fn http_append(url: &str, topic: &str, recs: &[Rec]) -> Vec<Rec> {
    let records: Vec<Value> = recs
        .iter()
        .map(|r| json!({"key": r.key, "value": r.value, "headers": r.headers, "partition": r.partition}))
        .collect();
    let r: Value = reqwest::Client::new()
        .post(format!("{url}/v1/topics/{topic}/records"))
        .json(&json!({ "records": records }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let offsets = r["offsets"].as_array().unwrap_or_else(|| panic!("append failed: {r}"));
    recs.iter()
        .zip(offsets)
        .map(|(r, o)| Rec {
            partition: Some(o["partition"].as_u64().unwrap() as u32),
            offset: Some(o["offset"].as_u64().unwrap()),
            ..r.clone()
        })
        .collect()
}

/// Every record of one partition over HTTP through `url`, from `from`.
async fn http_read(url: &str, topic: &str, partition: u32, from: u64) -> Vec<Rec> {
    let r: Value = reqwest::Client::new()
        .get(format!(
            "{url}/v1/topics/{topic}/partitions/{partition}/records?offset={from}&limit=1000"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r["records"]
        .as_array()
        .unwrap_or_else(|| panic!("read failed: {r}"))
        .iter()
        .map(|r| Rec {
            partition: Some(partition),
            offset: r["offset"].as_u64(),
            key: r["key"].as_str().map(str::to_string),
            value: r["value"].as_str().unwrap().to_string(),
            headers: serde_json::from_value(r["headers"].clone()).unwrap(),
        })
        .collect()
}

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn python() -> std::process::Command {
    let mut cmd = std::process::Command::new("python3");
    cmd.env("PYTHONPATH", repo(".services/python"));
    cmd
}

fn node() -> std::process::Command {
    let mut cmd = std::process::Command::new("node");
    cmd.env("NODE_PATH", repo(".services/npm/node_modules"));
    cmd
}

/// How long one client process may take (its own steps give up after 30 s).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

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
    let out = tokio::time::timeout(CLIENT_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{cmd:?} timed out"))
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
    cmd.args(["-b", c.bootstrap(), "-X", "socket.timeout.ms=10000"])
        .args(args);
    cmd
}

/// One record of kcat's `-J` envelope.
fn from_kcat_json(line: &str) -> Rec {
    let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    Rec {
        partition: Some(v["partition"].as_u64().unwrap() as u32),
        offset: Some(v["offset"].as_u64().unwrap()),
        key: v["key"].as_str().map(str::to_string),
        value: v["payload"].as_str().unwrap().to_string(),
        // kcat 1.7 writes headers as a flat list: [name, value, name, value, ...].
        headers: match &v["headers"] {
            Value::Null => BTreeMap::new(),
            h => {
                let flat: Vec<String> = serde_json::from_value(h.clone()).unwrap_or_else(|e| panic!("{e}: {line}"));
                flat.chunks(2).map(|kv| (kv[0].clone(), kv[1].clone())).collect()
            }
        },
    }
}

fn json_lines<T: serde::de::DeserializeOwned>(out: &str) -> Vec<T> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    Kcat,
    Confluent,
    KafkaPython,
    Kafkajs,
}

impl Client {
    fn name(self) -> &'static str {
        match self {
            Client::Kcat => "kcat",
            Client::Confluent => "confluent-kafka",
            Client::KafkaPython => "kafka-python",
            Client::Kafkajs => "kafkajs",
        }
    }

    /// Whether the client is installed (see [`have`]).
    fn installed(self) -> bool {
        let mut probe = match self {
            Client::Kcat => {
                let mut cmd = std::process::Command::new("kcat");
                cmd.arg("-V");
                cmd
            }
            Client::Confluent => {
                let mut cmd = python();
                cmd.args(["-c", "import confluent_kafka"]);
                cmd
            }
            Client::KafkaPython => {
                let mut cmd = python();
                cmd.args(["-c", "import kafka"]);
                cmd
            }
            Client::Kafkajs => {
                let mut cmd = node();
                cmd.args(["-e", "require('kafkajs')"]);
                cmd
            }
        };
        installed(self.name(), &mut probe)
    }

    /// The driver script with `args` (every client but kcat).
    fn driver(self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = match self {
            Client::Confluent => {
                let mut cmd = python();
                cmd.arg(repo("tests/kafka/confluent_client.py"));
                cmd
            }
            Client::KafkaPython => {
                let mut cmd = python();
                cmd.arg(repo("tests/kafka/kafka_python_client.py"));
                cmd
            }
            Client::Kafkajs => {
                let mut cmd = node();
                cmd.arg(repo("tests/kafka/kafkajs_client.js"));
                cmd
            }
            Client::Kcat => unreachable!("kcat has no driver"),
        };
        cmd.args(args);
        tokio::process::Command::from(cmd)
    }

    /// Produces `recs` with acks=all; returns where each landed when the
    /// client reports it (kcat does not).
    async fn produce(self, c: &Cluster, topic: &str, recs: &[Rec], idempotent: bool) -> Option<Vec<(u32, u64)>> {
        if self == Client::Kcat {
            // kcat sets one partition and one set of headers per run: one
            // run per stretch of records that share them.
            for run_of in recs.chunk_by(|a, b| (a.partition, &a.headers) == (b.partition, &b.headers)) {
                let first = &run_of[0];
                let mut args = vec!["-P".to_string(), "-t".into(), topic.into(), "-K:".into()];
                args.extend(["-X".into(), "acks=all".into()]);
                if idempotent {
                    args.extend(["-X".into(), "enable.idempotence=true".into()]);
                }
                if let Some(p) = first.partition {
                    args.extend(["-p".into(), p.to_string()]);
                }
                for (k, v) in &first.headers {
                    args.extend(["-H".into(), format!("{k}={v}")]);
                }
                let lines: String = run_of
                    .iter()
                    .map(|r| format!("{}:{}\n", r.key.as_deref().expect("kcat records have keys"), r.value))
                    .collect();
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                run(&mut kcat(c, &args), &lines).await;
            }
            return None;
        }
        let input: String = recs.iter().map(|r| serde_json::to_string(r).unwrap() + "\n").collect();
        let mut args = vec!["produce", c.bootstrap(), topic];
        if idempotent {
            args.push("--idempotent");
        }
        let out = run(&mut self.driver(&args), &input).await;
        let landed: Vec<Value> = json_lines(&out);
        assert_eq!(landed.len(), recs.len(), "{out}");
        Some(
            landed
                .iter()
                .map(|l| (l["partition"].as_u64().unwrap() as u32, l["offset"].as_u64().unwrap()))
                .collect(),
        )
    }

    /// Every partition of `topic` from the beginning, outside any group:
    /// `count` records and whatever else arrives soon after.
    async fn consume(self, c: &Cluster, topic: &str, count: usize) -> Vec<Rec> {
        if self == Client::Kcat {
            // -e: exit once every partition is read to its end.
            let out = run(&mut kcat(c, &["-C", "-t", topic, "-o", "beginning", "-e", "-J"]), "").await;
            return out.lines().map(from_kcat_json).collect();
        }
        let count = count.to_string();
        json_lines(&run(&mut self.driver(&["consume", c.bootstrap(), topic, &count]), "").await)
    }

    /// One member of `group` (a new process) reads `count` records (offset
    /// reset: earliest), commits and leaves.
    async fn group(self, c: &Cluster, topic: &str, group: &str, count: usize) -> Vec<Rec> {
        if self == Client::Kcat {
            // Auto-commit: kcat commits what it read when it closes.
            let args = [
                "-X",
                "auto.offset.reset=earliest",
                "-X",
                "enable.auto.commit=true",
                "-G",
                group,
                topic,
                "-e",
                "-J",
            ];
            let out = run(&mut kcat(c, &args), "").await;
            return out.lines().map(from_kcat_json).collect();
        }
        let count = count.to_string();
        json_lines(&run(&mut self.driver(&["group", c.bootstrap(), topic, &count, group]), "").await)
    }
}

/// `got` (read by a consumer from a fresh topic) is exactly `sent`: each
/// record once, unchanged, offsets dense from 0 in each partition, in the
/// order sent, read in offset order; and where the producer reported where
/// a record landed, that is where it was read.
fn assert_read_back(sent: &[Rec], landed: Option<&[(u32, u64)]>, got: &[Rec]) {
    assert_eq!(got.len(), sent.len(), "read {got:#?}");
    let by_key: BTreeMap<&str, &Rec> = got.iter().map(|r| (r.key.as_deref().unwrap(), r)).collect();
    assert_eq!(by_key.len(), got.len(), "a key read twice: {got:#?}");
    let mut next: BTreeMap<u32, u64> = BTreeMap::new();
    for (i, s) in sent.iter().enumerate() {
        let r = by_key
            .get(s.key.as_deref().unwrap())
            .unwrap_or_else(|| panic!("{s:?} was not read"));
        assert_eq!((&r.key, &r.value, &r.headers), (&s.key, &s.value, &s.headers));
        let (p, o) = (r.partition.unwrap(), r.offset.unwrap());
        if let Some(want) = s.partition {
            assert_eq!(p, want, "{s:?} read from partition {p}");
        }
        // Sent order is offset order, with no gap.
        let expected = next.entry(p).or_insert(0);
        assert_eq!(o, *expected, "{s:?} read at {p}@{o}");
        *expected += 1;
        if let Some(landed) = landed {
            assert_eq!(landed[i], (p, o), "{s:?} reported at {:?}, read at {p}@{o}", landed[i]);
        }
    }
    // Within a partition, read in offset order.
    for p in next.keys() {
        let offsets: Vec<u64> = got
            .iter()
            .filter(|r| r.partition == Some(*p))
            .map(|r| r.offset.unwrap())
            .collect();
        assert!(
            offsets.windows(2).all(|w| w[0] < w[1]),
            "partition {p} read as {offsets:?}"
        );
    }
}

fn sorted(mut recs: Vec<Rec>) -> Vec<Rec> {
    recs.sort_by_key(|r| (r.partition, r.offset));
    recs
}

fn partitions(recs: &[Rec]) -> BTreeSet<u32> {
    recs.iter().filter_map(|r| r.partition).collect()
}

/// Keyed records produced with acks=all through a bootstrap on one node
/// reach both nodes' partitions and are read back from the beginning.
async fn produces_and_consumes(client: Client) {
    if !client.installed() {
        return;
    }
    let c = Cluster::start().await;
    create_spread(&c, "t").await;
    let sent: Vec<Rec> = (0..30)
        .map(|i| {
            let parity = if i % 2 == 0 { "even" } else { "odd" };
            rec(
                None,
                &format!("k{i}"),
                &format!("v{i}"),
                &[("client", client.name()), ("parity", parity)],
            )
        })
        .collect();
    let landed = client.produce(&c, "t", &sent, false).await;
    let got = client.consume(&c, "t", sent.len()).await;
    assert_read_back(&sent, landed.as_deref(), &got);
    assert_eq!(partitions(&got), BTreeSet::from([0, 1]), "keys spread over both nodes");
}

/// A member reads, commits and leaves; a second member (a new process)
/// reads exactly the records appended since.
async fn group_resumes_from_committed_offsets(client: Client) {
    if !client.installed() {
        return;
    }
    let c = Cluster::start().await;
    create_spread(&c, "g").await;
    let batch = |from: u32, n: u32| -> Vec<Rec> {
        (from..from + n)
            .map(|i| rec(Some(i % 2), &format!("k{i}"), &format!("v{i}"), &[]))
            .collect()
    };
    let first = http_append(&c.urls[1], "g", &batch(0, 20)).await;
    let got = client.group(&c, "g", "grp", first.len()).await;
    assert_eq!(sorted(got), sorted(first), "the first member reads everything");
    let second = http_append(&c.urls[1], "g", &batch(20, 10)).await;
    let got = client.group(&c, "g", "grp", second.len()).await;
    assert_eq!(sorted(got), sorted(second), "the second member resumes at the commits");
}

/// Records appended over HTTP are read by the Kafka client, and records
/// produced by the client are read over HTTP: same key, value, headers.
async fn records_cross_between_http_and_kafka(client: Client) {
    if !client.installed() {
        return;
    }
    let c = Cluster::start().await;
    create_spread(&c, "x").await;
    let from_http: Vec<Rec> = (0..6)
        .map(|i| {
            let n = i.to_string();
            rec(
                Some(i % 2),
                &format!("hk{i}"),
                &format!("hv{i}"),
                &[("source", "http"), ("n", &n)],
            )
        })
        .collect();
    let from_http = http_append(&c.urls[1], "x", &from_http).await;
    let got = client.consume(&c, "x", from_http.len()).await;
    assert_eq!(sorted(got), sorted(from_http), "HTTP -> Kafka");

    let from_kafka: Vec<Rec> = (0..4)
        .map(|i| {
            rec(
                Some(i % 2),
                &format!("kk{i}"),
                &format!("kv{i}"),
                &[("source", client.name())],
            )
        })
        .collect();
    let landed = client.produce(&c, "x", &from_kafka, false).await;
    // Read through each node: one of them forwards to the owner.
    let mut read = Vec::new();
    for (p, url) in c.urls.iter().enumerate() {
        read.extend(http_read(url, "x", p as u32, 3).await);
    }
    let mut want: Vec<Rec> = Vec::new();
    for (p, n) in [(0, 3), (1, 3)] {
        for (i, r) in from_kafka.iter().filter(|r| r.partition == Some(p)).enumerate() {
            want.push(Rec {
                offset: Some(n + i as u64),
                ..r.clone()
            });
        }
    }
    if let Some(landed) = landed {
        let mut reported: Vec<(u32, u64)> = landed;
        reported.sort();
        assert_eq!(reported, vec![(0, 3), (0, 4), (1, 3), (1, 4)]);
    }
    assert_eq!(sorted(read), sorted(want), "Kafka -> HTTP");
}

/// An idempotent producer's records are each stored once, in order.
async fn idempotent_producer_writes_each_record_once(client: Client) {
    if !client.installed() {
        return;
    }
    let c = Cluster::start().await;
    create_spread(&c, "idem").await;
    let sent: Vec<Rec> = (0..200)
        .map(|i| rec(None, &format!("k{i}"), &format!("v{i}"), &[]))
        .collect();
    let landed = client.produce(&c, "idem", &sent, true).await;
    let got = client.consume(&c, "idem", sent.len()).await;
    assert_read_back(&sent, landed.as_deref(), &got);
}

/// The scenarios, one test each, for each client.
macro_rules! scenarios {
    ($($module:ident: $client:expr;)*) => {$(
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn produces_and_consumes_across_two_nodes() {
                produces_and_consumes($client).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn group_member_resumes_from_committed_offsets() {
                group_resumes_from_committed_offsets($client).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn records_cross_between_http_and_kafka() {
                super::records_cross_between_http_and_kafka($client).await
            }
        }
    )*};
}

scenarios! {
    kcat: Client::Kcat;
    confluent_kafka: Client::Confluent;
    kafka_python: Client::KafkaPython;
    kafkajs: Client::Kafkajs;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_idempotent_producer_writes_each_record_once() {
    idempotent_producer_writes_each_record_once(Client::Confluent).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafkajs_idempotent_producer_writes_each_record_once() {
    idempotent_producer_writes_each_record_once(Client::Kafkajs).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_idempotent_producer_writes_each_record_once() {
    idempotent_producer_writes_each_record_once(Client::KafkaPython).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_idempotent_producer_writes_each_record_once() {
    idempotent_producer_writes_each_record_once(Client::Kcat).await
}

/// kcat beyond the scenarios: reading from an offset and from the end,
/// auto-created topics, and metadata listing both brokers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_reads_from_offsets_and_auto_creates_topics() {
    if !Client::Kcat.installed() {
        return;
    }
    let c = Cluster::start().await;
    create(&c, "kc", 1).await;
    let lines: String = (0..20).map(|i| format!("k{i}:v{i}\n")).collect();
    run(&mut kcat(&c, &["-P", "-t", "kc", "-K:", "-X", "acks=all"]), &lines).await;
    let out = run(&mut kcat(&c, &["-C", "-t", "kc", "-o", "15", "-e", "-f", "%o\n"]), "").await;
    assert_eq!(out, "15\n16\n17\n18\n19\n");
    let out = run(&mut kcat(&c, &["-C", "-t", "kc", "-o", "end", "-e", "-f", "%o\n"]), "").await;
    assert_eq!(out, "");

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
    let brokers: BTreeSet<&str> = meta["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(brokers, c.kafkas.iter().map(String::as_str).collect());
    assert!(meta["topics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["topic"] == "kc-auto"));
}

/// kafka-python: two members split a 2-partition topic, one partition each;
/// when one leaves, the other gets both. ListGroups and DescribeGroups see
/// the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_group_members_split_partitions_and_rebalance_on_leave() {
    if !Client::KafkaPython.installed() {
        return;
    }
    let c = Cluster::start().await;
    create_spread(&c, "ps").await;
    let mut cmd = python();
    cmd.arg(repo("tests/kafka/kafka_python_groups.py"))
        .args([c.bootstrap(), "ps", "g1"]);
    let out = run(&mut tokio::process::Command::from(cmd), "").await;
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["after"], json!([0, 1]));
    assert_eq!(v["listed"], json!(["g1"]), "ListGroups");
    assert_eq!(
        (v["members"].clone(), v["state"].clone()),
        (json!(2), json!("Stable")),
        "DescribeGroups"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_admin_client_manages_topics_and_configs() {
    if !Client::KafkaPython.installed() {
        return;
    }
    let c = Cluster::start().await;
    let mut cmd = python();
    cmd.arg(repo("tests/kafka/kafka_python_admin.py")).arg(c.bootstrap());
    let out = run(&mut tokio::process::Command::from(cmd), "").await;
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let dynamic = "DYNAMIC_TOPIC_CONFIG";
    let default = "DEFAULT_CONFIG";
    assert_eq!(v["created"], json!({"adm": 0, "adm2": 0}), "{v}");
    assert_eq!(v["validated"], json!({"adm-v": 0}));
    assert_eq!(v["listed"], json!(["adm", "adm2"]), "validate_only created nothing");
    assert_eq!(v["again"], "TopicAlreadyExistsError");
    assert_eq!(v["compact"], json!({"adm-c": 0}));
    assert_eq!(v["bad_policy"], "InvalidConfigurationError");
    assert_eq!(
        v["described_compacted"],
        json!({"cleanup.policy": ["compact", dynamic], "min.cleanable.dirty.ratio": ["0.2", dynamic]})
    );
    assert_eq!(v["partitions"], 3);
    assert_eq!(v["shrink"], "InvalidPartitionsError");
    assert_eq!(
        v["described"],
        json!({
            "cleanup.policy": ["delete", default],
            "delete.retention.ms": ["86400000", default],
            "max.compaction.lag.ms": [i64::MAX.to_string(), default],
            "min.cleanable.dirty.ratio": ["0.5", default],
            "min.compaction.lag.ms": ["0", default],
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
        json!({"cluster_id": "sluice", "brokers": 2, "controller_is_a_broker": true})
    );
    // The idempotent producer's state: three records from sequence 0, no
    // transaction; the timestamp is the batch's while the owner still has
    // it in its tail, -1 once flushed.
    let producers = v["producers"].as_array().unwrap();
    assert_eq!(producers.len(), 1, "{v}");
    let p = &producers[0];
    assert_eq!(
        (
            &p["id_set"],
            &p["epoch"],
            &p["last_sequence"],
            &p["coordinator_epoch"],
            &p["txn_start"]
        ),
        (&json!(true), &json!(0), &json!(2), &json!(-1), &json!(-1)),
        "{v}"
    );
    let ts = p["last_timestamp"].as_i64().unwrap();
    assert!(ts == -1 || ts > 1_600_000_000_000, "a wall-clock timestamp or -1: {ts}");
    // OffsetDelete of a group with no members: the committed offset goes,
    // a partition without one answers NONE, and the group is then gone.
    assert_eq!(v["group_offsets_before"], json!({"adm2:0": 2}), "{v}");
    assert_eq!(
        v["offsets_deleted"],
        json!({"adm2:0": "NoError", "adm:0": "NoError"}),
        "{v}"
    );
    assert_eq!(v["group_offsets_after"], json!({}), "{v}");
    assert_eq!(v["deleted_again"], "GroupIdNotFoundError", "{v}");
    assert_eq!(v["deleted"], json!({"adm": 0, "adm-c": 0, "adm2": 0}));
    assert_eq!(v["listed_after"], json!([]));
    // Over HTTP too: the topics are gone.
    let r = reqwest::get(format!("{}/v1/topics/adm", c.urls[0])).await.unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_admin_client_sees_no_acls_one_log_dir_per_node_and_deletes_records() {
    if !Client::KafkaPython.installed() {
        return;
    }
    let c = Cluster::start().await;
    let owners = create(&c, "dirs", 2).await;
    // Records in partition 1 only; appended through its owner.
    let owner1 = c.nodes.iter().position(|n| n.config.node_id == owners[1]).unwrap();
    http_append(
        &c.urls[owner1],
        "dirs",
        &[rec(Some(1), "k", "v1", &[]), rec(Some(1), "k", "v2", &[])],
    )
    .await;
    let mut cmd = python();
    cmd.arg(repo("tests/kafka/kafka_python_acls_dirs.py"))
        .args([c.bootstrap(), "dirs"]);
    let out = run(&mut tokio::process::Command::from(cmd), "").await;
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["describe_acls"], "SecurityDisabledError", "{v}");
    assert_eq!(v["create_acls"], json!(["SecurityDisabledError"]), "{v}");
    assert_eq!(v["log_dirs"], json!(["sluice://n1", "sluice://n2"]), "{v}");
    let sizes = v["partition_sizes"].as_object().unwrap();
    assert_eq!(sizes.len(), 2, "each partition reported once, by its owner: {v}");
    assert_eq!(sizes["0"], 0, "{v}");
    assert!(sizes["1"].as_i64().unwrap() > 0, "{v}");
    // DeleteRecords: the start moves to 1 (the tail flushed first), past the end is refused.
    assert_eq!(v["delete_records"], json!({"1": 1}), "{v}");
    assert_eq!(v["delete_past_end"], "OffsetOutOfRangeError", "{v}");
    assert_eq!(v["beginning"], 1, "{v}");
    assert_eq!(v["read_after_delete"], json!([[1, "v2"]]), "{v}");
}
