//! WAL segment and fence-marker objects.
//!
//! A node appends produce requests to its write-ahead log by uploading one
//! *segment* object at a time, keyed by (node, node epoch, sequence). A
//! *fence marker* occupies a segment key in place of a segment: whoever takes
//! over a dead node's streams writes it with create-if-absent, so the old
//! incarnation's next upload under that key fails and it learns it is fenced.
//!
//! Both objects start with a 4-byte magic and a `u16` version, so a reader
//! can tell them apart ([`decode_wal_object`]) and refuse versions it does not
//! know instead of misreading them. Every byte is covered by a CRC-32C.
//!
//! Segment layout (big-endian):
//!
//! ```text
//! header  "SLWS" | version u16 = 1 | node id (u16 len + UTF-8) | epoch u64 | seq u64
//! entry*  len u32 | topic u64 | partition u32 | stream epoch u64 | base offset u64
//!         | record count u32 | max timestamp i64 | has producer u8 (0/1)
//!         | [producer id i64 | producer epoch i16 | base sequence i32]
//!         | batch (u32 len + bytes) | crc u32
//! trailer "SLWE" | entry count u32 | crc u32
//! ```
//!
//! An entry's `len` counts the bytes after it up to (not including) its CRC;
//! the entry CRC covers `len` and those bytes. The trailer CRC covers every
//! byte of the object before it, so a truncated upload or a flipped bit
//! anywhere is caught before any field is believed.

use crate::batch;
use crate::format::{put_len_prefixed_u32, put_string_u16, string_u16_len, u32_len, Cursor};
use crate::format::{FormatError, Result};
use crate::ids::{LogIndex, NodeEpoch, NodeId, Offset, SegmentSeq, StreamEpoch, StreamId, TopicId};
use bytes::{BufMut, Bytes, BytesMut};

pub const SEGMENT_MAGIC: &[u8; 4] = b"SLWS";
pub const TRAILER_MAGIC: &[u8; 4] = b"SLWE";
pub const FENCE_MAGIC: &[u8; 4] = b"SLWF";
pub const SEGMENT_VERSION: u16 = 1;
pub const FENCE_VERSION: u16 = 1;

const TRAILER_LEN: usize = 12;
/// Entry bytes besides the batch and the producer: length, stream (12),
/// stream epoch, base offset, record count, max timestamp, producer flag,
/// batch length and CRC.
const ENTRY_FIXED_LEN: usize = 4 + 12 + 8 + 8 + 4 + 8 + 1 + 4 + 4;
const PRODUCER_LEN: usize = 8 + 2 + 4;

/// Idempotent-producer identity of the batches in an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerInfo {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

/// The records one produce request appended to one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalEntry {
    pub stream: StreamId,
    pub stream_epoch: StreamEpoch,
    pub base_offset: Offset,
    pub record_count: u32,
    pub max_timestamp: i64,
    pub producer: Option<ProducerInfo>,
    /// One or more RecordBatch v2, base offsets already assigned, covering
    /// exactly `base_offset..end_offset()`.
    pub batch: Bytes,
}

impl WalEntry {
    /// The offset after the entry's last record.
    pub fn end_offset(&self) -> Offset {
        self.base_offset.plus(u64::from(self.record_count))
    }
}

/// One WAL object: the entries one node incarnation uploaded together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub node: NodeId,
    pub epoch: NodeEpoch,
    pub seq: SegmentSeq,
    pub entries: Vec<WalEntry>,
}

/// Written with create-if-absent at the key of segment `seq` of `fenced_node`
/// at `fenced_epoch`, so that incarnation's own upload of that segment fails.
/// Records who fenced it (`holder` at `holder_epoch`) and the metadata-log
/// index that authorised it, so the fencing can be audited from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceMarker {
    pub fenced_node: NodeId,
    pub fenced_epoch: NodeEpoch,
    pub seq: SegmentSeq,
    pub holder: NodeId,
    pub holder_epoch: NodeEpoch,
    pub log_index: LogIndex,
}

/// Anything that may be found at a WAL key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalObject {
    Segment(Segment),
    Fence(FenceMarker),
}

/// Bytes `e` takes in an encoded segment, so a writer can decide when a
/// segment is full without encoding it.
pub fn entry_encoded_len(e: &WalEntry) -> usize {
    ENTRY_FIXED_LEN + e.producer.map_or(0, |_| PRODUCER_LEN) + e.batch.len()
}

