//! Disagreement clustering by (source, adapter id, adapter version).
//!
//! Once a cluster holds at least `min_count` disagreements and took part in
//! a share ≥ `share` of its source's disagreements, it is confirmed as an adapter bug:
//! its later disagreements stop moving trust and the trust it moved is
//! returned for restoration. Source: `ROUTING.md` §3 Trust.
//!
//! The share alone cannot tell a bug from churn: with two adapter versions
//! in the population about half of all comparisons are across versions, so
//! ordinary disagreements give each version's cluster a share near one
//! half. Where the source also has same-version comparisons
//! ([`Clusters::record_comparison`]), a cluster is confirmed only when
//! disagreements across versions are also more frequent than within one:
//! the cross-version disagreement rate at least twice the same-version
//! rate, and so many cross-version disagreements that churn at the
//! same-version rate would give as many with probability at most
//! [`FALSE_ALARM`] (a one-sided binomial tail, bounded by Chernoff's
//! `exp(−n·KL(k/n ‖ p))`). `docs/decisions/0008-adapter-clusters-against-churn.md`,
//! `docs/decisions/0012-adapter-clusters-by-a-binomial-tail.md`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The key disagreements are clustered by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AdapterKey {
    /// Source (job board) name.
    pub source: String,
    /// Adapter id.
    pub adapter: String,
    /// Adapter version.
    pub version: String,
}

/// Trust to give back to one device once its cluster is confirmed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Restoration {
    /// Device id.
    pub device: String,
    /// Amount to add back to τ (≥ 0 for disagreement losses).
    pub delta: f64,
}

/// The largest chance, under churn alone, of seeing as many cross-version
/// disagreements as a confirmed cluster's source has: each check's
/// false-alarm bound (decision 0012).
pub const FALSE_ALARM: f64 = 1e-6;

/// Chernoff's bound on the binomial upper tail, as its logarithm:
/// `ln P(X ≥ k) ≤ −n·KL(k/n ‖ p)` for `X ~ Binomial(n, p)` and `k/n ≥ p`
/// (0 below that: the bound says nothing). `p` ∈ (0, 1).
pub fn ln_tail_bound(n: u64, k: u64, p: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let q = k.min(n) as f64 / n as f64;
    if q <= p {
        return 0.0;
    }
    let term = |a: f64, b: f64| if a > 0.0 { a * (a / b).ln() } else { 0.0 };
    -(n as f64) * (term(q, p) + term(1.0 - q, 1.0 - p))
}

/// A source's comparisons and disagreements, across adapter versions and
/// within one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct Rates {
    cross: u64,
    cross_disagree: u64,
    same: u64,
    same_disagree: u64,
}

impl Rates {
    /// Whether cross-version disagreements stand out against same-version
    /// ones; `true` where there is no same-version baseline to compare with.
    /// The baseline rate is read with one pseudo-disagreement and one
    /// pseudo-agreement, so a clean baseline is never taken for zero.
    fn cross_stands_out(&self) -> bool {
        if self.same == 0 || self.cross == 0 {
            return true;
        }
        let px = self.cross_disagree as f64 / self.cross as f64;
        let ps = (self.same_disagree as f64 + 1.0) / (self.same as f64 + 2.0);
        px >= 2.0 * ps && ln_tail_bound(self.cross, self.cross_disagree, ps) <= FALSE_ALARM.ln()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Cluster {
    count: u64,
    moved: BTreeMap<String, f64>,
    confirmed: bool,
}

/// All clusters and per-source disagreement totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Clusters {
    share: f64,
    min_count: u64,
    per_source: BTreeMap<String, u64>,
    #[serde(with = "cluster_list")]
    clusters: BTreeMap<AdapterKey, Cluster>,
    /// Comparisons per source (absent in snapshots written before they were
    /// counted: an empty map, which keeps the share rule alone).
    #[serde(default)]
    rates: BTreeMap<String, Rates>,
}

/// Serializes the cluster map as a list (JSON maps need string keys).
mod cluster_list {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{AdapterKey, Cluster};

