//! Responses: protocol errors (status, plain-text reason, extra headers),
//! the headers every response carries, and CORS preflights.

use crate::api::{ApiError, ErrorCode};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// Headers a browser client may read.
const EXPOSED: &str = "Stream-Next-Offset, Stream-Cursor, Stream-Up-To-Date, Stream-Closed, Stream-TTL, \
Stream-Expires-At, Stream-SSE-Data-Encoding, Producer-Epoch, Producer-Seq, Producer-Expected-Seq, \
Producer-Received-Seq, ETag, Location, Content-Type";
/// Request headers a browser client may send.
const ALLOWED: &str = "Content-Type, Stream-Seq, Stream-TTL, Stream-Expires-At, Stream-Closed, Producer-Id, \
Producer-Epoch, Producer-Seq, Stream-Forked-From, Stream-Fork-Offset, Stream-Fork-Sub-Offset, If-None-Match, \
Authorization";

#[derive(Debug)]
pub struct DsError {
    pub status: StatusCode,
    pub message: String,
    pub headers: Vec<(&'static str, String)>,
}

impl DsError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        DsError {
            status,
            message: message.into(),
            headers: Vec::new(),
        }
    }

    pub fn bad(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(path: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, format!("stream {path:?} does not exist"))
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    pub fn with(mut self, name: &'static str, value: impl ToString) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }

    pub fn into_response(self) -> Response {
        let mut resp = (self.status, self.message).into_response();
        for (k, v) in self.headers {
            if let Ok(v) = HeaderValue::from_str(&v) {
                resp.headers_mut().insert(HeaderName::from_static(k), v);
            }
        }
        resp
    }
}

impl From<ApiError> for DsError {
    fn from(e: ApiError) -> Self {
        // 416 is the native API's answer; the protocol says 400 (410 for an
        // offset below the start is decided by the reader, which knows it).
        let status = match e.code {
            ErrorCode::OffsetOutOfRange => StatusCode::BAD_REQUEST,
            c => crate::http::error::status_for(c),
        };
        let retry = e.code.retryable();
        let err = DsError::new(status, e.message);
        if retry {
            err.with("retry-after", 1)
        } else {
            err
        }
    }
}

/// A response under construction: status, headers, body.
pub struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: axum::body::Body,
}

impl Reply {
    pub fn new(status: StatusCode) -> Self {
        Reply {
            status,
            headers: HeaderMap::new(),
            body: axum::body::Body::empty(),
        }
    }

    pub fn header(mut self, name: &'static str, value: impl AsRef<str>) -> Self {
        if let Ok(v) = HeaderValue::from_str(value.as_ref()) {
            self.headers.insert(HeaderName::from_static(name), v);
        }
        self
    }

    pub fn header_if(self, cond: bool, name: &'static str, value: impl AsRef<str>) -> Self {
        if cond {
            self.header(name, value)
        } else {
            self
        }
    }

    pub fn body(mut self, body: impl Into<axum::body::Body>) -> Self {
        self.body = body.into();
        self
    }

    pub fn build(self) -> Response {
        let mut resp = Response::new(self.body);
        *resp.status_mut() = self.status;
        *resp.headers_mut() = self.headers;
        resp
    }
}

/// Added to every response of the protocol, errors included.
pub async fn common_headers(resp: Response) -> Response {
    with_common_headers(resp)
}

pub fn with_common_headers(mut resp: Response) -> Response {
    let hs = resp.headers_mut();
    hs.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    hs.insert("cross-origin-resource-policy", HeaderValue::from_static("cross-origin"));
    hs.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    hs.insert("access-control-expose-headers", HeaderValue::from_static(EXPOSED));
    resp
}

/// `OPTIONS`: a CORS preflight answer allowing the protocol's methods and
/// headers (and whatever else the browser asks to send).
pub fn preflight(req: &HeaderMap) -> Response {
    let asked = req
        .get("access-control-request-headers")
        .and_then(|v| v.to_str().ok())
        .map(|s| format!("{ALLOWED}, {s}"))
        .unwrap_or_else(|| ALLOWED.to_string());
    Reply::new(StatusCode::NO_CONTENT)
        .header("access-control-allow-methods", "GET, HEAD, POST, PUT, DELETE, OPTIONS")
        .header("access-control-allow-headers", asked)
        .header("access-control-max-age", "86400")
        .build()
}

pub fn no_store(r: Reply) -> Reply {
    r.header("cache-control", "no-store")
}
