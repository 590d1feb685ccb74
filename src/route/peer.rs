//! The peer credential: how a node tells a request another node forwarded
//! from one a client sent.
//!
//! A forwarded request is served without forwarding it again, and first
//! makes the owner catch up with the forwarder's metadata log index (a wait
//! of up to a second, and a log read). Honoured from anyone, that marker
//! would let any client make a node wait and read its store on every
//! request. So forwarded requests also carry [`PEER_HEADER`], a credential
//! only nodes have: it is derived from 32 random bytes kept in the shared
//! object store (`cluster/peer-key`), created by the first node that needs
//! it (create-if-absent, so every node ends up with the same bytes). Whoever
//! can read the bucket can read every record anyway; a client of the HTTP or
//! Kafka port cannot.
//!
//! The key is loaded by a background task at start, retrying until the store
//! answers. Until then this node forwards nothing (503) and honours no peer
//! mark: a request can never cause the store read itself.

use crate::auth::TokenHash;
use crate::store::{DynStore, PutOutcome};
use bytes::Bytes;
use rand::TryRngCore;
use std::sync::OnceLock;
use std::time::Duration;

pub use crate::api::PEER_HEADER;

/// Where the cluster's peer key is kept in the data store.
pub const KEY: &str = "cluster/peer-key";
const KEY_BYTES: usize = 32;

/// The peer credential of this node's cluster, once loaded.
#[derive(Debug, Default)]
pub struct PeerKey {
    credential: OnceLock<(String, TokenHash)>,
}

impl PeerKey {
    /// The value to send in [`PEER_HEADER`], once loaded.
    pub fn credential(&self) -> Option<&str> {
        self.credential.get().map(|(c, _)| c.as_str())
    }

    /// Whether `presented` is this cluster's credential (constant time).
    /// `false` until the key is loaded.
    pub fn verify(&self, presented: &str) -> bool {
        self.credential
            .get()
            .is_some_and(|(_, hash)| hash.matches(&TokenHash::of(presented)))
    }

    /// Use `key` (the stored random bytes).
    pub fn set(&self, key: &[u8]) {
        let credential: String = TokenHash::of(&hex(key)).0.iter().map(|b| format!("{b:02x}")).collect();
        let hash = TokenHash::of(&credential);
        let _ = self.credential.set((credential, hash));
    }

    /// Load the cluster's key from `store`, creating it if no node has yet;
    /// retries (with backoff up to 5 s) until the store answers.
    pub async fn load(&self, store: &DynStore) {
        let mut backoff = Duration::from_millis(100);
        loop {
            match load_or_create(store).await {
                Ok(key) => {
                    self.set(&key);
                    tracing::debug!("peer key loaded");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot load the peer key yet; forwarding waits for it");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// The stored key, or a new one if there is none. A create that may or may
/// not have landed is settled by reading back.
async fn load_or_create(store: &DynStore) -> anyhow::Result<Bytes> {
    for _ in 0..3 {
        if let Some(key) = store.get(KEY, None).await? {
            anyhow::ensure!(
                key.len() == KEY_BYTES,
                "{KEY} holds {} bytes, not {KEY_BYTES}",
                key.len()
            );
            return Ok(key);
        }
        let mut fresh = [0u8; KEY_BYTES];
        rand::rngs::OsRng
            .try_fill_bytes(&mut fresh)
            .map_err(|e| anyhow::anyhow!("the OS random source failed: {e}"))?;
        match store.put_if_absent(KEY, Bytes::copy_from_slice(&fresh)).await {
            Ok(PutOutcome::Created) => return Ok(Bytes::copy_from_slice(&fresh)),
            // Another node won the race, or our create landed with its reply lost.
            Ok(PutOutcome::AlreadyExists) => continue,
            Err(e) if e.is_indeterminate() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    anyhow::bail!("{KEY} neither readable nor creatable")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use std::sync::Arc;

    #[tokio::test]
    async fn nodes_sharing_a_store_share_the_credential_and_others_do_not() {
        let store: DynStore = Arc::new(MemoryStore::new());
        let (a, b) = (PeerKey::default(), PeerKey::default());
        assert!(!a.verify("anything"), "nothing is a peer before the key is loaded");
        assert_eq!(a.credential(), None);
        a.load(&store).await;
        b.load(&store).await;
        let cred = a.credential().unwrap().to_string();
        assert_eq!(b.credential(), Some(cred.as_str()));
        assert!(b.verify(&cred));
        assert!(!b.verify(""));
        assert!(!b.verify(&cred[1..]));

        let other: DynStore = Arc::new(MemoryStore::new());
        let c = PeerKey::default();
        c.load(&other).await;
        assert!(!c.verify(&cred), "another cluster's nodes are not peers");
    }

    #[tokio::test]
    async fn a_damaged_key_is_an_error_not_a_guess() {
        let store: DynStore = Arc::new(MemoryStore::new());
        store.put_if_absent(KEY, Bytes::from_static(b"short")).await.unwrap();
        let err = load_or_create(&store).await.unwrap_err();
        assert!(err.to_string().contains("holds 5 bytes"), "{err}");
    }
}
