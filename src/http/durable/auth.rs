//! Authorization of the Durable Streams routes: which scope each method
//! needs on the stream's topic, and read access to a fork's source. The
//! bearer-token mechanics are the HTTP front door's (`http::auth`).

use crate::auth::{AuthFailure, Op};
use crate::http::auth::{bearer, forbidden, unauthenticated};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The middleware of the Durable Streams routes (`/v1/stream/{*path}`):
/// the stream is the topic `topic_for(path)`; reads (GET, HEAD) need
/// `read` on it, appends (POST) `write`, and creating or deleting a stream
/// (PUT, DELETE) `admin`, as for topics. CORS preflights carry no
/// credentials and change nothing, so they pass.
pub(crate) async fn authorize_durable(
    State(tokens): State<Arc<dyn crate::api::Tokens>>,
    axum::extract::Path(path): axum::extract::Path<String>,
    req: Request,
    next: Next,
) -> Response {
    use axum::http::Method;
    if !tokens.auth_required() || req.method() == Method::OPTIONS {
        return next.run(req).await;
    }
    let token = match bearer(&req) {
        Ok(Some(t)) => t,
        Ok(None) => return unauthenticated(AuthFailure::Missing),
        Err(f) => return unauthenticated(f),
    };
    let principal = match tokens.authenticate(token.expose()) {
        Ok(p) => p,
        Err(f) => return unauthenticated(f),
    };
    let op = match *req.method() {
        Method::GET | Method::HEAD => Op::Read,
        Method::POST => Op::Write,
        _ => Op::Admin,
    };
    // A path that maps to no topic is refused by the handler, with no effect.
    if let Ok(topic) = super::name::topic_for(&path) {
        if !principal.allows(op, &topic) {
            crate::auth::count_failure("http", "forbidden");
            return forbidden(&principal, &format!("{op} on topic {topic:?}")).into_response();
        }
    }
    // A fork reads its source: creating one needs read access to it.
    let source = req
        .headers()
        .get(super::fork::FORKED_FROM)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| super::fork::source_path(v.trim()).ok())
        .and_then(|p| super::name::topic_for(&p).ok());
    if let Some(topic) = source.filter(|_| req.method() == Method::PUT) {
        if !principal.allows(Op::Read, &topic) {
            crate::auth::count_failure("http", "forbidden");
            return forbidden(&principal, &format!("{} on topic {topic:?}", Op::Read)).into_response();
        }
    }
    crate::api::CALLER_TOKEN
        .scope(Some(Arc::new(token)), next.run(req))
        .await
}
