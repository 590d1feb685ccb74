//! One open stream on its owner: the sequencer of offsets (with the
//! idempotence checks of Kafka producers and Durable Streams writers, made
//! in the same step), the tail of records durable in the WAL but not yet in
//! data objects, and the high watermark.
//!
//! Invariants: `committed_end <= high_watermark <= next`; the tail holds
//! exactly the batches `committed_end..next`, in order and contiguous;
//! nothing at or past the high watermark is ever served.

use super::budget::Budget;
use crate::api::{ApiError, Appended, ErrorCode};
use crate::batch::{decode_records, encode_batch, Record};
use crate::ids::{Offset, StreamEpoch, StreamId};
use crate::meta::producers::{ProducerBatch, ProducerTable, Verdict};
use crate::meta::txn_index::{Aborted, TxnBatch};
use crate::meta::writers::{DsAppend, DsVerdict, DsWrite, WriterMark, WriterTable};
use crate::wal::segment::{ProducerInfo, WalEntry};
use crate::wal::WalWriter;
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct TailBatch {
    pub base: Offset,
    pub end: Offset,
    pub max_timestamp: i64,
    pub bytes: Bytes,
    /// Bytes reserved in the budget for this batch.
    pub reserved: usize,
    pub appended_at: Instant,
    /// Set when an idempotent producer wrote the batch.
    pub producer: Option<ProducerBatch>,
    /// Set when a Durable Streams writer stored the batch.
    pub writer: Option<WriterMark>,
    /// Set for a transactional batch (data or marker).
    pub txn: Option<TxnBatch>,
    /// For a marker: the first offset of the transaction it ends (which
    /// stays unstable until the marker is durable).
    pub txn_first: Option<Offset>,
}

/// What is checked before an append is given offsets.
#[derive(Debug, Clone)]
enum Guard {
    None,
    /// A Kafka idempotent producer's batch; `transactional` when it is
    /// part of a transaction.
    Kafka {
        producer: ProducerInfo,
        transactional: bool,
    },
    /// A transaction marker of `producer_id` at `epoch`, ending what
    /// `ends` allows.
    Marker {
        producer_id: i64,
        epoch: i16,
        commit: bool,
        ends: MarkerEnds,
    },
    /// A Durable Streams writer's append.
    Durable(DsWrite),
}

/// Which open transaction of its producer a marker may end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerEnds {
    /// Whatever is open: nobody judged the marker (a coordinator that
    /// names no transaction).
    AnyOpen,
    /// Only the transaction open since this offset, or, with `None`, only
    /// if none is open: the state the leader judged the marker against
    /// (see [`OpenStream::append_marker`]).
    Judged(Option<Offset>),
}

/// The outcome of the step under the lock.
enum Step {
    Assigned {
        base: Offset,
        end: Offset,
        ack: tokio::sync::oneshot::Receiver<Result<crate::ids::SegmentSeq, crate::wal::WalError>>,
    },
    /// A Kafka retry of the batch stored at `base`.
    Retry { base: Offset, count: u32 },
    /// A Durable Streams write not to append (duplicate or refused).
    Declined(DsVerdict),
    /// A judged marker whose producer's open transaction is no longer
    /// the one it was judged against.
    Rejudge,
}

/// Where an append ended up.
enum Landed {
    Appended(Appended),
    Declined(DsVerdict),
    Rejudge,
}

impl Landed {
    /// Only Durable Streams writes are ever declined, and only judged
    /// markers sent back.
    fn appended(self) -> Result<Appended, ApiError> {
        match self {
            Landed::Appended(a) => Ok(a),
            Landed::Declined(v) => Err(ApiError::new(ErrorCode::Internal, format!("append declined: {v:?}"))),
            Landed::Rejudge => Err(ApiError::new(ErrorCode::Internal, "an unjudged marker sent back")),
        }
    }
}

#[derive(Debug)]
struct Inner {
    next: Offset,
    committed_end: Offset,
    tail: VecDeque<TailBatch>,
    accepting: bool,
    /// End of a flush whose commit is in flight.
    flushing_to: Option<Offset>,
    /// Idempotent producers, as of `next`.
    producers: ProducerTable,
}

