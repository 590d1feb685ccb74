//! `sluice consume TOPIC`: prints records, one per line.
//!
//! Where to start: `--offset N`, else `--from-beginning`, else the start of
//! each partition when reading what is there, or its end with `--follow`.
//! Without `--follow` it pages through each partition up to its high
//! watermark and exits; with `--follow` it tails every partition over SSE and
//! reconnects with `Last-Event-ID` when the server says `unavailable`.

use super::sse::SseParser;
use super::{is_retryable, Client};
use anyhow::Context;
use base64::Engine as _;
use futures::StreamExt;
use reqwest::Method;
use serde_json::Value;
use std::io::Write;
use std::time::Duration;
use tokio::sync::mpsc;

/// Reconnect attempts in a row, without receiving a record, before giving up.
const MAX_RECONNECTS: u32 = 30;
const RECONNECT_DELAY: Duration = Duration::from_secs(1);
const PAGE: u64 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The value of each record, one per line.
    Value,
    /// Each record as a JSON object, one per line.
    Json,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ConsumeArgs {
    /// Topic to read.
    pub topic: String,
    /// Read only this partition (default: all).
    #[arg(long, env = "SLUICE_PARTITION")]
    pub partition: Option<u32>,
    /// Start at the start offset, also with --follow.
    #[arg(long, env = "SLUICE_FROM_BEGINNING")]
    pub from_beginning: bool,
    /// Start at this offset (in every partition read).
    #[arg(long, env = "SLUICE_OFFSET", conflicts_with = "from_beginning")]
    pub offset: Option<u64>,
    /// Keep reading new records as they arrive (server-sent events).
    #[arg(long, env = "SLUICE_FOLLOW")]
    pub follow: bool,
    /// Exit after printing this many records.
    #[arg(long, env = "SLUICE_LIMIT")]
    pub limit: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, env = "SLUICE_FORMAT", default_value = "value")]
    pub format: Format,
}

/// Where a partition read starts, as the `offset` query parameter.
fn start_param(args: &ConsumeArgs) -> Option<String> {
    match (args.offset, args.from_beginning, args.follow) {
        (Some(o), _, _) => Some(o.to_string()),
        (None, true, _) | (None, false, false) => None,
        (None, false, true) => Some("-1".into()),
    }
}

impl ConsumeArgs {
    pub async fn run(self, url: &str) -> anyhow::Result<()> {
        let mut out = std::io::BufWriter::new(std::io::stdout());
        let result = self.consume(url, &mut out).await;
        out.flush()?;
        result.map(|_| ())
    }

    /// Prints records to `out`; returns how many.
    pub(crate) async fn consume(&self, url: &str, out: &mut (dyn Write + Send)) -> anyhow::Result<u64> {
        let client = Client::new(url)?;
        let partitions: Vec<u32> = match self.partition {
            Some(p) => vec![p],
            None => {
                let d = client
                    .json(client.request(Method::GET, &["v1", "topics", &self.topic]))
                    .await?;
                let n = d["partitions"]
                    .as_u64()
                    .context("topic description has no partition count")?;
                (0..n as u32).collect()
            }
        };
        if self.follow {
            self.follow(&client, &partitions, out).await
        } else {
            let mut printed = 0;
            for p in partitions {
                printed += self.read_partition(&client, p, printed, out).await?;
                if self.limit.is_some_and(|l| printed >= l) {
                    break;
                }
            }
            Ok(printed)
        }
    }

    fn remaining(&self, printed: u64) -> Option<u64> {
        self.limit.map(|l| l.saturating_sub(printed))
    }

    async fn read_partition(
        &self,
        client: &Client,
        p: u32,
        already: u64,
        out: &mut (dyn Write + Send),
    ) -> anyhow::Result<u64> {
        let ps = p.to_string();
        let mut offset = start_param(self);
        let mut printed = 0;
        loop {
            let page = self.remaining(already + printed).map_or(PAGE, |r| r.min(PAGE));
            if page == 0 {
                break;
            }
            let mut req = client
                .request(
                    Method::GET,
                    &["v1", "topics", &self.topic, "partitions", &ps, "records"],
                )
                .query(&[("limit", page.to_string())]);
            if let Some(o) = &offset {
                req = req.query(&[("offset", o)]);
            }
            let resp = client.json(req).await?;
            let records = resp["records"].as_array().map(Vec::as_slice).unwrap_or_default();
            for r in records {
                self.print(p, r, out)?;
                printed += 1;
            }
            out.flush()?;
            let next = resp["next_offset"].as_u64().context("no next_offset in the response")?;
            let hw = resp["high_watermark"]
                .as_u64()
                .context("no high_watermark in the response")?;
            if records.is_empty() || next >= hw {
                break;
            }
            offset = Some(next.to_string());
        }
        Ok(printed)
    }

