//! Kafka's batch compression codecs, for reading the records of a
//! compressed batch (Kafka producers send them; Sluice stores the batch as
//! sent and decompresses only to serve records over HTTP or to validate a
//! produce). All four are pure-Rust decoders.
//!
//! Every decoder is bounded: output past `limit` bytes is an error, never
//! an allocation (a few hundred bytes of zstd or gzip can claim gigabytes).

use std::io::Read;

/// Codec ids of the batch attributes' low three bits.
pub const NONE: u8 = 0;
pub const GZIP: u8 = 1;
pub const SNAPPY: u8 = 2;
pub const LZ4: u8 = 3;
pub const ZSTD: u8 = 4;

/// The most bytes one batch may decompress to.
pub const MAX_DECOMPRESSED: usize = 64 << 20;

/// The "xerial" snappy framing the Java client writes: this magic, a
/// version and a compatible-version i32, then (i32 length, raw block)*.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

pub fn name(codec: u8) -> &'static str {
    match codec {
        NONE => "none",
        GZIP => "gzip",
        SNAPPY => "snappy",
        LZ4 => "lz4",
        ZSTD => "zstd",
        _ => "unknown",
    }
}

/// Decompress a batch's records area with `codec`, up to `limit` bytes.
pub fn decompress(codec: u8, data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    match codec {
        NONE => bounded(data, limit),
        GZIP => read_bounded(flate2::read::MultiGzDecoder::new(data), limit),
        SNAPPY => snappy(data, limit),
        LZ4 => read_bounded(lz4_flex::frame::FrameDecoder::new(data), limit),
        ZSTD => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(data).map_err(|e| format!("zstd: {e}"))?;
            read_bounded(decoder, limit)
        }
        other => Err(format!("unknown compression codec {other}")),
    }
    .map_err(|e| format!("{} records: {e}", name(codec)))
}

fn bounded(data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    if data.len() > limit {
        return Err(format!("{} bytes exceed the {limit}-byte limit", data.len()));
    }
    Ok(data.to_vec())
}

/// Read all of `r`, failing once more than `limit` bytes come out.
fn read_bounded(r: impl Read, limit: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    r.take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() > limit {
        return Err(format!("decompresses past the {limit}-byte limit"));
    }
    Ok(out)
}

/// Raw snappy (librdkafka, kafka-python) or xerial-framed (Java).
fn snappy(data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    if !data.starts_with(XERIAL_MAGIC) {
        return snappy_block(data, limit);
    }
    if data.len() < XERIAL_HEADER_LEN {
        return Err("truncated xerial header".into());
    }
    let mut rest = &data[XERIAL_HEADER_LEN..];
    let mut out = Vec::new();
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err("truncated xerial block length".into());
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > tail.len() {
            return Err(format!("xerial block of {len} bytes, {} left", tail.len()));
        }
        let block = snappy_block(&tail[..len], limit - out.len())?;
        out.extend_from_slice(&block);
        rest = &tail[len..];
    }
    Ok(out)
}

fn snappy_block(data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let claimed = snap::raw::decompress_len(data).map_err(|e| e.to_string())?;
    if claimed > limit {
        return Err(format!("claims {claimed} bytes, past the {limit}-byte limit"));
    }
    snap::raw::Decoder::new()
        .decompress_vec(data)
        .map_err(|e| e.to_string())
}

/// Compress with `codec` (tests and benchmarks build producer-like batches).
pub fn compress(codec: u8, data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match codec {
        GZIP => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).expect("writing to a Vec");
            e.finish().expect("writing to a Vec")
        }
        SNAPPY => snap::raw::Encoder::new().compress_vec(data).expect("snappy input fits"),
        LZ4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(data).expect("writing to a Vec");
            e.finish().expect("writing to a Vec")
        }
        ZSTD => ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest),
        _ => data.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        (0..20_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect()
    }

    #[test]
    fn every_codec_round_trips() {
        let data = sample();
        for codec in [NONE, GZIP, SNAPPY, LZ4, ZSTD] {
            let packed = compress(codec, &data);
            if codec != NONE {
                assert!(packed.len() < data.len() / 2, "{} compresses", name(codec));
            }
            assert_eq!(
                decompress(codec, &packed, MAX_DECOMPRESSED).unwrap(),
                data,
                "{}",
                name(codec)
            );
        }
    }

    #[test]
    fn output_past_the_limit_is_an_error_not_an_allocation() {
        let zeros = vec![0u8; 1 << 20];
        for codec in [NONE, GZIP, SNAPPY, LZ4, ZSTD] {
            let packed = compress(codec, &zeros);
            let err = decompress(codec, &packed, 1000).unwrap_err();
            assert!(err.contains("limit"), "{}: {err}", name(codec));
        }
    }

    #[test]
    fn xerial_framed_snappy_is_read_block_by_block() {
        let data = sample();
        let (a, b) = data.split_at(30_000);
        let mut framed = XERIAL_MAGIC.to_vec();
        framed.extend_from_slice(&1i32.to_be_bytes());
        framed.extend_from_slice(&1i32.to_be_bytes());
        for part in [a, b] {
            let block = compress(SNAPPY, part);
            framed.extend_from_slice(&(block.len() as u32).to_be_bytes());
            framed.extend_from_slice(&block);
        }
        assert_eq!(decompress(SNAPPY, &framed, MAX_DECOMPRESSED).unwrap(), data);
        framed.truncate(framed.len() - 3);
        assert!(decompress(SNAPPY, &framed, MAX_DECOMPRESSED).is_err());
    }

    #[test]
    fn garbage_is_an_error_for_every_codec() {
        let garbage: Vec<u8> = (0..300u32).map(|i| (i * 7919 % 256) as u8).collect();
        for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
            assert!(
                decompress(codec, &garbage, MAX_DECOMPRESSED).is_err(),
                "{}",
                name(codec)
            );
        }
        assert!(decompress(7, b"x", 10).is_err());
    }
}
