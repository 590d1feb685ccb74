//! Kafka RecordBatch v2 (magic 2): the batch format Sluice keeps on the wire
//! and on disk unchanged, so fetches can hand stored bytes straight back to
//! Kafka clients.
//!
//! Layout (big-endian; byte offsets from the start of the batch):
//!
//! | bytes | field                | notes                                  |
//! |-------|----------------------|----------------------------------------|
//! | 0     | baseOffset i64       | not covered by the CRC                 |
//! | 8     | batchLength i32      | bytes after this field                 |
//! | 12    | partitionLeaderEpoch | i32, not covered by the CRC            |
//! | 16    | magic i8 = 2         |                                        |
//! | 17    | crc u32              | CRC-32C of bytes 21..end               |
//! | 21    | attributes i16       | compression = bits 0-2, etc.           |
//! | 23    | lastOffsetDelta i32  |                                        |
//! | 27    | baseTimestamp i64    |                                        |
//! | 35    | maxTimestamp i64     |                                        |
//! | 43    | producerId i64       |                                        |
//! | 51    | producerEpoch i16    |                                        |
//! | 53    | baseSequence i32     |                                        |
//! | 57    | records count i32    |                                        |
//! | 61    | records              | each prefixed by a zigzag varint length |
//!
//! Because neither baseOffset nor partitionLeaderEpoch is covered by the CRC,
//! the broker can assign them ([`set_base_offset`], [`set_leader_epoch`])
//! without re-checksumming the batch.

pub mod codec;
pub mod marker;
use crate::format::{Cursor, FormatError, Result};
use crate::ids::Offset;
use bytes::{BufMut, Bytes, BytesMut};

/// Bytes before the records: the fixed batch header.
pub const BATCH_HEADER_LEN: usize = 61;
/// baseOffset + batchLength: the part of the header batchLength does not count.
pub const LOG_OVERHEAD: usize = 12;
/// The smallest possible encoded record: length, attributes, timestamp delta,
/// offset delta, key length, value length and header count, one byte each.
pub const MIN_RECORD_LEN: usize = 7;

const MAGIC_OFFSET: usize = 16;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;
const LEADER_EPOCH_OFFSET: usize = 12;
const MAGIC: i8 = 2;

const COMPRESSION_MASK: i16 = 0x07;
const MAX_COMPRESSION: u8 = 4; // zstd
const TIMESTAMP_TYPE_LOG_APPEND: i16 = 0x08;
const TRANSACTIONAL_FLAG: i16 = 0x10;
const CONTROL_FLAG: i16 = 0x20;

/// One Kafka record, as a producer sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub timestamp_ms: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// What the fixed header of a validated batch says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    pub base_offset: Offset,
    /// Total bytes of the batch, including the 12-byte offset/length prefix.
    pub batch_len: usize,
    pub record_count: u32,
    pub last_offset_delta: u32,
    pub first_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// `attributes & 7`: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub compression: u8,
    pub is_transactional: bool,
    pub is_control: bool,
}

impl BatchInfo {
    /// The offset after the batch's last record.
    pub fn end_offset(&self) -> Offset {
        self.base_offset.plus(u64::from(self.last_offset_delta) + 1)
    }
}

/// Encodes `records` as one uncompressed batch starting at `base_offset`,
/// with no producer identity (producerId, producerEpoch and baseSequence all
/// -1) and leader epoch 0. The base timestamp is the first record's; the max
/// timestamp is the largest.
///
/// # Panics
/// If `records` is empty (Kafka has no empty batches), if there are more than
/// `i32::MAX` records, if any key, value or header is longer than `i32::MAX`
/// bytes, if the batch exceeds `i32::MAX` bytes, or if `base_offset` exceeds
/// `i64::MAX`. All are caller bugs, not data errors.
pub fn encode_batch(base_offset: Offset, records: &[Record]) -> Bytes {
    assert!(!records.is_empty(), "a record batch needs at least one record");
    let last_delta = len_i32(records.len()) - 1;
    let deltas = records.iter().enumerate().map(|(i, r)| (i as i32, r));
    encode_with(base_offset, deltas, last_delta, &Identity::NONE)
}

/// What a batch rewritten by compaction keeps of its original: the
/// producer's identity and sequence, whether it was transactional, and
/// its partition leader epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
    pub leader_epoch: i32,
}

impl Identity {
    /// No producer, not transactional, leader epoch 0.
    pub const NONE: Identity = Identity {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        transactional: false,
        leader_epoch: 0,
    };
}

/// Encodes `records`, each at its own offset (increasing, possibly with
/// gaps), as one uncompressed batch whose base offset is the first
/// record's and whose last offset is `last`: what Kafka's log cleaner
/// writes for the records of a batch it keeps, so the batch still ends
/// where the original did.
///
/// # Panics
/// If `records` is empty, its offsets do not increase, `last` is before
/// the last record's offset, or the batch spans more than `i32::MAX`
/// offsets (and as [`encode_batch`]). All are caller bugs.
pub fn encode_batch_at(records: &[(Offset, Record)], last: Offset, identity: &Identity) -> Bytes {
    let base = records.first().expect("a record batch needs at least one record").0;
    let delta = |o: Offset| {
        i32::try_from(o.get().checked_sub(base.get()).expect("offsets increase")).expect("a batch spans i32 offsets")
    };
    assert!(
        records.windows(2).all(|w| w[0].0 < w[1].0),
        "record offsets must increase"
    );
    let last_delta = delta(last);
    assert!(
        last_delta >= delta(records[records.len() - 1].0),
        "the batch ends before its last record"
    );
    let deltas = records.iter().map(|(o, r)| (delta(*o), r));
    encode_with(base, deltas, last_delta, identity)
}

