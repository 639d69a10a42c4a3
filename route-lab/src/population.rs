//! The device population of the simulated world (`ROUTING.md` §5): how
//! many devices of each archetype, their online sessions (an alternating
//! exponential on/off process for browsers and desktops; containers stay
//! online), the
//! drought's cut, the sources each cannot reach, the liars of `liars` and
//! the upgrades of `adapter-bug`. Draws come from the world's one stream, in
//! a fixed order, so a seed gives the same population every time.

use super::archetype::{DeviceSpec, ARCHETYPES, ARCH_SHARE, BROWSER};
use super::rng::Stream;
use super::scenario::SimSpec;

/// Mean of an exponential session process; browsers come and go, desktops stay longer.
const SESSION_ON_MEAN_S: [f64; 4] = [3.0 * 3600.0, 8.0 * 3600.0, f64::INFINITY, f64::INFINITY];
const SESSION_OFF_MEAN_S: [f64; 4] = [3600.0, 3600.0, 0.0, 0.0];

/// The devices of `spec`, drawn from `rng`, over `n_src` sources; browsers
/// are offline during `drought` (`[from, to)` seconds) when there is one;
/// `liar_share` of the browsers lie; `upgrade` = (at seconds, share of all
/// devices) upgrade to the buggy adapter.
pub(super) fn build_devices(
    spec: &SimSpec,
    rng: &mut Stream,
    n_src: usize,
    drought: Option<(f64, f64)>,
    liar_share: f64,
    upgrade: Option<(f64, f64)>,
) -> Vec<DeviceSpec> {
    let n = spec.devices;
    let end = spec.end_s();
    let mut counts = [0usize; 4];
    for a in 1..4 {
        counts[a] = ((n as f64 * ARCH_SHARE[a]).round() as usize).max(usize::from(n >= 4));
    }
    counts[0] = n.saturating_sub(counts[1] + counts[2] + counts[3]);
    let mut devices = Vec::with_capacity(n);
    for (a, &count) in counts.iter().enumerate() {
        for _ in 0..count {
            let i = devices.len();
            let mut sessions = Vec::new();
            if SESSION_ON_MEAN_S[a].is_finite() {
                let mut t = 0.0;
                let mut on = rng.chance(0.75);
                while t < end {
                    let mean = if on {
                        SESSION_ON_MEAN_S[a]
                    } else {
                        SESSION_OFF_MEAN_S[a]
                    };
                    let next = (t + rng.exponential(mean)).min(end);
                    if on {
                        sessions.push((t, next));
                    }
                    on = !on;
                    t = next;
                }
            } else {
                sessions.push((0.0, end));
            }
            if let (Some((from, to)), BROWSER) = (drought, a) {
                sessions = cut(&sessions, from, to);
            }
            let blocked = (0..n_src).filter(|_| rng.chance(0.02)).collect();
            devices.push(DeviceSpec {
                id: format!("{}-{i}", ARCHETYPES[a]),
                archetype: a,
                liar: false,
                sessions,
                upgrade_at: None,
                blocked,
            });
        }
    }
    if liar_share > 0.0 {
        let mut browsers: Vec<usize> = (0..devices.len())
            .filter(|&i| devices[i].archetype == BROWSER)
            .collect();
        rng.shuffle(&mut browsers);
        let k = (browsers.len() as f64 * liar_share).round() as usize;
        for &i in &browsers[..k] {
            devices[i].liar = true;
        }
    }
    if let Some((at, share)) = upgrade {
        let mut all: Vec<usize> = (0..devices.len()).collect();
        rng.shuffle(&mut all);
        let k = (all.len() as f64 * share).round() as usize;
        for &i in &all[..k] {
            devices[i].upgrade_at = Some(at);
        }
    }
    devices
}

/// `sessions` with `[from, to)` removed.
fn cut(sessions: &[(f64, f64)], from: f64, to: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for &(a, b) in sessions {
        if b <= from || a >= to {
            out.push((a, b));
            continue;
        }
        if a < from {
            out.push((a, from));
        }
        if b > to {
            out.push((to, b));
        }
    }
    out
}
