//! The contenders: the router as built, and the alternatives, each
//! replacing one part of it and keeping the rest (`ROUTING.md` §5).
//! Round-robin, greedy by observed mean, flat Thompson sampling and linear
//! Thompson sampling over the context ([`contextual`]) replace the refill's
//! archetype choice ([`router::core::Chooser`]); the fixed quorum replaces
//! trust and verification (configuration), and Dawid–Skene EM replaces
//! them with truth inference ([`ds_settler`], a [`router::core::Settler`]).
//!
//! The choosers know the operator's cloud cost per archetype (a fact, not
//! something to learn) and minimize (1 − success) + cost, so what they
//! lack against the router is the hierarchy, never the cost table.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use router::config::{FieldVariances, RouterConfig};
use router::core::Chooser;
use routing::field::Receipt;
use routing::verify::VerifyConfig;

use super::rng::Stream;
use super::world::{World, ARCHETYPES, CLOUD_COST};

pub mod contextual;
pub mod ds_settler;
pub mod linear_ts;

/// One contender of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Contender {
    /// The router as built.
    Router,
    /// The router with the design brief's unit field variances
    /// (`FieldVariances::unit`) instead of the lab-derived ones of decision
    /// 0005: what the router is before anything was tuned on the lab.
    RouterBrief,
    /// Round-robin over the feasible archetypes, per source.
    RoundRobin,
    /// Greedy by observed mean success, one pseudo-observation at 0.5.
    Greedy,
    /// Thompson sampling, Beta(1, 1) per (source, archetype), no hierarchy.
    FlatThompson,
    /// Majority vote with a fixed quorum k = 3 and no trust.
    FixedQuorum,
    /// Linear Thompson sampling per archetype over one-hot features of the
    /// source, binding and task kind ([`contextual::ContextualTs`]).
    ContextualTs,
    /// Settlement and device reliability by one-coin Dawid–Skene EM over
    /// the content observations, in place of trust and quorum
    /// ([`ds_settler::DawidSkeneSettler`]).
    DawidSkene,
}

impl Contender {
    /// Every contender, in report order.
    pub const ALL: [Contender; 8] = [
        Contender::Router,
        Contender::RouterBrief,
        Contender::RoundRobin,
        Contender::Greedy,
        Contender::FlatThompson,
        Contender::FixedQuorum,
        Contender::ContextualTs,
        Contender::DawidSkene,
    ];

    /// The report name.
    pub fn name(self) -> &'static str {
        match self {
            Contender::Router => "router",
            Contender::RouterBrief => "router-brief",
            Contender::RoundRobin => "round-robin",
            Contender::Greedy => "greedy",
            Contender::FlatThompson => "flat-thompson",
            Contender::FixedQuorum => "fixed-quorum",
            Contender::ContextualTs => "contextual-ts",
            Contender::DawidSkene => "dawid-skene",
        }
    }

    /// Parses a report name. Errors: the names accepted.
    pub fn parse(s: &str) -> Result<Contender, String> {
        Contender::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown contender {s:?}: use {}",
                    Contender::ALL.map(|c| c.name()).join(", ")
                )
            })
    }

    /// The router configuration this contender runs with.
    pub fn config(self) -> RouterConfig {
        let mut cfg = RouterConfig::default();
        if self == Contender::RouterBrief {
            cfg.field_variances = FieldVariances::unit();
        }
        if self == Contender::DawidSkene {
            // The model's reliabilities are the trust; the router's own
            // trust moves are off.
            cfg.trust_enabled = false;
        }
        if self == Contender::FixedQuorum {
            cfg.trust_enabled = false;
            cfg.verify = VerifyConfig {
                tau_hi: 2.0,
                quorum: 3,
                ..VerifyConfig::default()
            };
        }
        cfg
    }

    /// The settlement model replacing trust and quorum, if any.
    pub fn settler(self) -> Option<Box<dyn router::core::Settler>> {
        (self == Contender::DawidSkene).then(|| {
            Box::new(ds_settler::DawidSkeneSettler::new()) as Box<dyn router::core::Settler>
        })
    }

    /// The chooser replacing the archetype choice, if any, for a run on
    /// `world` (its seed seeds the draws; the contextual chooser reads the
    /// sources' bindings, as the operator's facts give them).
    pub fn chooser(self, world: &World) -> Option<Box<dyn Chooser>> {
        let seed = world.spec.seed;
        match self {
            Contender::Router
            | Contender::RouterBrief
            | Contender::FixedQuorum
            | Contender::DawidSkene => None,
            Contender::RoundRobin => Some(Box::new(RoundRobin::default())),
            Contender::Greedy => Some(Box::new(Greedy::default())),
            Contender::FlatThompson => Some(Box::new(FlatThompson::new(seed))),
            Contender::ContextualTs => {
                let context = contextual::Context {
                    binding: world
                        .sources
                        .iter()
                        .map(|s| (s.name.clone(), s.binding.clone()))
                        .collect(),
                    // The lab's targets are all detail pages (`driver`).
                    listings: Default::default(),
                };
                Some(Box::new(contextual::ContextualTs::new(
                    seed,
                    context,
                    contextual::Prior::default(),
                )))
            }
        }
    }
}

