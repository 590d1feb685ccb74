//! What the Kafka client tests share: the repository's Python clients
//! (`.services/python`, installed by `scripts/services.sh install`), and
//! in-process nodes serving HTTP and Kafka on loopback: one with `--auth
//! on`, or two sharing their stores.

use super::{config, eventually, memory_backends};
use sluice::node::{Backends, Node};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

/// Start node `id` on `backends` with HTTP and Kafka listeners on
/// loopback (their addresses advertised), the Kafka one until `stop`:
/// (node, HTTP URL, Kafka address).
pub async fn serve_node(
    id: &str,
    extra: &[&str],
    backends: Backends,
    stop: tokio::sync::watch::Receiver<bool>,
) -> (Arc<Node>, String, String) {
    let kafka_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let kafka = kafka_listener.local_addr().unwrap().to_string();
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_addr = http.local_addr().unwrap().to_string();
    let mut flags = vec!["--advertised-kafka-addr", &kafka, "--advertised-http-addr", &http_addr];
    flags.extend_from_slice(extra);
    let node = Node::start_with(config(id, &flags), backends).await.unwrap();
    let app = sluice::http::router(node.clone());
    tokio::spawn(async move { axum::serve(http, app).await.unwrap() });
    let opts = sluice::kafka::Options::from_config(&node.config);
    tokio::spawn(sluice::kafka::serve(node.clone(), kafka_listener, opts, stop));
    (node, format!("http://{http_addr}"), kafka)
}

/// Nodes sharing stores (two, or [`Cluster::start_n`]); clients bootstrap
/// from `kafkas[0]`.
pub struct Cluster {
    pub nodes: Vec<Arc<Node>>,
    pub urls: Vec<String>,
    pub kafkas: Vec<String>,
    _stop: tokio::sync::watch::Sender<bool>,
}

impl Cluster {
    pub async fn start() -> Cluster {
        Self::start_n(2).await
    }

    pub async fn start_n(n: usize) -> Cluster {
        let backends = memory_backends();
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let mut c = Cluster {
            nodes: Vec::new(),
            urls: Vec::new(),
            kafkas: Vec::new(),
            _stop: stop,
        };
        for i in 1..=n {
            let id = format!("n{i}");
            let (node, url, kafka) = serve_node(&id, &[], backends.clone(), stop_rx.clone()).await;
            c.nodes.push(node);
            c.urls.push(url);
            c.kafkas.push(kafka);
        }
        // Every node sees every other live before any topic exists, so
        // placement spreads partitions and Metadata lists every broker.
        let both = eventually(Duration::from_secs(10), || {
            c.nodes
                .iter()
                .all(|node| node.meta.view().nodes.values().filter(|r| !r.fenced).count() == n)
        })
        .await;
        assert!(both, "the nodes did not see each other");
        c
    }

    pub fn bootstrap(&self) -> &str {
        &self.kafkas[0]
    }
}

/// A path in the repository.
pub fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// `python3` with the installed client libraries on its path.
pub fn python() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("python3");
    cmd.env("PYTHONPATH", repo(".services/python"));
    cmd
}

/// Whether `what` is installed, by whether `probe` succeeds; a test that
/// needs it skips when it is not, and fails when `CI` is set.
pub fn installed(what: &str, probe: &mut std::process::Command) -> bool {
    let ok = probe
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("{what} is missing but CI is set: run scripts/services.sh install");
        }
        eprintln!("skipping: {what} is missing (scripts/services.sh install installs it)");
    }
    ok
}

/// [`installed`] for Python `module` among the installed clients.
pub fn python_module_installed(module: &str) -> bool {
    let mut probe = std::process::Command::new("python3");
    probe
        .env("PYTHONPATH", repo(".services/python"))
        .args(["-c", &format!("import {module}")]);
    installed(module, &mut probe)
}

