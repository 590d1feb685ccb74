//! `--auth on` over HTTP, against real in-process nodes: every way a
//! request can lack the right credentials, token administration, revocation
//! seen by another node, and forwarding that keeps the caller's identity.
//! (A real `sluice serve` process whose log, metrics and admin output are
//! searched for secrets is in `auth_process.rs`.)

mod support;

use reqwest::header::AUTHORIZATION;
use serde_json::{json, Value};
use sluice::node::Node;
use std::sync::Arc;
use std::time::Duration;
use support::http::{bearer_client, create_topic, issue_token, partition_owned_by};
use support::{config, memory_backends};

const ADMIN: &str = "test-bootstrap-admin-secret-0123456789";

fn admin_file() -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), format!("{ADMIN}\n")).unwrap();
    f
}

async fn start(id: &str, backends: sluice::node::Backends, admin: &tempfile::NamedTempFile) -> (Arc<Node>, String) {
    let path = admin.path().to_str().unwrap().to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let url = format!("http://{addr}");
    let flags = [
        "--auth",
        "on",
        "--admin-token-file",
        &path,
        "--advertised-http-addr",
        &addr,
    ];
    let node = Node::start_with(config(id, &flags), backends).await.unwrap();
    let app = sluice::http::router(node.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (node, url)
}

async fn append(c: &reqwest::Client, url: &str, topic: &str) -> reqwest::Response {
    c.post(format!("{url}/v1/topics/{topic}/partitions/0/records"))
        .json(&json!({"records": [{"value": "v"}]}))
        .send()
        .await
        .unwrap()
}

async fn code_of(r: reqwest::Response) -> (u16, String) {
    let status = r.status().as_u16();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    (status, v["error"]["code"].as_str().unwrap_or_default().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_valid_token_get_401_with_a_bearer_challenge() {
    let file = admin_file();
    let (_node, url) = start("n1", memory_backends(), &file).await;
    let anon = reqwest::Client::new();

    let r = anon.get(format!("{url}/v1/topics")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], r#"Bearer realm="sluice""#);
    assert_eq!(code_of(r).await, (401, "unauthenticated".into()));

    for bad in [
        "slc_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "not-a-token",
    ] {
        let r = bearer_client(bad).get(format!("{url}/v1/topics")).send().await.unwrap();
        assert_eq!(r.status(), 401, "{bad}");
        assert_eq!(
            r.headers()["www-authenticate"],
            r#"Bearer realm="sluice", error="invalid_token""#
        );
        let body = r.text().await.unwrap();
        assert!(!body.contains(bad), "the error echoes the presented secret: {body}");
    }
    let r = anon
        .get(format!("{url}/v1/topics"))
        .header(AUTHORIZATION, format!("Basic {ADMIN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(code_of(r).await, (401, "unauthenticated".into()));

    // Probes stay open; a write without a token changes nothing.
    for path in ["/health", "/ready", "/metrics", "/openapi.json"] {
        assert_eq!(
            anon.get(format!("{url}{path}")).send().await.unwrap().status(),
            200,
            "{path}"
        );
    }
    let r = anon
        .post(format!("{url}/v1/topics"))
        .json(&json!({"name": "sneaky"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let admin = bearer_client(ADMIN);
    let topics: Value = admin
        .get(format!("{url}/v1/topics"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(topics["topics"], json!([]), "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_limit_tokens_to_their_topics_and_ops() {
    let file = admin_file();
    let (_node, url) = start("n1", memory_backends(), &file).await;
    let admin = bearer_client(ADMIN);
    create_topic(&admin, &url, "orders", 1).await;
    create_topic(&admin, &url, "payments", 1).await;
    let (_, writer) = issue_token(
        &admin,
        &url,
        json!({"name": "orders-writer", "scopes": [{"topics": "ord*", "ops": ["write"]}]}),
    )
    .await;
    let w = bearer_client(&writer);

    assert_eq!(append(&w, &url, "orders").await.status(), 200);
    assert_eq!(
        code_of(append(&w, &url, "payments").await).await,
        (403, "forbidden".into())
    );
    // Write does not imply read.
    let r = w
        .get(format!("{url}/v1/topics/orders/partitions/0/records"))
        .send()
        .await
        .unwrap();
    assert_eq!(code_of(r).await, (403, "forbidden".into()));
    let r = w
        .get(format!("{url}/v1/topics/orders/partitions/0/subscribe"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // It sees only its topics.
    let topics: Value = w
        .get(format!("{url}/v1/topics"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = topics["topics"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{topics}");
    assert_eq!(
        (&listed[0]["name"], &listed[0]["partitions"]),
        (&json!("orders"), &json!(1))
    );
    assert_eq!(
        listed[0]["topic_id"].as_str().map(str::len),
        Some(22),
        "the Kafka topic id"
    );
    assert_eq!(
        w.get(format!("{url}/v1/topics/orders")).send().await.unwrap().status(),
        200
    );
    assert_eq!(
        w.get(format!("{url}/v1/topics/payments"))
            .send()
            .await
            .unwrap()
            .status(),
        403
    );
    // No admin: no topic creation or deletion, no cluster or token admin.
    let r = w
        .post(format!("{url}/v1/topics"))
        .json(&json!({"name": "orders2"}))
        .send()
        .await
        .unwrap();
    assert_eq!(code_of(r).await, (403, "forbidden".into()));
    assert_eq!(
        w.delete(format!("{url}/v1/topics/orders"))
            .send()
            .await
            .unwrap()
            .status(),
        403
    );
    for path in ["/admin/nodes", "/v1/tokens"] {
        assert_eq!(
            w.get(format!("{url}{path}")).send().await.unwrap().status(),
            403,
            "{path}"
        );
    }
    let r = w
        .post(format!("{url}/v1/tokens"))
        .json(&json!({"name": "escalate", "scopes": [{"topics": "*", "ops": ["admin"]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "a token cannot mint a broader one");
    assert_eq!(
        admin
            .get(format!("{url}/v1/topics/orders2"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );

    // Admin on a topic glob manages those topics but is not cluster admin.
    let (_, topic_admin) = issue_token(
        &admin,
        &url,
        json!({"name": "orders-admin", "scopes": [{"topics": "orders*", "ops": ["admin"]}]}),
    )
    .await;
    let ta = bearer_client(&topic_admin);
    let r = ta
        .post(format!("{url}/v1/topics"))
        .json(&json!({"name": "orders-eu"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(ta.get(format!("{url}/admin/nodes")).send().await.unwrap().status(), 403);
    assert_eq!(
        admin.get(format!("{url}/admin/nodes")).send().await.unwrap().status(),
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_issued_listed_without_secrets_expire_and_are_validated() {
    let file = admin_file();
    let (_node, url) = start("n1", memory_backends(), &file).await;
    let admin = bearer_client(ADMIN);
    create_topic(&admin, &url, "t", 1).await;
    let (id, secret) = issue_token(
        &admin,
        &url,
        json!({"name": "short", "scopes": [{"topics": "t", "ops": ["read", "write"]}], "expires_in_sec": 1}),
    )
    .await;
    let listed = admin
        .get(format!("{url}/v1/tokens"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(listed.contains(&id) && listed.contains("\"short\""), "{listed}");
    assert!(!listed.contains(&secret[21..]), "the list shows a secret: {listed}");
    assert!(!listed.contains("hash"), "the list shows a hash: {listed}");

    // Valid at first, 401 once expired.
    let c = bearer_client(&secret);
    assert_eq!(append(&c, &url, "t").await.status(), 200);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        code_of(append(&c, &url, "t").await).await,
        (401, "unauthenticated".into())
    );
    let listed: Value = admin
        .get(format!("{url}/v1/tokens"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["tokens"][0]["expired"], true);

    // Bad requests are refused with a precise code and issue nothing.
    for body in [
        json!({"name": "x", "scopes": [{"topics": "a/b", "ops": ["read"]}]}),
        json!({"name": "x", "scopes": [{"topics": "t", "ops": []}]}),
        json!({"name": "x", "scopes": []}),
        json!({"name": "", "scopes": [{"topics": "t", "ops": ["read"]}]}),
        json!({"name": "x", "scopes": [{"topics": "t", "ops": ["fly"]}]}),
        json!({"name": "x", "scopes": [{"topics": "t", "ops": ["read"]}], "expires_in_sec": 0}),
        json!({"name": "x", "scopes": [{"topics": "t", "ops": ["read"]}], "extra": 1}),
    ] {
        let r = admin.post(format!("{url}/v1/tokens")).json(&body).send().await.unwrap();
        assert_eq!(code_of(r).await, (400, "invalid_request".into()), "{body}");
    }
    let r = admin.post(format!("{url}/v1/tokens")).body("{").send().await.unwrap();
    assert_eq!(code_of(r).await, (400, "invalid_json".into()));
    let listed: Value = admin
        .get(format!("{url}/v1/tokens"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["tokens"].as_array().unwrap().len(), 1);
    let r = admin
        .delete(format!("{url}/v1/tokens/0123456789abcdef"))
        .send()
        .await
        .unwrap();
    assert_eq!(code_of(r).await, (404, "token_not_found".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_on_one_node_is_refused_by_another_once_it_applies_the_revocation() {
    let file = admin_file();
    let backends = memory_backends();
    let (n1, url1) = start("n1", backends.clone(), &file).await;
    let (n2, url2) = start("n2", backends, &file).await;
    let admin = bearer_client(ADMIN);
    create_topic(&admin, &url1, "t", 2).await;
    let (id, secret) = issue_token(
        &admin,
        &url1,
        json!({"name": "ci", "scopes": [{"topics": "t", "ops": ["read", "write"]}]}),
    )
    .await;
    // n2 knows the token once it has applied n1's entry.
    let issued_at = n1.meta.applied();
    assert!(support::eventually(Duration::from_secs(10), || n2.meta.applied() >= issued_at).await);
    let c = bearer_client(&secret);
    assert_eq!(c.get(format!("{url2}/v1/topics/t")).send().await.unwrap().status(), 200);

    let r = admin.delete(format!("{url1}/v1/tokens/{id}")).send().await.unwrap();
    assert_eq!(r.status(), 204);
    let revoked_at = n1.meta.applied();
    assert!(support::eventually(Duration::from_secs(10), || n2.meta.applied() >= revoked_at).await);
    // No grace period: the first request after the apply is refused.
    let r = c.get(format!("{url2}/v1/topics/t")).send().await.unwrap();
    assert_eq!(code_of(r).await, (401, "unauthenticated".into()));
    assert_eq!(
        code_of(append(&c, &url2, "t").await).await,
        (401, "unauthenticated".into())
    );
    let r = admin.delete(format!("{url2}/v1/tokens/{id}")).send().await.unwrap();
    assert_eq!(code_of(r).await, (404, "token_not_found".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_requests_are_authorized_by_the_owner_with_the_callers_token() {
    let file = admin_file();
    let backends = memory_backends();
    let (n1, url1) = start("n1", backends.clone(), &file).await;
    let (n2, url2) = start("n2", backends, &file).await;
    let admin = bearer_client(ADMIN);
    create_topic(&admin, &url1, "t", 4).await;
    let (_, secret) = issue_token(
        &admin,
        &url1,
        json!({"name": "rw", "scopes": [{"topics": "t", "ops": ["read", "write"]}]}),
    )
    .await;
    let issued_at = n1.meta.applied();
    assert!(support::eventually(Duration::from_secs(10), || n2.meta.applied() >= issued_at).await);
    // A partition n1 owns, addressed to n2: n2 forwards it to n1.
    let Some(p) = partition_owned_by(&admin, &url1, "t", "n1").await else {
        eprintln!("skipping: placement put no partition of 4 on n1");
        return;
    };
    let c = bearer_client(&secret);
    let r = c
        .post(format!("{url2}/v1/topics/t/partitions/{p}/records"))
        .json(&json!({"records": [{"value": "via-n2"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        200,
        "forwarded with the caller's token: {}",
        r.text().await.unwrap()
    );
    let r = c
        .get(format!("{url2}/v1/topics/t/partitions/{p}/records?offset=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The forwarding marker grants nothing: without a token the owner refuses.
    let r = reqwest::Client::new()
        .post(format!("{url1}/v1/topics/t/partitions/{p}/records"))
        .header(sluice::api::FORWARDED_HEADER, "1")
        .json(&json!({"records": [{"value": "spoofed"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(code_of(r).await, (401, "unauthenticated".into()));
    let read: Value = c
        .get(format!("{url1}/v1/topics/t/partitions/{p}/records?offset=0"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let values: Vec<&str> = read["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["via-n2"]);
    // A subscription through n2 is relayed from n1, which authorizes the
    // caller's token too.
    let mut sse = c
        .get(format!("{url2}/v1/topics/t/partitions/{p}/subscribe?offset=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status(), 200);
    let mut text = String::new();
    while !text.contains("via-n2") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), sse.chunk())
            .await
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk.expect("the stream stays open")).unwrap());
    }
    assert!(text.contains("event: record"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_streams_need_the_scope_of_their_topic() {
    let file = admin_file();
    let (_node, url) = start("n1", memory_backends(), &file).await;
    let admin = bearer_client(ADMIN);
    let stream = format!("{url}/v1/stream/orders");
    let create = |c: &reqwest::Client| c.put(&stream).header("content-type", "text/plain").send();

    // No token, a wrong one: 401 with the challenge, and nothing created.
    let r = create(&reqwest::Client::new()).await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    assert_eq!(create(&bearer_client("slc_wrong")).await.unwrap().status(), 401);
    assert_eq!(reqwest::Client::new().get(&stream).send().await.unwrap().status(), 401);

    // The stream /v1/stream/orders is the topic ds.orders.
    let (_, writer) = issue_token(
        &admin,
        &url,
        json!({"name": "ds-writer", "scopes": [{"topics": "ds.*", "ops": ["write"]}]}),
    )
    .await;
    let (_, reader) = issue_token(
        &admin,
        &url,
        json!({"name": "ds-reader", "scopes": [{"topics": "ds.orders", "ops": ["read"]}]}),
    )
    .await;
    let (w, r) = (bearer_client(&writer), bearer_client(&reader));
    assert_eq!(create(&w).await.unwrap().status(), 403, "creating needs admin");
    assert_eq!(create(&admin).await.unwrap().status(), 201);
    let post = |c: &reqwest::Client| {
        c.post(&stream)
            .header("content-type", "text/plain")
            .body("hello")
            .send()
    };
    assert_eq!(post(&r).await.unwrap().status(), 403, "read does not imply write");
    let mut appended = false;
    for _ in 0..100 {
        let s = post(&w).await.unwrap().status();
        if s.is_success() {
            appended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(appended, "the writer could not append");
    let got = r.get(format!("{stream}?offset=-1")).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.text().await.unwrap(), "hello");
    assert_eq!(
        w.get(&stream).send().await.unwrap().status(),
        403,
        "write does not imply read"
    );
    assert_eq!(r.delete(&stream).send().await.unwrap().status(), 403);
    // A preflight carries no credentials and is answered.
    let pre = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, &stream)
        .header("origin", "http://example.com")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert!(pre.status().is_success(), "preflight: {}", pre.status());
}
