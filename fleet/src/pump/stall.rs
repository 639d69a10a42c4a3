//! The stall detector: K consecutive backstop ticks on which admitted work
//! waits beside idle capacity and nothing moved fail the pump loudly. Busy
//! seats are not a stall: a long unit under a full queue is healthy.
//! `DESIGN.md` §3 "Lanes, hosts and the pump"; seed 003 (the liveness
//! decision).

use super::{Effect, FailureKind, HostPump, PumpFailure};
use crate::guard::GuardSnapshot;
use crate::role::{Hosting, WorkerRole, ALL_ROLES};

impl<P> HostPump<P> {
    /// Counts a backstop tick toward a stall: K consecutive ticks on which
    /// admitted work waited beside idle capacity and nothing moved fail the
    /// pump loudly ([`FailureKind::Stalled`]).
    pub(super) fn account_tick(&mut self, guard: &GuardSnapshot, fx: &mut Vec<Effect<P>>) {
        if self.failed || self.closed() {
            return;
        }
        // Busy seats are not a stall: a unit longer than K intervals under a
        // full queue is healthy. Only admitted work beside idle capacity
        // that nothing moved counts.
        if self.idle_capacity_waits(guard) && !self.moved_since_tick {
            self.stall += 1;
            if self.stall >= self.config.stall_ticks.max(1) {
                let ticks = self.stall;
                self.fail(FailureKind::Stalled { ticks }, fx);
            }
        } else {
            self.stall = 0;
        }
        self.moved_since_tick = false;
    }

    /// Whether admitted work waits beside idle capacity: a backlogged unit
    /// of an admitted role with room in its queue, or a queued unit whose
    /// seat (any Idle seat when pooled, seat `key % count` when keyed) is
    /// free while its role is under its running limit (walk admission S,
    /// the live sim cap). After a settle this holds only if the dispatcher
    /// withheld a grant. Work behind busy seats never counts.
    fn idle_capacity_waits(&self, guard: &GuardSnapshot) -> bool {
        ALL_ROLES.iter().any(|role| {
            let ri = role.index();
            if !guard.admits(*role) {
                return false;
            }
            let queued = self.queues[ri].len() as u32;
            if !self.backlog[ri].is_empty() && queued < self.layout.queue_capacity {
                return true;
            }
            let limit = match role {
                WorkerRole::Solver => self.layout.walk_admission,
                WorkerRole::SimDriver => guard.sim_intake_cap.max(1).min(self.layout.sim_slot_cap),
                _ => u32::MAX,
            };
            let seats = &self.seats[ri];
            let running = seats.iter().filter(|s| s.unit().is_some()).count() as u32;
            if running >= limit || seats.is_empty() {
                return false;
            }
            let free = |i: usize| seats[i].unit().is_none() && self.seat_live(*role, i);
            match role.hosting() {
                Hosting::Pooled => queued > 0 && (0..seats.len()).any(free),
                Hosting::Keyed => self.queues[ri].iter().any(|h| {
                    h.meta
                        .pin_key()
                        .is_some_and(|k| free((k % seats.len() as u32) as usize))
                }),
            }
        })
    }

    /// Fails the pump loudly, once: it takes nothing new after.
    pub(super) fn fail(&mut self, kind: FailureKind, fx: &mut Vec<Effect<P>>) {
        if self.failed {
            return;
        }
        self.failed = true;
        fx.push(Effect::LoudFailure(PumpFailure {
            host: self.layout.host.clone(),
            kind,
            counts: self.counts(),
        }));
    }
}
