//! Reading size-prefixed Kafka request frames within what a node can hold.
//!
//! A frame is read in two steps, like mini-redis's `check` then `parse`:
//! the 4-byte length, which is checked against the connection's cap before
//! anything else happens, then the body. Three limits apply:
//!
//! - **The frame cap**, asked when the length arrives (not before: the
//!   frame after a SaslAuthenticate is read while that request is still
//!   being answered). Before a connection has logged in it is
//!   `--kafka-max-unauthenticated-frame-bytes` (512 KiB, Kafka's rule), after
//!   it `--kafka-max-frame-bytes`. A longer claim closes the connection
//!   without reading its body.
//! - **The connection's budget** ([`ConnBudget`]): the bytes of its frames
//!   read but not yet answered, at most `--kafka-max-frame-bytes`, so a
//!   connection reads ahead by bytes, not by a count of requests.
//! - **The node's budget** ([`RequestMemory`]): the same, summed over every
//!   connection, at most `--kafka-max-request-memory-bytes`.
//!
//! Both budgets are taken for the claimed length *before* the body is read
//! and given back when the frame's response has been written (dropping its
//! [`Held`]). A connection whose next frame does not fit waits for budget
//! without reading on, so its client is held back by TCP flow control
//! rather than by the node's memory. Once granted, the body's buffer is
//! allocated at the frame's length in one piece (no copies while it fills);
//! its pages become resident only as bytes arrive.

use super::header::HEADER_MIN;
use super::wire::DecodeError;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame length {0} outside {1}..={2}")]
    FrameLength(i64, usize, usize),
    #[error("frame length {0} over the {1} bytes allowed before SASL authentication")]
    Unauthenticated(i64, usize),
    #[error("connection closed mid-frame ({got} of {want} bytes)")]
    Truncated { got: usize, want: usize },
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("no request for {0:?} (idle timeout)")]
    Idle(Duration),
    #[error("frame not complete {0:?} after its first byte (read timeout)")]
    Slow(Duration),
    #[error("not authenticated {0:?} after connecting (--kafka-auth-deadline-sec)")]
    AuthDeadline(Duration),
    #[error("the connection's token was revoked or expired")]
    Revoked,
}

/// How long a connection may wait for the next frame, and for the rest of a
/// frame once its first byte arrived.
#[derive(Debug, Clone, Copy)]
pub struct FrameTimeouts {
    pub idle: Duration,
    pub read: Duration,
}

impl FrameTimeouts {
    /// Effectively unbounded: for callers that bound time themselves.
    pub const NONE: FrameTimeouts = FrameTimeouts {
        idle: Duration::from_secs(365 * 24 * 3600),
        read: Duration::from_secs(365 * 24 * 3600),
    };
}

/// The largest frame a connection may send next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameCap {
    /// Logged in, or auth is off: `--kafka-max-frame-bytes`.
    Open(usize),
    /// Not logged in yet (`--auth on`): `--kafka-max-unauthenticated-frame-bytes`.
    BeforeLogin(usize),
}

impl FrameCap {
    fn bytes(self) -> usize {
        match self {
            FrameCap::Open(n) | FrameCap::BeforeLogin(n) => n,
        }
    }
}

/// Bytes of request frames held by all connections of a node: read (or
/// being read) and not yet answered. Cloning shares the budget.
#[derive(Debug, Clone)]
pub struct RequestMemory {
    permits: Arc<Semaphore>,
    capacity: usize,
}

impl RequestMemory {
    pub fn new(bytes: usize) -> Self {
        let capacity = bytes.min(Semaphore::MAX_PERMITS);
        Self {
            permits: Arc::new(Semaphore::new(capacity)),
            capacity,
        }
    }

    /// Bytes held right now.
    pub fn in_use(&self) -> usize {
        self.capacity - self.permits.available_permits()
    }
}

/// One connection's budget within the node's [`RequestMemory`].
#[derive(Debug, Clone)]
pub struct ConnBudget {
    conn: Arc<Semaphore>,
    capacity: usize,
    node: RequestMemory,
}

impl ConnBudget {
    /// A connection that may hold `bytes` of frames at once (at least its
    /// largest frame, or that frame would wait forever).
    pub fn new(node: &RequestMemory, bytes: usize) -> Self {
        let capacity = bytes.min(node.capacity);
        Self {
            conn: Arc::new(Semaphore::new(capacity)),
            capacity,
            node: node.clone(),
        }
    }

    /// Bytes this connection holds right now.
    pub fn in_use(&self) -> usize {
        self.capacity - self.conn.available_permits()
    }

