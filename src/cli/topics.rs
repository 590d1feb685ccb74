//! `sluice topics create / list / describe / delete`.

use super::{table, Client};
use reqwest::Method;
use serde_json::{json, Value};
use std::io::Write;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum TopicsCmd {
    /// Create a topic.
    Create {
        /// Topic name: 1-249 characters of [a-zA-Z0-9._-].
        name: String,
        /// Number of partitions (1-10000).
        #[arg(long, env = "SLUICE_PARTITIONS", default_value_t = 1)]
        partitions: u32,
        /// Delete records older than this many milliseconds (-1: keep forever).
        #[arg(long, env = "SLUICE_RETENTION_MS", allow_negative_numbers = true)]
        retention_ms: Option<i64>,
        /// Keep at most about this many bytes per partition (-1: no limit).
        #[arg(long, env = "SLUICE_RETENTION_BYTES", allow_negative_numbers = true)]
        retention_bytes: Option<i64>,
    },
    /// List topics and their partition counts.
    List,
    /// Show a topic's configuration and partitions (owner, epoch, offsets).
    Describe {
        /// Topic name.
        name: String,
    },
    /// Delete a topic and its records.
    Delete {
        /// Topic name.
        name: String,
    },
}

impl TopicsCmd {
    pub async fn run(self, url: &str) -> anyhow::Result<()> {
        let mut out = std::io::stdout();
        self.run_to(url, &mut out).await
    }

    pub(crate) async fn run_to(self, url: &str, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
        let client = Client::new(url)?;
        match self {
            TopicsCmd::Create {
                name,
                partitions,
                retention_ms,
                retention_bytes,
            } => {
                let body = json!({
                    "name": name,
                    "partitions": partitions,
                    "config": { "retention_ms": retention_ms, "retention_bytes": retention_bytes },
                });
                let created = client
                    .json(client.request(Method::POST, &["v1", "topics"]).json(&body))
                    .await?;
                writeln!(
                    out,
                    "created topic {} with {} partition(s)",
                    created["name"].as_str().unwrap_or(&name),
                    created["partitions"]
                )?;
            }
            TopicsCmd::List => {
                let list = client.json(client.request(Method::GET, &["v1", "topics"])).await?;
                let rows: Vec<Vec<String>> = list["topics"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(|t| vec![text(&t["name"]), text(&t["partitions"])])
                    .collect();
                write!(out, "{}", table(&["NAME", "PARTITIONS"], &rows))?;
            }
            TopicsCmd::Describe { name } => {
                let d = client
                    .json(client.request(Method::GET, &["v1", "topics", &name]))
                    .await?;
                writeln!(out, "topic:      {}", text(&d["name"]))?;
                writeln!(out, "partitions: {}", text(&d["partitions"]))?;
                writeln!(
                    out,
                    "retention:  ms={} bytes={}",
                    text(&d["config"]["retention_ms"]),
                    text(&d["config"]["retention_bytes"])
                )?;
                let rows: Vec<Vec<String>> = d["partition_info"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(|p| {
                        [
                            "partition",
                            "owner",
                            "stream_epoch",
                            "state",
                            "start_offset",
                            "end_offset",
                        ]
                        .iter()
                        .map(|f| text(&p[*f]))
                        .collect()
                    })
                    .collect();
                write!(
                    out,
                    "{}",
                    table(&["PARTITION", "OWNER", "EPOCH", "STATE", "START", "END"], &rows)
                )?;
            }
            TopicsCmd::Delete { name } => {
                client
                    .send(client.request(Method::DELETE, &["v1", "topics", &name]))
                    .await?;
                writeln!(out, "deleted topic {name}")?;
            }
        }
        Ok(())
    }
}

/// A JSON value for a table cell: strings bare, null as `-`.
pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
