//! Data objects: many streams' records compacted out of the WAL into one
//! object, one contiguous *chunk* per stream range.
//!
//! Layout (big-endian):
//!
//! ```text
//! chunk bytes      back to back from byte 0; each chunk is RecordBatch v2
//!                  batches concatenated
//! footer           "SLDF" | version u16 = 1 | chunk count u32
//!                  | per chunk: topic u64 | partition u32 | base offset u64
//!                    | end offset u64 | byte start u64 | byte end u64
//!                    | max timestamp i64 | record count u64 | crc u32
//!                  | CRC-32C u32 of the footer bytes before it
//! tail (8 bytes)   footer length u32 (from "SLDF" through the footer CRC)
//!                  | "SLDO"
//! ```
//!
//! The fixed-size tail lets a reader fetch the last few KiB of an object,
//! find the footer, and then issue ranged GETs for single chunks, verifying
//! each with its own CRC ([`verify_chunk`]) without reading the rest.

use crate::format::{u32_len, Cursor, FormatError, Result};
use crate::ids::{Offset, StreamId, TopicId};
use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

pub const FOOTER_MAGIC: &[u8; 4] = b"SLDF";
pub const TAIL_MAGIC: &[u8; 4] = b"SLDO";
pub const FOOTER_VERSION: u16 = 1;
/// Size of the tail: footer length and magic.
pub const TAIL_LEN: usize = 8;
/// Footer bytes besides the directory: magic, version, count and CRC.
const FOOTER_FIXED_LEN: usize = 4 + 2 + 4 + 4;
/// Size of one directory entry.
const DIR_ENTRY_LEN: usize = 8 + 4 + 8 + 8 + 8 + 8 + 8 + 8 + 4;

/// Where one stream range lives in a data object, and how to check it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkMeta {
    pub stream: StreamId,
    pub base_offset: Offset,
    /// Offset after the chunk's last record.
    pub end_offset: Offset,
    pub byte_start: u64,
    pub byte_end: u64,
    pub max_timestamp: i64,
    pub record_count: u64,
    /// CRC-32C of `object[byte_start..byte_end]`.
    pub crc: u32,
}

impl ChunkMeta {
    /// Length of the chunk in bytes.
    pub fn byte_len(&self) -> u64 {
        self.byte_end - self.byte_start
    }
}

/// Accumulates chunks, then appends the footer.
#[derive(Debug, Default)]
pub struct DataObjectBuilder {
    data: BytesMut,
    chunks: Vec<ChunkMeta>,
}

impl DataObjectBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a chunk for `stream` holding `base_offset..end_offset`, made of
    /// `parts` concatenated (typically batches taken from WAL entries).
    ///
    /// # Panics
    /// If `base_offset > end_offset`: a caller bug that would otherwise only
    /// surface when a reader rejects the object.
    pub fn add_chunk(
        &mut self,
        stream: StreamId,
        base_offset: Offset,
        end_offset: Offset,
        max_timestamp: i64,
        record_count: u64,
        parts: &[Bytes],
    ) {
        assert!(
            base_offset <= end_offset,
            "chunk base {base_offset} is after its end {end_offset}"
        );
        let byte_start = self.data.len() as u64;
        let mut crc = 0;
        for part in parts {
            crc = crc32c::crc32c_append(crc, part);
            self.data.put_slice(part);
        }
        self.chunks.push(ChunkMeta {
            stream,
            base_offset,
            end_offset,
            byte_start,
            byte_end: self.data.len() as u64,
            max_timestamp,
            record_count,
            crc,
        });
    }

    /// Chunk bytes added so far (excluding the footer still to come).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True if no chunk has been added.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// The finished object and its directory.
    ///
    /// # Panics
    /// If there are more than `u32::MAX` chunks or the footer exceeds 4 GiB.
    pub fn finish(self) -> (Bytes, Vec<ChunkMeta>) {
        let Self { mut data, chunks } = self;
        let footer_start = data.len();
        data.reserve(FOOTER_FIXED_LEN + DIR_ENTRY_LEN * chunks.len() + TAIL_LEN);
        data.put_slice(FOOTER_MAGIC);
        data.put_u16(FOOTER_VERSION);
        data.put_u32(u32_len(chunks.len()));
        for c in &chunks {
            put_dir_entry(&mut data, c);
        }
        let crc = crc32c::crc32c(&data[footer_start..]);
        data.put_u32(crc);
        data.put_u32(u32_len(data.len() - footer_start));
        data.put_slice(TAIL_MAGIC);
        (data.freeze(), chunks)
    }
}

