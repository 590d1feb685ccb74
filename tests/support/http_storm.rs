//! A fault-storm HTTP/1.1 proxy on loopback, in front of a real S3 server or
//! DynamoDB Local: it understands request and response framing
//! (`Content-Length`, `chunked`, `Expect: 100-continue`, bodiless answers),
//! so it can fail one request on a kept-alive connection the way the real
//! services fail, which the byte-level [`FaultProxy`](super::proxy) cannot.
//!
//! While a [`Storm`] is set, each request draws one fate from it (seeded):
//!
//! | fate | the client sees | the server saw the request |
//! |---|---|---|
//! | `SlowDown` | S3: 503 `SlowDown`; DynamoDB: 400 `ThrottlingException` or `ProvisionedThroughputExceededException` | no |
//! | `Conflict` | S3 conditional PUT only: 409 `ConditionalRequestConflict` | no |
//! | `Error` | S3: 500 `InternalError`; DynamoDB: 500 `InternalServerError` | no |
//! | `Reset` | the connection reset before any answer | no |
//! | `SlowBody` | the real answer, its body dribbled out over seconds | yes |
//! | `ResetMidBody` | the real answer's head and half its body, then a reset | yes |
//! | `LostReply` | writes only: nothing, then a reset after `lost_reply_hold` (a timeout if the client's is shorter) | yes, and it applied |
//!
//! [`StormProxy::stats`] counts each fate as it is dealt, so a test can show
//! that every kind happened.

#![allow(dead_code)]

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// Which service's errors to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    S3,
    DynamoDb,
}

/// The chance of each fate per request; what is left passes untouched.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Storm {
    pub slowdown: f64,
    pub conflict: f64,
    pub error: f64,
    pub reset: f64,
    pub slow_body: f64,
    pub reset_mid_body: f64,
    pub lost_reply: f64,
}

impl Storm {
    /// No faults.
    pub const CALM: Storm = Storm {
        slowdown: 0.0,
        conflict: 0.0,
        error: 0.0,
        reset: 0.0,
        slow_body: 0.0,
        reset_mid_body: 0.0,
        lost_reply: 0.0,
    };

