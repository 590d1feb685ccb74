//! Finding a stream: its topic, its protocol state, whether it is open for
//! appends; its tail; expiry and the sliding TTL. A stream whose lifetime
//! ended by this node's clock answers 404 at once, but only the lease holder
//! deletes it (`cluster::expiry`): reading is not deleting.

use super::fork::{self, Segment};
use super::reply::DsError;
use super::{name, DsState};
use crate::api::{ErrorCode, ReadFrom, ReadRequest};
use crate::ids::Offset;
use crate::meta::durable::{DurableMeta, DurableUpdate};
use crate::meta::ConfigUpdate;
use std::time::Duration;

/// How long a create or an append waits for a new stream to be placed.
const OPEN_WAIT: Duration = Duration::from_secs(15);

pub struct Found {
    pub topic: String,
    pub meta: DurableMeta,
    /// Whether the stream has an owner (appends are accepted).
    pub open: bool,
    /// Where its records are read from (more than its own topic for a fork).
    pub segments: Vec<Segment>,
}

impl Found {
    /// Stream offset of the own topic's offset 0 (non-zero for forks).
    pub fn base(&self) -> u64 {
        self.meta.base().get()
    }
}

pub enum Lookup {
    Found(Box<Found>),
    /// Deleted while forks still read it: 410 (409 for a create).
    Gone,
    /// A topic exists under the stream's name but is not a stream.
    Foreign,
    /// Its lifetime ended; the lease holder has not deleted it yet: 404.
    Expired,
    Missing,
}

pub fn topic(path: &str) -> Result<String, DsError> {
    name::topic_for(path).map_err(DsError::bad)
}

/// The stream at `path` as this node's view has it.
pub async fn lookup(st: &DsState, path: &str) -> Result<Lookup, DsError> {
    let topic = topic(path)?;
    // Perhaps created through another node a moment ago: the engine
    // catches up with the metadata log before it says the topic is missing.
    let desc = match st.engine.topics.describe_topic_current(&topic).await {
        Ok(d) => d,
        Err(e) if e.code == ErrorCode::TopicNotFound => return Ok(Lookup::Missing),
        Err(e) => return Err(e.into()),
    };
    let Some(meta) = desc.config.durable else {
        return Ok(Lookup::Foreign);
    };
    if meta.deleted {
        return Ok(Lookup::Gone);
    }
    if meta.expired(st.engine.clock.now_ms()) {
        return Ok(Lookup::Expired);
    }
    let open = desc.partition_info.first().is_some_and(|p| p.state == "open");
    let segments = segments(st, &topic, &meta)?;
    Ok(Lookup::Found(Box::new(Found {
        topic,
        meta,
        open,
        segments,
    })))
}

/// The segments of the stream `topic` (see [`fork::chain`]), from this
/// node's view: a view that has a fork has its sources (they are created
/// first and kept while it exists).
pub fn segments(st: &DsState, topic: &str, meta: &DurableMeta) -> Result<Vec<Segment>, DsError> {
    let source = |t: &str| st.engine.topics.describe_topic(t).ok().and_then(|d| d.config.durable);
    fork::chain(topic, meta, &source).map_err(|e| DsError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e))
}

/// The stream at `path`; 404 when there is none, 410 when it was deleted
/// but forks still read it.
pub async fn find(st: &DsState, path: &str) -> Result<Found, DsError> {
    match lookup(st, path).await? {
        Lookup::Found(f) => Ok(*f),
        Lookup::Gone => Err(DsError::new(
            axum::http::StatusCode::GONE,
            format!("stream {path:?} was deleted"),
        )),
        Lookup::Foreign | Lookup::Expired | Lookup::Missing => Err(DsError::not_found(path)),
    }
}

/// The stream's end offset (from its owner), in stream offsets.
pub async fn tail(st: &DsState, found: &Found) -> Result<Offset, DsError> {
    segments_tail(st, &found.segments).await
}

/// A topic's end offset (from its owner).
pub async fn topic_tail(st: &DsState, topic: &str) -> Result<Offset, DsError> {
    let req = ReadRequest {
        from: ReadFrom::End,
        limit: 1,
        max_bytes: 1,
        wait: Duration::ZERO,
        committed: true,
        consistency: Default::default(),
    };
    Ok(st.engine.records.read(topic, 0, req).await?.next_offset)
}

