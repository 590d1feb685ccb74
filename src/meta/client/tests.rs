use super::*;
use crate::meta::log::MetaLog;
use crate::meta::memory_log::MemoryLog;

fn register_cmd(node: &str) -> Command {
    Command::RegisterNode {
        node: NodeId::new(node),
        http_addr: "h".into(),
        kafka_addr: "k".into(),
    }
}

async fn registered(log: &DynLog, node: &str) -> Meta {
    let m = Meta::open(log.clone(), NodeId::new(node), MetaConfig::default())
        .await
        .unwrap();
    match m.propose(register_cmd(node)).await.unwrap() {
        Outcome::Registered(e) => m.set_epoch(e),
        o => panic!("{o:?}"),
    }
    m
}

#[tokio::test]
async fn proposals_learn_their_outcome_by_applying_their_entry() {
    let log: DynLog = Arc::new(MemoryLog::new());
    let m = registered(&log, "n1").await;
    let out = m
        .propose(Command::CreateTopic {
            name: "t".into(),
            partitions: 2,
            config: Default::default(),
        })
        .await
        .unwrap();
    assert!(matches!(out, Outcome::TopicCreated(_)));
    let again = m
        .propose(Command::CreateTopic {
            name: "t".into(),
            partitions: 2,
            config: Default::default(),
        })
        .await
        .unwrap();
    assert!(matches!(
        again,
        Outcome::Rejected(crate::meta::Rejection::TopicExists(_))
    ));
}

#[tokio::test]
async fn concurrent_proposers_on_one_log_agree_on_one_history() {
    let log: DynLog = Arc::new(MemoryLog::new());
    let a = registered(&log, "a").await;
    let b = registered(&log, "b").await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let m = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            m.propose(Command::CreateTopic {
                name: format!("t{}", i / 2),
                partitions: 1,
                config: Default::default(),
            })
            .await
            .unwrap()
        }));
    }
    let outcomes: Vec<Outcome> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    // Each name was proposed twice; exactly one of each pair won.
    let created = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::TopicCreated(_)))
        .count();
    assert_eq!(created, 10);
    let end = a.applied().max(b.applied());
    a.wait_for(end).await;
    b.wait_for(end).await;
    assert_eq!(*a.view(), *b.view());
}

#[tokio::test]
async fn commands_proposed_together_land_in_one_entry() {
    let log: DynLog = Arc::new(MemoryLog::new());
    let m = registered(&log, "n1").await;
    let before = m.applied();
    let e = m.me().epoch.unwrap();
    let outs = m
        .propose_all(vec![
            Command::Heartbeat {
                node: NodeId::new("n1"),
                epoch: e,
            },
            Command::Heartbeat {
                node: NodeId::new("n1"),
                epoch: e,
            },
        ])
        .await
        .unwrap();
    assert_eq!(outs, vec![Outcome::Applied, Outcome::Applied]);
    assert_eq!(m.applied(), before.next());
}

#[tokio::test]
async fn a_new_node_starts_from_the_latest_snapshot_after_truncation() {
    let log: DynLog = Arc::new(MemoryLog::new());
    let m = registered(&log, "n1").await;
    m.propose(Command::CreateTopic {
        name: "a".into(),
        partitions: 1,
        config: Default::default(),
    })
    .await
    .unwrap();
    let s1 = m.snapshot_and_truncate().await.unwrap();
    m.propose(Command::CreateTopic {
        name: "b".into(),
        partitions: 1,
        config: Default::default(),
    })
    .await
    .unwrap();
    let s2 = m.snapshot_and_truncate().await.unwrap();
    assert!(s2 > s1);
    // Entries below the first snapshot are gone.
    assert!(log.read_from(LogIndex(1), 10).await.unwrap().is_empty());
    let fresh = Meta::open(log.clone(), NodeId::new("n2"), MetaConfig::default())
        .await
        .unwrap();
    assert_eq!(*fresh.view(), *m.view());
}

