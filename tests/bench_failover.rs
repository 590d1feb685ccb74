//! `sluice bench failover` end to end, in a small configuration: one round of
//! kill -9 and of SIGTERM on three child processes with a 2 s node timeout,
//! and WAL recovery of a few MiB. Checks the JSON is sane and nothing
//! acknowledged was lost; no timing assertions (this is a benchmark).

use serde_json::Value;
use std::process::Command;

fn ms(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn failover_bench_reports_sane_times_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["bench", "failover", "--json", "--rounds", "1", "--rate", "50"])
        .args(["--recovery-mib", "4", "--recovery-batch", "200", "--give-up-sec", "60"])
        .arg("--data-dir")
        .arg(dir.path())
        // Pass-through serve flags, both ways.
        .arg("--serve-arg=--node-timeout-sec=2")
        .args(["--", "--lease-timeout-sec", "2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));

    let s = &r["settings"];
    assert_eq!(s["node_timeout_sec"], 2, "{r}");
    assert_eq!(s["lease_timeout_sec"], 2, "{r}");
    assert_eq!(s["heartbeat_interval_sec"], 1, "{r}");

    for event in ["kill9", "sigterm"] {
        let e = &r[event];
        assert_eq!(e["gave_up"], 0, "{event}: {r}");
        let round = &e["rounds"][0];
        let target = ms(&round["target_ms"]);
        let all = ms(&round["all_partitions_ms"]);
        assert!(target > 0.0 && all >= target, "{event}: {round}");
        assert!(!round["partitions_ms"].as_object().unwrap().is_empty(), "{round}");
        assert_eq!(ms(&e["target_ms"]["p50_ms"]), target, "{e}");
    }
    assert_eq!(
        r["sigterm"]["rounds"][0]["exit_code"], 0,
        "a clean shutdown exits 0: {r}"
    );

    let load = &r["load"];
    assert!(load["acked"].as_u64().unwrap() > 0, "{load}");
    assert_eq!(load["lost"], 0, "{load}");
    assert_eq!(load["offsets_dense"], true, "{load}");

    let v = &r["recovery"];
    let acked = v["records_acked"].as_u64().unwrap();
    assert!(v["bytes_acked"].as_u64().unwrap() >= 4 << 20, "{v}");
    assert_eq!(v["flushed_bytes_before_kill"], 0.0, "the data was only in the WAL: {v}");
    assert!(ms(&v["takeover_ms"]) > 0.0, "{v}");
    assert!(ms(&v["first_append_ms"]) > 0.0 && ms(&v["read_end_ms"]) > 0.0, "{v}");
    assert!(ms(&v["takeover_sec_per_gib"]) > 0.0, "{v}");
    assert_eq!(
        v["takeover_records"].as_u64(),
        Some(acked),
        "every record was replayed: {v}"
    );
    assert_eq!(v["lost"], 0, "{v}");
    assert_eq!(v["offsets_dense"], true, "{v}");
    assert_eq!(v["appends_continue_at_end"], true, "{v}");
    // The acknowledged records plus the probe append after recovery.
    assert_eq!(v["records_read"].as_u64(), Some(acked + 1), "{v}");

    // The run's directory is removed after a successful run.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
