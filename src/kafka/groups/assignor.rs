//! Server-side assignors of the KIP-848 consumer protocol: `uniform` (the
//! default: balanced and sticky) and `range` (per topic, contiguous ranges
//! by member id, so co-partitioned topics line up). Pure functions of the
//! members' subscriptions, the topics and the previous target.

use crate::ids::TopicUuid;
use std::collections::{BTreeMap, BTreeSet};

/// Partitions by topic id.
pub type Assignment = BTreeMap<TopicUuid, BTreeSet<i32>>;

/// The assignors a member may name in `server_assignor`.
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];
pub const DEFAULT_ASSIGNOR: &str = "uniform";

/// One topic a member subscribes to, as the view has it now.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TopicMeta {
    pub id: TopicUuid,
    pub name: String,
    pub partitions: u32,
}

/// What the assignor sees of one member: the topic ids it subscribes to.
pub type Subscriptions = BTreeMap<String, BTreeSet<TopicUuid>>;

/// The target assignment of every member (each member present, maybe empty).
pub fn assign(
    assignor: &str,
    members: &Subscriptions,
    topics: &BTreeMap<TopicUuid, TopicMeta>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    match assignor {
        "range" => range(members, topics),
        _ => uniform(members, topics, previous),
    }
}

fn empty_for(members: &Subscriptions) -> BTreeMap<String, Assignment> {
    members.keys().map(|m| (m.clone(), Assignment::new())).collect()
}

/// Per topic, its subscribers sorted by member id get contiguous ranges:
/// `n / m` partitions each, the first `n % m` one more.
pub fn range(members: &Subscriptions, topics: &BTreeMap<TopicUuid, TopicMeta>) -> BTreeMap<String, Assignment> {
    let mut out = empty_for(members);
    for (id, t) in topics {
        let subs: Vec<&String> = members.iter().filter(|(_, s)| s.contains(id)).map(|(m, _)| m).collect();
        if subs.is_empty() {
            continue;
        }
        let n = t.partitions as usize;
        let (each, extra) = (n / subs.len(), n % subs.len());
        let mut next = 0usize;
        for (i, m) in subs.iter().enumerate() {
            let count = each + usize::from(i < extra);
            let parts: BTreeSet<i32> = (next..next + count).map(|p| p as i32).collect();
            next += count;
            if !parts.is_empty() {
                out.get_mut(*m).expect("member listed").insert(*id, parts);
            }
        }
    }
    out
}

