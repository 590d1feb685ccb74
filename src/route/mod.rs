//! Routing: whether a request on a stream is served here or by the stream's
//! owner, and the node-to-node call that forwards it.
//!
//! Any node accepts any HTTP request. The engine serves a stream it has
//! open itself; for one that another live node owns it asks this layer,
//! which forwards the request to the owner's advertised HTTP address — one
//! hop: a forwarded request is never forwarded again
//! ([`crate::api::is_forwarded`]). Kafka clients are told the leader by
//! Metadata and go there, so Produce and Fetch are never forwarded.
//!
//! - [`forward_target`]: the decision, from the node's view.
//! - [`Placement`]: what forwarding needs of the node (the decision, the
//!   metadata index it has applied, a catch-up), so the retry after a
//!   move is tested without a node.
//! - [`Forwarder`] (`client`): the forwarding client. Records travel as one
//!   RecordBatch v2, encoded once where the client's request arrived and
//!   stored unchanged by the owner; reads come back as the stored batches
//!   (`wire` is the contract both ends share). Long polls are one
//!   forwarded request; a subscription is the owner's event stream relayed
//!   as it arrives.
//! - [`peer`]: the credential that proves a forwarded request comes from a
//!   node of this cluster.
//!
//! Layering: the front doors call the engine; the engine calls this layer;
//! this layer depends on `api` (errors, read shapes), `meta::View` (who
//! owns what) and `batch` (the record format), never on `node` or
//! a front door.

mod client;
pub mod peer;
pub mod wire;

pub use client::Forwarder;

use crate::api::{ApiError, ApiResult, ErrorCode};
use crate::ids::{NodeEpoch, NodeId, StreamId};
use crate::meta::{StreamState, View};
use async_trait::async_trait;

/// The advertised HTTP address of the live owner of `stream`, if that is
/// another node than `me` at `my_epoch` and the current request may be
/// forwarded (it was not itself forwarded here).
pub fn forward_target(view: &View, me: &NodeId, my_epoch: NodeEpoch, stream: StreamId) -> Option<String> {
    if crate::api::is_forwarded() {
        return None; // one hop only
    }
    match &view.streams.get(&stream)?.state {
        StreamState::Open { node, node_epoch }
            if !(node == me && *node_epoch == my_epoch) && view.is_live(node, *node_epoch) =>
        {
            view.nodes.get(node).map(|n| n.http_addr.clone())
        }
        _ => None,
    }
}

/// What forwarding needs of the node it runs in.
#[async_trait]
pub trait Placement: Send + Sync {
    /// The owner to forward `stream` to, or `None` to serve it here.
    fn forward_target(&self, stream: StreamId) -> Option<String>;
    /// The metadata log index this node has applied (sent as the mark).
    fn applied(&self) -> u64;
    /// Catch up with the metadata log (bounded); whether it did.
    async fn sync(&self) -> bool;
}

/// Why a forwarded call failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The owner answered with this error, or could not be connected to:
    /// nothing happened there.
    Refused(ApiError),
    /// The call may or may not have taken effect (the answer was lost).
    Indeterminate(ApiError),
}

impl Failure {
    fn into_error(self) -> ApiError {
        match self {
            Failure::Refused(e) | Failure::Indeterminate(e) => e,
        }
    }
}

/// Runs `call` against the owner of `stream`; `None` when the stream is
/// not forwarded. A stale owner — one that answers `unavailable` because
/// the stream moved, or cannot be reached at all — is retried once against
/// the owner the view names after catching up, if that is another node.
/// An indeterminate failure is retried only when `idempotent`.
///
/// Counted in `sluice_forward_total{op, outcome}` (`ok` or `error`) and
/// `sluice_forward_retries_total{op}`.
pub(crate) async fn with_retry<T, F, Fut>(
    op: &'static str,
    at: &dyn Placement,
    stream: StreamId,
    idempotent: bool,
    call: F,
) -> Option<ApiResult<T>>
where
    F: Fn(String, u64) -> Fut,
    Fut: std::future::Future<Output = Result<T, Failure>>,
{
    let r = retry_once(op, at, stream, idempotent, call).await?;
    let outcome = if r.is_ok() { "ok" } else { "error" };
    crate::telemetry::count("sluice_forward_total", &[("op", op), ("outcome", outcome)]);
    Some(r)
}

