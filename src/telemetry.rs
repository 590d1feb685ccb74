//! Logs and metrics.
//!
//! Metrics live in one small in-process registry rendered in the Prometheus
//! text format at `/metrics`: counters, gauges and latency histograms. A
//! hand-rolled registry keeps the dependency tree small; the format is the
//! stable contract.
//!
//! Naming: every metric is `sluice_<what>` with the Prometheus unit suffix
//! (`_total` for counters, `_seconds` for latencies, `_bytes` for sizes). A
//! label naming the operation measured is `op`, its result `outcome`; other
//! labels say what else they are (`kind` of object or read, HTTP `method`
//! and `status`, `door`, `listener`, `reason`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

type Key = (String, Vec<(String, String)>);

/// What every metric name starts with.
pub const PREFIX: &str = "sluice_";

/// Upper bounds, in seconds, of the latency histogram buckets.
const BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Default)]
struct Registry {
    counters: BTreeMap<Key, u64>,
    gauges: BTreeMap<Key, f64>,
    histograms: BTreeMap<Key, Histogram>,
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(Default::default);

fn key(name: &str, labels: &[(&str, &str)]) -> Key {
    debug_assert!(name.starts_with(PREFIX), "metric {name} is not named {PREFIX}...");
    (
        name.to_string(),
        labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    )
}

/// Add one to a counter.
pub fn count(name: &str, labels: &[(&str, &str)]) {
    count_n(name, labels, 1);
}

pub fn count_n(name: &str, labels: &[(&str, &str)], n: u64) {
    *REGISTRY.lock().unwrap().counters.entry(key(name, labels)).or_default() += n;
}

pub fn gauge(name: &str, labels: &[(&str, &str)], value: f64) {
    REGISTRY.lock().unwrap().gauges.insert(key(name, labels), value);
}

/// Record a latency in a histogram (named `..._seconds`).
pub fn observe(name: &str, labels: &[(&str, &str)], d: Duration) {
    let secs = d.as_secs_f64();
    let mut r = REGISTRY.lock().unwrap();
    let h = r.histograms.entry(key(name, labels)).or_default();
    if let Some(i) = BUCKETS.iter().position(|b| secs <= *b) {
        h.counts[i] += 1;
    }
    h.sum += secs;
    h.count += 1;
}

fn labels_text(labels: &[(String, String)], extra: Option<(&str, String)>) -> String {
    let mut parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.replace('"', "\\\"")))
        .collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{v}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

/// Everything in the Prometheus text exposition format.
pub fn render() -> String {
    let r = REGISTRY.lock().unwrap();
    let mut out = String::new();
    let mut typed = std::collections::BTreeSet::new();
    for ((name, labels), v) in &r.counters {
        if typed.insert(name.clone()) {
            let _ = writeln!(out, "# TYPE {name} counter");
        }
        let _ = writeln!(out, "{name}{} {v}", labels_text(labels, None));
    }
    for ((name, labels), v) in &r.gauges {
        if typed.insert(name.clone()) {
            let _ = writeln!(out, "# TYPE {name} gauge");
        }
        let _ = writeln!(out, "{name}{} {v}", labels_text(labels, None));
    }
    for ((name, labels), h) in &r.histograms {
        if typed.insert(name.clone()) {
            let _ = writeln!(out, "# TYPE {name} histogram");
        }
        let mut cumulative = 0;
        for (i, b) in BUCKETS.iter().enumerate() {
            cumulative += h.counts[i];
            let _ = writeln!(
                out,
                "{name}_bucket{} {cumulative}",
                labels_text(labels, Some(("le", b.to_string())))
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{} {}",
            labels_text(labels, Some(("le", "+Inf".into()))),
            h.count
        );
        let _ = writeln!(out, "{name}_sum{} {}", labels_text(labels, None), h.sum);
        let _ = writeln!(out, "{name}_count{} {}", labels_text(labels, None), h.count);
    }
    out
}

/// The span every log line of a node's loops and requests runs in: the
/// node id and its registration epoch (`e7`).
pub fn node_span(node: &dyn std::fmt::Display, epoch: impl std::fmt::Display) -> tracing::Span {
    tracing::info_span!("node", node = %node, epoch = %epoch)
}

/// The log subscriber: `json` lines (one object per event, with the fields of
/// its spans) or human-readable `text`, written to `writer`.
fn subscriber<W>(
    format: &str,
    filter: tracing_subscriber::EnvFilter,
    ansi: bool,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    if format == "json" {
        Box::new(builder.json().with_current_span(true).with_span_list(true).finish())
    } else {
        Box::new(builder.finish())
    }
}

/// Install the tracing subscriber: `text` or `json` lines on stderr, level
/// from `RUST_LOG` (default `info`); colours only on a terminal.
pub fn init_logging(format: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing::subscriber::set_global_default(subscriber(
        format,
        filter,
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
        std::io::stderr,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        count("sluice_test_requests_total", &[("op", "append"), ("outcome", "ok")]);
        gauge("sluice_test_buffered_bytes", &[], 42.0);
        observe(
            "sluice_test_latency_seconds",
            &[("op", "put")],
            Duration::from_millis(3),
        );
        let text = render();
        assert!(text.contains("# TYPE sluice_test_requests_total counter"));
        assert!(text.contains("sluice_test_requests_total{op=\"append\",outcome=\"ok\"} 1"));
        assert!(text.contains("sluice_test_buffered_bytes 42"));
        assert!(text.contains("sluice_test_latency_seconds_bucket{op=\"put\",le=\"0.005\"} 1"));
        assert!(text.contains("sluice_test_latency_seconds_count{op=\"put\"} 1"));
    }

    /// Captures what a subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn log_with(format: &str) -> String {
        let out = Captured::default();
        let writer = out.clone();
        let sub = subscriber(format, tracing_subscriber::EnvFilter::new("info"), false, move || {
            writer.clone()
        });
        tracing::subscriber::with_default(sub, || {
            let node = node_span(&"n1", crate::ids::NodeEpoch(7));
            let _n = node.enter();
            let stream = tracing::info_span!("append", stream = "orders/2");
            let _s = stream.enter();
            tracing::info!(offset = 41, "appended");
        });
        let bytes = out.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn json_logs_carry_node_epoch_and_stream() {
        let line = log_with("json");
        let v: serde_json::Value = serde_json::from_str(line.trim()).expect("one JSON object per line");
        assert_eq!(v["fields"]["message"], "appended");
        assert_eq!(v["fields"]["offset"], 41);
        assert_eq!(v["span"]["stream"], "orders/2");
        let spans = v["spans"].as_array().expect("the span list");
        assert_eq!(spans[0]["node"], "n1");
        assert_eq!(spans[0]["epoch"], "e7");
    }

    #[test]
    fn text_logs_carry_node_epoch_and_stream() {
        let line = log_with("text");
        assert!(line.contains("node{node=n1 epoch=e7}"), "{line}");
        assert!(line.contains("append{stream=") && line.contains("orders/2"), "{line}");
        assert!(line.contains("appended"), "{line}");
    }
}
