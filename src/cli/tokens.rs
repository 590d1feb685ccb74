//! `sluice tokens issue / list / revoke`: token administration over
//! `/v1/tokens` (needs an admin token: `--token-file` or `SLUICE_TOKEN`).

use super::topics::text;
use super::{table, Client};
use reqwest::Method;
use serde_json::{json, Value};
use std::io::Write;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum TokensCmd {
    /// Issue a token. Its secret is printed once, on stdout; keep it.
    Issue {
        /// A label for people (e.g. ci, orders-consumer).
        name: String,
        /// GLOB=OPS, e.g. 'orders*=read,write'; repeat for several scopes.
        /// Ops: read, write, admin.
        #[arg(long = "scope", required = true)]
        scopes: Vec<String>,
        /// Refuse the token after this many seconds (default: never).
        #[arg(long)]
        expires_in_sec: Option<u64>,
    },
    /// List tokens (ids, names, scopes, expiry; never secrets).
    List,
    /// Revoke a token by id; every node refuses it once it applies the revocation.
    Revoke {
        /// The token id (from `tokens list`).
        id: String,
    },
}

/// `GLOB=op,op` as a scope object.
pub fn parse_scope(s: &str) -> anyhow::Result<Value> {
    let (glob, ops) = s
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!("--scope {s:?} must look like 'orders*=read,write'"))?;
    let ops: Vec<&str> = ops.split(',').map(str::trim).filter(|o| !o.is_empty()).collect();
    for op in &ops {
        if !matches!(*op, "read" | "write" | "admin") {
            anyhow::bail!("--scope {s:?}: unknown op {op:?}; use read, write or admin");
        }
    }
    Ok(json!({ "topics": glob, "ops": ops }))
}

impl TokensCmd {
    pub async fn run(self, url: &str) -> anyhow::Result<()> {
        let mut out = std::io::stdout();
        self.run_to(url, &mut out).await
    }

    pub(crate) async fn run_to(self, url: &str, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
        let client = Client::new(url)?;
        match self {
            TokensCmd::Issue {
                name,
                scopes,
                expires_in_sec,
            } => {
                let scopes = scopes
                    .iter()
                    .map(|s| parse_scope(s))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let mut body = json!({ "name": name, "scopes": scopes });
                if let Some(s) = expires_in_sec {
                    body["expires_in_sec"] = json!(s);
                }
                let v = client
                    .json(client.request(Method::POST, &["v1", "tokens"]).json(&body))
                    .await?;
                eprintln!("issued token {} (shown once; store it now)", text(&v["id"]));
                writeln!(out, "{}", text(&v["token"]))?;
            }
            TokensCmd::List => {
                let v = client.json(client.request(Method::GET, &["v1", "tokens"])).await?;
                let rows: Vec<Vec<String>> = v["tokens"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(|t| {
                        let scopes: Vec<String> = t["scopes"]
                            .as_array()
                            .map(Vec::as_slice)
                            .unwrap_or_default()
                            .iter()
                            .map(|s| {
                                let ops: Vec<String> = s["ops"]
                                    .as_array()
                                    .map(Vec::as_slice)
                                    .unwrap_or_default()
                                    .iter()
                                    .map(text)
                                    .collect();
                                format!("{}={}", text(&s["topics"]), ops.join(","))
                            })
                            .collect();
                        let expires = match &t["expires_at"] {
                            Value::Null => "never".to_string(),
                            e if t["expired"] == true => format!("{} (expired)", text(e)),
                            e => text(e),
                        };
                        vec![text(&t["id"]), text(&t["name"]), scopes.join(" "), expires]
                    })
                    .collect();
                write!(out, "{}", table(&["ID", "NAME", "SCOPES", "EXPIRES_AT_MS"], &rows))?;
            }
            TokensCmd::Revoke { id } => {
                client
                    .send(client.request(Method::DELETE, &["v1", "tokens", &id]))
                    .await?;
                writeln!(out, "revoked token {id}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse_from_glob_equals_ops() {
        assert_eq!(
            parse_scope("orders*=read,write").unwrap(),
            json!({"topics": "orders*", "ops": ["read", "write"]})
        );
        assert!(parse_scope("orders*").is_err());
        assert!(parse_scope("orders=fly")
            .unwrap_err()
            .to_string()
            .contains("unknown op"));
    }
}
