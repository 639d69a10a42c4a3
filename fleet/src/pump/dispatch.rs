//! The dispatcher: grants leases in precedence order.
//!
//! Order (seed 000 §4; `DESIGN.md` §3 "Priority"): continuations of existing
//! Solver pins (a queued key whose pinned seat is free), then queued sims up
//! to the live sim intake cap, then new Solver keys up to the walk admission
//! S (continuations count toward S too), then Resolve, then Merge, then
//! Submitter, then the background roles. A running unit is never preempted
//! (only Idle and Pinned seats are granted) and a key is only ever seated on
//! seat `key % count` of its role, so one key is never on two seats. The
//! order of the `Grant` effects within a step is this precedence order (the
//! serial binding runs grants in that order).

use super::{Effect, HostPump, SeatId};
use crate::guard::GuardSnapshot;
use crate::role::WorkerRole;
use crate::slot::{SlotInput, SlotState};

/// Pooled roles after Merge, in grant order.
const TAIL_POOLED: [WorkerRole; 4] = [
    WorkerRole::Submitter,
    WorkerRole::PoolStateUpdater,
    WorkerRole::Registrar,
    WorkerRole::Verifier,
];

/// Which keyed units a pass grants.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyedPass {
    /// Only keys whose pinned seat is free (T6).
    Continuations,
    /// Keys whose seat is Idle (T1, T2) or pinned to a key with nothing
    /// queued (T9, T1, T2: re-keying releases the pin first).
    NewKeys,
}

impl<P> HostPump<P> {
    /// Grants every lease the guard and seats allow; returns whether any.
    pub(super) fn dispatch(&mut self, guard: &GuardSnapshot, fx: &mut Vec<Effect<P>>) -> bool {
        if self.failed || self.closed() {
            return false;
        }
        let s = self.layout.walk_admission;
        let mut any = self.grant_keyed(WorkerRole::Solver, KeyedPass::Continuations, s, guard, fx);
        let sim_cap = guard.sim_intake_cap.max(1).min(self.layout.sim_slot_cap);
        any |= self.grant_pooled(WorkerRole::SimDriver, sim_cap, guard, fx);
        let sims = WorkerRole::SimDriver.index();
        if sim_cap < self.layout.sim_slot_cap
            && !self.queues[sims].is_empty()
            && self.running(WorkerRole::SimDriver) >= sim_cap
            && self.seats[sims].contains(&SlotState::Idle)
        {
            // The floor, not a lack of seats, holds these queued sims back;
            // count each unit once.
            let mut upto = self.floored_upto;
            for held in &self.queues[sims] {
                if upto.is_none_or(|u| held.meta.id > u) {
                    self.suppressed += 1;
                    upto = Some(held.meta.id);
                }
            }
            self.floored_upto = upto;
        }
        any |= self.grant_keyed(WorkerRole::Solver, KeyedPass::NewKeys, s, guard, fx);
        any |= self.grant_pooled(WorkerRole::Resolve, u32::MAX, guard, fx);
        any |= self.grant_keyed(
            WorkerRole::Merge,
            KeyedPass::Continuations,
            u32::MAX,
            guard,
            fx,
        );
        any |= self.grant_keyed(WorkerRole::Merge, KeyedPass::NewKeys, u32::MAX, guard, fx);
        for role in TAIL_POOLED {
            any |= self.grant_pooled(role, u32::MAX, guard, fx);
        }
        any
    }

    fn running(&self, role: WorkerRole) -> u32 {
        self.seats[role.index()]
            .iter()
            .filter(|s| s.unit().is_some())
            .count() as u32
    }

    fn grant_pooled(
        &mut self,
        role: WorkerRole,
        limit: u32,
        guard: &GuardSnapshot,
        fx: &mut Vec<Effect<P>>,
    ) -> bool {
        if self.config.withhold_grants == Some(role) {
            return false;
        }
        let ri = role.index();
        let mut any = false;
        while !self.queues[ri].is_empty() && self.running(role) < limit {
            let Some(index) = (0..self.seats[ri].len())
                .find(|&i| self.seats[ri][i] == SlotState::Idle && self.seat_live(role, i))
            else {
                break;
            };
            let Ok(leased) = SlotState::Idle.apply(SlotInput::Lease { role }, guard) else {
                break;
            };
            let held = self.queues[ri].pop_front().expect("non-empty");
            self.seats[ri][index] = leased
                .apply(
                    SlotInput::Start {
                        unit: held.meta.id,
                        key: None,
                    },
                    guard,
                )
                .expect("a leased seat starts its unit (no posture guard on T2)");
            self.grant(
                SeatId {
                    role,
                    index: index as u32,
                },
                held,
                fx,
            );
            any = true;
        }
        any
    }

    fn grant_keyed(
        &mut self,
        role: WorkerRole,
        pass: KeyedPass,
        limit: u32,
        guard: &GuardSnapshot,
        fx: &mut Vec<Effect<P>>,
    ) -> bool {
        if self.config.withhold_grants == Some(role) {
            return false;
        }
        let ri = role.index();
        let count = self.seats[ri].len() as u32;
        let mut any = false;
        let mut i = 0;
        while i < self.queues[ri].len() && count > 0 && self.running(role) < limit {
            let meta = self.queues[ri][i].meta;
            let key = meta.pin_key().expect("keyed units are admitted with a key");
            let index = (key % count) as usize;
            if !self.seat_live(role, index) {
                i += 1;
                continue;
            }
            let state = self.seats[ri][index];
            let next = match (pass, state) {
                (KeyedPass::Continuations, SlotState::Pinned { key: pinned, .. })
                    if pinned == key =>
                {
                    state
                        .apply(SlotInput::Resume { unit: meta.id, key }, guard)
                        .ok()
                }
                (KeyedPass::NewKeys, SlotState::Idle) => {
                    self.lease_and_start(state, role, meta, guard)
                }
                (KeyedPass::NewKeys, SlotState::Pinned { key: pinned, .. })
                    if pinned != key
                        && !self.queues[ri]
                            .iter()
                            .any(|h| h.meta.pin_key() == Some(pinned)) =>
                {
                    let idle = state
                        .apply(SlotInput::ReleasePin, guard)
                        .expect("T9 from Pinned");
                    self.lease_and_start(idle, role, meta, guard)
                }
                _ => None,
            };
            match next {
                Some(running) => {
                    let held = self.queues[ri].remove(i).expect("index in range");
                    self.seats[ri][index] = running;
                    self.grant(
                        SeatId {
                            role,
                            index: index as u32,
                        },
                        held,
                        fx,
                    );
                    any = true;
                }
                None => i += 1,
            }
        }
        any
    }

    fn lease_and_start(
        &self,
        idle: SlotState,
        role: WorkerRole,
        meta: crate::unit::UnitMeta,
        guard: &GuardSnapshot,
    ) -> Option<SlotState> {
        let leased = idle.apply(SlotInput::Lease { role }, guard).ok()?;
        leased
            .apply(
                SlotInput::Start {
                    unit: meta.id,
                    key: meta.pin_key(),
                },
                guard,
            )
            .ok()
    }

    fn grant(&mut self, seat: SeatId, held: super::Held<P>, fx: &mut Vec<Effect<P>>) {
        self.moved_since_tick = true;
        fx.push(Effect::Grant {
            seat,
            meta: held.meta,
            payload: held.payload,
        });
    }
}
