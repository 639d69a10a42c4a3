//! The seat layout: the single source of the seats a binding creates, and
//! the census projection derived from it.
//!
//! Source: `DESIGN.md` §3 "Census and status", §4 (thread names); seed 000 §13.

use super::{Binding, Plan};
use crate::budget::BudgetShape;
use crate::census::{CensusBinding, CensusRow};
use crate::role::WorkerRole;
use serde::{Deserialize, Serialize};

/// The first cycle thread of the serial binding (the only one below 3 cores).
pub const SERIAL_THREAD_NAME: &str = "work-fleet-serial-0";

/// Name of the serial binding's `t`-th cycle thread (`work-fleet-serial-{t}`).
pub fn serial_thread_name(t: u32) -> String {
    format!("work-fleet-serial-{t}")
}

/// Thread name of the ambient I/O runtime's workers.
pub const AMBIENT_THREAD_NAME: &str = "work-fleet-io";

/// One logical seat.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SeatSpec {
    /// The role the seat hosts.
    pub role: WorkerRole,
    /// The seat's index within its role (solver seat `k` hosts bin `k`).
    pub index: u32,
    /// The OS thread that runs the seat: `work-fleet-{label}-{index}` under
    /// the pinned binding, the cycle thread `work-fleet-serial-{t}` it rides
    /// under the serial binding ([`SeatLayout::cycle_thread_of`]).
    pub thread_name: String,
}

/// Every seat a binding must create, plus the admission numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatLayout {
    /// The binding the layout is for.
    pub binding: Binding,
    /// Seats in creation order: solver 0..6, sim 0..cap, resolve, merge,
    /// pool-state updater, registrar, verifier, submitter.
    pub seats: Vec<SeatSpec>,
    /// Bin walks admitted at once. Pinned: `S` (the solver share, cores).
    /// Serial: all solver pins — every bin may be open on its cycle thread,
    /// interleaving at its sim waits; the threads themselves bound CPU to C
    /// cores, and admitting fewer would serialise the sim I/O waits.
    pub walk_admission: u32,
    /// Sim seats (and sims in flight at nominal posture).
    pub sim_slot_cap: u32,
    /// Ambient I/O runtime workers.
    pub ambient_workers: u32,
    /// Serial binding: the cycle threads the seats ride (the budget's `C`,
    /// `solver_cpus` in the serial shape, plus `reserve_cpus` where the plan
    /// lends the reserve, [`Plan::reserve_lent`]); 0 under the pinned
    /// binding.
    #[serde(default)]
    pub cycle_threads: u32,
}

impl SeatLayout {
    /// Seats of one role, in index order.
    pub fn seats_of(&self, role: WorkerRole) -> impl Iterator<Item = &SeatSpec> {
        self.seats.iter().filter(move |s| s.role == role)
    }

    /// The cycle thread (`0..cycle_threads`) a seat rides under the serial
    /// binding: seats are dealt round-robin in layout order (solver 0..6,
    /// sims, resolve, merge, background), so the bins spread over every
    /// thread. `None` under the pinned binding or for a seat the layout
    /// does not have.
    pub fn cycle_thread_of(&self, role: WorkerRole, index: u32) -> Option<u32> {
        if self.cycle_threads == 0 {
            return None;
        }
        let k = self
            .seats
            .iter()
            .position(|s| s.role == role && s.index == index)?;
        Some(deal(k, self.cycle_threads))
    }
}

/// Seat `k` of the layout rides cycle thread `k mod threads`.
fn deal(k: usize, threads: u32) -> u32 {
    (k % threads.max(1) as usize) as u32
}

fn seat_rule(role: WorkerRole) -> &'static str {
    match role {
        WorkerRole::Solver => "one pin per bin (6); S walks at once",
        WorkerRole::SimDriver => "sim slot cap (4); I/O-bound, duty-counted",
        WorkerRole::Resolve => "fixed R = 1",
        WorkerRole::Merge => "exactly one merge pin",
        WorkerRole::PoolStateUpdater | WorkerRole::Registrar | WorkerRole::Verifier => {
            "one background seat; deferrable under cordon"
        }
        WorkerRole::Submitter => "one seat; never held",
    }
}

