//! A TCP proxy that can cut a link without closing it: while cut it
//! forwards nothing (bytes it has read wait, unread bytes stay in the
//! kernel) and carries no new connection on, as a stalled network does;
//! nothing is closed or refused. The outage drill and the replicas' tests
//! put it between a routerd and its PostgreSQL server.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Copies `from` to `to` until either end closes; forwards nothing while
/// `cut` is set (the bytes wait, unread, as on a stalled link).
fn pump(mut from: TcpStream, mut to: TcpStream, cut: &AtomicBool) {
    use std::io::{ErrorKind, Read, Write};
    let _ = from.set_read_timeout(Some(Duration::from_millis(10)));
    let mut buf = [0u8; 16 * 1024];
    loop {
        if cut.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                // Read as the cut came: held, not forwarded, until it heals.
                while cut.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

/// A TCP proxy on a free loopback port to `upstream`: returns its port
/// and the flag that cuts it (set: cut; clear: heal). While cut, a new
/// connection is accepted but not carried on.
///
/// Errors: no loopback port to listen on.
pub fn proxy(upstream: SocketAddr) -> std::io::Result<(u16, Arc<AtomicBool>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let cut = Arc::new(AtomicBool::new(false));
    let flag = cut.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let flag = flag.clone();
            std::thread::spawn(move || {
                while flag.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let Ok(server) = TcpStream::connect(upstream) else {
                    return;
                };
                // A link forwards each segment as it comes: without this,
                // Nagle's algorithm on the proxy's sockets held every
                // small write for the peer's delayed ACK (about 40 ms), a
                // wait a direct connection does not have.
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    return;
                };
                let f2 = flag.clone();
                std::thread::spawn(move || pump(c2, server, &f2));
                pump(s2, client, &flag);
            });
        }
    });
    Ok((port, cut))
}

/// `url` (`…@host:port/…`) with its port replaced by `port`, and the
/// port it had; `None` for a URL without `@host:port/`.
pub fn via_port(url: &str, port: u16) -> Option<(String, u16)> {
    let at = url.find('@')?;
    let colon = at + url[at..].find(':')?;
    let end = colon + url[colon..].find('/')?;
    let old: u16 = url[colon + 1..end].parse().ok()?;
    Some((format!("{}:{port}{}", &url[..colon], &url[end..]), old))
}
