//! HTTP helpers for tests against real nodes.
#![allow(dead_code)]

use serde_json::Value;
use std::time::Duration;

/// A client that sends `Authorization: Bearer <token>` on every request.
pub fn bearer_client(token: &str) -> reqwest::Client {
    let mut h = reqwest::header::HeaderMap::new();
    h.insert(
        reqwest::header::AUTHORIZATION,
        reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    reqwest::Client::builder().default_headers(h).build().unwrap()
}

/// `POST /v1/tokens` with `body` through `admin`: (id, secret). Fails the
/// test unless the token is issued.
pub async fn issue_token(admin: &reqwest::Client, url: &str, body: Value) -> (String, String) {
    let r = admin.post(format!("{url}/v1/tokens")).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let v: Value = r.json().await.unwrap();
    (v["id"].as_str().unwrap().into(), v["token"].as_str().unwrap().into())
}

/// Create `name` with `partitions` and wait until every partition is open.
pub async fn create_topic(client: &reqwest::Client, url: &str, name: &str, partitions: u32) {
    let r = client
        .post(format!("{url}/v1/topics"))
        .json(&serde_json::json!({"name": name, "partitions": partitions}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    assert!(wait_open(client, url, name).await, "{name} was not placed");
}

/// The node that has partition `p` of `topic` open, as the node at `url`
/// sees it (`None` while the partition is not open anywhere).
pub async fn owner_of(client: &reqwest::Client, url: &str, topic: &str, p: u32) -> Option<String> {
    let d: Value = client
        .get(format!("{url}/v1/topics/{topic}"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    let part = &d["partition_info"][p as usize];
    (part["state"] == "open").then(|| part["owner"].as_str().map(str::to_string))?
}

/// A partition of `topic` that `node` owns, as the node at `url` sees it.
pub async fn partition_owned_by(client: &reqwest::Client, url: &str, topic: &str, node: &str) -> Option<u32> {
    let d: Value = client
        .get(format!("{url}/v1/topics/{topic}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    d["partition_info"]
        .as_array()?
        .iter()
        .find(|p| p["owner"] == node)
        .and_then(|p| p["partition"].as_u64())
        .map(|p| p as u32)
}

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

/// Every record of one partition, from offset 0 to the end: (offset, value).
pub async fn read_all(client: &reqwest::Client, url: &str, topic: &str, p: u64) -> Vec<(u64, String)> {
    read_all_with(client, url, topic, p, "").await
}

/// [`read_all`] with more query parameters (`&name=value...`); a value
/// that is not a JSON string reads as `<not text>`.
pub async fn read_all_with(
    client: &reqwest::Client,
    url: &str,
    topic: &str,
    p: u64,
    query: &str,
) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut offset = 0;
    let mut refusals = 0;
    loop {
        let r: Value = client
            .get(format!(
                "{url}/v1/topics/{topic}/partitions/{p}/records?offset={offset}&limit=1000{query}"
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        // The view can say "open here" a moment before the node has opened
        // the stream: a retryable refusal, which clients retry.
        if r["error"]["retryable"] == true && refusals < 100 {
            refusals += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let records = r["records"].as_array().unwrap_or_else(|| panic!("read failed: {r}"));
        let next = r["next_offset"].as_u64().unwrap();
        // A committed read may move on past markers and aborted records
        // with none to show.
        if records.is_empty() && next <= offset {
            return out;
        }
        for rec in records {
            out.push((
                rec["offset"].as_u64().unwrap(),
                rec["value"].as_str().unwrap_or("<not text>").to_string(),
            ));
        }
        offset = next;
    }
}

/// The values of partition 0 of `topic`, in offset order.
pub async fn values(client: &reqwest::Client, url: &str, topic: &str) -> Vec<String> {
    read_all(client, url, topic, 0)
        .await
        .into_iter()
        .map(|(_, v)| v)
        .collect()
}
