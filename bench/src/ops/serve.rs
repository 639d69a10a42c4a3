//! A loopback HTTP listener on its own named thread that stops on drop,
//! shared by the metrics endpoint and the operator channel.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use thiserror::Error;

/// How often the serving thread wakes when idle (to check for stop and to
/// run the idle hook).
pub const IDLE_TICK: Duration = Duration::from_millis(200);

/// The listener could not start.
#[derive(Debug, Error)]
pub enum ServeError {
    /// The address is taken, not local, or not bindable.
    #[error("cannot listen on {addr}: {reason} (pick another 127.0.0.1:PORT, or port 0 for any)")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why binding failed.
        reason: String,
    },
    /// The operator channel listens on loopback only: it changes a live run.
    #[error(
        "{addr} is not a loopback address: the operator channel listens on 127.0.0.1 or ::1 only"
    )]
    NotLoopback {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The serving thread could not be spawned.
    #[error("cannot start the {name} thread")]
    Thread {
        /// The thread's name.
        name: String,
        /// The spawn error.
        #[source]
        source: std::io::Error,
    },
}

/// A running listener. Dropping it stops the thread and closes the port.
pub struct Listener {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

impl Listener {
    /// Bind `addr` (port 0 picks a free port) and serve every request with
    /// `handle` on a thread named `name`; `idle` runs about every
    /// [`IDLE_TICK`] while no request arrives. Errors: [`ServeError`].
    pub fn spawn<H, I>(
        addr: SocketAddr,
        name: &str,
        mut handle: H,
        mut idle: I,
    ) -> Result<Listener, ServeError>
    where
        H: FnMut(tiny_http::Request) + Send + 'static,
        I: FnMut() + Send + 'static,
    {
        let server = tiny_http::Server::http(addr).map_err(|e| ServeError::Bind {
            addr,
            reason: e.to_string(),
        })?;
        let bound = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| ServeError::Bind {
                addr,
                reason: "not an IP listener".to_string(),
            })?;
        let server = Arc::new(server);
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&server), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                while !st.load(Ordering::Acquire) {
                    match s.recv_timeout(IDLE_TICK) {
                        Ok(Some(req)) => handle(req),
                        Ok(None) => idle(),
                        Err(_) => break,
                    }
                }
            })
            .map_err(|source| ServeError::Thread {
                name: name.to_string(),
                source,
            })?;
        Ok(Listener {
            addr: bound,
            stop,
            server,
            thread: Some(thread),
        })
    }

    /// The address actually bound (the real port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reply to `req` with `status`, a content type and a text body. A client
/// that hung up is not an error worth more than a debug line.
pub fn reply(req: tiny_http::Request, status: u16, content_type: &str, body: String) {
    let mut resp = tiny_http::Response::from_data(body.into_bytes()).with_status_code(status);
    if let Ok(h) = tiny_http::Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes()) {
        resp = resp.with_header(h);
    }
    if let Err(e) = req.respond(resp) {
        tracing::debug!(error = %e, "reply not delivered: the client hung up");
    }
}
