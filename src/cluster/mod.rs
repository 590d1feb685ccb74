//! The lease holder's duties: the lease itself, liveness and fencing, WAL
//! takeover of dead incarnations, placement of closed streams, snapshots.
pub mod failover;
pub mod gc;
pub mod holder;
pub mod placement;