    fn print(&self, partition: u32, r: &Value, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
        match self.format {
            Format::Json => {
                let mut r = r.clone();
                if let Some(o) = r.as_object_mut() {
                    o.insert("partition".into(), partition.into());
                }
                writeln!(out, "{r}")?;
            }
            Format::Value => {
                match (&r["value"], r["value_encoding"].as_str()) {
                    (Value::String(s), Some("base64")) => {
                        let bytes = base64::engine::general_purpose::STANDARD
                            .decode(s)
                            .context("server sent invalid base64")?;
                        out.write_all(&bytes)?;
                    }
                    (Value::String(s), _) => out.write_all(s.as_bytes())?,
                    _ => {} // a tombstone prints as an empty line
                }
                writeln!(out)?;
            }
        }
        Ok(())
    }

    async fn follow(&self, client: &Client, partitions: &[u32], out: &mut (dyn Write + Send)) -> anyhow::Result<u64> {
        let (tx, mut rx) = mpsc::channel::<anyhow::Result<(u32, Value)>>(1024);
        let mut tasks = tokio::task::JoinSet::new();
        for &p in partitions {
            let (client, topic, start, tx) = (client.clone(), self.topic.clone(), start_param(self), tx.clone());
            tasks.spawn(async move {
                if let Err(e) = tail(client, topic, p, start, tx.clone()).await {
                    let _ = tx.send(Err(e)).await;
                }
            });
        }
        drop(tx);
        let mut printed = 0;
        while self.remaining(printed) != Some(0) {
            let Some(item) = rx.recv().await else { break };
            let (p, record) = item?;
            self.print(p, &record, out)?;
            out.flush()?;
            printed += 1;
        }
        tasks.abort_all();
        Ok(printed)
    }
}

/// The server closed an event stream without an `error` event.
#[derive(Debug, thiserror::Error)]
#[error("the event stream closed")]
struct StreamClosed;

/// Worth reconnecting: a retryable server error (`unavailable`), a dropped
/// connection, or a stream closed without an error.
fn reconnectable(e: &anyhow::Error) -> bool {
    is_retryable(e) || e.chain().any(|c| c.is::<StreamClosed>() || c.is::<reqwest::Error>())
}

/// Follows one partition over SSE until an unretryable error, reconnecting
/// after the last record seen.
async fn tail(
    client: Client,
    topic: String,
    p: u32,
    start: Option<String>,
    tx: mpsc::Sender<anyhow::Result<(u32, Value)>>,
) -> anyhow::Result<()> {
    let ps = p.to_string();
    let mut last_id: Option<String> = None;
    let mut failures = 0;
    loop {
        let mut req = client.request(Method::GET, &["v1", "topics", &topic, "partitions", &ps, "subscribe"]);
        match (&last_id, &start) {
            (Some(id), _) => req = req.header("Last-Event-ID", id),
            (None, Some(o)) => req = req.query(&[("offset", o)]),
            (None, None) => {}
        }
        let outcome: anyhow::Result<()> = async {
            let resp = client.send(req).await?;
            let mut body = resp.bytes_stream();
            let mut parser = SseParser::new();
            while let Some(chunk) = body.next().await {
                for ev in parser.push(&chunk?) {
                    match ev.event.as_str() {
                        "record" => {
                            let record: Value = serde_json::from_str(&ev.data).context("bad record event")?;
                            last_id = ev.id.or_else(|| record["offset"].as_u64().map(|o| o.to_string()));
                            failures = 0;
                            if tx.send(Ok((p, record))).await.is_err() {
                                return Ok(()); // the printer is done
                            }
                        }
                        "error" => {
                            let e: Value = serde_json::from_str(&ev.data).unwrap_or_default();
                            return Err(super::ServerError {
                                status: 200,
                                code: e["code"].as_str().unwrap_or("unknown").into(),
                                message: e["message"].as_str().unwrap_or("the stream ended").into(),
                                retryable: e["retryable"].as_bool().unwrap_or(false),
                            }
                            .into());
                        }
                        _ => {}
                    }
                }
            }
            Err(StreamClosed.into())
        }
        .await;
        match outcome {
            Ok(()) => return Ok(()),
            Err(e) if tx.is_closed() => return Err(e),
            Err(e) if reconnectable(&e) => {
                failures += 1;
                if failures > MAX_RECONNECTS {
                    return Err(e.context(format!("partition {p}: gave up after {MAX_RECONNECTS} reconnects")));
                }
                tracing::debug!(partition = p, error = %e, "reconnecting");
                tokio::time::sleep(RECONNECT_DELAY).await;
            }
            Err(e) => return Err(e.context(format!("partition {p}"))),
        }
    }
}
