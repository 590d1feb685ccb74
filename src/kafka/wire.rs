//! Bounded primitives of the Kafka wire format.
//!
//! Every length and count read from the wire is checked against the bytes
//! that remain before anything is allocated, so a lying frame costs at most
//! its own size. Nothing here panics on any input.

use bytes::{BufMut, Bytes, BytesMut};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed request at byte {at}: {message}")]
pub struct DecodeError {
    pub at: usize,
    pub message: String,
}

pub type DecodeResult<T> = Result<T, DecodeError>;

/// A cursor over one request body.
pub struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    pub fn new(buf: Bytes) -> Self {
        Self { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    fn error<T>(&self, message: impl Into<String>) -> DecodeResult<T> {
        Err(DecodeError {
            at: self.pos,
            message: message.into(),
        })
    }

    fn take(&mut self, n: usize) -> DecodeResult<Bytes> {
        if n > self.remaining() {
            return self.error(format!("needs {n} bytes, {} left", self.remaining()));
        }
        let b = self.buf.slice(self.pos..self.pos + n);
        self.pos += n;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> DecodeResult<[u8; N]> {
        let b = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(&b);
        Ok(a)
    }

    pub fn i8(&mut self) -> DecodeResult<i8> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    pub fn bool(&mut self) -> DecodeResult<bool> {
        Ok(self.i8()? != 0)
    }

    pub fn i16(&mut self) -> DecodeResult<i16> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    pub fn i32(&mut self) -> DecodeResult<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub fn i64(&mut self) -> DecodeResult<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An unsigned varint of at most 5 bytes.
    pub fn uvarint(&mut self) -> DecodeResult<u32> {
        let mut value: u64 = 0;
        for i in 0..5 {
            let b = self.array::<1>()?[0];
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return u32::try_from(value).or_else(|_| self.error("varint overflows u32"));
            }
        }
        self.error("varint longer than 5 bytes")
    }

    fn utf8(&self, b: Bytes) -> DecodeResult<String> {
        String::from_utf8(b.to_vec()).or_else(|_| self.error("string is not UTF-8"))
    }

    /// An INT16-length string; `None` for length -1.
    pub fn nullable_string(&mut self) -> DecodeResult<Option<String>> {
        let len = self.i16()?;
        if len == -1 {
            return Ok(None);
        }
        let len = usize::try_from(len).or_else(|_| self.error(format!("string length {len}")))?;
        let b = self.take(len)?;
        self.utf8(b).map(Some)
    }

    pub fn string(&mut self) -> DecodeResult<String> {
        self.nullable_string()?
            .map_or_else(|| self.error("null where a string is required"), Ok)
    }

    /// A COMPACT_NULLABLE_STRING (varint length + 1, 0 = null).
    pub fn compact_nullable_string(&mut self) -> DecodeResult<Option<String>> {
        let n = self.uvarint()? as usize;
        if n == 0 {
            return Ok(None);
        }
        let b = self.take(n - 1)?;
        self.utf8(b).map(Some)
    }

    /// A COMPACT_STRING: a compact nullable string that must not be null.
    pub fn compact_string(&mut self) -> DecodeResult<String> {
        self.compact_nullable_string()?
            .map_or_else(|| self.error("null where a string is required"), Ok)
    }

    /// A COMPACT_ARRAY count (varint count + 1, 0 = null), bounded by the
    /// bytes left like [`Reader::nullable_array_len`].
    pub fn compact_nullable_array_len(&mut self, min_element: usize) -> DecodeResult<Option<usize>> {
        match self.uvarint()? {
            0 => Ok(None),
            n => self.bounded_count(i64::from(n) - 1, min_element).map(Some),
        }
    }

    /// INT32-length bytes; `None` for length -1. The bytes share the frame.
    /// Exactly `n` bytes (already bounded by the caller's length check).
    pub fn bytes_exact(&mut self, n: usize) -> DecodeResult<Bytes> {
        self.take(n)
    }

    pub fn nullable_bytes(&mut self) -> DecodeResult<Option<Bytes>> {
        let len = self.i32()?;
        if len == -1 {
            return Ok(None);
        }
        let len = usize::try_from(len).or_else(|_| self.error(format!("bytes length {len}")))?;
        self.take(len).map(Some)
    }

    /// An INT32 array count, bounded by the bytes left: each element takes
    /// at least `min_element` bytes. `None` for a null array (-1).
    pub fn nullable_array_len(&mut self, min_element: usize) -> DecodeResult<Option<usize>> {
        let n = self.i32()?;
        if n == -1 {
            return Ok(None);
        }
        self.bounded_count(i64::from(n), min_element).map(Some)
    }

    pub fn array_len(&mut self, min_element: usize) -> DecodeResult<usize> {
        self.nullable_array_len(min_element)?
            .map_or_else(|| self.error("null where an array is required"), Ok)
    }

    fn bounded_count(&self, n: i64, min_element: usize) -> DecodeResult<usize> {
        let n = usize::try_from(n).or_else(|_| self.error(format!("array count {n}")))?;
        if n.saturating_mul(min_element.max(1)) > self.remaining() {
            return self.error(format!(
                "array of {n} elements cannot fit in {} bytes",
                self.remaining()
            ));
        }
        Ok(n)
    }

    /// Skip a tagged-field section (flexible versions).
    pub fn tagged_fields(&mut self) -> DecodeResult<()> {
        let n = self.uvarint()? as usize;
        let n = self.bounded_count(n as i64, 2)?;
        for _ in 0..n {
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }

    /// Requests must be consumed exactly.
    pub fn expect_end(&self) -> DecodeResult<()> {
        if self.remaining() != 0 {
            return self.error(format!("{} unexpected trailing bytes", self.remaining()));
        }
        Ok(())
    }
}

/// Response encoding. The message is `shared` (in order) followed by
/// `buf`: [`Writer::bytes_shared`] moves what `buf` holds so far to
/// `shared`, then appends large byte runs there as they are, without a copy.
#[derive(Default)]
pub struct Writer {
    pub buf: BytesMut,
    shared: Vec<Bytes>,
}

/// Runs at least this long are sent as they are by [`Writer::bytes_shared`];
/// shorter ones are copied, so a response has few parts.
pub const SHARE_AT: usize = 1024;

/// An encoded message: byte runs to send in order. A Fetch answer's record
/// batches stay the slices of stored data they were read as.
#[derive(Debug, Default, Clone)]
pub struct Encoded {
    parts: Vec<Bytes>,
}

impl Encoded {
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(|p| p.is_empty())
    }
    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }
    /// One contiguous copy (none when there is a single part).
    pub fn into_bytes(mut self) -> Bytes {
        if self.parts.len() <= 1 {
            return self.parts.pop().unwrap_or_default();
        }
        let mut all = BytesMut::with_capacity(self.len());
        for p in &self.parts {
            all.extend_from_slice(p);
        }
        all.freeze()
    }
}

