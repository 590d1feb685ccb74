//! The metadata log in DynamoDB (`dynamodb://TABLE[/CLUSTER]`).
//!
//! Entry N is the item `pk = "<cluster>#log"`, `sk = N`, created with
//! `PutItem` and `attribute_not_exists(pk)`: a conditional-check failure is
//! the ordinary outcome `IndexTaken`. Tailing is a strongly consistent
//! `Query` from an index on. Entries too big for an item (400 KB) are stored
//! as objects and the item points at them. Snapshots live in the object store
//! (`meta/snapshots/`), exactly as for the object-store log.

use super::log::{AppendOutcome, MetaLog};
use super::store_log::StoreLog;
use crate::ids::LogIndex;
use crate::store::{DynStore, PutOutcome, StoreError, StoreResult};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, ConsumedCapacity, KeySchemaElement, KeyType,
    ReturnConsumedCapacity, ScalarAttributeType,
};
use aws_sdk_dynamodb::Client;
use bytes::Bytes;

/// Entries above this are stored as objects (the item limit is 400 KB,
/// attribute names and keys included).
const INLINE_LIMIT: usize = 350 * 1024;

/// `dynamodb://TABLE[/CLUSTER]` → (table, cluster).
pub fn parse_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url
        .strip_prefix("dynamodb://")
        .ok_or_else(|| anyhow::anyhow!("{url:?} is not a dynamodb:// URL"))?;
    let (table, cluster) = rest.split_once('/').unwrap_or((rest, "sluice"));
    let cluster = if cluster.is_empty() { "sluice" } else { cluster };
    if table.is_empty() || !table.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
        anyhow::bail!("{url:?}: table names are 3-255 characters of [A-Za-z0-9_.-]");
    }
    Ok((table.to_string(), cluster.to_string()))
}

#[derive(Debug, Clone)]
pub struct DynamoLog {
    client: Client,
    table: String,
    pk: String,
    /// Large entries and snapshots.
    objects: DynStore,
    snapshots: StoreLog,
}

impl DynamoLog {
    /// `objects` holds large entries and snapshots (under `meta/`).
    pub async fn open(
        url: &str,
        endpoint: Option<&str>,
        region: Option<&str>,
        objects: DynStore,
    ) -> anyhow::Result<Self> {
        let (table, cluster) = parse_url(url)?;
        // A local endpoint (DynamoDB Local) still needs some region to sign with.
        let region = region.or(endpoint.map(|_| "us-east-1"));
        let sdk = crate::store::s3::sdk_config(region).await;
        let mut conf = aws_sdk_dynamodb::config::Builder::from(&sdk);
        if let Some(e) = endpoint {
            conf = conf.endpoint_url(e);
        }
        Ok(Self {
            client: Client::from_conf(conf.build()),
            table,
            pk: format!("{cluster}#log"),
            snapshots: StoreLog::new(objects.clone(), "meta/"),
            objects,
        })
    }

