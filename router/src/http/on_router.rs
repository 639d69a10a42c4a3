//! The router's lock for a request's short hold: taken on the request's
//! own task where it is free, on the blocking pool where it must be
//! waited for.

use std::sync::Arc;

use super::Shell;
use crate::api::ApiError;
use crate::Router;

impl Shell {
    /// Leases and deposits so far that found the router's lock held and
    /// waited for it on the blocking pool instead of on their own task
    /// (`router_lock_waits_total` in `/metrics`).
    pub fn lock_waits(&self) -> u64 {
        self.lock_waits.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Runs `f` on the router under its lock at the clock's now: at once on
/// this task where the lock is free, else on the blocking pool. A hold
/// the hot paths make is tens of µs, less than the hand-off to a pool
/// thread and back costs (two context switches, each dear on a VM:
/// docs/router.md, "Registrations in groups"); a wait for the lock (a
/// tick or a snapshot's take holds it for milliseconds) stays off the
/// async workers. Errors: the pool's thread failed.
pub(super) async fn with_router<T, F>(shell: &Arc<Shell>, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&Shell, &mut Router, f64) -> T + Send + 'static,
{
    if let Some(mut core) = shell.router.try_lock() {
        let now = (shell.clock)();
        return Ok(f(shell, &mut core, now));
    }
    shell
        .lock_waits
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let s = shell.clone();
    tokio::task::spawn_blocking(move || {
        let now = (s.clock)();
        let mut core = s.router.lock();
        f(&s, &mut core, now)
    })
    .await
    .map_err(|_| ApiError::Store("the request's worker failed".into()))
}
