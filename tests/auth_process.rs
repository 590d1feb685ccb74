//! A real `sluice serve --auth on` process, driven through the `sluice
//! tokens` CLI and raw HTTP: issue, list, use, fail, revoke — then search
//! the node's log (at debug level), `/metrics`, `/admin/nodes` and the
//! token list for every secret involved. Any hit fails the test.

mod support;

use serde_json::{json, Value};
use std::process::Command;
use support::http::bearer_client;
use support::process::{free_port, Server};

const ADMIN: &str = "process-test-admin-secret-5f2c9a71";

fn cli(url: &str, token_file: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .args(["--url", url, "--token-file", token_file.to_str().unwrap()])
        .env_remove("SLUICE_TOKEN")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_the_log_metrics_or_admin_output() {
    let dir = tempfile::tempdir().unwrap();
    let admin_file = dir.path().join("admin-token");
    std::fs::write(&admin_file, format!("{ADMIN}\n")).unwrap();
    // Every log line a node writes, debug included, goes to the log file.
    std::env::set_var("RUST_LOG", "debug,h2=info,hyper=info,reqwest=info,aws=info");
    let server = Server::start(
        "n1",
        dir.path(),
        free_port(),
        &["--auth", "on", "--admin-token-file", admin_file.to_str().unwrap()],
    );
    let url = server.url.clone();
    let admin = bearer_client(ADMIN);

    // Issue two tokens with the CLI; the secret is printed once, on stdout.
    let (ok, stdout, stderr) = cli(
        &url,
        &admin_file,
        &["tokens", "issue", "writer", "--scope", "t*=read,write"],
    );
    assert!(ok, "tokens issue failed: {stderr}");
    let writer = stdout.trim().to_string();
    assert!(writer.starts_with("slc_"), "{stdout}");
    let (ok, stdout, _) = cli(
        &url,
        &admin_file,
        &[
            "tokens",
            "issue",
            "short",
            "--scope",
            "t=read",
            "--expires-in-sec",
            "3600",
        ],
    );
    assert!(ok);
    let reader = stdout.trim().to_string();
    let (ok, listed, _) = cli(&url, &admin_file, &["tokens", "list"]);
    assert!(
        ok && listed.contains("writer") && listed.contains("t*=read,write"),
        "{listed}"
    );

    // Use them, and fail in every way.
    let w = bearer_client(&writer);
    let r = admin
        .post(format!("{url}/v1/topics"))
        .json(&json!({"name": "t"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert!(support::http::wait_open(&admin, &url, "t").await);
    let r = w
        .post(format!("{url}/v1/topics/t/records"))
        .json(&json!({"records": [{"value": "hello"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        bearer_client(&reader)
            .get(format!("{url}/v1/topics/t/partitions/0/records"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let forged = format!("{}XX", &writer[..writer.len() - 2]);
    let wrong_admin = format!("{ADMIN}-nope");
    for bad in [&forged, &wrong_admin] {
        assert_eq!(
            bearer_client(bad)
                .get(format!("{url}/v1/topics"))
                .send()
                .await
                .unwrap()
                .status(),
            401
        );
    }
    assert_eq!(w.get(format!("{url}/admin/nodes")).send().await.unwrap().status(), 403);
    let writer_id = &writer[4..20];
    let (ok, out, stderr) = cli(&url, &admin_file, &["tokens", "revoke", writer_id]);
    assert!(ok, "{stderr}");
    assert!(out.contains(writer_id));
    assert_eq!(w.get(format!("{url}/v1/topics")).send().await.unwrap().status(), 401);
    // A token that is not an admin's cannot use the CLI's admin commands.
    let reader_file = dir.path().join("reader-token");
    std::fs::write(&reader_file, &reader).unwrap();
    let (ok, _, stderr) = cli(&url, &reader_file, &["tokens", "list"]);
    assert!(!ok && stderr.contains("forbidden"), "{stderr}");
    assert!(!stderr.contains(&reader), "the CLI error shows the secret: {stderr}");

    // Collect everything a node shows and search it.
    let metrics = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("sluice_auth_failures_total"),
        "failed attempts are counted: {metrics}"
    );
    let nodes = admin
        .get(format!("{url}/admin/nodes"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let tokens: Value = admin
        .get(format!("{url}/v1/tokens"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tokens = tokens.to_string();
    let ready = reqwest::get(format!("{url}/ready"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let log = server.log();
    assert!(log.contains("token issued"), "the log is at debug/info level: {log}");
    let secret_parts = |s: &str| vec![s.to_string(), s.get(21..).unwrap_or(s).to_string()];
    for secret in [ADMIN.to_string(), writer.clone(), reader.clone(), forged, wrong_admin] {
        for needle in secret_parts(&secret) {
            for (what, text) in [
                ("log", &log),
                ("/metrics", &metrics),
                ("/admin/nodes", &nodes),
                ("/v1/tokens", &tokens),
                ("/ready", &ready),
                ("tokens list", &listed),
            ] {
                assert!(!text.contains(&needle), "{what} contains a secret");
            }
        }
    }
    // The metadata log on disk holds hashes, never secrets.
    let mut stored = String::new();
    for entry in walk(&dir.path().join("meta")) {
        stored.push_str(&String::from_utf8_lossy(&std::fs::read(entry).unwrap()));
    }
    assert!(
        stored.contains("CreateToken"),
        "the token commands are in the metadata log"
    );
    for secret in [&writer, &reader] {
        assert!(!stored.contains(&secret[21..]), "the metadata log holds a secret");
    }
    assert!(!stored.contains(ADMIN), "the metadata log holds the bootstrap secret");
}

#[test]
fn a_node_without_auth_warns_loudly_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start("n1", dir.path(), free_port(), &[]);
    let log = server.log();
    assert!(log.contains("NO AUTHENTICATION") && log.contains("WARN"), "{log}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
