//! The API versions Sluice speaks: the `SUPPORTED` table that ApiVersions
//! advertises and the dispatcher admits, and the ApiVersions request and
//! response themselves. It sits above every request module (it names their
//! keys) and nothing below imports it.

use super::wire::{DecodeResult, Reader, Writer};

/// (api key, min version, max version): what ApiVersions advertises, and
/// exactly what the request modules decode.
pub const SUPPORTED: [(i16, i16, i16); 26] = [
    (super::proto::PRODUCE, 3, 8),
    (super::proto::FETCH, 4, 11),
    (super::proto::LIST_OFFSETS, 1, 5),
    (super::proto::METADATA, 0, 8),
    (super::group_proto::OFFSET_COMMIT, 0, 7),
    (super::group_proto::OFFSET_FETCH, 0, 5),
    (super::group_proto::FIND_COORDINATOR, 0, 2),
    (super::group_proto::JOIN_GROUP, 0, 5),
    (super::group_proto::HEARTBEAT, 0, 3),
    (super::group_proto::LEAVE_GROUP, 0, 3),
    (super::group_proto::SYNC_GROUP, 0, 3),
    (super::group_proto::DESCRIBE_GROUPS, 0, 4),
    (super::group_proto::LIST_GROUPS, 0, 2),
    (super::proto::API_VERSIONS, 0, 3),
    (super::admin_proto::CREATE_TOPICS, 0, 4),
    (super::admin_proto::DELETE_TOPICS, 0, 3),
    (super::admin_proto::DESCRIBE_CONFIGS, 0, 3),
    (super::admin_proto::ALTER_CONFIGS, 0, 1),
    (super::admin_proto::CREATE_PARTITIONS, 0, 1),
    (super::group_proto::DELETE_GROUPS, 0, 1),
    (super::producer_ids::INIT_PRODUCER_ID, 0, 1),
    (super::leader_epoch::OFFSET_FOR_LEADER_EPOCH, 0, 3),
    (super::admin_proto::INCREMENTAL_ALTER_CONFIGS, 0, 0),
    (super::admin_proto::DESCRIBE_CLUSTER, 0, 1),
    (super::sasl::SASL_HANDSHAKE, 0, 1),
    (super::sasl::SASL_AUTHENTICATE, 0, 2),
];

pub fn supported(key: i16, version: i16) -> bool {
    SUPPORTED
        .iter()
        .any(|&(k, min, max)| k == key && (min..=max).contains(&version))
}

/// ApiVersions v3 names the client; earlier versions have an empty body.
pub fn decode_api_versions(r: &mut Reader, version: i16) -> DecodeResult<()> {
    if version >= 3 {
        let _name = r.compact_nullable_string()?;
        let _version = r.compact_nullable_string()?;
        r.tagged_fields()?;
    }
    r.expect_end()
}

pub fn encode_api_versions(w: &mut Writer, version: i16, error_code: i16) {
    w.i16(error_code);
    if version >= 3 {
        w.compact_array_len(SUPPORTED.len());
    } else {
        w.array_len(SUPPORTED.len());
    }
    for (key, min, max) in SUPPORTED {
        w.i16(key);
        w.i16(min);
        w.i16(max);
        if version >= 3 {
            w.no_tagged_fields();
        }
    }
    if version >= 1 {
        w.i32(0); // throttle_time_ms
    }
    if version >= 3 {
        w.no_tagged_fields();
    }
}
