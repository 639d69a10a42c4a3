//! Disagreement clustering by (source, adapter id, adapter version).
//!
//! Once a cluster holds at least `min_count` disagreements and a share ≥
//! `share` of its source's disagreements, it is confirmed as an adapter bug:
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
    pub fn record_plain(&mut self, source: &str) {
        *self.per_source.entry(source.to_string()).or_default() += 1;
    }

    /// Whether disagreements of `key` should still move trust (false once confirmed).
    pub fn moves_trust(&self, key: &AdapterKey) -> bool {
        !self.clusters.get(key).is_some_and(|c| c.confirmed)
    }

    /// Records one disagreement of `key` that moved `device`'s τ by `moved`
    /// (negative for a loss; non-finite counts as 0). Returns the
    /// restorations when this disagreement confirms the cluster (once), else empty.
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
        if c.count >= self.min_count && c.count as f64 >= self.share * total as f64 {
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