fn cost(archetype: &str) -> f64 {
    ARCHETYPES
        .iter()
        .position(|a| *a == archetype)
        .map(|i| CLOUD_COST[i])
        .unwrap_or(0.0)
}

/// The feasible option minimizing `score`; ties keep the earlier one.
fn argmin(feasible: &[&str], mut score: impl FnMut(&str) -> f64) -> String {
    let mut best: Option<(&str, f64)> = None;
    for &o in feasible {
        let s = score(o);
        if best.is_none_or(|(_, b)| s < b) {
            best = Some((o, s));
        }
    }
    best.map(|(o, _)| o.to_string()).unwrap_or_default()
}

/// The feasible option minimizing (1 − its sampled success) + its cloud
/// cost; `draws[i]` is option `i`'s sample.
fn argmin_sampled(feasible: &[&str], draws: &[f64]) -> String {
    let mut i = 0;
    argmin(feasible, |o| {
        let v = 1.0 - draws[i] + cost(o);
        i += 1;
        v
    })
}

/// Successes and attempts per (source, archetype).
#[derive(Debug, Clone, Default)]
struct Tally(BTreeMap<(String, String), (u64, u64)>);

impl Tally {
    fn get(&self, source: &str, archetype: &str) -> (u64, u64) {
        self.0
            .get(&(source.to_string(), archetype.to_string()))
            .copied()
            .unwrap_or((0, 0))
    }

    fn add(&mut self, source: &str, archetype: &str, ok: bool) {
        let e = self
            .0
            .entry((source.to_string(), archetype.to_string()))
            .or_default();
        e.0 += u64::from(ok);
        e.1 += 1;
    }
}

/// Round-robin over the feasible archetypes, one counter per source.
#[derive(Debug, Clone, Default)]
pub struct RoundRobin {
    next: BTreeMap<String, usize>,
}

impl Chooser for RoundRobin {
    fn name(&self) -> &str {
        "round-robin"
    }

    fn choose(&mut self, source: &str, _: &str, feasible: &[&str], _: &Receipt) -> String {
        let n = self.next.entry(source.to_string()).or_default();
        let pick = feasible[*n % feasible.len().max(1)].to_string();
        *n += 1;
        pick
    }

    fn observe(&mut self, _: &str, _: &str, _: &str, _: bool, _: Option<f64>) {}
}

/// Greedy by observed mean success with one pseudo-observation at 0.5.
#[derive(Debug, Clone, Default)]
pub struct Greedy {
    tally: Tally,
}

impl Chooser for Greedy {
    fn name(&self) -> &str {
        "greedy"
    }