fn header_len(node: &NodeId) -> usize {
    4 + 2 + string_u16_len(node.as_str()) + 8 + 8
}

/// Encodes a segment.
///
/// # Panics
/// If the node id exceeds 65535 bytes, there are more than `u32::MAX`
/// entries, or a batch is 4 GiB or larger: all caller bugs.
pub fn encode_segment(s: &Segment) -> Bytes {
    let body: usize = s.entries.iter().map(entry_encoded_len).sum();
    let mut out = BytesMut::with_capacity(header_len(&s.node) + body + TRAILER_LEN);
    out.put_slice(SEGMENT_MAGIC);
    out.put_u16(SEGMENT_VERSION);
    put_string_u16(&mut out, s.node.as_str());
    out.put_u64(s.epoch.get());
    out.put_u64(s.seq.get());
    for e in &s.entries {
        put_entry(&mut out, e);
    }
    out.put_slice(TRAILER_MAGIC);
    out.put_u32(u32_len(s.entries.len()));
    let crc = crc32c::crc32c(&out);
    out.put_u32(crc);
    out.freeze()
}

fn put_entry(out: &mut BytesMut, e: &WalEntry) {
    let start = out.len();
    let len = entry_encoded_len(e) - 8; // minus the length and CRC fields
    out.put_u32(u32_len(len));
    out.put_u64(e.stream.topic.get());
    out.put_u32(e.stream.partition);
    out.put_u64(e.stream_epoch.get());
    out.put_u64(e.base_offset.get());
    out.put_u32(e.record_count);
    out.put_i64(e.max_timestamp);
    match e.producer {
        None => out.put_u8(0),
        Some(p) => {
            out.put_u8(1);
            out.put_i64(p.producer_id);
            out.put_i16(p.producer_epoch);
            out.put_i32(p.base_sequence);
        }
    }
    put_len_prefixed_u32(out, &e.batch);
    let crc = crc32c::crc32c(&out[start..]);
    out.put_u32(crc);
}

/// Decodes a segment object stored at `key`, checking its magic, version,
/// trailer, whole-object CRC, each entry's CRC, and that each entry's batches
/// cover exactly its offsets.
pub fn decode_segment(key: &str, buf: &[u8]) -> Result<Segment> {
    let mut c = Cursor::new(key, buf);
    expect_magic(&mut c, SEGMENT_MAGIC, "WAL segment")?;
    expect_version(&mut c, SEGMENT_VERSION, "WAL segment")?;
    let entry_count = check_trailer(key, buf)?;
    let body = &buf[..buf.len() - TRAILER_LEN];
    let mut c = Cursor::at(key, &body[6..], 6);

    let node = NodeId(c.string_u16()?);
    let epoch = NodeEpoch(c.u64()?);
    let seq = SegmentSeq(c.u64()?);
    // Bound the count by the bytes before allocating for it.
    if entry_count as usize > c.remaining() / ENTRY_FIXED_LEN {
        return Err(FormatError::new(
            key,
            (buf.len() - 8) as u64,
            format!("entry count {entry_count} cannot fit in {} bytes", c.remaining()),
        ));
    }
    let mut entries = Vec::with_capacity(entry_count as usize);
    for _ in 0..entry_count {
        entries.push(decode_entry(&mut c)?);
    }
    c.expect_end()?;
    Ok(Segment {
        node,
        epoch,
        seq,
        entries,
    })
}

/// Checks the trailer magic and the whole-object CRC; returns the entry count.
fn check_trailer(key: &str, buf: &[u8]) -> Result<u32> {
    let min = 6 + 2 + 8 + 8 + TRAILER_LEN;
    if buf.len() < min {
        return Err(FormatError::new(
            key,
            buf.len() as u64,
            format!("truncated: a segment needs at least {min} bytes"),
        ));
    }
    let at = buf.len() - TRAILER_LEN;
    let mut c = Cursor::at(key, &buf[at..], at as u64);
    if c.bytes(4)? != TRAILER_MAGIC {
        return Err(c.error_at(at as u64, "trailer magic missing: segment truncated or overwritten"));
    }
    let count = c.u32()?;
    let stored = c.u32()?;
    let actual = crc32c::crc32c(&buf[..buf.len() - 4]);
    if stored != actual {
        return Err(c.error_at(
            (buf.len() - 4) as u64,
            format!("segment CRC mismatch: stored {stored:#010x}, computed {actual:#010x}"),
        ));
    }
    Ok(count)
}

