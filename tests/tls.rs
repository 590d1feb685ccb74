//! TLS on both listeners of real `sluice serve` processes, with a
//! self-signed certificate made in the test: curl over HTTPS, confluent-kafka
//! (librdkafka) with `security.protocol=SSL`, forwarding between two TLS
//! nodes, and plaintext clients refused without harm to the node.

mod support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::process::{free_port, http_status, Server};

/// A self-signed certificate for `localhost` and 127.0.0.1: (cert, key).
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let rcgen::CertifiedKey { cert, signing_key } =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, signing_key.serialize_pem()).unwrap();
    (c, k)
}

fn tls_node(id: &str, dir: &Path, cert: &Path, key: &Path) -> Server {
    Server::start(
        id,
        dir,
        free_port(),
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
            "--read-timeout-sec",
            "5",
        ],
    )
}

fn have_curl() -> bool {
    let ok = Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipping: curl is not installed");
    }
    ok
}

/// `curl --cacert` with `args`: (HTTP status, body).
fn curl(ca: &Path, args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--cacert", ca.to_str().unwrap()])
        .args(["-w", "\n%{http_code}"])
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.trim().parse().unwrap(), body.to_string())
}

fn wait_open_https(ca: &Path, url: &str, topic: &str) {
    for _ in 0..200 {
        let (code, body) = curl(ca, &[&format!("{url}/v1/topics/{topic}")]);
        if code == 200 && !body.contains(r#""state":"opening""#) && body.contains(r#""state":"open""#) {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            if v["partition_info"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["state"] == "open")
            {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{topic} was not placed");
}

#[test]
fn https_appends_and_reads_with_curl_and_plaintext_is_refused() {
    if !have_curl() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(dir.path());
    let server = tls_node("n1", dir.path(), &cert, &key);
    let url = &server.url;
    assert!(url.starts_with("https://"));

    let (code, body) = curl(
        &cert,
        &[
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            "-d",
            r#"{"name":"t","partitions":1}"#,
            &format!("{url}/v1/topics"),
        ],
    );
    assert_eq!(code, 201, "{body}");
    wait_open_https(&cert, url, "t");
    let (code, body) = curl(
        &cert,
        &[
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            "-d",
            r#"{"records":[{"value":"over tls"}]}"#,
            &format!("{url}/v1/topics/t/partitions/0/records"),
        ],
    );
    assert_eq!(code, 200, "{body}");
    let (code, body) = curl(&cert, &[&format!("{url}/v1/topics/t/partitions/0/records")]);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("over tls"), "{body}");

    // Plaintext HTTP and Kafka to the TLS ports: the handshake fails and
    // the connection closes; no plaintext answer ever comes back.
    assert_eq!(
        http_status(server.port, "/ready"),
        None,
        "plaintext HTTP gets no answer"
    );
    let mut k = std::net::TcpStream::connect(&server.kafka_addr).unwrap();
    k.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    k.write_all(&[0, 0, 0, 14, 0, 18, 0, 0, 0, 0, 0, 1, 0, 4, b't', b'e', b's', b't'])
        .unwrap();
    let mut got = Vec::new();
    let _ = k.read_to_end(&mut got);
    assert!(
        got.len() < 4 || got[..2] == [0x15, 0x03],
        "at most a TLS alert, never a Kafka answer: {got:?}"
    );
    // A certificate the client does not trust is refused by the client.
    let untrusted = Command::new("curl")
        .args(["-sS", "--max-time", "20", &format!("{url}/ready")])
        .output()
        .unwrap();
    assert!(
        !untrusted.status.success(),
        "curl without --cacert must not trust the node"
    );
    // The node still serves TLS clients.
    assert_eq!(curl(&cert, &[&format!("{url}/ready")]).0, 200);
    // The node logs a refusal just after closing: poll for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !server.log().contains("TLS handshake failed") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(server.log().contains("TLS handshake failed"), "the refusals are logged");
}

#[test]
fn appends_to_another_nodes_partition_are_forwarded_over_tls() {
    if !have_curl() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(dir.path());
    let a = tls_node("n1", dir.path(), &cert, &key);
    let b = tls_node("n2", dir.path(), &cert, &key);
    let (code, body) = curl(
        &cert,
        &[
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            "-d",
            r#"{"name":"f","partitions":4}"#,
            &format!("{}/v1/topics", a.url),
        ],
    );
    assert_eq!(code, 201, "{body}");
    wait_open_https(&cert, &a.url, "f");
    let (_, described) = curl(&cert, &[&format!("{}/v1/topics/f", a.url)]);
    let described: serde_json::Value = serde_json::from_str(&described).unwrap();
    let owners: std::collections::BTreeSet<&str> = described["partition_info"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["owner"].as_str())
        .collect();
    assert_eq!(
        owners.len(),
        2,
        "both nodes own partitions, so some appends are forwarded: {described}"
    );
    // Every partition through both nodes: whichever does not own one forwards.
    for p in 0..4 {
        for node in [&a, &b] {
            let (code, body) = curl(
                &cert,
                &[
                    "-X",
                    "POST",
                    "-H",
                    "content-type: application/json",
                    "-d",
                    &format!(r#"{{"records":[{{"value":"p{p} via {}"}}]}}"#, node.node_id),
                    &format!("{}/v1/topics/f/partitions/{p}/records", node.url),
                ],
            );
            assert_eq!(code, 200, "append to p{p} via {}: {body}", node.node_id);
        }
        for node in [&a, &b] {
            let (code, body) = curl(&cert, &[&format!("{}/v1/topics/f/partitions/{p}/records", node.url)]);
            assert_eq!(code, 200, "{body}");
            assert!(
                body.contains(&format!("p{p} via n1")) && body.contains(&format!("p{p} via n2")),
                "{body}"
            );
        }
    }
    let (_, nodes) = curl(&cert, &[&format!("{}/admin/nodes", a.url)]);
    assert!(nodes.contains("n2"), "both nodes are in the cluster: {nodes}");
}

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn have_confluent() -> bool {
    let ok = Command::new("python3")
        .env("PYTHONPATH", repo(".services/python"))
        .args(["-c", "import confluent_kafka"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("confluent-kafka is missing but CI is set: run scripts/services.sh install");
        }
        eprintln!("skipping: confluent-kafka is missing (scripts/services.sh install installs it)");
    }
    ok
}

const CONFLUENT_SSL: &str = r#"
import sys
from confluent_kafka import Producer, Consumer
addr, ca = sys.argv[1], sys.argv[2]
tls = {"bootstrap.servers": addr, "security.protocol": "SSL", "ssl.ca.location": ca}
p = Producer(dict(tls, **{"acks": "all"}))
for i in range(10):
    p.produce("ssl", value=("m%d" % i).encode(), partition=0)
left = p.flush(30)
assert left == 0, "%d messages not delivered" % left
c = Consumer(dict(tls, **{"group.id": "g", "auto.offset.reset": "earliest"}))
c.subscribe(["ssl"])
got = []
for _ in range(300):
    m = c.poll(0.1)
    if m is None:
        if len(got) >= 10:
            break
        continue
    if m.error():
        continue
    got.append(m.value().decode())
c.close()
print(",".join(got))
"#;

#[test]
fn confluent_kafka_produces_and_consumes_over_ssl() {
    if !have_confluent() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(dir.path());
    let server = tls_node("n1", dir.path(), &cert, &key);
    let out = Command::new("timeout")
        .args([
            "90",
            "python3",
            "-c",
            CONFLUENT_SSL,
            &server.kafka_addr,
            cert.to_str().unwrap(),
        ])
        .env("PYTHONPATH", repo(".services/python"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "confluent-kafka over SSL failed: {}\nnode log: {}",
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
    let got = String::from_utf8_lossy(&out.stdout);
    let want: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    assert_eq!(got.trim(), want.join(","));
}
