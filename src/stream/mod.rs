//! Streams: the record batch format, the per-stream sequencer and tail, the
//! memory budget, data objects, reads of committed records, and the
//! idempotence state of Kafka producers and Durable Streams writers.
pub mod batch;
pub mod budget;
pub mod codec;
pub mod dataobj;
pub mod keys;
pub mod partition;
pub mod producers;
pub mod reader;
pub mod writers;
