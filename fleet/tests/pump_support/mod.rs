//! Shared helpers for the pump tests: layouts, guards, and the exhaustive
//! explorer that checks safety S and liveness L over the pump's state space.
#![allow(dead_code)]

use fleet::guard::GuardSnapshot;
use fleet::pump::{Effect, HostLayout, HostPump, Progress, PumpConfig, PumpInput, SeatId};
use fleet::slot::SlotState;
use fleet::unit::{UnitId, UnitMeta};
use fleet::{CordonClass, Hosting, WorkerRole};
use std::collections::{HashSet, VecDeque};

pub const NOMINAL: GuardSnapshot = GuardSnapshot::nominal(2);
pub const CORDONED: GuardSnapshot = GuardSnapshot {
    cordoned: true,
    sim_intake_cap: 1,
    lane_dead: false,
};
pub const DEAD: GuardSnapshot = GuardSnapshot {
    cordoned: true,
    sim_intake_cap: 1,
    lane_dead: true,
};

/// The small host the exploration runs: 2 solver seats (walk admission 1),
/// 2 sim seats, 1 registrar seat, queues of 2.
pub fn small_layout() -> HostLayout {
    HostLayout {
        host: "explore".into(),
        seats: vec![
            (WorkerRole::Solver, 2),
            (WorkerRole::SimDriver, 2),
            (WorkerRole::Registrar, 1),
        ],
        queue_capacity: 2,
        walk_admission: 1,
        sim_slot_cap: 2,
    }
}

/// The unit kinds the environment submits: a registrar unit, a sim, and
/// solver keys 0, 1, 2 (2 shares seat 0 with key 0).
pub fn unit_kinds() -> Vec<(WorkerRole, Option<u32>)> {
    vec![
        (WorkerRole::Registrar, None),
        (WorkerRole::SimDriver, None),
        (WorkerRole::Solver, Some(0)),
        (WorkerRole::Solver, Some(1)),
        (WorkerRole::Solver, Some(2)),
    ]
}

/// Checks the per-step invariants; returns a description of the first violation.
pub fn check_step(
    pump: &HostPump<UnitId>,
    input_was_enqueue: bool,
    fx: &[Effect<UnitId>],
    guard: &GuardSnapshot,
) -> Result<(), String> {
    let counts = pump.counts();
    if !counts.conserved() {
        return Err(format!("safety S broken: {counts}"));
    }
    let layout = pump.layout();
    let answers = fx
        .iter()
        .filter(|e| matches!(e, Effect::Admitted { .. } | Effect::Refused { .. }))
        .count();
    if answers != usize::from(input_was_enqueue) {
        return Err(format!("{answers} admission answers for one input"));
    }
    let mut sim_granted = false;
    let mut walk_granted = false;
    for e in fx {
        match e {
            Effect::Grant {
                seat,
                meta,
                payload,
            } => {
                if *payload != meta.id || seat.role != meta.role {
                    return Err(format!("grant mismatch {seat:?} {meta:?} {payload}"));
                }
                if let Some(k) = meta.pin_key() {
                    if seat.index != k % layout.seat_count(meta.role) {
                        return Err(format!("key {k} granted on seat {}", seat.index));
                    }
                }
                sim_granted |= meta.role == WorkerRole::SimDriver;
                walk_granted |= meta.role == WorkerRole::Solver;
            }
            Effect::Terminal {
                meta,
                payload,
                reason,
            } => {
                if *payload != meta.id {
                    return Err("terminal payload mismatch".into());
                }
                if *reason == fleet::receipt::TerminalReason::LaneDeath && !guard.lane_dead {
                    return Err("a lane-death terminal without the lane-death latch".into());
                }
            }
            _ => {}
        }
    }
    let seats = pump.seats();
    let running = |r: WorkerRole| {
        seats
            .iter()
            .filter(|(id, s)| id.role == r && s.unit().is_some())
            .count() as u32
    };
    // A re-budget that lowers S at a boundary never preempts the walks
    // running then; no walk is granted until they fit under the new S.
    if walk_granted && running(WorkerRole::Solver) > layout.walk_admission {
        return Err("walk admission S exceeded".into());
    }
    let sim_cap = guard.sim_intake_cap.max(1).min(layout.sim_slot_cap);
    if sim_granted && running(WorkerRole::SimDriver) > sim_cap {
        return Err("sim granted above the intake cap".into());
    }
    let mut keys = HashSet::new();
    for (id, s) in &seats {
        let key = match s {
            SlotState::Running { key: Some(k), .. } | SlotState::Pinned { key: k, .. } => Some(*k),
            _ => None,
        };
        if let Some(k) = key {
            if !keys.insert((id.role, k)) {
                return Err(format!("key {k} on two {} seats", id.role));
            }
        }
        if s.role().is_some_and(|r| r != id.role) {
            return Err(format!("seat {id:?} holds another role: {s:?}"));
        }
    }
    let backed = counts.backlog > 0;
    let want_armed = backed
        && pump.config().backstop_enabled
        && !pump.has_failed()
        && pump.progress() != Progress::Closed;
    if pump.backstop_armed() != want_armed {
        return Err(format!(
            "backstop armed {} with backlog {}",
            pump.backstop_armed(),
            counts.backlog
        ));
    }
    Ok(())
}