/// Balanced and sticky: every partition of a subscribed topic goes to a
/// subscriber; a partition stays with its previous owner while that owner
/// is within its quota (with identical subscriptions: `P / M`, and
/// `P % M` members one more); the rest go, in topic and partition order,
/// to the least-loaded subscriber (ties by member id). With differing
/// subscriptions the same greedy fill applies with per-member limits from
/// the whole count, which is balanced where it can be, not optimal.
pub fn uniform(
    members: &Subscriptions,
    topics: &BTreeMap<TopicUuid, TopicMeta>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let mut out = empty_for(members);
    if members.is_empty() {
        return out;
    }
    let all: Vec<(TopicUuid, i32)> = topics
        .iter()
        .filter(|(id, _)| members.values().any(|s| s.contains(id)))
        .flat_map(|(id, t)| (0..t.partitions as i32).map(move |p| (*id, p)))
        .collect();
    let m = members.len();
    let (floor, mut extra) = (all.len() / m, all.len() % m);
    let mut count: BTreeMap<&String, usize> = members.keys().map(|k| (k, 0)).collect();
    let mut taken: BTreeSet<(TopicUuid, i32)> = BTreeSet::new();
    // Sticky pass, the members that held most first, so those keeping one
    // over the floor are the ones that had it.
    let mut by_held: Vec<(&String, Vec<(TopicUuid, i32)>)> = members
        .iter()
        .map(|(id, subs)| {
            let held: Vec<(TopicUuid, i32)> = previous
                .get(id)
                .into_iter()
                .flat_map(|a| a.iter())
                .filter(|(t, _)| subs.contains(t))
                .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
                .filter(|(t, p)| {
                    topics
                        .get(t)
                        .is_some_and(|meta| *p >= 0 && (*p as u32) < meta.partitions)
                })
                .collect();
            (id, held)
        })
        .collect();
    by_held.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    for (id, held) in by_held {
        let quota = if held.len() > floor && extra > 0 {
            extra -= 1;
            floor + 1
        } else {
            floor
        };
        for tp in held.into_iter().take(quota) {
            if taken.insert(tp) {
                out.get_mut(id).expect("member").entry(tp.0).or_default().insert(tp.1);
                *count.get_mut(id).expect("member") += 1;
            }
        }
    }
    for tp in all {
        if taken.contains(&tp) {
            continue;
        }
        let best = members
            .iter()
            .filter(|(_, s)| s.contains(&tp.0))
            .map(|(id, _)| id)
            .min_by_key(|id| (count[id], *id));
        if let Some(id) = best {
            out.get_mut(id).expect("member").entry(tp.0).or_default().insert(tp.1);
            *count.get_mut(id).expect("member") += 1;
            taken.insert(tp);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(n: u8, name: &str, partitions: u32) -> (TopicUuid, TopicMeta) {
        let id = TopicUuid([n; 16]);
        (
            id,
            TopicMeta {
                id,
                name: name.into(),
                partitions,
            },
        )
    }

    fn subs(members: &[&str], topics: &[u8]) -> Subscriptions {
        members
            .iter()
            .map(|m| (m.to_string(), topics.iter().map(|t| TopicUuid([*t; 16])).collect()))
            .collect()
    }

    fn sizes(a: &BTreeMap<String, Assignment>) -> Vec<usize> {
        a.values().map(|x| x.values().map(|s| s.len()).sum()).collect()
    }

    #[test]
    fn uniform_balances_and_keeps_what_it_can() {
        let topics: BTreeMap<_, _> = [topic(1, "t", 4)].into();
        let first = uniform(&subs(&["a", "b"], &[1]), &topics, &BTreeMap::new());
        assert_eq!(sizes(&first), vec![2, 2]);
        let second = uniform(&subs(&["a", "b", "c"], &[1]), &topics, &first);
        assert_eq!(sizes(&second).iter().sum::<usize>(), 4);
        assert!(sizes(&second).iter().all(|n| (1..=2).contains(n)), "{second:?}");
        // Nothing moves between a and b: each keeps a subset of what it had.
        for m in ["a", "b"] {
            let before = &first[m][&TopicUuid([1; 16])];
            let after = second[m].get(&TopicUuid([1; 16])).cloned().unwrap_or_default();
            assert!(after.is_subset(before), "{m}: {after:?} ⊄ {before:?}");
        }
        let third = uniform(&subs(&["b", "c"], &[1]), &topics, &second);
        assert_eq!(sizes(&third), vec![2, 2]);
    }

    #[test]
    fn uniform_gives_each_partition_to_a_subscriber_only() {
        let topics: BTreeMap<_, _> = [topic(1, "t", 3), topic(2, "u", 2)].into();
        let mut s = subs(&["a"], &[1]);
        s.extend(subs(&["b"], &[1, 2]));
        let out = uniform(&s, &topics, &BTreeMap::new());
        assert!(!out["a"].contains_key(&TopicUuid([2; 16])));
        assert_eq!(sizes(&out).iter().sum::<usize>(), 5);
    }

    #[test]
    fn range_gives_contiguous_ranges_by_member_id() {
        let topics: BTreeMap<_, _> = [topic(1, "t", 5), topic(2, "u", 5)].into();
        let out = range(&subs(&["b", "a"], &[1, 2]), &topics);
        assert_eq!(out["a"][&TopicUuid([1; 16])], [0, 1, 2].into());
        assert_eq!(out["b"][&TopicUuid([1; 16])], [3, 4].into());
        assert_eq!(out["a"][&TopicUuid([2; 16])], [0, 1, 2].into(), "co-partitioned");
        let none = range(&subs(&["a", "b", "c"], &[1]), &[topic(1, "t", 1)].into());
        assert!(none["c"].is_empty());
    }
}
