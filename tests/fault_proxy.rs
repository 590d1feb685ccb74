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
