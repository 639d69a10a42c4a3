//! A small synthetic workload shared by the binding tests: cycles of solver
//! bins whose walks wait on sims, a resolve unit, the merge, and background
//! units. Every value depends only on (cycle, path) or (cycle, unit), never
//! on timing or binding, so two bindings must agree exactly.
#![allow(dead_code, clippy::manual_is_multiple_of)]

use fleet::ledger::{BinWitness, CycleRecord, ExactnessFuse, FuseTrip, PathId, SharedLedger};
use fleet::plan::{Plan, Profile};
use fleet::receipt::{Receipt, TerminalReason, UnitValue};
use fleet::{FailReason, PathOutcome, WorkerRole};
use fleet_bindings::{unit_body, FleetHandle, SeatCtx};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Bins per cycle (one solver pin each).
pub const BINS: u32 = 6;

/// A plan for `quota` cores under `profile`.
pub fn plan(quota: f64, profile: Profile) -> Plan {
    Plan::resolve(quota, profile, &Default::default()).expect("a plan")
}

/// A fuse that records trips instead of aborting.
pub fn recording_fuse() -> (ExactnessFuse, Arc<Mutex<Vec<FuseTrip>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    (
        ExactnessFuse::with_hook(move |t| sink.lock().unwrap().push(t.clone())),
        seen,
    )
}

/// A cheap deterministic mix (splitmix64).
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Paths in cycle `c`: 8..=20.
pub fn path_count(c: u64) -> u32 {
    8 + (mix(c) % 13) as u32
}

/// Whether path `p` of cycle `c` waits on a sim.
pub fn needs_sim(c: u64, p: PathId) -> bool {
    mix(c * 1_000 + p as u64) % 3 == 0
}

/// The sim's answer: reverted or not.
pub fn sim_reverts(c: u64, p: PathId) -> bool {
    mix(c * 7_919 + p as u64) % 4 == 0
}

/// The solve of a path, given its sim's answer.
pub fn solve(c: u64, p: PathId, reverted: bool) -> PathOutcome {
    if reverted {
        return PathOutcome::Failed {
            reason: FailReason::SimReverted,
        };
    }
    let h = mix(c * 104_729 + p as u64);
    let mut acc = h as u128;
    for i in 0..200u128 {
        acc = acc.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i) % 1_000_000_007;
    }
    if h % 2 == 0 {
        PathOutcome::Solved {
            amount_in: acc,
            profit: (h % 10_000) as u128,
        }
    } else {
        PathOutcome::Suppressed
    }
}

/// The bin of a path.
pub fn bin_of(p: PathId) -> u32 {
    p % BINS
}

/// What a bin's walk does besides the normal walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Nothing: a normal walk.
    None,
    /// Panic after delivering `after` paths.
    PanicAfter(usize),
    /// Deliver the first path twice.
    DoubleEmit,
}

/// Awaits a sim receipt: `Ok(reverted)` or the terminal reason.
async fn sim(ctx: &SeatCtx, c: u64, p: PathId) -> Result<bool, TerminalReason> {
    let body = unit_body(move |_ctx| async move {
        tokio::time::sleep(Duration::from_micros(150)).await;
        Box::new(sim_reverts(c, p)) as UnitValue
    });
    let receipt = match ctx.fleet.submit(WorkerRole::SimDriver, None, body) {
        Ok(r) => r,
        Err(_) => return Err(TerminalReason::HostClosed),
    };
    receipt
        .await
        .map(|v| *v.downcast::<bool>().expect("a bool"))
}

/// The walk of one bin.
async fn walk(
    ctx: SeatCtx,
    c: u64,
    paths: Vec<PathId>,
    mut w: BinWitness,
    fault: Fault,
) -> UnitValue {
    for (i, &p) in paths.iter().enumerate() {
        if fault == Fault::PanicAfter(i) {
            panic!("synthetic walk death in cycle {c} at path {p}");
        }
        let outcome = if needs_sim(c, p) {
            match sim(&ctx, c, p).await {
                Ok(rev) => solve(c, p, rev),
                Err(_) => PathOutcome::Failed {
                    reason: FailReason::SimRefused,
                },
            }
        } else {
            solve(c, p, false)
        };
        // A closed pipe means the merge already tripped the fuse (a test
        // hook let the process live): nothing more to deliver to.
        let _ = w.deliver(p, outcome);
        if fault == Fault::DoubleEmit && i == 0 {
            let _ = w.deliver(p, outcome);
        }
    }
    Box::new(paths.len() as u32)
}

/// One cycle's results: the merge's record (or its trip), the solver
/// receipts' results, the resolve and background values.
#[derive(Debug)]
pub struct CycleRun {
    pub merged: Result<CycleRecord, FuseTrip>,
    pub bins: BTreeMap<u32, Result<u32, TerminalReason>>,
    pub side: BTreeMap<String, Result<u64, String>>,
}