/// Records ready to go into a data object: the durable, unflushed prefix.
#[derive(Debug, Clone)]
pub struct Flushable {
    pub base: Offset,
    pub end: Offset,
    pub max_timestamp: i64,
    pub parts: Vec<Bytes>,
    pub bytes: usize,
    /// The last few idempotent-producer batches of the range, per producer.
    pub producers: Vec<ProducerBatch>,
    /// The Durable Streams writer state the range's batches add up to.
    pub writers: WriterTable,
    /// The range's transactional batches, as the view's index needs them.
    pub txns: Vec<TxnBatch>,
}

#[derive(Debug)]
pub struct OpenStream {
    pub id: StreamId,
    pub topic: String,
    pub epoch: StreamEpoch,
    inner: Arc<Mutex<Inner>>,
    /// Shared with the task that waits for each append's WAL ack, so the
    /// watermark advances even when the caller stops waiting.
    high_watermark: Arc<watch::Sender<Offset>>,
    budget: Arc<Budget>,
}

impl OpenStream {
    /// Open at the committed end recorded in the view, with the view's
    /// idempotent-producer state as of that end.
    pub fn open(
        id: StreamId,
        topic: String,
        epoch: StreamEpoch,
        committed_end: Offset,
        producers: ProducerTable,
        budget: Arc<Budget>,
    ) -> Self {
        let (high_watermark, _) = watch::channel(committed_end);
        Self {
            id,
            topic,
            epoch,
            inner: Arc::new(Mutex::new(Inner {
                next: committed_end,
                committed_end,
                tail: VecDeque::new(),
                accepting: true,
                flushing_to: None,
                producers,
            })),
            high_watermark: Arc::new(high_watermark),
            budget,
        }
    }

    pub fn high_watermark(&self) -> Offset {
        *self.high_watermark.borrow()
    }

    pub fn watch_high_watermark(&self) -> watch::Receiver<Offset> {
        self.high_watermark.subscribe()
    }

    pub fn committed_end(&self) -> Offset {
        self.inner.lock().unwrap().committed_end
    }

    /// The idempotent producers the stream remembers (as of `next`), by
    /// producer id, each with its last batch; that batch's largest
    /// timestamp while it is still in the tail.
    pub fn producers(&self) -> Vec<crate::api::ProducerState> {
        let inner = self.inner.lock().unwrap();
        inner
            .producers
            .latest()
            .into_iter()
            .map(|b| {
                let at = inner.tail.partition_point(|t| t.base < b.base);
                let last_timestamp = inner
                    .tail
                    .get(at)
                    .filter(|t| t.base == b.base && t.producer.is_some_and(|p| p.producer_id == b.producer_id))
                    .map(|t| t.max_timestamp);
                crate::api::ProducerState {
                    producer_id: b.producer_id,
                    producer_epoch: b.producer_epoch,
                    last_sequence: b.last_seq,
                    last_timestamp,
                }
            })
            .collect()
    }

    /// The stream epoch as a Kafka partition leader epoch.
    fn leader_epoch(&self) -> i32 {
        i32::try_from(self.epoch.get()).unwrap_or(i32::MAX)
    }

    /// Assign offsets, join the WAL, and wait until durable.
    pub async fn append(&self, wal: &WalWriter, records: &[Record]) -> Result<Appended, ApiError> {
        if records.is_empty() {
            return Err(ApiError::invalid("no records to append"));
        }
        let count = u32::try_from(records.len()).map_err(|_| ApiError::invalid("too many records in one append"))?;
        let max_timestamp = records.iter().map(|r| r.timestamp_ms).max().unwrap_or(0);
        self.append_encoded(wal, count, max_timestamp, Guard::None, |base| {
            encode_batch(base, records)
        })
        .await
        .and_then(Landed::appended)
    }

    /// Append one RecordBatch v2 a producer encoded (validated by the
    /// caller with [`crate::batch::parse_batch`]): its base offset is
    /// rewritten to the next offset and its partition leader epoch to the
    /// stream epoch; the bytes are otherwise stored as sent.
    ///
    /// A batch from an idempotent producer (producer id and base sequence
    /// set) is checked against the producer's last batches first: a retry
    /// is answered with its original offsets once those are durable, a gap
    /// is refused with `out_of_order_sequence`, an old epoch with
    /// `invalid_producer_epoch`, and nothing is appended for any of them.
    ///
    /// A transactional batch opens (or continues) its producer's
    /// transaction here. A transaction marker (a control batch, written by
    /// the coordinator) ends it; a marker for a producer with no open
    /// transaction here is a retry of one already written and is answered
    /// once everything before it is durable, with nothing appended.
    pub async fn append_batch(&self, wal: &WalWriter, batch: &[u8]) -> Result<Appended, ApiError> {
        self.append_guarded(wal, batch, MarkerEnds::AnyOpen)
            .await
            .and_then(Landed::appended)
    }

