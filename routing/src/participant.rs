//! The device-side realization of a lease: fold the receipt with local facts, execute or protest.
//!
//! A fresh local negative fact (this source was unreachable from here) blocks
//! immediate repetition for a curiosity window, then reopens the source for a
//! trial. A protest echoes the receipt and releases the lease as preflight;
//! it is never evidence above the device. Source: `ROUTING.md` §3 Participant.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::field::Receipt;

/// Errors of the participant.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ParticipantError {
    /// The curiosity window must be finite and > 0 seconds.
    #[error("curiosity window must be finite and > 0 s, got {0}")]
    BadWindow(f64),
    /// A time must be finite.
    #[error("time must be finite, got {0}")]
    BadTime(f64),
}

/// What the device does with a lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Verdict {
    /// Execute the leased work; the outcome becomes evidence.
    Execute,
    /// Execute as a trial: a local negative fact has aged past the window.
    Trial,
    /// Refuse as preflight, echoing the lease's receipt; never learned above the device.
    Protest {
        /// The receipt of the lease, unchanged.
        receipt: Receipt,
        /// Seconds until the source reopens for a trial here.
        reopens_in_s: f64,
    },
}

/// One device's local facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Participant {
    window_s: f64,
    unreachable: BTreeMap<String, f64>,
}

impl Participant {
    /// A device with curiosity window `window_s` seconds (finite, > 0).
    /// Errors: [`ParticipantError::BadWindow`].
    pub fn new(window_s: f64) -> Result<Participant, ParticipantError> {
        if !(window_s.is_finite() && window_s > 0.0) {
            return Err(ParticipantError::BadWindow(window_s));
        }
        Ok(Participant {
            window_s,
            unreachable: BTreeMap::new(),
        })
    }

    /// Records that `source` was unreachable from here at `t_s` seconds
    /// (the latest fact wins). Errors: [`ParticipantError::BadTime`].
    pub fn unreachable(&mut self, source: &str, t_s: f64) -> Result<(), ParticipantError> {
        if !t_s.is_finite() {
            return Err(ParticipantError::BadTime(t_s));
        }
        let e = self.unreachable.entry(source.to_string()).or_insert(t_s);
        *e = e.max(t_s);
        Ok(())
    }

    /// Records that `source` was reached from here: the negative fact is cleared.
    pub fn reached(&mut self, source: &str) {
        self.unreachable.remove(source);
    }

    /// Folds a lease for `source` (with its `receipt`) at `t_s` seconds with
    /// the local facts. Errors: [`ParticipantError::BadTime`].
    pub fn fold(
        &self,
        source: &str,
        receipt: &Receipt,
        t_s: f64,
    ) -> Result<Verdict, ParticipantError> {
        if !t_s.is_finite() {
            return Err(ParticipantError::BadTime(t_s));
        }
        Ok(match self.unreachable.get(source) {
            None => Verdict::Execute,
            Some(&at) => {
                let age = t_s - at;
                if age < self.window_s {
                    Verdict::Protest {
                        receipt: receipt.clone(),
                        reopens_in_s: self.window_s - age.max(0.0),
                    }
                } else {
                    Verdict::Trial
                }
            }
        })
    }
}
