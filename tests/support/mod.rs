//! Helpers shared by the integration tests.
#![allow(dead_code)]

use sluice::config::{Config, ServeArgs};
use sluice::meta::memory_log::MemoryLog;
use sluice::node::Backends;
use sluice::store::MemoryStore;
use std::sync::Arc;
use std::time::Duration;

/// A node configuration with fast clocks, for in-process clusters.
pub fn config(node_id: &str, extra: &[&str]) -> Config {
    let mut args = vec![
        "--node-id",
        node_id,
        "--heartbeat-interval-sec",
        "1",
        "--node-timeout-sec",
        "4",
        "--shutdown-drain-sec",
        "0",
        "--meta-poll-ms",
        "20",
        "--http-addr",
        "127.0.0.1:0",
        "--kafka-addr",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    ServeArgs::parse_from(args).unwrap().validate().unwrap()
}

/// Shared in-memory stores: every node of a test cluster sees the same ones.
pub fn memory_backends() -> Backends {
    Backends {
        data: Arc::new(MemoryStore::new()),
        wal: Arc::new(MemoryStore::new()),
        log: Arc::new(MemoryLog::new()),
    }
}

/// Poll `f` until it is true or `timeout` passes.
pub async fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f()
}

pub mod http;
pub mod process;
