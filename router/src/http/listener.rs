//! routerd's listener: a cap on open connections, an idle timeout on
//! every connection's reads and a deadline on every request
//! (docs/router.md "Threat model").
//!
//! - **Connections are capped.** A connection holds one permit from
//!   accept to close; at the cap the listener stops accepting and new
//!   connections wait in the kernel's backlog until one closes, so a
//!   device holding many connections open cannot take the process's
//!   memory or file descriptors.
//! - **A silent peer is closed.** While a request is in progress (from
//!   its first byte to its answer's first byte), a read that waits longer
//!   than the idle timeout for the peer's next byte fails the connection:
//!   a request whose headers or body never finish is closed after it. The
//!   timeout must exceed the longest long poll
//!   ([`crate::api::MAX_LEASE_WAIT_S`]) plus its answer.
//! - **An idle connection is let go.** Between requests (before the first,
//!   or once an answer began) a connection that neither sends nor is
//!   written to for the keep-alive timeout is closed, as an end of stream:
//!   a device working an item for seconds gives its connection's slot and
//!   buffers back, and opens another for its deposit. Under the cap, a
//!   slot held idle is a slot another device waits for in the backlog.
//! - **A slow peer is closed too.** From the first byte of a request to
//!   the first byte of its answer at most the request deadline may pass:
//!   a peer that trickles a byte now and then, each within the idle
//!   timeout, is closed once the deadline passes however alive it looks.
//!   The deadline must exceed the longest long poll plus the time a slow
//!   but honest device needs to send a body.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// The time limits of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Longest wait for the peer's next byte while a request is in
    /// progress and a read is pending.
    pub idle: Duration,
    /// Longest time from a request's first byte to its answer's first byte.
    pub request: Duration,
    /// Longest a connection stays open between requests with nothing read
    /// or written (then it is closed, as an end of stream).
    pub keep_alive: Duration,
}

/// A TCP listener with a connection cap, a read idle timeout and a
/// request deadline.
pub struct Bounded {
    inner: TcpListener,
    permits: Arc<Semaphore>,
    max: usize,
    timeouts: Timeouts,
}

