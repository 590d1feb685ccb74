//! Shared support for Sluice's binary codecs.
//!
//! Every object Sluice writes is read back by a process that did not write it,
//! possibly years later, possibly after a partial upload or a bit flip. So
//! decoders never trust a length field: [`Cursor`] checks every read against
//! the bytes that remain, and every failure is a [`FormatError`] naming the
//! object (its key) and the byte offset, so an operator can find the bad bytes.
//!
//! All multi-byte integers are big-endian. [`map_as_pairs`] is the serde
//! helper the JSON-encoded formats (snapshots) share for maps whose keys are
//! not strings.

use bytes::BufMut;

/// A decoded object was not what its format says it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt {object} at byte {offset}: {reason}")]
pub struct FormatError {
    /// The object's name, usually its store key.
    pub object: String,
    /// Byte offset within the object where the problem was found.
    pub offset: u64,
    /// What was wrong.
    pub reason: String,
}

impl FormatError {
    pub fn new(object: &str, offset: u64, reason: impl Into<String>) -> Self {
        Self {
            object: object.to_owned(),
            offset,
            reason: reason.into(),
        }
    }
}

/// Result of a decoding step.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;

/// A bounds-checked reader over a byte slice that knows which object it reads
/// and where it is, so every error it produces points at the bad byte.
///
/// The cursor may cover a sub-slice of a larger object; `base` is then the
/// sub-slice's offset within the object, and positions in errors are absolute.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    // Owned so that the object name's lifetime does not bound the slices the
    // cursor hands out; one small allocation per cursor.
    object: String,
    buf: &'a [u8],
    pos: usize,
    base: u64,
}

