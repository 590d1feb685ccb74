//! The HTTP client commands of the `sluice` binary (see
//! `design/operations.md`): `topics`, `produce`, `consume` and `admin`.
//!
//! Each command is a clap type with `run(self, url)`; the binary parses
//! [`ClientArgs`] for the server URL and calls it. Errors carry the server's
//! code and message ([`ServerError`]), so `main` can print them and exit
//! non-zero.
//!
//! # Layout
//!
//! - [`topics`]: `topics create / list / describe / delete`.
//! - [`produce`]: lines from stdin or a file, one record each, in batches.
//! - [`consume`]: pages through partitions, or follows them over SSE.
//! - [`admin`]: `admin nodes`.
//! - [`tokens`]: `tokens issue / list / revoke`.
//! - [`sse`]: a small incremental `text/event-stream` parser.

pub mod admin;
pub mod consume;
pub mod produce;
pub mod sse;
pub mod tokens;
pub mod topics;

pub use admin::AdminCmd;
pub use consume::ConsumeArgs;
pub use produce::ProduceArgs;
pub use tokens::TokensCmd;
pub use topics::TopicsCmd;

use anyhow::Context;
use serde_json::Value;
use std::fmt;

/// Where the server is, for every client command.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientArgs {
    /// Base URL of a Sluice node's HTTP API.
    #[arg(long, env = "SLUICE_URL", default_value = "http://127.0.0.1:8080", global = true)]
    pub url: String,

    /// Bearer token for a server with --auth on (prefer --token-file: an
    /// environment variable does not show in `ps`, a flag would).
    #[arg(long = "token-file", env = "SLUICE_TOKEN_FILE", global = true)]
    pub token_file: Option<String>,
}

/// The token every [`Client`] of this process sends (set once by `main`).
static TOKEN: std::sync::OnceLock<crate::auth::Secret> = std::sync::OnceLock::new();

impl ClientArgs {
    /// Make later requests carry the token from `--token-file`, or else
    /// from the `SLUICE_TOKEN` environment variable.
    pub fn install_token(&self) -> anyhow::Result<()> {
        let token = match &self.token_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("--token-file {path:?} cannot be read"))?
                    .trim()
                    .to_string(),
            ),
            None => std::env::var("SLUICE_TOKEN").ok(),
        };
        if let Some(t) = token.filter(|t| !t.is_empty()) {
            let _ = TOKEN.set(crate::auth::Secret::new(t));
        }
        Ok(())
    }
}

/// An error answer from the server: `{"error": {"code", "message", "retryable"}}`.
#[derive(Debug, Clone)]
pub struct ServerError {
    pub status: u16,
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} (HTTP {})", self.code, self.message, self.status)
    }
}

impl std::error::Error for ServerError {}

/// Whether an error is worth retrying: a retryable server error or a
/// connection failure.
pub fn is_retryable(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<ServerError>().is_some_and(|s| s.retryable)
            || c.downcast_ref::<reqwest::Error>()
                .is_some_and(|r| r.is_connect() || r.is_timeout() || r.is_body())
    })
}

/// A thin client over one node's HTTP API.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    base: reqwest::Url,
}

impl Client {
    pub fn new(url: &str) -> anyhow::Result<Self> {
        let base = reqwest::Url::parse(url).with_context(|| format!("--url {url:?} is not a URL"))?;
        if base.cannot_be_a_base() {
            anyhow::bail!("--url {url:?} is not an http:// URL");
        }
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(token) = TOKEN.get() {
            let mut v = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", token.expose()))
                .context("the token is not a valid header value")?;
            v.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, v);
        }
        Ok(Self {
            http: reqwest::Client::builder().default_headers(headers).build()?,
            base,
        })
    }

    /// The URL of `segments` (each percent-encoded) below the base URL.
    pub fn url(&self, segments: &[&str]) -> reqwest::Url {
        let mut url = self.base.clone();
        {
            let mut path = url.path_segments_mut().expect("checked in new");
            path.pop_if_empty();
            path.extend(segments);
        }
        url
    }

    pub fn request(&self, method: reqwest::Method, segments: &[&str]) -> reqwest::RequestBuilder {
        self.http.request(method, self.url(segments))
    }

    /// Sends a request; a non-2xx answer becomes a [`ServerError`].
    pub async fn send(&self, req: reqwest::RequestBuilder) -> anyhow::Result<reqwest::Response> {
        let req = req.build()?;
        let what = format!("{} {}", req.method(), req.url());
        let resp = self.http.execute(req).await.with_context(|| format!("{what} failed"))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let parsed: Option<Value> = serde_json::from_str(&text).ok();
        let err = match parsed.as_ref().map(|v| &v["error"]) {
            Some(e) if e.is_object() => ServerError {
                status,
                code: e["code"].as_str().unwrap_or("unknown").to_string(),
                message: e["message"].as_str().unwrap_or_default().to_string(),
                retryable: e["retryable"].as_bool().unwrap_or(false),
            },
            _ => ServerError {
                status,
                code: "http_error".into(),
                message: if text.is_empty() {
                    format!("{what} answered {status}")
                } else {
                    text
                },
                retryable: status == 503 || status == 429,
            },
        };
        Err(err.into())
    }

    pub async fn json(&self, req: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let resp = self.send(req).await?;
        Ok(resp.json().await?)
    }
}

/// Left-aligned text table with a header row.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

#[cfg(test)]
mod tests;
