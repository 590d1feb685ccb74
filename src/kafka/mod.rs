//! The Kafka wire protocol front door: a TCP listener, bounded framing
//! (`framing.rs`: frame caps before and after login, byte budgets for
//! requests read ahead, per connection and per node), and
//! handlers for ApiVersions, Metadata, Produce, Fetch, ListOffsets, the
//! classic consumer-group APIs (`coordinator.rs`, `groups.rs`) and the
//! admin APIs (`admin.rs`) over the [`Engine`].
//!
//! Requests are decoded by this module's own bounded decoders
//! ([`wire::Reader`]): every array count and string length is checked
//! against the bytes left in the frame before anything is allocated, so a
//! lying frame closes its own connection and nothing else. (The
//! `kafka-protocol` crate sizes allocations from wire counts; see
//! docs/kafka.md.)

mod admin;
pub mod admin_proto;
pub mod authz;
mod coordinator;
pub mod framing;
pub mod group_proto;
pub mod groups;
pub mod producer;
pub mod proto;
pub mod sasl;
pub mod wire;

use crate::api::{ApiError, Engine, ErrorCode};
use crate::ids::Offset;
use crate::net::{Stream, Transport};
use bytes::Bytes;
use group_proto::*;
use groups::Groups;
use proto::*;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;
use wire::{DecodeError, Encoded, Reader, Writer};

pub use framing::{read_frame, read_frame_timed, ConnError, FrameCap, FrameTimeouts, RequestMemory};

/// Kafka error codes used here.
pub mod code {
    pub const NONE: i16 = 0;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const CORRUPT_MESSAGE: i16 = 2;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const INVALID_REQUIRED_ACKS: i16 = 21;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const INVALID_REQUEST: i16 = 42;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
    pub const INVALID_RECORD: i16 = 87;
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    pub const SASL_AUTHENTICATION_FAILED: i16 = super::sasl::SASL_AUTHENTICATION_FAILED;
    pub const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
}

/// Listener options (from `Config`).
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Largest frame once logged in (or with auth off); also what one
    /// connection may hold of frames not yet answered.
    pub max_frame_bytes: usize,
    /// Largest frame before a SASL login, with auth on.
    pub max_unauthenticated_frame_bytes: usize,
    /// Frames all connections together may hold, not yet answered.
    pub max_request_memory_bytes: usize,
    /// Largest Fetch response (records), whatever the request asks.
    pub fetch_max_bytes: usize,
    /// Time from accept to a SASL login, with auth on.
    pub auth_deadline: Duration,
    pub auto_create_topics: bool,
}

impl Options {
    pub fn from_config(c: &crate::config::Config) -> Self {
        Self {
            max_frame_bytes: c.kafka_max_frame_bytes,
            max_unauthenticated_frame_bytes: c.kafka_max_unauthenticated_frame_bytes,
            max_request_memory_bytes: c.kafka_max_request_memory_bytes,
            fetch_max_bytes: c.kafka_fetch_max_bytes,
            auth_deadline: c.kafka_auth_deadline,
            auto_create_topics: c.auto_create_topics,
        }
    }

    /// Generous limits for embedded listeners and tests: 100 MiB frames,
    /// Kafka's 512 KiB before login and 55 MiB Fetch answers, 256 MiB of
    /// requests, 10 s to log in.
    pub const fn defaults() -> Self {
        Self {
            max_frame_bytes: 100 << 20,
            max_unauthenticated_frame_bytes: 512 << 10,
            max_request_memory_bytes: 256 << 20,
            fetch_max_bytes: 55 << 20,
            auth_deadline: Duration::from_secs(10),
            auto_create_topics: true,
        }
    }
}

/// The Kafka error code for an engine error.
pub fn error_code(e: &ApiError) -> i16 {
    match e.code {
        ErrorCode::TopicNotFound | ErrorCode::PartitionNotFound => code::UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode::Unavailable => code::NOT_LEADER_OR_FOLLOWER,
        ErrorCode::OffsetOutOfRange => code::OFFSET_OUT_OF_RANGE,
        ErrorCode::RecordTooLarge | ErrorCode::RequestTooLarge => code::MESSAGE_TOO_LARGE,
        ErrorCode::Throttled => code::THROTTLING_QUOTA_EXCEEDED,
        ErrorCode::OutOfOrderSequence => code::OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode::InvalidProducerEpoch => code::INVALID_PRODUCER_EPOCH,
        ErrorCode::InvalidTopicName => code::INVALID_TOPIC_EXCEPTION,
        ErrorCode::InvalidRequest | ErrorCode::InvalidOffset | ErrorCode::InvalidJson => code::INVALID_REQUEST,
        ErrorCode::Forbidden => code::TOPIC_AUTHORIZATION_FAILED,
        ErrorCode::Unauthenticated => code::SASL_AUTHENTICATION_FAILED,
        _ => code::UNKNOWN_SERVER_ERROR,
    }
}