/// The stream's end offset: its own topic's end, in stream offsets.
pub(crate) async fn segments_tail(st: &DsState, segs: &[Segment]) -> Result<Offset, DsError> {
    let own = segs.last().ok_or_else(|| {
        DsError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "a stream without segments",
        )
    })?;
    let t = topic_tail(st, &own.topic).await?;
    Ok(Offset(t.get() + own.shift))
}

/// Waits until the stream has an owner (a new topic is placed shortly
/// after creation), so an append right after a create is not refused.
pub async fn wait_open(st: &DsState, topic: &str) -> Result<(), DsError> {
    let deadline = tokio::time::Instant::now() + OPEN_WAIT;
    let mut pause = Duration::from_millis(2);
    loop {
        // Just created through this node, the topic may not be in its view yet.
        let desc = match st.engine.topics.describe_topic(topic) {
            Ok(d) => Some(d),
            Err(e) if e.code == ErrorCode::TopicNotFound => None,
            Err(e) => return Err(e.into()),
        };
        let placed = desc.is_some_and(|d| d.partition_info.first().is_some_and(|p| p.state == "open"));
        if placed {
            // Placed; ready once its owner has opened it (a read reaches it).
            match topic_tail(st, topic).await {
                Ok(_) => return Ok(()),
                Err(e) if e.status == axum::http::StatusCode::SERVICE_UNAVAILABLE => {}
                Err(e) => return Err(e),
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(DsError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                format!("stream {topic} has not been placed yet; retry shortly"),
            )
            .with("retry-after", 1));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
        let _ = st.engine.cluster.sync_metadata().await;
    }
}

/// Waits until the lease holder has deleted (or marked deleted) the expired
/// stream `topic`, so it can be created again; 503 if that takes too long.
pub async fn wait_deleted(st: &DsState, topic: &str) -> Result<(), DsError> {
    let deadline = tokio::time::Instant::now() + OPEN_WAIT;
    let mut pause = Duration::from_millis(10);
    loop {
        let _ = st.engine.cluster.sync_metadata().await;
        match st.engine.topics.describe_topic(topic) {
            Err(e) if e.code == ErrorCode::TopicNotFound => return Ok(()),
            Err(e) => return Err(e.into()),
            Ok(d) if d.config.durable.as_ref().is_none_or(|m| m.deleted) => return Ok(()),
            Ok(_) => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(DsError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                format!("stream {topic} expired and is being deleted; retry shortly"),
            )
            .with("retry-after", 1));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Record protocol-state changes in the metadata log (all or nothing).
pub async fn update(st: &DsState, topic: &str, updates: Vec<DurableUpdate>) -> Result<(), DsError> {
    if updates.is_empty() {
        return Ok(());
    }
    let updates = updates.into_iter().map(ConfigUpdate::Durable).collect();
    st.engine.topics.alter_topic_config(topic, updates).await?;
    // Later requests through this node see the change.
    let _ = st.engine.cluster.sync_metadata().await;
    Ok(())
}

/// The touch to record for a read or write at `now` (Unix ms), if the
/// sliding TTL needs one: at most about twice per TTL, when half of it has
/// passed.
pub fn touch(meta: &DurableMeta, now: i64) -> Option<DurableUpdate> {
    let ttl_ms = (meta.ttl_secs? as i64).saturating_mul(1000);
    (now - meta.touched_ms >= ttl_ms / 2).then_some(DurableUpdate::Touch { at_ms: now })
}

/// Records a touch for a read, best effort (a failed touch only shortens
/// the stream's life to what was last recorded).
pub async fn touch_for_read(st: &DsState, found: &Found) {
    if let Some(t) = touch(&found.meta, st.engine.clock.now_ms()) {
        if let Err(e) = update(st, &found.topic, vec![t]).await {
            tracing::debug!(topic = %found.topic, error = %e.message, "TTL touch not recorded");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touches_are_recorded_once_half_the_ttl_has_passed() {
        let mut m = DurableMeta {
            touched_ms: 10_000,
            ..Default::default()
        };
        assert_eq!(touch(&m, 99_999), None, "no TTL, no touch");
        m.ttl_secs = Some(2);
        assert_eq!(touch(&m, 10_999), None);
        assert_eq!(touch(&m, 11_000), Some(DurableUpdate::Touch { at_ms: 11_000 }));
    }
}
