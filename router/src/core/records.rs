//! The operator's reads of records: a device's identity and earned trust
//! (`GET /v1/device?id=…`), a target's verification and schedule
//! (`GET /v1/target?name=…`), and the settled rows a page at a time
//! (`GET /v1/settled?after=…&limit=…`). Unlike `GET /v1/field` these name
//! devices and content, so routerd answers them to the operator key only.
//! The first two copy a handful of fields under the router's lock; a page
//! walks an O(1) clone of the targets table outside it. Also the
//! counts and tables the shell, the lab and the tests read (devices,
//! targets, settled rows, prices).
//! Source: `ROUTING.md` §3 Trust and Verification, §4 (the operator's surface).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use routing::trust::State as TrustState;

use super::Router;

/// The body of `GET /v1/device?id=…`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceView {
    /// Device id.
    pub device_id: String,
    /// Archetype it registered with.
    pub archetype: String,
    /// Adapter version it runs.
    pub adapter_version: String,
    /// Trust τ ∈ [0, 1].
    pub trust: f64,
    /// Trust state (trusted, normal, limited; suspended and revoked are the operator's).
    pub state: TrustState,
    /// Whether it is live now (its lease scope is fresh).
    pub live: bool,
    /// Deposits folded.
    pub deposits: u64,
    /// First registration, seconds on the router's clock.
    pub registered_at_s: f64,
    /// Last sign of life, seconds on the router's clock.
    pub last_seen_s: f64,
}

/// The body of `GET /v1/target?name=…`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetView {
    /// Target.
    pub target: String,
    /// Its source.
    pub source: String,
    /// The settled content hash of its row, if settled.
    pub settled: Option<String>,
    /// Verifications asked of devices and not yet answered.
    pub open_verifications: usize,
    /// Successful observations kept: the newest and the newest earlier one
    /// by another device (at most 2, `state::KEEP_OBSERVATIONS`).
    pub observations: usize,
    /// Last executed attempt, seconds, if any.
    pub last_attempt_s: Option<f64>,
    /// Due for (re-)observation at, seconds.
    pub due_s: f64,
}

/// Most targets one page of `GET /v1/settled` walks.
pub const SETTLED_PAGE_MAX: usize = 10_000;

/// One settled row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettledRow {
    /// Target.
    pub target: String,
    /// Its settled content hash.
    pub hash: String,
}

/// The body of `GET /v1/settled`: the settled rows among up to `limit`
/// targets after `after` in name order, and where the next page starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettledPage {
    /// Settled rows, in target name order.
    pub rows: Vec<SettledRow>,
    /// The last target this page walked, to pass as `after`; `None` when
    /// the walk reached the end.
    pub next_after: Option<String>,
}

/// The settled rows among the first `limit` targets (clamped to
/// 1..=[`SETTLED_PAGE_MAX`]) whose names sort after `after` (all when
/// `None`), walking `targets` (a clone taken from [`Router::targets_table`]).
pub fn settled_page(
    targets: &crate::core::state::Table<crate::core::state::TargetRec>,
    after: Option<&str>,
    limit: usize,
) -> SettledPage {
    use std::ops::Bound;
    let limit = limit.clamp(1, SETTLED_PAGE_MAX);
    let lower = match after {
        Some(a) => Bound::Excluded(a.to_string()),
        None => Bound::Unbounded,
    };
    let mut rows = Vec::new();
    let mut walked = 0;
    let mut last = None;
    for (name, t) in targets.range((lower, Bound::Unbounded)) {
        if walked == limit {
            return SettledPage {
                rows,
                next_after: last,
            };
        }
        walked += 1;
        if let Some(h) = t.verification.settled() {
            rows.push(SettledRow {
                target: name.clone(),
                hash: h.to_string(),
            });
        }
        last = Some(name.clone());
    }
    SettledPage {
        rows,
        next_after: None,
    }
}

impl Router {
    /// The targets table as an O(1) clone, for [`settled_page`] outside the lock.
    pub fn targets_table(&self) -> crate::core::state::Table<crate::core::state::TargetRec> {
        self.d.targets.table()
    }

    /// Trust of a known device.
    pub fn trust(&self, device: &str) -> Option<f64> {
        self.d.devices.get(device).map(|d| d.trust)
    }

    /// Devices known to the store (durable identities).
    pub fn known_devices(&self) -> usize {
        self.d.devices.len()
    }

    /// Devices live now.
    pub fn live_devices(&self) -> usize {
        self.live.len()
    }