/// The Kafka broker id of a Sluice node: a stable hash of its id.
pub fn broker_id(node: &str) -> i32 {
    (crc32c::crc32c(node.as_bytes()) & 0x7fff_ffff) as i32
}

/// Serve Kafka clients on `listener` until `stop` turns true; then stop
/// accepting, close idle connections, and wait (bounded) for requests in
/// flight. Plaintext, with [`Transport::plain`]'s limits.
pub async fn serve(engine: Arc<dyn Engine>, listener: TcpListener, opts: Options, stop: watch::Receiver<bool>) {
    serve_with(engine, listener, opts, Transport::plain(), stop).await
}

/// [`serve`] with the node's transport settings: TLS (Kafka's
/// `security.protocol=SSL`), the connection caps (in all and per client
/// address), and the read and idle timeouts.
pub async fn serve_with(
    engine: Arc<dyn Engine>,
    listener: TcpListener,
    opts: Options,
    transport: Transport,
    stop: watch::Receiver<bool>,
) {
    let mut conns = tokio::task::JoinSet::new();
    let mut stopping = stop.clone();
    let groups = Arc::new(Groups::new());
    let limit = crate::net::ConnLimit::new("kafka", transport.max_connections);
    let memory = RequestMemory::new(opts.max_request_memory_bytes);
    let transport = Arc::new(transport);
    let me = engine.ready();
    let node_span = crate::telemetry::node_span(&me.node_id, me.epoch);
    let ticker = tokio::spawn({
        let groups = groups.clone();
        async move {
            let mut every = tokio::time::interval(Duration::from_millis(250));
            loop {
                every.tick().await;
                groups.tick(tokio::time::Instant::now());
            }
        }
    });
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let Some(permit) = limit.admit(peer.ip(), transport.max_connections_per_ip) else {
                        tracing::debug!(%peer, "kafka connection refused: at --max-connections or --max-connections-per-ip");
                        drop(socket);
                        continue;
                    };
                    let (engine, stop, groups, transport, memory) =
                        (engine.clone(), stop.clone(), groups.clone(), transport.clone(), memory.clone());
                    let span = tracing::info_span!(parent: &node_span, "kafka", %peer);
                    // With auth on, the login deadline runs from here: a
                    // slow TLS handshake spends it too.
                    let login_by = tokio::time::Instant::now() + opts.auth_deadline;
                    conns.spawn(tracing::Instrument::instrument(async move {
                        let _permit = permit;
                        let host = peer.ip().to_string();
                        let timeouts = FrameTimeouts { idle: transport.idle_timeout, read: transport.read_timeout };
                        let closed = match Stream::accept(socket, &transport).await {
                            Ok(stream) => {
                                let conn = Conn { engine, groups, opts, timeouts, memory, login_by };
                                connection(conn, stream, &host, stop).await
                            }
                            Err(e) => Err(e.into()),
                        };
                        if let Err(e) = closed {
                            tracing::info!(error = %e, "kafka connection closed");
                        }
                    }, span));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "kafka accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = stopped(&mut stopping) => break,
        }
    }
    drop(listener);
    ticker.abort();
    let drained = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(5), drained).await.is_err() {
        conns.shutdown().await;
    }
}

/// Resolves once `stop` is true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Produce requests of one connection in flight at once (their offsets
/// are assigned in arrival order; responses go out in that order).
pub const MAX_IN_FLIGHT: usize = 32;

/// Frames read ahead of the one being handled, at most (they are bounded
/// by bytes too: see [`framing`]).
const READ_AHEAD: usize = 4;

/// How often an authenticated connection's token is checked again while
/// the connection sends nothing (each request checks it too).
pub const TOKEN_RECHECK: Duration = Duration::from_secs(1);

type Handled<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Option<Encoded>, DecodeError>> + Send + 'a>>;

/// What a connection needs from its listener.
struct Conn {
    engine: Arc<dyn Engine>,
    groups: Arc<Groups>,
    opts: Options,
    timeouts: FrameTimeouts,
    /// The node's budget of request bytes, shared by every connection.
    memory: RequestMemory,
    /// With auth on, the connection is closed if it has not logged in by then.
    login_by: tokio::time::Instant,
}

