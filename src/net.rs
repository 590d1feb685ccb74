//! What both listeners (HTTP and Kafka) share at the transport level: TLS
//! (rustls with the aws-lc-rs provider the AWS SDK already uses), caps on
//! concurrent connections (in all and per client address), and the
//! timeouts that keep a slow or silent client from holding a connection
//! forever.
//!
//! The HTTP listener's accept loop lives here too ([`serve_http`]): it is
//! hyper's HTTP/1 connection driver with a header-read timeout, a header
//! size cap, a stalled-body timeout, the connection cap and optional TLS.
//! The Kafka listener (`kafka::serve`) uses [`Transport`] the same way.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The crypto provider of every TLS config Sluice builds: the one the AWS
/// SDK's rustls already links, so no second crypto library is built.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn read_certs(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{flag} {}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{flag} {}: no PEM certificate in the file", path.display()));
    }
    Ok(certs)
}

/// TLS settings of a node: the server side of both listeners and the client
/// side of inter-node forwarding.
#[derive(Clone)]
pub struct Tls {
    pub server: Arc<rustls::ServerConfig>,
    /// Trusts `--tls-ca` when given, else every certificate in `--tls-cert`
    /// (a self-signed certificate shared by the cluster, or a chain whose
    /// last certificate is the CA).
    pub client: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls { .. }")
    }
}

impl Tls {
    /// Loads PEM files; the error names the flag and the file.
    pub fn load(cert: &Path, key: &Path, ca: Option<&Path>) -> Result<Self, String> {
        let chain = read_certs(cert, "--tls-cert")?;
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_no_client_auth()
            .with_single_cert(chain.clone(), key)
            .map_err(|e| format!("--tls-cert/--tls-key: {e}"))?;
        let anchors = match ca {
            Some(ca) => read_certs(ca, "--tls-ca")?,
            None => chain,
        };
        let mut roots = rustls::RootCertStore::empty();
        for c in anchors {
            roots
                .add(c)
                .map_err(|e| format!("{}: {e}", if ca.is_some() { "--tls-ca" } else { "--tls-cert" }))?;
        }
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }
}

/// Transport settings of one listener.
#[derive(Debug, Clone)]
pub struct Transport {
    pub tls: Option<Tls>,
    /// Connections open at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Connections open at once from one client address (the same rule).
    pub max_connections_per_ip: usize,
    /// A TLS handshake, an HTTP request head, a Kafka frame once its first
    /// byte arrived, or a gap inside an HTTP body may take this long.
    pub read_timeout: Duration,
    /// A Kafka connection with no request for this long is closed
    /// (Kafka's `connections.max.idle.ms`).
    pub idle_timeout: Duration,
    /// Largest HTTP request head (request line + headers).
    pub max_header_bytes: usize,
    /// An HTTP request body must be complete this long after it started,
    /// however steadily it trickles in.
    pub body_timeout: Duration,
}

impl Transport {
    /// Plaintext, generous limits: for listeners embedded in tests.
    pub fn plain() -> Self {
        Self {
            tls: None,
            max_connections: 4096,
            max_connections_per_ip: 4096,
            read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(600),
            max_header_bytes: 64 * 1024,
            body_timeout: Duration::from_secs(60),
        }
    }
}

/// Counts open connections of one listener, in all and per client address.
#[derive(Debug, Clone)]
pub struct ConnLimit {
    slots: Arc<Semaphore>,
    /// Open connections per client address; an address with none has no entry.
    per_ip: Arc<std::sync::Mutex<HashMap<IpAddr, usize>>>,
    listener: &'static str,
}

/// One admitted connection: its slot, and its count against its address.
/// Dropping it (when the connection ends) gives both back.
#[derive(Debug)]
pub struct Admitted {
    _slot: OwnedSemaphorePermit,
    per_ip: Arc<std::sync::Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut per_ip = self.per_ip.lock().unwrap();
        if let Some(n) = per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                per_ip.remove(&self.ip);
            }
        }
    }
}

impl ConnLimit {
    pub fn new(listener: &'static str, max: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max.min(Semaphore::MAX_PERMITS))),
            per_ip: Arc::default(),
            listener,
        }
    }

    /// A slot for a new connection from `peer`, or `None` at the listener's
    /// cap or at `max_per_ip` connections from that address (the caller
    /// drops the socket, which closes it; open connections are not
    /// affected). An IPv4 address seen as IPv6 (`::ffff:a.b.c.d`) counts as
    /// the IPv4 one.
    pub fn admit(&self, peer: IpAddr, max_per_ip: usize) -> Option<Admitted> {
        let ip = peer.to_canonical();
        let refused = |reason| {
            crate::telemetry::count(
                "sluice_connections_refused_total",
                &[("listener", self.listener), ("reason", reason)],
            );
            None
        };
        let mut per_ip = self.per_ip.lock().unwrap();
        let open = per_ip.get(&ip).copied().unwrap_or(0);
        if open >= max_per_ip {
            return refused("per_ip");
        }
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            return refused("max_connections");
        };
        per_ip.insert(ip, open + 1);
        Some(Admitted {
            _slot: slot,
            per_ip: self.per_ip.clone(),
            ip,
        })
    }
}

