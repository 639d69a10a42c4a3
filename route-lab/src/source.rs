//! One source's hidden truth and its targets: drawn from the seed
//! (`source_truth`), then the parts a world file writes out applied
//! (`apply_sets`). Source: `ROUTING.md` §5.

use serde::{Deserialize, Serialize};

use super::archetype::{ARCH_LN_LATENCY, ARCH_LOGIT, BROWSER};
use super::plan::{shared_host, PerArchetype, SourceChange, SourceSet};
use super::rng::Stream;

/// Hidden truth of one source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceTruth {
    /// Source id (`src-N`).
    pub name: String,
    /// Host (one politeness bucket; two pairs of sources share one).
    pub host: String,
    /// Binding label.
    pub binding: String,
    /// Logit of success per archetype (before gates).
    pub logit: [f64; 4],
    /// Mean ln-latency per archetype, ln seconds.
    pub ln_latency: [f64; 4],
    /// Needs JavaScript (refuses `container_plain`).
    pub needs_js: bool,
    /// CORS closed (refuses `browser`).
    pub cors_closed: bool,
    /// An antibot family (refuses both containers).
    pub antibot: bool,
    /// Residential addresses preferred (containers succeed 15 % as often).
    pub residential: bool,
    /// How often its listings change, seconds (what the operator declares).
    pub change_timescale_s: f64,
    /// The politeness limit of its host the operator declares: capacity
    /// (requests) and refill per second; the true limit unless
    /// `crawl_delay_s` is stricter ([`SourceTruth::true_bucket`]).
    pub bucket: (f64, f64),
    /// Its host's robots.txt crawl delay, seconds (written worlds only),
    /// which devices report with every deposit.
    #[serde(default)]
    pub crawl_delay_s: Option<f64>,
    /// Its host answers a request over its true limit with 429 and this
    /// Retry-After, seconds (written worlds only; absent: served, and
    /// counted only as a politeness violation).
    #[serde(default)]
    pub retry_after_s: Option<f64>,
    /// Archetypes it refuses with plain failures (HTTP 403, no gate class),
    /// in [`crate::world::ARCHETYPES`] order; set by timed changes
    /// (`[[events.source_change]]`'s `refuses`).
    #[serde(default)]
    pub refuses: [bool; 4],
    /// When the operator declares it, seconds.
    pub arrives_s: f64,
    /// Its targets: indexes into [`crate::World::targets`].
    pub targets: std::ops::Range<usize>,
}

/// One target with its true content process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetTruth {
    /// Target id.
    pub name: String,
    /// Index of its source.
    pub source: usize,
    /// Seconds between content changes.
    pub period_s: f64,
    /// Phase of the change clock ∈ [0, 1).
    pub phase: f64,
}

impl TargetTruth {
    /// The content version at `t_s`.
    pub fn version(&self, t_s: f64) -> u64 {
        (t_s / self.period_s + self.phase).floor().max(0.0) as u64
    }
}

impl SourceTruth {
    /// The host's true politeness limit: the declared bucket, or one
    /// request per crawl delay (capacity 1) where that is stricter.
    pub fn true_bucket(&self) -> (f64, f64) {
        match self.crawl_delay_s {
            Some(c) if 1.0 / c < self.bucket.1 => (1.0, 1.0 / c),
            _ => self.bucket,
        }
    }
}

/// Applies a world file's written-out sources to the drawn ones: each
/// entry's keys replace that source's draw (success as a logit, latency as
/// its log, each target's period scaled with the new timescale), and a
/// host's politeness reaches every source on that host. Entries are
/// checked ([`crate::plan::WorldPlan::check`]) before this runs.
pub(crate) fn apply_sets(
    sets: &[SourceSet],
    sources: &mut [SourceTruth],
    targets: &mut [TargetTruth],
) {
    for set in sets {
        let Some(src) = sources.get_mut(set.source) else {
            continue;
        };
        write_truth(src, set.success, set.latency_s);
        src.needs_js = set.needs_js.unwrap_or(src.needs_js);
        src.cors_closed = set.cors_closed.unwrap_or(src.cors_closed);
        src.antibot = set.antibot.unwrap_or(src.antibot);
        src.residential = set.residential.unwrap_or(src.residential);
        if let Some(h) = set.change_timescale_h {
            let scale = 3600.0 * h / src.change_timescale_s;
            src.change_timescale_s = 3600.0 * h;
            for t in &mut targets[src.targets.clone()] {
                t.period_s *= scale;
            }
        }
        let host = shared_host(set.source);
        for (i, other) in sources.iter_mut().enumerate() {
            if shared_host(i) != host {
                continue;
            }
            if let Some(b) = set.bucket {
                other.bucket = (b.capacity, b.per_s);
            }
            if set.crawl_delay_s.is_some() {
                other.crawl_delay_s = set.crawl_delay_s;
            }
            if set.retry_after_s.is_some() {
                other.retry_after_s = set.retry_after_s;
            }
        }
    }
}

/// One source's truth from `from_s` on, until a later epoch of the same
/// source (`[[events.source_change]]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceEpoch {
    /// Index of the source.
    pub source: usize,
    /// From when, seconds.
    pub from_s: f64,
    /// Its whole truth from then on.
    pub truth: SourceTruth,
}

