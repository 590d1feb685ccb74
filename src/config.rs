//! Every flag of `sluice serve`, its environment variable, its default, and
//! the validation that runs once at startup, before anything is opened.

use clap::Args;
use std::time::Duration;

/// The WAL PUT budget `--wal-put-rate auto` gives an `s3://` WAL, in PUTs
/// per second.
pub const S3_WAL_PUT_RATE: f64 = 1.0;

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Stable identity of this node across restarts (default: the host name).
    #[arg(long, env = "SLUICE_NODE_ID")]
    pub node_id: Option<String>,

    /// Root directory for the file:// defaults of the stores below.
    #[arg(long, env = "SLUICE_DATA_DIR", default_value = "./sluice-data")]
    pub data_dir: String,

    /// Where data objects live: s3://bucket/prefix, file:///PATH or memory://.
    /// Default: file://<data-dir>/objects.
    #[arg(long, env = "SLUICE_OBJECT_STORE")]
    pub object_store: Option<String>,

    /// Where WAL segments live (default: the object store).
    #[arg(long, env = "SLUICE_WAL_STORE")]
    pub wal_store: Option<String>,

    /// The metadata log: dynamodb://TABLE[/CLUSTER], file:///PATH, s3://bucket/prefix, memory://
    /// (default: file://<data-dir>/meta).
    #[arg(long, env = "SLUICE_METADATA")]
    pub metadata: Option<String>,

    /// S3-compatible endpoint (MinIO, radosgw, ...); default: AWS.
    #[arg(long, env = "SLUICE_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,

    /// S3 region (default: from the AWS environment, else us-east-1).
    #[arg(long, env = "SLUICE_S3_REGION")]
    pub s3_region: Option<String>,

    /// Path-style S3 requests (endpoint/bucket/key); on by default with --s3-endpoint.
    #[arg(long, env = "SLUICE_S3_FORCE_PATH_STYLE")]
    pub s3_force_path_style: bool,

    /// DynamoDB endpoint for a dynamodb:// metadata log (DynamoDB Local).
    #[arg(long, env = "SLUICE_DYNAMODB_ENDPOINT")]
    pub dynamodb_endpoint: Option<String>,

    /// HTTP listener.
    #[arg(long, env = "SLUICE_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    pub http_addr: String,

    /// Kafka protocol listener.
    #[arg(long, env = "SLUICE_KAFKA_ADDR", default_value = "0.0.0.0:9092")]
    pub kafka_addr: String,

    /// Largest Kafka request frame accepted; a longer frame closes its connection.
    #[arg(long, env = "SLUICE_KAFKA_MAX_FRAME_BYTES", default_value_t = 100 * 1024 * 1024)]
    pub kafka_max_frame_bytes: usize,

    /// Largest Kafka request frame accepted before the connection has
    /// logged in with SASL (with --auth on; Kafka's 512 KiB rule); a longer
    /// frame closes the connection as soon as its length is read.
    #[arg(long, env = "SLUICE_KAFKA_MAX_UNAUTHENTICATED_FRAME_BYTES", default_value_t = 512 * 1024)]
    pub kafka_max_unauthenticated_frame_bytes: usize,

    /// Bytes of Kafka request frames all connections together may hold
    /// (read but not yet answered); a connection whose next frame does not
    /// fit waits before reading its body. At least --kafka-max-frame-bytes.
    #[arg(long, env = "SLUICE_KAFKA_MAX_REQUEST_MEMORY_BYTES", default_value_t = 256 * 1024 * 1024)]
    pub kafka_max_request_memory_bytes: usize,

    /// Largest Kafka Fetch response, whatever the request's max_bytes
    /// (Kafka's fetch.max.bytes); at least one batch is always returned.
    #[arg(long, env = "SLUICE_KAFKA_FETCH_MAX_BYTES", default_value_t = 55 * 1024 * 1024)]
    pub kafka_fetch_max_bytes: usize,

    /// Seconds a Kafka connection has, from accept, to log in with SASL
    /// when --auth is on; one that has not is closed.
    #[arg(long, env = "SLUICE_KAFKA_AUTH_DEADLINE_SEC", default_value_t = 10)]
    pub kafka_auth_deadline_sec: u64,

    /// PEM certificate chain: serve both listeners over TLS (with --tls-key).
    #[arg(long, env = "SLUICE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, env = "SLUICE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,

    /// PEM CA certificates this node trusts when it forwards to other nodes
    /// over TLS (default: the certificates in --tls-cert).
    #[arg(long, env = "SLUICE_TLS_CA", requires = "tls_cert")]
    pub tls_ca: Option<std::path::PathBuf>,

    /// Connections each listener keeps open at once; more are closed on accept.
    #[arg(long, env = "SLUICE_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,

    /// Connections one client address may keep open at once, per listener;
    /// more from that address are closed on accept.
    #[arg(long, env = "SLUICE_MAX_CONNECTIONS_PER_IP", default_value_t = 1024)]
    pub max_connections_per_ip: usize,

    /// Seconds a client may take for a TLS handshake, an HTTP request head, a
    /// Kafka frame once started, or a pause inside an HTTP body.
    #[arg(long, env = "SLUICE_READ_TIMEOUT_SEC", default_value_t = 30)]
    pub read_timeout_sec: u64,

    /// Seconds a Kafka connection may sit without a request (connections.max.idle.ms).
    #[arg(long, env = "SLUICE_KAFKA_IDLE_TIMEOUT_SEC", default_value_t = 600)]
    pub kafka_idle_timeout_sec: u64,

    /// Seconds an HTTP request body may take in all, however steadily it
    /// trickles in; past it the request fails and its connection is closed.
    #[arg(long, env = "SLUICE_REQUEST_BODY_TIMEOUT_SEC", default_value_t = 60)]
    pub request_body_timeout_sec: u64,

    /// Largest HTTP request head (request line and headers) accepted.
    #[arg(long, env = "SLUICE_MAX_HEADER_BYTES", default_value_t = 64 * 1024)]
    pub max_header_bytes: usize,

    /// Create a topic (one partition) when a Kafka Metadata request names an unknown one.
    #[arg(long, env = "SLUICE_AUTO_CREATE_TOPICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_create_topics: bool,

    /// HTTP address other nodes and clients use to reach this node (default: the listener's).
    #[arg(long, env = "SLUICE_ADVERTISED_HTTP_ADDR")]
    pub advertised_http_addr: Option<String>,

    /// Kafka address advertised in metadata (default: the listener's).
    #[arg(long, env = "SLUICE_ADVERTISED_KAFKA_ADDR")]
    pub advertised_kafka_addr: Option<String>,

    /// Seconds between heartbeats proposed to the metadata log.
    #[arg(long, env = "SLUICE_HEARTBEAT_INTERVAL_SEC", default_value_t = 5)]
    pub heartbeat_interval_sec: u64,

    /// A node silent this long (counted in the lease holder's heartbeats) is fenced.
    #[arg(long, env = "SLUICE_NODE_TIMEOUT_SEC", default_value_t = 30)]
    pub node_timeout_sec: u64,

    /// A lease holder silent this long loses the lease (default: half the node timeout, but more than one
    /// heartbeat interval).
    #[arg(long, env = "SLUICE_LEASE_TIMEOUT_SEC")]
    pub lease_timeout_sec: Option<u64>,

    /// Seconds between failing readiness and ending live reads on shutdown.
    #[arg(long, env = "SLUICE_SHUTDOWN_DRAIN_SEC", default_value_t = 5)]
    pub shutdown_drain_sec: u64,

    /// Seconds in-flight requests get to finish on shutdown.
    #[arg(long, env = "SLUICE_SHUTDOWN_TIMEOUT_SEC", default_value_t = 30)]
    pub shutdown_timeout_sec: u64,

    /// Milliseconds a WAL segment may wait for more appends while a PUT is in flight.
    #[arg(long, env = "SLUICE_WAL_LINGER_MS", default_value_t = 5)]
    pub wal_linger_ms: u64,

    /// A WAL segment is cut when it reaches this many bytes.
    #[arg(long, env = "SLUICE_WAL_SEGMENT_BYTES", default_value_t = 8 << 20)]
    pub wal_segment_bytes: usize,

    /// WAL PUTs in flight at once.
    #[arg(long, env = "SLUICE_WAL_MAX_INFLIGHT", default_value_t = 4)]
    pub wal_max_inflight: usize,

    /// WAL PUTs per second this node may make for segments smaller than
    /// --wal-put-bytes: a number, `off`, or `auto` (by the WAL store's
    /// kind: 1 on `s3://`, off on `file://` and `memory://`; see docs/wal.md).
    /// The budget is per node: a client that waits for each ack before its
    /// next append gets about one append per PUT (1 a second at `auto` on
    /// `s3://`); ask for latency with --wal-latency-target-ms or `off`.
    #[arg(long, env = "SLUICE_WAL_PUT_RATE", default_value = "auto")]
    pub wal_put_rate: String,

    /// With a WAL PUT budget: a segment of at least this many bytes goes
    /// without waiting for the budget.
    #[arg(long, env = "SLUICE_WAL_PUT_BYTES", default_value_t = 1 << 20)]
    pub wal_put_bytes: usize,

    /// PUTs the WAL budget lets go at once after a quiet spell.
    #[arg(long, env = "SLUICE_WAL_PUT_BURST", default_value_t = 4)]
    pub wal_put_burst: u32,

    /// With a WAL PUT budget: an append that has waited this many
    /// milliseconds goes in a PUT without a token (0: no target).
    #[arg(long, env = "SLUICE_WAL_LATENCY_TARGET_MS", default_value_t = 0)]
    pub wal_latency_target_ms: u64,

    /// For benchmarks only: delay every object-store request as a model of
    /// a cloud store would (`none`, `s3-standard`, `s3-express`; see
    /// docs/benchmarks.md). Never set in production.
    #[arg(long, env = "SLUICE_STORE_LATENCY_MODEL", default_value = "none")]
    pub store_latency_model: String,

    /// A stream's tail is flushed to a data object at this many bytes.
    #[arg(long, env = "SLUICE_FLUSH_BYTES", default_value_t = 8 << 20)]
    pub flush_bytes: usize,

    /// ... or when its oldest unflushed record is this many seconds old.
    /// When one stream is due, the others past half of either bound go in
    /// the same data object.
    #[arg(long, env = "SLUICE_FLUSH_INTERVAL_SEC", default_value_t = 10)]
    pub flush_interval_sec: u64,

    /// Appends are refused (HTTP 429, retryable) while this many bytes are buffered.
    #[arg(long, env = "SLUICE_MAX_BUFFERED_BYTES", default_value_t = 512 << 20)]
    pub max_buffered_bytes: usize,

    /// Bytes of data-object chunks cached for reads.
    #[arg(long, env = "SLUICE_READ_CACHE_BYTES", default_value_t = 256 << 20)]
    pub read_cache_bytes: usize,

    /// Largest record (key + value + headers) accepted.
    #[arg(long, env = "SLUICE_MAX_RECORD_BYTES", default_value_t = 1 << 20)]
    pub max_record_bytes: usize,

    /// Largest request body accepted.
    #[arg(long, env = "SLUICE_MAX_REQUEST_BYTES", default_value_t = 8 << 20)]
    pub max_request_bytes: usize,

    /// Largest HTTP read answer: `max_bytes` of `GET .../records` above it is
    /// clamped to it (and the JSON body stays within it); Durable Streams
    /// reads and SSE batches read at most this much at once.
    #[arg(long, env = "SLUICE_HTTP_MAX_READ_BYTES", default_value_t = 8 << 20)]
    pub http_max_read_bytes: usize,

    /// Longest long poll a client may ask for, in milliseconds.
    #[arg(long, env = "SLUICE_MAX_WAIT_MS", default_value_t = 30_000)]
    pub max_wait_ms: u64,

    /// Milliseconds between polls of the metadata log for other nodes' entries.
    #[arg(long, env = "SLUICE_META_POLL_MS", default_value_t = 100)]
    pub meta_poll_ms: u64,

    /// Longest gap, in milliseconds, between polls of an idle metadata log:
    /// each poll that finds nothing doubles the gap from --meta-poll-ms up
    /// to this; an entry read or written resets it.
    #[arg(long, env = "SLUICE_META_IDLE_POLL_MS", default_value_t = 800)]
    pub meta_idle_poll_ms: u64,

    /// Seconds one request to the metadata log may take; past it the store counts as unreachable and
    /// metadata changes fail with 503 until it answers again.
    #[arg(long, env = "SLUICE_METADATA_REQUEST_TIMEOUT_SEC", default_value_t = 2)]
    pub metadata_request_timeout_sec: u64,

    /// A transfer that makes no progress this long is cancelled by the lease holder.
    #[arg(long, env = "SLUICE_TRANSFER_TIMEOUT_SEC", default_value_t = 30)]
    pub transfer_timeout_sec: u64,

    /// Rebalance when the open-stream counts of the most and least loaded nodes differ by more than this.
    #[arg(long, env = "SLUICE_REBALANCE_THRESHOLD", default_value_t = 1)]
    pub rebalance_threshold: usize,

    /// Transfers the lease holder runs at once (rebalancing and draining).
    #[arg(long, env = "SLUICE_MAX_CONCURRENT_TRANSFERS", default_value_t = 4)]
    pub max_concurrent_transfers: usize,

    /// Seconds between garbage-collection and retention runs of the lease holder (0: never).
    #[arg(long, env = "SLUICE_GC_INTERVAL_SEC", default_value_t = 60)]
    pub gc_interval_sec: u64,

    /// An unreferenced data object is deleted after staying unreferenced this long.
    #[arg(long, env = "SLUICE_GC_GRACE_SEC", default_value_t = 3600)]
    pub gc_grace_sec: u64,

    /// Seconds between a node's looks at the compacted streams it owns
    /// (0: never compact).
    #[arg(long, env = "SLUICE_COMPACTION_INTERVAL_SEC", default_value_t = 30)]
    pub compaction_interval_sec: u64,

    /// Bytes per second of data objects a node's compactor reads at most
    /// (it pauses after each run for as long as the run's input needs).
    #[arg(long, env = "SLUICE_COMPACTION_BYTES_PER_SEC", default_value_t = 32 << 20)]
    pub compaction_bytes_per_sec: u64,

    /// Log line format: text or json.
    #[arg(long, env = "SLUICE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,

    /// on: HTTP requests need `Authorization: Bearer <token>` and Kafka
    /// clients must log in with SASL/PLAIN. off (the default): anyone who
    /// can reach the ports may do anything. See docs/security.md.
    #[arg(long, env = "SLUICE_AUTH", default_value = "off", value_parser = ["on", "off"])]
    pub auth: String,

    /// File holding the bootstrap admin secret (at least 16 characters;
    /// surrounding whitespace is ignored). Required with --auth on.
    #[arg(long, env = "SLUICE_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<String>,
}

