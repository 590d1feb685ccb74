//! HTTP helpers for tests against real nodes.
#![allow(dead_code)]

use serde_json::Value;
use std::time::Duration;

/// Wait until every partition of `topic` is open on some node.
pub async fn wait_open(client: &reqwest::Client, url: &str, topic: &str) -> bool {
    for _ in 0..500 {
        if let Ok(r) = client.get(format!("{url}/v1/topics/{topic}")).send().await {
            if let Ok(v) = r.json::<Value>().await {
                if let Some(parts) = v["partition_info"].as_array() {
                    if !parts.is_empty() && parts.iter().all(|p| p["state"] == "open") {
                        return true;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
