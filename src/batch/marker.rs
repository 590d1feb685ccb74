//! Kafka's transaction markers: the control batch the end of a transaction
//! writes into each of its partitions, laid out as Kafka lays it out so
//! clients parse it unmodified. The batch carries the producer's id and
//! epoch, the transactional and control attribute bits, no sequence, and
//! one record: key `(version 0: i16, type: i16)` with type 0 abort and 1
//! commit, value `(version 0: i16, coordinator epoch: i32)`.

use super::{encode_batch, parse_batch, transactional, with_producer, Record};
use crate::format::{FormatError, Result};
use crate::ids::Offset;
use bytes::Bytes;

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Abort,
    Commit,
}

impl Marker {
    fn control_type(self) -> i16 {
        match self {
            Marker::Abort => 0,
            Marker::Commit => 1,
        }
    }
}

/// The marker batch (base offset 0, to be assigned on append).
pub fn encode_marker(
    producer_id: i64,
    producer_epoch: i16,
    marker: Marker,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> Bytes {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&marker.control_type().to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let record = Record {
        timestamp_ms,
        key: Some(Bytes::from(key)),
        value: Some(Bytes::from(value)),
        headers: vec![],
    };
    let batch = with_producer(&encode_batch(Offset(0), &[record]), producer_id, producer_epoch, -1);
    transactional(&batch, true)
}

/// The marker a batch holds: `None` for a batch that is not a control
/// batch; an error for a control batch whose record is not a marker.
pub fn decode_marker(object: &str, batch: &[u8]) -> Result<Option<(Marker, i32)>> {
    let info = parse_batch(object, batch)?;
    if !info.is_control {
        return Ok(None);
    }
    let bad = |reason: &str| FormatError::new(object, 0, reason);
    let record = super::first_record(object, batch)?.ok_or_else(|| bad("a control batch without a record"))?;
    let key = record.key.ok_or_else(|| bad("a control record without a key"))?;
    let value = record.value.ok_or_else(|| bad("a control record without a value"))?;
    if key.len() < 4 || value.len() < 6 {
        return Err(bad("a control record too short for a transaction marker"));
    }
    let marker = match i16::from_be_bytes([key[2], key[3]]) {
        0 => Marker::Abort,
        1 => Marker::Commit,
        t => return Err(bad(&format!("control record type {t} is not a transaction marker"))),
    };
    Ok(Some((
        marker,
        i32::from_be_bytes([value[2], value[3], value[4], value[5]]),
    )))
}

#[cfg(test)]
mod tests {
    use super::super::{ATTRIBUTES_OFFSET, CRC_OFFSET};
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::RecordBatchDecoder;

    #[test]
    fn markers_decode_with_kafka_protocol_as_control_records() {
        for (marker, kind) in [(Marker::Abort, 0i16), (Marker::Commit, 1)] {
            let batch = encode_marker(42, 3, marker, 7, 1_700_000_000_000);
            let info = parse_batch("m", &batch).unwrap();
            assert!(info.is_control && info.is_transactional);
            assert_eq!((info.producer_id, info.producer_epoch, info.base_sequence), (42, 3, -1));
            let mut buf = batch.clone();
            let set = RecordBatchDecoder::decode(&mut buf).unwrap();
            let rs = &set.records;
            assert_eq!(rs.len(), 1);
            let r = &rs[0];
            assert!(r.control && r.transactional);
            assert_eq!(
                (r.producer_id, r.producer_epoch, r.timestamp),
                (42, 3, 1_700_000_000_000)
            );
            let key = r.key.clone().unwrap();
            assert_eq!(&key[..], &[0, 0, (kind >> 8) as u8, kind as u8]);
            let value = r.value.clone().unwrap();
            assert_eq!(&value[..], &[0, 0, 0, 0, 0, 7]);
            assert_eq!(decode_marker("m", &batch).unwrap(), Some((marker, 7)));
        }
    }

    #[test]
    fn only_control_batches_are_markers() {
        let data = encode_batch(
            Offset(0),
            &[Record {
                timestamp_ms: 1,
                key: None,
                value: Some(Bytes::from("v")),
                headers: vec![],
            }],
        );
        assert_eq!(decode_marker("d", &data).unwrap(), None);
        // A control batch of another type is not mistaken for one.
        let mut other = BytesMut::from(&encode_marker(1, 0, Marker::Commit, 0, 1)[..]);
        let key_type_at = other.len() - 1 - 6 - 1 - 2; // headers count, value, its length, then the key's type
        other[key_type_at..key_type_at + 2].copy_from_slice(&5i16.to_be_bytes());
        let crc = crc32c::crc32c(&other[ATTRIBUTES_OFFSET..]);
        other[CRC_OFFSET..ATTRIBUTES_OFFSET].copy_from_slice(&crc.to_be_bytes());
        assert!(decode_marker("o", &other).is_err());
    }
}
