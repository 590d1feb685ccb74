//! The Kafka wire protocol front door. This file is the TCP listener, the
//! per-connection loop (pipelined Produce, responses in request order) and
//! the dispatch of each request to its handler, over the node's
//! [`Services`] (wrapped per principal by [`authz`] with `--auth on`).
//!
//! # Layout
//!
//! - `framing`: frame caps before and after login, byte budgets for requests
//!   read ahead, per connection and per node.
//! - [`wire`], [`proto`]: bounded decoding and the request/response codecs;
//!   [`header`]: the request header; [`versions`]: the API keys and versions
//!   spoken (`SUPPORTED`) and ApiVersions.
//! - [`sasl`]: SASL login (PLAIN, SCRAM) and the per-frame gate;
//!   [`scram_users`]: DescribeUserScramCredentials; [`authz`]: what each
//!   capability call needs of the principal.
//! - `metadata`, `produce`, `fetch`, `list_offsets`: those requests;
//!   [`fetch_session`]: the node's KIP-227 fetch sessions.
//! - [`producer_ids`]: InitProducerId; [`leader_epoch`]: OffsetForLeaderEpoch
//!   and the current-leader-epoch check.
//! - `coordinator`, [`groups`], [`group_proto`]: the classic consumer-group
//!   APIs; [`consumer_coordinator`], [`consumer_proto`] and
//!   `groups::{consumer, assignor}`: the KIP-848 consumer protocol;
//!   [`group_placement`]: which node coordinates a group; [`offset_delete`]:
//!   OffsetDelete; `admin`,
//!   [`admin_proto`]: the admin APIs; [`acls`]: the ACL APIs (token scopes
//!   shown as ACLs); [`log_dirs`]: DescribeLogDirs; [`delete_records`]: DeleteRecords;
//!   [`describe_producers`]: DescribeProducers.
//! - [`txn_coordinator`]: the transaction coordinator (transactional ids'
//!   records in the metadata log, its ticker's timeouts and recovery).
//!
//! Requests are decoded by this module's own bounded decoders
//! ([`wire::Reader`]): every array count and string length is checked
//! against the bytes left in the frame before anything is allocated, so a
//! lying frame closes its own connection and nothing else. (The
//! `kafka-protocol` crate sizes allocations from wire counts; see
//! docs/kafka.md.)

pub mod acls;
mod admin;
pub mod admin_proto;
pub mod authz;
pub mod consumer_coordinator;
pub mod consumer_proto;
mod coordinator;
pub mod delete_records;
pub mod describe_producers;
mod fetch;
pub mod fetch_session;
pub mod framing;
pub mod group_placement;
pub mod group_proto;
pub mod groups;
pub mod header;
pub mod leader_epoch;
mod list_offsets;
pub mod log_dirs;
mod metadata;
pub mod offset_delete;
mod produce;
pub mod producer_ids;
pub mod proto;
pub mod sasl;
pub mod scram_users;
pub mod txn_coordinator;
pub mod txn_proto;
pub mod versions;
pub mod wire;

use crate::api::{ApiError, ErrorCode, Services, Tokens};
use crate::net::{Stream, Transport};
use bytes::Bytes;
use group_proto::*;
use groups::Groups;
use header::decode_header;
use proto::*;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;
use versions::{decode_api_versions, encode_api_versions, supported, ClientSlot};
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
    pub const REQUEST_TIMED_OUT: i16 = 7;
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
    pub const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
    pub const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    pub const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;
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
pub async fn serve(engine: impl Into<Services>, listener: TcpListener, opts: Options, stop: watch::Receiver<bool>) {
    serve_with(engine, listener, opts, Transport::plain(), stop).await
}

