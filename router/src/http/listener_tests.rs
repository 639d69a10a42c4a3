//! The listener's tests: its timeouts on Tokio's paused clock, its cap
//! and the cap's moves, over loopback sockets.

use super::listener::*;
use axum::serve::Listener;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

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
    assert_eq!(l.free(), 0, "no permit left to accept with");
    let _c2 = TcpStream::connect(addr).await.unwrap();
    let second = tokio::spawn(async move {
        let (g, _) = l.accept().await;
        (g, l)
    });
    drop(g1);
    let (_g2, l) = second.await.unwrap();
    assert_eq!(l.open(), 1);
}

/// A lowered cap takes the free places at once and the others as their
/// connections close, cutting none; a raised one frees places at once.
#[tokio::test]
async fn a_lowered_cap_waits_for_open_connections_to_close() {
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let mut l = Bounded::new(tcp, 4, timeouts(600, 600));
    let cap = l.cap_handle();
    let mut open = Vec::new();
    for _ in 0..3 {
        let c = TcpStream::connect(addr).await.unwrap();
        open.push((c, l.accept().await.0));
    }
    assert!(!cap.over());
    cap.set_cap(2);
    assert_eq!((cap.open(), cap.cap()), (3, 2));
    assert!(cap.over(), "one connection too many");
    assert_eq!(l.free(), 0, "the free place is gone");
    // Two close: one is the debt, the other a place under the cap.
    open.truncate(1);
    cap.set_cap(2);
    assert_eq!((cap.open(), cap.cap()), (1, 2));
    assert!(!cap.over());
    assert_eq!(l.free(), 1);
    cap.set_cap(5);
    assert_eq!((cap.open(), cap.cap()), (1, 5));
    assert_eq!(l.free(), 4);
    // Lowered to the open count: nothing more is accepted until a close.
    cap.set_cap(1);
    assert_eq!(l.free(), 0);
    let _c = TcpStream::connect(addr).await.unwrap();
    let next = tokio::spawn(async move { l.accept().await.0 });
    open.clear();
    let _g = next.await.unwrap();
    assert_eq!((cap.open(), cap.cap()), (1, 1));
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
