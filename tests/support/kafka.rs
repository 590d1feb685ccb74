//! What the Kafka client tests share: the repository's Python clients
//! (`.services/python`, installed by `scripts/services.sh install`), and a
//! node with `--auth on` serving HTTP and Kafka on loopback.

use super::{config, memory_backends};
use sluice::node::Node;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

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

/// Whether Python `module` is installed; a test that needs it skips when
/// it is not, and fails when `CI` is set.
pub fn python_module_installed(module: &str) -> bool {
    let ok = std::process::Command::new("python3")
        .env("PYTHONPATH", repo(".services/python"))
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("{module} is missing but CI is set: run scripts/services.sh install");
        }
        eprintln!("skipping: {module} is missing (scripts/services.sh install installs it)");
    }
    ok
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
    let kafka_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let kafka = kafka_listener.local_addr().unwrap().to_string();
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_addr = http.local_addr().unwrap().to_string();
    let path = admin_file.path().to_str().unwrap().to_string();
    let flags = [
        "--advertised-kafka-addr",
        &kafka,
        "--advertised-http-addr",
        &http_addr,
        "--auth",
        "on",
        "--admin-token-file",
        &path,
    ];
    let node = Node::start_with(config("n1", &flags), memory_backends()).await.unwrap();
    let app = sluice::http::router(node.clone());
    tokio::spawn(async move { axum::serve(http, app).await.unwrap() });
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let opts = sluice::kafka::Options::from_config(&node.config);
    tokio::spawn(sluice::kafka::serve(node.clone(), kafka_listener, opts, stop_rx));
    Secured {
        node,
        url: format!("http://{http_addr}"),
        kafka,
        _admin_file: admin_file,
        _stop: stop,
    }
}
