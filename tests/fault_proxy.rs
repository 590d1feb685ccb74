//! The fault-injecting TCP proxy of `tests/support/proxy.rs`, against an
//! echo server: it passes bytes, stalls them in a blackhole and delivers them
//! on healing, and closes connections when refusing.

mod support;

use std::time::Duration;
use support::proxy::{FaultProxy, Mode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn echo_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

async fn round_trip(s: &mut TcpStream, msg: &[u8], within: Duration) -> Option<Vec<u8>> {
    s.write_all(msg).await.ok()?;
    let mut buf = vec![0u8; msg.len()];
    match tokio::time::timeout(within, s.read_exact(&mut buf)).await {
        Ok(Ok(_)) => Some(buf),
        _ => None,
    }
}

#[tokio::test]
async fn the_proxy_passes_blackholes_and_refuses() {
    let proxy = FaultProxy::start(echo_server().await).await.unwrap();
    let mut s = TcpStream::connect(proxy.addr).await.unwrap();
    assert_eq!(
        round_trip(&mut s, b"one", Duration::from_secs(5)).await.unwrap(),
        b"one"
    );

    // A blackhole stalls the open connection and new ones...
    proxy.set(Mode::Blackhole);
    assert_eq!(round_trip(&mut s, b"two", Duration::from_millis(300)).await, None);
    let mut late = TcpStream::connect(proxy.addr).await.unwrap();
    assert_eq!(round_trip(&mut late, b"new", Duration::from_millis(300)).await, None);
    // ...and healing delivers what was sent meanwhile.
    proxy.set(Mode::Pass);
    let mut buf = [0u8; 3];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"two");
    tokio::time::timeout(Duration::from_secs(5), late.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"new");

    // Refusing closes open connections and new ones.
    proxy.set(Mode::Refuse);
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "{closed:?}");
    let mut refused = TcpStream::connect(proxy.addr).await.unwrap();
    assert_eq!(round_trip(&mut refused, b"x", Duration::from_secs(5)).await, None);
    proxy.set(Mode::Pass);
    let mut again = TcpStream::connect(proxy.addr).await.unwrap();
    assert_eq!(
        round_trip(&mut again, b"back", Duration::from_secs(5)).await.unwrap(),
        b"back"
    );
}

// ---------------------------------------------------------------- the HTTP storm proxy