#[tokio::test]
async fn a_proposal_on_a_truncated_index_is_not_applied() {
    let log = MemoryLog::new();
    let dyn_log: DynLog = Arc::new(log.clone());
    let m = registered(&dyn_log, "n1").await;
    // A node that lags: it never polls on its own.
    let slow = slow_poll();
    let lagging = Meta::open(dyn_log.clone(), NodeId::new("n2"), slow).await.unwrap();
    assert_eq!(lagging.applied(), LogIndex(1));
    for name in ["a", "b", "c", "d"] {
        m.propose(Command::CreateTopic {
            name: name.into(),
            partitions: 1,
            config: Default::default(),
        })
        .await
        .unwrap();
    }
    // Snapshot at 5 and truncate everything below it, freeing index 2.
    let snapshot = Bytes::from(encode_snapshot(&m.view()));
    log.put_snapshot(LogIndex(5), snapshot).await.unwrap();
    log.truncate_before(LogIndex(6)).await.unwrap();
    let out = lagging.propose(register_cmd("n2")).await;
    assert!(matches!(out, Err(MetaError::Unavailable(_))), "{out:?}");
    // It reloaded the snapshot instead of applying its orphan entry.
    assert_eq!(lagging.applied(), LogIndex(5));
    assert!(lagging.view().topics.contains_key("d"));
    assert!(!lagging.view().nodes.contains_key(&NodeId::new("n2")));
}

/// The simulation, seed 146: a stalled node lagging below a truncation
/// read back entries written on freed slots (its own, whose replies were
/// lost, or any other laggard's) and applied them as the log. Reading on
/// from a slot whose predecessor no longer holds the entry this view
/// applied there must reload the snapshot instead.
#[tokio::test]
async fn entries_on_slots_freed_by_truncation_are_never_read_as_the_log() {
    let log = MemoryLog::new();
    let dyn_log: DynLog = Arc::new(log.clone());
    let m = registered(&dyn_log, "n1").await;
    let slow = slow_poll();
    let lagging = Meta::open(dyn_log.clone(), NodeId::new("n2"), slow).await.unwrap();
    assert_eq!(lagging.applied(), LogIndex(1));
    for name in ["a", "b", "c", "d"] {
        m.propose(Command::CreateTopic {
            name: name.into(),
            partitions: 1,
            config: Default::default(),
        })
        .await
        .unwrap();
    }
    let snapshot = Bytes::from(encode_snapshot(&m.view()));
    log.put_snapshot(LogIndex(5), snapshot).await.unwrap();
    log.truncate_before(LogIndex(6)).await.unwrap();
    // Another laggard (or this node, whose reply was lost) wrote on the
    // freed slots 2 and 3; nothing there is the log any more.
    for (index, topic) in [(2, "orphan-1"), (3, "orphan-2")] {
        let entry = LogEntry {
            proposer: Proposer {
                node: NodeId::new("n3"),
                epoch: None,
            },
            proposal_id: index,
            commands: vec![Command::CreateTopic {
                name: topic.into(),
                partitions: 1,
                config: Default::default(),
            }],
        };
        let put = log.append_at(LogIndex(index), Bytes::from(encode_entry(&entry))).await;
        assert_eq!(put.unwrap(), AppendOutcome::Appended);
    }
    assert!(lagging.sync(Duration::from_secs(5)).await);
    let view = lagging.view();
    assert!(
        !view.topics.contains_key("orphan-1"),
        "applied an entry on a freed slot"
    );
    assert!(!view.topics.contains_key("orphan-2"));
    assert_eq!(view.applied, LogIndex(5), "it moved to the snapshot instead");
    assert!(view.topics.contains_key("d"));
}

/// A log whose one-entry reads (a proposer checking its entry's
/// predecessor) fail while `blind` is set.
#[derive(Debug, Clone, Default)]
struct BlindToPredecessors {
    inner: MemoryLog,
    blind: Arc<std::sync::atomic::AtomicBool>,
}

