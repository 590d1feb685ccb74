//! Sluice: stream storage whose only durable state is an object store and a
//! metadata log.
//!
//! # Layout
//!
//! - [`ids`]: newtypes for every number that fences or orders.
//! - [`store`]: the object-store trait and its backends.
pub mod format;
pub mod ids;
pub mod stream;
pub mod wal;
