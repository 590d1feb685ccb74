//! Opening a metadata log from its `--metadata` URL: the one place that
//! knows every backend, so the [`MetaLog`](super::log::MetaLog) trait and the
//! backends do not depend on each other.

use super::log::DynLog;

/// Open a metadata log from its URL: `memory://`, `dynamodb://TABLE[/CLUSTER]`,
/// or any object-store URL (the log lives under it). `objects` holds what a
/// DynamoDB log keeps outside the table (snapshots, large entries).
pub async fn open_url(
    url: &str,
    s3: &crate::store::s3::S3Options,
    dynamodb_endpoint: Option<&str>,
    objects: crate::store::DynStore,
) -> anyhow::Result<DynLog> {
    if url.starts_with("memory://") {
        return Ok(std::sync::Arc::new(super::memory_log::MemoryLog::new()));
    }
    if url.starts_with("dynamodb://") {
        let log = super::dynamo_log::DynamoLog::open(url, dynamodb_endpoint, s3.region.as_deref(), objects).await?;
        return Ok(std::sync::Arc::new(log));
    }
    let store = crate::store::CountedStore::wrap(crate::store::open_url(url, s3).await?, "meta");
    Ok(std::sync::Arc::new(super::store_log::StoreLog::new(store, "")))
}
