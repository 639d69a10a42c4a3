//! Churn cooldown: a target whose content changes too often stops producing trust events.

use serde::{Deserialize, Serialize};

/// Content changes within [`CHURN_WINDOW_H`] that start a cooldown.
pub const CHURN_CHANGES: usize = 6;
/// Window over which changes are counted, hours.
pub const CHURN_WINDOW_H: f64 = 24.0;
/// Cooldown length, hours: no re-observation, no trust events.
pub const CHURN_COOLDOWN_H: f64 = 24.0;

/// Per-target churn state. Times are hours on any fixed origin (an argument, never a clock).
/// Source: `ROUTING.md` §3 Trust.
///
/// None until the target's content first changes, then held out of line:
/// a router holds one per target and most never change, so an unchanged
/// target costs one pointer (docs/router.md, "The small box"). Serialized
/// as the state itself (an unchanged target as the empty state), as it
/// always was.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Churn(Option<Box<State>>);

/// What a target that changed holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct State {
    changes: Vec<f64>,
    cooling_until: Option<f64>,
}

impl Serialize for Churn {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(st) => st.serialize(s),
            None => State::default().serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Churn {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let st = State::deserialize(d)?;
        let unchanged = st.changes.is_empty() && st.cooling_until.is_none();
        Ok(Churn((!unchanged).then(|| Box::new(st))))
    }
}

impl Churn {
    /// Records a content change at `t_h` (non-finite times are ignored) and
    /// returns whether the target is cooling down at `t_h` afterwards.
    pub fn record_change(&mut self, t_h: f64) -> bool {
        if t_h.is_finite() {
            let st = self.0.get_or_insert_with(Default::default);
            st.changes.retain(|c| t_h - c < CHURN_WINDOW_H && *c <= t_h);
            st.changes.push(t_h);
            if st.changes.len() >= CHURN_CHANGES {
                st.cooling_until = Some(t_h + CHURN_COOLDOWN_H);
                st.changes.clear();
            }
        }
        self.cooling(t_h)
    }

    /// Whether the target is cooling down at `t_h` (no re-observation, no trust events).
    pub fn cooling(&self, t_h: f64) -> bool {
        matches!(self.0.as_deref(), Some(State { cooling_until: Some(u), .. }) if t_h < *u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_changes_within_a_day_start_a_day_of_cooldown() {
        let mut c = Churn::default();
        for i in 0..5 {
            assert!(!c.record_change(i as f64));
        }
        assert!(c.record_change(5.0), "the sixth starts it");
        assert!(c.cooling(28.9) && !c.cooling(29.0));
        // Changes spread wider than the window never start one.
        let mut c = Churn::default();
        assert!((0..20).all(|i| !c.record_change(i as f64 * 5.0)));
        // Non-finite times are ignored.
        let mut c = Churn::default();
        assert!(!c.record_change(f64::NAN));
        assert_eq!(c, Churn::default());
    }

    #[test]
    fn the_json_is_the_state_and_an_unchanged_target_reads_back_as_unchanged() {
        let json = serde_json::to_string(&Churn::default()).unwrap();
        assert_eq!(json, r#"{"changes":[],"cooling_until":null}"#);
        assert_eq!(
            serde_json::from_str::<Churn>(&json).unwrap(),
            Churn::default()
        );
        let mut c = Churn::default();
        c.record_change(1.0);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(json, r#"{"changes":[1.0],"cooling_until":null}"#);
        assert_eq!(serde_json::from_str::<Churn>(&json).unwrap(), c);
    }
}
