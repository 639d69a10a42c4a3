//! routerd's server loop: every accepted connection served as HTTP/1.1
//! on hyper's own HTTP/1 connection, with the peer's address given to the
//! handlers and a graceful stop (docs/router.md "The small box").
//!
//! - **One protocol, no sniffing.** A server that also speaks HTTP/2
//!   first reads a connection's opening bytes to tell the two apart and
//!   hands them back to the HTTP/1 parser, whose read buffer then outgrows
//!   its first 8 KiB on the first request and stays 16 KiB for the
//!   connection's life. Served as HTTP/1.1 alone, a connection's read
//!   buffer stays at its first 8 KiB for requests that fit it (every
//!   device request does): routerd's resident memory per held
//!   long poll fell from about 33 KB to 26 KB, and per kept-alive
//!   connection from 30 KB to 23 KB (`ci/conn-census.py`; docs/router.md
//!   "Cheaper connections").
//! - **No buffers before the first byte.** A connection is handed to the
//!   HTTP/1 parser (which takes its 8 KiB read and write buffers at once)
//!   only when its first byte can be read; until then it costs its task
//!   alone, about 2 KB, and one that sends nothing within the keep-alive
//!   timeout is closed, as the listener closes any idle connection.
//! - **The read buffer may still grow** for a large request, as hyper
//!   lets it (the handlers cap bodies). Capped at its first 8 KiB, it left
//!   the rest of an oversized body unread when the 413 answer closed the
//!   connection, and the kernel's reset then raced the answer to the
//!   client.
//! - **Past a lowered cap, a connection closes after its answer.** Where
//!   the listener's cap was lowered below the connections open
//!   ([`super::headroom`]), an answer carries `Connection: close`, so
//!   connections a fleet keeps busy still give their places back.
//! - **The peer's address** is in every request's extensions as
//!   `ConnectInfo<Peer>`, as axum's own server puts it there.
//! - **A graceful stop.** Once `stop` completes, nothing more is accepted;
//!   an idle connection closes at once, one in a request closes after its
//!   answer, and the call returns when all are closed.

use std::convert::Infallible;
use std::future::Future;

use axum::extract::ConnectInfo;
use axum::serve::Listener;
use axum::Router;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::Request;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tower_service::Service;

use super::listener::{Bounded, Peer};

