//! Sluice: stream storage whose only durable state is an object store and a
//! metadata log.
//!
//! # Layout
//!
//! - [`ids`]: newtypes for every number that fences or orders.
//! - [`clock`]: injected time; the one place that reads the wall clock.
//! - [`entropy`]: randomness that is not a secret, seedable per thread (the
//!   simulation's runs are a function of their seed).
//! - [`store`]: the object-store trait and its backends (memory, local
//!   filesystem, S3), fault injection, request accounting, and the
//!   latency model benchmarks put in front of a store.
//! - [`format`]: bounded decoding shared by every stored format.
//! - [`batch`]: the Kafka record batch format (and its compression codecs,
//!   and `batch::marker`, transaction markers): what the WAL, data objects
//!   and every front door carry.
//! - [`meta`]: the metadata log, the view and its pure `apply`, the proposer,
//!   and the idempotence state of Kafka producers and Durable Streams writers
//!   (`meta::producers`, `meta::writers`: the view holds it, each owner keeps
//!   a copy and checks appends against it), Kafka transactions'
//!   coordinator records (`meta::txn`), and each partition's open and
//!   aborted transactions, its last stable offset and what a committed read
//!   leaves out (`meta::txn_index`), and the rule of a compaction's swap
//!   of chunks (`meta::compaction`).
//! - [`wal`]: segments, the group-commit writer (and its PUT budget,
//!   `wal::budget`), takeover and replay.
//! - [`stream`]: per-stream sequencers and buffers, data objects, reads,
//!   and the pure plan and rewrite of log compaction (`stream::compact`).
//! - [`api`]: what the front doors ask of a node, as capability traits
//!   (`Records`, `Topics`, `GroupOffsets`, `ProducerIds`, `Tokens`,
//!   `Cluster`, one file each) bundled in [`api::Services`], and the public
//!   error kinds. It imports no front door and not `node`.
//! - [`auth`]: tokens, scopes and the authenticator behind `--auth on`.
//! - [`node`]: one `sluice serve` process: registration, heartbeat,
//!   reconciliation, flushing, compaction, hand-off and shutdown, and the capabilities it
//!   serves (`node/engine/`, one file per trait).
//! - [`route`]: local or forward: the owner of a stream another node serves,
//!   and the byte-exact node-to-node call that forwards to it (one hop,
//!   peer-authenticated).
//! - [`cluster`]: the lease holder's duties (liveness, fencing, takeover,
//!   placement, expiry, retention, GC) over a narrow `cluster::Context`;
//!   it never imports `node`.
//! - [`config`]: every flag and its validation.
//! - [`http`], [`cli`], [`server`], [`bench`]: the HTTP front door (with the
//!   browser console under `/ui`, `http/ui/`), the client commands, `sluice
//!   serve`, and the load generator.
//! - [`kafka`]: the Kafka front door: the listener and dispatch in
//!   `kafka/mod.rs`, one module per request family (`produce`, `fetch`,
//!   `metadata`, `list_offsets`, `producer_ids`, `leader_epoch`, groups
//!   (and `groups::view`, a group as the console shows it),
//!   admin, `delete_records`, `offset_delete`, `describe_producers`, the
//!   transaction coordinator `txn_coordinator` and its wire `txn_proto`),
//!   bounded framing and request budgets in `kafka::framing`, and
//!   per-principal authorization wrapping each capability in `kafka::authz`.
//! - [`net`]: what both listeners share: TLS, the connection caps (total, per
//!   client address, and the probe lane past them), read and body timeouts.
//! - [`telemetry`]: logs and Prometheus metrics.
pub mod api;
pub mod auth;
pub mod batch;
pub mod bench;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod entropy;
pub mod format;
pub mod http;
pub mod ids;
pub mod kafka;
pub mod meta;
pub mod net;
pub mod node;
pub mod route;
pub mod server;
pub mod store;
pub mod stream;
pub mod telemetry;
pub mod wal;