/// An abstract state key: everything but unit ids (the pump never looks at
/// ids except to match completions, which the explorer derives from the pump).
pub fn state_key(pump: &HostPump<UnitId>, dead: bool) -> String {
    let seats: Vec<String> = pump
        .seats()
        .iter()
        .map(|(_, s)| match s {
            SlotState::Idle => "I".into(),
            SlotState::Leased(r) => format!("L{}", r.index()),
            SlotState::Running { role, key, .. } => format!("R{}{:?}", role.index(), key),
            SlotState::Pinned { role, key } => format!("P{}{}", role.index(), key),
            SlotState::Draining { role, .. } => format!("D{}", role.index()),
        })
        .collect();
    let units = |v: Vec<UnitMeta>| {
        v.iter()
            .map(|m| format!("{}{:?}", m.role.index(), m.key))
            .collect::<Vec<_>>()
    };
    format!(
        "{:?}|{}|{}|{}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{:?}|{:?}|{:?}",
        pump.progress(),
        pump.has_failed(),
        pump.backstop_armed(),
        pump.stall_ticks(),
        pump.moved_since_tick(),
        pump.lost_seats(),
        seats,
        units(pump.queued()),
        units(pump.backlogged()),
        pump.counts(),
        dead,
        pump.bounds(),
        pump.pending_bounds(),
        pump.stale_pins()
    )
}

/// What the exploration found.
#[derive(Debug, Default)]
pub struct Report {
    /// Distinct abstract states reached.
    pub states: usize,
    /// Transitions taken (input × guard pairs applied).
    pub transitions: usize,
    /// Backed states whose liveness was checked.
    pub backed_checked: usize,
    /// States in which a loud failure had fired.
    pub loud_states: usize,
    /// Faulted states reached.
    pub faulted_states: usize,
    /// Safety or step-invariant violations (first few).
    pub safety: Vec<String>,
    /// Liveness violations (first few), each with its state.
    pub liveness: Vec<String>,
    /// Total liveness violations.
    pub liveness_count: usize,
}

/// Explores every interleaving of the input alphabet (with every guard,
/// posture flips included; the lane-death latch sticky) from an empty pump,
/// up to `max_units` admitted units.
pub fn explore(layout: HostLayout, config: PumpConfig, max_units: u64) -> Report {
    explore_with(layout, config, max_units, false)
}

/// [`explore`], and with `seat_loss` also a `SeatLost` input for solver
/// seat 0 and registrar seat 0 (at most one loss per run, at any point:
/// running, pinned or idle).
pub fn explore_with(
    layout: HostLayout,
    config: PumpConfig,
    max_units: u64,
    seat_loss: bool,
) -> Report {
    explore_alphabet(layout, config, max_units, seat_loss, None)
}