    /// The first offset of `producer_id`'s transaction open here, if any.
    pub fn open_txn(&self, producer_id: i64) -> Option<Offset> {
        self.inner.lock().unwrap().producers.txns().open_since(producer_id)
    }

    /// Append the transaction marker `batch` only if its producer's open
    /// transaction is still `judged` (from [`open_txn`](Self::open_txn)):
    /// the leader judged, away from the lock, whether the marker may end
    /// that one. `None` when it changed meanwhile (a batch opened a
    /// transaction, or another finisher's marker ended it): judge again.
    pub async fn append_marker(
        &self,
        wal: &WalWriter,
        batch: &[u8],
        judged: Option<Offset>,
    ) -> Result<Option<Appended>, ApiError> {
        match self.append_guarded(wal, batch, MarkerEnds::Judged(judged)).await? {
            Landed::Appended(a) => Ok(Some(a)),
            Landed::Rejudge => Ok(None),
            Landed::Declined(v) => Err(ApiError::new(ErrorCode::Internal, format!("marker declined: {v:?}"))),
        }
    }

    async fn append_guarded(&self, wal: &WalWriter, batch: &[u8], ends: MarkerEnds) -> Result<Landed, ApiError> {
        let object = format!("batch for {}", self.id);
        let info = crate::batch::parse_batch(&object, batch).map_err(|e| ApiError::invalid(e.to_string()))?;
        if info.batch_len != batch.len() {
            return Err(ApiError::invalid("exactly one record batch per append"));
        }
        let count = info.last_offset_delta + 1;
        let producer = (info.producer_id >= 0 && info.base_sequence >= 0).then_some(ProducerInfo {
            producer_id: info.producer_id,
            producer_epoch: info.producer_epoch,
            base_sequence: info.base_sequence,
        });
        let guard = if info.is_control {
            let marker = crate::batch::marker::decode_marker(&object, batch)
                .map_err(|e| ApiError::invalid(e.to_string()))?
                .ok_or_else(|| ApiError::invalid("a control batch that is not a transaction marker"))?;
            Guard::Marker {
                producer_id: info.producer_id,
                epoch: info.producer_epoch,
                commit: marker.0 == crate::batch::marker::Marker::Commit,
                ends,
            }
        } else if ends != MarkerEnds::AnyOpen {
            return Err(ApiError::invalid("a transaction marker must be a control batch"));
        } else if info.is_transactional {
            let producer = producer
                .ok_or_else(|| ApiError::invalid("a transactional batch without a producer id and sequence"))?;
            Guard::Kafka {
                producer,
                transactional: true,
            }
        } else {
            producer.map_or(Guard::None, |producer| Guard::Kafka {
                producer,
                transactional: false,
            })
        };
        self.append_encoded(wal, count, info.max_timestamp, guard, |base| {
            let mut bytes = bytes::BytesMut::from(batch);
            crate::batch::set_base_offset(&mut bytes, base);
            bytes.freeze()
        })
        .await
    }