fn decode_entry(c: &mut Cursor<'_>) -> Result<WalEntry> {
    let start = c.position();
    let framed = c.clone().rest();
    let len = c.u32()? as usize;
    let min = ENTRY_FIXED_LEN - 8;
    if len < min || len + 4 > c.remaining() {
        return Err(c.error_at(
            start,
            format!("entry length {len} outside {min}..={}", c.remaining().saturating_sub(4)),
        ));
    }
    let body = c.bytes(len)?;
    let mut e = Cursor::at(c.object(), body, start + 4);
    let stored = c.u32()?;
    let actual = crc32c::crc32c(&framed[..4 + len]);
    if stored != actual {
        return Err(c.error_at(
            start,
            format!("entry CRC mismatch: stored {stored:#010x}, computed {actual:#010x}"),
        ));
    }

    let stream = StreamId::new(TopicId(e.u64()?), e.u32()?);
    let stream_epoch = StreamEpoch(e.u64()?);
    let base_offset = Offset(e.u64()?);
    let record_count = e.u32()?;
    let max_timestamp = e.i64()?;
    let producer = decode_producer(&mut e)?;
    let batch_at = e.position();
    let batch = Bytes::copy_from_slice(e.len_prefixed_u32()?);
    e.expect_end()?;
    let entry = WalEntry {
        stream,
        stream_epoch,
        base_offset,
        record_count,
        max_timestamp,
        producer,
        batch,
    };
    check_batches(&e, batch_at + 4, &entry)?;
    Ok(entry)
}

fn decode_producer(e: &mut Cursor<'_>) -> Result<Option<ProducerInfo>> {
    let flag_at = e.position();
    match e.u8()? {
        0 => Ok(None),
        1 => Ok(Some(ProducerInfo {
            producer_id: e.i64()?,
            producer_epoch: e.i16()?,
            base_sequence: e.i32()?,
        })),
        other => Err(e.error_at(flag_at, format!("producer flag {other} is not 0 or 1"))),
    }
}

/// The entry's batches must be valid and cover exactly
/// `base_offset..end_offset()` with no gaps: recovery replays them at those
/// offsets, so a mismatch would silently renumber records.
fn check_batches(c: &Cursor<'_>, batch_at: u64, entry: &WalEntry) -> Result<()> {
    let mut next = entry.base_offset;
    for b in batch::batches(c.object(), &entry.batch) {
        let (info, _) = b.map_err(|err| FormatError {
            offset: batch_at + err.offset,
            ..err
        })?;
        if info.base_offset != next {
            return Err(c.error_at(
                batch_at,
                format!("batch starts at {} but {next} was expected", info.base_offset),
            ));
        }
        next = info.end_offset();
    }
    if next != entry.end_offset() {
        return Err(c.error_at(
            batch_at,
            format!("batches end at {next} but the entry says {}", entry.end_offset()),
        ));
    }
    Ok(())
}

fn expect_magic(c: &mut Cursor<'_>, magic: &[u8; 4], what: &str) -> Result<()> {
    let got = c.bytes(4)?;
    if got != magic {
        return Err(c.error_at(
            0,
            format!(
                "not a {what}: magic {:?}, expected {:?}",
                String::from_utf8_lossy(got),
                String::from_utf8_lossy(magic)
            ),
        ));
    }
    Ok(())
}

fn expect_version(c: &mut Cursor<'_>, known: u16, what: &str) -> Result<()> {
    let at = c.position();
    let version = c.u16()?;
    if version != known {
        return Err(c.error_at(
            at,
            format!("unsupported {what} version {version} (this build reads version {known})"),
        ));
    }
    Ok(())
}

/// Encodes a fence marker.
///
/// # Panics
/// If a node id exceeds 65535 bytes.
pub fn encode_fence_marker(f: &FenceMarker) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(FENCE_MAGIC);
    out.put_u16(FENCE_VERSION);
    put_string_u16(&mut out, f.fenced_node.as_str());
    out.put_u64(f.fenced_epoch.get());
    out.put_u64(f.seq.get());
    put_string_u16(&mut out, f.holder.as_str());
    out.put_u64(f.holder_epoch.get());
    out.put_u64(f.log_index.get());
    let crc = crc32c::crc32c(&out);
    out.put_u32(crc);
    out.freeze()
}