    /// Every fate at once: a seventh of `share` each, but a third for
    /// `LostReply`, which only writes can draw (they are few beside the
    /// reads that tail a log), so that a storm loses some replies.
    pub fn all(share: f64) -> Storm {
        let each = share / 7.0;
        Storm {
            slowdown: each,
            conflict: each,
            error: each,
            reset: each,
            slow_body: each,
            reset_mid_body: each,
            lost_reply: share / 3.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fate {
    Pass,
    SlowDown,
    Conflict,
    Error,
    Reset,
    SlowBody,
    ResetMidBody,
    LostReply,
}

impl Fate {
    pub const FAULTS: [Fate; 7] = [
        Fate::SlowDown,
        Fate::Conflict,
        Fate::Error,
        Fate::Reset,
        Fate::SlowBody,
        Fate::ResetMidBody,
        Fate::LostReply,
    ];
}

/// Fates dealt since the proxy started, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StormStats {
    pub counts: std::collections::BTreeMap<Fate, u64>,
}

impl StormStats {
    pub fn get(&self, f: Fate) -> u64 {
        self.counts.get(&f).copied().unwrap_or(0)
    }
}

struct State {
    storm: Storm,
    rng: SmallRng,
    stats: StormStats,
}

/// How long a `LostReply` keeps the client waiting before the reset.
const LOST_REPLY_HOLD: Duration = Duration::from_secs(3);
/// A `SlowBody` answer's body goes out in this many pieces...
const SLOW_PIECES: u64 = 8;
/// ...spread over this long.
const SLOW_SPAN: Duration = Duration::from_millis(2400);
/// A request or response head larger than this is refused (a test proxy,
/// but bounded all the same).
const MAX_HEAD: usize = 64 * 1024;

pub struct StormProxy {
    pub addr: SocketAddr,
    pub upstream: SocketAddr,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl StormProxy {
    /// Listen on a free loopback port and forward to `upstream`, calm.
    pub async fn start(upstream: SocketAddr, flavor: Flavor, seed: u64) -> std::io::Result<StormProxy> {
        Self::start_on("127.0.0.1:0".parse().unwrap(), upstream, flavor, seed).await
    }

    /// As [`start`](Self::start), listening on `listen`.
    pub async fn start_on(
        listen: SocketAddr,
        upstream: SocketAddr,
        flavor: Flavor,
        seed: u64,
    ) -> std::io::Result<StormProxy> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            storm: Storm::CALM,
            rng: SmallRng::seed_from_u64(seed),
            stats: StormStats::default(),
        }));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        let _ = client.set_nodelay(true);
                        conns.spawn(connection(client, upstream, flavor, shared.clone()));
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Ok(StormProxy {
            addr,
            upstream,
            state,
            task,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set(&self, storm: Storm) {
        self.state.lock().unwrap().storm = storm;
    }

    pub fn stats(&self) -> StormStats {
        self.state.lock().unwrap().stats.clone()
    }
}

impl Drop for StormProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One request's head, as read.
struct Head {
    raw: Vec<u8>,
    method: String,
    /// Status code, for a response head.
    status: u16,
    content_length: Option<u64>,
    chunked: bool,
    expect_continue: bool,
    conditional: bool,
    /// DynamoDB's operation (`X-Amz-Target`, after the dot).
    target: String,
    close: bool,
}

impl Head {
    fn is_write(&self, flavor: Flavor) -> bool {
        match flavor {
            Flavor::S3 => matches!(self.method.as_str(), "PUT" | "POST" | "DELETE"),
            Flavor::DynamoDb => {
                self.target.contains("Put")
                    || self.target.contains("Delete")
                    || self.target.contains("Update")
                    || self.target.contains("Write")
            }
        }
    }
}

/// Read a head up to its blank line; `None` on a clean end before any byte.
async fn read_head<R: AsyncReadExt + Unpin>(r: &mut R) -> std::io::Result<Option<Head>> {
    let mut raw = Vec::with_capacity(512);
    let mut byte = [0u8; 1];
    loop {
        if r.read(&mut byte).await? == 0 {
            if raw.is_empty() {
                return Ok(None);
            }
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        raw.push(byte[0]);
        if raw.ends_with(b"\r\n\r\n") {
            break;
        }
        if raw.len() > MAX_HEAD {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut words = first.split(' ');
    let w0 = words.next().unwrap_or_default().to_string();
    let w1 = words.next().unwrap_or_default();
    let (method, status) = if w0.starts_with("HTTP/") {
        (String::new(), w1.parse().unwrap_or(0))
    } else {
        (w0, 0)
    };
    let mut head = Head {
        raw,
        method,
        status,
        content_length: None,
        chunked: false,
        expect_continue: false,
        conditional: false,
        target: String::new(),
        close: false,
    };
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        match name.as_str() {
            "content-length" => head.content_length = value.parse().ok(),
            "transfer-encoding" => head.chunked = value.to_ascii_lowercase().contains("chunked"),
            "expect" => head.expect_continue = value.eq_ignore_ascii_case("100-continue"),
            "if-none-match" | "if-match" => head.conditional = true,
            "x-amz-target" => head.target = value.rsplit('.').next().unwrap_or_default().to_string(),
            "connection" => head.close = value.eq_ignore_ascii_case("close"),
            _ => {}
        }
    }
    Ok(Some(head))
}

/// Read a body framed as `head` says, whole (test traffic is small).
/// `until_close` bodies (a response with neither length nor chunking) read
/// to the end of the stream.
async fn read_body<R: AsyncReadExt + Unpin>(r: &mut R, head: &Head, until_close: bool) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    if head.chunked {
        // Kept in its chunked form: it is forwarded as it came.
        loop {
            let line = read_line(r).await?;
            body.extend_from_slice(&line);
            let size_text = String::from_utf8_lossy(&line);
            let size_text = size_text.trim().split(';').next().unwrap_or_default().to_string();
            let size = u64::from_str_radix(&size_text, 16).map_err(|_| std::io::ErrorKind::InvalidData)?;
            if size == 0 {
                // Trailers, up to a blank line.
                loop {
                    let t = read_line(r).await?;
                    body.extend_from_slice(&t);
                    if t == b"\r\n" {
                        return Ok(body);
                    }
                }
            }
            let start = body.len();
            body.resize(start + size as usize + 2, 0);
            r.read_exact(&mut body[start..]).await?;
        }
    } else if let Some(n) = head.content_length {
        body.resize(n as usize, 0);
        r.read_exact(&mut body).await?;
    } else if until_close {
        r.read_to_end(&mut body).await?;
    }
    Ok(body)
}

async fn read_line<R: AsyncReadExt + Unpin>(r: &mut R) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        if r.read(&mut byte).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        line.push(byte[0]);
        if line.len() > MAX_HEAD {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    }
    Ok(line)
}

fn deal(state: &Mutex<State>, head: &Head, flavor: Flavor) -> Fate {
    let mut s = state.lock().unwrap();
    let storm = s.storm;
    let x: f64 = s.rng.random();
    let mut edge = 0.0;
    let mut fate = Fate::Pass;
    for (f, p) in [
        (Fate::SlowDown, storm.slowdown),
        (Fate::Conflict, storm.conflict),
        (Fate::Error, storm.error),
        (Fate::Reset, storm.reset),
        (Fate::SlowBody, storm.slow_body),
        (Fate::ResetMidBody, storm.reset_mid_body),
        (Fate::LostReply, storm.lost_reply),
    ] {
        edge += p;
        if x < edge {
            fate = f;
            break;
        }
    }
    // Fates that only fit some requests pass the others untouched.
    let fits = match fate {
        Fate::Conflict => flavor == Flavor::S3 && head.method == "PUT" && head.conditional,
        Fate::LostReply => head.is_write(flavor),
        _ => true,
    };
    let fate = if fits { fate } else { Fate::Pass };
    if fate != Fate::Pass {
        *s.stats.counts.entry(fate).or_default() += 1;
    }
    fate
}

fn error_answer(flavor: Flavor, fate: Fate, n: u64) -> Vec<u8> {
    let (status, content_type, body) = match (flavor, fate) {
        (Flavor::S3, Fate::SlowDown) => (
            503,
            "application/xml",
            s3_error("SlowDown", "Please reduce your request rate."),
        ),
        (Flavor::S3, Fate::Conflict) => (
            409,
            "application/xml",
            s3_error(
                "ConditionalRequestConflict",
                "A conflicting conditional operation is currently in progress against this resource.",
            ),
        ),
        (Flavor::S3, _) => (
            500,
            "application/xml",
            s3_error("InternalError", "We encountered an internal error. Please try again."),
        ),
        (Flavor::DynamoDb, Fate::SlowDown) => {
            let kind = if n.is_multiple_of(2) {
                "ThrottlingException"
            } else {
                "ProvisionedThroughputExceededException"
            };
            (
                400,
                "application/x-amz-json-1.0",
                format!(
                    r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{kind}","message":"Rate of requests exceeds the allowed throughput."}}"#
                ),
            )
        }
        (Flavor::DynamoDb, _) => (
            500,
            "application/x-amz-json-1.0",
            r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}"#
                .to_string(),
        ),
    };
    let reason = match status {
        400 => "Bad Request",
        409 => "Conflict",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nx-amz-request-id: storm{n}\r\nconnection: keep-alive\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn s3_error(code: &str, message: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}</Message><RequestId>storm</RequestId></Error>"#
    )
}

/// Close with a TCP reset rather than a clean end.
fn reset(s: TcpStream) {
    let _ = s.set_zero_linger();
    drop(s);
}

async fn connection(client: TcpStream, upstream: SocketAddr, flavor: Flavor, state: Arc<Mutex<State>>) {
    let mut client = BufReader::new(client);
    let mut server: Option<BufReader<TcpStream>> = None;
    let mut n = 0u64;
    loop {
        n += 1;
        let Ok(Some(req)) = read_head(&mut client).await else {
            return;
        };
        let fate = deal(&state, &req, flavor);
        match fate {
            Fate::Reset => return reset(client.into_inner()),
            Fate::SlowDown | Fate::Conflict | Fate::Error => {
                // Answered without the server. The body is read first, so
                // the connection stays in step, unless the client waits for
                // a 100 Continue: then the answer comes instead of it.
                let closing = req.expect_continue || req.close;
                if !req.expect_continue && read_body(&mut client, &req, false).await.is_err() {
                    return;
                }
                if client
                    .get_mut()
                    .write_all(&error_answer(flavor, fate, n))
                    .await
                    .is_err()
                    || closing
                {
                    return;
                }
                continue;
            }
            _ => {}
        }
        // Forwarded: over this connection's own server connection.
        if server.is_none() {
            let Ok(s) = TcpStream::connect(upstream).await else {
                return reset(client.into_inner());
            };
            let _ = s.set_nodelay(true);
            server = Some(BufReader::new(s));
        }
        let srv = server.as_mut().unwrap();
        if srv.get_mut().write_all(&req.raw).await.is_err() {
            return;
        }
        let mut answer = None;
        if req.expect_continue {
            // The server's interim answer, or its final one at once.
            let Ok(Some(h)) = read_head(srv).await else { return };
            if h.status == 100 {
                if client.get_mut().write_all(&h.raw).await.is_err() {
                    return;
                }
            } else {
                answer = Some(h);
            }
        }
        if answer.is_none() {
            let Ok(body) = read_body(&mut client, &req, false).await else {
                return;
            };
            if srv.get_mut().write_all(&body).await.is_err() {
                return;
            }
        }
        let resp = match answer {
            Some(h) => h,
            None => loop {
                let Ok(Some(h)) = read_head(srv).await else { return };
                if h.status != 100 {
                    break h;
                }
            },
        };
        let bodiless = req.method == "HEAD" || resp.status == 204 || resp.status == 304 || resp.status < 200;
        let body = if bodiless {
            Vec::new()
        } else {
            match read_body(srv, &resp, true).await {
                Ok(b) => b,
                Err(_) => return,
            }
        };
        let server_closed = resp.close || (!bodiless && !resp.chunked && resp.content_length.is_none());
        if server_closed {
            server = None;
        }
        let c = client.get_mut();
        match fate {
            Fate::LostReply => {
                tokio::time::sleep(LOST_REPLY_HOLD).await;
                return reset(client.into_inner());
            }
            Fate::ResetMidBody => {
                let _ = c.write_all(&resp.raw).await;
                let _ = c.write_all(&body[..body.len() / 2]).await;
                let _ = c.flush().await;
                return reset(client.into_inner());
            }
            Fate::SlowBody => {
                if c.write_all(&resp.raw).await.is_err() {
                    return;
                }
                let piece = (body.len() as u64).div_ceil(SLOW_PIECES).max(1) as usize;
                for chunk in body.chunks(piece) {
                    tokio::time::sleep(SLOW_SPAN / SLOW_PIECES as u32).await;
                    if c.write_all(chunk).await.is_err() {
                        return;
                    }
                }
                if body.is_empty() {
                    tokio::time::sleep(SLOW_SPAN).await;
                }
            }
            _ => {
                if c.write_all(&resp.raw).await.is_err() || c.write_all(&body).await.is_err() {
                    return;
                }
            }
        }
        if server_closed || req.close {
            return;
        }
    }
}
