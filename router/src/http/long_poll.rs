//! The lease's long poll: an empty answer is held until work may be
//! admissible, so a waiting device gets its next item when it becomes
//! admissible instead of at its next re-poll.
//!
//! The core stays pure: each try is one lease at the clock's now
//! ([`super::lease::lease_once`]: a lease with items is answered once its
//! row is durable), and each try spends one token of the device's request
//! budget, so however many polls a device holds open, its tries are paced
//! by that budget. Between tries the request sleeps until the earliest of
//! the empty answer's `retry_after_s` (the next refill or the politeness
//! token promised to this device), the next tick, the wait's end and the
//! service stopping. An answer with items, an error of the first try, the
//! wait's end or a stop answers the request; a later try refused for the
//! device's budget answers the last empty answer, its `retry_after_s` at
//! least the budget's wait. Empty tries keep no lease.
//!
//! Held polls are capped (`RouterConfig::held_polls`): a held poll keeps
//! its connection's buffers, about 26 KB (docs/router.md "The small
//! box"), so a fleet of waiting devices could otherwise take the box's
//! memory. A poll that would be held past the cap is answered at once with
//! its empty answer and `retry_after_s`, as a poll without a wait is; the
//! device comes back then.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::response::Response;

use std::sync::atomic::Ordering::Relaxed;

use super::{error, ok, Shell};
use crate::api::{ApiError, LeaseRequest, LeaseResponse, MAX_LEASE_WAIT_S};

/// The shortest sleep between two tries: a hint of 0 (a refill due now
/// whose tick is a moment late) does not spin.
const MIN_NAP: Duration = Duration::from_millis(5);

/// Leases for `req` (whose `wait_s` is > 0), holding an empty answer as
/// long as `wait_s` allows. Errors answer at once, as without a wait.
pub(super) async fn lease(shell: Arc<Shell>, req: LeaseRequest) -> Response {
    let wait = req.wait_s.unwrap_or(0.0);
    let deadline = Instant::now()
        + Duration::from_secs_f64(if wait.is_finite() {
            wait.clamp(0.0, MAX_LEASE_WAIT_S)
        } else {
            0.0
        });
    let mut ticks = shell.ticks.subscribe();
    let mut closing = shell.closing.subscribe();
    let req = Arc::new(req);
    let mut last: Option<LeaseResponse> = None;
    let mut held: Option<Held> = None;
    loop {
        ticks.borrow_and_update();
        let out = super::lease::lease_once(&shell, req.clone()).await;
        let resp = match (out, last.take()) {
            (Ok(resp), _) => resp,
            (Err(ApiError::RateLimited(wait)), Some(mut prev)) => {
                let hint = prev.retry_after_s.unwrap_or(0.0).max(wait);
                prev.retry_after_s = Some(hint);
                return ok(prev);
            }
            (Err(e), _) => return error(&e),
        };
        let now = Instant::now();
        if !resp.items.is_empty() || now >= deadline || *closing.borrow() {
            return ok(resp);
        }
        if held.is_none() {
            match Held::take(&shell) {
                Some(h) => held = Some(h),
                None => {
                    shell.held_refused.fetch_add(1, Relaxed);
                    return ok(resp);
                }
            }
        }
        let left = deadline - now;
        let hint = resp
            .retry_after_s
            .filter(|h| h.is_finite() && *h >= 0.0)
            .map_or(left, Duration::from_secs_f64);
        let nap = hint.clamp(MIN_NAP, left.max(MIN_NAP)).min(left);
        last = Some(resp);
        tokio::select! {
            _ = tokio::time::sleep(nap) => {}
            _ = ticks.changed() => {}
            _ = closing.changed() => {}
        }
    }
}

/// One held poll's place under the cap, given back when dropped.
struct Held(Arc<Shell>);

impl Held {
    /// A place, if fewer than the cap are held.
    fn take(shell: &Arc<Shell>) -> Option<Held> {
        shell
            .held
            .fetch_update(Relaxed, Relaxed, |n| (n < shell.held_cap).then_some(n + 1))
            .ok()
            .map(|_| Held(shell.clone()))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Relaxed);
    }
}
