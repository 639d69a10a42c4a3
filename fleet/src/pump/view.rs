//! What a pump shows without being stepped: its progress, counts, seats,
//! queues, backlog, bounds and epoch. Read-only: the shell reads these
//! under its lock (census, status, telemetry, the stall and drain checks),
//! and the model checks read them between steps.

use super::*;

impl<P> HostPump<P> {
    /// The intake progress state.
    pub fn progress(&self) -> Progress {
        self.progress
    }

    /// The unit counts (safety S: [`PumpCounts::conserved`]).
    pub fn counts(&self) -> PumpCounts {
        let in_flight = self
            .seats
            .iter()
            .flatten()
            .filter(|s| s.unit().is_some())
            .count() as u64;
        PumpCounts {
            submitted: self.submitted,
            in_flight,
            queued: self.queues.iter().map(|q| q.len() as u64).sum(),
            backlog: self.backlog.iter().map(|q| q.len() as u64).sum(),
            resolved: self.resolved,
        }
    }

    /// Intake suppressions so far, in units: units the posture held into the
    /// backlog (at admission or moved there when a cordon began) plus queued
    /// sims the cordon's sim intake floor, not a lack of seats, held back
    /// (each counted once). Monotonic; the posture's suppression counter is fed from
    /// its deltas (`DESIGN.md` §3 "Telemetry").
    pub fn suppressed(&self) -> u64 {
        self.suppressed
    }

    /// Slots the backlog holds allocated over every role: at least its
    /// length; an emptied role's backlog keeps at most
    /// [`BACKLOG_RETAINED`] (the memory a cordon's backlog grew is handed
    /// back once it drains).
    pub fn backlog_capacity(&self) -> usize {
        self.backlog.iter().map(|q| q.capacity()).sum()
    }

    /// The intake backlog gauge: units held per role, for every role.
    pub fn backlog_by_role(&self) -> Vec<(WorkerRole, u32)> {
        ALL_ROLES
            .iter()
            .map(|r| (*r, self.backlog[r.index()].len() as u32))
            .collect()
    }

    /// Whether the backstop is armed (iff the backlog is non-empty, unless
    /// the backstop is disabled).
    pub fn backstop_armed(&self) -> bool {
        self.armed
    }

    /// Whether the pump failed loudly (it then takes nothing new).
    pub fn has_failed(&self) -> bool {
        self.failed
    }

    /// Consecutive no-progress ticks so far.
    pub fn stall_ticks(&self) -> u32 {
        self.stall
    }

    /// Whether anything moved (a backlog move, grant, completion or seat
    /// loss) since the last backstop tick: the stall check's input, so a
    /// checker keys its states on it.
    pub fn moved_since_tick(&self) -> bool {
        self.moved_since_tick
    }

    /// The bounds in force (walk admission, sim slot cap).
    pub fn bounds(&self) -> PumpBounds {
        PumpBounds {
            walk_admission: self.layout.walk_admission,
            sim_slot_cap: self.layout.sim_slot_cap,
        }
    }

    /// A re-budget waiting for the next epoch boundary.
    pub fn pending_bounds(&self) -> Option<PumpBounds> {
        self.pending_bounds
    }

    /// Keyed seats a re-budget marked for release that were running at its
    /// boundary (released at the first boundary that finds them pinned).
    pub fn stale_pins(&self) -> Vec<SeatId> {
        ALL_ROLES
            .iter()
            .flat_map(|r| {
                self.stale_pins[r.index()]
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| **s)
                    .map(|(i, _)| SeatId {
                        role: *r,
                        index: i as u32,
                    })
            })
            .collect()
    }

    /// The last epoch boundary seen (0 before any).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The highest `PostureEdge` sequence number seen.
    pub fn last_edge_seq(&self) -> u64 {
        self.last_edge_seq
    }

    /// The layout.
    pub fn layout(&self) -> &HostLayout {
        &self.layout
    }

    /// The config.
    pub fn config(&self) -> &PumpConfig {
        &self.config
    }

    /// Every seat and its state, roles in `ALL_ROLES` order.
    pub fn seats(&self) -> Vec<(SeatId, SlotState)> {
        ALL_ROLES
            .iter()
            .flat_map(|r| {
                self.seats[r.index()].iter().enumerate().map(|(i, s)| {
                    (
                        SeatId {
                            role: *r,
                            index: i as u32,
                        },
                        *s,
                    )
                })
            })
            .collect()
    }

    /// Seats lost so far (`PumpInput::SeatLost`), roles in `ALL_ROLES`
    /// order. A lost seat shows as Idle in [`HostPump::seats`] and is never
    /// granted again.
    pub fn lost_seats(&self) -> Vec<SeatId> {
        ALL_ROLES
            .iter()
            .flat_map(|r| {
                self.lost[r.index()]
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| **l)
                    .map(|(i, _)| SeatId {
                        role: *r,
                        index: i as u32,
                    })
            })
            .collect()
    }

    /// Whether `seat` is live: in the layout and not lost.
    pub(crate) fn seat_live(&self, role: WorkerRole, index: usize) -> bool {
        self.lost[role.index()].get(index).is_some_and(|l| !l)
    }

    /// The seat a unit must run on is lost: `Some(lost seat)` when no live
    /// seat can run `meta` (its key's seat for a keyed role; every seat of a
    /// pooled role, then seat 0 is named).
    pub(super) fn stranded(&self, meta: &UnitMeta) -> Option<SeatId> {
        let count = self.lost[meta.role.index()].len();
        if count == 0 {
            return None;
        }
        let index = match (meta.role.hosting(), meta.pin_key()) {
            (Hosting::Keyed, Some(k)) => (k as usize) % count,
            _ if (0..count).any(|i| self.seat_live(meta.role, i)) => return None,
            _ => 0,
        };
        (!self.seat_live(meta.role, index)).then_some(SeatId {
            role: meta.role,
            index: index as u32,
        })
    }

    /// Units in flight: (seat, unit).
    pub fn in_flight(&self) -> Vec<(SeatId, UnitId)> {
        self.seats()
            .into_iter()
            .filter_map(|(id, s)| s.unit().map(|u| (id, u)))
            .collect()
    }

    /// Queued units, per role in `ALL_ROLES` order, FIFO within a role.
    pub fn queued(&self) -> Vec<UnitMeta> {
        self.queues
            .iter()
            .flat_map(|q| q.iter().map(|h| h.meta))
            .collect()
    }

    /// Backlogged units, per role in `ALL_ROLES` order, FIFO within a role.
    pub fn backlogged(&self) -> Vec<UnitMeta> {
        self.backlog
            .iter()
            .flat_map(|q| q.iter().map(|h| h.meta))
            .collect()
    }
}
