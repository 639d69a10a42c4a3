//! A replaceable settlement rule: a truth-inference model that decides
//! when a row's content is settled and how reliable each device is, in
//! place of the router's trust and quorum (`ROUTING.md` §3 Assignment
//! policy, step 2). The routing lab's `dawid-skene` contender is one; the
//! router as built has none.

use super::Router;

/// A settlement model the router consults instead of its own rule (see
/// [`Router::set_settler`]). The router still opens and expires
/// verifications and routes work as before; it hands the model every
/// content observation, asks it whether an open row settles, and at every
/// tick writes the model's reliability estimates where it keeps trust (so
/// whatever reads trust reads them, the device states included).
pub trait Settler: Send {
    /// A short name for reports.
    fn name(&self) -> &str;
    /// One content observation: `device` read `hash` on `target` at `t_s`
    /// (every successful deposit with a hash, settled row or not).
    fn observe(&mut self, target: &str, device: &str, hash: &str, t_s: f64);
    /// The row of `target` reopened (a re-observation disagreed with its
    /// settled hash): what comes next is a new round.
    fn reopen(&mut self, target: &str);
    /// Whether the open row of `target` settles now, and on which hash.
    fn decide(&mut self, target: &str) -> Option<String>;
    /// Re-estimates at a tick (`t_s`); returns (device, reliability in
    /// [0, 1]) for every device the model has an estimate of.
    fn tick(&mut self, t_s: f64) -> Vec<(String, f64)>;
}

impl Router {
    /// Replaces the router's settlement rule and trust with `settler` (see
    /// [`Settler`]); `None` restores the router's own. Set it before any
    /// deposit: rows settled before are left as they are.
    pub fn set_settler(&mut self, settler: Option<Box<dyn Settler>>) {
        self.settler = settler;
    }

    /// Whether a settler replaces the router's rule.
    pub fn has_settler(&self) -> bool {
        self.settler.is_some()
    }

    /// The settler's tick: its reliabilities become the devices' trust.
    pub(crate) fn settler_tick(&mut self, now_s: f64) {
        let Some(s) = self.settler.as_mut() else {
            return;
        };
        for (device, r) in s.tick(now_s) {
            self.set_trust(&device, r, now_s);
        }
    }
}