    /// Append `records` for a Durable Streams writer: its producer and
    /// `Stream-Seq` are checked against the stream's writer state and the
    /// records are given offsets in the same step, under the stream's lock,
    /// so no two appends of one write are ever both stored. The batch
    /// carries the write's [`WriterMark`](crate::meta::writers::WriterMark), which
    /// is how a later owner learns the state.
    ///
    /// With no records only the check is made (a close without a body):
    /// `Checked` says where the stream ends once everything assigned so far
    /// is durable. A duplicate is answered once the original is durable.
    pub async fn append_durable(
        &self,
        wal: &WalWriter,
        write: &DsWrite,
        records: &[Record],
    ) -> Result<DsAppend, ApiError> {
        if records.is_empty() {
            let (verdict, next) = {
                let inner = self.inner.lock().unwrap();
                if !inner.accepting {
                    return Err(ApiError::unavailable(format!("stream {} is closing", self.id)));
                }
                (inner.producers.writers().check(write), inner.next)
            };
            return match verdict {
                DsVerdict::Accept => {
                    self.await_duplicate(next, 0).await?;
                    Ok(DsAppend::Checked { end: next })
                }
                v => self.declined(v).await,
            };
        }
        let count = u32::try_from(records.len()).map_err(|_| ApiError::invalid("too many records in one append"))?;
        let max_timestamp = records.iter().map(|r| r.timestamp_ms).max().unwrap_or(0);
        let stamped = crate::meta::writers::stamp(records, write);
        let guard = Guard::Durable(write.clone());
        match self
            .append_encoded(wal, count, max_timestamp, guard, |base| encode_batch(base, &stamped))
            .await?
        {
            Landed::Appended(a) => Ok(DsAppend::Stored {
                base: a.base,
                count: a.count,
            }),
            Landed::Declined(v) => self.declined(v).await,
            Landed::Rejudge => Err(ApiError::new(ErrorCode::Internal, "a write sent back as a marker")),
        }
    }

    /// A write the sequencer did not append; a duplicate once its original
    /// is durable.
    async fn declined(&self, v: DsVerdict) -> Result<DsAppend, ApiError> {
        if let DsVerdict::Duplicate { next, .. } = &v {
            crate::telemetry::count("sluice_producer_duplicates_total", &[]);
            self.await_duplicate(*next, 0).await?;
        }
        Ok(DsAppend::Declined(v))
    }