/// Decodes a fence marker stored at `key`.
pub fn decode_fence_marker(key: &str, buf: &[u8]) -> Result<FenceMarker> {
    let mut c = Cursor::new(key, buf);
    expect_magic(&mut c, FENCE_MAGIC, "fence marker")?;
    expect_version(&mut c, FENCE_VERSION, "fence marker")?;
    if buf.len() < 6 + 4 {
        return Err(c.error("truncated: fence marker has no CRC"));
    }
    let body_len = buf.len() - 4;
    let stored = u32::from_be_bytes(buf[body_len..].try_into().expect("4 bytes"));
    let actual = crc32c::crc32c(&buf[..body_len]);
    if stored != actual {
        return Err(c.error_at(
            body_len as u64,
            format!("fence marker CRC mismatch: stored {stored:#010x}, computed {actual:#010x}"),
        ));
    }
    let mut c = Cursor::at(key, &buf[6..body_len], 6);
    let marker = FenceMarker {
        fenced_node: NodeId(c.string_u16()?),
        fenced_epoch: NodeEpoch(c.u64()?),
        seq: SegmentSeq(c.u64()?),
        holder: NodeId(c.string_u16()?),
        holder_epoch: NodeEpoch(c.u64()?),
        log_index: LogIndex(c.u64()?),
    };
    c.expect_end()?;
    Ok(marker)
}

