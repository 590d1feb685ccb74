//! The internal node-to-node call, as both ends see it: its paths, the
//! headers its answers carry, how a read's start travels, and how stored
//! batches become the records of a read.
//!
//! - `POST /internal/v1/topics/{topic}/partitions/{p}/batch`: the body is
//!   one RecordBatch v2 (`batch`), encoded once by the node the
//!   client called; the owner appends it as `append_batch` does (offsets
//!   assigned, bytes otherwise stored as sent). Answer: [`BASE_OFFSET`] and
//!   [`COUNT`] headers, an empty body. With a [`DS_WRITE`] header it is a
//!   Durable Streams append, checked by the owner's sequencer in the same
//!   step (`append_durable`).
//! - `GET /internal/v1/topics/{topic}/partitions/{p}/batches?from=&max_bytes=&wait_ms=`:
//!   the stored batches from `from` (`start`, `end` or an offset), as
//!   `read_batches` returns them, concatenated in the body; the
//!   [`FROM`], [`HIGH_WATERMARK`] and [`START_OFFSET`] headers say where.
//!
//! Both need the peer credential and the forwarded mark
//! ([`crate::api::PEER_HEADER`], [`crate::api::FORWARDED_HEADER`]); an
//! error is the public API's error body with its status.

use crate::api::{ApiError, ApiResult, ErrorCode, ReadFrom};
use crate::batch::Record;
use crate::ids::Offset;

/// Prefix of every internal route: not part of the public API.
pub const PREFIX: &str = "/internal/v1";
/// The append route, in axum syntax.
pub const APPEND_ROUTE: &str = "/internal/v1/topics/{topic}/partitions/{partition}/batch";
/// A transaction marker the coordinator writes: the peer credential
/// authorizes it (the coordinator acts on its own, not for a caller).
pub const MARKER_ROUTE: &str = "/internal/v1/topics/{topic}/partitions/{partition}/marker";
/// The read route, in axum syntax.
pub const READ_ROUTE: &str = "/internal/v1/topics/{topic}/partitions/{partition}/batches";

/// On the append route: the Durable Streams write (producer, `Stream-Seq`)
/// the owner's sequencer checks with the records, as base64 of its JSON.
/// The body may then be empty (a check only). Answered with
/// `{"durable": <outcome>}`.
pub const DS_WRITE: &str = "sluice-ds-write-b64";
/// On the marker route: the transaction the marker ends
/// ([`MarkerOf`](crate::api::MarkerOf)), as base64 of its JSON. A marker
/// without it (from a node of an older version) is appended unjudged.
pub const MARKER_OF: &str = "sluice-marker-of-b64";
/// Where an append landed (answer header).
pub const BASE_OFFSET: &str = "sluice-base-offset";
/// How many records it took (answer header).
pub const COUNT: &str = "sluice-count";
/// The offset a read started at, `from` resolved (answer header).
pub const FROM: &str = "sluice-from";
/// The owner's high watermark when it read (answer header).
pub const HIGH_WATERMARK: &str = "sluice-high-watermark";
/// The stream's start offset when it read (answer header).
pub const START_OFFSET: &str = "sluice-start-offset";
/// A committed read: the end of the last batch the owner scanned, markers
/// and aborted transactions it left out included (answer header).
pub const SCANNED_END: &str = "sluice-scanned-end";

/// `from=` of a read.
pub fn from_param(from: ReadFrom) -> String {
    match from {
        ReadFrom::Start => "start".into(),
        ReadFrom::End => "end".into(),
        ReadFrom::At(o) => o.get().to_string(),
    }
}

/// The inverse of [`from_param`].
pub fn parse_from(s: &str) -> ApiResult<ReadFrom> {
    match s {
        "start" => Ok(ReadFrom::Start),
        "end" => Ok(ReadFrom::End),
        n => n.parse::<u64>().map(|o| ReadFrom::At(Offset(o))).map_err(|_| {
            ApiError::new(
                ErrorCode::InvalidOffset,
                format!("from={n:?} is not start, end or an offset"),
            )
        }),
    }
}

/// The records of `batches` (as `read_batches` returns them) from `from`
/// on: at most `limit` of them and about `max_bytes` of keys, values and
/// headers, the first always — what a local read of the same range returns.
pub fn records_from(
    batches: &[bytes::Bytes],
    from: Offset,
    limit: usize,
    max_bytes: usize,
) -> ApiResult<Vec<(Offset, Record)>> {
    Ok(records_within(batches, from, limit, max_bytes)?.0)
}