/// One client connection. Responses go out in request order (Kafka's
/// rule). Produce requests are pipelined: each is polled once on arrival —
/// which assigns its offsets, in arrival order, and hands its records to the
/// WAL — and answered when durable, while the next requests are read, so
/// requests of one connection share WAL writes (group commit). Every other
/// request waits until the responses before it are out and then runs alone,
/// as on a Kafka broker.
///
/// Each frame holds its bytes of the connection's and the node's request
/// budgets ([`framing`]) until its response is written. With auth on, a
/// connection that has not logged in by `login_by` is closed, and a logged-in
/// one is closed within [`TOKEN_RECHECK`] of its token being revoked or
/// expiring, even if it sends nothing.
async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
    conn: Conn,
    socket: S,
    peer: &str,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ConnError> {
    let Conn {
        engine,
        groups,
        opts,
        timeouts,
        memory,
        login_by,
    } = conn;
    let (mut rd, wr) = tokio::io::split(socket);
    let mut wr = tokio::io::BufWriter::with_capacity(WRITE_BUFFER, wr);
    let (frames_tx, mut frames) = tokio::sync::mpsc::channel(READ_AHEAD);
    let engine = &engine;
    let groups = groups.as_ref();
    let session = sasl::Session::default();
    let session = &session;
    let auth = engine.auth_required();
    let cap = || {
        if auth && !session.is_authenticated() {
            FrameCap::BeforeLogin(opts.max_unauthenticated_frame_bytes.min(opts.max_frame_bytes))
        } else {
            FrameCap::Open(opts.max_frame_bytes)
        }
    };
    let budget = framing::ConnBudget::new(&memory, opts.max_frame_bytes);
    // Frames are read by their own future: reading a frame is not
    // cancel-safe, so it must never be a branch of the select below.
    let reader = async {
        loop {
            let frame = read_frame_timed(&mut rd, &cap, &budget, timeouts).await;
            let last = !matches!(frame, Ok(Some(_)));
            if frames_tx.send(frame).await.is_err() || last {
                break;
            }
        }
        std::future::pending::<()>().await
    };
    let handle = |frame: Bytes| -> Handled<'_> {
        let api = api_name(&frame);
        Box::pin(timed(api, handle_gated(engine, session, groups, opts, frame, peer)))
    };
    let process = async {
        // Each with the budget its request frame holds until it is answered.
        let mut in_flight: std::collections::VecDeque<(Handled<'_>, framing::Held)> = std::collections::VecDeque::new();
        loop {
            tokio::select! {
                biased;
                done = async { (&mut in_flight.front_mut().expect("guarded").0).await }, if !in_flight.is_empty() => {
                    let (_, held) = in_flight.pop_front().expect("guarded");
                    write_response(&mut wr, done?).await?;
                    drop(held);
                }
                frame = frames.recv(), if in_flight.len() < MAX_IN_FLIGHT => {
                    let Some(framing::Frame { body, held }) = frame.transpose()?.flatten() else { break };
                    if is_produce(&body) {
                        let mut handled = handle(body);
                        match futures::poll!(handled.as_mut()) {
                            std::task::Poll::Ready(r) => in_flight.push_back((Box::pin(std::future::ready(r)), held)),
                            std::task::Poll::Pending => in_flight.push_back((handled, held)),
                        }
                    } else {
                        while let Some((earlier, earlier_held)) = in_flight.pop_front() {
                            write_response(&mut wr, earlier.await?).await?;
                            drop(earlier_held);
                        }
                        write_response(&mut wr, handle(body).await?).await?;
                        drop(held);
                    }
                }
                _ = stopped(&mut stop) => return Ok(()),
            }
        }
        while let Some((earlier, held)) = in_flight.pop_front() {
            write_response(&mut wr, earlier.await?).await?;
            drop(held);
        }
        Ok(())
    };
    tokio::select! {
        _ = reader => unreachable!("the reader never finishes"),
        r = process => r,
        closed = watch_session(engine.as_ref(), session, login_by, opts.auth_deadline) => Err(closed),
    }
}

/// Resolves (with the reason to close) when a connection with auth on has
/// not logged in by `login_by`, or once its token no longer authenticates.
/// Never resolves with auth off.
async fn watch_session(
    engine: &dyn Engine,
    session: &sasl::Session,
    login_by: tokio::time::Instant,
    deadline: Duration,
) -> ConnError {
    if !engine.auth_required() {
        return std::future::pending().await;
    }
    loop {
        let now = tokio::time::Instant::now();
        let next = match session.recheck(engine) {
            sasl::Recheck::Valid => now + TOKEN_RECHECK,
            sasl::Recheck::Revoked => return ConnError::Revoked,
            sasl::Recheck::NotLoggedIn if now >= login_by => {
                crate::auth::count_failure("kafka", "auth_deadline");
                return ConnError::AuthDeadline(deadline);
            }
            sasl::Recheck::NotLoggedIn => login_by.min(now + TOKEN_RECHECK),
        };
        tokio::time::sleep_until(next).await;
    }
}

fn is_produce(frame: &[u8]) -> bool {
    frame
        .get(..2)
        .is_some_and(|k| i16::from_be_bytes([k[0], k[1]]) == PRODUCE)
}

/// [`handle_in`] of `frame`, timed into `kafka_request_seconds`.
async fn timed(
    api: &'static str,
    handled: impl std::future::Future<Output = Result<Option<Encoded>, DecodeError>>,
) -> Result<Option<Encoded>, DecodeError> {
    let started = tokio::time::Instant::now();
    let r = handled.await;
    let outcome = if r.is_ok() { "ok" } else { "malformed" };
    crate::telemetry::observe(
        "kafka_request_seconds",
        &[("api", api), ("outcome", outcome)],
        started.elapsed(),
    );
    r
}