/// Decodes whatever is stored at a WAL key, by its magic.
pub fn decode_wal_object(key: &str, buf: &[u8]) -> Result<WalObject> {
    let magic = Cursor::new(key, buf).bytes(4)?;
    if magic == SEGMENT_MAGIC {
        decode_segment(key, buf).map(WalObject::Segment)
    } else if magic == FENCE_MAGIC {
        decode_fence_marker(key, buf).map(WalObject::Fence)
    } else {
        Err(FormatError::new(
            key,
            0,
            format!("not a WAL object: magic {:?}", String::from_utf8_lossy(magic)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{encode_batch, Record};
    use proptest::prelude::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn one_record_batch(base: u64, ts: i64) -> Bytes {
        let r = Record {
            timestamp_ms: ts,
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::from_static(b"v")),
            headers: vec![("h".into(), Some(Bytes::from_static(b"x")))],
        };
        encode_batch(Offset(base), &[r])
    }

    fn golden_segment() -> Segment {
        Segment {
            node: NodeId::new("n1"),
            epoch: NodeEpoch(3),
            seq: SegmentSeq(9),
            entries: vec![WalEntry {
                stream: StreamId::new(TopicId(7), 2),
                stream_epoch: StreamEpoch(4),
                base_offset: Offset(5),
                record_count: 1,
                max_timestamp: 1_000,
                producer: Some(ProducerInfo {
                    producer_id: 11,
                    producer_epoch: 1,
                    base_sequence: 0,
                }),
                batch: one_record_batch(5, 1_000),
            }],
        }
    }

    /// A segment with several entries, two batches in one entry, and one
    /// entry without a producer.
    fn sample_segment() -> Segment {
        let mut s = golden_segment();
        let two = [one_record_batch(6, 1), one_record_batch(7, 2)].concat();
        s.entries.push(WalEntry {
            stream: StreamId::new(TopicId(7), 2),
            stream_epoch: StreamEpoch(4),
            base_offset: Offset(6),
            record_count: 2,
            max_timestamp: 2,
            producer: None,
            batch: Bytes::from(two),
        });
        s.entries.push(WalEntry {
            stream: StreamId::new(TopicId(8), 0),
            stream_epoch: StreamEpoch(1),
            base_offset: Offset(0),
            record_count: 1,
            max_timestamp: 5,
            producer: None,
            batch: one_record_batch(0, 5),
        });
        s
    }

    fn sample_fence() -> FenceMarker {
        FenceMarker {
            fenced_node: NodeId::new("old"),
            fenced_epoch: NodeEpoch(2),
            seq: SegmentSeq(17),
            holder: NodeId::new("new"),
            holder_epoch: NodeEpoch(5),
            log_index: LogIndex(123),
        }
    }

    #[test]
    fn segment_round_trip() {
        let s = sample_segment();
        let buf = encode_segment(&s);
        assert_eq!(decode_segment("wal/k", &buf).unwrap(), s);
        assert_eq!(decode_wal_object("wal/k", &buf).unwrap(), WalObject::Segment(s));
        let empty = Segment {
            entries: vec![],
            ..golden_segment()
        };
        assert_eq!(decode_segment("k", &encode_segment(&empty)).unwrap(), empty);
    }

    #[test]
    fn entry_encoded_len_is_exact() {
        let s = sample_segment();
        let entries: usize = s.entries.iter().map(entry_encoded_len).sum();
        let buf = encode_segment(&s);
        assert_eq!(buf.len(), header_len(&s.node) + entries + TRAILER_LEN);
        assert_eq!(s.entries[1].end_offset(), Offset(8));
    }

    /// Expected bytes produced independently from the format description.
    #[test]
    fn segment_golden_bytes() {
        let expected = concat!(
            "534c5753",         // "SLWS"
            "0001",             // version 1
            "00026e31",         // node "n1"
            "0000000000000003", // epoch 3
            "0000000000000009", // seq 9
            "00000085",         // entry length 133
            "0000000000000007", // topic 7
            "00000002",         // partition 2
            "0000000000000004", // stream epoch 4
            "0000000000000005", // base offset 5
            "00000001",         // 1 record
            "00000000000003e8", // max timestamp 1000
            "01",               // has producer
            "000000000000000b", // producer id 11
            "0001",             // producer epoch 1
            "00000000",         // base sequence 0
            "0000004a",         // batch length 74
            "00000000000000050000003e000000000285d4936f00000000000000000000000003e8",
            "00000000000003e8ffffffffffffffffffffffffffff0000000118000000026b02760202680278",
            "d250790a", // entry CRC
            "534c5745", // "SLWE"
            "00000001", // 1 entry
            "20093dee", // segment CRC
        );
        assert_eq!(hex(&encode_segment(&golden_segment())), expected);
    }

    #[test]
    fn fence_golden_bytes_and_round_trip() {
        let f = sample_fence();
        let buf = encode_fence_marker(&f);
        let expected = concat!(
            "534c5746",         // "SLWF"
            "0001",             // version 1
            "00036f6c64",       // fenced node "old"
            "0000000000000002", // fenced epoch 2
            "0000000000000011", // seq 17
            "00036e6577",       // holder "new"
            "0000000000000005", // holder epoch 5
            "000000000000007b", // log index 123
            "7eab5f81",         // CRC
        );
        assert_eq!(hex(&buf), expected);
        assert_eq!(decode_fence_marker("k", &buf).unwrap(), f);
        assert_eq!(decode_wal_object("k", &buf).unwrap(), WalObject::Fence(f));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let seg = encode_segment(&sample_segment());
        let fence = encode_fence_marker(&sample_fence());
        for len in 0..seg.len() {
            assert!(decode_segment("k", &seg[..len]).is_err(), "segment {len}");
            assert!(decode_wal_object("k", &seg[..len]).is_err(), "object {len}");
        }
        for len in 0..fence.len() {
            assert!(decode_fence_marker("k", &fence[..len]).is_err(), "fence {len}");
            assert!(decode_wal_object("k", &fence[..len]).is_err(), "object {len}");
        }
    }

    #[test]
    fn every_bit_flip_is_detected() {
        for buf in [encode_segment(&sample_segment()), encode_fence_marker(&sample_fence())] {
            for byte in 0..buf.len() {
                for bit in 0..8 {
                    let mut bad = buf.to_vec();
                    bad[byte] ^= 1 << bit;
                    assert!(
                        decode_wal_object("k", &bad).is_err(),
                        "flip of byte {byte} bit {bit} went unnoticed"
                    );
                }
            }
        }
    }

    #[test]
    fn errors_name_key_and_offset() {
        let mut buf = encode_segment(&sample_segment()).to_vec();
        let at = buf.len() - 1;
        buf[at] ^= 1;
        let err = decode_segment("wal/n1/e3/9", &buf).unwrap_err();
        assert_eq!(err.object, "wal/n1/e3/9");
        assert_eq!(err.offset, (buf.len() - 4) as u64);
        assert!(err.reason.contains("CRC"), "{err}");
    }

    #[test]
    fn unknown_versions_are_named() {
        let mut seg = encode_segment(&sample_segment()).to_vec();
        seg[4..6].copy_from_slice(&7u16.to_be_bytes());
        let err = decode_wal_object("k", &seg).unwrap_err();
        assert_eq!(err.offset, 4);
        assert!(err.reason.contains("version 7"), "{err}");

        let mut fence = encode_fence_marker(&sample_fence()).to_vec();
        fence[4..6].copy_from_slice(&2u16.to_be_bytes());
        let err = decode_wal_object("k", &fence).unwrap_err();
        assert!(err.reason.contains("fence marker version 2"), "{err}");
    }

    #[test]
    fn unknown_magic_is_refused() {
        let err = decode_wal_object("k", b"SLDOxxxxxxxx").unwrap_err();
        assert!(err.reason.contains("not a WAL object"), "{err}");
        let fence = encode_fence_marker(&sample_fence());
        assert!(decode_segment("k", &fence)
            .unwrap_err()
            .reason
            .contains("not a WAL segment"));
    }

    #[test]
    fn entries_must_match_their_batches() {
        let mut s = golden_segment();
        s.entries[0].record_count = 2;
        let err = decode_segment("k", &encode_segment(&s)).unwrap_err();
        assert!(err.reason.contains("batches end at @6"), "{err}");

        let mut s = golden_segment();
        s.entries[0].base_offset = Offset(4);
        let err = decode_segment("k", &encode_segment(&s)).unwrap_err();
        assert!(err.reason.contains("batch starts at @5"), "{err}");

        let mut s = golden_segment();
        s.entries[0].batch = Bytes::from_static(b"not a batch");
        assert!(decode_segment("k", &encode_segment(&s)).is_err());
    }

    #[test]
    fn huge_entry_count_is_bounded_before_allocating() {
        let mut buf = encode_segment(&golden_segment()).to_vec();
        let n = buf.len();
        buf[n - 8..n - 4].copy_from_slice(&u32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&buf[..n - 4]);
        buf[n - 4..].copy_from_slice(&crc.to_be_bytes());
        let err = decode_segment("k", &buf).unwrap_err();
        assert!(err.reason.contains("cannot fit"), "{err}");
    }

    proptest! {
        #[test]
        fn prop_random_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_wal_object("p", &buf);
            let _ = decode_segment("p", &buf);
            let _ = decode_fence_marker("p", &buf);
        }

        /// Garbage behind a valid magic, version and CRC reaches the field
        /// decoders rather than stopping at the checksum.
        #[test]
        fn prop_resigned_garbage_never_panics(
            fence in any::<bool>(),
            body in proptest::collection::vec(any::<u8>(), 0..300),
            count in any::<u32>(),
        ) {
            let mut buf = Vec::new();
            if fence {
                buf.extend_from_slice(FENCE_MAGIC);
                buf.put_u16(FENCE_VERSION);
                buf.extend_from_slice(&body);
            } else {
                buf.extend_from_slice(SEGMENT_MAGIC);
                buf.put_u16(SEGMENT_VERSION);
                buf.extend_from_slice(&body);
                buf.extend_from_slice(TRAILER_MAGIC);
                buf.put_u32(count % 4);
            }
            let crc = crc32c::crc32c(&buf);
            buf.put_u32(crc);
            let _ = decode_wal_object("p", &buf);
        }

        #[test]
        fn prop_round_trip(
            node in "[a-z0-9.-]{1,20}",
            epoch in any::<u64>(),
            seq in any::<u64>(),
            bases in proptest::collection::vec((0u64..1 << 40, any::<u32>(), any::<Option<(i64, i16, i32)>>()), 0..5),
        ) {
            let entries = bases.into_iter().map(|(base, partition, producer)| WalEntry {
                stream: StreamId::new(TopicId(base / 3), partition),
                stream_epoch: StreamEpoch(base / 7),
                base_offset: Offset(base),
                record_count: 1,
                max_timestamp: base as i64,
                producer: producer.map(|(producer_id, producer_epoch, base_sequence)| ProducerInfo {
                    producer_id,
                    producer_epoch,
                    base_sequence,
                }),
                batch: one_record_batch(base, base as i64),
            }).collect();
            let s = Segment { node: NodeId(node), epoch: NodeEpoch(epoch), seq: SegmentSeq(seq), entries };
            prop_assert_eq!(decode_segment("p", &encode_segment(&s)).unwrap(), s);
        }
    }
}