macro_rules! read_int {
    ($(#[$doc:meta])* $name:ident, $ty:ty) => {
        $(#[$doc])*
        pub fn $name(&mut self) -> Result<$ty> {
            const N: usize = std::mem::size_of::<$ty>();
            let raw = self.array::<N>(stringify!($name))?;
            Ok(<$ty>::from_be_bytes(raw))
        }
    };
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`, which is the whole of `object`.
    pub fn new(object: &str, buf: &'a [u8]) -> Self {
        Self::at(object, buf, 0)
    }

    /// A cursor over `buf`, which starts at byte `base` of `object`.
    pub fn at(object: &str, buf: &'a [u8], base: u64) -> Self {
        Self {
            object: object.to_owned(),
            buf,
            pos: 0,
            base,
        }
    }

    /// The object name errors are reported against.
    pub fn object(&self) -> &str {
        &self.object
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Absolute position within the object.
    pub fn position(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// An error at the current position.
    pub fn error(&self, reason: impl Into<String>) -> FormatError {
        FormatError::new(&self.object, self.position(), reason)
    }

    /// An error at an absolute position `offset` of the object.
    pub fn error_at(&self, offset: u64, reason: impl Into<String>) -> FormatError {
        FormatError::new(&self.object, offset, reason)
    }

    /// The next `n` bytes, which must all be present.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        self.take(n, "bytes")
    }

    /// Fails unless every byte has been consumed; trailing garbage is corruption.
    pub fn expect_end(&self) -> Result<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(self.error(format!("{n} unexpected trailing bytes"))),
        }
    }

    /// Everything not yet read; consumes it.
    pub fn rest(&mut self) -> &'a [u8] {
        let rest = &self.buf[self.pos..];
        self.pos = self.buf.len();
        rest
    }

    read_int!(
        /// One unsigned byte.
        u8,
        u8
    );
    read_int!(
        /// A big-endian `u16`.
        u16,
        u16
    );
    read_int!(
        /// A big-endian `u32`.
        u32,
        u32
    );
    read_int!(
        /// A big-endian `u64`.
        u64,
        u64
    );
    read_int!(
        /// One signed byte.
        i8,
        i8
    );
    read_int!(
        /// A big-endian `i16`.
        i16,
        i16
    );
    read_int!(
        /// A big-endian `i32`.
        i32,
        i32
    );
    read_int!(
        /// A big-endian `i64`.
        i64,
        i64
    );

    /// A `u32` length followed by that many bytes; the length is checked
    /// against what remains before slicing.
    pub fn len_prefixed_u32(&mut self) -> Result<&'a [u8]> {
        let len_at = self.position();
        let len = self.u32()? as usize;
        if len > self.remaining() {
            return Err(self.error_at(
                len_at,
                format!("length {len} exceeds the {} bytes left", self.remaining()),
            ));
        }
        self.take(len, "length-prefixed bytes")
    }

    /// A `u16` length followed by that many bytes of UTF-8.
    pub fn string_u16(&mut self) -> Result<String> {
        let len_at = self.position();
        let len = self.u16()? as usize;
        if len > self.remaining() {
            return Err(self.error_at(
                len_at,
                format!("string length {len} exceeds the {} bytes left", self.remaining()),
            ));
        }
        let start = self.position();
        let raw = self.take(len, "string")?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|e| self.error_at(start, format!("string is not UTF-8: {e}")))
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let raw = self.take(N, what)?;
        Ok(raw.try_into().expect("take returned N bytes"))
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error(format!("truncated: {what} needs {n} bytes, {} left", self.remaining())));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
}

/// Writes a `u16` length and the UTF-8 bytes of `s`.
///
/// # Panics
/// If `s` is longer than `u16::MAX` bytes: such a string is a caller bug
/// (node ids are at most 128 bytes), and silently truncating would corrupt.
pub fn put_string_u16(out: &mut impl BufMut, s: &str) {
    let len = u16::try_from(s.len()).expect("string longer than 65535 bytes");
    out.put_u16(len);
    out.put_slice(s.as_bytes());
}

/// Writes a `u32` length and `data`.
///
/// # Panics
/// If `data` is 4 GiB or longer, which no Sluice object may be.
pub fn put_len_prefixed_u32(out: &mut impl BufMut, data: &[u8]) {
    out.put_u32(u32_len(data.len()));
    out.put_slice(data);
}

/// A length as `u32`; panics past 4 GiB, which no Sluice object may reach.
pub fn u32_len(len: usize) -> u32 {
    u32::try_from(len).expect("length exceeds u32::MAX")
}

/// Encoded size of a [`put_string_u16`] field.
pub fn string_u16_len(s: &str) -> usize {
    2 + s.len()
}

/// Serialize a map with non-string keys as a list of pairs (JSON needs string keys).
pub mod map_as_pairs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<K: Serialize, V: Serialize, S: Serializer>(m: &BTreeMap<K, V>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter())
    }

    pub fn deserialize<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<K, V>, D::Error> {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_integers() {
        let buf = [
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
        ];
        let mut c = Cursor::new("obj", &buf);
        assert_eq!(c.u8().unwrap(), 0x01);
        assert_eq!(c.u16().unwrap(), 0x0203);
        assert_eq!(c.u32().unwrap(), 0x0405_0607);
        assert_eq!(c.u64().unwrap(), 0x0809_0a0b_0c0d_0e0f);
        assert_eq!(c.remaining(), 0);
        assert_eq!(c.position(), 15);
        c.expect_end().unwrap();
    }

    #[test]
    fn reads_signed_integers() {
        let buf = [
            0xff, 0xfe, 0xff, 0xff, 0xff, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfc, 0x80,
        ];
        let mut c = Cursor::new("obj", &buf);
        assert_eq!(c.i16().unwrap(), -2);
        assert_eq!(c.i32().unwrap(), -3);
        assert_eq!(c.i64().unwrap(), -4);
        assert_eq!(c.i8().unwrap(), -128);
    }

    #[test]
    fn truncated_read_names_object_and_offset() {
        let mut c = Cursor::new("wal/x", &[1, 2, 3]);
        c.u8().unwrap();
        let err = c.u32().unwrap_err();
        assert_eq!(err.object, "wal/x");
        assert_eq!(err.offset, 1);
        assert!(err.reason.contains("truncated"), "{err}");
        assert_eq!(
            err.to_string(),
            "corrupt wal/x at byte 1: truncated: u32 needs 4 bytes, 2 left"
        );
        // A failed read consumes nothing.
        assert_eq!(c.remaining(), 2);
    }

    #[test]
    fn positions_are_absolute_for_sub_slices() {
        let mut c = Cursor::at("obj", &[0, 1], 100);
        c.u8().unwrap();
        assert_eq!(c.position(), 101);
        assert_eq!(c.u16().unwrap_err().offset, 101);
    }

    #[test]
    fn len_prefixed_checks_length_before_slicing() {
        let mut ok = Cursor::new("o", &[0, 0, 0, 2, 9, 8, 7]);
        assert_eq!(ok.len_prefixed_u32().unwrap(), &[9, 8]);
        assert_eq!(ok.remaining(), 1);

        let mut huge = Cursor::new("o", &[0xff, 0xff, 0xff, 0xff, 1]);
        let err = huge.len_prefixed_u32().unwrap_err();
        assert_eq!(err.offset, 0);
        assert!(err.reason.contains("4294967295"), "{err}");
    }

    #[test]
    fn strings_are_utf8_checked() {
        let mut buf = Vec::new();
        put_string_u16(&mut buf, "node-1");
        assert_eq!(buf.len(), string_u16_len("node-1"));
        assert_eq!(Cursor::new("o", &buf).string_u16().unwrap(), "node-1");

        let bad = [0, 2, 0xc3, 0x28];
        let err = Cursor::new("o", &bad).string_u16().unwrap_err();
        assert_eq!(err.offset, 2);
        assert!(err.reason.contains("UTF-8"), "{err}");

        let short = [0, 5, b'a'];
        assert!(Cursor::new("o", &short).string_u16().is_err());
    }

    #[test]
    fn expect_end_rejects_trailing_bytes() {
        let c = Cursor::new("o", &[1, 2]);
        let err = c.expect_end().unwrap_err();
        assert!(err.reason.contains("2 unexpected trailing bytes"));
    }

    #[test]
    fn bytes_are_bounded_by_remaining() {
        let mut c = Cursor::new("o", &[1, 2, 3]);
        assert!(c.bytes(4).is_err());
        assert_eq!(c.bytes(3).unwrap(), &[1, 2, 3]);
        assert_eq!(c.bytes(0).unwrap(), &[] as &[u8]);
        assert!(c.bytes(usize::MAX).is_err());
    }

    #[test]
    fn writers_round_trip() {
        let mut buf = Vec::new();
        put_len_prefixed_u32(&mut buf, b"abc");
        assert_eq!(buf, [0, 0, 0, 3, b'a', b'b', b'c']);
        let mut c = Cursor::new("o", &buf);
        assert_eq!(c.len_prefixed_u32().unwrap(), b"abc");
        c.expect_end().unwrap();
    }
}