async fn retry_once<T, F, Fut>(
    op: &'static str,
    at: &dyn Placement,
    stream: StreamId,
    idempotent: bool,
    call: F,
) -> Option<ApiResult<T>>
where
    F: Fn(String, u64) -> Fut,
    Fut: std::future::Future<Output = Result<T, Failure>>,
{
    let first = at.forward_target(stream)?;
    let retry = match call(first.clone(), at.applied()).await {
        Ok(v) => return Some(Ok(v)),
        Err(Failure::Refused(e)) if e.code == ErrorCode::Unavailable => e,
        Err(Failure::Indeterminate(e)) if idempotent => e,
        Err(f) => return Some(Err(f.into_error())),
    };
    if !at.sync().await {
        return Some(Err(retry));
    }
    match at.forward_target(stream) {
        Some(next) if next != first => {
            crate::telemetry::count("sluice_forward_retries_total", &[("op", op)]);
            Some(call(next, at.applied()).await.map_err(Failure::into_error))
        }
        _ => Some(Err(retry)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// A view whose owner changes to `after` once synced.
    struct Moving {
        owner: Mutex<Option<String>>,
        after: Option<String>,
        syncs: AtomicUsize,
    }

    #[async_trait]
    impl Placement for Moving {
        fn forward_target(&self, _: StreamId) -> Option<String> {
            self.owner.lock().unwrap().clone()
        }
        fn applied(&self) -> u64 {
            7
        }
        async fn sync(&self) -> bool {
            self.syncs.fetch_add(1, Ordering::SeqCst);
            *self.owner.lock().unwrap() = self.after.clone();
            true
        }
    }

    fn moving(from: Option<&str>, to: Option<&str>) -> Moving {
        Moving {
            owner: Mutex::new(from.map(String::from)),
            after: to.map(String::from),
            syncs: AtomicUsize::new(0),
        }
    }

    fn s() -> StreamId {
        StreamId::new(crate::ids::TopicId(1), 0)
    }

    /// `b` answers; `a` refuses with `first`.
    async fn run(at: &Moving, idempotent: bool, first: fn() -> Failure) -> (Option<ApiResult<String>>, Vec<String>) {
        let calls = Mutex::new(Vec::new());
        let r = with_retry("test", at, s(), idempotent, |addr, applied| {
            assert_eq!(applied, 7, "the mark is the applied index");
            calls.lock().unwrap().push(addr.clone());
            async move {
                if addr == "a" {
                    Err(first())
                } else {
                    Ok(addr)
                }
            }
        })
        .await;
        (r, calls.into_inner().unwrap())
    }

    fn moved() -> Failure {
        Failure::Refused(ApiError::unavailable("stream is owned by b"))
    }

    #[tokio::test]
    async fn a_local_stream_is_not_forwarded() {
        let at = moving(None, None);
        let (r, calls) = run(&at, true, moved).await;
        assert!(r.is_none());
        assert!(calls.is_empty());
    }

    #[tokio::test]
    async fn a_stale_owner_is_retried_once_against_the_new_one() {
        let at = moving(Some("a"), Some("b"));
        let (r, calls) = run(&at, false, moved).await;
        assert_eq!(r.unwrap().unwrap(), "b");
        assert_eq!(calls, ["a", "b"]);
    }

    #[tokio::test]
    async fn no_retry_when_the_owner_did_not_change_or_the_error_is_final() {
        let at = moving(Some("a"), Some("a"));
        let (r, calls) = run(&at, true, moved).await;
        assert_eq!(r.unwrap().unwrap_err().code, ErrorCode::Unavailable);
        assert_eq!(calls, ["a"]);

        let at = moving(Some("a"), Some("b"));
        let (r, calls) = run(&at, true, || Failure::Refused(ApiError::invalid("bad"))).await;
        assert_eq!(r.unwrap().unwrap_err().code, ErrorCode::InvalidRequest);
        assert_eq!(calls, ["a"]);
        assert_eq!(at.syncs.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_lost_answer_is_retried_only_when_that_is_safe() {
        let lost = || Failure::Indeterminate(ApiError::unavailable("connection reset"));
        let at = moving(Some("a"), Some("b"));
        let (r, calls) = run(&at, false, lost).await;
        assert_eq!(
            r.unwrap().unwrap_err().code,
            ErrorCode::Unavailable,
            "an append may have landed"
        );
        assert_eq!(calls, ["a"]);

        let at = moving(Some("a"), Some("b"));
        let (r, calls) = run(&at, true, lost).await;
        assert_eq!(r.unwrap().unwrap(), "b");
        assert_eq!(calls, ["a", "b"]);
    }
}