/// Writes one response frame. `wr` is buffered, so the small parts of an
/// [`Encoded`] are copied through its buffer while large record batches go
/// out as they are: an answer is never assembled in one piece.
async fn write_response<W: AsyncWrite + Unpin>(wr: &mut W, response: Option<Encoded>) -> Result<(), ConnError> {
    if let Some(response) = response {
        let len = u32::try_from(response.len()).unwrap_or(u32::MAX);
        wr.write_all(&len.to_be_bytes()).await?;
        for part in response.parts() {
            wr.write_all(part).await?;
        }
        wr.flush().await?;
    }
    Ok(())
}

/// The metrics label of a request frame's API.
fn api_name(frame: &[u8]) -> &'static str {
    match frame.get(..2).map(|k| i16::from_be_bytes([k[0], k[1]])) {
        Some(PRODUCE) => "produce",
        Some(FETCH) => "fetch",
        Some(LIST_OFFSETS) => "list_offsets",
        Some(METADATA) => "metadata",
        Some(API_VERSIONS) => "api_versions",
        Some(sasl::SASL_HANDSHAKE | sasl::SASL_AUTHENTICATE) => "sasl",
        Some(k) if is_group_api(k) => "group",
        Some(k) if admin_proto::is_admin_api(k) => "admin",
        _ => "other",
    }
}

/// Handles one request frame: the response frame body (header included),
/// `None` when the request wants no response (acks=0), or an error that
/// closes the connection (a frame that does not decode).
pub async fn handle(engine: &dyn Engine, opts: Options, frame: Bytes) -> Result<Option<Bytes>, DecodeError> {
    handle_in(engine, &Groups::new(), opts, frame, "").await
}

/// Bytes of response written to a connection at once; larger parts of a
/// response bypass the buffer.
const WRITE_BUFFER: usize = 64 * 1024;

/// One frame of a connection with `session`: the SASL gate (see
/// [`sasl`]) decides whether it is served, as whom, or closes the
/// connection; an authenticated principal's requests run against its
/// [`authz::Scoped`] view of the engine.
async fn handle_gated(
    engine: &Arc<dyn Engine>,
    session: &sasl::Session,
    groups: &Groups,
    opts: Options,
    frame: Bytes,
    peer: &str,
) -> Result<Option<Encoded>, DecodeError> {
    let key = frame.get(..2).map_or(-1, |k| i16::from_be_bytes([k[0], k[1]]));
    match session.gate(engine.as_ref(), key, &frame) {
        sasl::Gate::Raw(reply) => Ok(Some(reply.into())),
        sasl::Gate::Close(why) => {
            tracing::info!(peer, key, why, "closing kafka connection");
            Err(DecodeError {
                at: 0,
                message: why.to_string(),
            })
        }
        sasl::Gate::Sasl | sasl::Gate::Serve(None) => {
            handle_with(engine.as_ref(), session, groups, opts, frame, peer).await
        }
        sasl::Gate::Serve(Some(principal)) => {
            let scoped = authz::Scoped {
                inner: engine.clone(),
                principal,
            };
            handle_with(&scoped, session, groups, opts, frame, peer).await
        }
    }
}

/// [`handle`] with the node's group coordinator state and the client's host.
pub async fn handle_in(
    engine: &dyn Engine,
    groups: &Groups,
    opts: Options,
    frame: Bytes,
    peer: &str,
) -> Result<Option<Bytes>, DecodeError> {
    let answer = handle_with(engine, &sasl::Session::default(), groups, opts, frame, peer).await?;
    Ok(answer.map(Encoded::into_bytes))
}