    /// Take `bytes` from the connection's budget and then from the node's,
    /// waiting for either. A claim above a budget's capacity takes the
    /// whole budget (callers cap frames below it; this only keeps a
    /// misconfiguration from waiting forever).
    async fn reserve(&self, bytes: usize) -> Held {
        let conn = self.acquire(&self.conn, bytes.min(self.capacity)).await;
        let node = self.acquire(&self.node.permits, bytes.min(self.node.capacity)).await;
        Held {
            bytes,
            _conn: conn,
            _node: node,
        }
    }

    async fn acquire(&self, s: &Arc<Semaphore>, n: usize) -> OwnedSemaphorePermit {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        s.clone()
            .acquire_many_owned(n)
            .await
            .expect("request budgets are never closed")
    }
}

/// The budget one frame holds; dropping it gives the bytes back.
#[derive(Debug)]
pub struct Held {
    bytes: usize,
    _conn: OwnedSemaphorePermit,
    _node: OwnedSemaphorePermit,
}

impl Held {
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// A frame's body and the budget it holds until it has been answered.
#[derive(Debug)]
pub struct Frame {
    pub body: Bytes,
    pub held: Held,
}

/// [`read_frame`] with a deadline: the first byte must come within
/// `timeouts.idle`, the rest of the frame within `timeouts.read` of it —
/// not counting time spent waiting for budget, which is the node's doing.
/// A client that starts a frame and stalls (slowloris) is cut off; one that
/// is merely quiet between requests may stay up to the idle timeout.
pub async fn read_frame_timed<R: AsyncRead + Unpin>(
    r: &mut R,
    cap: impl Fn() -> FrameCap,
    budget: &ConnBudget,
    timeouts: FrameTimeouts,
) -> Result<Option<Frame>, ConnError> {
    let mut first = [0u8; 1];
    let n = match tokio::time::timeout(timeouts.idle, r.read(&mut first)).await {
        Ok(n) => n?,
        Err(_) => return Err(ConnError::Idle(timeouts.idle)),
    };
    if n == 0 {
        return Ok(None);
    }
    let deadline = tokio::time::Instant::now() + timeouts.read;
    let slow = |_| ConnError::Slow(timeouts.read);
    let mut rest = (&first[..]).chain(r);
    let len = tokio::time::timeout_at(deadline, read_len(&mut rest))
        .await
        .map_err(slow)??;
    let Some(len) = len else {
        unreachable!("the first byte was read")
    };
    let want = check_len(len, cap())?;
    let waited = tokio::time::Instant::now();
    let held = budget.reserve(want).await;
    let deadline = deadline + waited.elapsed();
    let body = tokio::time::timeout_at(deadline, read_body(&mut rest, want))
        .await
        .map_err(slow)??;
    Ok(Some(Frame { body, held }))
}

/// Reads one size-prefixed frame; `None` at a clean end of stream. The
/// length is checked against `cap()` as soon as it is read, the budget for
/// it is then taken (waiting if need be), and the body buffer grows as
/// bytes arrive.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    cap: impl Fn() -> FrameCap,
    budget: &ConnBudget,
) -> Result<Option<Frame>, ConnError> {
    let Some(len) = read_len(r).await? else {
        return Ok(None);
    };
    let want = check_len(len, cap())?;
    let held = budget.reserve(want).await;
    let body = read_body(r, want).await?;
    Ok(Some(Frame { body, held }))
}

/// The 4-byte length prefix; `None` at a clean end of stream.
async fn read_len<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<i32>, ConnError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut len[got..]).await?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(ConnError::Truncated { got, want: 4 })
            };
        }
        got += n;
    }
    Ok(Some(i32::from_be_bytes(len)))
}

fn check_len(len: i32, cap: FrameCap) -> Result<usize, ConnError> {
    match usize::try_from(len) {
        Ok(n) if (HEADER_MIN..=cap.bytes()).contains(&n) => Ok(n),
        Ok(n) if n > HEADER_MIN => Err(match cap {
            FrameCap::BeforeLogin(max) => ConnError::Unauthenticated(len.into(), max),
            FrameCap::Open(max) => ConnError::FrameLength(len.into(), HEADER_MIN, max),
        }),
        _ => Err(ConnError::FrameLength(len.into(), HEADER_MIN, cap.bytes())),
    }
}