    pub fn serialize<S: Serializer>(
        m: &BTreeMap<AdapterKey, Cluster>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        m.iter().collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<AdapterKey, Cluster>, D::Error> {
        Ok(Vec::<(AdapterKey, Cluster)>::deserialize(d)?
            .into_iter()
            .collect())
    }
}

impl Clusters {
    /// Clusters confirmed at `share` ∈ (0, 1] of a source's disagreements
    /// (clamped; NaN reads as 1) and at least `min_count` disagreements.
    pub fn new(share: f64, min_count: u64) -> Clusters {
        let share = if share.is_nan() {
            1.0
        } else {
            share.clamp(f64::MIN_POSITIVE, 1.0)
        };
        Clusters {
            share,
            min_count,
            per_source: BTreeMap::new(),
            clusters: BTreeMap::new(),
            rates: BTreeMap::new(),
        }
    }

    /// Clusters confirmed so far: (key, disagreements counted).
    pub fn confirmed(&self) -> Vec<(AdapterKey, u64)> {
        self.clusters
            .iter()
            .filter(|(_, c)| c.confirmed)
            .map(|(k, c)| (k.clone(), c.count))
            .collect()
    }

    /// Counts one disagreement on `source` that belongs to no cluster (both
    /// sides ran the same adapter version): it raises the source's total,
    /// so a cluster must stand out against it to be confirmed.
    ///
    /// The total counts sides: a disagreement has two, and a disagreement
    /// between two versions reaches [`Clusters::record`] once per side, so a
    /// plain one adds 2 here.
    pub fn record_plain(&mut self, source: &str) {
        *self.per_source.entry(source.to_string()).or_default() += 2;
    }

    /// Counts one comparison on `source` (a deposit against the latest
    /// earlier observation by another device), whether the two ran
    /// different adapter versions and whether they agreed. These rates are
    /// what tells an adapter bug (disagreements concentrated across
    /// versions) from churn (disagreements as frequent within a version).
    pub fn record_comparison(&mut self, source: &str, cross_version: bool, agree: bool) {
        let r = self.rates.entry(source.to_string()).or_default();
        if cross_version {
            r.cross += 1;
            r.cross_disagree += u64::from(!agree);
        } else {
            r.same += 1;
            r.same_disagree += u64::from(!agree);
        }
    }

    /// Whether disagreements of `key` should still move trust (false once confirmed).
    pub fn moves_trust(&self, key: &AdapterKey) -> bool {
        !self.clusters.get(key).is_some_and(|c| c.confirmed)
    }