/// A plaintext or TLS server stream.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Stream {
    /// The TLS handshake (when configured), bounded by `read_timeout`: a
    /// client that speaks plaintext to a TLS port fails here, cleanly.
    pub async fn accept(socket: TcpStream, transport: &Transport) -> io::Result<Self> {
        let _ = socket.set_nodelay(true);
        let Some(tls) = &transport.tls else {
            return Ok(Stream::Plain(socket));
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.server.clone());
        match tokio::time::timeout(transport.read_timeout, acceptor.accept(socket)).await {
            Ok(Ok(s)) => Ok(Stream::Tls(Box::new(s))),
            Ok(Err(e)) => Err(io::Error::new(e.kind(), format!("TLS handshake failed: {e}"))),
            Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out")),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A request body whose sender must keep sending: a gap of `timeout`
/// between frames, or the whole body taking longer than `total`, ends the
/// body with an error (the handler answers 400 and hyper closes the
/// connection, since the body was not read to its end).
pub struct StallTimeout<B> {
    inner: B,
    timeout: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    total: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl<B> StallTimeout<B> {
    pub fn new(inner: B, timeout: Duration, total: Duration) -> Self {
        Self {
            inner,
            timeout,
            timer: Box::pin(tokio::time::sleep(timeout)),
            total,
            deadline: Box::pin(tokio::time::sleep(total)),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BodyStalled {
    #[error("the client sent no request body bytes for {0:?}")]
    Gap(Duration),
    #[error("the request body was not complete within {0:?} (--request-body-timeout-sec)")]
    Total(Duration),
}

impl<B> Body for StallTimeout<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyStalled::Total(this.total)))));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let deadline = tokio::time::Instant::now() + this.timeout;
                this.timer.as_mut().reset(deadline);
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyStalled::Gap(this.timeout))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Connections accepted past `--max-connections` only to answer a probe:
/// each may send one request, its head within [`PROBE_HEAD_TIMEOUT`], and
/// only `/health` and `/ready` are served (anything else is 503). So a
/// load balancer or supervisor can still see the node while clients hold
/// every ordinary slot, and a probe connection cannot be held for long.
pub const PROBE_SLOTS: usize = 64;
/// Probe slots one client address may hold, so one address cannot take them all.
pub const PROBE_SLOTS_PER_IP: usize = 8;
pub const PROBE_HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether `path` is answered on a probe connection.
pub fn is_probe(path: &str) -> bool {
    matches!(path, "/health" | "/ready")
}

/// Serve one probe request on `stream` (see [`PROBE_SLOTS`]).
async fn serve_probe(stream: Stream, router: axum::Router, peer: std::net::SocketAddr) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(PROBE_HEAD_TIMEOUT)
        .keep_alive(false)
        .max_buf_size(8192);
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let mut router = router.clone();
        async move {
            if is_probe(req.uri().path()) {
                let req = req.map(|_| axum::body::Body::empty());
                return tower::Service::call(&mut router, req).await;
            }
            let e = crate::api::ApiError::unavailable(
                "the node is at --max-connections; on a connection past the cap only /health and /ready are answered",
            );
            // The front door's 503: the public error body and `Retry-After`.
            let mut resp = axum::response::IntoResponse::into_response((
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(e.body()),
            ));
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
            Ok(resp)
        }
    });
    let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    let overall = PROBE_HEAD_TIMEOUT * 3;
    match tokio::time::timeout(overall, conn).await {
        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "probe connection ended"),
        Err(_) => tracing::debug!(%peer, "probe connection cut off"),
        Ok(Ok(())) => {}
    }
}