#[async_trait::async_trait]
impl MetaLog for BlindToPredecessors {
    async fn append_at(&self, index: LogIndex, entry: Bytes) -> crate::store::StoreResult<AppendOutcome> {
        self.inner.append_at(index, entry).await
    }
    async fn read_from(&self, from: LogIndex, max: usize) -> crate::store::StoreResult<Vec<(LogIndex, Bytes)>> {
        if max == 1 && self.blind.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(crate::store::StoreError::determinate(
                "get",
                "log",
                true,
                "injected: the predecessor read failed",
            ));
        }
        self.inner.read_from(from, max).await
    }
    async fn put_snapshot(&self, index: LogIndex, snapshot: Bytes) -> crate::store::StoreResult<()> {
        self.inner.put_snapshot(index, snapshot).await
    }
    async fn latest_snapshot(&self) -> crate::store::StoreResult<Option<(LogIndex, Bytes)>> {
        self.inner.latest_snapshot().await
    }
    async fn truncate_before(&self, index: LogIndex) -> crate::store::StoreResult<u64> {
        self.inner.truncate_before(index).await
    }
}

/// Simulation seed 504: a restarting node whose view lagged behind
/// truncation appended its registration on a freed index, could not read
/// the predecessor (the store was failing requests), took that for "it
/// exists" and registered again at its old epoch, in a view of its own.
#[tokio::test(start_paused = true)]
async fn an_append_whose_predecessor_cannot_be_read_is_never_applied_on_a_truncated_index() {
    let log = BlindToPredecessors::default();
    let dyn_log: DynLog = Arc::new(log.clone());
    let m = registered(&dyn_log, "n1").await;
    let slow = slow_poll();
    let lagging = Meta::open(dyn_log.clone(), NodeId::new("n2"), slow).await.unwrap();
    assert_eq!(lagging.applied(), LogIndex(1));
    for name in ["a", "b", "c", "d"] {
        m.propose(Command::CreateTopic {
            name: name.into(),
            partitions: 1,
            config: Default::default(),
        })
        .await
        .unwrap();
    }
    let snapshot = Bytes::from(encode_snapshot(&m.view()));
    log.put_snapshot(LogIndex(5), snapshot).await.unwrap();
    // Entries 1-3 are freed (2 is where the lagging node appends); 4 and 5
    // stay, as a real truncation keeps the entries since the previous snapshot.
    log.truncate_before(LogIndex(4)).await.unwrap();

    log.blind.store(true, std::sync::atomic::Ordering::SeqCst);
    let out = lagging.propose(register_cmd("n2")).await;
    assert!(matches!(out, Err(MetaError::Unavailable(_))), "{out:?}");
    assert!(
        !lagging.view().nodes.contains_key(&NodeId::new("n2")),
        "the orphan registration must not be applied"
    );
    // Still blind: reading on would apply the orphan, so the view waits.
    assert!(!lagging.sync(Duration::from_secs(5)).await);
    assert!(!lagging.view().nodes.contains_key(&NodeId::new("n2")));

    log.blind.store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(lagging.sync(Duration::from_secs(5)).await);
    assert!(lagging.applied() >= LogIndex(5));
    assert!(lagging.view().topics.contains_key("d"));
    // A registration now lands after the snapshot, at epoch 1, as n1's view sees.
    match lagging.propose(register_cmd("n2")).await.unwrap() {
        Outcome::Registered(e) => assert_eq!(e, NodeEpoch(1)),
        o => panic!("{o:?}"),
    }
    m.wait_for(lagging.applied()).await;
    assert_eq!(*m.view(), *lagging.view());
}