mod storm {
    use super::support::http_storm::{Fate, Flavor, Storm, StormProxy};
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full, StreamBody};
    use hyper::body::{Frame, Incoming};
    use hyper::{Request, Response};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tokio::net::TcpListener;

    type Seen = Arc<Mutex<Vec<(String, String, usize)>>>;
    type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

    /// An HTTP/1.1 server that records (method, path, body length) of every
    /// request it serves. `GET /big` answers 100 KiB with a length,
    /// `GET /chunked` three chunks without one, anything else `ok`.
    async fn upstream() -> (std::net::SocketAddr, Seen) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Seen = Arc::default();
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let (s, _) = listener.accept().await.unwrap();
                let log = log.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let log = log.clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body.collect().await.unwrap().to_bytes();
                            let path = parts.uri.path().to_string();
                            log.lock()
                                .unwrap()
                                .push((parts.method.to_string(), path.clone(), body.len()));
                            let body: Body = match path.as_str() {
                                "/big" => Full::new(Bytes::from(vec![7u8; 100 * 1024])).boxed(),
                                "/chunked" => StreamBody::new(tokio_stream::iter(
                                    ["one ", "two ", "three"]
                                        .map(|s| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(s)))),
                                ))
                                .boxed(),
                                _ => Full::new(Bytes::from_static(b"ok")).boxed(),
                            };
                            Ok::<_, std::convert::Infallible>(Response::new(body))
                        }
                    });
                    let io = hyper_util::rt::TokioIo::new(s);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, svc)
                        .await;
                });
            }
        });
        (addr, seen)
    }

    fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .pool_max_idle_per_host(1)
            .build()
            .unwrap()
    }

    /// A DynamoDB call (`X-Amz-Target` names the operation).
    async fn ddb_call(c: &reqwest::Client, url: &str, op: &str) -> reqwest::Result<reqwest::Response> {
        c.post(url)
            .header("X-Amz-Target", format!("DynamoDB_20120810.{op}"))
            .body("{}")
            .send()
            .await
    }

    fn only(fate: Fate) -> Storm {
        let mut s = Storm::CALM;
        match fate {
            Fate::SlowDown => s.slowdown = 1.0,
            Fate::Conflict => s.conflict = 1.0,
            Fate::Error => s.error = 1.0,
            Fate::Reset => s.reset = 1.0,
            Fate::SlowBody => s.slow_body = 1.0,
            Fate::ResetMidBody => s.reset_mid_body = 1.0,
            Fate::LostReply => s.lost_reply = 1.0,
            Fate::Pass => {}
        }
        s
    }

    #[tokio::test]
    async fn calm_it_forwards_lengths_chunks_and_keep_alive() {
        let (up, seen) = upstream().await;
        let proxy = StormProxy::start(up, Flavor::S3, 1).await.unwrap();
        let c = client();
        let url = proxy.url();
        let big = c.get(format!("{url}/big")).send().await.unwrap().bytes().await.unwrap();
        assert_eq!(big.len(), 100 * 1024);
        let chunked = c
            .get(format!("{url}/chunked"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(chunked, "one two three");
        let put = c.put(format!("{url}/k")).body(vec![1u8; 5000]).send().await.unwrap();
        assert_eq!(put.status(), 200);
        // A body of unknown length goes out chunked.
        let stream = tokio_stream::iter([
            Ok::<_, std::io::Error>(Bytes::from_static(b"abc")),
            Ok(Bytes::from_static(b"defg")),
        ]);
        let put = c
            .put(format!("{url}/streamed"))
            .body(reqwest::Body::wrap_stream(stream))
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), 200);
        let head = c.head(format!("{url}/big")).send().await.unwrap();
        assert_eq!(head.status(), 200);
        assert_eq!(
            c.get(format!("{url}/x")).send().await.unwrap().text().await.unwrap(),
            "ok"
        );
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen.iter().map(|(m, p, n)| format!("{m} {p} {n}")).collect::<Vec<_>>(),
            [
                "GET /big 0",
                "GET /chunked 0",
                "PUT /k 5000",
                "PUT /streamed 7",
                "HEAD /big 0",
                "GET /x 0"
            ]
        );
        assert_eq!(proxy.stats().counts.len(), 0);
    }

    #[tokio::test]
    async fn answered_faults_never_reach_the_server_and_speak_the_service() {
        let (up, seen) = upstream().await;
        let s3 = StormProxy::start(up, Flavor::S3, 1).await.unwrap();
        let ddb = StormProxy::start(up, Flavor::DynamoDb, 1).await.unwrap();
        let c = client();
        s3.set(only(Fate::SlowDown));
        let r = c.put(format!("{}/k", s3.url())).body("x").send().await.unwrap();
        assert_eq!(r.status(), 503);
        assert!(r.text().await.unwrap().contains("<Code>SlowDown</Code>"));
        s3.set(only(Fate::Error));
        let r = c.get(format!("{}/k", s3.url())).send().await.unwrap();
        assert_eq!(r.status(), 500);
        assert!(r.text().await.unwrap().contains("<Code>InternalError</Code>"));
        // A conflict only answers conditional PUTs; the others pass.
        s3.set(only(Fate::Conflict));
        let r = c.put(format!("{}/plain", s3.url())).body("x").send().await.unwrap();
        assert_eq!(r.status(), 200);
        let r = c
            .put(format!("{}/cond", s3.url()))
            .header("If-None-Match", "*")
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 409);
        assert!(r.text().await.unwrap().contains("ConditionalRequestConflict"));
        ddb.set(only(Fate::SlowDown));
        let r = ddb_call(&c, &ddb.url(), "PutItem").await.unwrap();
        assert_eq!(r.status(), 400);
        let text = r.text().await.unwrap();
        assert!(
            text.contains("#ThrottlingException") || text.contains("#ProvisionedThroughputExceededException"),
            "{text}"
        );
        ddb.set(only(Fate::Error));
        let r = ddb_call(&c, &ddb.url(), "Query").await.unwrap();
        assert_eq!(r.status(), 500);
        assert!(r.text().await.unwrap().contains("InternalServerError"));
        // A reset: an error, and nothing reached the server.
        s3.set(only(Fate::Reset));
        assert!(c.put(format!("{}/r", s3.url())).body("x").send().await.is_err());
        assert_eq!(
            seen.lock()
                .unwrap()
                .iter()
                .map(|(m, p, _)| format!("{m} {p}"))
                .collect::<Vec<_>>(),
            ["PUT /plain"]
        );
        let stats = s3.stats();
        for f in [Fate::SlowDown, Fate::Error, Fate::Conflict, Fate::Reset] {
            assert_eq!(stats.get(f), 1, "{f:?}: {stats:?}");
        }
        assert_eq!(ddb.stats().get(Fate::SlowDown), 1);
        assert_eq!(ddb.stats().get(Fate::Error), 1);
    }

    #[tokio::test]
    async fn a_lost_reply_applies_the_write_and_never_answers() {
        let (up, seen) = upstream().await;
        let proxy = StormProxy::start(up, Flavor::S3, 1).await.unwrap();
        proxy.set(only(Fate::LostReply));
        let c = client();
        assert!(c.put(format!("{}/w", proxy.url())).body("x").send().await.is_err());
        // Reads have nothing to lose: they pass.
        let r = c.get(format!("{}/x", proxy.url())).send().await.unwrap();
        assert_eq!(r.text().await.unwrap(), "ok");
        assert_eq!(
            seen.lock()
                .unwrap()
                .iter()
                .map(|(m, p, _)| format!("{m} {p}"))
                .collect::<Vec<_>>(),
            ["PUT /w", "GET /x"]
        );
        assert_eq!(proxy.stats().get(Fate::LostReply), 1);
        // DynamoDB: writes are told by their target.
        let ddb = StormProxy::start(up, Flavor::DynamoDb, 1).await.unwrap();
        ddb.set(only(Fate::LostReply));
        let put = ddb_call(&c, &ddb.url(), "PutItem").await;
        assert!(put.is_err());
        let query = ddb_call(&c, &ddb.url(), "Query").await.unwrap();
        assert_eq!(query.status(), 200);
        assert_eq!(ddb.stats().get(Fate::LostReply), 1);
        assert_eq!(seen.lock().unwrap().len(), 4);
    }

    #[tokio::test]
    async fn bodies_come_slowly_or_break_half_way() {
        let (up, seen) = upstream().await;
        let proxy = StormProxy::start(up, Flavor::S3, 1).await.unwrap();
        let c = client();
        proxy.set(only(Fate::SlowBody));
        let big = c
            .get(format!("{}/big", proxy.url()))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(big.len(), 100 * 1024);
        proxy.set(only(Fate::ResetMidBody));
        let r = c.get(format!("{}/big", proxy.url())).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.bytes().await.is_err(), "half a body, then a reset");
        assert_eq!(seen.lock().unwrap().len(), 2);
        let stats = proxy.stats();
        assert_eq!((stats.get(Fate::SlowBody), stats.get(Fate::ResetMidBody)), (1, 1));
    }

    #[tokio::test]
    async fn a_storm_deals_every_fate_from_its_seed() {
        let (up, _seen) = upstream().await;
        let mut runs = Vec::new();
        for _ in 0..2 {
            let proxy = StormProxy::start(up, Flavor::S3, 42).await.unwrap();
            proxy.set(Storm::all(0.6));
            // A connection per request: the fates follow the requests alone.
            let c = reqwest::Client::builder()
                .timeout(Duration::from_millis(500))
                .pool_max_idle_per_host(0)
                .build()
                .unwrap();
            for i in 0..120 {
                let _ = c
                    .put(format!("{}/k{i}", proxy.url()))
                    .header("If-None-Match", "*")
                    .body("x")
                    .send()
                    .await;
            }
            runs.push(proxy.stats());
        }
        assert_eq!(runs[0], runs[1], "the same seed deals the same fates");
        for f in Fate::FAULTS {
            assert!(runs[0].get(f) > 0, "{f:?} never dealt: {:?}", runs[0]);
        }
    }
}