fn put_dir_entry(out: &mut BytesMut, c: &ChunkMeta) {
    out.put_u64(c.stream.topic.get());
    out.put_u32(c.stream.partition);
    out.put_u64(c.base_offset.get());
    out.put_u64(c.end_offset.get());
    out.put_u64(c.byte_start);
    out.put_u64(c.byte_end);
    out.put_i64(c.max_timestamp);
    out.put_u64(c.record_count);
    out.put_u32(c.crc);
}

/// Reads and validates the directory of the whole data object `object`
/// stored at `key`: tail, footer magic, version, CRC, and that every chunk
/// lies inside the data area, after the previous one, with base <= end.
/// Chunk bytes themselves are not checked here; see [`verify_chunk`].
pub fn decode_footer(key: &str, object: &[u8]) -> Result<Vec<ChunkMeta>> {
    let (data_len, footer) = locate_footer(key, object)?;
    let mut c = Cursor::at(key, footer, data_len as u64);
    expect_header(&mut c)?;
    check_footer_crc(key, data_len as u64, footer)?;

    let count_at = c.position();
    let count = c.u32()? as usize;
    let dir_len = footer.len() - FOOTER_FIXED_LEN;
    if !dir_len.is_multiple_of(DIR_ENTRY_LEN) || count != dir_len / DIR_ENTRY_LEN {
        return Err(c.error_at(
            count_at,
            format!("chunk count {count} does not match a {dir_len}-byte directory"),
        ));
    }
    let mut chunks = Vec::with_capacity(count);
    let mut prev_end = 0;
    for _ in 0..count {
        let at = c.position();
        let chunk = read_dir_entry(&mut c)?;
        check_chunk_range(&c, at, &chunk, prev_end, data_len as u64)?;
        prev_end = chunk.byte_end;
        chunks.push(chunk);
    }
    c.u32()?; // the CRC, already checked
    c.expect_end()?;
    Ok(chunks)
}

/// Finds the footer from the tail; returns the data area length and the
/// footer bytes.
fn locate_footer<'a>(key: &str, object: &'a [u8]) -> Result<(usize, &'a [u8])> {
    if object.len() < TAIL_LEN {
        return Err(FormatError::new(
            key,
            0,
            format!("truncated: {} bytes cannot hold a data object tail", object.len()),
        ));
    }
    let tail_at = object.len() - TAIL_LEN;
    let mut t = Cursor::at(key, &object[tail_at..], tail_at as u64);
    let footer_len = t.u32()? as usize;
    if t.bytes(4)? != TAIL_MAGIC {
        return Err(t.error_at(
            (tail_at + 4) as u64,
            "tail magic missing: not a data object, or truncated",
        ));
    }
    if footer_len < FOOTER_FIXED_LEN || footer_len > tail_at {
        return Err(t.error_at(
            tail_at as u64,
            format!("footer length {footer_len} outside {FOOTER_FIXED_LEN}..={tail_at}"),
        ));
    }
    let data_len = tail_at - footer_len;
    Ok((data_len, &object[data_len..tail_at]))
}

fn expect_header(c: &mut Cursor<'_>) -> Result<()> {
    let at = c.position();
    if c.bytes(4)? != FOOTER_MAGIC {
        return Err(c.error_at(at, "footer magic missing"));
    }
    let version_at = c.position();
    let version = c.u16()?;
    if version != FOOTER_VERSION {
        return Err(c.error_at(
            version_at,
            format!("unsupported data object version {version} (this build reads version {FOOTER_VERSION})"),
        ));
    }
    Ok(())
}

/// `footer` starts at byte `footer_at` of the object and ends with its CRC.
fn check_footer_crc(key: &str, footer_at: u64, footer: &[u8]) -> Result<()> {
    let body = footer.len() - 4;
    let stored = u32::from_be_bytes(footer[body..].try_into().expect("4 bytes"));
    let actual = crc32c::crc32c(&footer[..body]);
    if stored != actual {
        return Err(FormatError::new(
            key,
            footer_at + body as u64,
            format!("footer CRC mismatch: stored {stored:#010x}, computed {actual:#010x}"),
        ));
    }
    Ok(())
}

