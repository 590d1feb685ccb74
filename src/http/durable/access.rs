//! Who is reading a stream, for as long as the read lasts.
//!
//! The authorization middleware checks read on the stream's own topic when
//! a request arrives. A read of a fork also reads its sources' topics, and
//! a long poll or an SSE tail goes on sending long after that check. So
//! every read takes a [`Reader`] (the caller's token, captured while the
//! request is served) and checks it before each batch leaves: read on
//! every topic of the fork chain, with the token as the view knows it now
//! (a revoked or expired token ends the read). The SSE body is polled
//! outside the request's task-local scopes, so the reader also carries the
//! token and the forwarding mark into each engine read.

use super::reply::DsError;
use super::stream::Found;
use super::DsState;
use crate::auth::Secret;
use std::future::Future;
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
pub struct Reader {
    token: Option<Arc<Secret>>,
    forwarded: bool,
}

impl Reader {
    /// The caller of the request being served.
    pub fn current() -> Self {
        Self {
            token: crate::api::caller_token(),
            forwarded: crate::api::is_forwarded(),
        }
    }

    /// `Ok` when the caller may read every topic `found` is read from.
    pub fn check(&self, st: &DsState, found: &Found) -> Result<(), DsError> {
        let topics = found.segments.iter().map(|s| s.topic.as_str());
        crate::http::auth::still_allowed(st.engine.tokens.as_ref(), self.token.as_deref(), topics)
            .map_err(DsError::from)
    }

    /// `f` run as this caller: forwarded reads carry its token.
    pub async fn scoped<F: Future>(&self, f: F) -> F::Output {
        crate::api::CALLER_TOKEN
            .scope(self.token.clone(), crate::api::FORWARDED.scope(self.forwarded, f))
            .await
    }
}
