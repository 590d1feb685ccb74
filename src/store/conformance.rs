//! The behaviour every [`ObjectStore`] backend must show, as runnable checks.
//!
//! Higher layers rely on these properties (create-if-absent has one winner,
//! ranges are cut at the end, listing is sorted and prefix-exact, ...), so
//! every backend runs the same suite: [`run_all`]. Each check panics with a
//! message naming the broken behaviour.
//!
//! Every check writes under its own fresh prefix
//! (`conformance/<check>/<unique>/`) and deletes what it wrote, so the suite
//! can run against a shared real bucket, concurrently with other runs.

use super::{DynStore, ObjectMeta, PutOutcome, StoreError};
use bytes::Bytes;

/// Run every check against `store`.
pub async fn run_all(store: DynStore) {
    create_if_absent_creates_once(&store).await;
    get_missing_is_none(&store).await;
    ranged_get_returns_exact_bytes(&store).await;
    range_past_end_is_cut(&store).await;
    list_is_sorted_and_prefix_filtered(&store).await;
    list_prefix_may_end_mid_segment(&store).await;
    delete_is_idempotent(&store).await;
    concurrent_creates_have_one_winner(&store).await;
    large_object_round_trips(&store).await;
    invalid_keys_are_refused_and_change_nothing(&store).await;
}

/// A second create of a key reports `AlreadyExists` and keeps the first body.
pub async fn create_if_absent_creates_once(store: &DynStore) {
    let p = unique_prefix("create-once");
    let key = format!("{p}object");
    assert_eq!(
        put(store, &key, b"first").await,
        PutOutcome::Created,
        "first create of {key}"
    );
    assert_eq!(
        put(store, &key, b"second").await,
        PutOutcome::AlreadyExists,
        "second create of {key}"
    );
    assert_eq!(
        get(store, &key).await.as_deref(),
        Some(&b"first"[..]),
        "the first body must survive"
    );
    // An empty body is an object too.
    let empty = format!("{p}empty");
    assert_eq!(put(store, &empty, b"").await, PutOutcome::Created);
    assert_eq!(get(store, &empty).await.as_deref(), Some(&b""[..]));
    assert_eq!(put(store, &empty, b"x").await, PutOutcome::AlreadyExists);
    cleanup(store, &p).await;
}

/// Reading a key that was never written is `Ok(None)`, with or without a
/// range, even when the key is a "directory" of other keys.
pub async fn get_missing_is_none(store: &DynStore) {
    let p = unique_prefix("get-missing");
    let key = format!("{p}missing");
    assert_eq!(get(store, &key).await, None);
    assert_eq!(store.get(&key, Some(0..10)).await.unwrap(), None);
    put(store, &format!("{p}dir/child"), b"c").await;
    assert_eq!(
        get(store, &format!("{p}dir")).await,
        None,
        "a key prefix is not an object"
    );
    assert_eq!(get(store, &format!("{p}dir/child/grandchild")).await, None);
    cleanup(store, &p).await;
}

/// A ranged read returns exactly the bytes of the range.
pub async fn ranged_get_returns_exact_bytes(store: &DynStore) {
    let p = unique_prefix("ranged-get");
    let key = format!("{p}object");
    let body = pattern(1000);
    put(store, &key, &body).await;
    for range in [0..1, 10..20, 999..1000, 0..1000, 500..500, 255..513] {
        let got = store
            .get(&key, Some(range.clone()))
            .await
            .unwrap()
            .expect("object exists");
        let want = &body[range.start as usize..range.end as usize];
        assert_eq!(&got[..], want, "bytes of range {range:?}");
    }
    cleanup(store, &p).await;
}

/// A range reaching past the end is cut at the end; starting at the end
/// gives no bytes; starting past the end is a determinate error.
pub async fn range_past_end_is_cut(store: &DynStore) {
    let p = unique_prefix("range-past-end");
    let key = format!("{p}object");
    let body = pattern(1000);
    put(store, &key, &body).await;
    let got = store.get(&key, Some(990..2000)).await.unwrap().unwrap();
    assert_eq!(&got[..], &body[990..], "range 990..2000 of a 1000-byte object");
    let got = store.get(&key, Some(0..u64::MAX)).await.unwrap().unwrap();
    assert_eq!(&got[..], &body[..]);
    let got = store.get(&key, Some(1000..1001)).await.unwrap().unwrap();
    assert!(got.is_empty(), "a range starting at the end is empty");
    let err = store
        .get(&key, Some(1001..1002))
        .await
        .expect_err("a range starting past the end");
    assert!(!err.is_indeterminate(), "{err}");
    cleanup(store, &p).await;
}

