//! The object-store and metadata-log conformance suites against real
//! servers: an S3-compatible server that enforces conditional writes (Ceph
//! radosgw in CI) and DynamoDB Local. Skipped without their endpoints,
//! failing in CI without them (see `scripts/services.sh`).

mod support;

use sluice::meta::dynamo_log::DynamoLog;
use sluice::meta::log::MetaLog;
use sluice::meta::store_log::StoreLog;
use sluice::store::s3::{S3Options, S3Store};
use sluice::store::{DynStore, FaultConfig, FaultyStore};
use std::sync::Arc;

async fn s3_store() -> Option<(DynStore, String)> {
    let endpoint = support::service("SLUICE_TEST_S3_ENDPOINT")?;
    let bucket = std::env::var("SLUICE_TEST_S3_BUCKET").unwrap_or_else(|_| "sluice-test".into());
    let prefix = support::unique("conformance-");
    let url = format!("s3://{bucket}/{prefix}");
    let options = S3Options {
        endpoint: Some(endpoint),
        region: std::env::var("SLUICE_TEST_S3_REGION").ok(),
        force_path_style: true,
    };
    Some((Arc::new(S3Store::open(&url, &options).await.unwrap()), url))
}

#[tokio::test]
async fn s3_store_conforms() {
    let Some((store, _)) = s3_store().await else { return };
    sluice::store::conformance::run_all(store).await;
}

#[tokio::test]
async fn s3_store_conforms_through_the_fault_wrapper_without_faults() {
    let Some((store, _)) = s3_store().await else { return };
    sluice::store::conformance::run_all(Arc::new(FaultyStore::new(store, FaultConfig::default()))).await;
}

#[tokio::test]
async fn metadata_log_on_s3_conforms() {
    let Some((store, _)) = s3_store().await else { return };
    sluice::meta::conformance::run_all(Arc::new(StoreLog::new(store, "meta/"))).await;
}

async fn dynamo_log() -> Option<(DynamoLog, DynStore)> {
    let endpoint = support::service("SLUICE_TEST_DYNAMODB_ENDPOINT")?;
    let objects: DynStore = Arc::new(sluice::store::MemoryStore::new());
    let url = format!("dynamodb://{}", support::unique("sluice-test-"));
    let log = DynamoLog::open(&url, Some(&endpoint), Some("us-east-1"), objects.clone())
        .await
        .unwrap();
    log.ensure_table().await.unwrap();
    Some((log, objects))
}

#[tokio::test]
async fn metadata_log_on_dynamodb_conforms() {
    let Some((log, _)) = dynamo_log().await else { return };
    sluice::meta::conformance::run_all(Arc::new(log)).await;
}

#[tokio::test]
async fn dynamodb_entries_over_the_item_limit_are_stored_as_objects() {
    let Some((log, objects)) = dynamo_log().await else {
        return;
    };
    let big = bytes::Bytes::from(vec![7u8; 600 * 1024]);
    use sluice::ids::LogIndex;
    use sluice::meta::AppendOutcome;
    assert_eq!(
        log.append_at(LogIndex(1), big.clone()).await.unwrap(),
        AppendOutcome::Appended
    );
    assert_eq!(
        log.append_at(LogIndex(1), bytes::Bytes::from_static(b"x"))
            .await
            .unwrap(),
        AppendOutcome::IndexTaken
    );
    let read = log.read_from(LogIndex(1), 10).await.unwrap();
    assert_eq!(read, vec![(LogIndex(1), big)]);
    assert_eq!(objects.list("meta/entries/").await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_proposer_survives_injected_faults_on_a_real_s3_server() {
    use sluice::ids::NodeId;
    use sluice::meta::{Command, Meta, MetaConfig, Outcome};
    let Some((store, _)) = s3_store().await else { return };
    let faults = FaultConfig {
        seed: 3,
        error_rate: 0.05,
        slowdown_rate: 0.05,
        conflict_rate: 0.05,
        lost_reply_rate: 0.1,
        ..FaultConfig::default()
    };
    let faulty: DynStore = Arc::new(FaultyStore::new(store, faults));
    let log = Arc::new(StoreLog::new(faulty, "meta/"));
    let m = Meta::open(log, NodeId::new("n1"), MetaConfig::default()).await.unwrap();
    let reg = Command::RegisterNode {
        node: NodeId::new("n1"),
        http_addr: String::new(),
        kafka_addr: String::new(),
    };
    let Outcome::Registered(e) = m.propose(reg).await.unwrap() else {
        panic!("not registered")
    };
    m.set_epoch(e);
    for i in 0..15 {
        let out = m
            .propose(Command::CreateTopic {
                name: format!("t{i}"),
                partitions: 1,
                config: Default::default(),
            })
            .await
            .unwrap();
        assert!(matches!(out, Outcome::TopicCreated(_)), "{out:?}");
    }
    assert_eq!(m.view().topics.len(), 15);
}
