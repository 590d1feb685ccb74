//! Streams: the record batch format, the per-stream sequencer and tail, the
//! memory budget, data objects, and reads of committed records.
pub mod batch;
pub mod budget;
pub mod codec;
pub mod dataobj;
pub mod partition;
pub mod producers;
pub mod reader;
