//! Who may call which route when `--auth on`: every route in
//! [`ROUTES`](super::ROUTES) has one [`Policy`], checked by the
//! [`authorize`] middleware after routing and before the handler.
//!
//! - Open: `/health`, `/ready` (load balancers and supervisors probe them),
//!   `/metrics` (scrapers; it carries counts, never secrets or record
//!   data) and `/openapi.json`.
//! - Topic routes need the op on the `{topic}` of the path.
//! - `/admin/*` and `/v1/tokens` need cluster admin (`admin` on `*`).
//! - Creating a topic (its name is in the body) and listing topics need a
//!   valid token; the handler checks or filters by name.
//!
//! A request forwarded by another node is authorized again here with the
//! caller's own token, which the forwarding node passes on (see
//! [`crate::api::CALLER_TOKEN`]); the forwarding marker grants nothing.

use super::error::HttpError;
use super::Shared;
use crate::api::{ApiError, ErrorCode};
use crate::auth::{AuthFailure, Op, Principal, Secret};
use axum::extract::{RawPathParams, Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// What a route requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// No token needed.
    Open,
    /// A valid token; the handler decides by what is in the body or filters
    /// what it returns.
    Authenticated,
    /// `op` on the `{topic}` path parameter.
    Topic(Op),
    /// Any op on the `{topic}` path parameter (it may see the topic exists).
    SeeTopic,
    /// `admin` on the glob `*`.
    ClusterAdmin,
}

/// The policy of each route in `ROUTES`. A test checks every route has one.
pub fn policy(method: &str, path: &str) -> Option<Policy> {
    Some(match (method, path) {
        ("GET", "/health" | "/ready" | "/metrics" | "/openapi.json") => Policy::Open,
        (_, p) if p.starts_with("/admin/") => Policy::ClusterAdmin,
        (_, "/v1/tokens" | "/v1/tokens/{id}") => Policy::ClusterAdmin,
        ("GET" | "POST", "/v1/topics") => Policy::Authenticated,
        ("GET", "/v1/groups" | "/v1/groups/{group}") => Policy::Authenticated,
        ("GET", "/v1/topics/{topic}") => Policy::SeeTopic,
        ("DELETE", "/v1/topics/{topic}") => Policy::Topic(Op::Admin),
        ("PATCH", "/v1/topics/{topic}/config") => Policy::Topic(Op::Admin),
        ("POST", "/v1/topics/{topic}/records" | "/v1/topics/{topic}/partitions/{partition}/records") => {
            Policy::Topic(Op::Write)
        }
        (
            "GET",
            "/v1/topics/{topic}/partitions/{partition}/records" | "/v1/topics/{topic}/partitions/{partition}/subscribe",
        ) => Policy::Topic(Op::Read),
        _ => return None,
    })
}

/// Who is calling, for handlers that decide by what is in the body.
/// `None` when auth is off: everything is allowed.
#[derive(Debug, Clone, Default)]
pub struct Caller(pub Option<Arc<Principal>>);

impl Caller {
    pub fn allows(&self, op: Op, topic: &str) -> bool {
        self.0.as_ref().is_none_or(|p| p.allows(op, topic))
    }

    pub fn sees(&self, topic: &str) -> bool {
        self.0.as_ref().is_none_or(|p| p.sees(topic))
    }

    /// `forbidden` unless the caller may do `op` on `topic`.
    pub fn require(&self, op: Op, topic: &str) -> Result<(), HttpError> {
        match &self.0 {
            Some(p) if !p.allows(op, topic) => {
                crate::auth::count_failure("http", "forbidden");
                Err(forbidden(p, &format!("{op} on topic {topic:?}")))
            }
            _ => Ok(()),
        }
    }
}

/// Whether the bearer of `token` may (still) read every one of `topics`:
/// long-lived reads check again before each batch they send, so revoking or
/// expiring a token ends them too, and a read that spans several topics (a
/// Durable Streams fork and its sources) needs read on each of them.
pub(crate) fn still_allowed<'a>(
    tokens: &dyn crate::api::Tokens,
    token: Option<&Secret>,
    topics: impl IntoIterator<Item = &'a str>,
) -> Result<(), ApiError> {
    if !tokens.auth_required() {
        return Ok(());
    }
    let token =
        token.ok_or_else(|| ApiError::new(ErrorCode::Unauthenticated, AuthFailure::Missing.public_message()))?;
    let principal = tokens.authenticate(token.expose()).map_err(|f| {
        crate::auth::count_failure("http", f.reason());
        ApiError::new(ErrorCode::Unauthenticated, f.public_message())
    })?;
    for topic in topics {
        if !principal.allows(Op::Read, topic) {
            crate::auth::count_failure("http", "forbidden");
            return Err(forbidden(&principal, &format!("read on topic {topic:?}")).0);
        }
    }
    Ok(())
}