#[tokio::test]
async fn ambiguous_and_failed_appends_apply_each_command_exactly_once() {
    use crate::meta::store_log::StoreLog;
    use crate::store::{FaultConfig, FaultyStore, MemoryStore};
    let faults = FaultConfig {
        seed: 7,
        error_rate: 0.1,
        slowdown_rate: 0.05,
        conflict_rate: 0.05,
        lost_reply_rate: 0.2,
        ..FaultConfig::default()
    };
    let store = FaultyStore::new(Arc::new(MemoryStore::new()), faults);
    let log: DynLog = Arc::new(StoreLog::new(Arc::new(store.clone()), ""));
    let a = registered(&log, "a").await;
    let b = registered(&log, "b").await;
    let mut tasks = Vec::new();
    // Sequential proposals per node, so each is its own append.
    for (k, m) in [a.clone(), b.clone()].into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let mut outs = Vec::new();
            for i in 0..15 {
                let cmd = Command::CreateTopic {
                    name: format!("t{k}-{i}"),
                    partitions: 1,
                    config: Default::default(),
                };
                outs.push(m.propose(cmd).await.unwrap());
            }
            outs
        }));
    }
    for t in tasks {
        for out in t.await.unwrap() {
            assert!(matches!(out, Outcome::TopicCreated(_)), "{out:?}");
        }
    }
    assert!(
        store.stats().lost_replies > 0,
        "the test must exercise ambiguous appends"
    );
    let end = a.applied().max(b.applied());
    a.wait_for(end).await;
    b.wait_for(end).await;
    assert_eq!(a.view().topics.len(), 30);
    assert_eq!(*a.view(), *b.view());
}

#[tokio::test]
async fn sync_reads_what_another_node_committed_without_waiting_for_a_poll() {
    let log: DynLog = Arc::new(MemoryLog::new());
    let a = registered(&log, "a").await;
    let slow = slow_poll();
    let b = Meta::open(log.clone(), NodeId::new("b"), slow).await.unwrap();
    let created = a
        .propose(Command::CreateTopic {
            name: "t".into(),
            partitions: 1,
            config: Default::default(),
        })
        .await
        .unwrap();
    assert!(matches!(created, Outcome::TopicCreated(_)));
    assert!(!b.view().topics.contains_key("t"), "b polls only hourly");
    assert!(
        b.sync(Duration::from_secs(5)).await,
        "the log is readable: sync reaches its end"
    );
    assert!(b.view().topics.contains_key("t"));
    assert_eq!(b.applied(), a.applied());
}

#[tokio::test]
async fn sync_from_below_the_logs_truncation_reaches_the_newest_state() {
    let log: DynLog = Arc::new(MemoryLog::new());
    let a = registered(&log, "a").await;
    let slow = slow_poll();
    let b = Meta::open(log.clone(), NodeId::new("b"), slow).await.unwrap();
    let behind = b.applied();
    // Three snapshots while b does not read: the slots after its view are
    // gone (each truncation keeps the entries since the previous snapshot).
    for name in ["t1", "t2", "t3"] {
        a.propose(Command::CreateTopic {
            name: name.into(),
            partitions: 1,
            config: Default::default(),
        })
        .await
        .unwrap();
        a.snapshot_and_truncate().await.unwrap();
    }
    assert!(log.read_from(behind.next(), 10).await.unwrap().is_empty());
    assert!(
        b.sync(Duration::from_secs(5)).await,
        "the log is readable: sync reaches its end"
    );
    assert!(
        b.view().topics.contains_key("t3"),
        "an empty read below the truncation is not the log's end"
    );
    assert_eq!(b.applied(), a.applied());
}

#[tokio::test]
async fn sync_says_when_it_could_not_reach_the_log() {
    use crate::meta::store_log::StoreLog;
    use crate::store::{FaultConfig, FaultyStore, MemoryStore};
    let store = FaultyStore::new(Arc::new(MemoryStore::new()), FaultConfig::default());
    let log: DynLog = Arc::new(StoreLog::new(Arc::new(store.clone()), ""));
    let a = registered(&log, "a").await;
    assert!(a.sync(Duration::from_secs(5)).await);

    store.set_unavailable(true);
    assert!(
        !a.sync(Duration::from_secs(5)).await,
        "an unreadable log must not pass for a caught-up view"
    );

    store.set_unavailable(false);
    assert!(a.sync(Duration::from_secs(5)).await);
}

