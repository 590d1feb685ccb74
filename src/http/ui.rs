//! `GET /ui`: the console. One page, one script and one style sheet,
//! embedded in the binary at build time (no Node.js at build time, nothing
//! fetched from outside at run time). The page is only a view: everything
//! it shows or does goes through the routes of [`super::ROUTES`] with the
//! caller's token, so their scopes hold whatever the page offers.
//!
//! Served to anyone (a page holds no data); with a strict
//! Content-Security-Policy that lets it talk to this origin only, gzipped
//! when the browser accepts it.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::io::Write as _;
use std::sync::LazyLock;

/// An embedded file: its name under `/ui/`, content type and bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_str!("ui/index.html"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("ui/app.js"),
    },
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("ui/app.css"),
    },
];

/// What the page may load and call: this origin only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Each asset gzipped once, on first use.
static GZIPPED: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| ASSETS.iter().map(|a| gzip(a.body.as_bytes())).collect());

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(b).expect("gzip into memory");
    e.finish().expect("gzip into memory")
}

/// The console's routes (outside [`super::ROUTES`] and the OpenAPI document).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/ui", get(|h: HeaderMap| async move { serve("index.html", &h) }))
        .route("/ui/", get(|h: HeaderMap| async move { serve("index.html", &h) }))
        .route(
            "/ui/{asset}",
            get(|Path(a): Path<String>, h: HeaderMap| async move { serve(&a, &h) }),
        )
}

fn accepts_gzip(h: &HeaderMap) -> bool {
    h.get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| e.trim().split(';').next() == Some("gzip") && !e.contains("q=0"))
}

fn serve(name: &str, h: &HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        return (StatusCode::NOT_FOUND, "no such console file\n").into_response();
    };
    let a = &ASSETS[i];
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(a.content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if accepts_gzip(h) {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        (headers, GZIPPED[i].clone()).into_response()
    } else {
        (headers, a.body).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    async fn get(path: &str, gzip: bool) -> Response {
        let mut req = Request::get(path);
        if gzip {
            req = req.header("accept-encoding", "gzip, br");
        }
        router::<()>().oneshot(req.body(Body::empty()).unwrap()).await.unwrap()
    }

    #[tokio::test]
    async fn the_page_and_its_assets_are_served_with_a_policy_that_keeps_them_on_this_origin() {
        for (path, ty) in [
            ("/ui", "text/html"),
            ("/ui/app.js", "text/javascript"),
            ("/ui/app.css", "text/css"),
        ] {
            let r = get(path, false).await;
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            assert!(r.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with(ty));
            assert_eq!(r.headers()[header::CONTENT_SECURITY_POLICY], CSP);
            assert!(r.headers().get(header::CONTENT_ENCODING).is_none());
        }
        assert_eq!(get("/ui/../Cargo.toml", false).await.status(), StatusCode::NOT_FOUND);
        assert_eq!(get("/ui/secret.txt", false).await.status(), StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn a_browser_that_accepts_gzip_gets_it_and_it_inflates_to_the_file() {
        let r = get("/ui/app.js", true).await;
        assert_eq!(r.headers()[header::CONTENT_ENCODING], "gzip");
        let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&body[..]), &mut out).unwrap();
        assert_eq!(out, include_str!("ui/app.js"));
    }

    #[test]
    fn the_page_names_no_other_origin() {
        for a in ASSETS {
            for bad in ["http://", "https://", "//cdn", "@import"] {
                // The script builds URLs from the page's own origin only.
                assert!(!a.body.contains(bad), "{} mentions {bad}", a.name);
            }
        }
    }
}
