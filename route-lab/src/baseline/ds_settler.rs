//! The `dawid-skene` contender's settlement: one-coin Dawid–Skene EM
//! ([`crate::dawid_skene`]) over every device's content observations, in
//! place of the router's trust and quorum ([`router::core::Settler`]).
//!
//! - **Data.** One task per round of a row: the observations of a target
//!   between two reopenings (a settled row reopens when a re-observation
//!   disagrees, i.e. its content moved on), one label per device (its
//!   latest). A task's classes are the distinct hashes it received plus
//!   one for "a hash nobody reported": hashes have no class set shared
//!   between targets, so the one-coin model with a uniform prior per task
//!   is the form of the method the data can identify (the full model's
//!   per-class confusion needs shared classes).
//! - **Estimation.** At every router tick, EM over the newest
//!   [`WINDOW`] rounds, from the majority vote, at most [`MAX_ITER`]
//!   iterations; each device's skill (its accuracy) is its reliability,
//!   which the router writes where it keeps trust.
//! - **Settlement.** An open row settles on the hash whose posterior,
//!   with the current skills, reaches [`SETTLE_AT`]. A device EM has not
//!   seen yet has skill [`PRIOR_SKILL`]: three agreeing unseen devices
//!   settle a row (0.85³ against 0.15³: posterior 0.995), two do not
//!   (0.970), as the router's quorum k = 3 would.

use std::collections::{BTreeMap, HashMap};

use router::core::Settler;

use crate::dawid_skene::{fit, Errors, Prior, Task};

/// Rounds the EM reads at each tick (the newest).
pub const WINDOW: usize = 4000;
/// EM iterations at most per tick.
pub const MAX_ITER: usize = 30;
/// EM stops when no posterior moves by more than this.
pub const TOL: f64 = 1e-6;
/// Posterior at which a row settles.
pub const SETTLE_AT: f64 = 0.99;
/// Skill of a device EM has not estimated yet.
pub const PRIOR_SKILL: f64 = 0.85;

/// One round of one row: (device index, hash) labels, one per device.
#[derive(Debug, Clone, Default)]
struct Round {
    labels: Vec<(usize, String)>,
}

impl Round {
    fn label(&mut self, device: usize, hash: &str) {
        match self.labels.iter_mut().find(|(d, _)| *d == device) {
            Some(l) => l.1 = hash.to_string(),
            None => self.labels.push((device, hash.to_string())),
        }
    }

    /// The task: classes are the distinct hashes in first-seen order, plus
    /// one unobserved class last.
    fn task(&self) -> (Task, Vec<&str>) {
        let mut hashes: Vec<&str> = Vec::new();
        let labels = self
            .labels
            .iter()
            .map(|(d, h)| {
                let c = match hashes.iter().position(|x| x == h) {
                    Some(c) => c,
                    None => {
                        hashes.push(h);
                        hashes.len() - 1
                    }
                };
                (*d, c)
            })
            .collect();
        (
            Task {
                classes: hashes.len() + 1,
                labels,
            },
            hashes,
        )
    }
}

/// One-coin Dawid–Skene settlement over the rounds of every row.
#[derive(Debug, Clone, Default)]
pub struct DawidSkeneSettler {
    index: BTreeMap<String, usize>,
    names: Vec<String>,
    skills: Vec<f64>,
    rounds: Vec<Round>,
    /// Index of the open round per target (into `rounds`, offset by `dropped`).
    open: HashMap<String, usize>,
    /// Rounds dropped from the front of `rounds` (absolute index = dropped + i).
    dropped: usize,
}

impl DawidSkeneSettler {
    /// A settler with no data.
    pub fn new() -> DawidSkeneSettler {
        DawidSkeneSettler::default()
    }

    fn device(&mut self, id: &str) -> usize {
        if let Some(&i) = self.index.get(id) {
            return i;
        }
        let i = self.names.len();
        self.index.insert(id.to_string(), i);
        self.names.push(id.to_string());
        self.skills.push(PRIOR_SKILL);
        i
    }

    fn round_mut(&mut self, target: &str) -> &mut Round {
        let abs = match self.open.get(target) {
            Some(&a) if a >= self.dropped => a,
            _ => {
                self.rounds.push(Round::default());
                let a = self.dropped + self.rounds.len() - 1;
                self.open.insert(target.to_string(), a);
                a
            }
        };
        &mut self.rounds[abs - self.dropped]
    }

    /// The posterior of each hash of `target`'s open round with the current
    /// skills (the unobserved class left out), in first-seen order.
    pub fn posterior(&self, target: &str) -> Vec<(String, f64)> {
        let Some(r) = self
            .open
            .get(target)
            .and_then(|&a| a.checked_sub(self.dropped))
            .and_then(|i| self.rounds.get(i))
        else {
            return Vec::new();
        };
        let (task, hashes) = r.task();
        let k = task.classes;
        let mut log = vec![0.0f64; k];
        for &(d, c) in &task.labels {
            let s = self.skills[d].clamp(1e-6, 1.0 - 1e-6);
            for (z, l) in log.iter_mut().enumerate() {
                *l += if z == c {
                    s
                } else {
                    (1.0 - s) / (k - 1) as f64
                }
                .ln();
            }
        }
        let top = log.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = log.iter().map(|l| (l - top).exp()).collect();
        let sum: f64 = w.iter().sum();
        hashes
            .iter()
            .enumerate()
            .map(|(c, h)| (h.to_string(), w[c] / sum))
            .collect()
    }

