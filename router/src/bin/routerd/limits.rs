//! The serve flags' limits: their ranges checked, the connection timeouts
//! built from them, and the connection cap set to follow a memory limit.

use std::time::Duration;

use anyhow::{bail, Result};
use router::http::headroom;
use router::http::listener::{Bounded, Timeouts};

use crate::ServeArgs;

/// The serve flags' ranges checked: the drain bound and the connection
/// timeouts.
///
/// Errors: a flag out of its range, named with its range.
pub(crate) fn serve_limits(args: &ServeArgs) -> Result<(Duration, Timeouts)> {
    let max_wait = router::api::MAX_LEASE_WAIT_S;
    in_range("drain-s", args.drain_s, (0.0, true), 600.0)?;
    in_range("idle-s", args.idle_s, (0.0, false), 3600.0)?;
    in_range("aging-period-s", args.aging_period_s, (0.0, true), 3600.0)?;
    in_range("request-s", args.request_s, (max_wait, false), 3600.0)?;
    in_range("keep-alive-s", args.keep_alive_s, (0.0, false), 3600.0)?;
    in_range("lease-ttl-s", args.lease_ttl_s, (1.0, true), 86_400.0)?;
    let timeouts = Timeouts {
        idle: Duration::from_secs_f64(args.idle_s),
        request: Duration::from_secs_f64(args.request_s),
        keep_alive: Duration::from_secs_f64(args.keep_alive_s.min(args.idle_s)),
    };
    Ok((Duration::from_secs_f64(args.drain_s), timeouts))
}

/// Checks that `--flag`'s `value` is finite, above `lo` (or equal to it
/// when `closed`) and at most `hi`. Errors: the flag named with its range.
fn in_range(flag: &str, value: f64, (lo, closed): (f64, bool), hi: f64) -> Result<()> {
    let above = if closed { value >= lo } else { value > lo };
    if !(value.is_finite() && above && value <= hi) {
        let open = if closed { '[' } else { '(' };
        bail!("--{flag} must be in {open}{lo}, {hi}], got {value}");
    }
    Ok(())
}

/// Sets `listener`'s connection cap to follow the memory limit: the
/// `--memory-limit-mib` flag's (0: none), or the control group's where the
/// flag is absent ([`headroom::group_memory_limit`]). Logs which; with no
/// limit the cap stays `--max-connections`. Call within the runtime.
pub(crate) fn follow_memory(listener: &Bounded, args: &ServeArgs) {
    let max = args.max_connections as usize;
    let limit = match args.memory_limit_mib {
        Some(0) => None,
        Some(mib) => Some(mib << 20),
        None => headroom::group_memory_limit(),
    };
    let Some(limit) = limit else {
        tracing::info!(
            max,
            "no memory limit: the connection cap stays at its maximum"
        );
        return;
    };
    tracing::info!(
        max,
        limit_mib = limit >> 20,
        "the connection cap follows the memory left under the limit"
    );
    tokio::spawn(headroom::follow(listener.cap_handle(), limit, max));
}