/// Read a body of `want` bytes, already reserved from the budgets.
///
/// The buffer is allocated once at its final size: the reservation has
/// already counted those bytes, the pages of an allocation this large only
/// become resident as bytes are written into them, and growing by doubling
/// instead would copy at each step (glibc serves allocations under its
/// dynamic mmap threshold from the heap, where `realloc` copies), briefly
/// holding the old and the new buffer — half again over the budget.
async fn read_body<R: AsyncRead + Unpin>(r: &mut R, want: usize) -> Result<Bytes, ConnError> {
    let mut body = Vec::with_capacity(want);
    while body.len() < want {
        let left = (want - body.len()) as u64;
        if (&mut *r).take(left).read_buf(&mut body).await? == 0 {
            return Err(ConnError::Truncated { got: body.len(), want });
        }
    }
    Ok(Bytes::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(node: usize, conn: usize) -> (RequestMemory, ConnBudget) {
        let memory = RequestMemory::new(node);
        let budget = ConnBudget::new(&memory, conn);
        (memory, budget)
    }

    fn frame(len: usize) -> Vec<u8> {
        let mut f = (len as u32).to_be_bytes().to_vec();
        f.extend(std::iter::repeat_n(7u8, len));
        f
    }

    #[tokio::test]
    async fn frames_outside_the_bounds_are_refused_without_allocating_the_claim() {
        let (_, b) = budget(1 << 20, 1 << 20);
        let read = |bytes: Vec<u8>, cap: FrameCap| {
            let b = b.clone();
            async move { read_frame(&mut std::io::Cursor::new(bytes), || cap, &b).await }
        };
        let open = FrameCap::Open(1000);
        assert!(matches!(read(vec![], open).await, Ok(None)), "clean end of stream");
        assert!(matches!(read(vec![0, 0], open).await, Err(ConnError::Truncated { .. })));
        assert!(matches!(
            read(vec![0, 0, 0, 4, 1, 2, 3, 4], open).await,
            Err(ConnError::FrameLength(4, _, _))
        ));
        assert!(matches!(
            read(vec![0xff, 0xff, 0xff, 0xff], open).await,
            Err(ConnError::FrameLength(-1, _, _))
        ));
        assert!(matches!(
            read(vec![0, 0, 3, 233], open).await,
            Err(ConnError::FrameLength(1001, _, _))
        ));
        // A frame claiming the maximum but sending 10 bytes: refused as truncated.
        let mut claim = vec![0, 0, 3, 232];
        claim.extend_from_slice(&[0; 10]);
        assert!(matches!(
            read(claim, open).await,
            Err(ConnError::Truncated { got: 10, want: 1000 })
        ));
        let f = read(frame(8), open).await.unwrap().unwrap();
        assert_eq!((f.body.len(), f.held.bytes()), (8, 8));
        // A 2 GB claim with the default 100 MiB limit is refused up front.
        assert!(matches!(
            read(vec![0x7f, 0xff, 0xff, 0xff], FrameCap::Open(100 << 20)).await,
            Err(ConnError::FrameLength(..))
        ));
    }

    #[tokio::test]
    async fn before_login_the_cap_is_the_unauthenticated_one_and_named_so() {
        let (_, b) = budget(1 << 20, 1 << 20);
        let before = FrameCap::BeforeLogin(512);
        let mut r = std::io::Cursor::new(frame(513));
        let err = read_frame(&mut r, || before, &b).await.unwrap_err();
        assert!(matches!(err, ConnError::Unauthenticated(513, 512)), "{err}");
        assert!(err.to_string().contains("before SASL authentication"), "{err}");
        assert_eq!(r.position(), 4, "nothing past the length is read");
        let mut r = std::io::Cursor::new(frame(512));
        assert_eq!(
            read_frame(&mut r, || before, &b).await.unwrap().unwrap().body.len(),
            512
        );
    }

    #[tokio::test]
    async fn the_cap_is_asked_when_the_length_arrives() {
        let (_, b) = budget(1 << 20, 1 << 20);
        let logged_in = std::sync::atomic::AtomicBool::new(false);
        let cap = || {
            if logged_in.load(std::sync::atomic::Ordering::Relaxed) {
                FrameCap::Open(4096)
            } else {
                FrameCap::BeforeLogin(100)
            }
        };
        let (mut client, mut server) = tokio::io::duplex(1 << 16);
        let reader = async { read_frame(&mut server, cap, &b).await };
        let writer = async {
            tokio::task::yield_now().await;
            logged_in.store(true, std::sync::atomic::Ordering::Relaxed);
            tokio::io::AsyncWriteExt::write_all(&mut client, &frame(1000))
                .await
                .unwrap();
        };
        let (read, ()) = tokio::join!(reader, writer);
        assert_eq!(read.unwrap().unwrap().body.len(), 1000);
    }

    #[tokio::test]
    async fn budgets_are_held_until_the_frame_is_dropped_and_a_frame_that_does_not_fit_waits() {
        let (memory, a) = budget(3000, 2000);
        let b = ConnBudget::new(&memory, 2000);
        let mut input = frame(1500);
        input.extend(frame(1000));
        let mut r = std::io::Cursor::new(input);
        let first = read_frame(&mut r, || FrameCap::Open(2000), &a).await.unwrap().unwrap();
        assert_eq!((a.in_use(), memory.in_use()), (1500, 1500));
        // The connection's second frame does not fit its own budget: it waits.
        let second = tokio::time::timeout(
            Duration::from_millis(50),
            read_frame(&mut r, || FrameCap::Open(2000), &a),
        )
        .await;
        assert!(second.is_err(), "a frame over the connection's budget waits");
        assert_eq!(r.position(), 1504 + 4, "its body was not read");
        // Another connection's frame that fits the node's budget is read.
        let other = read_frame(&mut std::io::Cursor::new(frame(1500)), || FrameCap::Open(2000), &b)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(memory.in_use(), 3000);
        drop(first);
        drop(other);
        assert_eq!(
            (a.in_use(), memory.in_use()),
            (0, 0),
            "answered frames give their bytes back"
        );
    }

    #[tokio::test]
    async fn waiting_for_node_budget_resumes_when_another_connection_is_answered() {
        let (memory, a) = budget(1000, 1000);
        let b = ConnBudget::new(&memory, 1000);
        let held = read_frame(&mut std::io::Cursor::new(frame(800)), || FrameCap::Open(1000), &a)
            .await
            .unwrap()
            .unwrap();
        let waiting = tokio::spawn(async move {
            read_frame(&mut std::io::Cursor::new(frame(800)), || FrameCap::Open(1000), &b)
                .await
                .map(|f| f.map(|f| f.body.len()))
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiting.is_finished(),
            "800 + 800 bytes do not fit a 1000-byte node budget"
        );
        drop(held);
        assert_eq!(waiting.await.unwrap().unwrap(), Some(800));
        assert_eq!(memory.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn time_spent_waiting_for_budget_is_not_charged_to_the_read_timeout() {
        let (_, a) = budget(1000, 1000);
        let timeouts = FrameTimeouts {
            idle: Duration::from_secs(60),
            read: Duration::from_secs(2),
        };
        let held = read_frame(&mut std::io::Cursor::new(frame(900)), || FrameCap::Open(1000), &a)
            .await
            .unwrap()
            .unwrap();
        let (mut client, mut server) = tokio::io::duplex(1 << 16);
        tokio::io::AsyncWriteExt::write_all(&mut client, &(500u32).to_be_bytes())
            .await
            .unwrap();
        let a2 = a.clone();
        let reading =
            tokio::spawn(async move { read_frame_timed(&mut server, || FrameCap::Open(1000), &a2, timeouts).await });
        // The node holds the reader back for 10 s, five read timeouts.
        tokio::time::sleep(Duration::from_secs(10)).await;
        drop(held);
        tokio::time::sleep(Duration::from_secs(1)).await;
        tokio::io::AsyncWriteExt::write_all(&mut client, &[1u8; 500])
            .await
            .unwrap();
        let f = reading.await.unwrap().expect("not cut off").unwrap();
        assert_eq!(f.body.len(), 500);

        // A client that stalls mid-body once it has its budget is cut off.
        let (mut client, mut server) = tokio::io::duplex(1 << 16);
        tokio::io::AsyncWriteExt::write_all(&mut client, &(500u32).to_be_bytes())
            .await
            .unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut client, &[1u8; 10])
            .await
            .unwrap();
        let err = read_frame_timed(&mut server, || FrameCap::Open(1000), &a, timeouts)
            .await
            .unwrap_err();
        assert!(matches!(err, ConnError::Slow(_)), "{err}");
        drop(client);
    }

    #[tokio::test]
    async fn a_body_buffer_grows_with_the_bytes_not_with_the_claim() {
        let (_, b) = budget(100 << 20, 100 << 20);
        let (mut client, mut server) = tokio::io::duplex(1 << 16);
        tokio::io::AsyncWriteExt::write_all(&mut client, &(100u32 << 20).to_be_bytes())
            .await
            .unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut client, &[0u8; 100])
            .await
            .unwrap();
        drop(client);
        let err = read_frame(&mut server, || FrameCap::Open(100 << 20), &b)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ConnError::Truncated { got: 100, want }  if want == 100 << 20),
            "{err}"
        );
    }
}