    fn choose(&mut self, source: &str, _: &str, feasible: &[&str], _: &Receipt) -> String {
        argmin(feasible, |o| {
            let (s, n) = self.tally.get(source, o);
            1.0 - (s as f64 + 0.5) / (n as f64 + 1.0) + cost(o)
        })
    }

    fn observe(&mut self, source: &str, _: &str, archetype: &str, ok: bool, _: Option<f64>) {
        self.tally.add(source, archetype, ok);
    }
}

/// Thompson sampling with Beta(1, 1) per (source, archetype): no sharing
/// between sources.
#[derive(Debug, Clone)]
pub struct FlatThompson {
    tally: Tally,
    rng: Stream,
}

impl FlatThompson {
    /// A sampler seeded with `seed`.
    pub fn new(seed: u64) -> FlatThompson {
        FlatThompson {
            tally: Tally::default(),
            rng: Stream::new(seed ^ 0x7505),
        }
    }
}

impl Chooser for FlatThompson {
    fn name(&self) -> &str {
        "flat-thompson"
    }

    fn choose(&mut self, source: &str, _: &str, feasible: &[&str], _: &Receipt) -> String {
        let draws: Vec<f64> = feasible
            .iter()
            .map(|o| {
                let (s, n) = self.tally.get(source, o);
                self.rng.beta(1.0 + s as f64, 1.0 + (n - s) as f64)
            })
            .collect();
        argmin_sampled(feasible, &draws)
    }

    fn observe(&mut self, source: &str, _: &str, archetype: &str, ok: bool, _: Option<f64>) {
        self.tally.add(source, archetype, ok);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(super) fn receipt() -> Receipt {
        Receipt {
            revision: 0,
            address: routing::field::Address::root(),
            temperature: 0.0,
            selected: None,
            alternatives: vec![],
            probabilities: None,
            work: Default::default(),
        }
    }

    #[test]
    fn round_robin_cycles_per_source() {
        let mut rr = RoundRobin::default();
        let f = ["browser", "desktop"];
        let picks: Vec<String> = (0..4)
            .map(|_| rr.choose("a", "t", &f, &receipt()))
            .collect();
        assert_eq!(picks, ["browser", "desktop", "browser", "desktop"]);
        assert_eq!(rr.choose("b", "t", &f, &receipt()), "browser");
    }

    #[test]
    fn greedy_follows_the_observed_mean_and_the_cost() {
        let mut g = Greedy::default();
        let f = ["browser", "container_plain"];
        for _ in 0..10 {
            g.observe("a", "t", "browser", false, None);
            g.observe("a", "t", "container_plain", true, None);
        }
        assert_eq!(g.choose("a", "t", &f, &receipt()), "container_plain");
        // Unobserved: equal means, the cost decides.
        assert_eq!(g.choose("b", "t", &f, &receipt()), "browser");
    }

    #[test]
    fn thompson_prefers_the_better_arm_most_of_the_time() {
        let mut ts = FlatThompson::new(1);
        let f = ["browser", "desktop"];
        for _ in 0..30 {
            ts.observe("a", "t", "browser", true, None);
            ts.observe("a", "t", "desktop", false, None);
        }
        let wins = (0..200)
            .filter(|_| ts.choose("a", "t", &f, &receipt()) == "browser")
            .count();
        assert!(wins > 190, "{wins}");
    }

    #[test]
    fn fixed_quorum_turns_trust_off() {
        let c = Contender::FixedQuorum.config();
        assert!(!c.trust_enabled);
        assert!(c.verify.tau_hi > 1.0);
        assert_eq!(c.verify.quorum, 3);
        assert!(Contender::Router.config().trust_enabled);
        assert_eq!(
            Contender::RouterBrief.config().field_variances,
            FieldVariances::unit()
        );
        assert_ne!(
            Contender::Router.config().field_variances,
            FieldVariances::unit()
        );
        assert!(Contender::parse("nope").is_err());
    }
}
