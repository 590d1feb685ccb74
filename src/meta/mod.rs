//! The metadata log and the view every node applies it to.
//!
//! - `command`: the commands and their outcomes;
//! - `view`: the state machine and its pure `apply`;
//! - `log`: the `MetaLog` trait; `memory_log`, `store_log` and `dynamo_log`
//!   implement it, and `open` opens one from its URL;
//! - `entry`: versioned encodings of entries and snapshots;
//! - `client`: the proposer and tailer a node uses;
//! - `liveness`: heartbeat-count clocks;
//! - `producers`, `writers`: the idempotence state of Kafka producers and
//!   Durable Streams writers, in the view and on each owner;
//! - `durable`: the per-stream state of Durable Streams streams (in topic configs);
//! - `compaction`: the rules of swapping a run of a stream's chunks for
//!   their compacted rewrite;
//! - `txn`: Kafka transactions' coordinator records and their transitions;
//!   `txn_index`: one partition's open and aborted transactions, and its
//!   last stable offset.
pub mod client;
pub mod command;
pub mod compaction;
pub mod conformance;
pub mod durable;
pub mod dynamo_log;
pub mod entry;
pub mod group_state;
pub mod liveness;
pub mod log;
pub mod memory_log;
pub mod open;
pub mod producers;
pub mod store_log;
pub mod txn;
pub mod txn_index;
pub mod view;
pub mod writers;

pub use client::{Meta, MetaConfig, MetaError};
pub use command::{
    ChunkCommit, CleanupPolicy, Command, ConfigUpdate, IndexedChunk, Outcome, Ratio, Rejection, TopicConfig,
};
pub use log::{AppendOutcome, DynLog, MetaLog};
pub use view::{NodeRow, Proposer, StreamRow, StreamState, TopicRow, View};
