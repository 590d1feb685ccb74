//! The public Durable Streams conformance suite
//! (`@durable-streams/server-conformance-tests`, installed by
//! `scripts/services.sh install` into `.services/npm`, its test files copied
//! to `.services/npm/ds-conformance` because vitest skips `node_modules`)
//! against real `sluice serve` processes: one node, and a 3-node cluster
//! addressed through a node that owns none of the streams (it is marked
//! draining before the run, so placement never gives it one; every request
//! it serves is routed to the owners).
//!
//! Each run must pass every test of the suite except the ones the suite
//! skips itself (its optional subscription APIs); the counts are printed.
//! The two runs take turns, so they do not compete for the machine. Skips
//! (with an eprintln) when the suite is not installed, and fails when `CI`
//! is set.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::process::{free_port, Server};

struct Suite {
    dir: PathBuf,
    vitest: PathBuf,
}

fn suite() -> Option<Suite> {
    let npm = Path::new(env!("CARGO_MANIFEST_DIR")).join(".services/npm");
    let s = Suite {
        dir: npm.join("ds-conformance"),
        vitest: npm.join("node_modules/.bin/vitest"),
    };
    if s.dir.join("conformance.test.js").is_file() && s.vitest.is_file() {
        return Some(s);
    }
    if std::env::var_os("CI").is_some() {
        panic!("the Durable Streams conformance suite is not installed but CI is set: run scripts/services.sh install");
    }
    eprintln!("skipping: the Durable Streams conformance suite is not installed (scripts/services.sh install)");
    None
}

#[derive(Debug)]
struct Counts {
    passed: u64,
    failed: u64,
    skipped: u64,
    failures: Vec<String>,
    skipped_names: Vec<String>,
    /// Passed, but only on a retry (vitest keeps the earlier failure).
    retried: Vec<String>,
}

/// Runs the whole suite against `url` and reads vitest's JSON report.
fn run(suite: &Suite, url: &str, report: &Path) -> Counts {
    let out = Command::new(&suite.vitest)
        .args(["run", "conformance.test.js", "--no-coverage", "--reporter=json"])
        // Most of the suite's tests have vitest's default 5 s limit, and
        // some run dozens of requests each (property tests, a loop of
        // twelve SSE closes): against a debug build on a small, shared
        // machine they can run past it. They get TEST_TIMEOUT instead (no
        // protocol wait changes: long polls, SSE and the tests' own limits
        // are as they are), and a failed test runs once more; one that
        // fails twice fails the run, and the ones that needed the second
        // try are printed.
        .arg(format!("--testTimeout={}", TEST_TIMEOUT.as_millis()))
        .arg(format!("--retry={RETRIES}"))
        .arg(format!("--outputFile={}", report.display()))
        .current_dir(&suite.dir)
        .env("CONFORMANCE_TEST_URL", url)
        .output()
        .expect("run vitest");
    let text = std::fs::read_to_string(report).unwrap_or_else(|e| {
        panic!(
            "no vitest report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let v: Value = serde_json::from_str(&text).expect("vitest JSON report");
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    let (mut failures, mut skipped_names, mut retried) = (Vec::new(), Vec::new(), Vec::new());
    for file in v["testResults"].as_array().into_iter().flatten() {
        for t in file["assertionResults"].as_array().into_iter().flatten() {
            let name = t["fullName"].as_str().unwrap_or("?").to_string();
            match t["status"].as_str() {
                Some("failed") => {
                    let why = t["failureMessages"][0].as_str().unwrap_or("");
                    let why: String = why.lines().next().unwrap_or("").chars().take(300).collect();
                    failures.push(format!("{name}: {why}"));
                }
                Some("pending" | "skipped" | "todo") => skipped_names.push(name),
                Some("passed") if t["failureMessages"].as_array().is_some_and(|m| !m.is_empty()) => retried.push(name),
                _ => {}
            }
        }
    }
    Counts {
        passed: n("numPassedTests"),
        failed: n("numFailedTests"),
        skipped: n("numPendingTests") + n("numTodoTests"),
        failures,
        skipped_names,
        retried,
    }
}

/// How many more times vitest runs a failed test.
const RETRIES: u32 = 1;
/// The limit of a suite test that sets none (vitest's default is 5 s).
const TEST_TIMEOUT: Duration = Duration::from_secs(15);

/// The pinned suite's size (`scripts/services.sh` installs 0.3.6).
const SUITE_TESTS: u64 = 338;
/// The group the suite skips unless a server offers its optional
/// subscription APIs (Sluice does not).
const SKIPPED_GROUP: &str = "Reserved subscription APIs";

fn check(what: &str, c: &Counts) {
    eprintln!(
        "durable streams conformance ({what}): {} passed, {} failed, {} skipped (of {SUITE_TESTS})",
        c.passed, c.failed, c.skipped
    );
    for f in &c.failures {
        eprintln!("  failed: {f}");
    }
    for r in &c.retried {
        eprintln!("  passed on a retry: {r}");
    }
    assert_eq!(c.failures.len() as u64, c.failed, "{what}: every failure is named");
    assert!(c.failures.is_empty(), "{what}: failures: {:#?}", c.failures);
    assert!(
        c.skipped_names.iter().all(|n| n.starts_with(SKIPPED_GROUP)),
        "{what}: the suite skipped more than its subscription tests: {:#?}",
        c.skipped_names
    );
    assert_eq!(c.skipped, c.skipped_names.len() as u64, "{what}: every skip is named");
    assert_eq!(c.passed + c.skipped, SUITE_TESTS, "{what}: {c:?}");
}

/// One suite run at a time: both are timing-sensitive on a small machine.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread")]
async fn the_conformance_suite_passes_against_one_node() {
    let Some(suite) = suite() else { return };
    let _turn = TURN.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let node = Server::start("n1", dir.path(), free_port(), &[]);
    let report = dir.path().join("report.json");
    let url = node.url.clone();
    let counts = tokio::task::spawn_blocking(move || run(&suite, &url, &report))
        .await
        .unwrap();
    check("one node", &counts);
}

async fn admin_nodes(client: &reqwest::Client, url: &str) -> Value {
    client
        .get(format!("{url}/admin/nodes"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_conformance_suite_passes_through_a_node_that_owns_no_stream() {
    let Some(suite) = suite() else { return };
    let _turn = TURN.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let nodes: Vec<Server> = ["n1", "n2", "n3"]
        .iter()
        .map(|id| Server::start(id, dir.path(), free_port(), &[]))
        .collect();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    // Every node sees the other two before n3 is drained.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let v = admin_nodes(&client, &nodes[0].url).await;
        let live = v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["live"] == true)
            .count();
        if live == 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the nodes did not see each other: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = client
        .post(format!("{}/admin/nodes/n3/drain", nodes[0].url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let report = dir.path().join("report.json");
    let url = nodes[2].url.clone();
    let counts = tokio::task::spawn_blocking(move || run(&suite, &url, &report))
        .await
        .unwrap();
    // The front node owned none of the streams the suite created.
    let v = admin_nodes(&client, &nodes[0].url).await;
    let n3 = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node_id"] == "n3")
        .unwrap()
        .clone();
    assert_eq!(n3["open_streams"], 0, "{n3}");
    let owners: std::collections::BTreeSet<String> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["open_streams"].as_u64().unwrap_or(0) > 0)
        .map(|n| n["node_id"].as_str().unwrap().to_string())
        .collect();
    eprintln!("streams owned by {owners:?}; requests went through n3");
    check("3 nodes, through a node that owns no stream", &counts);
}
