//! The console (`GET /ui`) in a real browser: headless Debian `chromium`
//! driven by `playwright-core` (`tests/console/console.js`) against three
//! real `sluice serve` processes and one more with `--auth on`. The script
//! creates a topic from the page, produces with kafkajs and sees the record
//! in the live tail within 1 s of its acknowledgement, watches a consumer
//! group's lag go to 20 and back to 0, sees a Durable Stream and its fork,
//! kills a node with `kill -9` and sees it fenced in the overview within the
//! node timeout plus one refresh, and checks that a read-only token cannot
//! delete a topic from the page. Every request the page makes must go to
//! the node it was served from. Screenshots go to `$SLUICE_CONSOLE_SHOTS`
//! (default `target/console-shots`; `docs/console/` holds a set).
//!
//! Skips without chromium, node or playwright-core — and fails when `CI` is
//! set. `scripts/services.sh install` installs them.

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::kafka::installed;
use support::process::{free_port, Server};

const ADMIN: &str = "slc_console-test-admin-secret-0123456789";
const NODE_TIMEOUT_MS: u64 = 4000;

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn node() -> Command {
    let mut cmd = Command::new("node");
    cmd.env("NODE_PATH", repo(".services/npm/node_modules"));
    cmd
}

#[test]
fn the_console_shows_the_cluster_and_keeps_each_tokens_scopes_in_a_real_browser() {
    if !installed("chromium", Command::new("chromium").arg("--version"))
        || !installed(
            "playwright-core and kafkajs",
            node().args(["-e", "require('playwright-core'); require('kafkajs')"]),
        )
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--flush-interval-sec", "2", "--node-timeout-sec", "4"];
    // n2 hands its streams over for up to 5 s when it is told to stop, so
    // the page served from it can say it is shutting down.
    let slow_stop = [&flags[..], &["--shutdown-drain-sec", "5"]].concat();
    let nodes: Vec<Server> = ["n1", "n2", "n3"]
        .iter()
        .map(|id| {
            Server::start(
                id,
                dir.path(),
                free_port(),
                if *id == "n2" { &slow_stop } else { &flags },
            )
        })
        .collect();
    let auth_dir = tempfile::tempdir().unwrap();
    let admin_file = auth_dir.path().join("admin-token");
    std::fs::write(&admin_file, format!("{ADMIN}\n")).unwrap();
    let guarded = Server::start(
        "a1",
        auth_dir.path(),
        free_port(),
        &["--auth", "on", "--admin-token-file", admin_file.to_str().unwrap()],
    );
    let shots = std::env::var("SLUICE_CONSOLE_SHOTS").map_or_else(|_| repo("target/console-shots"), PathBuf::from);
    std::fs::create_dir_all(&shots).unwrap();
    let bootstrap: Vec<&str> = nodes.iter().map(|n| n.kafka_addr.as_str()).collect();

    let mut child = node()
        .arg(repo("tests/console/console.js"))
        .env("CONSOLE_URL", &nodes[0].url)
        .env("CONSOLE_BOOTSTRAP", bootstrap.join(","))
        .env("CONSOLE_KILL_PID", nodes[2].child.id().to_string())
        .env("CONSOLE_KILL_NODE", &nodes[2].node_id)
        .env("CONSOLE_SECOND_URL", &nodes[1].url)
        .env("CONSOLE_SECOND_NODE", &nodes[1].node_id)
        .env("CONSOLE_SECOND_PID", nodes[1].child.id().to_string())
        .env("CONSOLE_NODE_TIMEOUT_MS", NODE_TIMEOUT_MS.to_string())
        .env("CONSOLE_HEARTBEAT_MS", "1000")
        .env("CONSOLE_AUTH_URL", &guarded.url)
        .env("CONSOLE_ADMIN_TOKEN", ADMIN)
        .env("CONSOLE_SHOTS", &shots)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node");
    let deadline = std::time::Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    if !status.success() {
        for n in nodes.iter().chain([&guarded]) {
            let log = n.log();
            let tail: Vec<_> = log.lines().rev().take(15).collect();
            eprintln!(
                "--- {} log tail:\n{}",
                n.node_id,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        panic!(
            "the browser test failed ({status}):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(stdout.contains("step done"), "{stdout}");
    // How long after the fence was applied the page showed it (one refresh
    // at most, plus the fetch).
    let killed_at = measured(&stdout, "killed at").and_then(|t| t.split('T').nth(1).and_then(seconds_of_day));
    let shown_after: Option<f64> = measured(&stdout, "fenced in overview ms").and_then(|v| v.parse().ok());
    let fenced_at = nodes[..2]
        .iter()
        .flat_map(|n| n.log().lines().map(str::to_string).collect::<Vec<_>>())
        .find(|l| l.contains("fenced a silent node") && l.contains("\"n3\""))
        .and_then(|l| l.split('T').nth(1).and_then(seconds_of_day));
    let (Some(k), Some(s), Some(f)) = (killed_at, shown_after, fenced_at) else {
        panic!("no fence of n3 in the logs, or no kill time: {stdout}");
    };
    let page_ms = k * 1000.0 + s - f * 1000.0;
    println!(
        "fence applied {:.0} ms after kill -9; shown by the page {page_ms:.0} ms after it was applied",
        (f - k) * 1000.0
    );
    // The page's own part: one refresh (2 s) and its requests.
    assert!(
        page_ms <= 3000.0,
        "the page showed the fence {page_ms:.0} ms after it was applied"
    );
}

fn measured<'a>(stdout: &'a str, name: &str) -> Option<&'a str> {
    stdout.lines().find_map(|l| l.strip_prefix(&format!("measure {name} ")))
}

/// `HH:MM:SS.fff...` at the start of `t` (a log or ISO timestamp after its
/// `T`) in seconds since midnight.
fn seconds_of_day(t: &str) -> Option<f64> {
    let mut parts = t.get(..t.find(['Z', ' '])?)?.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}