    /// Create the table (pk string, sk number, on demand) if it is missing,
    /// and wait until it is active. For local development and tests;
    /// production creates it with Terraform.
    pub async fn ensure_table(&self) -> anyhow::Result<()> {
        let created = self
            .client
            .create_table()
            .table_name(&self.table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name("pk")
                    .attribute_type(ScalarAttributeType::S)
                    .build()?,
            )
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name("sk")
                    .attribute_type(ScalarAttributeType::N)
                    .build()?,
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name("pk")
                    .key_type(KeyType::Hash)
                    .build()?,
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name("sk")
                    .key_type(KeyType::Range)
                    .build()?,
            )
            .send()
            .await;
        if let Err(e) = created {
            let in_use = e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception());
            if !in_use {
                return Err(anyhow::anyhow!(
                    "creating table {}: {}",
                    self.table,
                    aws_sdk_dynamodb::error::DisplayErrorContext(e)
                ));
            }
        }
        for _ in 0..100 {
            let d = self.client.describe_table().table_name(&self.table).send().await?;
            if d.table()
                .and_then(|t| t.table_status())
                .is_some_and(|s| s.as_str() == "ACTIVE")
            {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        anyhow::bail!("table {} did not become active", self.table)
    }

    /// Count one request: `sluice_meta_requests_total{op,outcome}`, and the
    /// capacity units DynamoDB says it consumed (asked for on every request;
    /// rounded up to whole units, which strongly consistent reads and all
    /// writes are on on-demand tables) as
    /// `sluice_meta_capacity_units_total{op,kind}`.
    fn account(op: &'static str, ok: bool, capacity: Option<&ConsumedCapacity>) {
        let outcome = if ok { "ok" } else { "error" };
        crate::telemetry::count("sluice_meta_requests_total", &[("op", op), ("outcome", outcome)]);
        if let Some(units) = capacity.and_then(|c| c.capacity_units()) {
            let kind = if op == "Query" { "read" } else { "write" };
            crate::telemetry::count_n(
                "sluice_meta_capacity_units_total",
                &[("op", op), ("kind", kind)],
                units.ceil() as u64,
            );
        }
    }

    fn error<E: std::error::Error + Send + Sync + 'static>(
        &self,
        op: &'static str,
        index: LogIndex,
        e: SdkError<E>,
    ) -> StoreError {
        let key = format!("{}/{}#{}", self.table, self.pk, index.0);
        let text = aws_sdk_dynamodb::error::DisplayErrorContext(&e).to_string();
        match e {
            // The service answered: the request did not take effect (throttling, 5xx).
            SdkError::ServiceError(_) | SdkError::ConstructionFailure(_) => {
                StoreError::determinate(op, &key, true, text)
            }
            // Timeouts and broken connections after sending: it may have.
            _ => StoreError::indeterminate(op, &key, text),
        }
    }

    async fn entry_body(
        &self,
        index: LogIndex,
        item: &std::collections::HashMap<String, AttributeValue>,
    ) -> StoreResult<Bytes> {
        if let Some(AttributeValue::B(b)) = item.get("entry") {
            return Ok(Bytes::from(b.clone().into_inner()));
        }
        let key = match item.get("ref") {
            Some(AttributeValue::S(k)) => k.clone(),
            _ => {
                return Err(StoreError::determinate(
                    "read",
                    &index.to_string(),
                    false,
                    "log item has neither entry nor ref",
                ))
            }
        };
        self.objects
            .get(&key, None)
            .await?
            .ok_or_else(|| StoreError::determinate("read", &key, false, "large log entry object is missing"))
    }
}