/// The epochs that a world file's timed source changes make, in time
/// order: each change applied, in time order, on the truth before it (a
/// host's politeness reaching every source on the host), for a run that
/// ends at `end` seconds. Entries are checked
/// ([`crate::plan::WorldPlan::check`]) before this runs.
pub(crate) fn timeline(
    changes: &[SourceChange],
    sources: &[SourceTruth],
    end: f64,
) -> Vec<SourceEpoch> {
    let mut order: Vec<(f64, &SourceChange)> =
        changes.iter().map(|c| (c.at.of_end(end), c)).collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.source.cmp(&b.1.source)));
    let mut now: Vec<SourceTruth> = sources.to_vec();
    let mut epochs: Vec<SourceEpoch> = Vec::new();
    for (at, change) in order {
        let Some(src) = now.get_mut(change.source) else {
            continue;
        };
        apply_change(change, src);
        let mut touched = vec![change.source];
        if change.sets_host() {
            let host = shared_host(change.source);
            for (i, other) in now.iter_mut().enumerate() {
                if shared_host(i) != host {
                    continue;
                }
                if let Some(c) = change.crawl_delay_s {
                    other.crawl_delay_s = (c > 0.0).then_some(c);
                }
                if let Some(r) = change.retry_after_s {
                    other.retry_after_s = (r > 0.0).then_some(r);
                }
                if i != change.source {
                    touched.push(i);
                }
            }
        }
        for i in touched {
            // Two changes at one time on one host: the later entry's epoch
            // replaces the earlier one's.
            epochs.retain(|e| !(e.source == i && e.from_s == at));
            epochs.push(SourceEpoch {
                source: i,
                from_s: at,
                truth: now[i].clone(),
            });
        }
    }
    epochs
}

/// One change's keys written over a source's truth (its host's politeness
/// is [`timeline`]'s).
fn apply_change(change: &SourceChange, src: &mut SourceTruth) {
    write_truth(src, change.success, change.latency_s);
    src.needs_js = change.needs_js.unwrap_or(src.needs_js);
    src.cors_closed = change.cors_closed.unwrap_or(src.cors_closed);
    src.antibot = change.antibot.unwrap_or(src.antibot);
    src.residential = change.residential.unwrap_or(src.residential);
    if let Ok((refuses, allows)) = change.refusals() {
        for a in refuses {
            src.refuses[a] = true;
        }
        for a in allows {
            src.refuses[a] = false;
        }
    }
}

/// Success probabilities written as logits, latencies as their logs.
fn write_truth(
    src: &mut SourceTruth,
    success: Option<PerArchetype<f64>>,
    latency_s: Option<PerArchetype<f64>>,
) {
    if let Some(p) = success {
        for (a, p) in p.values().into_iter().enumerate() {
            let p = p.clamp(1e-9, 1.0 - 1e-9);
            src.logit[a] = (p / (1.0 - p)).ln();
        }
    }
    if let Some(l) = latency_s {
        for (a, l) in l.values().into_iter().enumerate() {
            src.ln_latency[a] = l.ln();
        }
    }
}

/// Source `s` of `n_src`, its `per_src` targets appended to `targets`:
/// archetype reliabilities and latencies around the source's own draw,
/// its gates, change timescale and politeness bucket. src-0 and src-1 are
/// where browsers shine (the regime change and the adapter bug act there).
/// A cold start brings the sources in over the run in eight waves.
pub(crate) fn source_truth(
    s: usize,
    n_src: usize,
    per_src: usize,
    end: f64,
    waves: usize,
    rng: &mut Stream,
    targets: &mut Vec<TargetTruth>,
) -> SourceTruth {
    let d = 0.8 * rng.normal();
    let l = 0.3 * rng.normal();
    let mut logit = [0.0; 4];
    let mut ln_latency = [0.0; 4];
    for a in 0..4 {
        logit[a] = ARCH_LOGIT[a] + d + 0.6 * rng.normal();
        ln_latency[a] = ARCH_LN_LATENCY[a] + l + 0.2 * rng.normal();
    }
    let (mut needs_js, mut cors_closed, antibot, residential) = (
        rng.chance(0.35),
        rng.chance(0.2),
        rng.chance(0.2),
        rng.chance(0.15),
    );
    if s <= 1 {
        // src-0 and src-1 are where browsers shine (the regime change and
        // the adapter bug act there): open to browsers, browsers best.
        cors_closed = false;
        needs_js = true;
        logit[BROWSER] = logit[BROWSER].max(4.0);
    }
    let change_timescale_s = 3600.0 * (6.0f64.ln() + rng.uniform() * 8.0f64.ln()).exp();
    let bucket = (
        (3 + rng.below(6)) as f64,
        (rng.between(0.5, 2.0) * 100.0).round() / 100.0,
    );
    let arrives_s = if waves > 1 {
        (s * waves / n_src) as f64 * end / waves as f64
    } else {
        0.0
    };
    let first = targets.len();
    for k in 0..per_src {
        targets.push(TargetTruth {
            name: format!("src-{s}-t{k}"),
            source: s,
            period_s: change_timescale_s * rng.between(0.7, 1.3),
            phase: rng.uniform(),
        });
    }
    SourceTruth {
        name: format!("src-{s}"),
        host: format!("host-{}.example", shared_host(s)),
        binding: "html-v1".into(),
        logit,
        ln_latency,
        needs_js,
        cors_closed,
        antibot,
        residential,
        change_timescale_s,
        bucket,
        crawl_delay_s: None,
        retry_after_s: None,
        refuses: [false; 4],
        arrives_s,
        targets: first..targets.len(),
    }
}