/// `list` returns exactly the keys starting with the prefix, sorted
/// byte-wise by full key (not directory by directory), with sizes.
pub async fn list_is_sorted_and_prefix_filtered(store: &DynStore) {
    let p = unique_prefix("list-sorted");
    let other = unique_prefix("list-sorted");
    // Written out of order; `a-x` < `a/1` byte-wise ('-' < '/') although a
    // naive directory walk would visit the directory `a` first.
    for (name, len) in [
        ("b", 3),
        ("a/2", 2),
        ("a/10", 10),
        ("a-x", 1),
        ("a/1", 1),
        ("ab", 4),
        ("a/1x/y", 5),
    ] {
        put(store, &format!("{p}{name}"), &pattern(len)).await;
    }
    put(store, &format!("{other}a/1"), b"elsewhere").await;

    let want = |names: &[(&str, u64)]| -> Vec<ObjectMeta> {
        names
            .iter()
            .map(|(name, size)| ObjectMeta {
                key: format!("{p}{name}"),
                size: *size,
            })
            .collect()
    };
    assert_eq!(
        store.list(&p).await.unwrap(),
        want(&[
            ("a-x", 1),
            ("a/1", 1),
            ("a/10", 10),
            ("a/1x/y", 5),
            ("a/2", 2),
            ("ab", 4),
            ("b", 3)
        ]),
        "list({p:?})"
    );
    assert_eq!(
        store.list(&format!("{p}a/")).await.unwrap(),
        want(&[("a/1", 1), ("a/10", 10), ("a/1x/y", 5), ("a/2", 2)])
    );
    assert_eq!(store.list(&format!("{p}b")).await.unwrap(), want(&[("b", 3)]));
    assert_eq!(store.list(&format!("{p}c")).await.unwrap(), vec![]);
    cleanup(store, &p).await;
    cleanup(store, &other).await;
}

