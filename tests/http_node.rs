//! The HTTP API over a real in-process node: long polls, SSE with
//! Last-Event-ID, and bad input that changes nothing.

mod support;

use futures::StreamExt;
use serde_json::{json, Value};
use sluice::node::Node;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{config, memory_backends};

async fn serve(extra: &[&str]) -> (Arc<Node>, String) {
    let node = Node::start_with(config("n1", extra), memory_backends()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = sluice::http::router(node.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (node, url)
}

async fn create_and_wait(client: &reqwest::Client, url: &str, topic: &str, partitions: u32) {
    let r = client
        .post(format!("{url}/v1/topics"))
        .json(&json!({"name": topic, "partitions": partitions}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    assert!(
        support::http::wait_open(client, url, topic).await,
        "{topic} was not placed"
    );
}

async fn append(client: &reqwest::Client, url: &str, values: &[String]) -> Value {
    let body = json!({"records": values.iter().map(|v| json!({"value": v})).collect::<Vec<_>>()});
    let r = client
        .post(format!("{url}/v1/topics/t/partitions/0/records"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_answers_soon_after_an_append() {
    let (_node, url) = serve(&[]).await;
    let client = reqwest::Client::new();
    create_and_wait(&client, &url, "t", 1).await;
    let mut gaps = Vec::new();
    for i in 0..10u64 {
        let poll = {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let r: Value = client
                    .get(format!(
                        "{url}/v1/topics/t/partitions/0/records?offset={i}&wait_ms=10000"
                    ))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                (Instant::now(), r)
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sent = Instant::now();
        append(&client, &url, &[format!("v{i}")]).await;
        let (answered, r) = poll.await.unwrap();
        assert_eq!(r["records"][0]["offset"], i);
        assert_eq!(r["records"][0]["value"], format!("v{i}"));
        gaps.push(answered.saturating_duration_since(sent));
    }
    gaps.sort();
    eprintln!(
        "long poll answered after the append was sent: median {:?}, max {:?}",
        gaps[5], gaps[9]
    );
    // Correctness, not performance: the poll ended because of the append, not its 10 s timeout.
    assert!(gaps[9] < Duration::from_secs(5));
}

async fn sse_events(client: &reqwest::Client, url: &str, last_event_id: Option<u64>, want: usize) -> Vec<(u64, Value)> {
    let mut req = client.get(format!("{url}/v1/topics/t/partitions/0/subscribe?offset=0"));
    if let Some(id) = last_event_id {
        req = req.header("Last-Event-ID", id.to_string());
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    let mut events = Vec::new();
    while events.len() < want {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let mut id = None;
            let mut data = None;
            let mut kind = None;
            for line in event.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = v.parse::<u64>().ok();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str::<Value>(v).ok();
                } else if let Some(v) = line.strip_prefix("event: ") {
                    kind = Some(v.to_string());
                }
            }
            if kind.as_deref() == Some("record") {
                events.push((id.unwrap(), data.unwrap()));
            }
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_delivers_every_record_with_its_offset_and_resumes_from_last_event_id() {
    let (_node, url) = serve(&[]).await;
    let client = reqwest::Client::new();
    create_and_wait(&client, &url, "t", 1).await;
    let subscriber = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move { sse_events(&client, &url, None, 50).await })
    };
    for batch in 0..10 {
        let values: Vec<String> = (0..5).map(|k| format!("r{}", batch * 5 + k)).collect();
        append(&client, &url, &values).await;
    }
    let events = subscriber.await.unwrap();
    for (i, (id, data)) in events.iter().enumerate() {
        assert_eq!(*id, i as u64, "event id is the offset");
        assert_eq!(data["offset"], i as u64);
        assert_eq!(data["value"], format!("r{i}"));
    }
    let resumed = sse_events(&client, &url, Some(24), 25).await;
    assert_eq!(resumed.first().unwrap().0, 25, "resumes after Last-Event-ID");
    assert_eq!(resumed.last().unwrap().0, 49);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_precise_error_and_appends_nothing() {
    let (_node, url) = serve(&["--max-record-bytes", "1024", "--max-request-bytes", "4096"]).await;
    let client = reqwest::Client::new();
    create_and_wait(&client, &url, "t", 2).await;
    append(&client, &url, &["ok".to_string()]).await;
    let records = format!("{url}/v1/topics/t/records");
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (
            client
                .post(&records)
                .header("content-type", "application/json")
                .body("{not json"),
            400,
            "invalid_json",
        ),
        (
            client.post(&records).json(&json!({"records": [{"value": 5}]})),
            400,
            "invalid_request",
        ),
        (
            client.post(&records).json(&json!({"records": []})),
            400,
            "invalid_request",
        ),
        (
            client
                .post(&records)
                .json(&json!({"records": [{"value": "x", "partition": 9}]})),
            404,
            "partition_not_found",
        ),
        (
            client
                .post(format!("{url}/v1/topics/nope/records"))
                .json(&json!({"records": [{"value": "x"}]})),
            404,
            "topic_not_found",
        ),
        (
            client
                .post(&records)
                .json(&json!({"records": [{"value": "y".repeat(2000)}]})),
            413,
            "record_too_large",
        ),
        (
            client
                .post(&records)
                .json(&json!({"records": (0..10).map(|_| json!({"value": "z".repeat(800)})).collect::<Vec<_>>()})),
            413,
            "request_too_large",
        ),
        (
            client
                .post(&records)
                .query(&[("encoding", "base64")])
                .json(&json!({"records": [{"value": "!!"}]})),
            400,
            "invalid_request",
        ),
        (
            client.get(format!("{url}/v1/topics/t/partitions/0/records?offset=99")),
            416,
            "offset_out_of_range",
        ),
        (
            client.get(format!("{url}/v1/topics/t/partitions/0/records?offset=-7")),
            400,
            "invalid_offset",
        ),
        (
            client
                .post(format!("{url}/v1/topics"))
                .json(&json!({"name": "bad/name"})),
            400,
            "invalid_topic_name",
        ),
        (
            client
                .post(format!("{url}/v1/topics"))
                .json(&json!({"name": "u", "partitions": 0})),
            400,
            "invalid_partition_count",
        ),
        (
            client.post(format!("{url}/v1/topics")).json(&json!({"name": "t"})),
            409,
            "topic_exists",
        ),
    ];
    for (req, status, code) in cases {
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "expected {code}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    for p in 0..2 {
        let r: Value = client
            .get(format!("{url}/v1/topics/t/partitions/{p}/records"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            r["high_watermark"],
            if p == 0 { 1 } else { 0 },
            "nothing was appended by a bad request"
        );
    }
    assert_eq!(client.get(format!("{url}/health")).send().await.unwrap().status(), 200);
    assert_eq!(client.get(format!("{url}/ready")).send().await.unwrap().status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_on_a_stream_not_yet_placed_waits_instead_of_spinning() {
    let (node, url) = serve(&[]).await;
    let client = reqwest::Client::new();
    // Create through the engine, then poll at once, before placement.
    use sluice::api::Topics as _;
    node.create_topic("t", 1, Default::default()).await.unwrap();
    let started = Instant::now();
    let r: Value = client
        .get(format!("{url}/v1/topics/t/partitions/0/records?offset=0&wait_ms=600"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["records"].as_array().unwrap().len(), 0);
    assert!(
        started.elapsed() >= Duration::from_millis(550),
        "the poll returned early: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_read_by_time_starts_at_the_first_record_at_or_after_it() {
    let (_node, url) = serve(&[]).await;
    let client = reqwest::Client::new();
    create_and_wait(&client, &url, "t", 1).await;
    let records: Vec<Value> = [1000, 2000, 3000]
        .iter()
        .map(|ts| json!({"value": format!("at {ts}"), "timestamp": ts}))
        .collect();
    let body = json!({ "records": records });
    let r = client
        .post(format!("{url}/v1/topics/t/partitions/0/records"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let read = |q: &'static str| {
        let client = client.clone();
        let url = url.clone();
        async move {
            let r = client
                .get(format!("{url}/v1/topics/t/partitions/0/records?{q}"))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    for (q, first) in [
        ("timestamp=1500", Some(1)),
        ("timestamp=1000", Some(0)),
        ("timestamp=0", Some(0)),
        ("timestamp=3000", Some(2)),
    ] {
        let (status, body) = read(q).await;
        assert_eq!(status, 200, "{q}: {body}");
        assert_eq!(body["records"][0]["offset"].as_u64(), first, "{q}: {body}");
    }
    let (status, body) = read("timestamp=3001").await;
    assert_eq!((status, body["records"].as_array().unwrap().len()), (200, 0), "{body}");
    assert_eq!(body["next_offset"], 3, "past the last record: at the end");
    let (status, body) = read("timestamp=1500&offset=0").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_request")),
        "{body}"
    );
    let (status, body) = read("timestamp=soon").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_request")),
        "{body}"
    );
}

#[tokio::test]
async fn a_group_shows_its_committed_offsets_and_their_lag() {
    use sluice::api::{GroupOffset, GroupOffsets};
    let (node, url) = serve(&[]).await;
    let client = reqwest::Client::new();
    create_and_wait(&client, &url, "t", 1).await;
    append(&client, &url, &(0..5).map(|i| format!("v{i}")).collect::<Vec<_>>()).await;
    let committed = GroupOffset {
        topic: "t".into(),
        partition: 0,
        offset: 3,
        metadata: None,
    };
    node.commit_offsets("billing", vec![committed]).await.unwrap();

    let list: Value = client
        .get(format!("{url}/v1/groups"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        list,
        json!({"groups": [{"group": "billing", "kind": "offsets", "state": "Empty", "members": 0}]})
    );
    let g: Value = client
        .get(format!("{url}/v1/groups/billing"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        g["offsets"],
        json!([{"topic": "t", "partition": 0, "committed": 3, "end_offset": 5, "lag": 2}]),
        "{g}"
    );
    assert_eq!(g["members"], json!([]));
    let r = client.get(format!("{url}/v1/groups/nobody")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "group_not_found");
}

#[tokio::test]
async fn a_nodes_metrics_are_served_through_any_node_and_an_unknown_node_is_not_found() {
    let (_node, url) = serve(&[]).await;
    let client = reqwest::Client::new();
    let r = client
        .get(format!("{url}/admin/nodes/n1/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("sluice_"), "its own metrics");
    let r = client
        .get(format!("{url}/admin/nodes/n9/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "not_found");
}
