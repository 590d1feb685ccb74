//! `sluice admin nodes`, `admin drain NODE`, `admin transfer TOPIC P --to NODE`.

use super::topics::text;
use super::{table, Client};
use reqwest::Method;
use std::io::Write;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum AdminCmd {
    /// List the cluster's nodes; `*` marks the lease holder.
    Nodes,
    /// Drain a node: placement avoids it and its streams move to other nodes.
    Drain {
        /// The node id to drain.
        node: String,
    },
    /// Move one partition to another node.
    Transfer {
        /// Topic name.
        topic: String,
        /// Partition number.
        partition: u32,
        /// Target node id.
        #[arg(long, env = "SLUICE_TRANSFER_TO")]
        to: String,
    },
}

impl AdminCmd {
    pub async fn run(self, url: &str) -> anyhow::Result<()> {
        let mut out = std::io::stdout();
        self.run_to(url, &mut out).await
    }

    pub(crate) async fn run_to(self, url: &str, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
        let client = Client::new(url)?;
        match self {
            AdminCmd::Nodes => {
                let info = client.json(client.request(Method::GET, &["admin", "nodes"])).await?;
                let holder = info["lease_holder"].as_str();
                let rows: Vec<Vec<String>> = info["nodes"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(|n| {
                        let id = text(&n["node_id"]);
                        let mark = if Some(id.as_str()) == holder { "*" } else { "" };
                        let mut row = vec![format!("{id}{mark}")];
                        row.extend(
                            [
                                "epoch",
                                "live",
                                "fenced",
                                "draining",
                                "heartbeats",
                                "open_streams",
                                "http_addr",
                                "kafka_addr",
                            ]
                            .iter()
                            .map(|f| text(&n[*f])),
                        );
                        row
                    })
                    .collect();
                let header = [
                    "NODE",
                    "EPOCH",
                    "LIVE",
                    "FENCED",
                    "DRAINING",
                    "HEARTBEATS",
                    "STREAMS",
                    "HTTP",
                    "KAFKA",
                ];
                write!(out, "{}", table(&header, &rows))?;
            }
            AdminCmd::Drain { node } => {
                client
                    .send(client.request(Method::POST, &["admin", "nodes", &node, "drain"]))
                    .await?;
                writeln!(out, "draining {node}: its streams move to other nodes")?;
            }
            AdminCmd::Transfer { topic, partition, to } => {
                let p = partition.to_string();
                let req = client
                    .request(Method::POST, &["admin", "streams", &topic, &p, "transfer"])
                    .json(&serde_json::json!({ "to": to }));
                client.send(req).await?;
                writeln!(out, "moving {topic}/{partition} to {to}")?;
            }
        }
        Ok(())
    }
}