/// Shortest bootstrap admin secret accepted.
pub const MIN_ADMIN_SECRET_LEN: usize = 16;

/// The bootstrap admin secret in `path`. Errors name the flag, never the secret.
fn read_admin_secret(path: &str) -> Result<crate::auth::Secret, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("--admin-token-file {path:?} cannot be read: {e}"))?;
    let secret = text.trim();
    if secret.len() < MIN_ADMIN_SECRET_LEN {
        return Err(format!(
            "--admin-token-file {path:?} must hold a secret of at least {MIN_ADMIN_SECRET_LEN} characters"
        ));
    }
    Ok(crate::auth::Secret::new(secret))
}

/// Validated configuration with every default resolved.
#[derive(Debug, Clone)]
pub struct Config {
    pub node_id: String,
    pub object_store: String,
    pub wal_store: String,
    pub metadata: String,
    pub s3: crate::store::s3::S3Options,
    pub dynamodb_endpoint: Option<String>,
    pub http_addr: String,
    pub kafka_addr: String,
    pub advertised_http_addr: String,
    pub advertised_kafka_addr: String,
    pub kafka_max_frame_bytes: usize,
    pub kafka_max_unauthenticated_frame_bytes: usize,
    pub kafka_max_request_memory_bytes: usize,
    pub kafka_fetch_max_bytes: usize,
    pub kafka_auth_deadline: Duration,
    pub tls: Option<crate::net::Tls>,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub read_timeout: Duration,
    pub kafka_idle_timeout: Duration,
    pub request_body_timeout: Duration,
    pub max_header_bytes: usize,
    pub auto_create_topics: bool,
    pub heartbeat_interval: Duration,
    pub node_timeout_heartbeats: u64,
    pub lease_timeout_heartbeats: u64,
    pub shutdown_drain: Duration,
    pub shutdown_timeout: Duration,
    pub wal_linger: Duration,
    pub wal_segment_bytes: usize,
    pub wal_max_inflight: usize,
    pub wal_budget: Option<crate::wal::budget::BudgetConfig>,
    pub wal_latency_target: Option<Duration>,
    pub store_latency_model: Option<crate::store::latency::LatencyModel>,
    pub flush_bytes: usize,
    pub flush_interval: Duration,
    pub max_buffered_bytes: usize,
    pub read_cache_bytes: usize,
    pub max_record_bytes: usize,
    pub max_request_bytes: usize,
    pub http_max_read_bytes: usize,
    pub max_wait: Duration,
    pub meta_poll: Duration,
    pub meta_idle_poll: Duration,
    pub metadata_request_timeout: Duration,
    pub transfer_timeout_heartbeats: u64,
    pub rebalance_threshold: usize,
    pub max_concurrent_transfers: usize,
    pub gc_interval: Duration,
    pub gc_grace: Duration,
    pub compaction_interval: Duration,
    pub compaction_bytes_per_sec: u64,
    pub log_format: String,
    /// `--auth on`.
    pub auth: bool,
    /// The bootstrap admin secret (never printed: `Secret` hides it).
    pub admin_token: Option<crate::auth::Secret>,
}

