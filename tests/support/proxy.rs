//! A fault-injecting TCP proxy on loopback, to cut one node off a store.
//!
//! Point a node at [`FaultProxy::url`] instead of the store's endpoint; then
//! [`set`](FaultProxy::set) the proxy's [`Mode`]:
//!
//! - `Pass`: bytes flow both ways.
//! - `Blackhole`: a network partition. Nothing flows: open connections stall
//!   (the client's own timeouts fire, or not), new connections are accepted
//!   but not forwarded. On `Pass` again everything resumes where it stopped,
//!   as TCP does when a partition heals — so a request sent before the cut
//!   may reach the server long after it was sent.
//! - `Refuse`: the server is down. Open connections are closed, new ones
//!   are closed as soon as they are accepted.

#![allow(dead_code)]

use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Blackhole,
    Refuse,
}

pub struct FaultProxy {
    pub addr: SocketAddr,
    pub upstream: SocketAddr,
    mode: watch::Sender<Mode>,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// Listen on a free loopback port and forward to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<FaultProxy> {
        Self::start_on("127.0.0.1:0".parse().unwrap(), upstream).await
    }

    /// As [`start`](Self::start), listening on `listen`.
    pub async fn start_on(listen: SocketAddr, upstream: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let (mode, rx) = watch::channel(Mode::Pass);
        let task = tokio::spawn(async move {
            // Dropping the set (when this task is aborted) aborts every connection.
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        let _ = client.set_nodelay(true);
                        conns.spawn(connection(client, upstream, rx.clone()));
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Ok(FaultProxy {
            addr,
            upstream,
            mode,
            task,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    pub fn mode(&self) -> Mode {
        *self.mode.borrow()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Wait until the mode lets bytes through: `false` if the connection must close.
async fn passable(mode: &mut watch::Receiver<Mode>) -> bool {
    loop {
        match *mode.borrow_and_update() {
            Mode::Pass => return true,
            Mode::Refuse => return false,
            Mode::Blackhole => {}
        }
        if mode.changed().await.is_err() {
            return false;
        }
    }
}

async fn connection(client: TcpStream, upstream: SocketAddr, mut mode: watch::Receiver<Mode>) {
    if !passable(&mut mode).await {
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    // Either direction ending on `Refuse` ends both: the halves drop and the
    // sockets close.
    let (up, down) = (mode.clone(), mode.clone());
    tokio::select! {
        _ = async { tokio::join!(pipe(cr, sw, up), pipe(sr, cw, down)) } => {}
        _ = async { while mode.changed().await.is_ok() && *mode.borrow() != Mode::Refuse {} } => {}
    }
}

async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut mode: watch::Receiver<Mode>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !passable(&mut mode).await {
            return;
        }
        tokio::select! {
            n = from.read(&mut buf) => match n {
                Ok(0) | Err(_) => {
                    let _ = to.shutdown().await;
                    return;
                }
                Ok(n) => {
                    if to.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            },
            changed = mode.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}
