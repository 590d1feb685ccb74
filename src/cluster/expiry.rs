//! Durable Streams lifetimes: which streams the lease holder expires. A
//! stream's TTL or `Stream-Expires-At` is judged against the holder's clock
//! alone, and the reading goes into the `ExpireStream` command so every
//! node's `apply` reaches the same verdict. Front doors only *report* an
//! expired stream as gone until then; they never delete it themselves.

use crate::meta::{Command, View};

/// `ExpireStream` for every stream whose lifetime ended by `now_ms`
/// (those already marked deleted, kept for their forks, are not again).
pub fn due(view: &View, now_ms: i64) -> Vec<Command> {
    view.topics
        .iter()
        .filter(|(_, t)| {
            t.config
                .durable
                .as_ref()
                .is_some_and(|d| !d.deleted && d.expired(now_ms))
        })
        .map(|(name, _)| Command::ExpireStream {
            name: name.clone(),
            now_ms,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TopicId;
    use crate::meta::durable::DurableMeta;
    use crate::meta::view::TopicRow;
    use crate::meta::TopicConfig;

    fn view(streams: &[(&str, DurableMeta)]) -> View {
        let mut v = View::default();
        for (i, (name, d)) in streams.iter().enumerate() {
            v.topics.insert(
                name.to_string(),
                TopicRow {
                    id: TopicId(i as u64 + 1),
                    partitions: 1,
                    config: TopicConfig {
                        durable: Some(d.clone()),
                        ..Default::default()
                    },
                },
            );
        }
        v.topics.insert(
            "plain".into(),
            TopicRow {
                id: TopicId(99),
                partitions: 1,
                config: TopicConfig::default(),
            },
        );
        v
    }

    #[test]
    fn only_streams_past_their_lifetime_by_the_given_time_are_due() {
        let ttl = DurableMeta {
            ttl_secs: Some(10),
            touched_ms: 1_000,
            ..Default::default()
        };
        let at = DurableMeta {
            expires_at_ms: Some(5_000),
            ..Default::default()
        };
        let forever = DurableMeta::default();
        let v = view(&[("ttl", ttl), ("at", at), ("forever", forever)]);
        assert!(due(&v, 4_999).is_empty());
        assert_eq!(
            due(&v, 5_000),
            vec![Command::ExpireStream {
                name: "at".into(),
                now_ms: 5_000
            }]
        );
        let names: Vec<String> = due(&v, 11_000)
            .into_iter()
            .map(|c| match c {
                Command::ExpireStream { name, .. } => name,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(names, vec!["at".to_string(), "ttl".to_string()]);
    }

    #[test]
    fn a_stream_kept_for_its_forks_is_not_expired_again() {
        let marked = DurableMeta {
            expires_at_ms: Some(5_000),
            deleted: true,
            ..Default::default()
        };
        assert!(due(&view(&[("src", marked)]), 9_000).is_empty());
    }
}
