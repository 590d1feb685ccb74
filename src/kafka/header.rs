//! The request header every Kafka request starts with, and which header
//! versions a request and its response use. Whether they are the flexible
//! ones (request header v2, response header v1 with tagged fields) depends
//! on the API key and version; Kafka's own schemas say, through the
//! `kafka-protocol` crate's generated [`ApiKey`] table (pure functions of
//! two integers, so no wire input reaches the crate here). The request
//! modules never write or read a header.

use super::wire::{DecodeResult, Reader};

/// Bytes of the fixed part of every request header (key, version, correlation id).
pub const HEADER_MIN: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
}

use kafka_protocol::messages::ApiKey;

/// Whether a request of this key and version uses the flexible header (v2).
pub fn flexible_request(key: i16, version: i16) -> bool {
    ApiKey::try_from(key).is_ok_and(|k| k.request_header_version(version) >= 2)
}

/// Whether the response to a request of this key and version starts with
/// the flexible header (v1: a tagged-field section after the correlation
/// id). ApiVersions never does, so any client can read it.
pub fn flexible_response(key: i16, version: i16) -> bool {
    ApiKey::try_from(key).is_ok_and(|k| k.response_header_version(version) >= 1)
}

/// The header of a supported request; the reader is left at the body.
pub fn decode_header(r: &mut Reader) -> DecodeResult<Header> {
    let api_key = r.i16()?;
    let api_version = r.i16()?;
    let correlation_id = r.i32()?;
    let client_id = r.nullable_string()?;
    if flexible_request(api_key, api_version) {
        r.tagged_fields()?;
    }
    Ok(Header {
        api_key,
        api_version,
        correlation_id,
        client_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_versions_follow_kafkas_flexible_versions() {
        use super::super::proto::{API_VERSIONS, FETCH, METADATA, PRODUCE};
        assert!(!flexible_request(PRODUCE, 8) && flexible_request(PRODUCE, 9));
        assert!(!flexible_response(FETCH, 11) && flexible_response(FETCH, 12));
        assert!(flexible_request(METADATA, 9));
        assert!(flexible_request(API_VERSIONS, 3));
        assert!(
            !flexible_response(API_VERSIONS, 3),
            "ApiVersions answers with header v0"
        );
        assert!(!flexible_request(-7, 0) && !flexible_response(9_999, 0), "unknown keys");
    }
}
