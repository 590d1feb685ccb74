//! Checks every request passes before routing, for both the native API and
//! the Durable Streams routes (which answer in their own plain-text style):
//!
//! - a `Content-Length` above `--max-request-bytes` is 413 at once, before
//!   any of the body is read (the rest is read and dropped for a moment in
//!   the background, so the client sees the answer rather than a reset);
//! - a browser's *simple* cross-site `POST` (no preflight: a form or
//!   `text/plain` body sent by any web page) is 403, so a page a user of an
//!   open (`--auth off`) node visits cannot create topics or append;
//! - a path that is not UTF-8 once percent-decoded is a JSON 400 (axum's
//!   own answer would be plain text).

use super::error::HttpError;
use crate::api::ErrorCode;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Duration;

/// How long, and how many bytes of, an oversize body is read and dropped
/// after its 413 is sent.
const DRAIN_TIME: Duration = Duration::from_secs(2);
const DRAIN_BYTES: usize = 16 << 20;

fn is_durable(path: &str) -> bool {
    path.starts_with("/v1/stream/")
}

/// An error in the style of the route's API.
fn refuse(durable: bool, code: ErrorCode, message: String) -> Response {
    if durable {
        super::durable::text_error(super::error::status_for(code), message)
    } else {
        HttpError::new(code, message).into_response()
    }
}

pub(crate) async fn guard(State(max_request_bytes): State<usize>, req: Request, next: Next) -> Response {
    let durable = is_durable(req.uri().path());
    if !durable && !path_is_utf8(req.uri().path()) {
        return refuse(
            false,
            ErrorCode::InvalidRequest,
            "the path is not UTF-8 once percent-decoded".into(),
        );
    }
    if let Some(len) = declared_length(req.headers()) {
        if len > max_request_bytes as u64 {
            let expects_continue = req.headers().contains_key(header::EXPECT);
            let answer = refuse(
                durable,
                ErrorCode::RequestTooLarge,
                format!("the request body is {len} bytes; --max-request-bytes is {max_request_bytes}"),
            );
            if !expects_continue {
                drain(req.into_body());
            }
            return answer;
        }
    }
    if cross_site_simple(req.method(), req.headers(), durable) {
        return refuse(
            durable,
            ErrorCode::Forbidden,
            "a cross-site POST with a form or text/plain body is refused (a web page may not write here); \
             send Content-Type: application/json or application/octet-stream"
                .into(),
        );
    }
    next.run(req).await
}

fn declared_length(h: &HeaderMap) -> Option<u64> {
    h.get(header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

/// Reads and drops what the client is still sending, briefly, so closing
/// the connection after the 413 does not reset it before the client has
/// read the answer.
fn drain(body: axum::body::Body) {
    tokio::spawn(async move {
        use futures::StreamExt;
        let mut data = body.into_data_stream();
        let mut seen = 0usize;
        let deadline = tokio::time::sleep(DRAIN_TIME);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                chunk = data.next() => match chunk {
                    Some(Ok(c)) => {
                        seen += c.len();
                        if seen > DRAIN_BYTES {
                            break;
                        }
                    }
                    _ => break,
                },
            }
        }
    });
}

fn path_is_utf8(path: &str) -> bool {
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|c| hex(*c)),
            b.get(i + 2).and_then(|c| hex(*c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    std::str::from_utf8(&out).is_ok()
}

/// Content types a browser sends cross-site without asking first (CORS
/// "simple" requests).
fn simple_content_type(h: &HeaderMap) -> bool {
    match h.get(header::CONTENT_TYPE) {
        None => true,
        Some(v) => {
            let mt = super::durable::headers::media_type(v.to_str().unwrap_or(""));
            matches!(
                mt.as_str(),
                "text/plain" | "application/x-www-form-urlencoded" | "multipart/form-data"
            )
        }
    }
}

/// Whether a browser says the request comes from another site:
/// `Sec-Fetch-Site` when sent, else an `Origin` that is not this host.
fn from_another_site(h: &HeaderMap) -> bool {
    if let Some(site) = h.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("").trim().to_ascii_lowercase();
        return site == "cross-site" || site == "same-site";
    }
    let Some(origin) = h.get(header::ORIGIN) else {
        return false;
    };
    let origin = origin.to_str().unwrap_or("").trim();
    let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    let host = h.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("").trim();
    host.is_empty() || !origin_host.eq_ignore_ascii_case(host)
}

/// A cross-site `POST` a browser sent without a preflight. Only `POST` can
/// be simple (PUT and DELETE are always preflighted, and the native routes
/// answer no preflight). A Durable Streams request that carries a header
/// only a preflighted request may carry (`Authorization`, `Stream-*`,
/// `Producer-*`) was preflighted and approved by the protocol's CORS.
fn cross_site_simple(method: &Method, h: &HeaderMap, durable: bool) -> bool {
    if method != Method::POST || !from_another_site(h) || !simple_content_type(h) {
        return false;
    }
    let preflighted = durable
        && h.keys().any(|k| {
            let k = k.as_str();
            k == "authorization" || k.starts_with("stream-") || k.starts_with("producer-")
        });
    !preflighted
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn simple_cross_site_posts_are_recognised() {
        let form = [
            ("origin", "https://evil.example"),
            ("content-type", "text/plain;charset=UTF-8"),
        ];
        assert!(cross_site_simple(&Method::POST, &headers(&form), false));
        assert!(cross_site_simple(&Method::POST, &headers(&[("origin", "null")]), true));
        assert!(cross_site_simple(
            &Method::POST,
            &headers(&[
                ("sec-fetch-site", "cross-site"),
                ("content-type", "multipart/form-data; boundary=x")
            ]),
            false
        ));
    }

    #[test]
    fn real_clients_and_preflighted_requests_pass() {
        // curl, SDKs: no Origin.
        assert!(!cross_site_simple(
            &Method::POST,
            &headers(&[("content-type", "text/plain")]),
            false
        ));
        // The page's own origin.
        let same = [("origin", "http://127.0.0.1:8080"), ("host", "127.0.0.1:8080")];
        assert!(!cross_site_simple(&Method::POST, &headers(&same), false));
        assert!(!cross_site_simple(
            &Method::POST,
            &headers(&[("sec-fetch-site", "same-origin")]),
            false
        ));
        // JSON cannot be sent cross-site without a preflight.
        let json = [("origin", "https://app.example"), ("content-type", "application/json")];
        assert!(!cross_site_simple(&Method::POST, &headers(&json), false));
        // A Durable Streams browser client with a protocol header was preflighted.
        let ds = [
            ("origin", "https://app.example"),
            ("content-type", "text/plain"),
            ("stream-seq", "1"),
        ];
        assert!(!cross_site_simple(&Method::POST, &headers(&ds), true));
        assert!(cross_site_simple(&Method::POST, &headers(&ds), false));
        assert!(!cross_site_simple(&Method::PUT, &headers(&ds[..2]), true));
    }

    #[test]
    fn paths_are_checked_after_percent_decoding() {
        assert!(path_is_utf8("/v1/topics/caf%C3%A9"));
        assert!(path_is_utf8("/v1/topics/100%"));
        assert!(!path_is_utf8("/v1/topics/%FF"));
        assert!(!path_is_utf8("/v1/topics/%c3"));
    }
}
