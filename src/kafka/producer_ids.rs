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
}

/// v0 and v1 share one layout.
pub fn decode_init_producer_id(r: &mut Reader, _version: i16) -> DecodeResult<InitProducerIdRequest> {
    let transactional_id = r.nullable_string()?;
    let transaction_timeout_ms = r.i32()?;
    r.expect_end()?;
    Ok(InitProducerIdRequest {
        transactional_id,
        transaction_timeout_ms,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitProducerIdResponse {
    pub error_code: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

pub fn encode_init_producer_id(w: &mut Writer, _version: i16, resp: &InitProducerIdResponse) {
    w.i32(0); // throttle_time_ms
    w.i16(resp.error_code);
    w.i64(resp.producer_id);
    w.i16(resp.producer_epoch);
}

/// A fresh producer id at epoch 0. Transactional ids are refused:
/// transactions are not implemented (FindCoordinator for a transaction key
/// answers `COORDINATOR_NOT_AVAILABLE` as well).
pub async fn init_producer_id(engine: &Services, req: &InitProducerIdRequest) -> InitProducerIdResponse {
    let fail = |error_code| InitProducerIdResponse {
        error_code,
        producer_id: -1,
        producer_epoch: -1,
    };
    if req.transactional_id.is_some() {
        return fail(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
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
        );
        assert_eq!(
            w.buf.as_ref(),
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0].as_slice(),
            "throttle, error, id, epoch"
        );
    }

    #[test]
    fn a_short_init_producer_id_request_is_refused() {
        let short = Bytes::from_static(&[0, 0]);
        assert!(decode_init_producer_id(&mut Reader::new(short), 0).is_err());
    }
}
