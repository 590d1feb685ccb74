//! The request header every Kafka request starts with. Whether it is the
//! flexible (v2) header depends on the request's key and version, so this
//! module names the few flexible requests Sluice speaks; the request modules
//! themselves never need it.

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

/// Whether a request of this key and version uses the flexible header (v2).
fn flexible(key: i16, version: i16) -> bool {
    (key == super::proto::API_VERSIONS && version >= 3)
        || key == super::admin_proto::DESCRIBE_CLUSTER
        || (key == super::sasl::SASL_AUTHENTICATE && version >= 2)
}

/// The header of a supported request; the reader is left at the body.
pub fn decode_header(r: &mut Reader) -> DecodeResult<Header> {
    let api_key = r.i16()?;
    let api_version = r.i16()?;
    let correlation_id = r.i32()?;
    let client_id = r.nullable_string()?;
    if flexible(api_key, api_version) {
        r.tagged_fields()?;
    }
    Ok(Header {
        api_key,
        api_version,
        correlation_id,
        client_id,
    })
}