impl Plan {
    /// The seats a binding must create (the only place seats are decided).
    pub fn seat_layout(&self) -> SeatLayout {
        let b = &self.budget;
        let mut counts: Vec<(WorkerRole, u32)> = vec![
            (WorkerRole::Solver, b.solver_pins),
            (WorkerRole::SimDriver, b.sim_slot_cap),
        ];
        for role in [
            WorkerRole::Resolve,
            WorkerRole::Merge,
            WorkerRole::PoolStateUpdater,
            WorkerRole::Registrar,
            WorkerRole::Verifier,
            WorkerRole::Submitter,
        ] {
            counts.push((role, 1));
        }
        let cycle_threads = match self.binding {
            Binding::Pinned => 0,
            Binding::Serial if self.reserve_lent => b.solver_cpus.max(1) + b.reserve_cpus,
            Binding::Serial => b.solver_cpus.max(1),
        };
        let seats = counts
            .into_iter()
            .flat_map(|(role, n)| (0..n).map(move |index| (role, index)))
            .enumerate()
            .map(|(k, (role, index))| SeatSpec {
                role,
                index,
                thread_name: match self.binding {
                    Binding::Pinned => format!("work-fleet-{}-{index}", role.thread_label()),
                    Binding::Serial => serial_thread_name(deal(k, cycle_threads)),
                },
            })
            .collect();
        // Walks hold their admission while they wait on their sims (a walk
        // spends a fraction of its span computing). Within budget the pinned
        // binding admits as many walks as the solver share has cores; an
        // oversubscribed plan (a forced pinned profile on a small host) has
        // already left the budget's bound, and admitting only S walks there
        // idles the cores while the admitted walks wait on I/O (cycles then
        // queue behind the walk slots): it admits every bin, and the kernel
        // shares the CPUs among the walks that are computing.
        let walk_admission = match (self.binding, b.shape) {
            (Binding::Pinned, BudgetShape::Pinned) if !self.oversubscribed => b.solver_cpus,
            _ => b.solver_pins,
        };
        SeatLayout {
            binding: self.binding,
            seats,
            walk_admission,
            sim_slot_cap: b.sim_slot_cap,
            ambient_workers: b.ambient_workers,
            cycle_threads,
        }
    }

    /// The census rows the plan projects before boot: one row per seat
    /// (`pinned` under the pinned binding, `logical` under serial), one row
    /// per cycle thread (serial only), the ambient I/O runtime (`shared`)
    /// and the reserve (`shared`).
    pub fn census_projection(&self) -> Vec<CensusRow> {
        let layout = self.seat_layout();
        let over = self.oversubscribed;
        let seat_binding = match layout.binding {
            Binding::Pinned => CensusBinding::Pinned,
            Binding::Serial => CensusBinding::Logical,
        };
        let mut rows = vec![CensusRow {
            name: "reserve".into(),
            role: None,
            count: self.budget.reserve_cpus,
            sizing_rule: "fixed H: host threads, pump, telemetry".into(),
            thread_name: "(host threads)".into(),
            binding: CensusBinding::Shared,
            oversubscribed: over,
            pinned_cpu: None,
            lost: false,
        }];
        let ambient_rule = self
            .budget
            .rows()
            .into_iter()
            .find(|r| r.consumer == "ambient_io")
            .map_or_else(String::new, |r| r.sizing_rule);
        rows.push(CensusRow {
            name: "ambient_io".into(),
            role: None,
            count: layout.ambient_workers,
            sizing_rule: ambient_rule,
            thread_name: AMBIENT_THREAD_NAME.into(),
            binding: CensusBinding::Shared,
            oversubscribed: over,
            pinned_cpu: None,
            lost: false,
        });
        let own = self.budget.solver_cpus.max(1);
        for t in 0..layout.cycle_threads {
            rows.push(CensusRow {
                name: format!("serial-{t}"),
                role: None,
                count: 1,
                sizing_rule: if !self.reserve_lent {
                    "C = ⌊Q⌋ − H − A cycle threads (≤ 6); the seats are dealt over them round-robin (decision 0003)".into()
                } else if t < own {
                    "C = ⌊Q⌋ − H − A cycle threads (≤ 6), idle class while the reserve is lent (decisions 0003, 0009)".into()
                } else {
                    "a reserved core lent at the idle class: the host's own threads preempt it at once (decision 0009)".into()
                },
                thread_name: serial_thread_name(t),
                binding: CensusBinding::Pinned,
                oversubscribed: over,
                pinned_cpu: None,
                lost: false,
            });
        }
        rows.extend(layout.seats.iter().map(|s| CensusRow {
            name: format!("{}-{}", s.role.thread_label(), s.index),
            role: Some(s.role),
            count: 1,
            sizing_rule: match layout.binding {
                Binding::Pinned => seat_rule(s.role).to_string(),
                Binding::Serial => format!("logical lane on {}", s.thread_name),
            },
            thread_name: s.thread_name.clone(),
            binding: seat_binding,
            oversubscribed: over,
            pinned_cpu: None,
            lost: false,
        }));
        rows
    }
}
