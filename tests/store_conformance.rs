//! Every backend must pass the same conformance suite.

use sluice::store::{conformance, DynStore, FaultConfig, FaultyStore, LocalStore, MemoryStore};
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_conforms() {
    conformance::run_all(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run_all(Arc::new(LocalStore::open(dir.path()).unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faulty_store_without_faults_conforms() {
    let inner: DynStore = Arc::new(MemoryStore::new());
    conformance::run_all(Arc::new(FaultyStore::new(inner, FaultConfig::default()))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counted_and_latency_model_wrappers_conform() {
    use sluice::store::latency::{LatencyModel, LatencyStore};
    use sluice::store::CountedStore;
    let inner: DynStore = Arc::new(MemoryStore::new());
    let modelled = LatencyStore::wrap(inner, LatencyModel::S3_EXPRESS, 3);
    conformance::run_all(CountedStore::wrap(modelled, "conformance")).await;
}

#[tokio::test]
async fn open_url_opens_memory_and_file_stores() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let none = sluice::store::s3::S3Options::default();
    conformance::create_if_absent_creates_once(&sluice::store::open_url(&url, &none).await.unwrap()).await;
    conformance::list_prefix_may_end_mid_segment(&sluice::store::open_url("memory://", &none).await.unwrap()).await;
    assert!(sluice::store::open_url("gs://bucket", &none).await.is_err());
}