impl Bounded {
    /// Wraps `inner`: at most `max_connections` (≥ 1) open at once, each
    /// closed after `timeouts.idle` without a byte from its peer or when a
    /// request goes unanswered for `timeouts.request` from its first byte.
    pub fn new(inner: TcpListener, max_connections: usize, timeouts: Timeouts) -> Bounded {
        let max = max_connections.max(1);
        Bounded {
            inner,
            permits: Arc::new(Semaphore::new(max)),
            max,
            timeouts,
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.max - self.permits.available_permits()
    }
}

impl axum::serve::Listener for Bounded {
    type Io = Guarded;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Guarded, SocketAddr) {
        loop {
            // The permit first: at the cap nothing more is accepted.
            let Ok(permit) = self.permits.clone().acquire_owned().await else {
                // The semaphore is never closed; were it, accept nothing.
                std::future::pending::<()>().await;
                continue;
            };
            match self.inner.accept().await {
                Ok((io, peer)) => return (Guarded::new(io, permit, self.timeouts), peer),
                Err(e) => {
                    // Out of descriptors and the like: back off, keep serving.
                    drop(permit);
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// The peer's address, as `ConnectInfo<Peer>` gives it to a handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub SocketAddr);

impl Connected<IncomingStream<'_, Bounded>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Bounded>) -> Peer {
        Peer(*stream.remote_addr())
    }
}

/// One accepted connection: its permit, the idle timer of its reads and
/// the deadline of the request it is receiving.
pub struct Guarded {
    io: TcpStream,
    _permit: OwnedSemaphorePermit,
    timeouts: Timeouts,
    timer: Pin<Box<Sleep>>,
    armed: bool,
    deadline: Pin<Box<Sleep>>,
    /// A request's first byte came and its answer has not begun.
    in_request: bool,
}

impl Guarded {
    fn new(io: TcpStream, permit: OwnedSemaphorePermit, timeouts: Timeouts) -> Guarded {
        Guarded {
            io,
            _permit: permit,
            timeouts,
            timer: Box::pin(tokio::time::sleep(timeouts.idle)),
            armed: false,
            deadline: Box::pin(tokio::time::sleep(timeouts.request)),
            in_request: false,
        }
    }

    /// Bytes of an answer were written: no request is in progress, and
    /// the keep-alive timeout counts from now (a pending read's timer
    /// moves with it).
    fn wrote(&mut self) {
        self.in_request = false;
        let at = Instant::now() + self.timeouts.keep_alive;
        self.timer.as_mut().reset(at);
        self.armed = true;
    }

    /// Waits until the peer's first byte can be read, without reading it:
    /// false when the peer closes or the socket fails first, or the
    /// keep-alive timeout passes. A server gives a connection its buffers
    /// only then, so a connection that sends nothing costs no more than
    /// its task ([`crate::http::serve`]).
    pub async fn first_byte(&self) -> bool {
        // A peek, not a wait for readiness: a socket just accepted reads
        // as ready before anything came, and a peek waits for a byte.
        let mut one = [0u8; 1];
        let peeked = tokio::time::timeout(self.timeouts.keep_alive, self.io.peek(&mut one));
        matches!(peeked.await, Ok(Ok(n)) if n > 0)
    }

    fn past_deadline() -> io::Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            "the request was not received within the request deadline",
        )
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = &mut *self;
        if me.in_request && me.deadline.is_elapsed() {
            return Poll::Ready(Err(Guarded::past_deadline()));
        }
        let filled = buf.filled().len();
        match Pin::new(&mut me.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                me.armed = false;
                if r.is_ok() && buf.filled().len() > filled && !me.in_request {
                    me.in_request = true;
                    me.deadline
                        .as_mut()
                        .reset(Instant::now() + me.timeouts.request);
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                if me.in_request && me.deadline.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(Guarded::past_deadline()));
                }
                if !me.armed {
                    let wait = if me.in_request {
                        me.timeouts.idle
                    } else {
                        me.timeouts.keep_alive
                    };
                    me.timer.as_mut().reset(Instant::now() + wait);
                    me.armed = true;
                }
                match me.timer.as_mut().poll(cx) {
                    // Between requests: let the connection go, an end of
                    // stream that closes it cleanly.
                    Poll::Ready(()) if !me.in_request => Poll::Ready(Ok(())),
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the peer sent nothing within the idle timeout",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            // The answer began: the next byte read starts the next request.
            self.wrote();
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.wrote();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::serve::Listener;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Idle and request limits as given, and a keep-alive as long as the
    /// idle timeout (the tests of the keep-alive set their own).
    fn timeouts(idle_s: u64, request_s: u64) -> Timeouts {
        Timeouts {
            idle: Duration::from_secs(idle_s),
            request: Duration::from_secs(request_s),
            keep_alive: Duration::from_secs(idle_s),
        }
    }

    /// Reads until the end of stream or an error: the bytes read, and the
    /// error's kind if one ended it.
    async fn drain(mut g: Guarded) -> (usize, Option<io::ErrorKind>) {
        let mut got = 0;
        let mut b = [0u8; 8];
        loop {
            match g.read(&mut b).await {
                Ok(0) => return (got, None),
                Ok(k) => got += k,
                Err(e) => return (got, Some(e.kind())),
            }
        }
    }

    /// A peer that trickles a byte every 25 s never trips a 30 s idle
    /// timeout, but its request is cut off at the 60 s deadline: after
    /// three bytes, before the fourth (on Tokio's paused clock).
    #[tokio::test(start_paused = true)]
    async fn a_trickling_peer_is_cut_off_at_the_request_deadline() {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut l = Bounded::new(tcp, 4, timeouts(30, 60));
        let mut c = TcpStream::connect(addr).await.unwrap();
        let (g, _) = l.accept().await;
        let reader = tokio::spawn(drain(g));
        c.write_all(b"P").await.unwrap();
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(25)).await;
            // Writes after the close may fail; the reader's count decides.
            let _ = c.write_all(b"x").await;
        }
        let (got, err) = reader.await.unwrap();
        assert_eq!(err, Some(io::ErrorKind::TimedOut));
        assert_eq!(got, 3, "bytes at 0, 25 and 50 s; the deadline at 60 s");
    }

    /// An answer ends the request: a kept-alive connection whose requests
    /// are each answered in time lives past the deadline.
    #[tokio::test(start_paused = true)]
    async fn an_answer_restarts_the_request_deadline() {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut l = Bounded::new(tcp, 4, timeouts(30, 60));
        let mut c = TcpStream::connect(addr).await.unwrap();
        let (mut g, _) = l.accept().await;
        let mut b = [0u8; 8];
        for _ in 0..4 {
            c.write_all(b"q").await.unwrap();
            assert_eq!(g.read(&mut b).await.unwrap(), 1);
            tokio::time::sleep(Duration::from_secs(25)).await;
            g.write_all(b"a").await.unwrap();
            c.read_exact(&mut b[..1]).await.unwrap();
        }
        // 100 s on one connection, no request older than 25 s: still open.
        c.write_all(b"q").await.unwrap();
        assert_eq!(g.read(&mut b).await.unwrap(), 1);
    }

    /// A listener on loopback with a 5 s keep-alive (idle 30 s, request
    /// deadline 60 s), and its address.
    async fn keep_alive_listener() -> (Bounded, SocketAddr) {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let limits = Timeouts {
            keep_alive: Duration::from_secs(5),
            ..timeouts(30, 60)
        };
        (Bounded::new(tcp, 4, limits), addr)
    }

    /// Between requests a connection is let go after the keep-alive
    /// timeout, as an end of stream; while a request is in progress (a
    /// long poll) its pending read waits the idle timeout instead.
    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_is_let_go_after_the_keep_alive_not_during_a_request() {
        let (mut l, addr) = keep_alive_listener().await;
        let mut c = TcpStream::connect(addr).await.unwrap();
        let (mut g, _) = l.accept().await;
        let mut b = [0u8; 8];
        c.write_all(b"q").await.unwrap();
        assert_eq!(g.read(&mut b).await.unwrap(), 1);
        // The request is held 20 s, four keep-alives: its read stays pending.
        let held = tokio::time::timeout(Duration::from_secs(20), g.read(&mut b)).await;
        assert!(held.is_err(), "a pending read during a request: {held:?}");
        g.write_all(b"a").await.unwrap();
        let answered = Instant::now();
        c.read_exact(&mut b[..1]).await.unwrap();
        assert_eq!(g.read(&mut b).await.unwrap(), 0, "an end of stream");
        assert_eq!(answered.elapsed(), Duration::from_secs(5));
        // A connection that never sends a byte is let go the same way.
        let _c2 = TcpStream::connect(addr).await.unwrap();
        let (mut g2, _) = l.accept().await;
        let opened = Instant::now();
        assert_eq!(g2.read(&mut b).await.unwrap(), 0);
        assert_eq!(opened.elapsed(), Duration::from_secs(5));
    }

    /// An answer written slowly is not cut: the keep-alive counts from the
    /// last byte written, with the connection's read pending throughout.
    #[tokio::test(start_paused = true)]
    async fn the_keep_alive_counts_from_the_last_byte_written() {
        let (mut l, addr) = keep_alive_listener().await;
        let mut c = TcpStream::connect(addr).await.unwrap();
        let (g, _) = l.accept().await;
        c.write_all(b"q").await.unwrap();
        let (mut rd, mut wr) = tokio::io::split(g);
        let mut b = [0u8; 8];
        assert_eq!(rd.read(&mut b).await.unwrap(), 1);
        let start = Instant::now();
        let reader = tokio::spawn(async move {
            let mut b = [0u8; 8];
            let n = rd.read(&mut b).await.unwrap();
            (n, Instant::now())
        });
        for _ in 0..3 {
            wr.write_all(b"a").await.unwrap();
            tokio::time::sleep(Duration::from_secs(4)).await;
        }
        let (n, closed) = reader.await.unwrap();
        assert_eq!(n, 0, "an end of stream");
        assert_eq!(
            closed - start,
            Duration::from_secs(13),
            "5 s after the write at 8 s"
        );
    }

    /// At the cap the listener holds no permit to accept with; a closed
    /// connection gives its permit back and the next one is accepted.
    #[tokio::test]
    async fn at_the_cap_nothing_more_is_accepted_until_one_closes() {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut l = Bounded::new(tcp, 1, timeouts(600, 600));
        let _c1 = TcpStream::connect(addr).await.unwrap();
        let (g1, _) = l.accept().await;
        assert_eq!(l.open(), 1);
        assert_eq!(
            l.permits.available_permits(),
            0,
            "no permit left to accept with"
        );
        let _c2 = TcpStream::connect(addr).await.unwrap();
        let second = tokio::spawn(async move {
            let (g, _) = l.accept().await;
            (g, l)
        });
        drop(g1);
        let (_g2, l) = second.await.unwrap();
        assert_eq!(l.open(), 1);
    }

    /// A peer that sends half a request and then nothing is cut off after
    /// the idle timeout (on Tokio's paused clock: no wall time passes).
    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_is_cut_off_after_the_idle_timeout() {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut l = Bounded::new(tcp, 4, timeouts(30, 600));
        let mut c = TcpStream::connect(addr).await.unwrap();
        let (mut g, _) = l.accept().await;
        c.write_all(b"POST / HTTP/1.1\r\nHost").await.unwrap();
        let mut buf = [0u8; 64];
        let n = g.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"POST / HTTP/1.1\r\nHost");
        let err = g.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        // Bytes keep a connection alive: the timer restarts with each read
        // (three bytes 20 s apart outlive a 30 s timeout; then the close).
        let mut c2 = TcpStream::connect(addr).await.unwrap();
        let (mut g2, _) = l.accept().await;
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut b = [0u8; 8];
            loop {
                match g2.read(&mut b).await {
                    Ok(0) => return Ok(got),
                    Ok(k) => got += k,
                    Err(e) => return Err((got, e.kind())),
                }
            }
        });
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(20)).await;
            c2.write_all(b"x").await.unwrap();
        }
        drop(c2);
        assert_eq!(reader.await.unwrap(), Ok(3));
    }
}