/// A prefix may end in the middle of a segment (`meta/log/000`) or right
/// after a separator (`wal/n1/3/`, which must not match `wal/n1/30/...`).
pub async fn list_prefix_may_end_mid_segment(store: &DynStore) {
    let p = unique_prefix("list-mid-segment");
    for name in [
        "meta/log/0001",
        "meta/log/0002",
        "meta/log/0010",
        "meta/log/0100",
        "meta/logs/x",
        "wal/n1/3/1",
        "wal/n1/30/1",
    ] {
        put(store, &format!("{p}{name}"), b"x").await;
    }
    let base = p.as_str();
    let keys = |prefix: String| async move {
        let listed = store
            .list(&prefix)
            .await
            .unwrap_or_else(|e| panic!("list {prefix:?}: {e}"));
        listed
            .into_iter()
            .map(|m| m.key[base.len()..].to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        keys(format!("{p}meta/log/000")).await,
        ["meta/log/0001", "meta/log/0002"]
    );
    assert_eq!(
        keys(format!("{p}meta/log/00")).await,
        ["meta/log/0001", "meta/log/0002", "meta/log/0010"]
    );
    assert_eq!(
        keys(format!("{p}meta/lo")).await,
        [
            "meta/log/0001",
            "meta/log/0002",
            "meta/log/0010",
            "meta/log/0100",
            "meta/logs/x"
        ]
    );
    assert_eq!(keys(format!("{p}wal/n1/3/")).await, ["wal/n1/3/1"]);
    assert_eq!(keys(format!("{p}wal/n1/3")).await, ["wal/n1/3/1", "wal/n1/30/1"]);
    assert_eq!(keys(format!("{p}wal/n2/")).await, Vec::<String>::new());
    cleanup(store, &p).await;
}

/// Deleting a missing key succeeds; a deleted key reads as missing, leaves
/// listings, and can be created again.
pub async fn delete_is_idempotent(store: &DynStore) {
    let p = unique_prefix("delete");
    let key = format!("{p}object");
    store.delete(&key).await.expect("deleting a never-written key");
    put(store, &key, b"v1").await;
    store.delete(&key).await.unwrap();
    assert_eq!(get(store, &key).await, None);
    assert_eq!(store.list(&p).await.unwrap(), vec![]);
    store.delete(&key).await.expect("deleting an already deleted key");
    assert_eq!(
        put(store, &key, b"v2").await,
        PutOutcome::Created,
        "a deleted key is free again"
    );
    assert_eq!(get(store, &key).await.as_deref(), Some(&b"v2"[..]));
    cleanup(store, &p).await;
}

/// 16 tasks racing to create one key: exactly one `Created`, all others
/// `AlreadyExists`, and the object holds the winner's bytes.
pub async fn concurrent_creates_have_one_winner(store: &DynStore) {
    let p = unique_prefix("concurrent-create");
    let key = format!("{p}contended");
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(16));
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (store, key, barrier) = (store.clone(), key.clone(), barrier.clone());
            tokio::spawn(async move {
                let body = Bytes::from(format!("writer {i} ").repeat(100 + i));
                barrier.wait().await;
                (store.put_if_absent(&key, body.clone()).await, body)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        let (outcome, body) = task.await.expect("writer task panicked");
        match outcome.expect("a racing create must not fail") {
            PutOutcome::Created => winners.push(body),
            PutOutcome::AlreadyExists => {}
        }
    }
    assert_eq!(winners.len(), 1, "exactly one racing create may win");
    assert_eq!(
        get(store, &key).await,
        Some(winners.pop().unwrap()),
        "the object holds the winner's bytes"
    );
    cleanup(store, &p).await;
}

/// A 4 MiB object reads back whole and by range, and lists with its size.
pub async fn large_object_round_trips(store: &DynStore) {
    let p = unique_prefix("large");
    let key = format!("{p}object");
    let body = pattern(4 << 20);
    put(store, &key, &body).await;
    assert!(
        get(store, &key).await.unwrap() == body,
        "4 MiB object must read back byte-exact"
    );
    let middle = store.get(&key, Some(1_000_003..3_000_017)).await.unwrap().unwrap();
    assert!(
        middle[..] == body[1_000_003..3_000_017],
        "ranged read inside a 4 MiB object"
    );
    assert_eq!(store.list(&p).await.unwrap(), vec![ObjectMeta { key, size: 4 << 20 }]);
    cleanup(store, &p).await;
}

/// Keys breaking the key rules are refused by every operation with a
/// determinate, non-retryable error, and nothing is written (in particular
/// `..` cannot escape to a sibling key).
pub async fn invalid_keys_are_refused_and_change_nothing(store: &DynStore) {
    let p = unique_prefix("invalid-keys");
    let bad = [
        String::new(),
        format!("/{p}abs"),
        format!("{p}a//b"),
        format!("{p}sub/../escaped"),
        format!("{p}./dot"),
        format!("{p}trailing/"),
        format!("{p}with space"),
        format!("{p}ünïcode"),
        format!("{p}{}", "x".repeat(1025)),
    ];
    let refused = |op: &str, key: &str, err: StoreError| {
        assert!(!err.is_indeterminate() && !err.retryable, "{op} {key:?}: {err}");
    };
    for key in &bad {
        match store.put_if_absent(key, Bytes::from_static(b"x")).await {
            Err(err) => refused("put", key, err),
            Ok(outcome) => panic!("put of invalid key {key:?} returned {outcome:?}"),
        }
        match store.get(key, None).await {
            Err(err) => refused("get", key, err),
            Ok(got) => panic!("get of invalid key {key:?} returned {got:?}"),
        }
        match store.delete(key).await {
            Err(err) => refused("delete", key, err),
            Ok(()) => panic!("delete of invalid key {key:?} succeeded"),
        }
    }
    for prefix in ["../", "a//", "/abs", "a b"] {
        match store.list(prefix).await {
            Err(err) => refused("list", prefix, err),
            Ok(listed) => panic!("list of invalid prefix {prefix:?} returned {listed:?}"),
        }
    }
    assert_eq!(get(store, &format!("{p}escaped")).await, None, "`..` must not escape");
    assert_eq!(store.list(&p).await.unwrap(), vec![], "invalid keys must write nothing");
}

/// A prefix no other run uses: `conformance/<check>/<time>-<random>/`.
fn unique_prefix(check: &str) -> String {
    use crate::clock::Clock as _;
    let ms = crate::clock::SystemClock::default().now_ms();
    format!("conformance/{check}/{ms:x}-{:016x}/", rand::random::<u64>())
}

/// Deterministic, non-repeating-looking bytes, so misplaced ranges show up.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i ^ (i >> 8) ^ (i >> 16)) as u8).collect()
}

async fn put(store: &DynStore, key: &str, body: &[u8]) -> PutOutcome {
    store
        .put_if_absent(key, Bytes::copy_from_slice(body))
        .await
        .unwrap_or_else(|e| panic!("put {key:?}: {e}"))
}

async fn get(store: &DynStore, key: &str) -> Option<Bytes> {
    store
        .get(key, None)
        .await
        .unwrap_or_else(|e| panic!("get {key:?}: {e}"))
}

/// Delete everything a check wrote, then verify it is gone.
async fn cleanup(store: &DynStore, prefix: &str) {
    for meta in store
        .list(prefix)
        .await
        .unwrap_or_else(|e| panic!("list {prefix:?}: {e}"))
    {
        store
            .delete(&meta.key)
            .await
            .unwrap_or_else(|e| panic!("delete {:?}: {e}", meta.key));
    }
    assert_eq!(store.list(prefix).await.unwrap(), vec![], "cleanup of {prefix:?}");
}
