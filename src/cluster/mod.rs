//! The lease holder's duties: the lease itself, liveness and fencing, WAL
//! takeover of dead incarnations, placement of closed streams, snapshots,
//! Durable Streams expiry, retention and garbage collection. Every loop here
//! reaches its node only through [`Context`], so it never imports `node`.
pub mod context;
pub mod expiry;
pub mod failover;
pub mod gc;
pub mod holder;
pub mod placement;

pub use context::{Context, Settings};

#[cfg(test)]
pub(crate) mod fake;

#[cfg(test)]
mod tests;