    /// A device's current skill.
    pub fn skill(&self, device: &str) -> Option<f64> {
        self.index.get(device).map(|&i| self.skills[i])
    }
}

impl Settler for DawidSkeneSettler {
    fn name(&self) -> &str {
        "dawid-skene"
    }

    fn observe(&mut self, target: &str, device: &str, hash: &str, _: f64) {
        let d = self.device(device);
        self.round_mut(target).label(d, hash);
    }

    fn reopen(&mut self, target: &str) {
        self.open.remove(target);
    }

    fn decide(&mut self, target: &str) -> Option<String> {
        self.posterior(target)
            .into_iter()
            .find(|(_, p)| *p >= SETTLE_AT)
            .map(|(h, _)| h)
    }

    fn tick(&mut self, _: f64) -> Vec<(String, f64)> {
        if self.rounds.len() > WINDOW {
            // Forget the oldest rounds; an open one among them restarts.
            let cut = self.rounds.len() - WINDOW;
            self.rounds.drain(..cut);
            self.dropped += cut;
        }
        let tasks: Vec<Task> = self.rounds.iter().map(|r| r.task().0).collect();
        if tasks.is_empty() {
            return Vec::new();
        }
        let Ok(f) = fit(
            &tasks,
            self.names.len(),
            Errors::OneCoin,
            Prior::Uniform,
            MAX_ITER,
            TOL,
        ) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, s) in f.skills.iter().enumerate() {
            if let Some(s) = s {
                self.skills[i] = *s;
                out.push((self.names[i].clone(), *s));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_unseen_devices_settle_a_row_and_two_do_not() {
        let mut s = DawidSkeneSettler::new();
        s.observe("t", "a", "h", 0.0);
        assert_eq!(s.decide("t"), None);
        s.observe("t", "b", "h", 0.0);
        assert_eq!(s.decide("t"), None);
        let p = s.posterior("t");
        assert!((p[0].1 - 0.7225 / (0.7225 + 0.0225)).abs() < 1e-9, "{p:?}");
        s.observe("t", "c", "h", 0.0);
        assert_eq!(s.decide("t").as_deref(), Some("h"));
    }

    #[test]
    fn em_finds_colluders_and_their_votes_then_count_against_them() {
        // 40 rows: honest a, b, c read the genuine hash; x and y write one
        // forgery everywhere.
        let mut s = DawidSkeneSettler::new();
        for t in 0..40 {
            let t = format!("t{t}");
            for d in ["a", "b", "c"] {
                s.observe(&t, d, &format!("genuine-{t}"), 0.0);
            }
            for d in ["x", "y"] {
                s.observe(&t, d, "forged", 0.0);
            }
        }
        let rel: BTreeMap<String, f64> = s.tick(30.0).into_iter().collect();
        assert!(rel["a"] > 0.95 && rel["x"] < 0.05, "{rel:?}");
        assert_eq!(s.skill("y"), Some(rel["y"]));
        // A new row: the two colluders alone never settle it, and one
        // honest device outweighs them.
        s.observe("new", "x", "forged", 40.0);
        s.observe("new", "y", "forged", 40.0);
        assert_eq!(s.decide("new"), None);
        s.observe("new", "a", "genuine", 40.0);
        assert_eq!(s.decide("new").as_deref(), Some("genuine"));
    }

    #[test]
    fn a_reopened_row_is_a_new_round_and_a_device_keeps_its_latest_label() {
        let mut s = DawidSkeneSettler::new();
        s.observe("t", "a", "v1", 0.0);
        s.observe("t", "a", "v2", 1.0);
        assert_eq!(s.posterior("t").len(), 1, "one label per device");
        s.reopen("t");
        assert!(s.posterior("t").is_empty());
        s.observe("t", "b", "v3", 2.0);
        assert_eq!(s.posterior("t")[0].0, "v3");
        assert_eq!(s.rounds.len(), 2);
    }

    #[test]
    fn the_window_forgets_old_rounds_and_reopens_their_rows() {
        let mut s = DawidSkeneSettler::new();
        s.observe("old", "a", "h", 0.0);
        for t in 0..WINDOW {
            s.observe(&format!("t{t}"), "a", "h", 0.0);
        }
        s.tick(30.0);
        assert_eq!(s.rounds.len(), WINDOW);
        assert!(s.posterior("old").is_empty(), "its round is gone");
        s.observe("old", "b", "h", 31.0);
        assert_eq!(s.posterior("old").len(), 1);
    }
}