pub(crate) fn forbidden(p: &Principal, what: &str) -> HttpError {
    HttpError::new(ErrorCode::Forbidden, format!("token {} lacks {what}", p.id))
}

/// 401 with the `WWW-Authenticate` challenge (RFC 6750).
pub(crate) fn unauthenticated(failure: AuthFailure) -> Response {
    crate::auth::count_failure("http", failure.reason());
    let mut resp = HttpError(ApiError::new(ErrorCode::Unauthenticated, failure.public_message())).into_response();
    let challenge = match failure {
        AuthFailure::Missing => r#"Bearer realm="sluice""#,
        AuthFailure::Malformed => r#"Bearer realm="sluice", error="invalid_request""#,
        _ => r#"Bearer realm="sluice", error="invalid_token""#,
    };
    resp.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    resp
}

/// The bearer token of a request: `Ok(None)` without an `Authorization`
/// header, `Err` when the header is not `Bearer <token>`.
pub(crate) fn bearer(req: &Request) -> Result<Option<Secret>, AuthFailure> {
    let Some(value) = req.headers().get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().map_err(|_| AuthFailure::Malformed)?;
    let (scheme, token) = value.split_once(' ').ok_or(AuthFailure::Malformed)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(AuthFailure::Malformed);
    }
    Ok(Some(Secret::new(token)))
}

/// The middleware of a route with `policy`: authenticate, apply it, and run the
/// handler with the caller known ([`Caller`] extension) and its token
/// ready to forward.
pub(crate) async fn authorize(
    State((state, policy)): State<(Shared, Policy)>,
    params: RawPathParams,
    mut req: Request,
    next: Next,
) -> Response {
    if !state.engine.tokens.auth_required() {
        req.extensions_mut().insert(Caller(None));
        return next.run(req).await;
    }
    if policy == Policy::Open {
        return next.run(req).await;
    }
    let token = match bearer(&req) {
        Ok(Some(t)) => t,
        Ok(None) => return unauthenticated(AuthFailure::Missing),
        Err(f) => return unauthenticated(f),
    };
    let principal = match state.engine.tokens.authenticate(token.expose()) {
        Ok(p) => p,
        Err(f) => return unauthenticated(f),
    };
    let topic = params.iter().find(|(k, _)| *k == "topic").map(|(_, v)| v.to_string());
    let allowed = match (policy, topic.as_deref()) {
        (Policy::Open | Policy::Authenticated, _) => Ok(()),
        (Policy::ClusterAdmin, _) if principal.is_cluster_admin() => Ok(()),
        (Policy::ClusterAdmin, _) => Err("admin on all topics (\"*\")".to_string()),
        (Policy::Topic(op), Some(t)) if principal.allows(op, t) => Ok(()),
        (Policy::Topic(op), t) => Err(format!("{op} on topic {:?}", t.unwrap_or_default())),
        (Policy::SeeTopic, Some(t)) if principal.sees(t) => Ok(()),
        (Policy::SeeTopic, t) => Err(format!("any scope on topic {:?}", t.unwrap_or_default())),
    };
    if let Err(what) = allowed {
        crate::auth::count_failure("http", "forbidden");
        return forbidden(&principal, &what).into_response();
    }
    req.extensions_mut().insert(Caller(Some(Arc::new(principal))));
    crate::api::CALLER_TOKEN
        .scope(Some(Arc::new(token)), next.run(req))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_has_a_policy_and_only_probes_are_open() {
        for (method, path) in super::super::ROUTES {
            let p = policy(method, path).unwrap_or_else(|| panic!("{method} {path} has no auth policy"));
            let probe = matches!(*path, "/health" | "/ready" | "/metrics" | "/openapi.json");
            assert_eq!(p == Policy::Open, probe, "{method} {path}: {p:?}");
            if path.starts_with("/admin/") || path.starts_with("/v1/tokens") {
                assert_eq!(p, Policy::ClusterAdmin, "{method} {path}");
            }
        }
        assert_eq!(policy("GET", "/v1/nope"), None);
    }

    #[test]
    fn only_bearer_credentials_are_accepted() {
        let req = |v: &str| {
            axum::http::Request::builder()
                .header(header::AUTHORIZATION, v)
                .body(axum::body::Body::empty())
                .unwrap()
        };
        assert_eq!(bearer(&req("Bearer abc")).unwrap().unwrap().expose(), "abc");
        assert_eq!(bearer(&req("bearer  abc ")).unwrap().unwrap().expose(), "abc");
        assert_eq!(bearer(&req("Basic YTpi")), Err(AuthFailure::Malformed));
        assert_eq!(bearer(&req("Bearer")), Err(AuthFailure::Malformed));
        assert_eq!(bearer(&req("Bearer ")), Err(AuthFailure::Malformed));
        let none = axum::http::Request::builder().body(axum::body::Body::empty()).unwrap();
        assert_eq!(bearer(&none), Ok(None));
    }
}