    /// Assign `count` offsets to the batch `encode` builds at its base
    /// offset, join the WAL, and wait until durable.
    async fn append_encoded(
        &self,
        wal: &WalWriter,
        count: u32,
        max_timestamp: i64,
        guard: Guard,
        encode: impl FnOnce(Offset) -> Bytes,
    ) -> Result<Landed, ApiError> {
        let (base, end, ack) = match self.assign(wal, count, max_timestamp, guard, encode)? {
            Step::Assigned { base, end, ack } => (base, end, ack),
            Step::Retry { base, count } => {
                crate::telemetry::count("sluice_producer_duplicates_total", &[]);
                return self.await_duplicate(base, count).await.map(Landed::Appended);
            }
            Step::Declined(v) => return Ok(Landed::Declined(v)),
            Step::Rejudge => return Ok(Landed::Rejudge),
        };
        // The ack is awaited in a task of its own: a caller that gives up
        // (a client timeout drops this future) must not leave the high
        // watermark behind a durable append, or the stream could never be
        // closed or handed over.
        let (hw, inner) = (self.high_watermark.clone(), self.inner.clone());
        let settled = tokio::spawn(async move {
            match ack.await {
                Ok(Ok(_seq)) => {
                    // Acks come in seq order, so everything before `end` is durable too.
                    hw.send_if_modified(|hw| {
                        let moved = end > *hw;
                        *hw = (*hw).max(end);
                        moved
                    });
                    Ok(())
                }
                Ok(Err(e)) => {
                    inner.lock().unwrap().accepting = false;
                    Err(ApiError::unavailable(format!("append not durable: {e}")))
                }
                Err(_) => Err(ApiError::unavailable("WAL writer stopped")),
            }
        });
        match settled.await {
            Ok(Ok(())) => Ok(Landed::Appended(Appended { base, count })),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ApiError::unavailable("append task stopped")),
        }
    }

    /// The step under the stream's lock: check the guard, assign offsets,
    /// hand the entry to the WAL, and remember the batch in the tail and
    /// in the producer state.
    fn assign(
        &self,
        wal: &WalWriter,
        count: u32,
        max_timestamp: i64,
        guard: Guard,
        encode: impl FnOnce(Offset) -> Bytes,
    ) -> Result<Step, ApiError> {
        let mut inner = self.inner.lock().unwrap();
        if !inner.accepting {
            return Err(ApiError::unavailable(format!("stream {} is closing", self.id)));
        }
        let base = inner.next;
        let (mut txn, mut txn_first) = (None, None);
        let producer = match &guard {
            Guard::Kafka {
                producer: p,
                transactional,
            } => {
                if let Some((base, count)) = self.check_kafka(&inner.producers, p, count)? {
                    return Ok(Step::Retry { base, count });
                }
                if *transactional {
                    txn = Some(TxnBatch::Data {
                        producer_id: p.producer_id,
                        base,
                    });
                }
                Some(*p)
            }
            &Guard::Marker {
                producer_id,
                epoch,
                commit,
                ends,
            } => {
                let first = inner.producers.txns().open_since(producer_id);
                if matches!(ends, MarkerEnds::Judged(j) if j != first) {
                    return Ok(Step::Rejudge);
                }
                let known = inner.producers.epoch_of(producer_id);
                if first.is_none() && known.is_some_and(|k| k >= epoch) {
                    // Written already (a coordinator retrying), or no batch
                    // of the transaction reached this partition and the
                    // epoch is fenced here already.
                    return Ok(Step::Retry { base, count: 0 });
                }
                // With no transaction open, a marker at a newer epoch is
                // still written: no batch of the transaction has reached
                // this partition yet, and one still on its way (a zombie's,
                // or the expired transaction's own) must be refused as
                // stale, not open a transaction that nothing would end.
                if let Verdict::StaleEpoch { current } = inner.producers.check(producer_id, epoch, 0, 1) {
                    return Err(ApiError::new(
                        ErrorCode::InvalidProducerEpoch,
                        format!("marker of producer {producer_id} at epoch {epoch} on {}: the producer is at epoch {current}", self.id),
                    ));
                }
                txn = Some(TxnBatch::Marker {
                    producer_id,
                    producer_epoch: epoch,
                    offset: base,
                    commit,
                });
                txn_first = first;
                None
            }
            Guard::Durable(w) => match inner.producers.writers().check(w) {
                DsVerdict::Accept => None,
                v => return Ok(Step::Declined(v)),
            },
            Guard::None => None,
        };
        // Every stored batch carries the stream epoch that wrote it as its
        // partition leader epoch, whichever front door it came through: a
        // Kafka consumer validating its position after a leader change
        // (OffsetForLeaderEpoch) asks for the end of the epoch its records
        // carry, and an HTTP-appended batch left at epoch 0 answered "the
        // log ends at 0 for that epoch": librdkafka took it for truncation
        // and re-read whole partitions from offset 0.
        let batch = {
            let mut b = bytes::BytesMut::from(encode(base));
            crate::batch::set_leader_epoch(&mut b, self.leader_epoch());
            b.freeze()
        };
        let reserved = batch.len();
        if !self.budget.try_reserve(reserved) {
            return Err(ApiError::new(
                ErrorCode::Throttled,
                format!(
                    "{} bytes are buffered (limit {}); retry shortly",
                    self.budget.used(),
                    self.budget.limit()
                ),
            ));
        }
        let end = base.plus(u64::from(count));
        let entry = WalEntry {
            stream: self.id,
            stream_epoch: self.epoch,
            base_offset: base,
            record_count: count,
            max_timestamp,
            producer,
            batch: batch.clone(),
        };
        let ack = match wal.append(entry) {
            Ok(ack) => ack,
            Err(e) => {
                self.budget.release(reserved);
                inner.accepting = false;
                return Err(ApiError::unavailable(e.to_string()));
            }
        };
        inner.next = end;
        let producer = producer.map(|p| ProducerBatch {
            producer_id: p.producer_id,
            producer_epoch: p.producer_epoch,
            first_seq: p.base_sequence,
            last_seq: ProducerBatch::last_seq_of(p.base_sequence, count),
            base,
            count,
        });
        if let Some(p) = producer {
            inner.producers.record(p);
        }
        let writer = match guard {
            Guard::Durable(write) => Some(WriterMark {
                write: write.stored(),
                end,
            }),
            _ => None,
        };
        if let Some(m) = &writer {
            inner.producers.writers_mut().record(m);
        }
        if let Some(t) = txn {
            inner.producers.record_txn(t);
        }
        inner.tail.push_back(TailBatch {
            base,
            end,
            max_timestamp,
            bytes: batch,
            reserved,
            appended_at: Instant::now(),
            producer,
            writer,
            txn,
            txn_first,
        });
        Ok(Step::Assigned { base, end, ack })
    }

    /// Kafka's idempotence check: `Some` original offsets for a retry,
    /// an error for a gap or an old epoch.
    fn check_kafka(&self, t: &ProducerTable, p: &ProducerInfo, count: u32) -> Result<Option<(Offset, u32)>, ApiError> {
        match t.check(p.producer_id, p.producer_epoch, p.base_sequence, count) {
            Verdict::Append => Ok(None),
            Verdict::Duplicate { base, count } => Ok(Some((base, count))),
            Verdict::OutOfOrder { expected } => Err(ApiError::new(
                ErrorCode::OutOfOrderSequence,
                format!(
                    "producer {} epoch {}: sequence {} on {} does not follow the last batch (expected {expected})",
                    p.producer_id, p.producer_epoch, p.base_sequence, self.id
                ),
            )),
            Verdict::StaleEpoch { current } => Err(ApiError::new(
                ErrorCode::InvalidProducerEpoch,
                format!(
                    "producer {} epoch {} on {} is older than epoch {current}",
                    p.producer_id, p.producer_epoch, self.id
                ),
            )),
        }
    }

    /// Answer a retried batch with its original offsets once they are
    /// durable. If the stream stops accepting first, the original may never
    /// become durable here: the producer retries on the next owner, which
    /// knows from the WAL or the view whether it landed.
    async fn await_duplicate(&self, base: Offset, count: u32) -> Result<Appended, ApiError> {
        let end = base.plus(u64::from(count));
        let mut hw = self.high_watermark.subscribe();
        loop {
            if *hw.borrow_and_update() >= end {
                return Ok(Appended { base, count });
            }
            if !self.inner.lock().unwrap().accepting {
                return Err(ApiError::unavailable(format!(
                    "stream {} is closing; retry the batch on its next owner",
                    self.id
                )));
            }
            let changed = tokio::time::timeout(std::time::Duration::from_millis(100), hw.changed()).await;
            if matches!(changed, Ok(Err(_))) {
                return Err(ApiError::unavailable("stream closed"));
            }
        }
    }

    /// Durable records from `from` on, if `from` is still in the tail.
    /// `None` means "older than the tail: read the data objects".
    ///
    /// Only records below `below` (a high watermark the caller already
    /// reported, capped at the current one) are returned.
    pub fn read_tail(
        &self,
        from: Offset,
        below: Offset,
        limit: usize,
        max_bytes: usize,
    ) -> Option<Result<Vec<(Offset, Record)>, ApiError>> {
        let hw = self.high_watermark().min(below);
        let inner = self.inner.lock().unwrap();
        let first = inner.tail.front().map_or(inner.next, |b| b.base);
        if from < first {
            return None;
        }
        let mut out = Vec::new();
        let mut bytes = 0;
        for b in inner.tail.iter().filter(|b| b.end > from && b.base < hw) {
            let records = match decode_records(&format!("tail of {}", self.id), &b.bytes) {
                Ok(r) => r,
                Err(e) => return Some(Err(ApiError::new(ErrorCode::Internal, e.to_string()))),
            };
            for (offset, record) in records {
                if offset < from || offset >= hw {
                    continue;
                }
                let size = record_size(&record);
                if out.len() >= limit || (!out.is_empty() && bytes + size > max_bytes) {
                    return Some(Ok(out));
                }
                bytes += size;
                out.push((offset, record));
            }
        }
        Some(Ok(out))
    }

    /// The stored batches holding offsets from `from` on, below `below`
    /// (capped at the current high watermark), up to about `max_bytes`
    /// (the first batch is returned even if larger). `None` means "older
    /// than the tail: read the data objects".
    pub fn read_tail_batches(&self, from: Offset, below: Offset, max_bytes: usize) -> Option<Vec<Bytes>> {
        let hw = self.high_watermark().min(below);
        let inner = self.inner.lock().unwrap();
        let first = inner.tail.front().map_or(inner.next, |b| b.base);
        if from < first {
            return None;
        }
        let mut out = Vec::new();
        let mut bytes = 0;
        // Appends become durable in order, so a batch starting below the
        // high watermark ends at or below it.
        for b in inner.tail.iter().filter(|b| b.end > from && b.end <= hw) {
            if !out.is_empty() && bytes + b.bytes.len() > max_bytes {
                break;
            }
            bytes += b.bytes.len();
            out.push(b.bytes.clone());
        }
        Some(out)
    }

    /// The last stable offset: below it every transaction has ended (its
    /// marker is durable), so a read_committed reader may read up to it.
    /// It is the high watermark when no transaction is open.
    pub fn last_stable(&self) -> Offset {
        let hw = self.high_watermark();
        let inner = self.inner.lock().unwrap();
        let ending = inner
            .tail
            .iter()
            .rev()
            .take_while(|b| b.end > hw)
            .filter_map(|b| b.txn_first);
        ending.fold(inner.producers.txns().last_stable(hw), Offset::min)
    }

    /// The aborted transactions with records in `from..to`, for a
    /// read_committed reader reading that range (`to` at most
    /// [`last_stable`](Self::last_stable)).
    pub fn aborted_in(&self, from: Offset, to: Offset) -> Vec<Aborted> {
        self.inner.lock().unwrap().producers.txns().aborted_in(from, to)
    }

    /// Stop accepting appends (closing, transfer, fencing).
    pub fn stop_accepting(&self) {
        self.inner.lock().unwrap().accepting = false;
    }

    /// Accept appends again (a cancelled transfer gave the stream back).
    pub fn resume_accepting(&self) {
        self.inner.lock().unwrap().accepting = true;
    }

    /// Every assigned offset is durable.
    pub fn quiescent(&self) -> bool {
        self.inner.lock().unwrap().next == self.high_watermark()
    }

    /// Bytes and age of the durable, unflushed part.
    pub fn unflushed(&self) -> (usize, Option<Instant>) {
        let hw = self.high_watermark();
        let inner = self.inner.lock().unwrap();
        let from = inner.flushing_to.unwrap_or(inner.committed_end);
        let durable = inner.tail.iter().filter(|b| b.base >= from && b.end <= hw);
        durable.fold((0, None), |(n, oldest), b| {
            (n + b.bytes.len(), oldest.or(Some(b.appended_at)))
        })
    }

    /// Take the durable, unflushed batches for a data object (whole batches
    /// only, so committed ends always fall on WAL entry boundaries).
    pub fn begin_flush(&self, max_bytes: usize) -> Option<Flushable> {
        let hw = self.high_watermark();
        let mut inner = self.inner.lock().unwrap();
        if inner.flushing_to.is_some() {
            return None;
        }
        let mut f = Flushable {
            base: inner.committed_end,
            end: inner.committed_end,
            max_timestamp: 0,
            parts: Vec::new(),
            bytes: 0,
            producers: Vec::new(),
            writers: WriterTable::default(),
            txns: Vec::new(),
        };
        let mut producers = Vec::new();
        let mut txns = Vec::new();
        for b in inner.tail.iter().filter(|b| b.end <= hw) {
            if !f.parts.is_empty() && f.bytes + b.bytes.len() > max_bytes {
                break;
            }
            f.end = b.end;
            f.max_timestamp = f.max_timestamp.max(b.max_timestamp);
            f.bytes += b.bytes.len();
            f.parts.push(b.bytes.clone());
            producers.extend(b.producer);
            txns.extend(b.txn);
            if let Some(m) = &b.writer {
                f.writers.record(m);
            }
        }
        f.producers = ProducerTable::compact(producers);
        f.txns = TxnBatch::compact(txns);
        if f.parts.is_empty() {
            return None;
        }
        inner.flushing_to = Some(f.end);
        Some(f)
    }

    /// The flush up to `end` is committed: drop it from the tail.
    pub fn finish_flush(&self, end: Offset) {
        let mut inner = self.inner.lock().unwrap();
        inner.flushing_to = None;
        if end <= inner.committed_end {
            return;
        }
        inner.committed_end = end;
        while inner.tail.front().is_some_and(|b| b.end <= end) {
            let b = inner.tail.pop_front().expect("checked");
            self.budget.release(b.reserved);
        }
    }

    /// The flush failed to commit; it will be retried.
    pub fn abort_flush(&self) {
        self.inner.lock().unwrap().flushing_to = None;
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for b in inner.tail.drain(..) {
            self.budget.release(b.reserved);
        }
    }
}

/// Bytes a record counts for against `max_bytes`.
pub fn record_size(r: &Record) -> usize {
    r.key.as_ref().map_or(0, |k| k.len())
        + r.value.as_ref().map_or(0, |v| v.len())
        + r.headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len()))
            .sum::<usize>()
}

#[cfg(test)]
mod tests;
