//! The design's conformance harness (seed 000 §11), on the pure pump and
//! ledger: the budget-sum invariant across a scripted quota resize (shares
//! re-declared, the sum re-checked, pins re-keyed only at an epoch boundary
//! through T9 then T1), pin stability across N cycles (same key, same seat,
//! resumed warm), and a host that dies mid-drain reaching the loud stop.

use std::sync::{Arc, Mutex};

use fleet::guard::GuardSnapshot;
use fleet::ledger::{BinWitness, ExactnessFuse, FuseTrip, SharedLedger};
use fleet::plan::{Binding, Plan, Profile};
use fleet::pump::{Effect, HostLayout, HostPump, PumpBounds, PumpConfig, PumpInput, SeatId};
use fleet::slot::SlotState;
use fleet::unit::{UnitId, UnitMeta};
use fleet::{PathOutcome, WorkerRole};

const NOMINAL: GuardSnapshot = GuardSnapshot::nominal(4);

/// The pump a booted host of `plan` runs (the bindings' layout rule).
fn pump_for(plan: &Plan) -> HostPump<UnitId> {
    let layout = plan.seat_layout();
    let mut seats: Vec<(WorkerRole, u32)> = Vec::new();
    for s in &layout.seats {
        match seats.iter_mut().find(|(r, _)| *r == s.role) {
            Some((_, n)) => *n += 1,
            None => seats.push((s.role, 1)),
        }
    }
    HostPump::new(
        HostLayout {
            host: "conformance".into(),
            seats,
            queue_capacity: 16,
            walk_admission: layout.walk_admission,
            sim_slot_cap: layout.sim_slot_cap,
        },
        PumpConfig::default(),
    )
}

/// Drives one pump, checking on every step that no grant pushes the
/// running walks above the walk admission in force.
struct Driver {
    pump: HostPump<UnitId>,
    next: UnitId,
    running: Vec<(SeatId, UnitId)>,
    effects: Vec<Effect<UnitId>>,
}

impl Driver {
    fn step(&mut self, input: PumpInput<UnitId>) {
        let fx = self.pump.step(input, NOMINAL);
        for e in &fx {
            if let Effect::Grant { seat, meta, .. } = e {
                self.running.push((*seat, meta.id));
            }
        }
        let walks = self
            .pump
            .seats()
            .iter()
            .filter(|(id, s)| id.role == WorkerRole::Solver && s.unit().is_some())
            .count() as u32;
        assert!(
            walks <= self.pump.bounds().walk_admission,
            "{walks} walks running above the admission in force {}",
            self.pump.bounds()
        );
        assert!(self.pump.counts().conserved(), "{}", self.pump.counts());
        self.effects.extend(fx);
    }

    fn enqueue(&mut self, role: WorkerRole, key: Option<u32>) -> UnitId {
        self.next += 1;
        let id = self.next;
        self.step(PumpInput::Enqueue {
            meta: UnitMeta { id, role, key },
            payload: id,
        });
        id
    }

    /// Finishes every running unit (in grant order), and what they unblock.
    fn finish_all(&mut self) {
        while let Some((seat, unit)) = (!self.running.is_empty()).then(|| self.running.remove(0)) {
            self.step(PumpInput::SeatDone { seat, unit });
        }
    }

    /// One cycle: the six walks (keys 0..5) and the merge, run to the end.
    fn cycle(&mut self) {
        for k in 0..6 {
            self.enqueue(WorkerRole::Solver, Some(k));
        }
        self.enqueue(WorkerRole::Merge, Some(0));
        self.finish_all();
        assert!(self.pump.queued().is_empty(), "{:?}", self.pump.queued());
    }

    fn pins(&self) -> Vec<(SeatId, SlotState)> {
        self.pump
            .seats()
            .into_iter()
            .filter(|(id, _)| id.role == WorkerRole::Solver)
            .collect()
    }
}

fn driver(plan: &Plan) -> Driver {
    Driver {
        pump: pump_for(plan),
        next: 0,
        running: Vec::new(),
        effects: Vec::new(),
    }
}