fn read_dir_entry(c: &mut Cursor<'_>) -> Result<ChunkMeta> {
    Ok(ChunkMeta {
        stream: StreamId::new(TopicId(c.u64()?), c.u32()?),
        base_offset: Offset(c.u64()?),
        end_offset: Offset(c.u64()?),
        byte_start: c.u64()?,
        byte_end: c.u64()?,
        max_timestamp: c.i64()?,
        record_count: c.u64()?,
        crc: c.u32()?,
    })
}

/// A chunk must lie inside the data area, after the previous chunk, and
/// cover a non-negative offset range.
fn check_chunk_range(c: &Cursor<'_>, at: u64, chunk: &ChunkMeta, prev_end: u64, data_len: u64) -> Result<()> {
    if chunk.base_offset > chunk.end_offset {
        return Err(c.error_at(
            at,
            format!(
                "chunk of {} starts at {} after its end {}",
                chunk.stream, chunk.base_offset, chunk.end_offset
            ),
        ));
    }
    if chunk.byte_start < prev_end || chunk.byte_start > chunk.byte_end || chunk.byte_end > data_len {
        return Err(c.error_at(
            at,
            format!(
                "chunk of {} has bytes {}..{}, outside {prev_end}..{data_len} or overlapping",
                chunk.stream, chunk.byte_start, chunk.byte_end
            ),
        ));
    }
    Ok(())
}

