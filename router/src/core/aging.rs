//! The field's aging, off the router's lock (`ROUTING.md` §3 Evidence
//! dynamics (a): every cell's evidence scaled by 2^(−Δt/48 h) each tick).
//!
//! Aging walks every cell of every tree, so it is not done on the router's
//! field under its lock. [`Router::tick_begin`] opens the field's journal
//! and hands a clone (O(1): the trees share their subtrees) to
//! [`TickInputs::run`], which ages it and plans the refill on it without
//! the lock; [`Router::tick_finish`] replays the writes the field took
//! meanwhile (deposits' evidence, gates) onto the aged clone and puts it in
//! place: the field that aging first and writing after would have made
//! (`routing::field::Journal`). The field it replaces is handed back
//! ([`Retired`]) to be dropped outside the lock too. Where the journal
//! cannot be replayed (it overflowed, or another tick began meanwhile) the
//! field is aged in place under the lock, as before.

use routing::field::Field;

use super::refill::{OldQueues, RefillDecision, RefillInputs, RefillPlan};
use super::Router;

/// One tick's aging: the field's clone, the hours to age it by, and the
/// time it is then aged to.
#[derive(Debug, Clone)]
pub(crate) struct FieldAging {
    field: Field,
    dt_hours: f64,
    to_s: f64,
    /// The tick that opened the journal ([`Router::tick_begin`] counts them).
    epoch: u64,
}

/// What a tick does outside the router's lock: the field's aging and the
/// refill's plan and decisions ([`TickInputs::run`]).
#[derive(Debug, Clone)]
pub struct TickInputs {
    aging: Option<FieldAging>,
    refill: RefillInputs,
}

/// What [`TickInputs::run`] made, for [`Router::tick_finish`].
#[derive(Debug, Clone)]
pub struct TickWork {
    /// The aged clone (`None`: no time passed, or the duration was refused).
    aged: Option<FieldAging>,
    /// The refill's decisions (`None`: no archetype live).
    decision: Option<RefillDecision>,
}

/// What the tick's install took out of the router: dropped by the caller,
/// outside the lock (the old field's cells and the old queues' entries are
/// freed one by one).
#[derive(Debug, Default)]
#[must_use = "drop it outside the router's lock"]
pub struct Retired {
    _field: Option<Field>,
    _queues: OldQueues,
}

impl TickInputs {
    pub(super) fn new(aging: Option<FieldAging>, refill: RefillInputs) -> TickInputs {
        TickInputs { aging, refill }
    }

    /// Ages the field's clone, then plans and decides the refill on the
    /// aged field; needs nothing of the router.
    pub fn run(self) -> TickWork {
        let TickInputs { aging, mut refill } = self;
        let aged = aging.and_then(|mut a| a.field.age_all(a.dt_hours).ok().map(|_| a));
        if let Some(a) = &aged {
            refill.set_field(a.field.clone());
        }
        let decision = refill.plan().map(RefillPlan::decide);
        TickWork { aged, decision }
    }
}

impl Router {
    /// Opens the field's journal and clones the field for aging to `now_s`;
    /// `None` when no time passed since the field was last aged.
    /// Within the aging period (`RouterConfig::aging_period_s`) it does
    /// nothing; with `aging_in_place` it ages the field here, under the
    /// lock, and returns `None` (decision 0021).
    pub(super) fn begin_aging(&mut self, now_s: f64) -> Option<FieldAging> {
        let dt = now_s - self.d.aged_to_s;
        if dt <= 0.0 || !dt.is_finite() || dt < self.cfg.aging_period_s {
            return None;
        }
        if self.cfg.aging_in_place {
            if self.d.field.age_all(dt / 3600.0).is_ok() {
                self.d.aged_to_s = now_s;
                self.dirty = true;
            }
            return None;
        }
        self.aging_epoch += 1;
        self.d.field.begin_journal();
        Some(FieldAging {
            field: self.d.field.clone(),
            dt_hours: dt / 3600.0,
            to_s: now_s,
            epoch: self.aging_epoch,
        })
    }

    /// Puts the aged clone in place with the writes made meanwhile
    /// replayed onto it, and returns the field it replaced; ages the field
    /// in place instead where the journal cannot be replayed.
    fn install_aged(&mut self, aged: FieldAging) -> Retired {
        if aged.epoch != self.aging_epoch {
            // A later tick began meanwhile: its own aging covers this one's.
            return Retired::default();
        }
        let journal = self.d.field.take_journal();
        let mut field = aged.field;
        let replayed = journal.is_some_and(|j| field.replay(&j).is_ok());
        let retired = if replayed {
            Some(std::mem::replace(&mut self.d.field, field))
        } else {
            self.counters.aging_in_place += 1;
            let _ = self.d.field.age_all(aged.dt_hours);
            None
        };
        self.d.aged_to_s = aged.to_s;
        self.dirty = true;
        Retired {
            _field: retired,
            _queues: OldQueues::new(),
        }
    }

    /// The tick's install at `now_s`: the aged field first (so a filler the
    /// install decides itself reads it), then the refill's queues.
    pub(super) fn install_work(&mut self, work: TickWork, now_s: f64) -> Retired {
        let mut retired = work.aged.map(|a| self.install_aged(a)).unwrap_or_default();
        retired._queues = match work.decision {
            Some(d) => self.refill_install_keeping(d, now_s),
            None => std::mem::take(&mut self.queues),
        };
        retired
    }
}