#[async_trait]
impl MetaLog for DynamoLog {
    async fn append_at(&self, index: LogIndex, entry: Bytes) -> StoreResult<AppendOutcome> {
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", AttributeValue::S(self.pk.clone()))
            .item("sk", AttributeValue::N(index.0.to_string()))
            .condition_expression("attribute_not_exists(pk)")
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        if entry.len() > INLINE_LIMIT {
            // The object's name is unique to this content; only the item that
            // wins the index makes it part of the log.
            let key = format!("meta/entries/{:020}-{:08x}", index.0, crc32c::crc32c(&entry));
            if let PutOutcome::AlreadyExists = self.objects.put_if_absent(&key, entry.clone()).await? {
                tracing::debug!(%key, "large entry object already stored");
            }
            put = put.item("ref", AttributeValue::S(key));
        } else {
            put = put.item("entry", AttributeValue::B(entry.to_vec().into()));
        }
        match put.send().await {
            Ok(r) => {
                Self::account("PutItem", true, r.consumed_capacity());
                Ok(AppendOutcome::Appended)
            }
            Err(SdkError::ServiceError(e)) if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) => {
                // A failed condition is a served request, billed like a write.
                Self::account("PutItem", true, None);
                crate::telemetry::count_n(
                    "sluice_meta_capacity_units_total",
                    &[("op", "PutItem"), ("kind", "write")],
                    1,
                );
                Ok(AppendOutcome::IndexTaken)
            }
            Err(e) => {
                Self::account("PutItem", false, None);
                Err(self.error("PutItem", index, e))
            }
        }
    }

    async fn read_from(&self, from: LogIndex, max: usize) -> StoreResult<Vec<(LogIndex, Bytes)>> {
        let mut out = Vec::new();
        let mut next = from;
        let mut start_key = None;
        loop {
            let limit = (max - out.len()).clamp(1, 1000) as i32;
            let resp = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("pk = :pk AND sk >= :from")
                .expression_attribute_values(":pk", AttributeValue::S(self.pk.clone()))
                .expression_attribute_values(":from", AttributeValue::N(from.0.to_string()))
                .limit(limit)
                .set_exclusive_start_key(start_key.take())
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            Self::account(
                "Query",
                resp.is_ok(),
                resp.as_ref().ok().and_then(|r| r.consumed_capacity()),
            );
            let resp = resp.map_err(|e| self.error("Query", from, e))?;
            for item in resp.items() {
                let index = match item.get("sk") {
                    Some(AttributeValue::N(n)) => n.parse::<u64>().map(LogIndex).ok(),
                    _ => None,
                };
                // Contiguous entries only: stop at the first gap.
                if index != Some(next) || out.len() >= max {
                    return Ok(out);
                }
                out.push((next, self.entry_body(next, item).await?));
                next = next.next();
            }
            match resp.last_evaluated_key() {
                Some(k) if out.len() < max => start_key = Some(k.clone()),
                _ => return Ok(out),
            }
        }
    }

    async fn put_snapshot(&self, index: LogIndex, snapshot: Bytes) -> StoreResult<()> {
        self.snapshots.put_snapshot(index, snapshot).await
    }

    async fn latest_snapshot(&self) -> StoreResult<Option<(LogIndex, Bytes)>> {
        self.snapshots.latest_snapshot().await
    }

    async fn truncate_before(&self, index: LogIndex) -> StoreResult<u64> {
        let mut removed = 0;
        loop {
            let resp = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("pk = :pk AND sk < :to")
                .expression_attribute_values(":pk", AttributeValue::S(self.pk.clone()))
                .expression_attribute_values(":to", AttributeValue::N(index.0.to_string()))
                .projection_expression("sk, #r")
                .expression_attribute_names("#r", "ref")
                .limit(100)
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            Self::account(
                "Query",
                resp.is_ok(),
                resp.as_ref().ok().and_then(|r| r.consumed_capacity()),
            );
            let resp = resp.map_err(|e| self.error("Query", index, e))?;
            if resp.items().is_empty() {
                break;
            }
            // One at a time, ascending: a proposer that appended on a freed
            // index must find its predecessor gone (see `client.rs`).
            for item in resp.items() {
                let sk = item.get("sk").cloned().unwrap_or(AttributeValue::N("0".into()));
                let deleted = self
                    .client
                    .delete_item()
                    .table_name(&self.table)
                    .key("pk", AttributeValue::S(self.pk.clone()))
                    .key("sk", sk)
                    .return_consumed_capacity(ReturnConsumedCapacity::Total)
                    .send()
                    .await;
                Self::account(
                    "DeleteItem",
                    deleted.is_ok(),
                    deleted.as_ref().ok().and_then(|r| r.consumed_capacity()),
                );
                deleted.map_err(|e| self.error("DeleteItem", index, e))?;
                if let Some(AttributeValue::S(k)) = item.get("ref") {
                    self.objects.delete(k).await?;
                }
                removed += 1;
            }
        }
        self.snapshots.truncate_snapshots_before(index).await?;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_table_and_an_optional_cluster() {
        assert_eq!(
            parse_url("dynamodb://t").unwrap(),
            ("t".to_string(), "sluice".to_string())
        );
        assert_eq!(
            parse_url("dynamodb://t/prod").unwrap(),
            ("t".to_string(), "prod".to_string())
        );
        assert!(parse_url("dynamodb://").is_err());
        assert!(parse_url("dynamodb://a b").is_err());
        assert!(parse_url("s3://t").is_err());
    }
}
