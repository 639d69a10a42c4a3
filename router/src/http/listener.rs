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
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
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
    cap: CapHandle,
    timeouts: Timeouts,
}

impl Bounded {
    /// Wraps `inner`: at most `max_connections` (≥ 1) open at once, each
    /// closed after `timeouts.idle` without a byte from its peer or when a
    /// request goes unanswered for `timeouts.request` from its first byte.
    pub fn new(inner: TcpListener, max_connections: usize, timeouts: Timeouts) -> Bounded {
        let max = max_connections.max(1);
        let cap = CapHandle(Arc::new(Cap {
            permits: Arc::new(Semaphore::new(max)),
            issued: AtomicUsize::new(max),
            target: AtomicUsize::new(max),
            open: AtomicUsize::new(0),
            adjust: parking_lot::Mutex::new(()),
        }));
        Bounded {
            inner,
            cap,
            timeouts,
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.cap.open()
    }

    /// Places free under the cap now (the tests').
    #[cfg(test)]
    pub(super) fn free(&self) -> usize {
        self.cap.0.permits.available_permits()
    }

    /// A handle that reads the open connections and moves the cap while
    /// the listener serves ([`crate::http::headroom`]).
    pub fn cap_handle(&self) -> CapHandle {
        self.cap.clone()
    }
}

/// The connection cap of a [`Bounded`] listener, shared with whatever
/// moves it.
#[derive(Clone)]
pub struct CapHandle(Arc<Cap>);

struct Cap {
    permits: Arc<Semaphore>,
    /// Permits in the semaphore, held or available: the cap, or above it
    /// while connections past a lowered cap are still open.
    issued: AtomicUsize,
    /// The cap set last.
    target: AtomicUsize,
    /// Connections accepted and not yet closed.
    open: AtomicUsize,
    /// Serializes moves of the cap.
    adjust: parking_lot::Mutex<()>,
}

impl CapHandle {
    /// Connections open now.
    pub fn open(&self) -> usize {
        self.0.open.load(Relaxed)
    }

    /// Moves the cap to `cap` (≥ 1). Raised, the new places are free at
    /// once; lowered, free places are taken away at once and the rest as
    /// open connections close, on later calls: an open connection is
    /// never cut, but while more are open than the cap, the server closes
    /// each after its answer ([`CapHandle::over`]).
    pub fn set_cap(&self, cap: usize) {
        let cap = cap.max(1);
        let _one = self.0.adjust.lock();
        self.0.target.store(cap, Relaxed);
        let issued = self.0.issued.load(Relaxed);
        if cap > issued {
            self.0.permits.add_permits(cap - issued);
            self.0.issued.store(cap, Relaxed);
        } else if cap < issued {
            let gone = self.0.permits.forget_permits(issued - cap);
            self.0.issued.fetch_sub(gone, Relaxed);
        }
    }

    /// The cap set last (more may be open just after it was lowered).
    pub fn cap(&self) -> usize {
        self.0.target.load(Relaxed)
    }

    /// More connections are open than the cap: a connection should close
    /// after its answer rather than be kept alive. (The accept loop waits
    /// for its next connection holding a place, so after a lowering one
    /// connection more than the cap may be accepted; it is over too.)
    pub fn over(&self) -> bool {
        self.open() > self.cap()
    }
}

impl axum::serve::Listener for Bounded {
    type Io = Guarded;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Guarded, SocketAddr) {
        loop {
            // The permit first: at the cap nothing more is accepted.
            let Ok(permit) = self.cap.0.permits.clone().acquire_owned().await else {
                // The semaphore is never closed; were it, accept nothing.
                std::future::pending::<()>().await;
                continue;
            };
            match self.inner.accept().await {
                Ok((io, peer)) => {
                    let place = Place::new(permit, &self.cap);
                    return (Guarded::new(io, place, self.timeouts), peer);
                }
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

/// An accepted connection's place under the cap: its permit, and its
/// count among the open connections, both given back when dropped.
struct Place {
    _permit: OwnedSemaphorePermit,
    cap: Arc<Cap>,
}

impl Place {
    fn new(permit: OwnedSemaphorePermit, cap: &CapHandle) -> Place {
        cap.0.open.fetch_add(1, Relaxed);
        Place {
            _permit: permit,
            cap: cap.0.clone(),
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.cap.open.fetch_sub(1, Relaxed);
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
    _place: Place,
    timeouts: Timeouts,
    timer: Pin<Box<Sleep>>,
    armed: bool,
    deadline: Pin<Box<Sleep>>,
    /// A request's first byte came and its answer has not begun.
    in_request: bool,
}

impl Guarded {
    fn new(io: TcpStream, place: Place, timeouts: Timeouts) -> Guarded {
        Guarded {
            io,
            _place: place,
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