/// One node with `--auth on` and `admin_secret` as its bootstrap admin
/// token, its HTTP API at `url` and its Kafka listener at `kafka`.
pub struct Secured {
    pub node: Arc<Node>,
    pub url: String,
    pub kafka: String,
    _admin_file: tempfile::NamedTempFile,
    _stop: tokio::sync::watch::Sender<bool>,
}

pub async fn start_secured(admin_secret: &str) -> Secured {
    let admin_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(admin_file.path(), admin_secret).unwrap();
    let path = admin_file.path().to_str().unwrap().to_string();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let flags = ["--auth", "on", "--admin-token-file", &path];
    let (node, url, kafka) = serve_node("n1", &flags, memory_backends(), stop_rx).await;
    Secured {
        node,
        url,
        kafka,
        _admin_file: admin_file,
        _stop: stop,
    }
}

/// The `host:port` FindCoordinator (v1, over the wire to `kafka_addr`)
/// names for `key`: key type 0 a group, 1 a transactional id.
pub async fn find_coordinator(kafka_addr: &str, key: &str, key_type: i8) -> String {
    use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse, RequestHeader};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut frame = bytes::BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(10)
        .with_request_api_version(1)
        .with_correlation_id(1)
        .encode(&mut frame, 1)
        .unwrap();
    FindCoordinatorRequest::default()
        .with_key(StrBytes::from_string(key.to_string()))
        .with_key_type(key_type)
        .encode(&mut frame, 1)
        .unwrap();
    let mut s = tokio::net::TcpStream::connect(kafka_addr).await.unwrap();
    s.write_all(&(frame.len() as u32).to_be_bytes()).await.unwrap();
    s.write_all(&frame).await.unwrap();
    let len = s.read_u32().await.unwrap();
    let mut body = vec![0; len as usize];
    s.read_exact(&mut body).await.unwrap();
    let mut body = bytes::Bytes::from(body.split_off(4));
    let resp = FindCoordinatorResponse::decode(&mut body, 1).unwrap();
    assert_eq!(resp.error_code, 0, "FindCoordinator: {resp:?}");
    format!("{}:{}", resp.host.as_str(), resp.port)
}

impl Cluster {
    /// [`Cluster::start_n`] with `topic` of `partitions` partitions, waited
    /// for until every node's view has it; the partitions' owners printed.
    pub async fn start_with_topic(n: usize, topic: &str, partitions: u32) -> Cluster {
        let c = Cluster::start_n(n).await;
        let engine = c.nodes[0].services();
        engine
            .topics
            .create_topic(topic, partitions, Default::default())
            .await
            .unwrap();
        eventually(Duration::from_secs(10), || {
            c.nodes.iter().all(|n| n.services().topics.partitions(topic).is_ok())
        })
        .await;
        let owners: std::collections::BTreeSet<String> = engine
            .topics
            .describe_topic(topic)
            .unwrap()
            .partition_info
            .iter()
            .filter_map(|p| p.owner.clone())
            .collect();
        eprintln!("{topic}: partition owners {owners:?}");
        c
    }
}

/// Run a client script that prints one JSON line per step to completion
/// within `timeout`, showing what it printed; its steps. Fails if it fails.
pub async fn run_steps(what: &str, mut cmd: tokio::process::Command, timeout: Duration) -> Vec<serde_json::Value> {
    let out = tokio::time::timeout(timeout, cmd.kill_on_drop(true).output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {timeout:?}"))
        .unwrap();
    // `output` pipes stderr whatever was set: shown here.
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        eprintln!("{what} (stderr): {line}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout.lines() {
        eprintln!("{what}: {line}");
    }
    assert!(out.status.success(), "{what} failed: {}", out.status);
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{what} printed {l:?}: {e}")))
        .collect()
}

/// The step called `name` of [`run_steps`]' answer.
pub fn step<'a>(steps: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    steps
        .iter()
        .find(|s| s["step"] == name)
        .unwrap_or_else(|| panic!("no step {name}"))
}
