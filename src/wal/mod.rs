//! The write-ahead log: segment format, the group-commit writer, and the
//! takeover of a dead incarnation's WAL.
pub mod segment;
pub mod takeover;
pub mod writer;

pub use writer::{WalConfig, WalError, WalWriter};
