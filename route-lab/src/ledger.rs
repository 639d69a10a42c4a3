//! Where devices' trust went after the adapter bug began. The lab mirrors
//! the comparison the router makes at each deposit (against the most recent
//! earlier observation of the target by another device, `ROUTING.md` §3
//! Trust), tags it with the world's truth of the two hashes, and reads both
//! devices' trust around the deposit. A device that ends below its trust at
//! the bug's start is then traced to the losses it has not won back since it
//! was last at or above that value: the bug's, a liar's, or a content change
//! between two honest observations.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::world::HashKind;

/// Observations the router keeps per target (`router::core::state::KEEP_OBSERVATIONS`).
const KEEP: usize = 8;

/// Tolerance below which a trust change is not counted, in τ.
const EPS: f64 = 1e-9;

/// Why a device's trust moved, by the world's truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// The two hashes were the same.
    Agreement,
    /// One side's hash came from the buggy adapter.
    Bug,
    /// One side's hash was a liar's forgery (and neither was buggy).
    Liar,
    /// Both hashes were genuine: the content changed between the two observations.
    ContentChange,
    /// A change between the device's own comparisons, upwards: the router
    /// gave back what a confirmed cluster had moved.
    Restoration,
    /// A change between the device's own comparisons, downwards (nothing in
    /// the router lowers trust there; counted so that it cannot hide).
    Unexplained,
}

impl Cause {
    /// The cause of one comparison between hashes of kinds `a` and `b`.
    pub fn of(a: HashKind, b: HashKind, agree: bool) -> Cause {
        if agree {
            Cause::Agreement
        } else if a == HashKind::Buggy || b == HashKind::Buggy {
            Cause::Bug
        } else if a == HashKind::Forged || b == HashKind::Forged {
            Cause::Liar
        } else {
            Cause::ContentChange
        }
    }
}

/// One loss of trust not yet won back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Loss {
    /// Why.
    pub cause: Cause,
    /// How much τ it took (> 0).
    pub amount: f64,
    /// When, simulated seconds.
    pub t_s: f64,
}

/// A device whose trust ended below its value when the bug began.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LowerDevice {
    /// Device id.
    pub device: String,
    /// τ when the bug began.
    pub before: f64,
    /// τ at the end.
    pub after: f64,
    /// The losses since it was last at or above `before`, oldest first.
    pub losses: Vec<Loss>,
    /// Whether the device was online in the run's last second: an offline
    /// device wins nothing back.
    #[serde(default)]
    pub online_at_end: bool,
}

#[derive(Debug, Clone)]
struct Account {
    before: f64,
    last: f64,
    unrecovered: Vec<Loss>,
}

/// The mirror of the router's observations and the per-device accounts.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Per target: (device, hash, kind), most recent last, at most [`KEEP`].
    mirror: HashMap<usize, Vec<(usize, String, HashKind)>>,
    /// Per device known when the bug began.
    accounts: HashMap<usize, Account>,
    /// Comparison sides read on accounted devices, and those whose move
    /// contradicts the mirrored cause (see [`Ledger::checks`]).
    sides: u64,
    mismatches: u64,
}

impl Ledger {
    /// Opens the accounts at the bug's start: device index and τ then.
    pub fn start(&mut self, trust: impl IntoIterator<Item = (usize, f64)>) {
        self.accounts = trust
            .into_iter()
            .map(|(d, tau)| {
                (
                    d,
                    Account {
                        before: tau,
                        last: tau,
                        unrecovered: Vec::new(),
                    },
                )
            })
            .collect();
    }

    /// The observation of `target` the router compares device `d`'s deposit
    /// with: the most recent by another device, as (device, hash, kind).
    pub fn other(&self, target: usize, d: usize) -> Option<(usize, &str, HashKind)> {
        self.mirror
            .get(&target)?
            .iter()
            .rev()
            .find(|o| o.0 != d)
            .map(|(o, h, k)| (*o, h.as_str(), *k))
    }

    /// Records device `d`'s accepted observation of `target`.
    pub fn push(&mut self, target: usize, d: usize, hash: String, kind: HashKind) {
        let obs = self.mirror.entry(target).or_default();
        obs.push((d, hash, kind));
        if obs.len() > KEEP {
            obs.remove(0);
        }
    }

    /// Device `d`'s τ read before its next comparison: any change since it
    /// was last seen happened outside its comparisons.
    pub fn sync(&mut self, d: usize, tau: f64, t_s: f64) {
        let up = self.accounts.get(&d).is_some_and(|a| tau >= a.last - EPS);
        let cause = if up {
            Cause::Restoration
        } else {
            Cause::Unexplained
        };
        self.moved(d, tau, cause, t_s);
    }

    /// Device `d`'s τ is now `tau`, moved by `cause`. A fall is kept as a
    /// loss; reaching the value it had when the bug began clears them.
    pub fn moved(&mut self, d: usize, tau: f64, cause: Cause, t_s: f64) {
        let Some(a) = self.accounts.get_mut(&d) else {
            return;
        };
        if matches!(cause, Cause::Agreement | Cause::Liar | Cause::ContentChange) {
            self.sides += 1;
            let wrong_way = match cause {
                Cause::Agreement => tau < a.last - EPS,
                _ => tau > a.last + EPS,
            };
            self.mismatches += u64::from(wrong_way);
        }
        if tau < a.last - EPS {
            a.unrecovered.push(Loss {
                cause,
                amount: a.last - tau,
                t_s,
            });
        }
        if tau >= a.before - EPS {
            a.unrecovered.clear();
        }
        a.last = tau;
    }