/// [`handle_in`] on a connection's SASL session.
async fn handle_with(
    engine: &dyn Engine,
    session: &sasl::Session,
    groups: &Groups,
    opts: Options,
    frame: Bytes,
    peer: &str,
) -> Result<Option<Encoded>, DecodeError> {
    let mut peek = Reader::new(frame.clone());
    let key = peek.i16()?;
    let version = peek.i16()?;
    let correlation_id = peek.i32()?;
    let mut w = Writer::default();
    w.i32(correlation_id); // response header v0 (ApiVersions always uses v0)
    if !supported(key, version) {
        if key == API_VERSIONS {
            // Answered in v0, so any client can read which versions exist.
            encode_api_versions(&mut w, 0, code::UNSUPPORTED_VERSION);
        } else {
            w.i16(code::UNSUPPORTED_VERSION);
        }
        tracing::debug!(key, version, "unsupported kafka request");
        return Ok(Some(w.finish()));
    }
    let mut r = Reader::new(frame);
    let header = decode_header(&mut r)?;
    match key {
        API_VERSIONS => {
            decode_api_versions(&mut r, version)?;
            encode_api_versions(&mut w, version, code::NONE);
        }
        METADATA => {
            let req = decode_metadata(&mut r, version)?;
            metadata(engine, opts, version, req, &mut w).await;
        }
        PRODUCE => {
            let req = decode_produce(&mut r, version)?;
            let acks = req.acks;
            let topics = produce(engine, req).await;
            if acks == 0 {
                return Ok(None);
            }
            encode_produce(&mut w, version, &topics);
        }
        FETCH => {
            let req = decode_fetch(&mut r, version)?;
            let still_logged_in = || session.recheck(engine) != sasl::Recheck::Revoked;
            let Some(topics) = fetch(engine, req, opts.fetch_max_bytes, &still_logged_in).await else {
                return Err(DecodeError {
                    at: 0,
                    message: "the connection's token was revoked or expired during a Fetch wait".into(),
                });
            };
            encode_fetch(&mut w, version, &topics);
        }
        LIST_OFFSETS => {
            let req = decode_list_offsets(&mut r, version)?;
            let topics = list_offsets(engine, req).await;
            encode_list_offsets(&mut w, version, &topics);
        }
        producer::INIT_PRODUCER_ID => {
            let req = producer::decode_init_producer_id(&mut r, version)?;
            let resp = producer::init_producer_id(engine, &req).await;
            producer::encode_init_producer_id(&mut w, version, &resp);
        }
        producer::OFFSET_FOR_LEADER_EPOCH => {
            let req = producer::decode_offset_for_leader_epoch(&mut r, version)?;
            let topics = producer::offset_for_leader_epoch(engine, req).await;
            producer::encode_offset_for_leader_epoch(&mut w, version, &topics);
        }
        k if is_group_api(k) => {
            let client = header.client_id.clone().unwrap_or_default();
            coordinator::group_request(engine, groups, k, version, &mut r, &client, peer, &mut w).await?;
        }
        k if admin_proto::is_admin_api(k) => admin::request(engine, k, version, &mut r, &mut w).await?,
        sasl::SASL_HANDSHAKE => session.handshake(version, &mut r, &mut w)?,
        sasl::SASL_AUTHENTICATE => session.authenticate(engine, version, &mut r, &mut w)?,
        _ => unreachable!("supported() admits only the keys above"),
    }
    tracing::trace!(key, version, client = ?header.client_id, "kafka request answered");
    Ok(Some(w.finish()))
}

// ------------------------------------------------------------ Metadata

fn split_addr(addr: &str) -> (String, i32) {
    match addr.rsplit_once(':') {
        Some((host, port)) => (
            host.trim_start_matches('[').trim_end_matches(']').to_string(),
            port.parse().unwrap_or(9092),
        ),
        None => (addr.to_string(), 9092),
    }
}

async fn metadata(engine: &dyn Engine, opts: Options, version: i16, req: MetadataRequest, w: &mut Writer) {
    let nodes = engine.nodes();
    let live: Vec<&crate::api::NodeInfo> = nodes.nodes.iter().filter(|n| n.live && !n.fenced).collect();
    let brokers: Vec<Broker> = live
        .iter()
        .map(|n| {
            let (host, port) = split_addr(&n.kafka_addr);
            Broker {
                node_id: broker_id(&n.node_id),
                host,
                port,
            }
        })
        .collect();
    let controller = nodes
        .lease_holder
        .as_deref()
        .map(broker_id)
        .unwrap_or_else(|| broker_id(&engine.ready().node_id));
    // Read-your-writes across nodes: a client that just created, grew or
    // deleted a topic through another node (admin requests go to the
    // controller) asks any broker next. Catch up with the metadata log
    // first; if that fails, answer from the view we have.
    let _ = engine.sync_metadata().await;
    let (names, named) = match req.topics {
        Some(t) => (t, true),
        None => (engine.list_topics().into_iter().map(|t| t.name).collect(), false),
    };
    let mut topics = Vec::with_capacity(names.len());
    for name in names {
        let error = |error_code| MetadataTopic {
            error_code,
            name: name.clone(),
            partitions: Vec::new(),
        };
        let topic = match engine.describe_topic(&name) {
            Ok(d) => MetadataTopic {
                error_code: code::NONE,
                name: name.clone(),
                partitions: d
                    .partition_info
                    .iter()
                    .map(|p| {
                        let leader = p
                            .owner
                            .as_deref()
                            .filter(|o| p.state == "open" && live.iter().any(|n| n.node_id == *o))
                            .map(broker_id);
                        MetadataPartition {
                            error_code: if leader.is_some() {
                                code::NONE
                            } else {
                                code::LEADER_NOT_AVAILABLE
                            },
                            partition: p.partition as i32,
                            leader: leader.unwrap_or(-1),
                            leader_epoch: i32::try_from(p.stream_epoch.get()).unwrap_or(i32::MAX),
                        }
                    })
                    .collect(),
            },
            Err(e) if e.code == ErrorCode::TopicNotFound => {
                if named && opts.auto_create_topics && req.allow_auto_topic_creation {
                    match engine.create_topic(&name, 1, Default::default()).await {
                        Ok(_) => error(code::LEADER_NOT_AVAILABLE),
                        Err(e) if e.code == ErrorCode::TopicExists => error(code::LEADER_NOT_AVAILABLE),
                        Err(e) if e.code == ErrorCode::InvalidTopicName => error(code::INVALID_TOPIC_EXCEPTION),
                        Err(e) if e.code == ErrorCode::Forbidden => error(code::TOPIC_AUTHORIZATION_FAILED),
                        Err(e) => {
                            tracing::info!(topic = %name, error = %e, "auto-create failed");
                            error(code::LEADER_NOT_AVAILABLE)
                        }
                    }
                } else {
                    error(code::UNKNOWN_TOPIC_OR_PARTITION)
                }
            }
            Err(e) => error(error_code(&e)),
        };
        topics.push(topic);
    }
    encode_metadata(w, version, &brokers, controller, admin::CLUSTER_ID, &topics);
}

