//! Streams: the per-stream sequencer and tail, the memory budget, data
//! objects, reads of committed records, and the rewrite of compaction. The record batch format they
//! store is [`crate::batch`]; the idempotence state the sequencer checks
//! (Kafka producers, Durable Streams writers) is [`crate::meta::producers`]
//! and [`crate::meta::writers`], since the view holds it too.
pub mod budget;
pub mod compact;
pub mod dataobj;
pub mod keys;
pub mod partition;
pub mod reader;