fn file_url(dir: &str, sub: &str) -> String {
    let path = std::path::Path::new(dir).join(sub);
    let abs = if path.is_absolute() {
        path
    } else {
        std::env::current_dir().map(|d| d.join(&path)).unwrap_or(path)
    };
    format!("file://{}", abs.display())
}

fn advertised(listener: &str, host: &str) -> String {
    match listener.rsplit_once(':') {
        Some(("0.0.0.0" | "[::]" | "", port)) => format!("{host}:{port}"),
        _ => listener.to_string(),
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

impl ServeArgs {
    /// Parse flags as the command line would (for embedding and tests).
    pub fn parse_from<I: IntoIterator<Item = S>, S: Into<std::ffi::OsString> + Clone>(
        args: I,
    ) -> Result<Self, clap::Error> {
        #[derive(clap::Parser)]
        struct Wrapper {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let all = std::iter::once(std::ffi::OsString::from("sluice")).chain(args.into_iter().map(Into::into));
        <Wrapper as clap::Parser>::try_parse_from(all).map(|w| w.serve)
    }

    /// `--lease-timeout-sec`, or its default for this interval and node timeout.
    pub fn resolved_lease_timeout_sec(&self) -> u64 {
        self.lease_timeout_sec
            .unwrap_or_else(|| default_lease_timeout_sec(self.heartbeat_interval_sec, self.node_timeout_sec))
    }

    /// The heartbeat interval, node timeout and lease timeout: the failover
    /// page's `interval < lease <= node timeout`. Returns the lease timeout.
    fn check_timing(&self) -> Result<u64, String> {
        let hb = self.heartbeat_interval_sec;
        if hb == 0 {
            return Err("--heartbeat-interval-sec must be at least 1".into());
        }
        if self.node_timeout_sec <= hb {
            return Err(format!(
                "--node-timeout-sec ({}) must be greater than --heartbeat-interval-sec ({hb})",
                self.node_timeout_sec
            ));
        }
        let lease = self.resolved_lease_timeout_sec();
        if lease <= hb || lease > self.node_timeout_sec {
            return Err(format!(
                "--lease-timeout-sec ({lease}) must be greater than --heartbeat-interval-sec ({hb}) and at most --node-timeout-sec ({})",
                self.node_timeout_sec
            ));
        }
        Ok(lease)
    }

    /// Sizes, counts and timeouts that must be at least 1, and the sizes that
    /// must fit inside one another.
    fn check_limits(&self) -> Result<(), String> {
        for (flag, v) in [
            ("--wal-segment-bytes", self.wal_segment_bytes),
            ("--wal-max-inflight", self.wal_max_inflight),
            ("--flush-bytes", self.flush_bytes),
            ("--max-record-bytes", self.max_record_bytes),
            ("--max-request-bytes", self.max_request_bytes),
            ("--http-max-read-bytes", self.http_max_read_bytes),
            ("--kafka-max-frame-bytes", self.kafka_max_frame_bytes),
            (
                "--kafka-max-unauthenticated-frame-bytes",
                self.kafka_max_unauthenticated_frame_bytes,
            ),
            ("--kafka-fetch-max-bytes", self.kafka_fetch_max_bytes),
            ("--kafka-auth-deadline-sec", self.kafka_auth_deadline_sec as usize),
            ("--max-connections", self.max_connections),
            ("--max-connections-per-ip", self.max_connections_per_ip),
            ("--read-timeout-sec", self.read_timeout_sec as usize),
            ("--kafka-idle-timeout-sec", self.kafka_idle_timeout_sec as usize),
            ("--request-body-timeout-sec", self.request_body_timeout_sec as usize),
            (
                "--metadata-request-timeout-sec",
                self.metadata_request_timeout_sec as usize,
            ),
        ] {
            if v == 0 {
                return Err(format!("{flag} must be at least 1"));
            }
        }
        if self.max_record_bytes > self.max_request_bytes {
            return Err(format!(
                "--max-record-bytes ({}) must not exceed --max-request-bytes ({})",
                self.max_record_bytes, self.max_request_bytes
            ));
        }
        if self.kafka_max_request_memory_bytes < self.kafka_max_frame_bytes {
            return Err(format!(
                "--kafka-max-request-memory-bytes ({}) must be at least --kafka-max-frame-bytes ({})",
                self.kafka_max_request_memory_bytes, self.kafka_max_frame_bytes
            ));
        }
        if self.max_buffered_bytes < self.max_request_bytes {
            return Err(format!(
                "--max-buffered-bytes ({}) must be at least --max-request-bytes ({})",
                self.max_buffered_bytes, self.max_request_bytes
            ));
        }
        Ok(())
    }

    /// `--wal-put-rate`, `--wal-put-burst` and `--wal-put-bytes` for a WAL
    /// on `wal_store`. `auto` is a budget where requests are billed one by
    /// one (`s3://`: 1 PUT a second, the point on the measured frontier
    /// that keeps PUTs under 1,500 per GiB from 1 MiB/s up, see
    /// docs/benchmarks.md) and none elsewhere.
    fn wal_budget(&self, wal_store: &str) -> Result<Option<crate::wal::budget::BudgetConfig>, String> {
        use crate::wal::budget::BudgetConfig;
        let rate = match self.wal_put_rate.as_str() {
            "off" => return Ok(None),
            "auto" if wal_store.starts_with("s3://") => S3_WAL_PUT_RATE,
            "auto" => return Ok(None),
            rate => rate
                .parse()
                .map_err(|_| format!("--wal-put-rate {rate:?} must be a number of PUTs per second, off or auto"))?,
        };
        BudgetConfig::new(rate, self.wal_put_burst)
            .map(|b| Some(b.bypass_at(self.wal_put_bytes)))
            .map_err(|e| format!("--wal-put-rate/--wal-put-burst: {e}"))
    }

    /// `--object-store`, `--wal-store` and `--metadata`, defaulted under
    /// `--data-dir` and checked for a scheme each accepts.
    fn resolve_stores(&self) -> Result<(String, String, String), String> {
        let object_store = self
            .object_store
            .clone()
            .unwrap_or_else(|| file_url(&self.data_dir, "objects"));
        let wal_store = self.wal_store.clone().unwrap_or_else(|| object_store.clone());
        let metadata = self
            .metadata
            .clone()
            .unwrap_or_else(|| file_url(&self.data_dir, "meta"));
        for (flag, url) in [
            ("--object-store", &object_store),
            ("--wal-store", &wal_store),
            ("--metadata", &metadata),
        ] {
            let ok = url.starts_with("file:///")
                || url.starts_with("memory://")
                || (url.starts_with("s3://") && crate::store::s3::parse_url(url).is_ok())
                || (flag == "--metadata" && crate::meta::dynamo_log::parse_url(url).is_ok());
            if !ok {
                return Err(format!(
                    "{flag} {url:?} must be s3://BUCKET/PREFIX, file:///ABSOLUTE/PATH, memory://{}",
                    if flag == "--metadata" {
                        " or dynamodb://TABLE"
                    } else {
                        ""
                    }
                ));
            }
        }
        if metadata.starts_with("dynamodb://") && object_store.starts_with("memory://") {
            return Err(
                "--metadata dynamodb:// keeps snapshots in --object-store, which must be durable (not memory://)"
                    .into(),
            );
        }
        Ok((object_store, wal_store, metadata))
    }

    /// Resolve defaults and check every combination. The error is one line
    /// naming the flags involved.
    pub fn validate(&self) -> Result<Config, String> {
        let hb = self.heartbeat_interval_sec;
        let lease = self.check_timing()?;
        let node_id = self.node_id.clone().unwrap_or_else(host_name);
        crate::ids::NodeId::validate(&node_id).map_err(|e| format!("--node-id: {e}"))?;
        self.check_limits()?;
        for (flag, addr) in [("--http-addr", &self.http_addr), ("--kafka-addr", &self.kafka_addr)] {
            if addr.parse::<std::net::SocketAddr>().is_err() {
                return Err(format!("{flag} {addr:?} is not an address like 0.0.0.0:8080"));
            }
        }
        let (object_store, wal_store, metadata) = self.resolve_stores()?;
        let wal_budget = self.wal_budget(&wal_store)?;
        let store_latency_model = crate::store::latency::LatencyModel::parse(&self.store_latency_model)?;
        let auth = self.auth == "on";
        let admin_token = match &self.admin_token_file {
            Some(path) => Some(read_admin_secret(path)?),
            None if auth => return Err("--auth on requires --admin-token-file (the bootstrap admin secret)".into()),
            None => None,
        };
        if self.max_header_bytes < 8192 {
            return Err(format!(
                "--max-header-bytes ({}) must be at least 8192",
                self.max_header_bytes
            ));
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(crate::net::Tls::load(cert, key, self.tls_ca.as_deref())?),
            (None, None) => None,
            _ => return Err("--tls-cert and --tls-key must be given together".into()),
        };
        let host = host_name();
        Ok(Config {
            node_id,
            object_store,
            wal_store,
            metadata,
            s3: crate::store::s3::S3Options {
                endpoint: self.s3_endpoint.clone(),
                region: self.s3_region.clone(),
                force_path_style: self.s3_force_path_style || self.s3_endpoint.is_some(),
            },
            dynamodb_endpoint: self.dynamodb_endpoint.clone(),
            advertised_http_addr: self
                .advertised_http_addr
                .clone()
                .unwrap_or_else(|| advertised(&self.http_addr, &host)),
            advertised_kafka_addr: self
                .advertised_kafka_addr
                .clone()
                .unwrap_or_else(|| advertised(&self.kafka_addr, &host)),
            http_addr: self.http_addr.clone(),
            kafka_addr: self.kafka_addr.clone(),
            kafka_max_frame_bytes: self.kafka_max_frame_bytes,
            kafka_max_unauthenticated_frame_bytes: self.kafka_max_unauthenticated_frame_bytes,
            kafka_max_request_memory_bytes: self.kafka_max_request_memory_bytes,
            kafka_fetch_max_bytes: self.kafka_fetch_max_bytes,
            kafka_auth_deadline: Duration::from_secs(self.kafka_auth_deadline_sec),
            tls,
            max_connections: self.max_connections,
            max_connections_per_ip: self.max_connections_per_ip,
            read_timeout: Duration::from_secs(self.read_timeout_sec),
            kafka_idle_timeout: Duration::from_secs(self.kafka_idle_timeout_sec),
            request_body_timeout: Duration::from_secs(self.request_body_timeout_sec),
            max_header_bytes: self.max_header_bytes,
            auto_create_topics: self.auto_create_topics,
            heartbeat_interval: Duration::from_secs(hb),
            node_timeout_heartbeats: crate::meta::liveness::heartbeats_for(self.node_timeout_sec, hb),
            lease_timeout_heartbeats: crate::meta::liveness::heartbeats_for(lease, hb),
            shutdown_drain: Duration::from_secs(self.shutdown_drain_sec),
            shutdown_timeout: Duration::from_secs(self.shutdown_timeout_sec),
            wal_linger: Duration::from_millis(self.wal_linger_ms),
            wal_segment_bytes: self.wal_segment_bytes,
            wal_max_inflight: self.wal_max_inflight,
            wal_budget,
            wal_latency_target: (self.wal_latency_target_ms > 0)
                .then(|| Duration::from_millis(self.wal_latency_target_ms)),
            store_latency_model,
            flush_bytes: self.flush_bytes,
            flush_interval: Duration::from_secs(self.flush_interval_sec),
            max_buffered_bytes: self.max_buffered_bytes,
            read_cache_bytes: self.read_cache_bytes,
            max_record_bytes: self.max_record_bytes,
            max_request_bytes: self.max_request_bytes,
            http_max_read_bytes: self.http_max_read_bytes,
            max_wait: Duration::from_millis(self.max_wait_ms),
            meta_poll: Duration::from_millis(self.meta_poll_ms.max(1)),
            meta_idle_poll: Duration::from_millis(self.meta_idle_poll_ms.max(1)),
            metadata_request_timeout: Duration::from_secs(self.metadata_request_timeout_sec),
            transfer_timeout_heartbeats: crate::meta::liveness::heartbeats_for(self.transfer_timeout_sec.max(1), hb),
            rebalance_threshold: self.rebalance_threshold,
            max_concurrent_transfers: self.max_concurrent_transfers,
            gc_interval: Duration::from_secs(self.gc_interval_sec),
            gc_grace: Duration::from_secs(self.gc_grace_sec),
            compaction_interval: Duration::from_secs(self.compaction_interval_sec),
            compaction_bytes_per_sec: self.compaction_bytes_per_sec.max(1),
            log_format: self.log_format.clone(),
            auth,
            admin_token,
        })
    }
}

impl Config {
    /// The transport settings both listeners share.
    pub fn transport(&self) -> crate::net::Transport {
        crate::net::Transport {
            tls: self.tls.clone(),
            max_connections: self.max_connections,
            max_connections_per_ip: self.max_connections_per_ip,
            read_timeout: self.read_timeout,
            idle_timeout: self.kafka_idle_timeout,
            max_header_bytes: self.max_header_bytes,
            body_timeout: self.request_body_timeout,
        }
    }
}

/// The default lease timeout: half the node timeout, raised to one second
/// above the heartbeat interval where half would not be above it. A holder
/// then always gets at least two of the taker's heartbeats
/// (`ceil(lease / interval) >= 2`) before it loses the lease, and the lease
/// never outlasts the node timeout: every node timeout greater than the
/// interval has a valid default (`interval < lease <= node timeout`).
pub fn default_lease_timeout_sec(heartbeat_interval_sec: u64, node_timeout_sec: u64) -> u64 {
    (node_timeout_sec / 2).max(heartbeat_interval_sec + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(args: &[&str]) -> ServeArgs {
        let mut all = vec!["sluice"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).unwrap().serve
    }

    #[test]
    fn defaults_validate() {
        let c = parse(&["--node-id", "n1"]).validate().unwrap();
        assert_eq!(c.node_timeout_heartbeats, 6);
        assert_eq!(c.lease_timeout_heartbeats, 3);
        assert!(c.object_store.starts_with("file:///") && c.object_store.ends_with("sluice-data/objects"));
        assert_eq!(c.wal_store, c.object_store);
        assert!(c.metadata.ends_with("sluice-data/meta"));
        assert_eq!(c.kafka_max_frame_bytes, 100 << 20);
        assert!(c.auto_create_topics);
    }

    #[test]
    fn the_wal_put_budget_defaults_by_store_kind() {
        let args = parse(&["--node-id", "n1"]);
        assert_eq!(args.wal_budget("file:///tmp/x").unwrap(), None);
        assert_eq!(args.wal_budget("memory://").unwrap(), None);
        let s3 = args.wal_budget("s3://bucket/p").unwrap().unwrap();
        assert_eq!(s3.puts_per_sec, S3_WAL_PUT_RATE);
        assert_eq!(s3.burst, 4);
        assert_eq!(s3.bypass_bytes, Some(1 << 20));
        let off = parse(&["--node-id", "n1", "--wal-put-rate", "off"]);
        assert_eq!(off.wal_budget("s3://bucket/p").unwrap(), None);
        let set = parse(&["--node-id", "n1", "--wal-put-rate", "20", "--wal-put-bytes", "0"]);
        let b = set.wal_budget("file:///tmp/x").unwrap().unwrap();
        assert_eq!((b.puts_per_sec, b.bypass_bytes), (20.0, None));
        for bad in ["fast", "0", "NaN"] {
            let e = parse(&["--node-id", "n1", "--wal-put-rate", bad]).wal_budget("s3://b/p");
            assert!(e.is_err(), "{bad}");
        }
        assert!(
            parse(&["--node-id", "n1", "--wal-put-rate", "5", "--wal-put-burst", "0"])
                .wal_budget("s3://b/p")
                .is_err()
        );
    }

    #[test]
    fn kafka_flags_parse() {
        let c = parse(&[
            "--node-id",
            "n1",
            "--auto-create-topics",
            "false",
            "--kafka-max-frame-bytes",
            "4096",
        ])
        .validate()
        .unwrap();
        assert!(!c.auto_create_topics);
        assert_eq!(c.kafka_max_frame_bytes, 4096);
        let err = parse(&["--node-id", "n1", "--kafka-max-frame-bytes", "0"])
            .validate()
            .unwrap_err();
        assert!(err.contains("--kafka-max-frame-bytes"), "{err}");
    }

    #[test]
    fn hostile_client_limits_default_to_kafkas_and_bad_values_are_refused() {
        let c = parse(&["--node-id", "n1"]).validate().unwrap();
        assert_eq!(c.kafka_max_unauthenticated_frame_bytes, 524_288);
        assert_eq!(c.kafka_max_request_memory_bytes, 256 << 20);
        assert_eq!(c.kafka_fetch_max_bytes, 57_671_680, "Kafka's fetch.max.bytes");
        assert_eq!(c.kafka_auth_deadline, Duration::from_secs(10));
        assert_eq!(c.max_connections_per_ip, 1024);
        for flag in [
            "--kafka-max-unauthenticated-frame-bytes",
            "--kafka-fetch-max-bytes",
            "--kafka-auth-deadline-sec",
            "--max-connections-per-ip",
        ] {
            let err = parse(&["--node-id", "n1", flag, "0"]).validate().unwrap_err();
            assert!(err.contains(flag), "{err}");
        }
        // A budget smaller than one frame would never let that frame in.
        let err = parse(&[
            "--node-id",
            "n1",
            "--kafka-max-frame-bytes",
            "2000000",
            "--kafka-max-request-memory-bytes",
            "1000000",
        ])
        .validate()
        .unwrap_err();
        assert_eq!(
            err,
            "--kafka-max-request-memory-bytes (1000000) must be at least --kafka-max-frame-bytes (2000000)"
        );
    }

    #[test]
    fn transport_flags_default_and_bad_values_are_refused() {
        let c = parse(&["--node-id", "n1"]).validate().unwrap();
        assert!(c.tls.is_none());
        assert_eq!(c.max_connections, 4096);
        assert_eq!(c.read_timeout, Duration::from_secs(30));
        assert_eq!(c.kafka_idle_timeout, Duration::from_secs(600));
        assert_eq!(c.max_header_bytes, 64 * 1024);
        for (flag, bad) in [
            ("--max-connections", "0"),
            ("--read-timeout-sec", "0"),
            ("--kafka-idle-timeout-sec", "0"),
            ("--max-header-bytes", "100"),
        ] {
            let err = parse(&["--node-id", "n1", flag, bad]).validate().unwrap_err();
            assert!(err.contains(flag), "{err}");
        }
        // A certificate without its key (and the reverse) is a usage error.
        let mut cli = vec!["sluice", "--node-id", "n1", "--tls-cert", "/c.pem"];
        assert!(Cli::try_parse_from(&cli).is_err());
        cli[3] = "--tls-key";
        assert!(Cli::try_parse_from(&cli).is_err());
        let err = parse(&[
            "--node-id",
            "n1",
            "--tls-cert",
            "/nonexistent/c.pem",
            "--tls-key",
            "/nonexistent/k.pem",
        ])
        .validate()
        .unwrap_err();
        assert!(err.starts_with("--tls-cert /nonexistent/c.pem"), "{err}");
    }

    #[test]
    fn node_timeout_not_above_the_heartbeat_interval_is_refused() {
        let err = parse(&["--node-id", "n1", "--node-timeout-sec", "5"])
            .validate()
            .unwrap_err();
        assert_eq!(
            err,
            "--node-timeout-sec (5) must be greater than --heartbeat-interval-sec (5)"
        );
        assert!(parse(&["--node-id", "n1", "--node-timeout-sec", "3"])
            .validate()
            .is_err());
    }

    #[test]
    fn lease_timeout_must_sit_between_the_interval_and_the_node_timeout() {
        assert!(parse(&["--node-id", "n", "--lease-timeout-sec", "5"])
            .validate()
            .unwrap_err()
            .contains("--lease-timeout-sec"));
        assert!(parse(&["--node-id", "n", "--lease-timeout-sec", "31"])
            .validate()
            .is_err());
        assert!(parse(&["--node-id", "n", "--lease-timeout-sec", "30"])
            .validate()
            .is_ok());
    }

    #[test]
    fn the_default_lease_timeout_is_valid_for_every_node_timeout_above_the_interval() {
        for hb in 1..=12u64 {
            for nt in hb + 1..=64 {
                let (h, n) = (hb.to_string(), nt.to_string());
                let args = parse(&[
                    "--node-id",
                    "n",
                    "--heartbeat-interval-sec",
                    &h,
                    "--node-timeout-sec",
                    &n,
                ]);
                let lease = args.resolved_lease_timeout_sec();
                assert!(
                    hb < lease && lease <= nt,
                    "interval {hb}, node timeout {nt}: lease {lease}"
                );
                let c = args
                    .validate()
                    .unwrap_or_else(|e| panic!("interval {hb}, node timeout {nt}: {e}"));
                assert!(c.lease_timeout_heartbeats >= 2, "interval {hb}, node timeout {nt}");
                assert!(c.lease_timeout_heartbeats <= c.node_timeout_heartbeats);
                if nt / 2 > hb {
                    assert_eq!(lease, nt / 2, "half the node timeout where that is above the interval");
                }
            }
        }
    }

    #[test]
    fn one_second_heartbeats_with_a_three_second_node_timeout_validate() {
        let c = parse(&[
            "--node-id",
            "n",
            "--heartbeat-interval-sec",
            "1",
            "--node-timeout-sec",
            "3",
        ])
        .validate()
        .unwrap();
        assert_eq!(c.node_timeout_heartbeats, 3);
        assert_eq!(c.lease_timeout_heartbeats, 2);
    }

    #[test]
    fn bad_node_ids_and_urls_are_refused() {
        assert!(parse(&["--node-id", "a/b"])
            .validate()
            .unwrap_err()
            .starts_with("--node-id"));
        assert!(parse(&["--node-id", "n", "--object-store", "s4://x"])
            .validate()
            .unwrap_err()
            .starts_with("--object-store"));
        assert!(parse(&["--node-id", "n", "--http-addr", "nope"])
            .validate()
            .unwrap_err()
            .starts_with("--http-addr"));
    }

    #[test]
    fn wildcard_listeners_advertise_the_host_name() {
        let c = parse(&["--node-id", "n", "--http-addr", "127.0.0.1:18080"])
            .validate()
            .unwrap();
        assert_eq!(c.advertised_http_addr, "127.0.0.1:18080");
        let c = parse(&["--node-id", "n"]).validate().unwrap();
        assert!(c.advertised_http_addr.ends_with(":8080") && !c.advertised_http_addr.starts_with("0.0.0.0"));
    }

    #[test]
    fn auth_is_off_by_default_and_on_needs_a_readable_long_enough_secret() {
        let c = parse(&["--node-id", "n1"]).validate().unwrap();
        assert!(!c.auth && c.admin_token.is_none());
        let err = parse(&["--node-id", "n1", "--auth", "on"]).validate().unwrap_err();
        assert!(err.contains("--admin-token-file"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let err = parse(&[
            "--node-id",
            "n1",
            "--auth",
            "on",
            "--admin-token-file",
            missing.to_str().unwrap(),
        ])
        .validate()
        .unwrap_err();
        assert!(err.contains("cannot be read"), "{err}");
        let short = dir.path().join("short");
        std::fs::write(&short, "tiny-secret\n").unwrap();
        let err = parse(&[
            "--node-id",
            "n1",
            "--auth",
            "on",
            "--admin-token-file",
            short.to_str().unwrap(),
        ])
        .validate()
        .unwrap_err();
        assert!(err.contains("at least 16") && !err.contains("tiny-secret"), "{err}");
        let good = dir.path().join("good");
        std::fs::write(&good, "  a-long-enough-admin-secret\n").unwrap();
        let c = parse(&[
            "--node-id",
            "n1",
            "--auth",
            "on",
            "--admin-token-file",
            good.to_str().unwrap(),
        ])
        .validate()
        .unwrap();
        assert!(c.auth);
        assert_eq!(c.admin_token.as_ref().unwrap().expose(), "a-long-enough-admin-secret");
        assert!(
            !format!("{c:?}").contains("a-long-enough-admin-secret"),
            "Config's Debug hides the secret"
        );
        assert!(Cli::try_parse_from(["sluice", "--auth", "maybe"]).is_err());
    }
}