    /// Records one side of a disagreement: `key`'s side, which moved
    /// `device`'s τ by `moved` (negative for a loss; non-finite counts as 0).
    /// The cluster's share is of the source's disagreements (sides / 2),
    /// so a version on one side of every disagreement holds a share of 1.
    /// Returns the restorations when this confirms the cluster (once), else empty.
    pub fn record(&mut self, key: &AdapterKey, device: &str, moved: f64) -> Vec<Restoration> {
        *self.per_source.entry(key.source.clone()).or_default() += 1;
        let total = self.per_source[&key.source];
        let c = self.clusters.entry(key.clone()).or_default();
        c.count += 1;
        if c.confirmed {
            return Vec::new();
        }
        *c.moved.entry(device.to_string()).or_default() +=
            if moved.is_finite() { moved } else { 0.0 };
        let stands_out = self
            .rates
            .get(&key.source)
            .is_none_or(Rates::cross_stands_out);
        if c.count >= self.min_count
            && c.count as f64 >= self.share * total as f64 / 2.0
            && stands_out
        {
            c.confirmed = true;
            return c
                .moved
                .iter()
                .map(|(d, m)| Restoration {
                    device: d.clone(),
                    delta: -m,
                })
                .collect();
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(v: &str) -> AdapterKey {
        AdapterKey {
            source: "s".into(),
            adapter: "html".into(),
            version: v.into(),
        }
    }

    /// The router records both sides of every cross-version disagreement and
    /// each same-version one as plain: a version in 10 of 13 disagreements
    /// stands out against the 3 plain ones (counting sides, its share could
    /// never pass one half).
    #[test]
    fn a_version_in_most_disagreements_is_confirmed_against_plain_ones() {
        let mut c = Clusters::new(0.5, 5);
        for _ in 0..3 {
            c.record_plain("s");
        }
        let mut restored = Vec::new();
        for i in 0..10 {
            restored.extend(c.record(&key("bug"), &format!("b{i}"), -0.01));
            restored.extend(c.record(&key("ok"), &format!("o{i}"), -0.01));
        }
        let confirmed: Vec<String> = c.confirmed().into_iter().map(|(k, _)| k.version).collect();
        assert!(confirmed.contains(&"bug".to_string()), "{confirmed:?}");
        assert!(!c.moves_trust(&key("bug")));
        assert!(restored.iter().all(|r| r.delta > 0.0) && !restored.is_empty());
        // Plain disagreements alone confirm nothing.
        let mut p = Clusters::new(0.5, 5);
        for _ in 0..50 {
            p.record_plain("s");
        }
        assert!(p.confirmed().is_empty());
        // A version in too small a share stays unconfirmed.
        let mut q = Clusters::new(0.5, 5);
        for _ in 0..20 {
            q.record_plain("s");
        }
        for i in 0..6 {
            q.record(&key("bug"), &format!("b{i}"), -0.01);
            q.record(&key("ok"), &format!("o{i}"), -0.01);
        }
        assert!(q.confirmed().is_empty(), "6 of 26 disagreements");
    }

    /// Feeds `n` comparisons per side: cross-version ones disagreeing at
    /// `px`, same-version ones at `ps` (deterministic spacing), recording
    /// each disagreement as the router does.
    fn feed(c: &mut Clusters, n: u64, px: f64, ps: f64) -> Vec<Restoration> {
        let mut restored = Vec::new();
        let (mut ax, mut as_) = (0.0, 0.0);
        for i in 0..n {
            ax += px;
            let dx = ax >= 1.0;
            if dx {
                ax -= 1.0;
            }
            c.record_comparison("s", true, !dx);
            if dx {
                restored.extend(c.record(&key("a"), &format!("a{i}"), -0.01));
                restored.extend(c.record(&key("b"), &format!("b{i}"), -0.01));
            }
            as_ += ps;
            let ds = as_ >= 1.0;
            if ds {
                as_ -= 1.0;
            }
            c.record_comparison("s", false, !ds);
            if ds {
                c.record_plain("s");
            }
        }
        restored
    }

    /// Churn: two versions, disagreements as frequent within a version as
    /// across (10 % each). Each version's share of the disagreements is one
    /// half, which passes the share rule; the rates keep it unconfirmed.
    #[test]
    fn churn_across_versions_is_not_an_adapter_bug() {
        let mut c = Clusters::new(0.5, 5);
        let restored = feed(&mut c, 2_000, 0.10, 0.10);
        assert!(c.confirmed().is_empty(), "{:?}", c.confirmed());
        assert!(restored.is_empty());
        assert!(c.moves_trust(&key("a")) && c.moves_trust(&key("b")));
        // Without same-version comparisons the share rule alone decides (as
        // for a snapshot written before comparisons were counted).
        let mut legacy = Clusters::new(0.5, 5);
        for i in 0..20 {
            legacy.record_plain("s");
            legacy.record(&key("a"), &format!("a{i}"), -0.01);
            legacy.record(&key("b"), &format!("b{i}"), -0.01);
        }
        assert_eq!(legacy.confirmed().len(), 2);
    }

    /// A bug: across versions 40 % of comparisons disagree, within a version
    /// 5 %. Both sides' clusters are confirmed (two versions cannot say which
    /// side is wrong) and every move is handed back.
    #[test]
    fn disagreements_concentrated_across_versions_confirm_the_clusters() {
        let mut c = Clusters::new(0.5, 5);
        let restored = feed(&mut c, 200, 0.40, 0.05);
        let versions: Vec<String> = c.confirmed().into_iter().map(|(k, _)| k.version).collect();
        assert_eq!(versions, ["a", "b"]);
        assert!(!restored.is_empty() && restored.iter().all(|r| r.delta > 0.0));
        assert!(!c.moves_trust(&key("a")));
    }

    /// The tail test's edge: a small excess on few comparisons is noise.
    #[test]
    fn rates_need_a_significant_excess() {
        let r = |cross, cross_disagree, same, same_disagree| Rates {
            cross,
            cross_disagree,
            same,
            same_disagree,
        };
        assert!(r(100, 40, 100, 5).cross_stands_out());
        assert!(!r(100, 12, 100, 10).cross_stands_out(), "1.2x is not 2x");
        assert!(
            !r(10, 3, 10, 1).cross_stands_out(),
            "3x on 10 comparisons is within noise"
        );
        assert!(!r(100, 10, 100, 10).cross_stands_out());
        assert!(
            r(100, 30, 0, 0).cross_stands_out(),
            "no baseline: the share rule decides"
        );
        assert!(r(50, 50, 50, 0).cross_stands_out());
        // The routing lab's adapter-bug world (seed 42): churn on a source
        // without a bug, 6 of 207 cross-version comparisons disagreeing
        // against 5 of 879 within a version, passed the z-test; the bug's
        // source, 8 of 8 against 8 of 809, must still pass.
        assert!(!r(207, 6, 879, 5).cross_stands_out());
        assert!(!r(218, 5, 1604, 5).cross_stands_out());
        assert!(r(8, 8, 809, 8).cross_stands_out());
        assert!(r(5, 5, 809, 8).cross_stands_out(), "five in a row suffice");
    }

    /// `P(X ≥ k)` for `X ~ Binomial(n, p)`, summed exactly.
    fn exact_tail(n: u64, k: u64, p: f64) -> f64 {
        let mut ln_c = 0.0; // ln C(n, 0)
        let mut sum = 0.0;
        for i in 0..=n {
            if i > 0 {
                ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
            }
            if i >= k {
                sum += (ln_c + i as f64 * p.ln() + (n - i) as f64 * (1.0 - p).ln()).exp();
            }
        }
        sum
    }

    /// The bound is a bound: never below the exact tail, over a grid of
    /// sizes, counts and rates, and 0 (no claim) where k/n ≤ p.
    #[test]
    fn the_chernoff_bound_never_understates_the_exact_tail() {
        for n in [1u64, 2, 5, 10, 50, 200, 1000] {
            for p in [0.001, 0.005, 0.01, 0.05, 0.2, 0.5, 0.9] {
                for k in 0..=n.min(60) {
                    let exact = exact_tail(n, k, p);
                    let bound = ln_tail_bound(n, k, p).exp();
                    assert!(
                        exact <= bound * (1.0 + 1e-9) + 1e-300,
                        "n {n} k {k} p {p}: exact {exact} > bound {bound}"
                    );
                    if (k as f64) <= p * n as f64 {
                        assert_eq!(ln_tail_bound(n, k, p), 0.0);
                    }
                }
            }
        }
        assert_eq!(ln_tail_bound(0, 0, 0.5), 0.0);
        assert!((ln_tail_bound(5, 5, 0.01) - 5.0 * 0.01f64.ln()).abs() < 1e-12);
    }

    /// Churn at one small rate everywhere, checked at every cross-version
    /// disagreement as the router does, over 1,000 sources: 1,000
    /// comparisons within the one version before a second appears (the
    /// lab's upgrade a third into the run), then 2,000 each way. The baseline
    /// is known well by then and the first cross-version comparisons are
    /// few, where a normal approximation fails: no cluster is confirmed.
    #[test]
    fn rare_churn_on_many_sources_confirms_no_cluster() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut uniform = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut false_alarms = 0;
        for source in 0..1_000 {
            let mut c = Clusters::new(0.5, 5);
            let s = format!("s{source}");
            let k = |v: &str| AdapterKey {
                source: s.clone(),
                adapter: "html".into(),
                version: v.into(),
            };
            for _ in 0..1_000 {
                let ds = uniform() < 0.005;
                c.record_comparison(&s, false, !ds);
                if ds {
                    c.record_plain(&s);
                }
            }
            for i in 0..2_000 {
                let dx = uniform() < 0.005;
                c.record_comparison(&s, true, !dx);
                if dx {
                    c.record(&k("a"), &format!("a{i}"), -0.01);
                    c.record(&k("b"), &format!("b{i}"), -0.01);
                }
                let ds = uniform() < 0.005;
                c.record_comparison(&s, false, !ds);
                if ds {
                    c.record_plain(&s);
                }
            }
            false_alarms += usize::from(!c.confirmed().is_empty());
        }
        assert_eq!(false_alarms, 0);
    }
}
