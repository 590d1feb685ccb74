//! The API versions Sluice speaks: the `SUPPORTED` table that ApiVersions
//! advertises and the dispatcher admits, the ApiVersions request and
//! response themselves, and the markdown rendering of the table that
//! docs/kafka.md carries (a test keeps the two equal). It sits above every
//! request module (it names their keys) and nothing below imports it.

use super::wire::{DecodeResult, Reader, Writer};
use kafka_protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};
use kafka_protocol::messages::ApiKey;

/// (api key, min version, max version): what ApiVersions advertises, and
/// exactly what the request modules decode.
pub const SUPPORTED: [(i16, i16, i16); 42] = [
    (super::proto::PRODUCE, 3, 13),
    (super::proto::FETCH, 4, 18),
    (super::proto::LIST_OFFSETS, 1, 10),
    (super::proto::METADATA, 0, 13),
    (super::group_proto::OFFSET_COMMIT, 0, 9),
    (super::group_proto::OFFSET_FETCH, 0, 9),
    (super::group_proto::FIND_COORDINATOR, 0, 6),
    (super::group_proto::JOIN_GROUP, 0, 9),
    (super::group_proto::HEARTBEAT, 0, 4),
    (super::group_proto::LEAVE_GROUP, 0, 5),
    (super::group_proto::SYNC_GROUP, 0, 5),
    (super::group_proto::DESCRIBE_GROUPS, 0, 6),
    (super::group_proto::LIST_GROUPS, 0, 5),
    (super::proto::API_VERSIONS, 0, 4),
    (super::admin_proto::CREATE_TOPICS, 2, 7),
    (super::admin_proto::DELETE_TOPICS, 1, 6),
    (super::admin_proto::DESCRIBE_CONFIGS, 1, 4),
    (super::admin_proto::ALTER_CONFIGS, 0, 2),
    (super::admin_proto::CREATE_PARTITIONS, 0, 3),
    (super::group_proto::DELETE_GROUPS, 0, 2),
    (super::producer_ids::INIT_PRODUCER_ID, 0, 5),
    (super::leader_epoch::OFFSET_FOR_LEADER_EPOCH, 0, 4),
    (super::admin_proto::INCREMENTAL_ALTER_CONFIGS, 0, 1),
    (super::admin_proto::DESCRIBE_CLUSTER, 0, 2),
    (super::sasl::SASL_HANDSHAKE, 0, 1),
    (super::sasl::SASL_AUTHENTICATE, 0, 2),
    (super::scram_users::DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0),
    (super::consumer_proto::CONSUMER_GROUP_HEARTBEAT, 0, 1),
    (super::consumer_proto::CONSUMER_GROUP_DESCRIBE, 0, 1),
    (super::acls::DESCRIBE_ACLS, 1, 3),
    (super::acls::CREATE_ACLS, 1, 3),
    (super::acls::DELETE_ACLS, 1, 3),
    (super::log_dirs::DESCRIBE_LOG_DIRS, 1, 4),
    (super::delete_records::DELETE_RECORDS, 0, 2),
    (super::offset_delete::OFFSET_DELETE, 0, 0),
    (super::describe_producers::DESCRIBE_PRODUCERS, 0, 0),
    // Transactions (coordinator side; see txn_coordinator). AddPartitionsToTxn,
    // EndTxn and TxnOffsetCommit stop at v4: v5 is KIP-890's transaction
    // version 2 (an epoch bump per transaction), not built.
    (super::txn_proto::ADD_PARTITIONS_TO_TXN, 0, 4),
    (super::txn_proto::ADD_OFFSETS_TO_TXN, 0, 4),
    (super::txn_proto::END_TXN, 0, 4),
    (super::txn_proto::TXN_OFFSET_COMMIT, 0, 4),
    (super::txn_proto::DESCRIBE_TRANSACTIONS, 0, 0),
    (super::txn_proto::LIST_TRANSACTIONS, 0, 2),
];

pub fn supported(key: i16, version: i16) -> bool {
    SUPPORTED
        .iter()
        .any(|&(k, min, max)| k == key && (min..=max).contains(&version))
}

/// The client software an ApiVersions v3+ request names (KIP-511); kept
/// on the connection for its log lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSoftware {
    pub name: String,
    pub version: String,
}

/// ApiVersions v3+ names the client software; earlier versions have an
/// empty body (and `None` here).
pub fn decode_api_versions(r: &mut Reader, version: i16) -> DecodeResult<Option<ClientSoftware>> {
    let mut software = None;
    if version >= 3 {
        let name = r.compact_nullable_string()?.unwrap_or_default();
        let version = r.compact_nullable_string()?.unwrap_or_default();
        r.tagged_fields()?;
        software = Some(ClientSoftware { name, version });
    }
    r.expect_end()?;
    Ok(software)
}

/// The ApiVersions answer: every row of [`SUPPORTED`], and (v3+) no
/// supported or finalized features, as a broker without features answers
/// (finalized features epoch -1).
pub fn encode_api_versions(w: &mut Writer, version: i16, error_code: i16) -> DecodeResult<()> {
    let resp = ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(
            SUPPORTED
                .iter()
                .map(|&(key, min, max)| {
                    ApiVersion::default()
                        .with_api_key(key)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect(),
        )
        .with_finalized_features_epoch(-1);
    w.message(&resp, version)
}

/// Kafka's name of an API key ("CreateTopics"), from kafka-protocol's table.
pub fn api_name(key: i16) -> String {
    ApiKey::try_from(key).map_or_else(|_| format!("key {key}"), |k| format!("{k:?}"))
}

/// The table of [`SUPPORTED`] as docs/kafka.md shows it, sorted by key.
pub fn markdown() -> String {
    let mut rows = SUPPORTED.to_vec();
    rows.sort_by_key(|r| r.0);
    let mut out = String::from("| API | key | versions |\n| --- | ---: | --- |\n");
    for (key, min, max) in rows {
        let versions = if min == max {
            min.to_string()
        } else {
            format!("{min}–{max}")
        };
        out.push_str(&format!("| {} | {key} | {versions} |\n", api_name(key)));
    }
    out
}

/// A connection's [`ClientSoftware`], once its ApiVersions v3+ named it.
#[derive(Debug, Default)]
pub struct ClientSlot(std::sync::Mutex<Option<ClientSoftware>>);

impl ClientSlot {
    pub fn set(&self, software: ClientSoftware) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(software);
    }
    pub fn get(&self) -> Option<ClientSoftware> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