#[test]
fn the_budget_sum_holds_across_a_scripted_quota_resize_and_pins_rekey_only_at_a_boundary() {
    let boot = Plan::resolve(8.0, Profile::Auto, &Default::default()).expect("boot plan");
    assert_eq!(boot.binding, Binding::Pinned);
    let mut d = driver(&boot);
    d.cycle();
    let mut plan = boot.clone();
    // Down to the smallest pinned quota, fractional, up past the seats,
    // below the pinned tier (kept pinned: oversubscribed), and below the
    // host floor (refused: the bounds in force stay).
    for (epoch, quota) in [6.0, 6.5, 7.0, 16.0, 4.0, 1.5, 8.0].into_iter().enumerate() {
        let epoch = epoch as u64 + 1;
        let replanned = plan.replan(quota);
        let Ok(next) = replanned else {
            assert!(
                quota < 2.0,
                "only a quota below the host floor is refused: {quota}"
            );
            let before = d.pump.bounds();
            d.step(PumpInput::EpochBoundary { epoch });
            d.cycle();
            assert_eq!(d.pump.bounds(), before, "a refused re-plan changes nothing");
            continue;
        };
        // Shares re-declared and the sum re-checked against ⌊Q⌋.
        let b = &next.budget;
        assert_eq!(next.binding, Binding::Pinned, "the running binding is kept");
        assert!(
            b.integer_sum() <= quota.floor() as u32 || b.oversubscribed,
            "quota {quota}: shares sum to {} above ⌊Q⌋ without being marked",
            b.integer_sum()
        );
        assert_eq!(next.oversubscribed, b.oversubscribed);
        assert_eq!(b.oversubscribed, quota < 6.0, "quota {quota}");
        let bounds = PumpBounds::for_plan(&next);
        let before = d.pump.bounds();
        // Mid-cycle: the walks of this cycle are running when the change
        // arrives; nothing changes and no pin is released until the boundary.
        for k in 0..6 {
            d.enqueue(WorkerRole::Solver, Some(k));
        }
        let pins_before = d.pins();
        d.step(PumpInput::Rebudget { bounds });
        assert_eq!(d.pump.bounds(), before, "quota {quota}: not mid-cycle");
        assert_eq!(
            d.pins(),
            pins_before,
            "quota {quota}: no pin moves mid-cycle"
        );
        d.finish_all();
        assert!(d.pins().iter().all(|(id, s)| *s
            == SlotState::Pinned {
                role: WorkerRole::Solver,
                key: id.index
            }));
        // The boundary: the new bounds, every pin released (T9)...
        d.effects.clear();
        d.step(PumpInput::EpochBoundary { epoch });
        assert_eq!(d.pump.bounds(), bounds, "quota {quota}");
        let released = d.effects.iter().find_map(|e| match e {
            Effect::Rebudgeted {
                epoch: at,
                from,
                to,
                released,
            } => Some((*at, *from, *to, released.len())),
            _ => None,
        });
        assert_eq!(
            released,
            Some((epoch, before, bounds, 7)),
            "six solver pins and the merge pin"
        );
        assert!(d.pins().iter().all(|(_, s)| *s == SlotState::Idle));
        // ...then leased afresh (T1) under the new admission.
        d.cycle();
        assert!(d.pins().iter().all(|(id, s)| *s
            == SlotState::Pinned {
                role: WorkerRole::Solver,
                key: id.index
            }));
        plan = next;
    }
}

#[test]
fn pins_are_stable_across_cycles_same_key_same_seat_resumed_warm() {
    let plan = Plan::resolve(8.0, Profile::Auto, &Default::default()).expect("plan");
    let mut d = driver(&plan);
    d.cycle();
    let warm = d.pins();
    for epoch in 1..=40u64 {
        // A boundary with no re-budget releases nothing.
        d.effects.clear();
        d.step(PumpInput::EpochBoundary { epoch });
        assert!(d.effects.is_empty(), "{:?}", d.effects);
        // Before the cycle every key's seat holds its pin (T6 resumes it).
        assert_eq!(d.pins(), warm, "epoch {epoch}: warm before the cycle");
        d.effects.clear();
        let ids: Vec<UnitId> = (0..6u32)
            .map(|k| d.enqueue(WorkerRole::Solver, Some(k)))
            .collect();
        d.enqueue(WorkerRole::Merge, Some(0));
        d.finish_all();
        for (k, id) in ids.iter().enumerate() {
            let granted: Vec<SeatId> = d
                .effects
                .iter()
                .filter_map(|e| match e {
                    Effect::Grant { seat, meta, .. } if meta.id == *id => Some(*seat),
                    _ => None,
                })
                .collect();
            let own = SeatId {
                role: WorkerRole::Solver,
                index: k as u32,
            };
            assert_eq!(granted, vec![own], "epoch {epoch}: key {k} on its own seat");
        }
        assert_eq!(d.pins(), warm, "epoch {epoch}: the same pins, warm");
    }
}

#[test]
fn a_host_that_dies_mid_drain_reaches_the_loud_stop() {
    let trips = Arc::new(Mutex::new(Vec::<FuseTrip>::new()));
    let sink = trips.clone();
    let ledger = SharedLedger::new(ExactnessFuse::with_hook(move |t| {
        sink.lock().unwrap().push(t.clone())
    }));
    let (tx, merge) = ledger.open_cycle(7, &[0, 1, 2]).expect("open");
    let mut walk = BinWitness::new(tx, [0, 1, 2]);
    walk.deliver(0, PathOutcome::Suppressed)
        .expect("merge open");
    // The host running the merge drains what has arrived, then dies with
    // the merge in its hands (its executor is dropped mid-drain).
    let host = std::thread::spawn(move || {
        let mut pool = futures::executor::LocalPool::new();
        let mut merge = Box::pin(merge.run());
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(merge.as_mut().poll(&mut cx).is_pending(), "still draining");
        pool.run_until_stalled();
        drop(merge);
    });
    host.join().expect("the host thread ends");
    let seen = trips.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![FuseTrip::Stranded {
            cycle: 7,
            received: 1,
            submitted: 3
        }],
        "the stranded pipe is a loud stop"
    );
    // The lane's next send lands nowhere: it is told, never silently lost.
    assert!(walk.deliver(1, PathOutcome::Suppressed).is_err());
    drop(walk);
    // A merge dropped before it ever ran is the submitter's refusal to
    // handle, not a stranded drain.
    let (_tx, unrun) = ledger.open_cycle(8, &[0]).expect("open");
    drop(unrun);
    assert_eq!(trips.lock().unwrap().len(), 1);
}

use std::future::Future;
