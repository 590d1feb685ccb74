//! Real `sluice serve` processes for end-to-end tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port below the ephemeral range (see `sluice::bench::ports`).
pub fn free_port() -> u16 {
    sluice::bench::ports::free_port().expect("a free loopback port")
}

/// Status of a plain GET on loopback, without an async runtime.
pub fn http_status(port: u16, path: &str) -> Option<u16> {
    http_status_at("127.0.0.1", port, path)
}

/// Status of a plain GET on `host:port`, without an async runtime.
pub fn http_status_at(host: &str, port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect((host, port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// Heartbeat 1 s, node timeout 4 s, no shutdown drain: each one unless
/// `extra` sets that flag itself (clap refuses a flag given twice).
fn fast_timing(extra: &[&str]) -> Vec<&'static str> {
    [
        ("--heartbeat-interval-sec", "1"),
        ("--node-timeout-sec", "4"),
        ("--shutdown-drain-sec", "0"),
    ]
    .into_iter()
    .filter(|(flag, _)| !extra.iter().any(|e| e == flag || e.starts_with(&format!("{flag}="))))
    .flat_map(|(flag, v)| [flag, v])
    .collect()
}

pub struct Server {
    pub child: Child,
    pub url: String,
    pub node_id: String,
    pub data_dir: PathBuf,
    pub port: u16,
    /// The Kafka listener, `127.0.0.1:<port>`.
    pub kafka_addr: String,
    /// The address both listeners bind (`127.0.0.1` unless placed).
    pub host: String,
    /// The command the node runs under (e.g. `ip netns exec <ns>`), if any.
    prefix: Vec<String>,
    extra: Vec<String>,
}

/// Where a node runs: its listeners' address and the command it runs under.
#[derive(Debug, Clone)]
pub struct Placement {
    pub host: String,
    pub prefix: Vec<String>,
}

impl Server {
    /// Start `sluice serve` on `data_dir` and wait until `/ready` says so.
    pub fn start(node_id: &str, data_dir: &Path, port: u16, extra: &[&str]) -> Server {
        Self::start_with_kafka(node_id, data_dir, port, &format!("127.0.0.1:{}", free_port()), extra)
    }

    /// As [`start`](Self::start), placed: listening on `at.host` (HTTP on
    /// `port`, Kafka on `kafka_port`) and run under `at.prefix`.
    pub fn start_placed(
        node_id: &str,
        data_dir: &Path,
        at: &Placement,
        port: u16,
        kafka_port: u16,
        extra: &[&str],
    ) -> Server {
        let kafka_addr = format!("{}:{kafka_port}", at.host);
        Self::launch(node_id, data_dir, at, port, &kafka_addr, extra)
    }

    fn start_with_kafka(node_id: &str, data_dir: &Path, port: u16, kafka_addr: &str, extra: &[&str]) -> Server {
        let here = Placement {
            host: "127.0.0.1".into(),
            prefix: Vec::new(),
        };
        Self::launch(node_id, data_dir, &here, port, kafka_addr, extra)
    }

    fn launch(node_id: &str, data_dir: &Path, at: &Placement, port: u16, kafka_addr: &str, extra: &[&str]) -> Server {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.join(format!("{node_id}.log")))
            .unwrap();
        let bin = env!("CARGO_BIN_EXE_sluice");
        let mut cmd = match at.prefix.split_first() {
            // `ip netns exec` execs the node: the child is the node itself.
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        cmd.arg("serve")
            .args(["--node-id", node_id])
            .args(["--data-dir", data_dir.to_str().unwrap()])
            .args(["--http-addr", &format!("{}:{port}", at.host)])
            .args(["--kafka-addr", kafka_addr])
            .args(fast_timing(extra))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = cmd.spawn().expect("spawn sluice");
        let scheme = if extra.contains(&"--tls-cert") { "https" } else { "http" };
        let mut server = Server {
            child,
            url: format!("{scheme}://{}:{port}", at.host),
            node_id: node_id.to_string(),
            data_dir: data_dir.to_path_buf(),
            port,
            kafka_addr: kafka_addr.to_string(),
            host: at.host.clone(),
            prefix: at.prefix.clone(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        server.wait_ready(Duration::from_secs(20));
        server
    }

    pub fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let tls = self.url.starts_with("https");
        while Instant::now() < deadline {
            // A TLS node cannot be asked in plaintext; it logs this line once
            // it has registered and serves both listeners.
            let ready = if tls {
                self.log().contains("serving Kafka")
            } else {
                http_status_at(&self.host, self.port, "/ready") == Some(200)
            };
            if ready {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "node {} exited while starting ({status}); log: {}",
                    self.node_id,
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "node {} was not ready in {timeout:?}; log: {}",
            self.node_id,
            self.log()
        );
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.join(format!("{}.log", self.node_id))).unwrap_or_default()
    }

    /// SIGKILL: no cleanup of any kind.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, then wait for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().unwrap()
    }

    /// Start again with the same id, directory and ports.
    pub fn restart(&self) -> Server {
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        let at = Placement {
            host: self.host.clone(),
            prefix: self.prefix.clone(),
        };
        Server::launch(&self.node_id, &self.data_dir, &at, self.port, &self.kafka_addr, &extra)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
