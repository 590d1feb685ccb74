//! Helpers shared by the integration tests.
#![allow(dead_code)]

use bytes::Bytes;
use sluice::api::{ReadFrom, ReadRequest};
use sluice::batch::Record;
use sluice::config::{Config, ServeArgs};
use sluice::ids::Offset;
use sluice::meta::memory_log::MemoryLog;
use sluice::meta::StreamState;
use sluice::node::Backends;
use sluice::node::Node;
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

/// A record with `value`, no key and timestamp 1.
pub fn rec(value: impl AsRef<[u8]>) -> Record {
    rec_at(value, 1)
}

/// A record with `value`, no key, stamped `timestamp_ms`.
pub fn rec_at(value: impl AsRef<[u8]>, timestamp_ms: i64) -> Record {
    Record {
        timestamp_ms,
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_ref())),
        headers: vec![],
    }
}

/// A read of everything from `offset` on, without waiting.
pub fn read_from(offset: u64) -> ReadRequest {
    ReadRequest {
        from: ReadFrom::At(Offset(offset)),
        limit: 10_000,
        max_bytes: usize::MAX,
        wait: Duration::ZERO,
        committed: false,
        consistency: Default::default(),
    }
}

/// Whether every partition of `topic` becomes open in `node`'s view within 20 s.
pub async fn all_placed(node: &Node, topic: &str) -> bool {
    eventually(Duration::from_secs(20), || {
        let v = node.meta.view();
        let t = &v.topics[topic];
        let open = v
            .topic_streams(t)
            .all(|(_, r)| matches!(r.state, StreamState::Open { .. }));
        open
    })
    .await
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

pub mod history;
pub mod http;
pub mod http_storm;
pub mod kafka;
pub mod linearizable;
pub mod netns;
pub mod process;
pub mod proxy;
pub mod rss;

/// A real service's endpoint from the environment. Tests that need it skip
/// when it is unset — and fail when `CI` is set, so CI cannot pass by
/// silently skipping them.
pub fn service(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ if std::env::var_os("CI").is_some() => {
            panic!("{var} is not set but CI is: start the services with scripts/services.sh up")
        }
        _ => {
            eprintln!("skipping: {var} is not set (scripts/services.sh up starts the test services)");
            None
        }
    }
}

/// A unique name for one test run's objects or tables.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}{:08x}", rand::random::<u32>())
}