fn value_u64(r: Result<UnitValue, TerminalReason>) -> Result<u64, String> {
    r.map(|v| *v.downcast::<u64>().expect("a u64"))
        .map_err(|e| e.to_string())
}

/// Options for one cycle.
#[derive(Debug, Clone, Copy)]
pub struct CycleOpts {
    /// A fault in one bin.
    pub fault: Option<(u32, Fault)>,
    /// Submit background units.
    pub background: bool,
    /// Leave this path out of every bin (a shortfall).
    pub orphan: Option<PathId>,
}

impl Default for CycleOpts {
    fn default() -> Self {
        CycleOpts {
            fault: None,
            background: true,
            orphan: None,
        }
    }
}

/// Runs cycle `c` to its merge and waits for every receipt.
pub fn run_cycle(fleet: &FleetHandle, ledger: &SharedLedger, c: u64, opts: CycleOpts) -> CycleRun {
    let paths: Vec<PathId> = (0..path_count(c)).collect();
    let (tx, merge) = ledger.open_cycle(c, &paths).expect("cycle opens");
    let merge_receipt = fleet
        .submit(
            WorkerRole::Merge,
            Some(0),
            unit_body(move |_ctx| async move { Box::new(merge.run().await) as UnitValue }),
        )
        .expect("merge admitted");
    let resolve = fleet
        .submit(
            WorkerRole::Resolve,
            None,
            unit_body(move |_ctx| async move { Box::new(mix(c ^ 0xABCD)) as UnitValue }),
        )
        .expect("resolve admitted");
    let mut side: Vec<(String, Receipt)> = vec![("resolve".into(), resolve)];
    let mut bins = Vec::new();
    for b in 0..BINS {
        let mine: Vec<PathId> = paths
            .iter()
            .copied()
            .filter(|p| bin_of(*p) == b && Some(*p) != opts.orphan)
            .collect();
        let w = BinWitness::new(tx.clone(), mine.iter().copied());
        let fault = match opts.fault {
            Some((fb, f)) if fb == b => f,
            _ => Fault::None,
        };
        let body = unit_body(move |ctx| walk(ctx, c, mine, w, fault));
        bins.push((
            b,
            fleet
                .submit(WorkerRole::Solver, Some(b), body)
                .expect("bin admitted"),
        ));
    }
    drop(tx);
    if opts.background {
        for (i, role) in [
            WorkerRole::PoolStateUpdater,
            WorkerRole::Registrar,
            WorkerRole::Verifier,
            WorkerRole::Submitter,
        ]
        .into_iter()
        .enumerate()
        {
            let body = unit_body(move |_ctx| async move {
                tokio::time::sleep(Duration::from_micros(50)).await;
                Box::new(mix(c * 31 + i as u64)) as UnitValue
            });
            match fleet.submit(role, None, body) {
                Ok(r) => side.push((role.name().to_string(), r)),
                Err(e) => side.push((role.name().to_string(), failed_receipt(e.to_string()))),
            }
        }
    }
    let bins = bins
        .into_iter()
        .map(|(b, r)| (b, wait(r).map(|v| *v.downcast::<u32>().expect("a u32"))))
        .collect();
    let side = side
        .into_iter()
        .map(|(k, r)| (k, value_u64(wait(r))))
        .collect();
    let merged = *wait(merge_receipt)
        .expect("merge unit ran")
        .downcast::<Result<CycleRecord, FuseTrip>>()
        .expect("a merge result");
    CycleRun { merged, bins, side }
}

/// A receipt resolved at once with a refusal's text (keeps `side` uniform).
fn failed_receipt(_why: String) -> Receipt {
    let (tx, rx) = fleet::receipt::receipt_pair();
    tx.terminal(TerminalReason::HostClosed);
    rx
}

/// Waits for a receipt, failing the test after 20 s instead of hanging.
pub fn wait(r: Receipt) -> Result<UnitValue, TerminalReason> {
    r.wait_timeout(Duration::from_secs(20))
        .expect("receipt resolved within 20 s (no hang)")
}

/// Fleet threads as the kernel names them (`comm`, at most 15 bytes), sorted.
pub fn fleet_threads() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim_end().to_string())
        .filter(|n| n.starts_with("work-fleet"))
        .collect();
    names.sort();
    names
}

/// Every thread of the process.
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

/// A thread name as the kernel keeps it: the first 15 bytes.
pub fn comm(name: &str) -> String {
    name.as_bytes()[..name.len().min(15)]
        .iter()
        .map(|b| *b as char)
        .collect()
}