// ------------------------------------------------------------ Produce

async fn produce(engine: &dyn Engine, req: ProduceRequest) -> Vec<(String, Vec<ProducePartitionResponse>)> {
    let request_error = if req.transactional_id.is_some() {
        Some((code::INVALID_REQUEST, "transactions are not supported"))
    } else if !matches!(req.acks, -1..=1) {
        Some((code::INVALID_REQUIRED_ACKS, "acks must be -1, 0 or 1"))
    } else {
        None
    };
    // Every partition of every topic at once: polling this future once
    // assigns all of the request's offsets (the connection relies on it).
    let counts: Vec<(String, usize)> = req.topics.iter().map(|(t, p)| (t.clone(), p.len())).collect();
    let all = req
        .topics
        .into_iter()
        .flat_map(|(topic, parts)| parts.into_iter().map(move |(p, records)| (topic.clone(), p, records)));
    let mut answers = futures::future::join_all(all.map(|(topic, partition, records)| async move {
        if let Some((error_code, message)) = request_error {
            return produce_error(partition, error_code, message.to_string());
        }
        produce_partition(engine, &topic, partition, records).await
    }))
    .await
    .into_iter();
    counts
        .into_iter()
        .map(|(topic, n)| (topic, answers.by_ref().take(n).collect()))
        .collect()
}

fn produce_error(partition: i32, error_code: i16, message: String) -> ProducePartitionResponse {
    ProducePartitionResponse {
        partition,
        error_code,
        base_offset: -1,
        log_start_offset: -1,
        error_message: Some(message),
    }
}

/// Validates every batch of one partition's records (nothing is appended
/// unless all are valid), then appends them in order.
pub async fn produce_partition(
    engine: &dyn Engine,
    topic: &str,
    partition: i32,
    records: Option<Bytes>,
) -> ProducePartitionResponse {
    let fail = |error_code, message: String| produce_error(partition, error_code, message);
    let Ok(p) = u32::try_from(partition) else {
        return fail(code::UNKNOWN_TOPIC_OR_PARTITION, format!("partition {partition}"));
    };
    let records = match records {
        Some(r) if !r.is_empty() => r,
        _ => return fail(code::CORRUPT_MESSAGE, "no records".into()),
    };
    let limits = engine.limits();
    if records.len() > limits.max_request_bytes {
        return fail(
            code::MESSAGE_TOO_LARGE,
            format!(
                "{} bytes of records (limit {})",
                records.len(),
                limits.max_request_bytes
            ),
        );
    }
    let mut to_append = Vec::new();
    for batch in crate::stream::batch::batches("produce", &records) {
        let (info, raw) = match batch {
            Ok(b) => b,
            Err(e) => return fail(code::CORRUPT_MESSAGE, e.to_string()),
        };
        if info.is_transactional || info.is_control {
            return fail(code::INVALID_RECORD, "transactional batches are not supported".into());
        }
        match crate::stream::batch::decode_records("produce", raw) {
            Ok(rs) => {
                if let Some(big) = rs
                    .iter()
                    .map(|(_, r)| crate::stream::partition::record_size(r))
                    .find(|&n| n > limits.max_record_bytes)
                {
                    return fail(
                        code::MESSAGE_TOO_LARGE,
                        format!("a {big}-byte record (limit {})", limits.max_record_bytes),
                    );
                }
            }
            Err(e) => return fail(code::CORRUPT_MESSAGE, e.to_string()),
        }
        to_append.push(records.slice_ref(raw));
    }
    // All batches are handed to the engine at once, in order, so their
    // offsets are assigned on this future's first poll.
    let appended =
        futures::future::join_all(to_append.into_iter().map(|batch| engine.append_batch(topic, p, batch))).await;
    let mut base = None;
    for a in appended {
        match a {
            Ok(a) => {
                base.get_or_insert(a.base);
            }
            Err(e) => return fail(error_code(&e), e.message),
        }
    }
    ProducePartitionResponse {
        partition,
        error_code: code::NONE,
        base_offset: base.map_or(-1, |b| b.get() as i64),
        log_start_offset: -1,
        error_message: None,
    }
}

