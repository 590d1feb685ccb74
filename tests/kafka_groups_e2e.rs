//! Consumer groups of real Kafka clients across two real `sluice serve`
//! processes sharing one data dir, with every delivery counted.
//!
//! Each member is a client process speaking the line protocol of
//! `tests/kafka/memberlib.py` (records, assignments and commits as JSON lines
//! on stdout; `leave` / `crash` on stdin); kcat's balanced consumer is read
//! from its formatted output. The scenarios:
//!
//! - [`scenario`] for every client family: two members share a 4-partition
//!   topic; one leaves cleanly mid-way; the owner of a partition is killed
//!   with `kill -9` while records keep arriving; the other member leaves; a
//!   new member resumes from the commits. No record may be lost; every
//!   record delivered twice is counted, and a duplicate is allowed only if
//!   the member that first delivered it never had a commit past it accepted
//!   (so a commit the coordinator acknowledged and then lost, or refused
//!   during a rebalance, fails the test). The counts are printed.
//! - the classic coordinator killed with `kill -9`: the members carry on
//!   with their member ids (no rebalance, no `UNKNOWN_MEMBER_ID`), and no
//!   committed offset is lost.
//! - a static member (`group.instance.id`) restarting: the other member sees
//!   no rebalance, and it gets its partitions back.
//! - KIP-848 (`group.protocol=consumer`, confluent-kafka): the scenario above
//!   with the coordinator's node killed.
//!
//! Producing is over HTTP (each client's producer is covered by
//! `tests/kafka_clients.rs`). Each test skips when its client is missing —
//! and fails when `CI` is set.

mod support;

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::process::{free_port, Server};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const TOPIC: &str = "events";
const PARTITIONS: u32 = 4;
/// The scenarios run one at a time whatever `--test-threads` says: each
/// runs two nodes and up to three clients, and their timing (sessions,
/// failover) should not depend on what else the 2-core machine runs.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Records produced before the first member leaves, and after.
const FIRST: u64 = 1500;
const SECOND: u64 = 1500;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Family {
    Confluent,
    KafkaPython,
    Aiokafka,
    Kafkajs,
    Kcat,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python_path() -> PathBuf {
    repo().join(".services/python")
}

/// Whether `family` can run here; panics under CI when it cannot.
fn available(family: Family) -> bool {
    let probe = match family {
        Family::Confluent => ("python3", vec!["-c", "import confluent_kafka"]),
        Family::KafkaPython => ("python3", vec!["-c", "import kafka"]),
        Family::Aiokafka => ("python3", vec!["-c", "import aiokafka"]),
        Family::Kafkajs => ("node", vec!["-e", "require('kafkajs')"]),
        Family::Kcat => ("kcat", vec!["-V"]),
    };
    let ok = std::process::Command::new(probe.0)
        .args(&probe.1)
        .env("PYTHONPATH", python_path())
        .env("NODE_PATH", repo().join(".services/npm/node_modules"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("{family:?} is missing but CI is set: run scripts/services.sh install");
        }
        eprintln!("skipping: {family:?} is missing (scripts/services.sh install installs it)");
    }
    ok
}

/// One line a member printed, with who printed it and when.
#[derive(Debug, Clone)]
struct Seen {
    member: String,
    at: Instant,
    event: Value,
}

type Log = Arc<Mutex<Vec<Seen>>>;

#[derive(Default, Clone)]
struct MemberOpts {
    instance: Option<String>,
    protocol: Option<&'static str>,
    session_ms: Option<u32>,
}

struct Member {
    name: String,
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
}

impl Member {
    async fn spawn(family: Family, name: &str, bootstrap: &str, group: &str, o: &MemberOpts, log: &Log) -> Member {
        let session = o.session_ms.unwrap_or(10_000).to_string();
        let mut cmd = match family {
            Family::Kcat => {
                let mut c = tokio::process::Command::new("kcat");
                c.args(["-C", "-q", "-u", "-b", bootstrap, "-G", group, TOPIC]);
                c.args(["-f", "%p %o %s\\n"]);
                c.args(["-X", "auto.offset.reset=earliest", "-X", "enable.auto.commit=true"]);
                c.args([
                    "-X",
                    "auto.commit.interval.ms=100",
                    "-X",
                    &format!("session.timeout.ms={session}"),
                ]);
                c.args(["-X", "heartbeat.interval.ms=500"]);
                if let Some(i) = &o.instance {
                    c.args(["-X", &format!("group.instance.id={i}")]);
                }
                c
            }
            Family::Kafkajs => {
                let mut c = tokio::process::Command::new("node");
                c.arg(repo().join("tests/kafka/member_kafkajs.js"));
                c.args([bootstrap, TOPIC, group, "--session-ms", &session]);
                c
            }
            _ => {
                let script = match family {
                    Family::Confluent => "member_confluent.py",
                    Family::KafkaPython => "member_kafka_python.py",
                    _ => "member_aiokafka.py",
                };
                let mut c = tokio::process::Command::new("python3");
                c.arg(repo().join("tests/kafka").join(script));
                c.args([bootstrap, TOPIC, group, "--session-ms", &session]);
                if let Some(i) = &o.instance {
                    c.args(["--instance", i]);
                }
                if let Some(p) = o.protocol {
                    c.args(["--protocol", p]);
                }
                c
            }
        };
        let mut child = cmd
            .env("PYTHONPATH", python_path())
            .env("NODE_PATH", repo().join(".services/npm/node_modules"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {family:?}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (log, member) = (log.clone(), name.to_string());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let event = if family == Family::Kcat {
                    kcat_record(&line)
                } else {
                    serde_json::from_str(&line).unwrap_or_else(|_| json!({"event": "noise", "line": line}))
                };
                log.lock().unwrap().push(Seen {
                    member: member.clone(),
                    at: Instant::now(),
                    event,
                });
            }
        });
        Member {
            name: name.to_string(),
            stdin: child.stdin.take(),
            child,
        }
    }

    /// Leave cleanly (kcat: SIGINT, on which it commits and closes) and wait
    /// for the exit.
    async fn leave(&mut self) {
        let kcat = self.is_kcat();
        match self.stdin.as_mut() {
            Some(stdin) if !kcat => {
                let _ = stdin.write_all(b"leave\n").await;
                let _ = stdin.flush().await;
            }
            _ => unsafe {
                libc::kill(self.child.id().unwrap() as i32, libc::SIGINT);
            },
        }
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{} did not leave in 30 s", self.name))
            .unwrap();
        assert!(status.success(), "{} exited with {status}", self.name);
    }

    fn is_kcat(&self) -> bool {
        self.name.starts_with("kcat")
    }
}

