//! Disagreement clustering by (source, adapter id, adapter version).
//!
//! Once a cluster holds at least `min_count` disagreements and took part in
//! a share ≥ `share` of its source's disagreements, it is confirmed as an adapter bug:
//! its later disagreements stop moving trust and the trust it moved is
//! returned for restoration. Source: `ROUTING.md` §3 Trust.

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
        if c.count >= self.min_count && c.count as f64 >= self.share * total as f64 / 2.0 {
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
}