// ------------------------------------------------------------ Fetch

/// A request's current leader epoch (-1 = not given) against the stream
/// epoch: older → `FENCED_LEADER_EPOCH`, newer → `UNKNOWN_LEADER_EPOCH`.
pub fn check_leader_epoch(requested: i32, stream_epoch: u64) -> Option<i16> {
    let requested = u64::try_from(requested).ok()?;
    match requested.cmp(&stream_epoch) {
        std::cmp::Ordering::Less => Some(code::FENCED_LEADER_EPOCH),
        std::cmp::Ordering::Greater => Some(code::UNKNOWN_LEADER_EPOCH),
        std::cmp::Ordering::Equal => None,
    }
}

fn stream_epoch(engine: &dyn Engine, topic: &str, partition: u32) -> Option<u64> {
    let d = engine.describe_topic(topic).ok()?;
    let p = d.partition_info.iter().find(|p| p.partition == partition)?;
    Some(p.stream_epoch.get())
}

fn fetch_error(partition: i32, error_code: i16) -> FetchPartitionResponse {
    FetchPartitionResponse {
        partition,
        error_code,
        high_watermark: -1,
        log_start_offset: -1,
        batches: Vec::new(),
    }
}

/// One read of every partition of `req`, at most `max_bytes` of batches in
/// all (past the first batch, which is always returned so a consumer can
/// make progress, as on Kafka).
async fn fetch_pass(
    engine: &dyn Engine,
    req: &FetchRequest,
    max_bytes: usize,
) -> Vec<(String, Vec<FetchPartitionResponse>)> {
    let mut budget = max_bytes;
    let mut any = false;
    let mut out = Vec::with_capacity(req.topics.len());
    for (topic, parts) in &req.topics {
        let mut answers = Vec::with_capacity(parts.len());
        for fp in parts {
            let (Ok(p), Ok(from)) = (u32::try_from(fp.partition), u64::try_from(fp.fetch_offset)) else {
                answers.push(fetch_error(fp.partition, code::UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            };
            if fp.current_leader_epoch >= 0 {
                let epoch = stream_epoch(engine, topic, p);
                if let Some(error) = epoch.and_then(|e| check_leader_epoch(fp.current_leader_epoch, e)) {
                    answers.push(fetch_error(fp.partition, error));
                    continue;
                }
            }
            let max = usize::try_from(fp.partition_max_bytes).unwrap_or(0).min(budget);
            match engine.read_batches(topic, p, Offset(from), max, Duration::ZERO).await {
                Ok(read) => {
                    let mut batches = read.batches;
                    if any {
                        // The engine returns a partition's first batch even
                        // past `max`; only the answer's first may be.
                        let mut used = 0;
                        let fit = batches
                            .iter()
                            .take_while(|b| {
                                used += b.len();
                                used <= max
                            })
                            .count();
                        batches.truncate(fit);
                    }
                    let n: usize = batches.iter().map(|b| b.len()).sum();
                    any |= n > 0;
                    budget = budget.saturating_sub(n);
                    answers.push(FetchPartitionResponse {
                        partition: fp.partition,
                        error_code: code::NONE,
                        high_watermark: read.high_watermark.get() as i64,
                        log_start_offset: read.start_offset.get() as i64,
                        batches,
                    });
                }
                Err(e) => {
                    let mut a = fetch_error(fp.partition, error_code(&e));
                    if let Some(start) = e.start_offset {
                        a.log_start_offset = start.get() as i64;
                    }
                    answers.push(a);
                }
            }
        }
        out.push((topic.clone(), answers));
    }
    out
}

/// A Fetch: one pass over its partitions, and if that has fewer than
/// `min_bytes` and the client may wait, a wait for records on any partition
/// that had none, then a fresh pass. Both passes are bounded by the
/// request's `max_bytes` and the node's `cap` (`--kafka-fetch-max-bytes`),
/// and the first pass's batches are dropped before waiting, so a waiting
/// Fetch holds no records. A partition named twice is fetched once
/// ([`FetchRequest::merge_duplicates`]). `None` when `still_logged_in` says
/// no after the wait: the connection is closed rather than answered.
async fn fetch(
    engine: &dyn Engine,
    req: FetchRequest,
    cap: usize,
    still_logged_in: &(dyn Fn() -> bool + Sync),
) -> Option<Vec<(String, Vec<FetchPartitionResponse>)>> {
    let req = req.merge_duplicates();
    let max_bytes = usize::try_from(req.max_bytes).unwrap_or(0).min(cap);
    let first = fetch_pass(engine, &req, max_bytes).await;
    let bytes: usize = first
        .iter()
        .flat_map(|(_, ps)| ps.iter())
        .flat_map(|p| p.batches.iter())
        .map(|b| b.len())
        .sum();
    let wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0)).min(engine.limits().max_wait);
    let errors = first
        .iter()
        .flat_map(|(_, ps)| ps.iter())
        .any(|p| p.error_code != code::NONE);
    // Answer at once with enough bytes, on any error, or when asked not to wait.
    if wait.is_zero() || errors || bytes >= usize::try_from(req.min_bytes).unwrap_or(0) {
        return Some(first);
    }
    // Nothing yet: wait until any partition that had nothing gets records,
    // or the wait runs out, then answer with a fresh pass.
    let mut waits = Vec::new();
    for (topic, parts) in &first {
        for a in parts
            .iter()
            .filter(|a| a.error_code == code::NONE && a.batches.is_empty())
        {
            let from = req
                .topics
                .iter()
                .find(|(t, _)| t == topic)
                .and_then(|(_, ps)| ps.iter().find(|p| p.partition == a.partition))
                .map_or(0, |p| p.fetch_offset.max(0) as u64);
            let topic = topic.clone();
            let partition = a.partition as u32;
            waits.push(Box::pin(async move {
                let _ = engine.read_batches(&topic, partition, Offset(from), 1, wait).await;
            }));
        }
    }
    drop(first);
    if waits.is_empty() {
        tokio::time::sleep(wait).await;
    } else {
        futures::future::select_all(waits).await;
    }
    if !still_logged_in() {
        return None;
    }
    Some(fetch_pass(engine, &req, max_bytes).await)
}