/// Serve `router` on `listener` until `stop` resolves; then stop accepting,
/// let open connections finish their requests, and return when they have.
pub async fn serve_http(
    listener: TcpListener,
    router: axum::Router,
    transport: Transport,
    stop: impl Future<Output = ()> + Send,
) {
    let limit = ConnLimit::new("http", transport.max_connections);
    let probes = ConnLimit::new("http_probe", PROBE_SLOTS);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(transport.read_timeout)
        // hyper's read buffer bounds the request head; the smallest it allows is 8 KiB.
        .max_buf_size(transport.max_header_bytes.max(8192));
    let builder = Arc::new(builder);
    let transport = Arc::new(transport);
    tokio::pin!(stop);
    loop {
        let (socket, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, usually: back off rather than spin.
                    tracing::warn!(error = %e, "http accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let Some(permit) = limit.admit(peer.ip(), transport.max_connections_per_ip) else {
            if let Some(probe) = probes.admit(peer.ip(), PROBE_SLOTS_PER_IP) {
                let (router, transport) = (router.clone(), transport.clone());
                tokio::spawn(async move {
                    let _probe = probe;
                    if let Ok(stream) = Stream::accept(socket, &transport).await {
                        serve_probe(stream, router, peer).await;
                    }
                });
            } else {
                tracing::debug!(%peer, "http connection refused: at --max-connections or --max-connections-per-ip");
                drop(socket);
            }
            continue;
        };
        let (router, builder, transport) = (router.clone(), builder.clone(), transport.clone());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _permit = permit;
            let stream = match Stream::accept(socket, &transport).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::info!(%peer, error = %e, "http connection closed");
                    return;
                }
            };
            let (stall, total) = (transport.read_timeout, transport.body_timeout);
            let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let mut router = router.clone();
                let req = req.map(|b| axum::body::Body::new(StallTimeout::new(b, stall, total)));
                async move { tower::Service::call(&mut router, req).await }
            });
            let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            // Upgrades are not used; SSE is a plain streamed response.
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %e, "http connection ended");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn the_connection_cap_admits_up_to_max_and_frees_on_drop() {
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let limit = ConnLimit::new("test", 2);
        let a = limit.admit(ip, 10).expect("first");
        let _b = limit.admit(ip, 10).expect("second");
        assert!(limit.admit(ip, 10).is_none(), "third is over the cap");
        drop(a);
        assert!(limit.admit(ip, 10).is_some(), "a closed connection frees its slot");
    }

    #[test]
    fn one_address_gets_at_most_its_share_and_others_still_get_in() {
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let limit = ConnLimit::new("test", 10);
        let from_a: Vec<Admitted> = (0..3).map(|_| limit.admit(a, 3).expect("within a's share")).collect();
        assert!(limit.admit(a, 3).is_none(), "a's fourth is over the per-address cap");
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert!(
            limit.admit(mapped, 3).is_none(),
            "the IPv4-mapped form is the same address"
        );
        let _from_b = limit.admit(b, 3).expect("another address still gets in");
        drop(from_a);
        assert!(limit.per_ip.lock().unwrap().get(&a).is_none(), "no entry is left for a");
        assert!(
            limit.admit(a, 3).is_some(),
            "closed connections give the address its share back"
        );
        // A refusal at the per-address cap takes no slot of the listener.
        let limit = ConnLimit::new("test", 2);
        let _one = limit.admit(a, 1).unwrap();
        for _ in 0..5 {
            assert!(limit.admit(a, 1).is_none());
        }
        assert!(limit.admit(b, 1).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_ends_with_an_error_and_a_flowing_one_does_not() {
        let (mut tx, rx) = futures::channel::mpsc::channel::<Result<Frame<Bytes>, io::Error>>(4);
        let body = StallTimeout::new(
            http_body_util::StreamBody::new(rx),
            Duration::from_secs(5),
            Duration::from_secs(60),
        );
        let reader = tokio::spawn(async move { body.collect().await.map(|c| c.to_bytes()) });
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(4)).await;
            futures::SinkExt::send(&mut tx, Ok(Frame::data(Bytes::from_static(b"x"))))
                .await
                .unwrap();
        }
        // 12 s in total, but never 5 s without a byte; now stall.
        let err = reader.await.unwrap().expect_err("stalled");
        assert!(err.to_string().contains("no request body bytes"), "{err}");

        let (mut tx, rx) = futures::channel::mpsc::channel::<Result<Frame<Bytes>, io::Error>>(4);
        let body = StallTimeout::new(
            http_body_util::StreamBody::new(rx),
            Duration::from_secs(5),
            Duration::from_secs(60),
        );
        let reader = tokio::spawn(async move { body.collect().await.map(|c| c.to_bytes()) });
        futures::SinkExt::send(&mut tx, Ok(Frame::data(Bytes::from_static(b"ab"))))
            .await
            .unwrap();
        drop(tx);
        assert_eq!(&reader.await.unwrap().unwrap()[..], b"ab");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_trickles_past_its_total_deadline_ends_with_an_error() {
        let (mut tx, rx) = futures::channel::mpsc::channel::<Result<Frame<Bytes>, io::Error>>(4);
        let body = StallTimeout::new(
            http_body_util::StreamBody::new(rx),
            Duration::from_secs(5),
            Duration::from_secs(10),
        );
        let reader = tokio::spawn(async move { body.collect().await.map(|c| c.to_bytes()) });
        // A byte every 4 s: never a 5 s gap, but 10 s in total is reached.
        let sender = tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_secs(4)).await;
                if futures::SinkExt::send(&mut tx, Ok(Frame::data(Bytes::from_static(b"x"))))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        let err = reader.await.unwrap().expect_err("past the total deadline");
        assert!(err.to_string().contains("--request-body-timeout-sec"), "{err}");
        sender.abort();
    }

    #[test]
    fn missing_or_empty_pem_files_are_refused_naming_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let err = Tls::load(&dir.path().join("nope.pem"), &empty, None).unwrap_err();
        assert!(err.starts_with("--tls-cert"), "{err}");
        let err = Tls::load(&empty, &empty, None).unwrap_err();
        assert!(
            err.contains("--tls-cert") && err.contains("no PEM certificate"),
            "{err}"
        );
    }
}