/// [`records_from`], and whether it took every record of `batches` from
/// `from` on (nothing was left out for `limit` or `max_bytes`).
pub fn records_within(
    batches: &[bytes::Bytes],
    from: Offset,
    limit: usize,
    max_bytes: usize,
) -> ApiResult<(Vec<(Offset, Record)>, bool)> {
    let mut out = Vec::new();
    let mut used = 0usize;
    for b in batches {
        let decoded = crate::batch::decode_records("a read", b)
            .map_err(|e| ApiError::new(ErrorCode::Internal, format!("a stored batch does not decode: {e}")))?;
        for (offset, record) in decoded {
            if offset < from {
                continue;
            }
            let size = crate::stream::partition::record_size(&record);
            if out.len() >= limit || (!out.is_empty() && used + size > max_bytes) {
                return Ok((out, false));
            }
            used += size;
            out.push((offset, record));
        }
    }
    Ok((out, true))
}

/// A committed read of `batches` (read from `from`, the last of them ending
/// at `scanned_end`; see [`committed_data`](crate::meta::txn_index::committed_data)
/// for which are `data`): its records, and where the next read starts —
/// past the last record when some were left out, else past every batch
/// scanned, so a reader moves on over markers and aborted transactions.
pub fn committed_records(
    data: &[bytes::Bytes],
    from: Offset,
    scanned_end: Offset,
    limit: usize,
    max_bytes: usize,
) -> ApiResult<(Vec<(Offset, Record)>, Offset)> {
    let (records, all) = records_within(data, from, limit, max_bytes)?;
    let next = match records.last() {
        Some((o, _)) if !all => o.next(),
        _ => scanned_end.max(from),
    };
    Ok((records, next))
}

/// The Durable Streams write of a [`DS_WRITE`] header.
pub fn encode_ds_write(write: &crate::meta::writers::DsWrite) -> String {
    encode_b64_json(write)
}

/// The inverse of [`encode_ds_write`].
pub fn decode_ds_write(header: &str) -> ApiResult<crate::meta::writers::DsWrite> {
    decode_b64_json(header).ok_or_else(|| ApiError::invalid(format!("{DS_WRITE} is not a Durable Streams write")))
}

/// The [`MARKER_OF`] header's value.
pub fn encode_marker_of(of: &crate::api::MarkerOf) -> String {
    encode_b64_json(of)
}

/// The inverse of [`encode_marker_of`].
pub fn decode_marker_of(header: &str) -> ApiResult<crate::api::MarkerOf> {
    decode_b64_json(header).ok_or_else(|| ApiError::invalid(format!("{MARKER_OF} does not name a transaction")))
}

fn encode_b64_json(value: &impl serde::Serialize) -> String {
    use base64::Engine as _;
    let json = serde_json::to_vec(value).expect("a header value serializes");
    base64::engine::general_purpose::STANDARD.encode(json)
}

fn decode_b64_json<T: serde::de::DeserializeOwned>(header: &str) -> Option<T> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(header)
        .ok()
        .and_then(|json| serde_json::from_slice(&json).ok())
}

/// The records of an append's body: one batch, or none (an empty body).
pub fn body_records(body: &bytes::Bytes) -> ApiResult<Vec<Record>> {
    if body.is_empty() {
        return Ok(Vec::new());
    }
    let info = crate::batch::parse_batch("a forwarded append", body)
        .map_err(|e| ApiError::invalid(format!("a forwarded append: {e}")))?;
    if info.batch_len != body.len() {
        return Err(ApiError::invalid("a forwarded append holds exactly one batch"));
    }
    crate::batch::decode_records("a forwarded append", body)
        .map(|r| r.into_iter().map(|(_, r)| r).collect())
        .map_err(|e| ApiError::invalid(format!("a forwarded append: {e}")))
}