/// [`serve`] with the node's transport settings: TLS (Kafka's
/// `security.protocol=SSL`), the connection caps (in all and per client
/// address), and the read and idle timeouts.
pub async fn serve_with(
    engine: impl Into<Services>,
    listener: TcpListener,
    opts: Options,
    transport: Transport,
    stop: watch::Receiver<bool>,
) {
    let engine: Services = engine.into();
    let mut conns = tokio::task::JoinSet::new();
    let mut stopping = stop.clone();
    let groups = Arc::new(Groups::new());
    let sessions = Arc::new(FetchSessions::new(fetch_session::Sessions::new(
        crate::entropy::random(),
    )));
    let limit = crate::net::ConnLimit::new("kafka", transport.max_connections);
    let memory = RequestMemory::new(opts.max_request_memory_bytes);
    let transport = Arc::new(transport);
    let me = engine.cluster.ready();
    let node_span = crate::telemetry::node_span(&me.node_id, me.epoch);
    let ticker = tokio::spawn({
        let (groups, engine) = (groups.clone(), engine.clone());
        let txn_timers = txn_coordinator::TxnTimers::default();
        async move {
            let mut every = tokio::time::interval(Duration::from_millis(250));
            loop {
                every.tick().await;
                txn_coordinator::tick(&engine, &txn_timers, tokio::time::Instant::now()).await;
                groups.tick(tokio::time::Instant::now());
                coordinator::persist_dirty(&engine, &groups).await;
                consumer_coordinator::tick(&engine, &groups, tokio::time::Instant::now()).await;
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
                    let sessions = sessions.clone();
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
                                let conn = Conn { engine, groups, sessions, opts, timeouts, memory, login_by };
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
    engine: Services,
    groups: Arc<Groups>,
    sessions: Arc<FetchSessions>,
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
        sessions,
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
    let sessions = sessions.as_ref();
    let session = sasl::Session::default();
    let session = &session;
    let client = ClientSlot::default();
    let client = &client;
    let order = produce::ProduceOrder::default();
    let order = &order;
    let auth = engine.tokens.auth_required();
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
        Box::pin(timed(
            api,
            handle_gated(engine, session, client, order, groups, sessions, opts, frame, peer),
        ))
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
        closed = watch_session(engine.tokens.as_ref(), session, login_by, opts.auth_deadline) => Err(closed),
    }
}

/// Resolves (with the reason to close) when a connection with auth on has
/// not logged in by `login_by`, or once its token no longer authenticates.
/// Never resolves with auth off.
async fn watch_session(
    tokens: &dyn Tokens,
    session: &sasl::Session,
    login_by: tokio::time::Instant,
    deadline: Duration,
) -> ConnError {
    if !tokens.auth_required() {
        return std::future::pending().await;
    }
    loop {
        let now = tokio::time::Instant::now();
        let next = match session.recheck(tokens) {
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

/// [`handle_in`] of `frame`, timed into `sluice_kafka_request_seconds`.
async fn timed(
    api: &'static str,
    handled: impl std::future::Future<Output = Result<Option<Encoded>, DecodeError>>,
) -> Result<Option<Encoded>, DecodeError> {
    let started = tokio::time::Instant::now();
    let r = handled.await;
    let outcome = if r.is_ok() { "ok" } else { "malformed" };
    crate::telemetry::observe(
        "sluice_kafka_request_seconds",
        &[("op", api), ("outcome", outcome)],
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
        Some(k) if is_group_api(k) || consumer_proto::is_consumer_group_api(k) => "group",
        Some(offset_delete::OFFSET_DELETE) => "group",
        Some(k) if txn_coordinator::is_txn_api(k) => "transaction",
        Some(k)
            if admin_proto::is_admin_api(k)
                || acls::is_acl_api(k)
                || k == log_dirs::DESCRIBE_LOG_DIRS
                || k == delete_records::DELETE_RECORDS =>
        {
            "admin"
        }
        Some(describe_producers::DESCRIBE_PRODUCERS) => "admin",
        _ => "other",
    }
}

/// Handles one request frame: the response frame body (header included),
/// `None` when the request wants no response (acks=0), or an error that
/// closes the connection (a frame that does not decode).
pub async fn handle(engine: &Services, opts: Options, frame: Bytes) -> Result<Option<Bytes>, DecodeError> {
    handle_in(engine, &Groups::new(), opts, frame, "").await
}

/// Bytes of response written to a connection at once; larger parts of a
/// response bypass the buffer.
const WRITE_BUFFER: usize = 64 * 1024;

/// One frame of a connection with `session`: the SASL gate (see
/// [`sasl`]) decides whether it is served, as whom, or closes the
/// connection; an authenticated principal's requests run against its
/// [`authz::scoped`] view of the node's services.
// The connection's and the node's state, each passed as borrowed by the
// connection loop; a struct of them would only rename the list.
#[allow(clippy::too_many_arguments)]
async fn handle_gated(
    engine: &Services,
    session: &sasl::Session,
    client: &ClientSlot,
    order: &produce::ProduceOrder,
    groups: &Groups,
    sessions: &FetchSessions,
    opts: Options,
    frame: Bytes,
    peer: &str,
) -> Result<Option<Encoded>, DecodeError> {
    let key = frame.get(..2).map_or(-1, |k| i16::from_be_bytes([k[0], k[1]]));
    match session.gate(engine.tokens.as_ref(), key, &frame) {
        sasl::Gate::Raw(reply) => Ok(Some(reply.into())),
        sasl::Gate::Close(why) => {
            tracing::info!(peer, key, why, "closing kafka connection");
            Err(DecodeError {
                at: 0,
                message: why.to_string(),
            })
        }
        sasl::Gate::Sasl | sasl::Gate::Serve(None) => {
            handle_with(engine, session, client, order, groups, sessions, opts, frame, peer).await
        }
        sasl::Gate::Serve(Some(principal)) => {
            let scoped = authz::scoped(engine, principal);
            handle_with(&scoped, session, client, order, groups, sessions, opts, frame, peer).await
        }
    }
}

/// [`handle`] with the node's group coordinator state and the client's
/// host. Fetch sessions last one request here (a full fetch's session is
/// gone by the next); [`serve`] keeps them per node.
pub async fn handle_in(
    engine: &Services,
    groups: &Groups,
    opts: Options,
    frame: Bytes,
    peer: &str,
) -> Result<Option<Bytes>, DecodeError> {
    let client = ClientSlot::default();
    let sessions = FetchSessions::new(fetch_session::Sessions::new(0));
    let answer = handle_with(
        engine,
        &sasl::Session::default(),
        &client,
        &produce::ProduceOrder::default(),
        groups,
        &sessions,
        opts,
        frame,
        peer,
    )
    .await?;
    Ok(answer.map(Encoded::into_bytes))
}

/// [`handle_in`] on a connection's SASL session and client software, with
/// the node's fetch sessions.
///
/// A request whose (key, version) is not in [`versions::SUPPORTED`] closes
/// the connection, as Kafka does for a request it cannot parse: there is no
/// response body such a client could read. ApiVersions is the exception:
/// it is answered in v0 with UNSUPPORTED_VERSION and the table, so the
/// client can retry with a version both sides speak.
// The connection's and the node's state, each passed as borrowed by the
// connection loop; a struct of them would only rename the list.
#[allow(clippy::too_many_arguments)]
async fn handle_with(
    engine: &Services,
    session: &sasl::Session,
    client: &ClientSlot,
    order: &produce::ProduceOrder,
    groups: &Groups,
    sessions: &FetchSessions,
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
            encode_api_versions(&mut w, 0, code::UNSUPPORTED_VERSION)?;
            tracing::debug!(key, version, "unsupported ApiVersions version answered in v0");
            return Ok(Some(w.finish()));
        }
        return Err(unsupported_version(key, version, &mut peek, client, peer));
    }
    let mut r = Reader::new(frame);
    let header = decode_header(&mut r)?;
    if header::flexible_response(key, version) {
        w.no_tagged_fields(); // response header v1
    }
    match key {
        API_VERSIONS => {
            if let Some(software) = decode_api_versions(&mut r, version)? {
                tracing::debug!(
                    peer,
                    name = software.name,
                    version = software.version,
                    "kafka client software"
                );
                client.set(software);
            }
            encode_api_versions(&mut w, version, code::NONE)?;
        }
        METADATA => {
            let req = decode_metadata(&mut r, version)?;
            metadata::metadata(engine, opts, version, req, &mut w).await?;
        }
        PRODUCE => {
            let req = decode_produce(&mut r, version)?;
            let acks = req.acks;
            let (topics, ids) = produce::produce(engine, order, req).await;
            if acks == 0 {
                return Ok(None);
            }
            encode_produce(&mut w, version, &topics, &ids);
        }
        FETCH => {
            let req = decode_fetch(&mut r, version)?;
            let still_logged_in = || session.recheck(engine.tokens.as_ref()) != sasl::Recheck::Revoked;
            let fetched = fetch::fetch(engine, sessions, version, req, opts.fetch_max_bytes, &still_logged_in).await;
            let Some(f) = fetched else {
                return Err(DecodeError {
                    at: 0,
                    message: "the connection's token was revoked or expired during a Fetch wait".into(),
                });
            };
            encode_fetch(&mut w, version, f.head, &f.topics, &f.ids);
        }
        LIST_OFFSETS => {
            let req = decode_list_offsets(&mut r, version)?;
            let topics = list_offsets::list_offsets(engine, req).await;
            encode_list_offsets(&mut w, version, &topics)?;
        }
        producer_ids::INIT_PRODUCER_ID => {
            let req = producer_ids::decode_init_producer_id(&mut r, version)?;
            let resp = producer_ids::init_producer_id(engine, &req, version).await;
            producer_ids::encode_init_producer_id(&mut w, version, &resp)?;
        }
        leader_epoch::OFFSET_FOR_LEADER_EPOCH => {
            let req = leader_epoch::decode_offset_for_leader_epoch(&mut r, version)?;
            let topics = leader_epoch::offset_for_leader_epoch(engine, req).await;
            leader_epoch::encode_offset_for_leader_epoch(&mut w, version, &topics);
        }
        k if is_group_api(k) => {
            let client = header.client_id.clone().unwrap_or_default();
            coordinator::group_request(engine, groups, k, version, &mut r, &client, peer, &mut w).await?;
        }
        k if consumer_proto::is_consumer_group_api(k) => {
            let client = header.client_id.clone().unwrap_or_default();
            consumer_coordinator::request(engine, groups, k, version, &mut r, &client, peer, &mut w).await?;
        }
        k if admin_proto::is_admin_api(k) => admin::request(engine, k, version, &mut r, &mut w).await?,
        k if acls::is_acl_api(k) => acls::request(engine, k, version, &mut r, &mut w)?,
        log_dirs::DESCRIBE_LOG_DIRS => log_dirs::request(engine, version, &mut r, &mut w)?,
        delete_records::DELETE_RECORDS => delete_records::request(engine, version, &mut r, &mut w).await?,
        offset_delete::OFFSET_DELETE => offset_delete::request(engine, groups, version, &mut r, &mut w).await?,
        describe_producers::DESCRIBE_PRODUCERS => describe_producers::request(engine, version, &mut r, &mut w).await?,
        k if txn_coordinator::is_txn_api(k) => txn_coordinator::request(engine, k, version, &mut r, &mut w).await?,
        sasl::SASL_HANDSHAKE => session.handshake(version, &mut r, &mut w)?,
        sasl::SASL_AUTHENTICATE => session.authenticate(engine.tokens.as_ref(), version, &mut r, &mut w)?,
        scram_users::DESCRIBE_USER_SCRAM_CREDENTIALS => {
            scram_users::request(engine.tokens.as_ref(), version, &mut r, &mut w)?
        }
        _ => unreachable!("supported() admits only the keys above"),
    }
    tracing::trace!(key, version, client = ?header.client_id, "kafka request answered");
    Ok(Some(w.finish()))
}

/// Logs (INFO) a request version that is not spoken, with who sent it,
/// and the error that closes its connection. `header` is just past the
/// correlation id: the client id follows in every header version.
fn unsupported_version(key: i16, version: i16, header: &mut Reader, client: &ClientSlot, peer: &str) -> DecodeError {
    let client_id = header.nullable_string().ok().flatten();
    let software = client.get().unwrap_or_default();
    let api = versions::api_name(key);
    tracing::info!(
        peer,
        api,
        key,
        version,
        client_id,
        client_software_name = software.name,
        client_software_version = software.version,
        "closing kafka connection: unsupported request version"
    );
    DecodeError {
        at: 2,
        message: format!("{api} v{version} is not supported (ApiVersions lists what is)"),
    }
}

/// The node's fetch sessions, shared by its connections.
pub type FetchSessions = std::sync::Mutex<fetch_session::Sessions>;

/// How long a data-plane request waits, at most, for this node's view to
/// open a partition the metadata log already places here (a topic just
/// created through another node, whose Metadata answer named this node).
pub const CATCH_UP_WAIT: Duration = Duration::from_secs(2);

/// `op` on one partition; if it answers that the topic or partition does not
/// exist or is not served here, catch up with the metadata log and, while
/// the caught-up view places the partition on this node, try again until it
/// succeeds or [`CATCH_UP_WAIT`] runs out. A partition led elsewhere costs
/// one catch-up and one more try. `op` runs at once on the first poll (a
/// pipelined Produce relies on it).
pub(crate) async fn catch_up<T, F, Fut>(
    engine: &Services,
    topic: &str,
    partition: u32,
    op: F,
) -> crate::api::ApiResult<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = crate::api::ApiResult<T>>,
{
    let retryable = |e: &ApiError| {
        matches!(
            e.code,
            ErrorCode::TopicNotFound | ErrorCode::PartitionNotFound | ErrorCode::Unavailable
        )
    };
    let first = op().await;
    match &first {
        Err(e) if retryable(e) => {}
        _ => return first,
    }
    let deadline = tokio::time::Instant::now() + CATCH_UP_WAIT;
    let me = engine.cluster.ready().node_id;
    loop {
        let _ = engine.cluster.sync_metadata().await;
        let placed_here = engine.topics.describe_topic(topic).is_ok_and(|d| {
            d.partition_info
                .iter()
                .any(|p| p.partition == partition && p.owner.as_deref() == Some(me.as_str()))
        });
        let r = op().await;
        match &r {
            Err(e) if retryable(e) && placed_here && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            _ => return r,
        }
    }
}

/// The names of the topics with these ids, catching up with the metadata
/// log first when the view lacks one (a topic just created elsewhere).
pub(crate) async fn topic_names<'a>(
    engine: &Services,
    ids: impl Iterator<Item = &'a crate::ids::TopicUuid>,
) -> std::collections::HashMap<crate::ids::TopicUuid, String> {
    let wanted: Vec<_> = ids.filter(|id| !id.is_zero()).copied().collect();
    if wanted.is_empty() {
        return Default::default();
    }
    let names = || -> std::collections::HashMap<_, _> {
        engine
            .topics
            .list_topics()
            .into_iter()
            .map(|t| (t.topic_id, t.name))
            .collect()
    };
    let mut known = names();
    if wanted.iter().any(|id| !known.contains_key(id)) && engine.cluster.sync_metadata().await {
        known = names();
    }
    known.retain(|id, _| wanted.contains(id));
    known
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

#[cfg(test)]
mod tests;
