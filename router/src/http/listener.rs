//! routerd's listener: a cap on open connections and an idle timeout on
//! every connection's reads (docs/router.md "Threat model").
//!
//! - **Connections are capped.** A connection holds one permit from
//!   accept to close; at the cap the listener stops accepting and new
//!   connections wait in the kernel's backlog until one closes, so a
//!   device holding many connections open cannot take the process's
//!   memory or file descriptors.
//! - **A silent peer is closed.** A read that waits longer than the idle
//!   timeout for the peer's next byte fails the connection: a request
//!   whose headers or body never finish, and a kept-alive connection that
//!   sends nothing more, are closed after it. The timeout must exceed the
//!   longest long poll ([`crate::api::MAX_LEASE_WAIT_S`]) plus its answer.

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

/// A TCP listener with a connection cap and a read idle timeout.
pub struct Bounded {
    inner: TcpListener,
    permits: Arc<Semaphore>,
    max: usize,
    idle: Duration,
}

impl Bounded {
    /// Wraps `inner`: at most `max_connections` (≥ 1) open at once, each
    /// closed after `idle` without a byte from its peer.
    pub fn new(inner: TcpListener, max_connections: usize, idle: Duration) -> Bounded {
        let max = max_connections.max(1);
        Bounded {
            inner,
            permits: Arc::new(Semaphore::new(max)),
            max,
            idle,
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
                Ok((io, peer)) => return (Guarded::new(io, permit, self.idle), peer),
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

/// One accepted connection: its permit, and the idle timer of its reads.
pub struct Guarded {
    io: TcpStream,
    _permit: OwnedSemaphorePermit,
    idle: Duration,
    timer: Pin<Box<Sleep>>,
    armed: bool,
}

impl Guarded {
    fn new(io: TcpStream, permit: OwnedSemaphorePermit, idle: Duration) -> Guarded {
        Guarded {
            io,
            _permit: permit,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            armed: false,
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = &mut *self;
        match Pin::new(&mut me.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                me.armed = false;
                Poll::Ready(r)
            }
            Poll::Pending => {
                if !me.armed {
                    me.timer.as_mut().reset(Instant::now() + me.idle);
                    me.armed = true;
                }
                match me.timer.as_mut().poll(cx) {
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
        Pin::new(&mut self.io).poll_write(cx, buf)
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
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
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

    /// At the cap the listener holds no permit to accept with; a closed
    /// connection gives its permit back and the next one is accepted.
    #[tokio::test]
    async fn at_the_cap_nothing_more_is_accepted_until_one_closes() {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut l = Bounded::new(tcp, 1, Duration::from_secs(600));
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
        let mut l = Bounded::new(tcp, 4, Duration::from_secs(30));
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