/// Splits a read answer's body into its batches (each validated).
pub fn split_batches(body: &bytes::Bytes) -> ApiResult<Vec<bytes::Bytes>> {
    let mut out = Vec::new();
    let mut at = 0;
    for b in crate::batch::batches("a forwarded read", body) {
        let (info, _) = b.map_err(|e| ApiError::new(ErrorCode::Internal, format!("owner sent a bad batch: {e}")))?;
        out.push(body.slice(at..at + info.batch_len));
        at += info.batch_len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::encode_batch;
    use bytes::Bytes;

    fn rec(v: &str, ts: i64) -> Record {
        Record {
            timestamp_ms: ts,
            key: Some(Bytes::from(format!("k{v}"))),
            value: Some(Bytes::from(v.to_string())),
            headers: vec![("h".into(), Some(Bytes::from_static(b"1"))), ("h".into(), None)],
        }
    }

    #[test]
    fn from_round_trips_and_junk_is_refused() {
        for f in [ReadFrom::Start, ReadFrom::End, ReadFrom::At(Offset(42))] {
            assert_eq!(parse_from(&from_param(f)).unwrap(), f);
        }
        assert_eq!(parse_from("-1").unwrap_err().code, ErrorCode::InvalidOffset);
    }

    #[test]
    fn records_start_at_from_and_stop_at_the_limit_and_the_bytes() {
        let one = encode_batch(Offset(10), &[rec("a", 1), rec("b", 2), rec("c", 3)]);
        let two = encode_batch(Offset(13), &[rec("d", 4)]);
        let mut body = one.to_vec();
        body.extend_from_slice(&two);
        let batches = split_batches(&Bytes::from(body)).unwrap();
        assert_eq!(batches, vec![one, two]);

        let all = records_from(&batches, Offset(11), 100, usize::MAX).unwrap();
        let offsets: Vec<u64> = all.iter().map(|(o, _)| o.get()).collect();
        assert_eq!(offsets, [11, 12, 13]);
        assert_eq!(all[0].1, rec("b", 2), "every field, both repeated headers in order");

        assert_eq!(records_from(&batches, Offset(10), 2, usize::MAX).unwrap().len(), 2);
        // The first record always comes, even over the byte budget.
        assert_eq!(records_from(&batches, Offset(10), 100, 1).unwrap().len(), 1);
    }

    #[test]
    fn the_transaction_a_marker_ends_travels_unchanged() {
        let of = crate::api::MarkerOf {
            transactional_id: "tx \u{e9}\n\"x\"".into(),
            started_at: 1 << 40,
        };
        let header = encode_marker_of(&of);
        assert!(header.bytes().all(|b| b.is_ascii_graphic()), "a valid header value");
        assert_eq!(decode_marker_of(&header).unwrap(), of);
        for bad in ["", "e30", "not base64!", "eyJ0cmFuc2FjdGlvbmFsX2lkIjoxfQ=="] {
            assert_eq!(
                decode_marker_of(bad).unwrap_err().code,
                ErrorCode::InvalidRequest,
                "{bad}"
            );
        }
    }

    #[test]
    fn a_durable_write_and_its_records_travel_unchanged() {
        let write = crate::meta::writers::DsWrite {
            producer: Some(crate::meta::writers::ProducerSeq {
                id: "p\u{e9} \"q\"".into(),
                epoch: 3,
                seq: 9,
            }),
            stream_seq: Some("0007".into()),
            ..Default::default()
        };
        let header = encode_ds_write(&write);
        assert!(header.bytes().all(|b| b.is_ascii_graphic()), "a valid header value");
        assert_eq!(decode_ds_write(&header).unwrap(), write);
        assert_eq!(decode_ds_write("e30").unwrap_err().code, ErrorCode::InvalidRequest);
        let records = vec![rec("a", 1), rec("b", 2)];
        assert_eq!(body_records(&encode_batch(Offset(0), &records)).unwrap(), records);
        assert!(body_records(&Bytes::new()).unwrap().is_empty(), "a check only");
        let mut two = encode_batch(Offset(0), &records).to_vec();
        two.extend_from_slice(&encode_batch(Offset(2), &records));
        assert_eq!(
            body_records(&Bytes::from(two)).unwrap_err().code,
            ErrorCode::InvalidRequest
        );
    }

    #[test]
    fn a_damaged_batch_is_an_error_not_records() {
        let mut b = encode_batch(Offset(0), &[rec("a", 1)]).to_vec();
        let last = b.len() - 1;
        b[last] ^= 0xff;
        let b = Bytes::from(b);
        assert_eq!(split_batches(&b).unwrap_err().code, ErrorCode::Internal);
        assert_eq!(
            records_from(&[b], Offset(0), 1, 1).unwrap_err().code,
            ErrorCode::Internal
        );
    }
}