/// Serves `app` on every connection `listener` accepts until `stop`
/// completes, then waits for the open connections to close (an idle one
/// at once, one in a request after its answer). A connection's I/O error
/// ends that connection alone.
pub async fn serve<F>(mut listener: Bounded, app: Router, stop: F)
where
    F: Future<Output = ()>,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    // The listener's own timeouts bound a slow or silent peer.
    http.header_read_timeout(None);
    let cap = listener.cap_handle();
    let graceful = GracefulShutdown::new();
    let (stop_all, stopped) = tokio::sync::watch::channel(false);
    let mut stop = std::pin::pin!(stop);
    loop {
        let (io, peer) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => break,
        };
        let app = app.clone();
        let watcher = graceful.watcher();
        let mut stopping = stopped.clone();
        let cap = cap.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let mut req = req.map(axum::body::Body::new);
            req.extensions_mut().insert(ConnectInfo(Peer(peer)));
            let answer = app.clone().call(req);
            let cap = cap.clone();
            async move {
                let mut resp = answer.await?;
                if cap.over() {
                    // Past a lowered cap: this connection's place goes.
                    let close = HeaderValue::from_static("close");
                    resp.headers_mut().insert(header::CONNECTION, close);
                }
                Ok::<_, Infallible>(resp)
            }
        });
        let http = http.clone();
        tokio::spawn(async move {
            // No buffers before the peer's first byte.
            tokio::select! {
                ready = io.first_byte() => if !ready { return },
                _ = stopping.wait_for(|s| *s) => return,
            }
            let conn = watcher.watch(http.serve_connection(TokioIo::new(io), service));
            if let Err(e) = conn.await {
                tracing::trace!("connection from {peer} ended: {e}");
            }
        });
    }
    // Nothing more is accepted: new connections are refused, and those
    // still waiting for their first byte close.
    drop(listener);
    let _ = stop_all.send(true);
    graceful.shutdown().await;
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::Duration;

    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::{oneshot, Notify};

    use super::*;
    use crate::http::listener::Timeouts;

    /// A loopback listener with a keep-alive of `keep_alive_s` and the
    /// other limits far beyond any test's span.
    async fn listener_with(keep_alive_s: u64) -> (Bounded, SocketAddr) {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let long = Duration::from_secs(600);
        let limits = Timeouts {
            idle: long,
            request: long,
            keep_alive: Duration::from_secs(keep_alive_s),
        };
        (Bounded::new(tcp, 16, limits), addr)
    }

    async fn listener() -> (Bounded, SocketAddr) {
        listener_with(600).await
    }

    /// Reads one answer (its head and a `content-length` body) and returns
    /// it whole as text.
    async fn answer(c: &mut TcpStream) -> String {
        let mut got = Vec::new();
        let mut b = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&got).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let len = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .map_or(0, |n| n.trim().parse::<usize>().unwrap());
                if got.len() >= end + 4 + len {
                    return text;
                }
            }
            let n = c.read(&mut b).await.unwrap();
            assert!(n > 0, "the connection closed mid-answer: {text:?}");
            got.extend_from_slice(&b[..n]);
        }
    }

    /// Reads until the end of stream; the bytes read.
    async fn rest(c: &mut TcpStream) -> usize {
        let mut b = [0u8; 256];
        let mut total = 0;
        loop {
            match c.read(&mut b).await {
                Ok(0) | Err(_) => return total,
                Ok(n) => total += n,
            }
        }
    }

    fn echo_peer() -> Router {
        Router::new().route(
            "/",
            get(|ConnectInfo(Peer(p)): ConnectInfo<Peer>| async move { p.to_string() }),
        )
    }

    /// A handler sees the peer's address, on every request of a
    /// kept-alive connection.
    #[tokio::test]
    async fn the_peer_reaches_the_handler() {
        let (l, addr) = listener().await;
        let server = tokio::spawn(serve(l, echo_peer(), std::future::pending()));
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let a = answer(&mut c).await;
        assert!(a.starts_with("HTTP/1.1 200"), "{a}");
        assert!(a.ends_with(&c.local_addr().unwrap().to_string()), "{a}");
        // The same connection, kept alive.
        c.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let a = answer(&mut c).await;
        assert!(a.ends_with(&c.local_addr().unwrap().to_string()), "{a}");
        server.abort();
    }

    /// A connection that sends nothing is closed after the keep-alive; one
    /// whose first byte comes within it is served (on Tokio's paused
    /// clock).
    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_is_closed_after_the_keep_alive() {
        let (l, addr) = listener_with(5).await;
        let server = tokio::spawn(serve(l, echo_peer(), std::future::pending()));
        let mut silent = TcpStream::connect(addr).await.unwrap();
        let opened = tokio::time::Instant::now();
        assert_eq!(rest(&mut silent).await, 0);
        assert_eq!(opened.elapsed(), Duration::from_secs(5));
        let mut late = TcpStream::connect(addr).await.unwrap();
        tokio::time::sleep(Duration::from_secs(4)).await;
        late.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let a = answer(&mut late).await;
        assert!(a.starts_with("HTTP/1.1 200"), "{a}");
        server.abort();
    }

    /// While more connections are open than a lowered cap, an answer
    /// carries `Connection: close` and its connection closes; at the cap
    /// again, connections are kept alive.
    #[tokio::test]
    async fn past_a_lowered_cap_an_answer_closes_its_connection() {
        let (l, addr) = listener().await;
        let cap = l.cap_handle();
        let server = tokio::spawn(serve(l, echo_peer(), std::future::pending()));
        let get = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";
        let mut a = TcpStream::connect(addr).await.unwrap();
        let mut b = TcpStream::connect(addr).await.unwrap();
        for c in [&mut a, &mut b] {
            c.write_all(get).await.unwrap();
            let ans = answer(c).await;
            assert!(!ans.contains("connection: close"), "{ans}");
        }
        cap.set_cap(1);
        a.write_all(get).await.unwrap();
        let ans = answer(&mut a).await;
        assert!(ans.contains("connection: close"), "{ans}");
        assert_eq!(rest(&mut a).await, 0, "closed after its answer");
        while cap.open() > 1 {
            tokio::task::yield_now().await;
        }
        b.write_all(get).await.unwrap();
        let ans = answer(&mut b).await;
        assert!(!ans.contains("connection: close"), "at the cap: {ans}");
        server.abort();
    }

    /// A stop closes an idle kept-alive connection at once and refuses new
    /// ones; a request in progress is answered, then its connection
    /// closes and the server returns.
    #[tokio::test]
    async fn a_stop_answers_the_request_in_progress_and_closes_the_idle() {
        let (l, addr) = listener().await;
        let entered = Arc::new(Notify::new());
        let release = Arc::new(Notify::new());
        let (e, r) = (entered.clone(), release.clone());
        let app = echo_peer().route(
            "/slow",
            get(move || async move {
                e.notify_one();
                r.notified().await;
                "done"
            }),
        );
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let server = tokio::spawn(serve(l, app, async move {
            let _ = stop_rx.await;
        }));
        let mut idle = TcpStream::connect(addr).await.unwrap();
        idle.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        answer(&mut idle).await;
        let mut busy = TcpStream::connect(addr).await.unwrap();
        busy.write_all(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        entered.notified().await;
        let mut silent = TcpStream::connect(addr).await.unwrap();
        stop_tx.send(()).unwrap();
        assert_eq!(rest(&mut idle).await, 0, "the idle connection closes");
        assert_eq!(rest(&mut silent).await, 0, "so does a silent one");
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "nothing is accepted after a stop"
        );
        assert!(!server.is_finished(), "a request is still in progress");
        release.notify_one();
        let a = answer(&mut busy).await;
        assert!(a.starts_with("HTTP/1.1 200") && a.ends_with("done"), "{a}");
        assert_eq!(rest(&mut busy).await, 0, "closed after its answer");
        server.await.unwrap();
    }
}
