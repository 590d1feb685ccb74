//! `sluice produce TOPIC`: one record per line of stdin (or `--file`), sent
//! in batches of up to [`BATCH_LINES`] lines or [`BATCH_BYTES`] bytes.

use super::Client;
use anyhow::Context;
use base64::Engine as _;
use reqwest::Method;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};

pub const BATCH_LINES: usize = 500;
pub const BATCH_BYTES: usize = 1024 * 1024;
/// Retries of a batch the server refused retryably (about 30 s in all).
const RETRIES: u32 = 35;

fn refused_retryably(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| c.downcast_ref::<super::ServerError>().is_some_and(|s| s.retryable))
}

#[derive(Debug, Clone, clap::Args)]
pub struct ProduceArgs {
    /// Topic to append to.
    pub topic: String,
    /// Key of every record; records then go to the key's partition (Kafka's partitioner).
    #[arg(long, env = "SLUICE_KEY")]
    pub key: Option<String>,
    /// Append to this partition (default: by key, else round-robin).
    #[arg(long, env = "SLUICE_PARTITION")]
    pub partition: Option<u32>,
    /// Read lines from this file instead of stdin.
    #[arg(long, env = "SLUICE_FILE")]
    pub file: Option<PathBuf>,
}

impl ProduceArgs {
    pub async fn run(self, url: &str) -> anyhow::Result<()> {
        let mut progress = std::io::stderr();
        match &self.file {
            Some(path) => {
                let f = tokio::fs::File::open(path)
                    .await
                    .with_context(|| format!("cannot open {}", path.display()))?;
                self.produce(url, BufReader::new(f), &mut progress).await?;
            }
            None => {
                self.produce(url, BufReader::new(tokio::io::stdin()), &mut progress)
                    .await?;
            }
        }
        Ok(())
    }

    /// Sends every line of `input`; returns how many records were appended.
    pub(crate) async fn produce<R: AsyncBufRead + Unpin>(
        &self,
        url: &str,
        mut input: R,
        progress: &mut (dyn Write + Send),
    ) -> anyhow::Result<u64> {
        let client = Client::new(url)?;
        let mut batch: Vec<Vec<u8>> = Vec::new();
        let mut batch_bytes = 0;
        let mut sent = 0u64;
        loop {
            let mut line = Vec::new();
            let n = input.read_until(b'\n', &mut line).await.context("reading input")?;
            if n > 0 {
                if line.last() == Some(&b'\n') {
                    line.pop();
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                }
                batch_bytes += line.len();
                batch.push(line);
            }
            let full = batch.len() >= BATCH_LINES || batch_bytes >= BATCH_BYTES;
            if (full || n == 0) && !batch.is_empty() {
                sent += self
                    .send_batch_retrying(&client, &batch)
                    .await
                    .with_context(|| format!("appending records {}..{} failed", sent + 1, sent + batch.len() as u64))?;
                batch.clear();
                batch_bytes = 0;
                write!(progress, "\rproduced {sent} records")?;
                progress.flush()?;
            }
            if n == 0 {
                break;
            }
        }
        writeln!(progress, "\rproduced {sent} records")?;
        Ok(sent)
    }

    /// [`Self::send_batch`], retried while the server answers with a
    /// retryable refusal (`unavailable`: the partition is being placed or
    /// moved; `throttled`: back-pressure) — a topic created a moment ago has
    /// no owner yet. These answers mean nothing was appended. Connection
    /// failures are not retried: the batch may have landed.
    async fn send_batch_retrying(&self, client: &Client, lines: &[Vec<u8>]) -> anyhow::Result<u64> {
        let mut backoff = std::time::Duration::from_millis(50);
        let mut attempts = 0;
        loop {
            match self.send_batch(client, lines).await {
                Err(e) if attempts < RETRIES && refused_retryably(&e) => {
                    attempts += 1;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(1));
                }
                other => return other,
            }
        }
    }

    async fn send_batch(&self, client: &Client, lines: &[Vec<u8>]) -> anyhow::Result<u64> {
        // Text goes as is; a batch with any non-UTF-8 line goes in base64.
        let base64 = lines.iter().any(|l| std::str::from_utf8(l).is_err());
        let encode = |b: &[u8]| -> Value {
            if base64 {
                Value::String(base64::engine::general_purpose::STANDARD.encode(b))
            } else {
                Value::String(String::from_utf8_lossy(b).into_owned())
            }
        };
        let key = self.key.as_ref().map(|k| encode(k.as_bytes()));
        let records: Vec<Value> = lines
            .iter()
            .map(|l| {
                let mut r = json!({ "value": encode(l) });
                if let Some(k) = &key {
                    r["key"] = k.clone();
                }
                if let Some(p) = self.partition {
                    r["partition"] = json!(p);
                }
                r
            })
            .collect();
        let mut req = client.request(Method::POST, &["v1", "topics", &self.topic, "records"]);
        if base64 {
            req = req.query(&[("encoding", "base64")]);
        }
        let resp = client.json(req.json(&json!({ "records": records }))).await?;
        // One range per partition written; `offsets` (one per record) is
        // only there for requests of up to 1000 records.
        let acked = resp["ranges"]
            .as_array()
            .map(|ranges| ranges.iter().filter_map(|r| r["count"].as_u64()).sum::<u64>() as usize)
            .unwrap_or_else(|| resp["offsets"].as_array().map_or(0, Vec::len));
        anyhow::ensure!(
            acked == lines.len(),
            "server acknowledged {acked} of {} records",
            lines.len()
        );
        Ok(acked as u64)
    }
}
