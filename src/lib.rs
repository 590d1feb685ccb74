//! Sluice: stream storage whose only durable state is an object store and a
//! metadata log.
//!
//! # Layout
//!
//! - [`ids`]: newtypes for every number that fences or orders.
//! - [`store`]: the object-store trait and its backends (memory, local
//!   filesystem, fault injection).
//! - [`format`]: bounded decoding shared by every stored format.
//! - [`meta`]: the metadata log, the view and its pure `apply`, the proposer.
//! - [`wal`]: segments, the group-commit writer, takeover and replay.
//! - [`stream`]: record batches, per-stream buffers, data objects, reads.
//! - [`telemetry`]: logs and Prometheus metrics.
//! - [`api`]: the [`api::Engine`] trait a node implements for its front doors.
//! - [`http`]: the HTTP front door (axum router over an `Engine`).
//! - [`cli`]: the HTTP client commands of the `sluice` binary.
pub mod api;
pub mod cli;
pub mod format;
pub mod http;
pub mod ids;
pub mod meta;
pub mod store;
pub mod stream;
pub mod telemetry;
pub mod wal;
