//! The `contextual-ts` contender's chooser: linear Thompson sampling
//! ([`super::linear_ts`]) over one-hot features of the source, its binding
//! and the task kind, one disjoint model per archetype (the environment an
//! item runs in). It replaces the refill's archetype choice and keeps the
//! rest of the router, like the other choosers.
//!
//! Its objective is the router's as the lab configures it: expected
//! failure (1 − success) plus the operator's cloud cost per archetype, the
//! latency weight being 0 in the lab's facts (`driver`), so the two rank
//! the same outcomes by the same costs and differ only in how they learn.

use std::collections::{BTreeMap, BTreeSet};

use router::core::Chooser;
use routing::field::Receipt;

use super::argmin_sampled;
use super::linear_ts::{ArmPosterior, Features, CENTRE, RIDGE, SCALE};
use crate::rng::Stream;

/// What the chooser knows of each source and target, from the operator's
/// facts: the binding of each source, and which targets are listings.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// Binding label per source.
    pub binding: BTreeMap<String, String>,
    /// Targets that are listings (every other is a detail page).
    pub listings: BTreeSet<String>,
}

/// Linear Thompson sampling per archetype over the context's one-hot
/// features (bias, source, binding, task kind).
#[derive(Debug, Clone)]
pub struct ContextualTs {
    context: Context,
    features: Features,
    arms: BTreeMap<String, ArmPosterior>,
    rng: Stream,
    prior: Prior,
}

/// The sampler's two constants: ridge precision λ and posterior scale v
/// (the prior sd of each feature's effect is v/√λ).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prior {
    /// λ (> 0).
    pub ridge: f64,
    /// v (> 0).
    pub scale: f64,
}

impl Default for Prior {
    fn default() -> Self {
        Prior {
            ridge: RIDGE,
            scale: SCALE,
        }
    }
}

impl ContextualTs {
    /// A sampler seeded with `seed` that reads `context`.
    pub fn new(seed: u64, context: Context, prior: Prior) -> ContextualTs {
        ContextualTs {
            context,
            features: Features::default(),
            arms: BTreeMap::new(),
            rng: Stream::new(seed ^ 0xC7_75),
            prior,
        }
    }

    /// The active columns of (source, target), interning new ones.
    fn x(&mut self, source: &str, target: &str) -> Vec<usize> {
        let binding = self
            .context
            .binding
            .get(source)
            .map(String::as_str)
            .unwrap_or("unknown");
        let kind = if self.context.listings.contains(target) {
            "listing"
        } else {
            "detail"
        };
        vec![
            self.features.intern("bias"),
            self.features.intern(&format!("source={source}")),
            self.features.intern(&format!("binding={binding}")),
            self.features.intern(&format!("kind={kind}")),
        ]
    }

    fn arm(&mut self, archetype: &str) -> &mut ArmPosterior {
        let d = self.features.len();
        let ridge = self.prior.ridge;
        let arm = self
            .arms
            .entry(archetype.to_string())
            .or_insert_with(|| ArmPosterior::new(ridge));
        arm.grow(d);
        arm
    }

    /// The posterior mean and standard deviation of `archetype`'s success
    /// on (source, target).
    pub fn belief(&mut self, source: &str, target: &str, archetype: &str) -> (f64, f64) {
        let x = self.x(source, target);
        let (m, q) = self.arm(archetype).predict(&x);
        (CENTRE + m, self.prior.scale * q.max(0.0).sqrt())
    }
}

impl Chooser for ContextualTs {
    fn name(&self) -> &str {
        "contextual-ts"
    }

    fn choose(&mut self, source: &str, target: &str, feasible: &[&str], _: &Receipt) -> String {
        let draws: Vec<f64> = feasible
            .iter()
            .map(|o| {
                let (m, sd) = self.belief(source, target, o);
                m + sd * self.rng.normal()
            })
            .collect();
        argmin_sampled(feasible, &draws)
    }

    fn observe(&mut self, source: &str, target: &str, archetype: &str, ok: bool, _: Option<f64>) {
        let x = self.x(source, target);
        self.arm(archetype)
            .update(&x, f64::from(u8::from(ok)) - CENTRE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::tests::receipt;

    fn sampler() -> ContextualTs {
        let mut c = Context::default();
        for s in ["a", "b", "c"] {
            c.binding.insert(s.into(), "html-v1".into());
        }
        ContextualTs::new(3, c, Prior::default())
    }

    #[test]
    fn an_unobserved_arm_is_at_the_centre_with_the_prior_spread() {
        let mut ts = sampler();
        let (m, sd) = ts.belief("a", "t", "browser");
        // Four unit features, each with prior variance v²/λ: sd = v·√4.
        assert!((m - CENTRE).abs() < 1e-12);
        assert!((sd - 2.0 * SCALE).abs() < 1e-12, "{sd}");
    }

    #[test]
    fn it_learns_the_best_archetype_per_source() {
        let mut ts = sampler();
        let f = ["browser", "desktop"];
        for _ in 0..40 {
            ts.observe("a", "t", "browser", true, None);
            ts.observe("a", "t", "desktop", false, None);
            ts.observe("b", "u", "browser", false, None);
            ts.observe("b", "u", "desktop", true, None);
        }
        let on = |ts: &mut ContextualTs, s: &str, pick: &str| {
            (0..200)
                .filter(|_| ts.choose(s, "t", &f, &receipt()) == pick)
                .count()
        };
        assert!(on(&mut ts, "a", "browser") > 190);
        assert!(on(&mut ts, "b", "desktop") > 190);
    }

    #[test]
    fn a_new_source_borrows_the_archetypes_shared_effect() {
        // Browsers succeed everywhere, desktops fail everywhere: on a source
        // never seen, the bias carries that over (partial pooling).
        let mut ts = sampler();
        for s in ["a", "b"] {
            for _ in 0..30 {
                ts.observe(s, "t", "browser", true, None);
                ts.observe(s, "t", "desktop", false, None);
            }
        }
        let (mb, _) = ts.belief("c", "t", "browser");
        let (md, _) = ts.belief("c", "t", "desktop");
        assert!(mb > 0.75 && md < 0.25, "browser {mb}, desktop {md}");
    }

    #[test]
    fn the_draws_follow_the_posterior() {
        // After 3 successes of one arm on one source, a draw's mean and
        // variance are the posterior's (deterministic stream, 20,000 draws).
        let mut ts = sampler();
        for _ in 0..3 {
            ts.observe("a", "t", "browser", true, None);
        }
        let (m, sd) = ts.belief("a", "t", "browser");
        let n = 20_000;
        let draws: Vec<f64> = (0..n).map(|_| m + sd * ts.rng.normal()).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let var = draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(
            (mean - m).abs() < 4.0 * sd / (n as f64).sqrt(),
            "{mean} vs {m}"
        );
        assert!((var / (sd * sd) - 1.0).abs() < 0.05, "{var} vs {}", sd * sd);
    }

    #[test]
    fn the_cost_breaks_an_even_belief() {
        // Equal evidence: the cheaper archetype (the browser) wins most draws.
        let mut ts = sampler();
        let f = ["browser", "container_render"];
        for _ in 0..200 {
            ts.observe("a", "t", "browser", true, None);
            ts.observe("a", "t", "container_render", true, None);
        }
        let wins = (0..200)
            .filter(|_| ts.choose("a", "t", &f, &receipt()) == "browser")
            .count();
        assert!(wins > 150, "{wins}");
    }
}
