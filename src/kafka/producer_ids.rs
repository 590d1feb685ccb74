//! InitProducerId: the Kafka producer-id API (idempotent producers, no
//! transactions), its codec and handler over the
//! [`ProducerIds`](crate::api::ProducerIds) capability.
//!
//! Sequence checks of idempotent batches happen where offsets are assigned
//! (`stream::partition`, with the state in `meta::producers`); this module
//! only hands out producer ids. Produce itself is `produce.rs`.

use super::code;
use super::wire::{DecodeResult, Reader, Writer};
use crate::api::Services;

pub const INIT_PRODUCER_ID: i16 = 22;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    pub transactional_id: Option<String>,
    pub transaction_timeout_ms: i32,
    /// v3+: the producer's current id and epoch (-1 for a new producer).
    /// Read and not used yet: every call hands out a fresh id.
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// v0–1 classic, v2+ flexible, v3+ with the current id and epoch (v4 and
/// v5 change only what errors mean).
pub fn decode_init_producer_id(r: &mut Reader, version: i16) -> DecodeResult<InitProducerIdRequest> {
    let flexible = version >= 2;
    let transactional_id = if flexible {
        r.compact_nullable_string()?
    } else {
        r.nullable_string()?
    };
    let transaction_timeout_ms = r.i32()?;
    let (producer_id, producer_epoch) = if version >= 3 { (r.i64()?, r.i16()?) } else { (-1, -1) };
    if flexible {
        r.tagged_fields()?;
    }
    r.expect_end()?;
    Ok(InitProducerIdRequest {
        transactional_id,
        transaction_timeout_ms,
        producer_id,
        producer_epoch,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitProducerIdResponse {
    pub error_code: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

pub fn encode_init_producer_id(w: &mut Writer, version: i16, resp: &InitProducerIdResponse) -> DecodeResult<()> {
    let m = kafka_protocol::messages::InitProducerIdResponse::default()
        .with_error_code(resp.error_code)
        .with_producer_id(resp.producer_id.into())
        .with_producer_epoch(resp.producer_epoch);
    w.message(&m, version)
}

/// A fresh producer id at epoch 0; with a transactional id, the id's
/// coordinator answers (`txn_coordinator::init`).
pub async fn init_producer_id(engine: &Services, req: &InitProducerIdRequest, version: i16) -> InitProducerIdResponse {
    let fail = |error_code| InitProducerIdResponse {
        error_code,
        producer_id: -1,
        producer_epoch: -1,
    };
    if let Some(id) = &req.transactional_id {
        let (error_code, producer_id, producer_epoch) = super::txn_coordinator::init(
            engine,
            id,
            req.transaction_timeout_ms,
            (req.producer_id, req.producer_epoch),
            version,
        )
        .await;
        return InitProducerIdResponse {
            error_code,
            producer_id,
            producer_epoch,
        };
    }
    match engine.producer_ids.init_producer_id().await {
        Ok(producer_id) => InitProducerIdResponse {
            error_code: code::NONE,
            producer_id,
            producer_epoch: 0,
        },
        // Retryable for the client: the metadata store is down or the
        // node is not serving.
        Err(e) if e.code.retryable() => fail(super::groups::code::COORDINATOR_NOT_AVAILABLE),
        Err(e) => fail(super::error_code(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn reader(w: Writer) -> Reader {
        Reader::new(w.buf.freeze())
    }

    #[test]
    fn init_producer_id_decodes_a_null_transactional_id() {
        let mut w = Writer::default();
        w.nullable_string(None);
        w.i32(60_000);
        let req = decode_init_producer_id(&mut reader(w), 1).unwrap();
        assert_eq!(req.transactional_id, None);
        assert_eq!(req.transaction_timeout_ms, 60_000);
    }

    #[test]
    fn init_producer_id_response_layout() {
        let mut w = Writer::default();
        encode_init_producer_id(
            &mut w,
            0,
            &InitProducerIdResponse {
                error_code: 0,
                producer_id: 7,
                producer_epoch: 0,
            },
        )
        .unwrap();
        assert_eq!(
            w.buf.as_ref(),
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0].as_slice(),
            "throttle, error, id, epoch"
        );
    }

    #[test]
    fn init_producer_id_requests_decode_at_every_version() {
        use kafka_protocol::messages::InitProducerIdRequest as K;
        use kafka_protocol::protocol::{Encodable, StrBytes};
        for version in 0..=5 {
            let mut k = K::default()
                .with_transactional_id(Some(StrBytes::from_static_str("tx").into()))
                .with_transaction_timeout_ms(9_000);
            if version >= 3 {
                k = k.with_producer_id(42.into()).with_producer_epoch(3);
            }
            let mut b = bytes::BytesMut::new();
            k.encode(&mut b, version).unwrap();
            let req = decode_init_producer_id(&mut Reader::new(b.clone().freeze()), version).unwrap();
            assert_eq!(req.transactional_id.as_deref(), Some("tx"), "v{version}");
            assert_eq!(req.transaction_timeout_ms, 9_000);
            let want = if version >= 3 { (42, 3) } else { (-1, -1) };
            assert_eq!((req.producer_id, req.producer_epoch), want, "v{version}");
            for cut in 0..b.len() {
                let short = b.clone().freeze().slice(..cut);
                assert!(decode_init_producer_id(&mut Reader::new(short), version).is_err());
            }
        }
    }

    #[test]
    fn init_producer_id_responses_decode_at_every_version() {
        use kafka_protocol::protocol::Decodable;
        for version in 0..=5 {
            let mut w = Writer::default();
            let resp = InitProducerIdResponse {
                error_code: 0,
                producer_id: 9,
                producer_epoch: 0,
            };
            encode_init_producer_id(&mut w, version, &resp).unwrap();
            let mut b = w.buf.freeze();
            let k = kafka_protocol::messages::InitProducerIdResponse::decode(&mut b, version).unwrap();
            assert!(b.is_empty());
            assert_eq!((k.producer_id.0, k.producer_epoch, k.error_code), (9, 0, 0));
        }
    }

    #[test]
    fn a_short_init_producer_id_request_is_refused() {
        let short = Bytes::from_static(&[0, 0]);
        assert!(decode_init_producer_id(&mut Reader::new(short), 0).is_err());
    }
}