/// Checks that `bytes`, fetched as `meta.byte_start..meta.byte_end` of the
/// object at `key`, have the right length and CRC.
pub fn verify_chunk(key: &str, meta: &ChunkMeta, bytes: &[u8]) -> Result<()> {
    let expected = meta.byte_end.saturating_sub(meta.byte_start);
    if bytes.len() as u64 != expected {
        return Err(FormatError::new(
            key,
            meta.byte_start,
            format!("chunk of {} is {} bytes, expected {expected}", meta.stream, bytes.len()),
        ));
    }
    let actual = crc32c::crc32c(bytes);
    if actual != meta.crc {
        return Err(FormatError::new(
            key,
            meta.byte_start,
            format!(
                "chunk of {} CRC mismatch: directory says {:#010x}, computed {actual:#010x}",
                meta.stream, meta.crc
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{batches, encode_batch, Record};
    use proptest::prelude::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn stream(t: u64, p: u32) -> StreamId {
        StreamId::new(TopicId(t), p)
    }

    fn golden_object() -> (Bytes, Vec<ChunkMeta>) {
        let mut b = DataObjectBuilder::new();
        assert!(b.is_empty());
        b.add_chunk(
            stream(1, 0),
            Offset(0),
            Offset(3),
            9,
            3,
            &[Bytes::from_static(b"ab"), Bytes::from_static(b"c")],
        );
        b.add_chunk(
            stream(2, 1),
            Offset(10),
            Offset(12),
            -1,
            2,
            &[Bytes::from_static(b"de")],
        );
        assert_eq!(b.len(), 5);
        assert!(!b.is_empty());
        b.finish()
    }

    fn record(ts: i64) -> Record {
        Record {
            timestamp_ms: ts,
            key: None,
            value: Some(Bytes::from(format!("value-{ts}"))),
            headers: vec![],
        }
    }

    /// An object whose chunks are real batches, as compaction writes them.
    fn batch_object() -> (Bytes, Vec<ChunkMeta>) {
        let mut b = DataObjectBuilder::new();
        let a1 = encode_batch(Offset(0), &[record(1), record(2)]);
        let a2 = encode_batch(Offset(2), &[record(3)]);
        let b1 = encode_batch(Offset(40), &[record(7)]);
        b.add_chunk(stream(3, 0), Offset(0), Offset(3), 3, 3, &[a1, a2]);
        b.add_chunk(stream(3, 1), Offset(40), Offset(41), 7, 1, &[b1]);
        b.finish()
    }

    #[test]
    fn round_trip_and_verify_chunks() {
        let (object, metas) = batch_object();
        assert_eq!(decode_footer("d", &object).unwrap(), metas);
        for m in &metas {
            let bytes = &object[m.byte_start as usize..m.byte_end as usize];
            verify_chunk("d", m, bytes).unwrap();
            let infos: Vec<_> = batches("d", bytes).map(Result::unwrap).collect();
            assert_eq!(infos.first().unwrap().0.base_offset, m.base_offset);
            assert_eq!(infos.last().unwrap().0.end_offset(), m.end_offset);
        }
        let (empty, none) = DataObjectBuilder::new().finish();
        assert!(none.is_empty());
        assert_eq!(decode_footer("d", &empty).unwrap(), vec![]);
    }

    /// Expected bytes produced independently from the format description.
    #[test]
    fn golden_bytes() {
        let (object, metas) = golden_object();
        let expected = concat!(
            "6162636465", // chunk bytes "abc" then "de"
            "534c4446",   // "SLDF"
            "0001",       // version 1
            "00000002",   // 2 chunks
            // t1/p0, offsets 0..3, bytes 0..3, max ts 9, 3 records, crc
            "0000000000000001",
            "00000000",
            "0000000000000000",
            "0000000000000003",
            "0000000000000000",
            "0000000000000003",
            "0000000000000009",
            "0000000000000003",
            "364b3fb7",
            // t2/p1, offsets 10..12, bytes 3..5, max ts -1, 2 records, crc
            "0000000000000002",
            "00000001",
            "000000000000000a",
            "000000000000000c",
            "0000000000000003",
            "0000000000000005",
            "ffffffffffffffff",
            "0000000000000002",
            "6b40b476",
            "770549a0", // footer CRC
            "0000008e", // footer length 142
            "534c444f", // "SLDO"
        );
        assert_eq!(hex(&object), expected);
        assert_eq!(metas[1].byte_len(), 2);
        assert_eq!(metas[0].crc, crc32c::crc32c(b"abc"));
    }

    #[test]
    fn chunk_meta_serializes() {
        let (_, metas) = golden_object();
        let json = serde_json::to_string(&metas[0]).unwrap();
        assert_eq!(serde_json::from_str::<ChunkMeta>(&json).unwrap(), metas[0]);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let (object, _) = batch_object();
        for len in 0..object.len() {
            assert!(decode_footer("d", &object[..len]).is_err(), "accepted {len} bytes");
        }
        let (_, metas) = batch_object();
        let m = &metas[0];
        let chunk = &object[m.byte_start as usize..m.byte_end as usize];
        for len in 0..chunk.len() {
            assert!(verify_chunk("d", m, &chunk[..len]).is_err());
        }
    }

    #[test]
    fn every_footer_bit_flip_is_detected() {
        let (object, metas) = golden_object();
        let data_len = metas.last().unwrap().byte_end as usize;
        for byte in data_len..object.len() {
            for bit in 0..8 {
                let mut bad = object.to_vec();
                bad[byte] ^= 1 << bit;
                assert!(
                    decode_footer("d", &bad).is_err(),
                    "flip of byte {byte} bit {bit} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn every_chunk_bit_flip_is_detected() {
        let (object, metas) = batch_object();
        for m in &metas {
            for byte in m.byte_start as usize..m.byte_end as usize {
                for bit in 0..8 {
                    let mut bad = object.to_vec();
                    bad[byte] ^= 1 << bit;
                    let chunk = &bad[m.byte_start as usize..m.byte_end as usize];
                    let err = verify_chunk("data/x", m, chunk).unwrap_err();
                    assert_eq!(err.object, "data/x");
                    assert_eq!(err.offset, m.byte_start);
                }
            }
        }
    }

    /// Rewrites the directory through `edit`, re-signing the footer, so the
    /// range checks behind the CRC are exercised.
    fn with_directory(edit: impl FnOnce(&mut Vec<ChunkMeta>)) -> Vec<u8> {
        let (object, mut metas) = golden_object();
        edit(&mut metas);
        let data = &object[..5];
        let mut out = BytesMut::from(data);
        out.put_slice(FOOTER_MAGIC);
        out.put_u16(FOOTER_VERSION);
        out.put_u32(metas.len() as u32);
        for m in &metas {
            put_dir_entry(&mut out, m);
        }
        let crc = crc32c::crc32c(&out[5..]);
        out.put_u32(crc);
        let footer_len = (out.len() - 5) as u32;
        out.put_u32(footer_len);
        out.put_slice(TAIL_MAGIC);
        out.to_vec()
    }

    #[test]
    fn rejects_bad_ranges_behind_a_valid_crc() {
        // (case, index of the chunk the error must point at, edit)
        type Edit = Box<dyn FnOnce(&mut Vec<ChunkMeta>)>;
        let cases: [(&str, u64, Edit); 4] = [
            ("beyond data", 1, Box::new(|m| m[1].byte_end = 6)),
            ("overlap", 1, Box::new(|m| m[1].byte_start = 2)),
            ("inverted bytes", 0, Box::new(|m| m[0].byte_start = 4)),
            ("inverted offsets", 0, Box::new(|m| m[0].base_offset = Offset(4))),
        ];
        for (name, index, edit) in cases {
            let err = decode_footer("d", &with_directory(edit)).unwrap_err();
            let entry_at = 5 + 10 + index * DIR_ENTRY_LEN as u64;
            assert_eq!(err.offset, entry_at, "{name}: {err}");
        }
        // Sanity: the helper itself produces a valid object.
        assert!(decode_footer("d", &with_directory(|_| {})).is_ok());
    }

    #[test]
    fn rejects_unknown_version_and_bad_tail() {
        let (object, _) = golden_object();
        let mut bad = object.to_vec();
        bad[5 + 4..5 + 6].copy_from_slice(&9u16.to_be_bytes());
        let err = decode_footer("d", &bad).unwrap_err();
        assert!(err.reason.contains("data object version 9"), "{err}");
        assert_eq!(err.offset, 9);

        let mut bad = object.to_vec();
        let n = bad.len();
        bad[n - 8..n - 4].copy_from_slice(&u32::MAX.to_be_bytes());
        let err = decode_footer("d", &bad).unwrap_err();
        assert!(err.reason.contains("footer length"), "{err}");

        let err = decode_footer("d", b"hello, world").unwrap_err();
        assert!(err.reason.contains("tail magic"), "{err}");
    }

    #[test]
    fn verify_chunk_checks_length() {
        let (object, metas) = golden_object();
        let err = verify_chunk("d", &metas[0], &object[0..4]).unwrap_err();
        assert!(err.reason.contains("4 bytes, expected 3"), "{err}");
    }

    #[test]
    #[should_panic(expected = "after its end")]
    fn inverted_chunk_is_a_caller_bug() {
        DataObjectBuilder::new().add_chunk(stream(1, 0), Offset(2), Offset(1), 0, 0, &[]);
    }

    proptest! {
        #[test]
        fn prop_random_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = decode_footer("p", &buf);
        }

        /// Garbage directories behind a valid tail, header and CRC.
        #[test]
        fn prop_resigned_garbage_never_panics(
            data in proptest::collection::vec(any::<u8>(), 0..50),
            count in 0u32..4,
            dir in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut buf = data.clone();
            buf.put_slice(FOOTER_MAGIC);
            buf.put_u16(FOOTER_VERSION);
            buf.put_u32(count);
            buf.extend_from_slice(&dir);
            let crc = crc32c::crc32c(&buf[data.len()..]);
            buf.put_u32(crc);
            let footer_len = (buf.len() - data.len()) as u32;
            buf.put_u32(footer_len);
            buf.put_slice(TAIL_MAGIC);
            let _ = decode_footer("p", &buf);
        }

        #[test]
        fn prop_round_trip(chunks in proptest::collection::vec(
            (any::<u64>(), any::<u32>(), 0u64..1 << 60, 0u64..1000, any::<i64>(),
             proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 0..3)),
            0..6,
        )) {
            let mut b = DataObjectBuilder::new();
            for (t, p, base, n, ts, parts) in &chunks {
                let parts: Vec<Bytes> = parts.iter().cloned().map(Bytes::from).collect();
                b.add_chunk(stream(*t, *p), Offset(*base), Offset(base + n), *ts, *n, &parts);
            }
            let (object, metas) = b.finish();
            prop_assert_eq!(decode_footer("p", &object).unwrap(), metas.clone());
            for m in &metas {
                verify_chunk("p", m, &object[m.byte_start as usize..m.byte_end as usize]).unwrap();
            }
        }
    }
}
