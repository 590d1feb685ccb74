//! The seeded fault schedule: a list of timed faults, each with its own end,
//! drawn entirely from the seed before the run starts.

use rand::rngs::SmallRng;
use rand::Rng;
use sluice::store::FaultConfig;
use std::time::Duration;

/// The nodes of the simulated cluster.
pub const NODES: usize = 3;
/// Node timeout of `support::config` (heartbeat 1 s, timeout 4 s).
pub const NODE_TIMEOUT: Duration = Duration::from_secs(4);

/// Which of a node's store connections a degradation hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Data,
    Wal,
    Meta,
    All,
}

#[derive(Debug, Clone)]
pub enum Fault {
    /// `Node::crash()`; the supervisor restarts the id after `down`.
    Crash { down: Duration },
    /// A clean shutdown (hand-off), then a restart after `down`.
    Shutdown { down: Duration },
    /// The node's metadata-log connection is cut for `dur`.
    MetaPartition { dur: Duration },
    /// The node's data and WAL connections are cut for `dur`.
    StorePartition { dur: Duration },
    /// Every request of the node waits seconds: the closest thing to a
    /// paused process that an in-process node allows.
    Stall { dur: Duration, latency_ms: (u64, u64) },
    /// Slow, failing or ambiguous requests on some of the node's connections.
    Degrade {
        kind: &'static str,
        target: Target,
        config: FaultConfig,
        dur: Duration,
    },
}

impl Fault {
    /// The name fault counts are reported under.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Crash { .. } => "crash",
            Fault::Shutdown { .. } => "clean_shutdown",
            Fault::MetaPartition { dur } if *dur > NODE_TIMEOUT => "meta_partition_long",
            Fault::MetaPartition { .. } => "meta_partition_short",
            Fault::StorePartition { .. } => "store_partition",
            Fault::Stall { .. } => "stall",
            Fault::Degrade { kind, .. } => kind,
        }
    }

    /// How long the fault itself lasts.
    pub fn duration(&self) -> Duration {
        match self {
            Fault::Crash { down } | Fault::Shutdown { down } => *down,
            Fault::MetaPartition { dur }
            | Fault::StorePartition { dur }
            | Fault::Stall { dur, .. }
            | Fault::Degrade { dur, .. } => *dur,
        }
    }

    /// Crashes, shutdowns, partitions and stalls take a node out of service.
    pub fn disruptive(&self) -> bool {
        !matches!(self, Fault::Degrade { .. })
    }

    /// How long after the fault ends the node may still be out of service:
    /// being noticed, fenced and restarted.
    pub fn recovery(&self) -> Duration {
        match self {
            Fault::Degrade { .. } => Duration::ZERO,
            Fault::MetaPartition { dur } if *dur <= NODE_TIMEOUT => Duration::from_secs(1),
            _ => NODE_TIMEOUT + Duration::from_secs(4),
        }
    }

    /// Whether the fault replaces the node's fault configuration.
    pub fn configures(&self) -> bool {
        matches!(self, Fault::Stall { .. } | Fault::Degrade { .. })
    }
}

#[derive(Debug, Clone)]
pub struct Event {
    /// Since the start of the schedule.
    pub at: Duration,
    /// Chooses the node when the event fires (see `harness::resolve`):
    /// nodes that own streams are likelier targets, since Sluice does not
    /// rebalance and faults on an idle node exercise little.
    pub pick: u64,
    pub fault: Fault,
}

fn secs(rng: &mut SmallRng, lo_ms: u64, hi_ms: u64) -> Duration {
    Duration::from_millis(rng.random_range(lo_ms..=hi_ms))
}

/// Draw the schedule for `length` of simulated time: a fault every 0.3-4 s.
pub fn draw(rng: &mut SmallRng, length: Duration) -> Vec<Event> {
    let mut events = Vec::new();
    let mut at = Duration::from_secs(1);
    loop {
        at += secs(rng, 300, 4000);
        if at >= length {
            break;
        }
        let pick = rng.random();
        let fault = match rng.random_range(0..100u32) {
            0..=19 => Fault::Crash {
                down: secs(rng, 500, 10_000),
            },
            20..=26 => Fault::Shutdown {
                down: secs(rng, 500, 5_000),
            },
            27..=36 => Fault::MetaPartition {
                dur: secs(rng, 300, 3_000),
            },
            37..=46 => Fault::MetaPartition {
                dur: secs(rng, 5_000, 15_000),
            },
            47..=58 => Fault::StorePartition {
                dur: secs(rng, 500, 12_000),
            },
            59..=64 => {
                let lo = rng.random_range(1_000..4_000);
                Fault::Stall {
                    dur: secs(rng, 2_000, 10_000),
                    latency_ms: (lo, lo + rng.random_range(0..4_000)),
                }
            }
            _ => degradation(rng),
        };
        events.push(Event { at, pick, fault });
    }
    events
}

fn degradation(rng: &mut SmallRng) -> Fault {
    let target = match rng.random_range(0..4) {
        0 => Target::Data,
        1 => Target::Wal,
        2 => Target::Meta,
        _ => Target::All,
    };
    let seed = rng.random();
    let dur = secs(rng, 1_000, 10_000);
    let (kind, config) = match rng.random_range(0..4) {
        0 => {
            let lo = rng.random_range(5..200);
            (
                "slow_requests",
                FaultConfig {
                    seed,
                    latency_ms: (lo, lo + rng.random_range(0..1_500)),
                    ..FaultConfig::default()
                },
            )
        }
        1 => (
            "failing_requests",
            FaultConfig {
                seed,
                error_rate: rng.random_range(0.02..0.4),
                slowdown_rate: rng.random_range(0.0..0.3),
                ..FaultConfig::default()
            },
        ),
        2 => (
            "put_conflicts",
            FaultConfig {
                seed,
                conflict_rate: rng.random_range(0.05..0.5),
                latency_ms: (0, rng.random_range(0..100)),
                ..FaultConfig::default()
            },
        ),
        _ => (
            "lost_replies",
            FaultConfig {
                seed,
                lost_reply_rate: rng.random_range(0.05..0.5),
                latency_ms: (0, rng.random_range(0..300)),
                ..FaultConfig::default()
            },
        ),
    };
    Fault::Degrade {
        kind,
        target,
        config,
        dur,
    }
}
