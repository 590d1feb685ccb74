//! Two real nodes on an S3-compatible server and DynamoDB Local: produce,
//! `kill -9` an owner, and the survivor takes over its WAL from the bucket
//! and serves every acknowledged record. The bucket holds `wal/` and `data/`
//! objects under the run's prefix only; the table holds the log.

mod support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::process::{free_port, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_survivor_recovers_a_killed_owners_wal_from_s3() {
    let Some(s3) = support::service("SLUICE_TEST_S3_ENDPOINT") else {
        return;
    };
    let Some(ddb) = support::service("SLUICE_TEST_DYNAMODB_ENDPOINT") else {
        return;
    };
    let bucket = std::env::var("SLUICE_TEST_S3_BUCKET").unwrap_or_else(|_| "sluice-test".into());
    let prefix = support::unique("e2e-");
    let table = support::unique("sluice-e2e-");
    let store = format!("s3://{bucket}/{prefix}");
    let metadata = format!("dynamodb://{table}");
    let flags = [
        "--object-store",
        &store,
        "--metadata",
        &metadata,
        "--s3-endpoint",
        &s3,
        "--s3-region",
        "us-east-1",
        "--dynamodb-endpoint",
        &ddb,
        "--flush-interval-sec",
        "2",
        // One sequential client must get many appends acknowledged in 4 s:
        // one PUT per append, as without a budget. The `s3://` default
        // budget (1 PUT a second) runs in the chaos test's S3 profile.
        "--wal-put-rate",
        "off",
    ];
    let init = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("init")
        .args(["--node-id", "init"])
        .args(flags)
        .output()
        .unwrap();
    assert!(init.status.success(), "init: {}", String::from_utf8_lossy(&init.stderr));
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = [
        Server::start("a", dir.path(), free_port(), &flags),
        Server::start("b", dir.path(), free_port(), &flags),
    ];
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{}/v1/topics", nodes[0].url))
        .json(&json!({"name": "orders", "partitions": 4}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert!(support::http::wait_open(&client, &nodes[0].url, "orders").await);

    let mut acked = BTreeMap::new();
    let started = Instant::now();
    let mut i = 0u64;
    while started.elapsed() < Duration::from_secs(4) {
        let p = i % 4;
        let url = &nodes[(i % 2) as usize].url;
        let value = format!("v{i}");
        i += 1;
        let r = client
            .post(format!("{url}/v1/topics/orders/partitions/{p}/records"))
            .json(&json!({"records": [{"value": value}]}))
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            let body: Value = r.json().await.unwrap();
            acked.insert((p, body["base_offset"].as_u64().unwrap()), value);
        }
    }
    assert!(acked.len() > 50, "only {} acks", acked.len());
    let d: Value = client
        .get(format!("{}/v1/topics/orders", nodes[0].url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let victim_id = d["partition_info"][0]["owner"].as_str().unwrap().to_string();
    let victim = nodes.iter().position(|n| n.node_id == victim_id).unwrap();
    let survivor = nodes[1 - victim].url.clone();
    let killed = Instant::now();
    nodes[victim].kill9();
    assert!(support::http::wait_open(&client, &survivor, "orders").await);
    loop {
        let r = client
            .post(format!("{survivor}/v1/topics/orders/partitions/0/records"))
            .json(&json!({"records": [{"value": "probe"}]}))
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            break;
        }
        assert!(killed.elapsed() < Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "S3 + DynamoDB: kill -9 to first append on the survivor: {:?}; {} acked records",
        killed.elapsed(),
        acked.len()
    );
    if let Some(keep) = std::env::var_os("SLUICE_E2E_LOGS") {
        for n in &nodes {
            let _ = std::fs::write(std::path::Path::new(&keep).join(format!("{}.log", n.node_id)), n.log());
        }
    }
    for ((p, offset), value) in &acked {
        let r: Value = client
            .get(format!(
                "{survivor}/v1/topics/orders/partitions/{p}/records?offset={offset}&limit=1"
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            r["records"][0]["value"].as_str(),
            Some(value.as_str()),
            "{p}@{offset}: {r}"
        );
    }
    // Everything lives under the run's prefix: wal/, data/ and meta/ (snapshots).
    let options = sluice::store::s3::S3Options {
        endpoint: Some(s3.clone()),
        region: Some("us-east-1".into()),
        force_path_style: true,
    };
    let root = sluice::store::open_url(&format!("s3://{bucket}"), &options)
        .await
        .unwrap();
    let ours = root.list(&prefix).await.unwrap();
    assert!(
        ours.iter().any(|o| o.key.starts_with(&format!("{prefix}/wal/"))),
        "no WAL objects"
    );
    assert!(
        ours.iter().any(|o| o.key.starts_with(&format!("{prefix}/data/"))),
        "no data objects"
    );
    // Nothing outside the node's own prefixes (`cluster/` holds the peer key).
    let stray: Vec<&str> = ours
        .iter()
        .map(|o| o.key.as_str())
        .filter(|k| {
            !["wal/", "data/", "meta/", "cluster/"]
                .iter()
                .any(|d| k.starts_with(&format!("{prefix}/{d}")))
        })
        .collect();
    assert!(stray.is_empty(), "objects outside the known prefixes: {stray:?}");
}
