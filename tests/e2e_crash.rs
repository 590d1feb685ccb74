//! End to end on a real process: concurrent HTTP clients append to one node,
//! the node is killed with SIGKILL mid-stream, restarted with the same id, and
//! every acknowledged record is found at its acknowledged offset.

mod support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::process::{free_port, Server};

const PARTITIONS: u64 = 4;
const CLIENTS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_record_survives_sigkill_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    // Flushes every second, so recovery needs both data objects and the WAL.
    let mut node = Server::start("n1", dir.path(), free_port(), &["--flush-interval-sec", "1"]);
    let client = reqwest::Client::new();
    let created = client
        .post(format!("{}/v1/topics", node.url))
        .json(&json!({"name": "orders", "partitions": PARTITIONS}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    assert!(support::http::wait_open(&client, &node.url, "orders").await);

    let acked: Arc<Mutex<BTreeMap<(u64, u64), String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let (client, url, acked, stop) = (client.clone(), node.url.clone(), acked.clone(), stop.clone());
        clients.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let p = (c as u64 + i) % PARTITIONS;
                let values: Vec<String> = (0..3).map(|k| format!("c{c}-r{i}-{k}")).collect();
                let body =
                    json!({"records": values.iter().map(|v| json!({"value": v, "partition": p})).collect::<Vec<_>>()});
                i += 1;
                let Ok(resp) = client
                    .post(format!("{url}/v1/topics/orders/records"))
                    .json(&body)
                    .send()
                    .await
                else {
                    continue; // the node is gone: not acknowledged
                };
                if resp.status() != 200 {
                    continue;
                }
                let Ok(r) = resp.json::<Value>().await else { continue };
                let mut acked = acked.lock().unwrap();
                for (v, o) in values.iter().zip(r["offsets"].as_array().unwrap()) {
                    let key = (o["partition"].as_u64().unwrap(), o["offset"].as_u64().unwrap());
                    assert!(
                        acked.insert(key, v.clone()).is_none(),
                        "offset {key:?} acknowledged twice"
                    );
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    node.kill9();
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 100,
        "the clients got only {} acks before the kill",
        acked.len()
    );

    let node = node.restart();
    let ready: Value = client
        .get(format!("{}/ready", node.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["epoch"], 2, "{ready}");
    // Wait until the streams are recovered and placed again.
    assert!(
        support::http::wait_open(&client, &node.url, "orders").await,
        "not recovered; log:\n{}",
        node.log()
    );
    let mut found: BTreeMap<(u64, u64), String> = BTreeMap::new();
    for p in 0..PARTITIONS {
        let records = support::http::read_all(&client, &node.url, "orders", p).await;
        for (i, (offset, _)) in records.iter().enumerate() {
            assert_eq!(*offset, i as u64, "offsets of partition {p} are dense from 0");
        }
        found.extend(records.into_iter().map(|(o, v)| ((p, o), v)));
    }
    let mut missing = 0;
    for (key, value) in &acked {
        match found.get(key) {
            Some(v) if v == value => {}
            other => {
                missing += 1;
                eprintln!("acknowledged {key:?} = {value} but found {other:?}");
            }
        }
    }
    assert_eq!(
        missing,
        0,
        "{missing} of {} acknowledged records lost or changed; log:\n{}",
        acked.len(),
        node.log()
    );
    eprintln!(
        "{} acknowledged records all found after SIGKILL; {} records in total",
        acked.len(),
        found.len()
    );
}