/// [`explore_with`], and with `rebudget` also `Rebudget` to each of the
/// given bounds and `EpochBoundary`, at any point.
pub fn explore_alphabet(
    layout: HostLayout,
    config: PumpConfig,
    max_units: u64,
    seat_loss: bool,
    rebudget: Option<&[fleet::pump::PumpBounds]>,
) -> Report {
    let mut report = Report::default();
    let start: HostPump<UnitId> = HostPump::new(layout.clone(), config);
    let mut seen = HashSet::new();
    let mut frontier = VecDeque::new();
    seen.insert(state_key(&start, false));
    frontier.push_back((start, false, 0u64));
    while let Some((pump, dead, next_id)) = frontier.pop_front() {
        report.states += 1;
        if pump.has_failed() {
            report.loud_states += 1;
            continue;
        }
        if pump.progress() == Progress::Faulted {
            report.faulted_states += 1;
        }
        if pump.progress() == Progress::Backed {
            report.backed_checked += 1;
            if let Err(v) = check_liveness(&pump, dead) {
                report.liveness_count += 1;
                if report.liveness.len() < 3 {
                    report
                        .liveness
                        .push(format!("{v} in state {}", state_key(&pump, dead)));
                }
            }
        }
        let mut inputs: Vec<Box<dyn Fn(u64) -> PumpInput<UnitId>>> = Vec::new();
        if pump.counts().submitted < max_units {
            for (role, key) in unit_kinds() {
                inputs.push(Box::new(move |id| PumpInput::Enqueue {
                    meta: UnitMeta { id, role, key },
                    payload: id,
                }));
            }
        }
        for (seat, unit) in pump.in_flight() {
            inputs.push(Box::new(move |_| PumpInput::SeatDone { seat, unit }));
        }
        if seat_loss && pump.lost_seats().is_empty() {
            // At most one seat is lost per run, running or idle (bounds the space).
            for seat in [
                SeatId {
                    role: WorkerRole::Solver,
                    index: 0,
                },
                SeatId {
                    role: WorkerRole::Registrar,
                    index: 0,
                },
            ] {
                inputs.push(Box::new(move |_| PumpInput::SeatLost { seat }));
            }
        }
        for bounds in rebudget.unwrap_or_default().iter().copied() {
            inputs.push(Box::new(move |_| PumpInput::Rebudget { bounds }));
        }
        if rebudget.is_some() {
            inputs.push(Box::new(|_| PumpInput::EpochBoundary { epoch: 1 }));
        }
        inputs.push(Box::new(|_| PumpInput::BackstopTick));
        inputs.push(Box::new(|_| PumpInput::PostureEdge { seq: 1 }));
        if pump.progress() != Progress::Closed {
            inputs.push(Box::new(|_| PumpInput::Close));
        }
        let guards: &[GuardSnapshot] = if dead {
            &[DEAD]
        } else {
            &[NOMINAL, CORDONED, DEAD]
        };
        for make in &inputs {
            for guard in guards {
                let mut next = pump.clone();
                let input = make(next_id);
                let enq = matches!(input, PumpInput::Enqueue { .. });
                let fx = next.step(input, *guard);
                report.transitions += 1;
                if let Err(v) = check_step(&next, enq, &fx, guard) {
                    if report.safety.len() < 3 {
                        report
                            .safety
                            .push(format!("{v} after {}", state_key(&pump, dead)));
                    }
                }
                let ndead = dead || guard.lane_dead;
                if seen.insert(state_key(&next, ndead)) {
                    frontier.push_back((next, ndead, next_id + 1));
                }
            }
        }
    }
    report
}

/// Liveness L from a Backed state: for every guard change that releases held
/// work (the posture lifts, or the lane dies), with no client message and no
/// posture-edge hint:
/// 1. the backstop is armed, and the first tick (at most one interval later)
///    leaves the state drained, faulted, loudly stopped, or with every
///    backlogged unit blocked only by a full queue;
/// 2. running in-flight units to completion and ticking while armed ends
///    drained, faulted or loudly stopped.
pub fn check_liveness(pump: &HostPump<UnitId>, dead: bool) -> Result<(), String> {
    let changes: &[GuardSnapshot] = if dead { &[DEAD] } else { &[NOMINAL, DEAD] };
    for g in changes {
        let mut p = pump.clone();
        if !p.backstop_armed() {
            return Err(format!("Backed with no backstop armed (in flight {}): nothing wakes the host when the guard changes to {g:?}", p.counts().in_flight));
        }
        p.step(PumpInput::BackstopTick, *g);
        if p.progress() == Progress::Backed && !p.has_failed() {
            let cap = p.layout().queue_capacity as usize;
            for m in p.backlogged() {
                let queued = p.queued().iter().filter(|q| q.role == m.role).count();
                if g.admits(m.role) && queued < cap {
                    return Err(format!(
                        "a tick under {g:?} left an admitted {} unit held with queue room",
                        m.role
                    ));
                }
            }
        }
        for _ in 0..64 {
            if p.progress() != Progress::Backed || p.has_failed() {
                break;
            }
            if let Some((seat, unit)) = p.in_flight().first().copied() {
                p.step(PumpInput::SeatDone { seat, unit }, *g);
            } else if p.backstop_armed() {
                p.step(PumpInput::BackstopTick, *g);
            } else {
                return Err(format!(
                    "Backed with nothing in flight and no backstop under {g:?}"
                ));
            }
        }
        if p.progress() == Progress::Backed && !p.has_failed() {
            return Err(format!("still Backed after 64 quiet steps under {g:?}"));
        }
    }
    Ok(())
}

/// Grant precedence class of a grant (lower first): continuation, sim, new
/// solver key, resolve, merge, submitter, background.
pub fn grant_class(meta: &UnitMeta, continuation: bool) -> u8 {
    match meta.role {
        WorkerRole::Solver if continuation => 0,
        WorkerRole::SimDriver => 1,
        WorkerRole::Solver => 2,
        WorkerRole::Resolve => 3,
        WorkerRole::Merge => 4,
        WorkerRole::Submitter => 5,
        _ => 6,
    }
}

/// Whether a role's intake can be held by the posture.
pub fn deferrable(role: WorkerRole) -> bool {
    role.cordon_class() == CordonClass::Deferrable
}

/// Whether a role is keyed.
pub fn keyed(role: WorkerRole) -> bool {
    role.hosting() == Hosting::Keyed
}

/// Seat id shorthand.
pub fn seat(role: WorkerRole, index: u32) -> SeatId {
    SeatId { role, index }
}
