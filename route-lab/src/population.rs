//! The device population of the simulated world (`ROUTING.md` §5): how
//! many devices of each archetype, their online sessions (an alternating
//! exponential on/off process; by default for browsers and desktops, with
//! containers always online), the drought's and the dropouts' cuts, the
//! sources each cannot reach, the liars, the adapter upgrades and the
//! populations that arrive in a burst. Draws come from the world's one stream, in
//! a fixed order, so a seed gives the same population every time.

use super::archetype::{DeviceSpec, ARCHETYPES, BROWSER};
use super::plan::Session;
use super::rng::Stream;
use super::scenario::SimSpec;

/// What the world's plan says of its devices, in seconds of the run.
pub(super) struct PopulationInput {
    /// Share of each archetype.
    pub shares: [f64; 4],
    /// Each archetype's session process.
    pub sessions: [Session; 4],
    /// Browsers offline in `[from, to)`.
    pub drought: Option<(f64, f64)>,
    /// Share of the browsers present from the start that lie.
    pub liar_share: f64,
    /// (start, share, duration) of the buggy adapter's rollout.
    pub upgrade: Option<(f64, f64, f64)>,
    /// (start, share, duration) of each correct rollout, in time order.
    pub rollouts: Vec<(f64, f64, f64)>,
    /// (archetype, from, to, share) of each dropout.
    pub dropouts: Vec<(usize, f64, f64, f64)>,
    /// (archetype, count, at, within_s, liar_share) of each burst.
    pub bursts: Vec<(usize, usize, f64, f64, f64)>,
}

/// Which of `n` devices a rollout `(at, share, over)` reaches, and when: a
/// share of them drawn at random, the j-th of k at at + over · j / k.
fn rollout(rng: &mut Stream, n: usize, (at, share, over): (f64, f64, f64)) -> Vec<(usize, f64)> {
    let mut all: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut all);
    let k = (n as f64 * share).round() as usize;
    all[..k]
        .iter()
        .enumerate()
        .map(|(j, &i)| (i, at + over * j as f64 / k as f64))
        .collect()
}

/// One device's online spells from `start` to `end` under `session`,
/// starting online as `online_first` says, or with probability 3/4 when
/// `None` (`off_h = 0`: always online; nothing drawn).
fn spells(
    rng: &mut Stream,
    session: Session,
    (start, end): (f64, f64),
    online_first: Option<bool>,
) -> Vec<(f64, f64)> {
    if session.off_h <= 0.0 {
        return vec![(start, end)];
    }
    let (on_mean, off_mean) = (session.on_h * 3600.0, session.off_h * 3600.0);
    let mut sessions = Vec::new();
    let mut t = start;
    let mut on = online_first.unwrap_or_else(|| rng.chance(0.75));
    while t < end {
        let mean = if on { on_mean } else { off_mean };
        let next = (t + rng.exponential(mean)).min(end);
        if on {
            sessions.push((t, next));
        }
        on = !on;
        t = next;
    }
    sessions
}

/// Device `i` of archetype `a` with `sessions`; each of the `n_src`
/// sources is out of its reach with probability 0.02 (drawn here).
fn device(
    rng: &mut Stream,
    i: usize,
    a: usize,
    sessions: Vec<(f64, f64)>,
    n_src: usize,
) -> DeviceSpec {
    let blocked = (0..n_src).filter(|_| rng.chance(0.02)).collect();
    DeviceSpec {
        id: format!("{}-{i}", ARCHETYPES[a]),
        archetype: a,
        liar: false,
        sessions,
        upgrade_at: None,
        rollouts: Vec::new(),
        blocked,
    }
}

/// The devices of `spec` following `input`, drawn from `rng`, over
/// `n_src` sources. The draws come in a fixed order (the devices present
/// from the start, their liars and upgrades, then each burst), so a world
/// without bursts draws what it drew before bursts existed.
pub(super) fn build_devices(
    spec: &SimSpec,
    rng: &mut Stream,
    n_src: usize,
    input: &PopulationInput,
) -> Vec<DeviceSpec> {
    let n = spec.devices;
    let end = spec.end_s();
    let mut counts = [0usize; 4];
    for a in 1..4 {
        counts[a] = ((n as f64 * input.shares[a]).round() as usize)
            .max(usize::from(n >= 4 && input.shares[a] > 0.0));
    }
    counts[0] = n.saturating_sub(counts[1] + counts[2] + counts[3]);
    let mut devices = Vec::with_capacity(n);
    for (a, &count) in counts.iter().enumerate() {
        for _ in 0..count {
            let i = devices.len();
            let sessions = spells(rng, input.sessions[a], (0.0, end), None);
            devices.push(device(rng, i, a, sessions, n_src));
        }
    }
    if input.liar_share > 0.0 {
        let mut browsers: Vec<usize> = (0..devices.len())
            .filter(|&i| devices[i].archetype == BROWSER)
            .collect();
        rng.shuffle(&mut browsers);
        let k = (browsers.len() as f64 * input.liar_share).round() as usize;
        for &i in &browsers[..k] {
            devices[i].liar = true;
        }
    }
    if let Some((at, share, over)) = input.upgrade {
        for (i, t) in rollout(rng, devices.len(), (at, share, over)) {
            devices[i].upgrade_at = Some(t);
        }
    }
    for (r, &plan) in input.rollouts.iter().enumerate() {
        for (i, t) in rollout(rng, devices.len(), plan) {
            devices[i].rollouts.push((t, r));
        }
    }
    for &(a, count, at, within, liar_share) in &input.bursts {
        let first = devices.len();
        for _ in 0..count {
            let i = devices.len();
            let arrive = (at + within * rng.uniform()).min(end);
            // A burst registers: its devices are online when they arrive.
            let sessions = spells(rng, input.sessions[a], (arrive, end), Some(true));
            devices.push(device(rng, i, a, sessions, n_src));
        }
        let k = (count as f64 * liar_share).round() as usize;
        let mut newcomers: Vec<usize> = (first..devices.len()).collect();
        if k > 0 {
            rng.shuffle(&mut newcomers);
        }
        for &i in &newcomers[..k] {
            devices[i].liar = true;
        }
    }
    if let Some((from, to)) = input.drought {
        for d in devices.iter_mut().filter(|d| d.archetype == BROWSER) {
            d.sessions = cut(&d.sessions, from, to);
        }
    }
    for &(a, from, to, share) in &input.dropouts {
        let mut of_kind: Vec<usize> = (0..devices.len())
            .filter(|&i| devices[i].archetype == a)
            .collect();
        let k = (of_kind.len() as f64 * share).round() as usize;
        if k < of_kind.len() {
            rng.shuffle(&mut of_kind);
        }
        for &i in &of_kind[..k] {
            devices[i].sessions = cut(&devices[i].sessions, from, to);
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