impl From<Bytes> for Encoded {
    fn from(b: Bytes) -> Self {
        Encoded { parts: vec![b] }
    }
}

impl Writer {
    /// The whole message.
    pub fn finish(mut self) -> Encoded {
        if !self.buf.is_empty() || self.shared.is_empty() {
            self.shared.push(self.buf.freeze());
        }
        Encoded { parts: self.shared }
    }
    /// [`Writer::bytes_parts`], sharing each part of [`SHARE_AT`] bytes or
    /// more instead of copying it.
    pub fn bytes_shared(&mut self, parts: &[Bytes]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.i32(i32::try_from(len).unwrap_or(i32::MAX));
        self.share(parts);
    }
    /// [`Writer::bytes_shared`] as COMPACT_BYTES (varint length + 1), for
    /// flexible versions.
    pub fn compact_bytes_shared(&mut self, parts: &[Bytes]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.uvarint(u32::try_from(len + 1).unwrap_or(u32::MAX));
        self.share(parts);
    }
    fn share(&mut self, parts: &[Bytes]) {
        for p in parts {
            if p.len() >= SHARE_AT {
                if !self.buf.is_empty() {
                    self.shared.push(self.buf.split().freeze());
                }
                self.shared.push(p.clone());
            } else {
                self.buf.put_slice(p);
            }
        }
    }
    pub fn i8(&mut self, v: i8) {
        self.buf.put_i8(v);
    }
    pub fn bool(&mut self, v: bool) {
        self.buf.put_i8(v as i8);
    }
    pub fn i16(&mut self, v: i16) {
        self.buf.put_i16(v);
    }
    pub fn i32(&mut self, v: i32) {
        self.buf.put_i32(v);
    }
    pub fn i64(&mut self, v: i64) {
        self.buf.put_i64(v);
    }
    pub fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.buf.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.put_u8(v as u8);
    }
    /// An INT16-length string (truncated to i16::MAX bytes).
    pub fn string(&mut self, s: &str) {
        let b = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
        self.i16(b.len() as i16);
        self.buf.put_slice(b);
    }
    pub fn nullable_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.i16(-1),
        }
    }
    /// INT32-length bytes from several parts.
    pub fn bytes_parts(&mut self, parts: &[Bytes]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.i32(i32::try_from(len).unwrap_or(i32::MAX));
        for p in parts {
            self.buf.put_slice(p);
        }
    }
    pub fn array_len(&mut self, n: usize) {
        self.i32(i32::try_from(n).unwrap_or(i32::MAX));
    }
    pub fn compact_array_len(&mut self, n: usize) {
        self.uvarint(u32::try_from(n + 1).unwrap_or(u32::MAX));
    }
    /// A COMPACT_STRING (varint length + 1; truncated to i16::MAX bytes
    /// like [`Writer::string`]).
    pub fn compact_string(&mut self, s: &str) {
        let b = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
        self.uvarint(b.len() as u32 + 1);
        self.buf.put_slice(b);
    }
    pub fn compact_nullable_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.compact_string(s),
            None => self.uvarint(0),
        }
    }
    /// An empty tagged-field section.
    pub fn no_tagged_fields(&mut self) {
        self.uvarint(0);
    }

    /// A response body encoded by `kafka-protocol`'s generated code at
    /// `version`. It fails only for a value the version cannot carry (a
    /// string over 32 KiB, a field the version lacks set to a non-default);
    /// then nothing is written and the caller closes the connection, as
    /// for a request that does not decode.
    pub fn message<M: kafka_protocol::protocol::Encodable>(&mut self, m: &M, version: i16) -> DecodeResult<()> {
        let mut out = BytesMut::new();
        match m.encode(&mut out, version) {
            Ok(()) => {
                self.buf.put_slice(&out);
                Ok(())
            }
            Err(e) => Err(DecodeError {
                at: 0,
                message: format!("response not encodable at v{version}: {e}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shared_runs_keep_their_place_and_short_ones_are_copied() {
        use super::*;
        let big = Bytes::from(vec![7u8; SHARE_AT]);
        let small = Bytes::from_static(b"abc");
        let mut w = Writer::default();
        w.i16(1);
        w.bytes_shared(&[small.clone(), big.clone(), small.clone()]);
        w.i16(2);
        let mut copied = Writer::default();
        copied.i16(1);
        copied.bytes_parts(&[small.clone(), big.clone(), small]);
        copied.i16(2);
        let encoded = w.finish();
        assert_eq!(encoded.parts().len(), 3, "header, the shared run, the rest");
        assert_eq!(encoded.parts()[1].as_ptr(), big.as_ptr(), "not copied");
        assert_eq!(encoded.len(), copied.buf.len());
        assert_eq!(encoded.into_bytes(), copied.buf.freeze());
        assert!(Writer::default().finish().is_empty());
    }

    use super::*;

    #[test]
    fn generated_messages_are_written_at_their_version() {
        use kafka_protocol::messages::HeartbeatResponse;
        let resp = HeartbeatResponse::default()
            .with_error_code(27)
            .with_throttle_time_ms(5);
        let mut w = Writer::default();
        w.i8(1);
        w.message(&resp, 0).unwrap();
        assert_eq!(&w.buf[..], &[1, 0, 27], "v0: the error code only");
        let mut w = Writer::default();
        w.message(&resp, 4).unwrap();
        assert_eq!(
            &w.buf[..],
            &[0, 0, 0, 5, 0, 27, 0],
            "v4: throttle, error, tagged fields"
        );
        let long = kafka_protocol::messages::LeaveGroupResponse::default().with_members(vec![
            kafka_protocol::messages::leave_group_response::MemberResponse::default()
                .with_member_id(kafka_protocol::protocol::StrBytes::from_string("m".repeat(40_000))),
        ]);
        let mut w = Writer::default();
        assert!(w.message(&long, 3).is_err(), "a member id longer than an INT16 string");
        assert!(w.buf.is_empty(), "nothing written");
    }

    #[test]
    fn varints_round_trip_and_overlong_ones_are_refused() {
        for v in [0u32, 1, 127, 128, 300, 16_383, 16_384, u32::MAX] {
            let mut w = Writer::default();
            w.uvarint(v);
            let mut r = Reader::new(w.buf.freeze());
            assert_eq!(r.uvarint().unwrap(), v);
            r.expect_end().unwrap();
        }
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]));
        assert!(r.uvarint().is_err());
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff]));
        assert!(r.uvarint().is_err(), "truncated");
    }

    #[test]
    fn array_counts_are_bounded_by_the_bytes_left() {
        let mut r = Reader::new(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]));
        assert!(r.array_len(1).is_err(), "2^31 elements in 4 bytes");
        let mut r = Reader::new(Bytes::from_static(&[0, 0, 0, 2, 0, 0, 0, 0]));
        assert_eq!(r.array_len(2).unwrap(), 2);
        let mut r = Reader::new(Bytes::from_static(&[0, 0, 0, 2, 0, 0, 0, 0]));
        assert!(r.array_len(3).is_err());
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]));
        assert_eq!(r.nullable_array_len(4).unwrap(), None);
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xfe]));
        assert!(r.nullable_array_len(4).is_err(), "negative counts other than -1");
    }

    #[test]
    fn strings_and_bytes_are_bounded() {
        let mut r = Reader::new(Bytes::from_static(&[0, 5, b'a', b'b']));
        assert!(r.string().is_err());
        let mut r = Reader::new(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]));
        assert!(r.nullable_bytes().is_err());
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff]));
        assert_eq!(r.nullable_string().unwrap(), None);
        let mut r = Reader::new(Bytes::from_static(&[3, b'h', b'i']));
        assert_eq!(r.compact_nullable_string().unwrap().as_deref(), Some("hi"));
        let mut r = Reader::new(Bytes::from_static(&[1, 0x05, 0xff, 0xff, 0xff, 0x0f, 1]));
        assert!(r.tagged_fields().is_err(), "a tagged field claiming 4 GB");
    }

    #[test]
    fn compact_strings_and_arrays_round_trip_and_are_bounded() {
        let mut w = Writer::default();
        w.compact_string("hi");
        w.compact_nullable_string(None);
        w.compact_nullable_string(Some(""));
        w.compact_array_len(2);
        assert_eq!(&w.buf[..], &[3, b'h', b'i', 0, 1, 3]);
        let mut r = Reader::new(Bytes::from_static(&[3, b'h', b'i', 0, 1, 3, 0, 0]));
        assert_eq!(r.compact_string().unwrap(), "hi");
        assert_eq!(r.compact_nullable_string().unwrap(), None);
        assert_eq!(r.compact_string().unwrap(), "");
        assert_eq!(r.compact_nullable_array_len(1).unwrap(), Some(2));
        r.i16().unwrap();
        r.expect_end().unwrap();
        let mut r = Reader::new(Bytes::from_static(&[0]));
        assert_eq!(r.compact_nullable_array_len(1).unwrap(), None);
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0]));
        assert!(r.compact_nullable_array_len(1).is_err(), "4 billion elements in 1 byte");
        let mut r = Reader::new(Bytes::from_static(&[0x10, b'a']));
        assert!(r.compact_string().is_err(), "15 bytes claimed, 1 left");
        let mut r = Reader::new(Bytes::from_static(&[0]));
        assert!(r.compact_string().is_err(), "null where a string is required");
    }
}
