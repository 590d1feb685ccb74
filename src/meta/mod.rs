//! The metadata log and the view every node applies it to.
pub mod command;
pub mod view;

pub use command::{ChunkCommit, Command, IndexedChunk, Outcome, Rejection, TopicConfig};
pub use view::{NodeRow, Proposer, StreamRow, StreamState, TopicRow, View};