/// A log that stops answering while frozen, like a server stopped by
/// `SIGSTOP`: requests neither fail nor return until it thaws.
#[derive(Debug, Clone, Default)]
struct Freezable {
    inner: MemoryLog,
    frozen: Arc<std::sync::atomic::AtomicBool>,
}

impl Freezable {
    fn freeze(&self, frozen: bool) {
        self.frozen.store(frozen, std::sync::atomic::Ordering::SeqCst);
    }
    async fn thawed(&self) {
        while self.frozen.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[async_trait::async_trait]
impl MetaLog for Freezable {
    async fn append_at(&self, index: LogIndex, entry: Bytes) -> crate::store::StoreResult<AppendOutcome> {
        self.thawed().await;
        self.inner.append_at(index, entry).await
    }
    async fn read_from(&self, from: LogIndex, max: usize) -> crate::store::StoreResult<Vec<(LogIndex, Bytes)>> {
        self.thawed().await;
        self.inner.read_from(from, max).await
    }
    async fn put_snapshot(&self, index: LogIndex, snapshot: Bytes) -> crate::store::StoreResult<()> {
        self.thawed().await;
        self.inner.put_snapshot(index, snapshot).await
    }
    async fn latest_snapshot(&self) -> crate::store::StoreResult<Option<(LogIndex, Bytes)>> {
        self.thawed().await;
        self.inner.latest_snapshot().await
    }
    async fn truncate_before(&self, index: LogIndex) -> crate::store::StoreResult<u64> {
        self.thawed().await;
        self.inner.truncate_before(index).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_proposal_to_a_store_that_stopped_answering_fails_within_the_request_timeout() {
    let frozen = Freezable::default();
    let log: DynLog = Arc::new(frozen.clone());
    let config = MetaConfig {
        request_timeout: Duration::from_secs(2),
        propose_timeout: Duration::from_secs(10),
        ..MetaConfig::default()
    };
    let m = Meta::open(log.clone(), NodeId::new("n1"), config.clone())
        .await
        .unwrap();
    match m.propose(register_cmd("n1")).await.unwrap() {
        Outcome::Registered(e) => m.set_epoch(e),
        o => panic!("{o:?}"),
    }
    let create = |name: &str| Command::CreateTopic {
        name: name.into(),
        partitions: 1,
        config: Default::default(),
    };

    frozen.freeze(true);
    assert!(m.reachable(), "nothing has noticed yet");
    let started = Instant::now();
    let first = m.propose(create("a")).await;
    assert!(matches!(first, Err(MetaError::Unavailable(_))), "{first:?}");
    assert!(
        started.elapsed() <= config.request_timeout,
        "the first proposal gave up after {:?}, past the request timeout",
        started.elapsed()
    );
    assert!(!m.reachable(), "the store is now known to be unreachable");
    let started = Instant::now();
    assert!(m.propose(create("b")).await.is_err());
    assert!(started.elapsed() <= config.request_timeout);

    frozen.freeze(false);
    let after = m.propose(create("c")).await;
    assert!(matches!(after, Ok(Outcome::TopicCreated(_))), "{after:?}");
    assert!(m.reachable());
}

#[test]
fn an_idle_tail_backs_off_to_its_cap_and_a_slow_base_is_kept() {
    let config = MetaConfig::default();
    let gaps: Vec<u64> = (0..6).map(|q| poll_gap(&config, q).as_millis() as u64).collect();
    assert_eq!(gaps, [100, 200, 400, 800, 800, 800]);
    assert_eq!(poll_gap(&config, u32::MAX), Duration::from_millis(800));
    let slow = slow_poll();
    assert_eq!(poll_gap(&slow, 0), Duration::from_secs(3600));
    assert_eq!(poll_gap(&slow, 5), Duration::from_secs(3600));
}

/// A client that never polls by itself within a test: it learns only
/// when it syncs or proposes.
fn slow_poll() -> MetaConfig {
    MetaConfig {
        poll_interval: Duration::from_secs(3600),
        ..MetaConfig::default()
    }
}
