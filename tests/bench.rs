//! `sluice bench` against an in-process node with HTTP and Kafka listeners:
//! the real binary runs each load for one second with `--json`, and the
//! report must be sane — records moved, no errors, the floor, the server
//! and WAL figures present. No assertion is about how fast anything was.

mod support;

use serde_json::Value;
use sluice::node::Node;
use std::sync::Arc;
use support::{config, memory_backends};

struct One {
    _node: Arc<Node>,
    url: String,
    kafka: String,
    _stop: tokio::sync::watch::Sender<bool>,
}

async fn start() -> One {
    let kafka_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let kafka = kafka_listener.local_addr().unwrap().to_string();
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_addr = http.local_addr().unwrap().to_string();
    let flags = ["--advertised-kafka-addr", &kafka, "--advertised-http-addr", &http_addr];
    let node = Node::start_with(config("b1", &flags), memory_backends()).await.unwrap();
    let app = sluice::http::router(node.clone());
    tokio::spawn(async move { axum::serve(http, app).await.unwrap() });
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let opts = sluice::kafka::Options::from_config(&node.config);
    tokio::spawn(sluice::kafka::serve(node.clone(), kafka_listener, opts, stop_rx));
    One {
        _node: node,
        url: format!("http://{http_addr}"),
        kafka,
        _stop: stop,
    }
}

/// Runs `sluice bench <args> --json` against `node` and returns the report.
async fn bench(node: &One, args: &[&str]) -> Value {
    let pid = std::process::id().to_string();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("bench")
        .args(args)
        .args([
            "--url",
            &node.url,
            "--bootstrap",
            &node.kafka,
            "--duration-sec",
            "1",
            "--json",
        ])
        // The node runs in this test process.
        .args(["--server-pid", &pid])
        .env_remove("SLUICE_S3_ENDPOINT")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench {args:?} failed: {stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("bench {args:?} printed no JSON report ({e}): {stdout}\n{stderr}"));
    assert!(stderr.contains("records/s"), "a progress line on stderr: {stderr}");
    report
}

/// What every report must show: records moved, no errors, a throughput,
/// ordered percentiles.
fn assert_sane(r: &Value) {
    assert!(r["records"].as_u64().unwrap() > 0, "no records: {r}");
    assert_eq!(r["errors"], 0, "errors: {r}");
    assert!(r["records_per_sec"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["mb_per_sec"].as_f64().unwrap() > 0.0, "{r}");
    let l = &r["latency_ms"];
    let p = |k: &str| l[k].as_f64().unwrap();
    assert!(p("p50") > 0.0, "{r}");
    assert!(
        p("p50") <= p("p90") && p("p90") <= p("p99") && p("p99") <= p("p999") && p("p999") <= p("max"),
        "{r}"
    );
    let server = &r["server"];
    assert!(server["rss_peak_mib"].as_f64().unwrap() > 0.0, "{r}");
    assert!(server["cpu_sec"].as_f64().unwrap() >= 0.0, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_in_kafka_and_http_mode_reports_acked_records_and_the_floor() {
    let node = start().await;
    let floor = ["--floor-store", "memory://", "--floor-count", "20"];
    for mode in ["kafka", "http"] {
        let topic = format!("p-{mode}");
        let mut args = vec![
            "produce",
            "--mode",
            mode,
            "--topic",
            &topic,
            "--partitions",
            "2",
            "--producers",
            "2",
            "--record-bytes",
            "200",
            "--batch",
            "10",
        ];
        args.extend_from_slice(&floor);
        let r = bench(&node, &args).await;
        assert_sane(&r);
        assert_eq!(
            (r["command"].as_str(), r["mode"].as_str()),
            (Some("produce"), Some(mode))
        );
        assert_eq!(r["latency_kind"], "ack");
        assert_eq!(r["partitions"], 2);
        assert_eq!(r["records"].as_u64().unwrap() % 10, 0, "whole batches of 10: {r}");
        assert_eq!(r["bytes"].as_u64().unwrap(), r["records"].as_u64().unwrap() * 200);
        assert!(r["floor"]["latency_ms"]["p50"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["vs_floor"]["p50"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["wal"]["puts"].as_u64().unwrap() > 0, "the node's WAL PUTs: {r}");
        if mode == "kafka" {
            assert_eq!((r["acks"].as_i64(), r["max_in_flight"].as_u64()), (Some(-1), Some(5)));
        } else {
            assert!(r["acks"].is_null(), "{r}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_produce_honours_a_rate_a_linger_and_acks_0_and_1() {
    let node = start().await;
    let r = bench(
        &node,
        &[
            "produce",
            "--mode",
            "kafka",
            "--topic",
            "rate",
            "--rate",
            "400",
            "--linger-ms",
            "5",
            "--batch",
            "50",
        ],
    )
    .await;
    assert_sane(&r);
    assert!(r["records"].as_u64().unwrap() <= 400, "never more than offered: {r}");
    assert!(r["requests"].as_u64().unwrap() <= r["records"].as_u64().unwrap());
    for acks in ["1", "0"] {
        let r = bench(
            &node,
            &["produce", "--mode", "kafka", "--topic", "acks", "--acks", acks],
        )
        .await;
        assert_sane(&r);
        assert_eq!(r["latency_kind"], if acks == "0" { "write" } else { "ack" });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_and_consume_in_both_modes_receive_what_was_produced() {
    let node = start().await;
    for mode in ["kafka", "http"] {
        let topic = format!("e-{mode}");
        let common = [
            "--mode",
            mode,
            "--topic",
            &topic,
            "--partitions",
            "2",
            "--record-bytes",
            "64",
        ];
        let mut e2e = vec!["e2e", "--producers", "2", "--rate", "500"];
        e2e.extend_from_slice(&common);
        let r = bench(&node, &e2e).await;
        assert_sane(&r);
        assert_eq!(r["latency_kind"], "e2e");
        assert!(r["ack_latency_ms"]["p50"].as_f64().unwrap() > 0.0, "{r}");

        let mut consume = vec!["consume"];
        consume.extend_from_slice(&common);
        let c = bench(&node, &consume).await;
        assert_sane(&c);
        assert_eq!(c["latency_kind"], "fetch");
        assert!(
            c["records"].as_u64().unwrap() >= r["records"].as_u64().unwrap(),
            "consume reads at least what e2e received: {c} after {r}"
        );
    }
}