fn encode_with<'a>(
    base_offset: Offset,
    records: impl ExactSizeIterator<Item = (i32, &'a Record)> + Clone,
    last_delta: i32,
    identity: &Identity,
) -> Bytes {
    let count = i32::try_from(records.len()).expect("more than i32::MAX records");
    let base_timestamp = records.clone().next().map_or(0, |(_, r)| r.timestamp_ms);
    let max_timestamp = records.clone().map(|(_, r)| r.timestamp_ms).max().unwrap_or(0);
    let attributes = if identity.transactional { TRANSACTIONAL_FLAG } else { 0 };

    let mut out = BytesMut::with_capacity(BATCH_HEADER_LEN + 32 * records.len());
    out.put_i64(offset_to_i64(base_offset));
    out.put_i32(0); // batchLength, patched below
    out.put_i32(identity.leader_epoch);
    out.put_i8(MAGIC);
    out.put_u32(0); // crc, patched below
    out.put_i16(attributes); // no compression, CreateTime
    out.put_i32(last_delta);
    out.put_i64(base_timestamp);
    out.put_i64(max_timestamp);
    out.put_i64(identity.producer_id);
    out.put_i16(identity.producer_epoch);
    out.put_i32(identity.base_sequence);
    out.put_i32(count);

    let mut body = Vec::new();
    for (delta, record) in records {
        body.clear();
        encode_record_body(&mut body, record, base_timestamp, delta);
        put_varint(&mut out, len_i32(body.len()));
        out.put_slice(&body);
    }

    let batch_length = len_i32(out.len() - LOG_OVERHEAD);
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..ATTRIBUTES_OFFSET].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// `batch` (one uncompressed encoded batch) with its records compressed by
/// `codec`, as a producer configured with that codec would send it.
pub fn compress_batch(batch: &[u8], codec_id: u8) -> Bytes {
    let mut out = BytesMut::from(&batch[..BATCH_HEADER_LEN]);
    out.extend_from_slice(&codec::compress(codec_id, &batch[BATCH_HEADER_LEN..]));
    let attributes = i16::from_be_bytes([out[ATTRIBUTES_OFFSET], out[ATTRIBUTES_OFFSET + 1]]);
    let attributes = (attributes & !COMPRESSION_MASK) | i16::from(codec_id);
    out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    let batch_length = len_i32(out.len() - LOG_OVERHEAD);
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..ATTRIBUTES_OFFSET].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// `batch` (one encoded batch) as an idempotent producer would send it:
/// producer id, epoch and base sequence set, CRC recomputed.
pub fn with_producer(batch: &[u8], producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Bytes {
    const PRODUCER_OFFSET: usize = ATTRIBUTES_OFFSET + 2 + 4 + 8 + 8;
    let mut out = BytesMut::from(batch);
    out[PRODUCER_OFFSET..PRODUCER_OFFSET + 8].copy_from_slice(&producer_id.to_be_bytes());
    out[PRODUCER_OFFSET + 8..PRODUCER_OFFSET + 10].copy_from_slice(&producer_epoch.to_be_bytes());
    out[PRODUCER_OFFSET + 10..PRODUCER_OFFSET + 14].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..ATTRIBUTES_OFFSET].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// `batch` as a transactional producer sends it (the transactional
/// attribute set, CRC recomputed); with `control`, as a control batch.
pub fn transactional(batch: &[u8], control: bool) -> Bytes {
    let mut out = BytesMut::from(batch);
    let flags = TRANSACTIONAL_FLAG | if control { CONTROL_FLAG } else { 0 };
    let attributes = i16::from_be_bytes([out[ATTRIBUTES_OFFSET], out[ATTRIBUTES_OFFSET + 1]]) | flags;
    out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..ATTRIBUTES_OFFSET].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

fn encode_record_body(out: &mut Vec<u8>, r: &Record, base_timestamp: i64, offset_delta: i32) {
    out.put_i8(0); // attributes: unused by Kafka
    put_varlong(out, r.timestamp_ms.wrapping_sub(base_timestamp));
    put_varint(out, offset_delta);
    put_nullable(out, r.key.as_deref());
    put_nullable(out, r.value.as_deref());
    put_varint(out, len_i32(r.headers.len()));
    for (key, value) in &r.headers {
        put_nullable(out, Some(key.as_bytes()));
        put_nullable(out, value.as_deref());
    }
}

fn put_nullable(out: &mut impl BufMut, data: Option<&[u8]>) {
    match data {
        None => put_varint(out, -1),
        Some(d) => {
            put_varint(out, len_i32(d.len()));
            out.put_slice(d);
        }
    }
}

fn len_i32(len: usize) -> i32 {
    i32::try_from(len).expect("length exceeds i32::MAX")
}

fn offset_to_i64(offset: Offset) -> i64 {
    i64::try_from(offset.get()).expect("offset exceeds i64::MAX")
}

/// Writes a zigzag varint, as Kafka's `ByteUtils.writeVarint`.
fn put_varint(out: &mut impl BufMut, n: i32) {
    put_unsigned_varint(out, ((n << 1) ^ (n >> 31)) as u32 as u64);
}

/// Writes a zigzag varlong, as Kafka's `ByteUtils.writeVarlong`.
fn put_varlong(out: &mut impl BufMut, n: i64) {
    put_unsigned_varint(out, ((n << 1) ^ (n >> 63)) as u64);
}

fn put_unsigned_varint(out: &mut impl BufMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// Reads a zigzag varint of at most 5 bytes whose value fits 32 bits.
fn read_varint(c: &mut Cursor<'_>) -> Result<i32> {
    let raw = read_unsigned_varint(c, 5, "varint")?;
    let raw = raw as u32;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Reads a zigzag varlong of at most 10 bytes whose value fits 64 bits.
fn read_varlong(c: &mut Cursor<'_>) -> Result<i64> {
    let raw = read_unsigned_varint(c, 10, "varlong")?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

/// Reads up to `max_bytes` 7-bit groups; rejects encodings that run longer
/// or carry bits beyond the target width (`7 * max_bytes` rounded down to
/// 32 or 64), so no two byte strings decode to the same value by overflow.
fn read_unsigned_varint(c: &mut Cursor<'_>, max_bytes: u32, what: &str) -> Result<u64> {
    let start = c.position();
    let width = if max_bytes == 5 { 32 } else { 64 };
    let mut value: u64 = 0;
    for i in 0..max_bytes {
        let byte = c.u8()?;
        let shift = 7 * i;
        let bits = u64::from(byte & 0x7f);
        if shift + 7 > width && bits >> (width - shift) != 0 {
            return Err(c.error_at(start, format!("{what} overflows {width} bits")));
        }
        value |= bits << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(c.error_at(start, format!("{what} longer than {max_bytes} bytes")))
}

/// The header fields plus the raw attributes, which [`BatchInfo`] only
/// summarises.
struct Header {
    info: BatchInfo,
    attributes: i16,
}

/// Reads and validates the batch at the start of `buf`: magic 2, a
/// batchLength that fits in `buf`, a matching CRC-32C, at least one record,
/// and for uncompressed batches `lastOffsetDelta == count - 1` and a record
/// count the bytes could actually hold. Bytes after the batch are ignored.
pub fn parse_batch(object: &str, buf: &[u8]) -> Result<BatchInfo> {
    parse_header(&mut Cursor::new(object, buf)).map(|h| h.info)
}

/// Parses the batch at the cursor and leaves the cursor after its header;
/// the records area is the next `batch_len - BATCH_HEADER_LEN` bytes.
fn parse_header(c: &mut Cursor<'_>) -> Result<Header> {
    let start = c.position();
    let at = |rel: usize| start + rel as u64;
    let whole = c.clone().rest();

    let base_offset = c.i64()?;
    let batch_length = c.i32()?;
    let min_length = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;
    if batch_length < min_length {
        return Err(c.error_at(
            at(8),
            format!("batch length {batch_length} is below the minimum {min_length}"),
        ));
    }
    let batch_len = LOG_OVERHEAD + batch_length as usize;
    if batch_len > whole.len() {
        return Err(c.error_at(
            at(8),
            format!(
                "truncated: batch length {batch_length} needs {batch_len} bytes, {} left",
                whole.len()
            ),
        ));
    }
    let _leader_epoch = c.i32()?;
    let magic = c.i8()?;
    if magic != MAGIC {
        return Err(c.error_at(
            at(MAGIC_OFFSET),
            format!("record batch magic {magic} is not supported (only 2)"),
        ));
    }
    let stored_crc = c.u32()?;
    let actual_crc = crc32c::crc32c(&whole[ATTRIBUTES_OFFSET..batch_len]);
    if stored_crc != actual_crc {
        return Err(c.error_at(
            at(CRC_OFFSET),
            format!("batch CRC mismatch: stored {stored_crc:#010x}, computed {actual_crc:#010x}"),
        ));
    }

    let attributes = c.i16()?;
    let last_offset_delta = c.i32()?;
    let first_timestamp = c.i64()?;
    let max_timestamp = c.i64()?;
    let producer_id = c.i64()?;
    let producer_epoch = c.i16()?;
    let base_sequence = c.i32()?;
    let record_count = c.i32()?;

    let info = BatchInfo {
        base_offset: Offset(non_negative(c, at(0), base_offset, "base offset")?),
        batch_len,
        record_count: count_u32(c, at(57), record_count)?,
        last_offset_delta: non_negative(c, at(23), last_offset_delta.into(), "last offset delta")? as u32,
        first_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        compression: (attributes & COMPRESSION_MASK) as u8,
        is_transactional: attributes & TRANSACTIONAL_FLAG != 0,
        is_control: attributes & CONTROL_FLAG != 0,
    };
    check_header(c, start, &info)?;
    Ok(Header { info, attributes })
}

fn non_negative(c: &Cursor<'_>, at: u64, value: i64, what: &str) -> Result<u64> {
    u64::try_from(value).map_err(|_| c.error_at(at, format!("{what} {value} is negative")))
}

fn count_u32(c: &Cursor<'_>, at: u64, count: i32) -> Result<u32> {
    match u32::try_from(count) {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(c.error_at(at, format!("record count {count} must be at least 1"))),
    }
}

/// Cross-field checks, done after the CRC so they only ever fire on batches a
/// buggy writer produced, not on bit rot.
fn check_header(c: &Cursor<'_>, start: u64, info: &BatchInfo) -> Result<()> {
    let at = |rel: u64| start + rel;
    if info.compression > MAX_COMPRESSION {
        return Err(c.error_at(
            at(ATTRIBUTES_OFFSET as u64),
            format!("unknown compression codec {}", info.compression),
        ));
    }
    let last = info.base_offset.get() + u64::from(info.last_offset_delta);
    if last > i64::MAX as u64 {
        return Err(c.error_at(at(23), "last offset overflows i64"));
    }
    if info.record_count - 1 > info.last_offset_delta {
        return Err(c.error_at(
            at(23),
            format!(
                "last offset delta {} is too small for {} records",
                info.last_offset_delta, info.record_count
            ),
        ));
    }
    if info.compression == 0 {
        let room = (info.batch_len - BATCH_HEADER_LEN) / MIN_RECORD_LEN;
        if info.record_count as usize > room {
            return Err(c.error_at(
                at(57),
                format!(
                    "record count {} cannot fit in {} bytes of records",
                    info.record_count,
                    info.batch_len - BATCH_HEADER_LEN
                ),
            ));
        }
    }
    Ok(())
}

/// Overwrites the batch's base offset. baseOffset is outside the CRC, so the
/// batch stays valid.
///
/// # Panics
/// If `batch` is shorter than 8 bytes or `base` exceeds `i64::MAX`.
pub fn set_base_offset(batch: &mut [u8], base: Offset) {
    batch[0..8].copy_from_slice(&offset_to_i64(base).to_be_bytes());
}

/// The base offset of a stored batch (validated when it was stored).
///
/// # Panics
/// If `batch` is shorter than 8 bytes.
pub fn base_offset(batch: &[u8]) -> Offset {
    let base = i64::from_be_bytes(batch[0..8].try_into().expect("8 bytes"));
    Offset(u64::try_from(base).unwrap_or(0))
}

/// The offset after the last record of a stored batch.
///
/// # Panics
/// If `batch` is shorter than the 27 bytes up to its last offset delta.
pub fn end_offset(batch: &[u8]) -> Offset {
    let at = ATTRIBUTES_OFFSET + 2;
    let delta = i32::from_be_bytes(batch[at..at + 4].try_into().expect("4 bytes"));
    base_offset(batch).plus(u64::try_from(delta).unwrap_or(0) + 1)
}

/// Overwrites the batch's partitionLeaderEpoch, which is outside the CRC.
///
/// # Panics
/// If `batch` is shorter than 16 bytes.
pub fn set_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[LEADER_EPOCH_OFFSET..LEADER_EPOCH_OFFSET + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// The batch's partition leader epoch.
///
/// # Panics
/// If `batch` is shorter than its first 16 bytes.
pub fn leader_epoch(batch: &[u8]) -> i32 {
    let b: [u8; 4] = batch[LEADER_EPOCH_OFFSET..LEADER_EPOCH_OFFSET + 4]
        .try_into()
        .expect("four bytes");
    i32::from_be_bytes(b)
}

/// Decodes every record of the batch at the start of `batch`, with its
/// absolute offset. The header is validated as by [`parse_batch`] first, so
/// the records are CRC-checked before they are interpreted. A compressed
/// batch is decompressed first (bounded by [`codec::MAX_DECOMPRESSED`]).
///
/// Offset deltas must increase and stay within the batch's last offset
/// delta; they may skip offsets, as in a batch that compaction rewrote
/// (what a producer sends is held to dense offsets by
/// [`decode_producer_records`]).
pub fn decode_records(object: &str, batch: &[u8]) -> Result<Vec<(Offset, Record)>> {
    let mut c = Cursor::new(object, batch);
    let header = parse_header(&mut c)?;
    let info = header.info;
    let records_at = c.position();
    let area = c.bytes(info.batch_len - BATCH_HEADER_LEN)?;
    let decompressed;
    let mut rc = if info.compression == codec::NONE {
        Cursor::at(object, area, records_at)
    } else {
        decompressed = codec::decompress(info.compression, area, codec::MAX_DECOMPRESSED)
            .map_err(|e| c.error_at(records_at, e))?;
        if info.record_count as usize > decompressed.len() / MIN_RECORD_LEN {
            return Err(c.error_at(
                records_at,
                format!(
                    "{} records (last offset delta {}) in {} decompressed bytes",
                    info.record_count,
                    info.last_offset_delta,
                    decompressed.len()
                ),
            ));
        }
        Cursor::at(object, &decompressed, 0)
    };
    // parse_header bounded record_count by area.len() / MIN_RECORD_LEN.
    let mut out = Vec::with_capacity(info.record_count as usize);
    let log_append = header.attributes & TIMESTAMP_TYPE_LOG_APPEND != 0;
    let mut previous: Option<u32> = None;
    for _ in 0..info.record_count {
        let (delta, mut record) = decode_record(&mut rc, previous, info.last_offset_delta, info.first_timestamp)?;
        if log_append {
            record.timestamp_ms = info.max_timestamp;
        }
        out.push((info.base_offset.plus(u64::from(delta)), record));
        previous = Some(delta);
    }
    rc.expect_end()?;
    Ok(out)
}

/// [`decode_records`] for a batch a producer sent: its offsets must also
/// be dense (deltas 0, 1, 2, ... up to the last offset delta), as Kafka
/// requires of every produced batch. Only a batch that compaction rewrote
/// skips offsets.
pub fn decode_producer_records(object: &str, batch: &[u8]) -> Result<Vec<(Offset, Record)>> {
    let records = decode_records(object, batch)?;
    let info = parse_batch(object, batch)?;
    let dense = info.last_offset_delta as usize + 1 == records.len()
        && (records.iter().enumerate()).all(|(i, (o, _))| *o == info.base_offset.plus(i as u64));
    if !dense {
        return Err(FormatError {
            object: object.to_owned(),
            offset: 23,
            reason: format!(
                "a produced batch must have dense offsets: {} records, last offset delta {}",
                records.len(),
                info.last_offset_delta
            ),
        });
    }
    Ok(records)
}

/// The first record of an uncompressed batch, without decoding the others
/// (`None` for an empty or a compressed batch). The batch is checked as
/// [`decode_records`] checks it before its first record is read.
pub fn first_record(object: &str, batch: &[u8]) -> Result<Option<Record>> {
    let mut c = Cursor::new(object, batch);
    let header = parse_header(&mut c)?;
    let info = header.info;
    if info.compression != codec::NONE || info.record_count == 0 {
        return Ok(None);
    }
    let records_at = c.position();
    let area = c.bytes(info.batch_len - BATCH_HEADER_LEN)?;
    let mut rc = Cursor::at(object, area, records_at);
    let (_, mut record) = decode_record(&mut rc, None, info.last_offset_delta, info.first_timestamp)?;
    if header.attributes & TIMESTAMP_TYPE_LOG_APPEND != 0 {
        record.timestamp_ms = info.max_timestamp;
    }
    Ok(Some(record))
}

/// Decodes the length-prefixed record at the cursor, with its offset
/// delta: past the `previous` record's, and at most the batch's last
/// offset delta `last` (a compacted batch skips the removed records').
fn decode_record(c: &mut Cursor<'_>, previous: Option<u32>, last: u32, base_timestamp: i64) -> Result<(u32, Record)> {
    let len_at = c.position();
    let len = read_varint(c)?;
    let len = match usize::try_from(len) {
        Ok(n) if n >= MIN_RECORD_LEN - 1 && n <= c.remaining() => n,
        _ => {
            return Err(c.error_at(
                len_at,
                format!("record length {len} outside {}..={}", MIN_RECORD_LEN - 1, c.remaining()),
            ))
        }
    };
    let body_at = c.position();
    let body = c.bytes(len)?;
    let mut b = Cursor::at(c.object(), body, body_at);

    let _attributes = b.i8()?;
    let timestamp_delta = read_varlong(&mut b)?;
    let delta_at = b.position();
    let offset_delta = read_varint(&mut b)?;
    let low = previous.map_or(0, |p| i64::from(p) + 1);
    if !(low..=i64::from(last)).contains(&i64::from(offset_delta)) {
        return Err(b.error_at(delta_at, format!("offset delta {offset_delta} outside {low}..={last}")));
    }
    let key = read_nullable(&mut b, "key")?;
    let value = read_nullable(&mut b, "value")?;
    let headers = read_headers(&mut b)?;
    b.expect_end()?;
    Ok((
        offset_delta as u32,
        Record {
            timestamp_ms: base_timestamp.wrapping_add(timestamp_delta),
            key,
            value,
            headers,
        },
    ))
}

fn read_headers(c: &mut Cursor<'_>) -> Result<Vec<(String, Option<Bytes>)>> {
    let count_at = c.position();
    let count = read_varint(c)?;
    // Each header takes at least two bytes (key length, value length).
    let count = match usize::try_from(count) {
        Ok(n) if n <= c.remaining() / 2 => n,
        _ => {
            return Err(c.error_at(
                count_at,
                format!("header count {count} cannot fit in {} bytes", c.remaining()),
            ))
        }
    };
    let mut headers = Vec::with_capacity(count);
    for _ in 0..count {
        let key_at = c.position();
        let key = read_nullable(c, "header key")?.ok_or_else(|| c.error_at(key_at, "header key is null"))?;
        let key =
            String::from_utf8(key.to_vec()).map_err(|e| c.error_at(key_at, format!("header key is not UTF-8: {e}")))?;
        headers.push((key, read_nullable(c, "header value")?));
    }
    Ok(headers)
}

/// A varint length (-1 = null) and that many bytes.
fn read_nullable(c: &mut Cursor<'_>, what: &str) -> Result<Option<Bytes>> {
    let len_at = c.position();
    let len = read_varint(c)?;
    if len == -1 {
        return Ok(None);
    }
    match usize::try_from(len) {
        Ok(n) if n <= c.remaining() => Ok(Some(Bytes::copy_from_slice(c.bytes(n)?))),
        _ => Err(c.error_at(len_at, format!("{what} length {len} outside -1..={}", c.remaining()))),
    }
}

/// Walks the batches concatenated in `buf`, yielding each validated header
/// with the batch's bytes. Stops after the first error: once one length is
/// wrong, nothing after it can be located.
pub fn batches<'a>(
    object: &str,
    buf: &'a [u8],
) -> impl Iterator<Item = Result<(BatchInfo, &'a [u8]), FormatError>> + 'a {
    Batches {
        object: object.to_owned(),
        buf,
        pos: 0,
        failed: false,
    }
}

struct Batches<'a> {
    object: String,
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> Iterator for Batches<'a> {
    type Item = Result<(BatchInfo, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let mut c = Cursor::at(&self.object, rest, self.pos as u64);
        match parse_header(&mut c) {
            Ok(h) => {
                let bytes = &rest[..h.info.batch_len];
                self.pos += h.info.batch_len;
                Some(Ok((h.info, bytes)))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Kafka's `Utils.murmur2` (MurmurHash2, seed `0x9747b28c`), bit for bit, so
/// keys land on the same partitions as with the Java client's default
/// partitioner.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes(chunk.try_into().expect("chunks of 4"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate().rev() {
            h ^= u32::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's default partitioner picks for a keyed record:
/// `toPositive(murmur2(key)) % partitions`.
///
/// # Panics
/// If `partitions` is 0.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    (murmur2(key) & 0x7fff_ffff) as u32 % partitions
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(ts: i64, key: Option<&str>, value: Option<&str>) -> Record {
        Record {
            timestamp_ms: ts,
            key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
            value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            headers: vec![],
        }
    }

    fn sample_records() -> Vec<Record> {
        let mut first = rec(1_000, Some("k"), Some("v"));
        first.headers = vec![("h".into(), Some(Bytes::from_static(b"x"))), ("n".into(), None)];
        vec![first, rec(990, None, Some("second")), rec(1_005, Some(""), None)]
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn first_record_is_the_first_of_decode_records_and_nothing_when_compressed() {
        let records = sample_records();
        let batch = encode_batch(Offset(7), &records);
        let all = decode_records("b", &batch).unwrap();
        assert_eq!(first_record("b", &batch).unwrap(), Some(all[0].1.clone()));
        let compressed = compress_batch(&batch, codec::GZIP);
        assert_eq!(first_record("b", &compressed).unwrap(), None);
        let mut corrupt = batch.to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        assert!(first_record("b", &corrupt).is_err(), "the CRC is checked");
    }

    #[test]
    fn round_trip() {
        let records = sample_records();
        let batch = encode_batch(Offset(42), &records);
        let info = parse_batch("b", &batch).unwrap();
        assert_eq!(
            info,
            BatchInfo {
                base_offset: Offset(42),
                batch_len: batch.len(),
                record_count: 3,
                last_offset_delta: 2,
                first_timestamp: 1_000,
                max_timestamp: 1_005,
                producer_id: -1,
                producer_epoch: -1,
                base_sequence: -1,
                compression: 0,
                is_transactional: false,
                is_control: false,
            }
        );
        assert_eq!(info.end_offset(), Offset(45));
        let decoded = decode_records("b", &batch).unwrap();
        let expected: Vec<_> = (42..).map(Offset).zip(records).collect();
        assert_eq!(decoded, expected);
    }

    /// Pins the exact bytes of a one-record batch. The expected hex was
    /// produced independently, field by field, from the Kafka protocol spec
    /// (and a bitwise CRC-32C), not by this encoder.
    #[test]
    fn golden_bytes() {
        let mut r = rec(1_000, Some("k"), Some("v"));
        r.headers = vec![("h".into(), Some(Bytes::from_static(b"x")))];
        let batch = encode_batch(Offset(5), &[r]);
        assert_eq!(hex(&batch), GOLDEN_BATCH);
    }

    const GOLDEN_BATCH: &str = concat!(
        "0000000000000005", // baseOffset 5
        "0000003e",         // batchLength 62
        "00000000",         // partitionLeaderEpoch 0
        "02",               // magic 2
        "85d4936f",         // CRC-32C of everything below
        "0000",             // attributes: uncompressed, CreateTime
        "00000000",         // lastOffsetDelta 0
        "00000000000003e8", // baseTimestamp 1000
        "00000000000003e8", // maxTimestamp 1000
        "ffffffffffffffff", // producerId -1
        "ffff",             // producerEpoch -1
        "ffffffff",         // baseSequence -1
        "00000001",         // 1 record
        "18",               // record length 12
        "00",               // record attributes
        "00",               // timestampDelta 0
        "00",               // offsetDelta 0
        "026b",             // key "k"
        "0276",             // value "v"
        "02",               // 1 header
        "0268",             // header key "h"
        "0278",             // header value "x"
    );

    #[test]
    fn set_base_offset_and_leader_epoch_keep_crc_valid() {
        let mut batch = encode_batch(Offset(0), &sample_records()).to_vec();
        set_base_offset(&mut batch, Offset(1_000_000));
        set_leader_epoch(&mut batch, 17);
        let info = parse_batch("b", &batch).unwrap();
        assert_eq!(info.base_offset, Offset(1_000_000));
        assert_eq!(&batch[12..16], &17i32.to_be_bytes());
        let decoded = decode_records("b", &batch).unwrap();
        assert_eq!(decoded[2].0, Offset(1_000_002));
        assert_eq!(base_offset(&batch), info.base_offset);
        assert_eq!(end_offset(&batch), info.end_offset());
    }

    #[test]
    fn every_truncation_is_an_error() {
        let batch = encode_batch(Offset(7), &sample_records());
        for len in 0..batch.len() {
            let cut = &batch[..len];
            assert!(parse_batch("b", cut).is_err(), "parse_batch accepted {len} bytes");
            assert!(decode_records("b", cut).is_err(), "decode accepted {len} bytes");
            let all: Vec<_> = batches("b", cut).collect();
            assert!(
                len == 0 || all.iter().any(Result::is_err),
                "batches accepted {len} bytes"
            );
        }
    }

    #[test]
    fn every_bit_flip_after_the_leader_epoch_is_detected() {
        // baseOffset and partitionLeaderEpoch are deliberately outside the CRC.
        let batch = encode_batch(Offset(7), &sample_records());
        for byte in 8..batch.len() {
            if (LEADER_EPOCH_OFFSET..MAGIC_OFFSET).contains(&byte) {
                continue;
            }
            for bit in 0..8 {
                let mut bad = batch.to_vec();
                bad[byte] ^= 1 << bit;
                assert!(
                    decode_records("b", &bad).is_err(),
                    "flip of byte {byte} bit {bit} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn crc_error_names_object_and_offset() {
        let mut batch = encode_batch(Offset(0), &sample_records()).to_vec();
        let last = batch.len() - 1;
        batch[last] ^= 0x01;
        let err = parse_batch("data/obj-1", &batch).unwrap_err();
        assert_eq!(err.object, "data/obj-1");
        assert_eq!(err.offset, CRC_OFFSET as u64);
        assert!(err.reason.contains("CRC"), "{err}");
    }

    /// Re-signs a mutated batch so the checks behind the CRC can be reached.
    fn resign(batch: &mut [u8]) {
        let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
        batch[CRC_OFFSET..ATTRIBUTES_OFFSET].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn a_compacted_batch_keeps_its_records_offsets_identity_and_end() {
        let records = sample_records();
        let kept = vec![
            (Offset(100), records[0].clone()),
            (Offset(103), records[1].clone()),
            (Offset(104), records[2].clone()),
        ];
        let identity = Identity {
            producer_id: 9,
            producer_epoch: 2,
            base_sequence: 40,
            transactional: true,
            leader_epoch: 7,
        };
        let b = encode_batch_at(&kept, Offset(107), &identity);
        let info = parse_batch("b", &b).unwrap();
        assert_eq!(
            (info.base_offset, info.end_offset(), info.record_count),
            (Offset(100), Offset(108), 3)
        );
        assert_eq!((info.producer_id, info.producer_epoch, info.base_sequence), (9, 2, 40));
        assert!(info.is_transactional && !info.is_control);
        assert_eq!(i32::from_be_bytes(b[12..16].try_into().unwrap()), 7, "leader epoch");
        assert_eq!(decode_records("b", &b).unwrap(), kept);
        assert_eq!(first_record("b", &b).unwrap(), Some(records[0].clone()));
        // A producer may not send it: its offsets are not dense.
        let err = decode_producer_records("b", &b).unwrap_err();
        assert!(err.reason.contains("dense"), "{err}");
        // Dense batches are a producer's, and read back the same either way.
        let dense = encode_batch(Offset(5), &records);
        assert_eq!(
            decode_producer_records("b", &dense).unwrap(),
            decode_records("b", &dense).unwrap()
        );
        // So is one whose last offset delta runs past its last record.
        let mut longer = dense.to_vec();
        longer[23..27].copy_from_slice(&5i32.to_be_bytes());
        resign(&mut longer);
        assert_eq!(parse_batch("b", &longer).unwrap().end_offset(), Offset(11));
        assert!(decode_records("b", &longer).is_ok());
        assert!(decode_producer_records("b", &longer).is_err());
    }

    #[test]
    fn record_offset_deltas_must_increase_within_the_batch() {
        let records = sample_records();
        for deltas in [[0, 0, 1], [1, 0, 2], [0, 2, 6], [-1, 0, 1]] {
            // Hand-built: the deltas as given, last offset delta 5.
            let mut out = BytesMut::new();
            let base_ts = records[0].timestamp_ms;
            let mut body = Vec::new();
            for (d, r) in deltas.iter().zip(&records) {
                body.clear();
                encode_record_body(&mut body, r, base_ts, *d);
                put_varint(&mut out, len_i32(body.len()));
                out.put_slice(&body);
            }
            let mut b = encode_batch_at(
                &[(Offset(0), records[0].clone()), (Offset(5), records[1].clone())],
                Offset(5),
                &Identity::NONE,
            )
            .to_vec();
            b.truncate(BATCH_HEADER_LEN);
            b.extend_from_slice(&out);
            let len = len_i32(b.len() - LOG_OVERHEAD);
            b[8..12].copy_from_slice(&len.to_be_bytes());
            b[57..61].copy_from_slice(&3i32.to_be_bytes());
            resign(&mut b);
            let err = decode_records("b", &b).unwrap_err();
            assert!(err.reason.contains("offset delta"), "{deltas:?}: {err}");
        }
    }

    #[test]
    fn rejects_wrong_magic() {
        let mut batch = encode_batch(Offset(0), &sample_records()).to_vec();
        batch[MAGIC_OFFSET] = 1;
        let err = parse_batch("b", &batch).unwrap_err();
        assert_eq!(err.offset, 16);
        assert!(err.reason.contains("magic 1"), "{err}");
    }

    #[test]
    fn rejects_bad_counts_behind_a_valid_crc() {
        let batch = encode_batch(Offset(0), &sample_records()).to_vec();
        let with = |at: usize, value: i32| {
            let mut b = batch.clone();
            b[at..at + 4].copy_from_slice(&value.to_be_bytes());
            resign(&mut b);
            b
        };
        for (at, value, needle) in [
            (57, 0, "at least 1"),
            (57, -1, "at least 1"),
            (57, i32::MAX, "last offset delta"),
            (23, 1, "last offset delta 1"),
            (23, -1, "negative"),
        ] {
            let err = parse_batch("b", &with(at, value)).unwrap_err();
            assert!(err.reason.contains(needle), "{at}={value}: {err}");
        }
        // A count consistent with lastOffsetDelta but too large for the bytes.
        let mut b = with(57, 1_000_000);
        b[23..27].copy_from_slice(&999_999i32.to_be_bytes());
        resign(&mut b);
        let err = parse_batch("b", &b).unwrap_err();
        assert!(err.reason.contains("cannot fit"), "{err}");
    }

    #[test]
    fn rejects_batch_length_out_of_bounds() {
        let batch = encode_batch(Offset(0), &sample_records()).to_vec();
        for len in [-1i32, 0, 48, i32::MAX] {
            let mut b = batch.clone();
            b[8..12].copy_from_slice(&len.to_be_bytes());
            let err = parse_batch("b", &b).unwrap_err();
            assert_eq!(err.offset, 8, "{err}");
        }
    }

    #[test]
    fn compressed_batches_decode_to_the_same_records_with_every_codec() {
        let records = sample_records();
        let plain = encode_batch(Offset(40), &records);
        let expected = decode_records("b", &plain).unwrap();
        for id in [codec::GZIP, codec::SNAPPY, codec::LZ4, codec::ZSTD] {
            let packed = compress_batch(&plain, id);
            let info = parse_batch("b", &packed).unwrap();
            assert_eq!((info.compression, info.batch_len), (id, packed.len()));
            assert_eq!(decode_records("b", &packed).unwrap(), expected, "{}", codec::name(id));
        }
    }

    #[test]
    fn a_compressed_batch_that_lies_about_its_records_is_refused() {
        let mut batch = encode_batch(Offset(0), &sample_records()).to_vec();
        batch[ATTRIBUTES_OFFSET + 1] |= 1; // says gzip, holds plain records
        resign(&mut batch);
        let info = parse_batch("b", &batch).unwrap();
        assert_eq!(info.compression, 1);
        let err = decode_records("b", &batch).unwrap_err();
        assert!(err.reason.contains("gzip"), "{err}");
        // Compressed, but the header claims one record more than it holds.
        let mut packed = compress_batch(&encode_batch(Offset(0), &sample_records()), codec::LZ4).to_vec();
        let count = i32::from_be_bytes(packed[57..61].try_into().unwrap()) + 1;
        packed[57..61].copy_from_slice(&count.to_be_bytes());
        packed[23..27].copy_from_slice(&(count - 1).to_be_bytes());
        resign(&mut packed);
        assert!(decode_records("b", &packed).is_err());
        batch[ATTRIBUTES_OFFSET + 1] |= 7;
        resign(&mut batch);
        assert!(parse_batch("b", &batch).unwrap_err().reason.contains("codec 7"));
    }

    #[test]
    fn flags_are_reported() {
        let mut batch = encode_batch(Offset(0), &sample_records()).to_vec();
        batch[ATTRIBUTES_OFFSET + 1] |= 0x30;
        resign(&mut batch);
        let info = parse_batch("b", &batch).unwrap();
        assert!(info.is_transactional && info.is_control);
    }

    #[test]
    fn log_append_time_uses_max_timestamp() {
        let mut batch = encode_batch(Offset(0), &sample_records()).to_vec();
        batch[ATTRIBUTES_OFFSET + 1] |= 0x08;
        resign(&mut batch);
        let decoded = decode_records("b", &batch).unwrap();
        assert!(decoded.iter().all(|(_, r)| r.timestamp_ms == 1_005));
    }

    #[test]
    fn walks_concatenated_batches() {
        let a = encode_batch(Offset(0), &sample_records());
        let b = encode_batch(Offset(3), &[rec(5, None, Some("z"))]);
        let buf = [a.as_ref(), b.as_ref()].concat();
        let got: Vec<_> = batches("o", &buf).map(Result::unwrap).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1, a.as_ref());
        assert_eq!(got[1].1, b.as_ref());
        assert_eq!(got[1].0.base_offset, Offset(3));

        // An error in the second batch is reported at its absolute offset.
        let mut bad = buf.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0x80;
        let results: Vec<_> = batches("o", &bad).collect();
        assert_eq!(results.len(), 2);
        assert_eq!(results[1].as_ref().unwrap_err().offset, (a.len() + CRC_OFFSET) as u64);
        assert_eq!(batches("o", &[]).count(), 0);
    }

    #[test]
    fn varints_match_kafka() {
        // Zigzag varints as Kafka (and protobuf) define them.
        let cases: [(i32, &[u8]); 6] = [
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for (n, bytes) in cases {
            let mut out = Vec::new();
            put_varint(&mut out, n);
            assert_eq!(out, bytes, "{n}");
            assert_eq!(read_varint(&mut Cursor::new("v", bytes)).unwrap(), n);
        }
        let mut out = Vec::new();
        put_varlong(&mut out, i64::MIN);
        assert_eq!(out, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(read_varlong(&mut Cursor::new("v", &out)).unwrap(), i64::MIN);
    }

    #[test]
    fn overlong_varints_are_rejected() {
        assert!(read_varint(&mut Cursor::new("v", &[0xff, 0xff, 0xff, 0xff, 0x1f])).is_err());
        assert!(read_varint(&mut Cursor::new("v", &[0x80, 0x80, 0x80, 0x80, 0x80, 0x00])).is_err());
        let mut long = vec![0xff; 9];
        long.push(0x02);
        assert!(read_varlong(&mut Cursor::new("v", &long)).is_err());
        assert!(read_varint(&mut Cursor::new("v", &[0x80])).is_err());
    }

    /// Kafka's `UtilsTest.testMurmur2` vectors.
    #[test]
    fn murmur2_matches_kafka() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input), expected, "{:?}", String::from_utf8_lossy(input));
        }
        assert_eq!(murmur2(b""), 275_646_681);
    }

    #[test]
    fn partition_for_key_is_to_positive_mod() {
        // murmur2("foobar") = -790332482; & 0x7fffffff = 1357151166.
        assert_eq!(partition_for_key(b"foobar", 50), 1_357_151_166 % 50);
        assert_eq!(partition_for_key(b"foobar", 50), 16);
        assert_eq!(partition_for_key(b"abc", 7), 479_470_107 % 7);
        for p in 1..20 {
            assert!(partition_for_key(b"some-key", p) < p);
        }
    }

    #[test]
    #[should_panic(expected = "at least one record")]
    fn empty_batches_are_a_caller_bug() {
        encode_batch(Offset(0), &[]);
    }

    fn arb_bytes() -> impl Strategy<Value = Option<Bytes>> {
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40).prop_map(Bytes::from))
    }

    fn arb_record() -> impl Strategy<Value = Record> {
        (
            any::<i64>(),
            arb_bytes(),
            arb_bytes(),
            proptest::collection::vec((".{0,8}", arb_bytes()), 0..4),
        )
            .prop_map(|(timestamp_ms, key, value, headers)| Record {
                timestamp_ms,
                key,
                value,
                headers,
            })
    }

    proptest! {
        #[test]
        fn prop_round_trip(
            base in 0u64..(i64::MAX as u64 / 2),
            records in proptest::collection::vec(arb_record(), 1..8),
        ) {
            let batch = encode_batch(Offset(base), &records);
            let decoded = decode_records("p", &batch).unwrap();
            let expected: Vec<_> = (base..).map(Offset).zip(records).collect();
            prop_assert_eq!(decoded, expected);
        }

        #[test]
        fn prop_random_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_batch("p", &buf);
            let _ = decode_records("p", &buf);
            let _ = batches("p", &buf).count();
        }

        /// Random bytes behind a valid header and CRC reach the record decoder.
        #[test]
        fn prop_resigned_garbage_never_panics(
            count in any::<i32>(),
            attributes in any::<i16>(),
            records in proptest::collection::vec(any::<u8>(), 0..120),
        ) {
            let mut batch = encode_batch(Offset(0), &[rec(0, None, None)]).to_vec();
            batch.truncate(BATCH_HEADER_LEN);
            batch.extend_from_slice(&records);
            let len = (batch.len() - LOG_OVERHEAD) as i32;
            batch[8..12].copy_from_slice(&len.to_be_bytes());
            batch[21..23].copy_from_slice(&attributes.to_be_bytes());
            batch[23..27].copy_from_slice(&count.wrapping_sub(1).to_be_bytes());
            batch[57..61].copy_from_slice(&count.to_be_bytes());
            resign(&mut batch);
            let _ = decode_records("p", &batch);
        }
    }
}