    /// Open verifications over all targets (kept as the targets change:
    /// O(1)).
    pub fn open_verifications(&self) -> usize {
        self.d.targets.tally()
    }

    /// The open price window: its start (seconds, the router's clock) and
    /// each pool's usage in it so far (units of the metering table). A tick
    /// that closes the window moves the start and empties the usage.
    pub fn price_window(&self) -> (f64, &BTreeMap<String, f64>) {
        (self.d.window_start_s, &self.d.usage)
    }

    /// Settled rows.
    pub fn settled_rows(&self) -> usize {
        self.d
            .targets
            .values()
            .filter(|t| t.verification.settled().is_some())
            .count()
    }

    /// The settled content hash of a target, if settled.
    pub fn settled(&self, target: &str) -> Option<&str> {
        self.d
            .targets
            .get(target)
            .and_then(|t| t.verification.settled())
    }

    /// Targets known.
    pub fn targets(&self) -> usize {
        self.d.targets.len()
    }

    /// Current price of each pool.
    pub fn prices(&self) -> BTreeMap<String, f64> {
        self.d
            .pools
            .iter()
            .map(|(k, p)| (k.clone(), p.price()))
            .collect()
    }

    /// Every device's durable record, shared (an O(1) clone of the
    /// persistent map).
    pub fn devices_table(&self) -> crate::core::state::Table<crate::core::state::DeviceRec> {
        self.d.devices.table()
    }

    /// The operator's view of device `id`; `None` when no such identity is kept.
    pub fn device_view(&self, id: &str) -> Option<DeviceView> {
        let d = self.d.devices.get(id)?;
        Some(DeviceView {
            device_id: id.to_string(),
            archetype: d.archetype.to_string(),
            adapter_version: d.adapter_version.to_string(),
            trust: d.trust,
            state: d.state,
            live: self.live.contains_key(id),
            deposits: d.deposits,
            registered_at_s: d.registered_at,
            last_seen_s: d.last_seen_s,
        })
    }

    /// The operator's view of target `name`; `None` when no such target is known.
    pub fn target_view(&self, name: &str) -> Option<TargetView> {
        let t = self.d.targets.get(name)?;
        Some(TargetView {
            target: name.to_string(),
            source: t.source.clone(),
            settled: t.verification.settled().map(str::to_string),
            open_verifications: t.verification.open().len(),
            observations: t.observations.len(),
            last_attempt_s: t.last_attempt_s,
            due_s: t.due_s,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::state::TargetRec;
    use routing::verify::Verification;

    fn rec(settled: Option<&str>) -> std::sync::Arc<TargetRec> {
        let mut verification = Verification::new();
        if let Some(h) = settled {
            verification.settle_inferred(h).unwrap();
        }
        std::sync::Arc::new(TargetRec {
            source: "s".into(),
            listing: false,
            observations: vec![],
            verification,
            last_attempt_s: None,
            due_s: 0.0,
            churn: Default::default(),
        })
    }

    /// Pages walk every target once, in name order, and return exactly the settled rows.
    #[test]
    fn pages_walk_every_target_once_and_return_the_settled_rows() {
        let mut t = imbl::OrdMap::new();
        for i in 0..7 {
            let h = format!("h{i}");
            t.insert(format!("t{i}"), rec((i % 3 == 0).then_some(h.as_str())));
        }
        let want: Vec<SettledRow> = [0, 3, 6]
            .iter()
            .map(|i| SettledRow {
                target: format!("t{i}"),
                hash: format!("h{i}"),
            })
            .collect();
        for limit in [0, 1, 2, 3, 7, 8, usize::MAX] {
            let (mut rows, mut after, mut pages) = (Vec::new(), None::<String>, 0);
            loop {
                let p = settled_page(&t, after.as_deref(), limit);
                rows.extend(p.rows);
                pages += 1;
                match p.next_after {
                    Some(a) => after = Some(a),
                    None => break,
                }
                assert!(pages <= 7, "limit {limit} never ends");
            }
            assert_eq!(rows, want, "limit {limit}");
            assert_eq!(
                pages,
                7usize.div_ceil(limit.clamp(1, SETTLED_PAGE_MAX)),
                "limit {limit}"
            );
        }
        let empty = settled_page(&imbl::OrdMap::new(), None, 10);
        assert_eq!((empty.rows.len(), empty.next_after), (0, None));
        let past = settled_page(&t, Some("zzz"), 10);
        assert_eq!((past.rows.len(), past.next_after), (0, None));
    }
}