    /// (comparison sides checked, mismatches): how well the mirror follows
    /// the router. An agreement never lowers τ and a disagreement that is
    /// not the bug's never raises it (only the bug's cluster, confirmed in
    /// that same comparison, gives trust back there), so a side moving the
    /// wrong way means the mirror compared other observations than the router.
    pub fn checks(&self) -> (u64, u64) {
        (self.sides, self.mismatches)
    }

    /// The devices below their starting τ once each is synced to its final
    /// `trust(d)`, in device order; `id(d)` names them and `online(d)` says
    /// whether each was online at the end.
    pub fn lower(
        &mut self,
        trust: impl Fn(usize) -> Option<f64>,
        id: impl Fn(usize) -> String,
        online: impl Fn(usize) -> bool,
        t_s: f64,
    ) -> Vec<LowerDevice> {
        let mut ds: Vec<usize> = self.accounts.keys().copied().collect();
        ds.sort_unstable();
        let mut out = Vec::new();
        for d in ds {
            if let Some(tau) = trust(d) {
                self.sync(d, tau, t_s);
            }
            let a = &self.accounts[&d];
            if a.last < a.before - EPS {
                out.push(LowerDevice {
                    device: id(d),
                    before: a.before,
                    after: a.last,
                    losses: a.unrecovered.clone(),
                    online_at_end: online(d),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_table_is_exhaustive() {
        use HashKind::*;
        let kinds = [Genuine, Forged, Buggy];
        for a in kinds {
            for b in kinds {
                assert_eq!(Cause::of(a, b, true), Cause::Agreement);
                let expected = if a == Buggy || b == Buggy {
                    Cause::Bug
                } else if a == Forged || b == Forged {
                    Cause::Liar
                } else {
                    Cause::ContentChange
                };
                assert_eq!(Cause::of(a, b, false), expected, "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn the_mirror_finds_the_latest_observation_by_another_device_within_the_kept_eight() {
        let mut l = Ledger::default();
        assert_eq!(l.other(0, 1), None);
        l.push(0, 2, "a".into(), HashKind::Genuine);
        for _ in 0..3 {
            l.push(0, 1, "b".into(), HashKind::Buggy);
        }
        assert_eq!(l.other(0, 1), Some((2, "a", HashKind::Genuine)));
        assert_eq!(l.other(0, 2), Some((1, "b", HashKind::Buggy)));
        // Eight more by device 1 push device 2's observation out, as in the router.
        for _ in 0..8 {
            l.push(0, 1, "b".into(), HashKind::Buggy);
        }
        assert_eq!(l.other(0, 1), None);
        assert_eq!(l.other(1, 1), None, "another target");
    }

    #[test]
    fn losses_are_kept_until_the_starting_value_is_reached_again() {
        let mut l = Ledger::default();
        l.start([(0, 0.9), (1, 1.0)]);
        l.moved(0, 0.86, Cause::Bug, 10.0);
        l.moved(0, 0.88, Cause::Agreement, 11.0);
        l.moved(0, 0.85, Cause::ContentChange, 12.0);
        let ids = |d: usize| format!("dev-{d}");
        let lower = l.lower(|d| Some([0.85, 1.0][d]), ids, |_| true, 20.0);
        assert_eq!(lower.len(), 1);
        assert_eq!(lower[0].device, "dev-0");
        let causes: Vec<Cause> = lower[0].losses.iter().map(|x| x.cause).collect();
        assert_eq!(causes, [Cause::Bug, Cause::ContentChange]);
        assert!((lower[0].losses[0].amount - 0.04).abs() < 1e-12);
        // A restoration back to the start clears them.
        l.sync(0, 0.9, 30.0);
        assert!(l.lower(|_| None, ids, |_| true, 31.0).is_empty());
        // A fall outside any comparison is unexplained, never hidden.
        l.sync(1, 0.5, 40.0);
        let lower = l.lower(|_| None, ids, |_| true, 41.0);
        assert_eq!(lower[0].losses[0].cause, Cause::Unexplained);
    }

    #[test]
    fn a_move_against_its_cause_is_a_mismatch() {
        let mut l = Ledger::default();
        l.start([(0, 0.5), (1, 0.5)]);
        l.moved(0, 0.51, Cause::Agreement, 1.0);
        l.moved(1, 0.48, Cause::ContentChange, 1.0);
        l.moved(0, 0.53, Cause::Bug, 2.0); // a restoration in the confirming comparison
        assert_eq!(l.checks(), (2, 0));
        l.moved(0, 0.50, Cause::Agreement, 3.0);
        l.moved(1, 0.49, Cause::Liar, 3.0);
        l.moved(7, 0.10, Cause::Agreement, 3.0); // not accounted
        assert_eq!(l.checks(), (4, 2));
    }

    #[test]
    fn devices_unknown_when_the_bug_began_are_not_accounted() {
        let mut l = Ledger::default();
        l.start([(0, 0.5)]);
        l.moved(7, 0.1, Cause::Liar, 1.0);
        let lower = l.lower(|_| Some(0.1), |d| d.to_string(), |d| d == 0, 2.0);
        let ids: Vec<&str> = lower.iter().map(|x| x.device.as_str()).collect();
        assert_eq!(ids, ["0"]);
        assert!(lower[0].online_at_end);
        let lower = l.lower(|_| Some(0.1), |d| d.to_string(), |_| false, 2.0);
        assert!(!lower[0].online_at_end);
    }
}
