//! Streams: the per-stream sequencer and tail, the memory budget, data
//! objects, reads of committed records, and the idempotence state of Durable
//! Streams writers. The record batch format they store is [`crate::batch`];
//! Kafka idempotent-producer state is [`crate::meta::producers`], since the
//! view holds it too.
pub mod budget;
pub mod dataobj;
pub mod keys;
pub mod partition;
pub mod reader;
pub mod writers;
