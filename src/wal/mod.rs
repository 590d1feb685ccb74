//! The write-ahead log: segment format, the group-commit writer, its PUT
//! budget, and the takeover of a dead incarnation's WAL.
pub mod budget;
pub mod segment;
pub mod takeover;
pub mod writer;

pub use writer::{WalConfig, WalError, WalWriter};