// ------------------------------------------------------------ ListOffsets

const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

async fn list_offsets(
    engine: &dyn Engine,
    req: ListOffsetsRequest,
) -> Vec<(String, Vec<ListOffsetsPartitionResponse>)> {
    let me = engine.ready().node_id;
    let mut out = Vec::with_capacity(req.topics.len());
    for (topic, parts) in req.topics {
        let described = engine.describe_topic(&topic);
        let mut answers = Vec::with_capacity(parts.len());
        for (partition, requested_epoch, timestamp) in parts {
            let fail = |error_code| ListOffsetsPartitionResponse {
                partition,
                error_code,
                timestamp: -1,
                offset: -1,
                leader_epoch: -1,
            };
            let info = match &described {
                Ok(d) => d
                    .partition_info
                    .iter()
                    .find(|p| i64::from(p.partition) == i64::from(partition)),
                Err(_) => None,
            };
            let Some(info) = info else {
                answers.push(fail(code::UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            };
            if info.state != "open" || info.owner.as_deref() != Some(me.as_str()) {
                answers.push(fail(code::NOT_LEADER_OR_FOLLOWER));
                continue;
            }
            if let Some(error) = check_leader_epoch(requested_epoch, info.stream_epoch.get()) {
                answers.push(fail(error));
                continue;
            }
            let leader_epoch = i32::try_from(info.stream_epoch.get()).unwrap_or(i32::MAX);
            let found = match timestamp {
                EARLIEST => Ok((-1, info.start_offset.get() as i64)),
                LATEST => Ok((-1, info.end_offset.get() as i64)),
                ts => offset_for_timestamp(engine, &topic, info.partition, info.start_offset, ts).await,
            };
            answers.push(match found {
                Ok((timestamp, offset)) => ListOffsetsPartitionResponse {
                    partition,
                    error_code: code::NONE,
                    timestamp,
                    offset,
                    leader_epoch,
                },
                Err(e) => fail(error_code(&e)),
            });
        }
        out.push((topic, answers));
    }
    out
}

/// The first record with a timestamp at or after `ts`: (its timestamp, its
/// offset), or (-1, -1) when there is none. Scans batch headers from the
/// start, decoding only the batch that holds the answer.
pub async fn offset_for_timestamp(
    engine: &dyn Engine,
    topic: &str,
    partition: u32,
    start: Offset,
    ts: i64,
) -> Result<(i64, i64), ApiError> {
    let mut from = start;
    loop {
        let read = engine
            .read_batches(topic, partition, from, 1 << 20, Duration::ZERO)
            .await?;
        if read.batches.is_empty() {
            return Ok((-1, -1));
        }
        for b in &read.batches {
            let info = crate::stream::batch::parse_batch("stored batch", b)
                .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
            if info.max_timestamp >= ts && info.end_offset() > from {
                if let Ok(records) = crate::stream::batch::decode_records("stored batch", b) {
                    if let Some((o, r)) = records.iter().find(|(o, r)| *o >= from && r.timestamp_ms >= ts) {
                        return Ok((r.timestamp_ms, o.get() as i64));
                    }
                } else {
                    return Ok((info.max_timestamp, info.base_offset.max(from).get() as i64));
                }
            }
            from = from.max(info.end_offset());
        }
    }
}

#[cfg(test)]
mod tests;
