//! The `MetaLog` conformance suite against every backend available without
//! services.

use sluice::meta::conformance::run_all;
use sluice::meta::memory_log::MemoryLog;
use sluice::meta::store_log::StoreLog;
use sluice::store::{FaultConfig, FaultyStore, LocalStore, MemoryStore};
use std::sync::Arc;

#[tokio::test]
async fn memory_log_conforms() {
    run_all(Arc::new(MemoryLog::new())).await;
}

#[tokio::test]
async fn store_log_on_memory_conforms() {
    run_all(Arc::new(StoreLog::new(Arc::new(MemoryStore::new()), "meta/"))).await;
}

#[tokio::test]
async fn store_log_on_local_filesystem_conforms() {
    let dir = tempfile::tempdir().unwrap();
    run_all(Arc::new(StoreLog::new(
        Arc::new(LocalStore::open(dir.path()).unwrap()),
        "",
    )))
    .await;
}

#[tokio::test]
async fn store_log_through_the_fault_wrapper_without_faults_conforms() {
    let store = FaultyStore::new(Arc::new(MemoryStore::new()), FaultConfig::default());
    run_all(Arc::new(StoreLog::new(Arc::new(store), "m/"))).await;
}