fn kcat_record(line: &str) -> Value {
    let mut it = line.splitn(3, ' ');
    match (
        it.next().and_then(|p| p.parse::<u64>().ok()),
        it.next().and_then(|o| o.parse::<u64>().ok()),
        it.next(),
    ) {
        (Some(p), Some(o), Some(v)) => json!({"event": "record", "p": p, "o": o, "v": v}),
        _ => json!({"event": "noise", "line": line}),
    }
}

fn events(log: &Log, member: Option<&str>, kind: &str) -> Vec<Seen> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|s| s.event["event"] == kind && member.is_none_or(|m| s.member == m))
        .cloned()
        .collect()
}

fn distinct(log: &Log) -> usize {
    events(log, None, "record")
        .iter()
        .map(|s| s.event["v"].as_str().unwrap().to_string())
        .collect::<BTreeSet<_>>()
        .len()
}

/// Wait until `f` holds; on a timeout print what the members reported
/// besides records (assignments, commits, errors), so a failure in CI
/// says where the group got stuck.
async fn wait_until(log: &Log, what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        if Instant::now() >= deadline {
            let log = log.lock().unwrap();
            let start = log.first().map(|s| s.at);
            eprintln!(
                "timed out waiting for {what}; {} events, the members' non-record ones:",
                log.len()
            );
            for s in log.iter().filter(|s| s.event["event"] != "record") {
                let t = start.map_or(0.0, |t0| (s.at - t0).as_secs_f64());
                eprintln!("  {t:8.3}s {} {}", s.member, s.event);
            }
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Wait until the members have read every record produced; on a timeout
/// say which are missing, per partition, against what the partition holds
/// (a consumer stuck behind a moved partition, or records not stored).
async fn every_record(c: &Cluster, log: &Log) {
    let total = FIRST + SECOND;
    let deadline = Instant::now() + Duration::from_secs(120);
    while (distinct(log) as u64) < total {
        if Instant::now() >= deadline {
            let seen: BTreeSet<String> = events(log, None, "record")
                .iter()
                .map(|s| s.event["v"].as_str().unwrap().to_string())
                .collect();
            let missing: Vec<u64> = (0..total).filter(|i| !seen.contains(&format!("m{i}"))).collect();
            let d: Value = c
                .client
                .get(format!("{}/v1/topics/{TOPIC}", c.urls()[0]))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap_or_default();
            for p in 0..PARTITIONS as u64 {
                let here: Vec<_> = missing.iter().filter(|i| *i % PARTITIONS as u64 == p).collect();
                eprintln!(
                    "partition {p}: {} missing (first {:?}); stored: {}",
                    here.len(),
                    &here[..here.len().min(10)],
                    d["partition_info"][p as usize]
                );
            }
            let members: BTreeSet<String> = log.lock().unwrap().iter().map(|s| s.member.clone()).collect();
            for m in members {
                eprintln!("{m}: {} records", events(log, Some(&m), "record").len());
            }
            panic!("timed out waiting for every record: {} of {total} read", seen.len());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Records `from..from + n` over HTTP, through the first node of `urls`
/// and on to the next whenever an append fails (a node may be killed
/// while this runs).
async fn produce(client: &reqwest::Client, urls: &[String], from: u64, n: u64) {
    let mut at = 0;
    for chunk in (from..from + n).collect::<Vec<_>>().chunks(100) {
        let records: Vec<Value> = chunk
            .iter()
            .map(|i| json!({"value": format!("m{i}"), "partition": (i % PARTITIONS as u64)}))
            .collect();
        let mut tries = 0;
        loop {
            let url = &urls[at % urls.len()];
            let r = client
                .post(format!("{url}/v1/topics/{TOPIC}/records"))
                .json(&json!({ "records": records }))
                .send()
                .await;
            if matches!(&r, Ok(r) if r.status().is_success()) {
                break;
            }
            tries += 1;
            at += 1;
            assert!(tries < 100, "produce kept failing: {r:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

struct Cluster {
    nodes: Vec<Server>,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Cluster {
    async fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let nodes: Vec<Server> = ["n1", "n2"]
            .iter()
            .map(|id| Server::start(id, dir.path(), free_port(), &["--flush-interval-sec", "1"]))
            .collect();
        let client = reqwest::Client::new();
        support::http::create_topic(&client, &nodes[0].url, TOPIC, PARTITIONS).await;
        // Every node's view, not only the creator's: members bootstrap
        // through either, and a Metadata answer without the topic's
        // partitions gives the first generation an empty assignment.
        for n in &nodes {
            assert!(support::http::wait_open(&client, &n.url, TOPIC).await);
        }
        Cluster {
            nodes,
            client,
            _dir: dir,
        }
    }

    fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.kafka_addr.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The first node still running.
    fn live_url(&self) -> String {
        self.nodes[0].url.clone()
    }

    /// The URL of every node still running.
    fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url.clone()).collect()
    }

    /// kill -9 the node called `id`; the survivor stays first.
    fn kill(&mut self, id: &str) {
        let i = self.nodes.iter().position(|n| n.node_id == id).unwrap();
        let mut victim = self.nodes.remove(i);
        victim.kill9();
        eprintln!("killed {id} with SIGKILL");
        // Keep the dead one's log readable on failure.
        std::mem::forget(victim);
    }

    async fn owner_of(&self, p: u32) -> String {
        let d: Value = self
            .client
            .get(format!("{}/v1/topics/{TOPIC}", self.live_url()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        d["partition_info"][p as usize]["owner"].as_str().unwrap().to_string()
    }

    /// The node that coordinates `group` now (FindCoordinator v1 over the wire).
    async fn coordinator_of(&self, group: &str) -> String {
        let addr = support::kafka::find_coordinator(&self.nodes[0].kafka_addr, group, 0).await;
        self.nodes
            .iter()
            .find(|n| n.kafka_addr == addr)
            .unwrap_or_else(|| panic!("coordinator {addr} is none of the nodes"))
            .node_id
            .clone()
    }
}

/// What a run delivered, and whether its duplicates are explained.
#[derive(Debug)]
struct Tally {
    deliveries: usize,
    distinct: usize,
    duplicates: usize,
    /// Duplicates of records whose first deliverer had a commit past them
    /// accepted: a commit lost or ignored.
    unexplained: Vec<String>,
    /// Duplicates a member delivered twice itself (its position moved back).
    self_rereads: usize,
    commit_failures: Vec<String>,
}

fn tally(log: &Log) -> Tally {
    let log = log.lock().unwrap().clone();
    // The highest next-offset each member had a commit accepted for, per
    // partition, so far (the log is in the order lines were read).
    let mut committed: BTreeMap<(String, u64), u64> = BTreeMap::new();
    // A record is its place in the log: the test's HTTP producer retries a
    // whole batch after a failed request, so a value may be stored twice.
    let mut first: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut values = BTreeSet::new();
    let (mut deliveries, mut duplicates, mut unexplained) = (0usize, 0usize, Vec::new());
    let mut self_rereads = 0usize;
    for s in &log {
        if s.event["event"] == "committed" {
            for (p, off) in s.event["offsets"].as_object().unwrap() {
                let e = committed.entry((s.member.clone(), p.parse().unwrap())).or_default();
                *e = (*e).max(off.as_u64().unwrap());
            }
            continue;
        }
        if s.event["event"] != "record" {
            continue;
        }
        deliveries += 1;
        let v = s.event["v"].as_str().unwrap().to_string();
        let (p, o) = (s.event["p"].as_u64().unwrap(), s.event["o"].as_u64().unwrap());
        values.insert(v.clone());
        match first.get(&(p, o)) {
            None => {
                first.insert((p, o), s.member.clone());
            }
            Some(m) => {
                duplicates += 1;
                let past = committed.get(&(m.clone(), p)).copied().unwrap_or(0);
                // kcat's auto commits are not reported: its duplicates are
                // counted, not judged. A member reading its own records again
                // moved its own position back (a client resetting to
                // `earliest` on an out-of-range answer during a failover):
                // counted apart, since its commits stand — the member that
                // resumes afterwards checks that.
                if s.member == *m {
                    self_rereads += 1;
                } else if past > o && !m.starts_with("kcat") {
                    unexplained.push(format!(
                        "{v} at {p}/{o} first from {m}, whose commits had reached {past}, again from {}",
                        s.member
                    ));
                }
            }
        }
    }
    let commit_failures = log
        .iter()
        .filter(|s| s.event["event"] == "commit_failed")
        .map(|s| format!("{}: {}", s.member, s.event["error"]))
        .collect();
    Tally {
        deliveries,
        distinct: values.len(),
        duplicates,
        unexplained,
        self_rereads,
        commit_failures,
    }
}

/// Two members; one leaves mid-way; `victim` picks the node killed with
/// SIGKILL while records arrive (the owner of partition 0, or the group's
/// coordinator); the other member leaves; a third resumes from the commits.
async fn scenario(family: Family, opts: MemberOpts, kill_coordinator: bool) {
    let mut c = Cluster::start().await;
    let log: Log = Arc::default();
    let group = format!("g-{family:?}").to_lowercase();
    let name = |n: &str| format!("{}-{n}", format!("{family:?}").to_lowercase());
    let (a_name, b_name, c_name) = (name("a"), name("b"), name("c"));
    let bootstrap = c.bootstrap();
    let mut a = Member::spawn(family, &a_name, &bootstrap, &group, &opts, &log).await;
    let mut b = Member::spawn(family, &b_name, &bootstrap, &group, &opts, &log).await;
    if family == Family::Kcat {
        // kcat reports no assignments: give both time to join.
        tokio::time::sleep(Duration::from_secs(8)).await;
    } else {
        wait_until(&log, "both members to own partitions", Duration::from_secs(90), || {
            owns_partitions(&log, &a_name) && owns_partitions(&log, &b_name)
        })
        .await;
    }
    produce(&c.client, &c.urls(), 0, FIRST).await;
    wait_until(&log, "both members to read", Duration::from_secs(90), || {
        !events(&log, Some(&a_name), "record").is_empty() && !events(&log, Some(&b_name), "record").is_empty()
    })
    .await;
    wait_until(&log, "a third of the records", Duration::from_secs(90), || {
        distinct(&log) as u64 >= FIRST / 3
    })
    .await;
    b.leave().await;
    let b_left = Instant::now();
    let b_failures: Vec<String> = events(&log, Some(&b_name), "commit_failed")
        .iter()
        .map(|s| s.event["error"].to_string())
        .collect();
    eprintln!(
        "{b_name} left after {} records",
        events(&log, Some(&b_name), "record").len()
    );

    let producer = {
        let (client, urls) = (c.client.clone(), c.urls());
        tokio::spawn(async move { produce(&client, &urls, FIRST, SECOND).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let victim = if kill_coordinator {
        c.coordinator_of(&group).await
    } else {
        c.owner_of(0).await
    };
    // Produce through the survivor from here on.
    c.nodes.sort_by_key(|n| n.node_id == victim);
    c.kill(&victim);
    producer.await.unwrap();
    every_record(&c, &log).await;
    // Let the last commits land.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    a.leave().await;

    // Resume through the nodes still running: kcat (librdkafka) terminates
    // on "all brokers down" when its first bootstrap connections are
    // refused, which says nothing about the group.
    let live = c.bootstrap();
    let mut resumed = Member::spawn(family, &c_name, &live, &group, &opts, &log).await;
    wait_until(&log, "the resumed member's assignment", Duration::from_secs(60), || {
        !events(&log, Some(&c_name), "assigned").is_empty() || family == Family::Kcat
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    resumed.leave().await;

    let t = tally(&log);
    let resumed_again = events(&log, Some(&c_name), "record").len();
    let after_leave_from_b = duplicates_of(&log, &b_name, b_left);
    eprintln!(
        "{family:?}{}: {} deliveries of {} records, {} duplicates ({} re-read by the member that delivered them, {} re-read by the member that resumed, {} of {b_name}'s records after it left), {} commit failures",
        if kill_coordinator { " (coordinator killed)" } else { " (partition owner killed)" },
        t.deliveries,
        t.distinct,
        t.duplicates,
        t.self_rereads,
        resumed_again,
        after_leave_from_b,
        t.commit_failures.len()
    );
    for f in &t.commit_failures {
        eprintln!("  commit failed: {f}");
    }
    assert_eq!(t.distinct as u64, FIRST + SECOND, "records lost");
    assert!(t.unexplained.is_empty(), "committed offsets lost: {:#?}", t.unexplained);
    assert!(
        b_failures.is_empty(),
        "commits refused as {b_name} left: {b_failures:?}"
    );
    if family != Family::Kcat {
        assert_eq!(after_leave_from_b, 0, "records {b_name} committed were delivered again");
        assert_eq!(resumed_again, 0, "the member that resumed re-read committed records");
    }
}

/// The partitions `member` owns now: "assigned" adds, "revoked" takes away
/// (incremental under KIP-848 and cooperative protocols; the eager classic
/// protocol revokes everything before each assignment).
fn owned(log: &Log, member: &str) -> BTreeSet<u64> {
    let mut owned = BTreeSet::new();
    for s in log.lock().unwrap().iter().filter(|s| s.member == member) {
        let parts = || {
            s.event["partitions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_u64().unwrap())
        };
        match s.event["event"].as_str() {
            Some("assigned") => owned.extend(parts()),
            Some("revoked") => parts().for_each(|p| {
                owned.remove(&p);
            }),
            _ => {}
        }
    }
    owned
}

fn owns_partitions(log: &Log, member: &str) -> bool {
    !owned(log, member).is_empty()
}

/// Deliveries by others, after `since`, of records `member` delivered.
fn duplicates_of(log: &Log, member: &str, since: Instant) -> usize {
    let mine: BTreeSet<String> = events(log, Some(member), "record")
        .iter()
        .map(|s| s.event["v"].as_str().unwrap().to_string())
        .collect();
    events(log, None, "record")
        .iter()
        .filter(|s| s.member != member && s.at > since && mine.contains(s.event["v"].as_str().unwrap()))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_group_through_a_leave_and_an_owner_kill() {
    let _one = ONE_AT_A_TIME.lock().await;
    if available(Family::Confluent) {
        scenario(Family::Confluent, MemberOpts::default(), false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_group_through_a_leave_and_an_owner_kill() {
    let _one = ONE_AT_A_TIME.lock().await;
    if available(Family::KafkaPython) {
        scenario(Family::KafkaPython, MemberOpts::default(), false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiokafka_group_through_a_leave_and_an_owner_kill() {
    let _one = ONE_AT_A_TIME.lock().await;
    if available(Family::Aiokafka) {
        scenario(Family::Aiokafka, MemberOpts::default(), false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafkajs_group_through_a_leave_and_an_owner_kill() {
    let _one = ONE_AT_A_TIME.lock().await;
    if available(Family::Kafkajs) {
        scenario(Family::Kafkajs, MemberOpts::default(), false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_group_through_a_leave_and_an_owner_kill() {
    let _one = ONE_AT_A_TIME.lock().await;
    if available(Family::Kcat) {
        scenario(Family::Kcat, MemberOpts::default(), false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip848_group_through_a_leave_and_a_coordinator_kill() {
    let _one = ONE_AT_A_TIME.lock().await;
    if available(Family::Confluent) {
        let opts = MemberOpts {
            protocol: Some("consumer"),
            ..MemberOpts::default()
        };
        scenario(Family::Confluent, opts, true).await;
    }
}

/// A classic group's coordinator is killed: the members' next heartbeats
/// and commits succeed on the new coordinator with their member ids — no
/// rebalance, no UNKNOWN_MEMBER_ID — and a member that resumes afterwards
/// re-reads nothing that was committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_group_carries_on_through_a_coordinator_kill_9() {
    let _one = ONE_AT_A_TIME.lock().await;
    if !available(Family::Confluent) {
        return;
    }
    let mut c = Cluster::start().await;
    let log: Log = Arc::default();
    let group = "g-coordinator";
    let opts = MemberOpts {
        session_ms: Some(30_000),
        ..MemberOpts::default()
    };
    produce(&c.client, &c.urls(), 0, FIRST).await;
    let bootstrap = c.bootstrap();
    let mut a = Member::spawn(Family::Confluent, "a", &bootstrap, group, &opts, &log).await;
    let mut b = Member::spawn(Family::Confluent, "b", &bootstrap, group, &opts, &log).await;
    wait_until(&log, "every first record", Duration::from_secs(90), || {
        distinct(&log) as u64 == FIRST
    })
    .await;
    // Settled: both members own partitions and nothing moves any more.
    wait_until(&log, "a settled assignment", Duration::from_secs(30), || {
        let last = log
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.event["event"] == "assigned")
            .map(|s| s.at)
            .max();
        last.is_some_and(|t| t.elapsed() > Duration::from_secs(2))
    })
    .await;
    let rebalances_before = events(&log, None, "assigned").len() + events(&log, None, "revoked").len();
    let coordinator = c.coordinator_of(group).await;
    c.nodes.sort_by_key(|n| n.node_id == coordinator);
    let killed_at = Instant::now();
    c.kill(&coordinator);
    produce(&c.client, &c.urls(), FIRST, SECOND).await;
    wait_until(&log, "every record", Duration::from_secs(120), || {
        distinct(&log) as u64 == FIRST + SECOND
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after: Vec<Seen> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.at > killed_at)
        .cloned()
        .collect();
    let moved: Vec<&Seen> = after
        .iter()
        .filter(|s| s.event["event"] == "assigned" || s.event["event"] == "revoked")
        .collect();
    let fenced: Vec<&Seen> = after
        .iter()
        .filter(|s| {
            let text = s.event.to_string();
            text.contains("UNKNOWN_MEMBER_ID") || text.contains("ILLEGAL_GENERATION") || text.contains("Unknown member")
        })
        .collect();
    let commits_after = after.iter().filter(|s| s.event["event"] == "committed").count();
    a.leave().await;
    b.leave().await;
    let mut resumed = Member::spawn(Family::Confluent, "c", &bootstrap, group, &opts, &log).await;
    wait_until(&log, "the resumed member's assignment", Duration::from_secs(60), || {
        !events(&log, Some("c"), "assigned").is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    resumed.leave().await;
    let t = tally(&log);
    eprintln!(
        "coordinator {coordinator} killed: {} rebalance events before, {} after; {commits_after} commits accepted after; {} duplicates of {} records; {} re-read on resume; commit failures: {:?}",
        rebalances_before,
        moved.len(),
        t.duplicates,
        t.distinct,
        events(&log, Some("c"), "record").len(),
        t.commit_failures
    );
    assert!(fenced.is_empty(), "members were forgotten: {fenced:#?}");
    assert!(
        moved.is_empty(),
        "the group rebalanced after the coordinator moved: {moved:#?}"
    );
    assert!(commits_after > 0, "no commit succeeded on the new coordinator");
    assert_eq!(t.distinct as u64, FIRST + SECOND, "records lost");
    assert!(t.unexplained.is_empty(), "committed offsets lost: {:#?}", t.unexplained);
    assert!(
        events(&log, Some("c"), "record").is_empty(),
        "the resumed member re-read committed records"
    ); // Nobody moved its position back: the killed coordinator also owned
       // partitions, and their new owner's answer to a member validating its
       // position (OffsetForLeaderEpoch) once sent librdkafka back to offset 0.
    assert_eq!(t.self_rereads, 0, "members re-read their own records");
}

/// A static member restarts within its session timeout: it gets its
/// partitions back and the other member sees no rebalance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_restarts_without_a_rebalance() {
    let _one = ONE_AT_A_TIME.lock().await;
    if !available(Family::Confluent) {
        return;
    }
    let c = Cluster::start().await;
    let log: Log = Arc::default();
    let group = "g-static";
    let opts = |i: &str| MemberOpts {
        instance: Some(i.to_string()),
        session_ms: Some(30_000),
        ..MemberOpts::default()
    };
    produce(&c.client, &c.urls(), 0, FIRST).await;
    let bootstrap = c.bootstrap();
    let mut a = Member::spawn(Family::Confluent, "a", &bootstrap, group, &opts("ia"), &log).await;
    let mut b = Member::spawn(Family::Confluent, "b", &bootstrap, group, &opts("ib"), &log).await;
    wait_until(&log, "both members to own partitions", Duration::from_secs(60), || {
        let last = |m: &str| events(&log, Some(m), "assigned").last().map(|s| s.event["partitions"].clone());
        matches!((last("a"), last("b")), (Some(x), Some(y)) if !x.as_array().unwrap().is_empty() && !y.as_array().unwrap().is_empty())
    })
    .await;
    wait_until(&log, "a settled assignment", Duration::from_secs(30), || {
        let last = log
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.event["event"] == "assigned")
            .map(|s| s.at)
            .max();
        last.is_some_and(|t| t.elapsed() > Duration::from_secs(3))
    })
    .await;
    let a_parts = events(&log, Some("a"), "assigned").last().unwrap().event["partitions"].clone();
    // A static member's close sends no LeaveGroup: the group keeps its place.
    a.leave().await;
    let restarted_at = Instant::now();
    let mut a2 = Member::spawn(Family::Confluent, "a2", &bootstrap, group, &opts("ia"), &log).await;
    wait_until(
        &log,
        "the restarted member's assignment",
        Duration::from_secs(60),
        || !events(&log, Some("a2"), "assigned").is_empty(),
    )
    .await;
    produce(&c.client, &c.urls(), FIRST, SECOND).await;
    wait_until(&log, "every record", Duration::from_secs(90), || {
        distinct(&log) as u64 == FIRST + SECOND
    })
    .await;
    let b_moves: Vec<Seen> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|s| {
            s.member == "b" && s.at > restarted_at && (s.event["event"] == "assigned" || s.event["event"] == "revoked")
        })
        .cloned()
        .collect();
    let a2_parts = events(&log, Some("a2"), "assigned")[0].event["partitions"].clone();
    a2.leave().await;
    b.leave().await;
    let t = tally(&log);
    eprintln!(
        "static restart: a had {a_parts}, a2 got {a2_parts}; b saw {} rebalance events; {} duplicates of {} records",
        b_moves.len(),
        t.duplicates,
        t.distinct
    );
    assert_eq!(a_parts, a2_parts, "the static member got other partitions back");
    assert!(b_moves.is_empty(), "the other member saw a rebalance: {b_moves:#?}");
    assert_eq!(t.distinct as u64, FIRST + SECOND, "records lost");
    assert!(t.unexplained.is_empty(), "committed offsets lost: {:#?}", t.unexplained);
}

/// A topic created and produced to at once, by a producer with retries off,
/// through the first node only: the partition leader Metadata names must
/// take the send even if its own view has not caught up yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_right_after_create_topics_loses_no_send_without_retries() {
    let _one = ONE_AT_A_TIME.lock().await;
    if !available(Family::Confluent) {
        return;
    }
    let c = Cluster::start().await;
    let out = tokio::process::Command::new("python3")
        .arg(repo().join("tests/kafka/create_then_produce.py"))
        .args([&c.nodes[0].kafka_addr, "20", "4"])
        .env("PYTHONPATH", python_path())
        .stderr(Stdio::inherit())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "create_then_produce.py failed");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("create then produce: {v}");
    assert_eq!(v["sent"], 80);
    assert_eq!(v["failed"], json!([]), "sends lost right after CreateTopics");
}
