//! Sluice: stream storage whose only durable state is an object store and a
//! metadata log.
//!
//! # Layout
//!
//! - [`ids`]: newtypes for every number that fences or orders.
//! - [`store`]: the object-store trait and its backends (memory, local
//!   filesystem, fault injection).
//! - [`meta`]: the metadata log, the view and its pure `apply`, the proposer.
//! - [`telemetry`]: logs and Prometheus metrics.
pub mod ids;
pub mod meta;
pub mod store;
pub mod telemetry;
