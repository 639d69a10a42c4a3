//! A keyed solver walk with sims: each cycle submits one walk per bin (keyed
//! by the bin, so it stays on that bin's seat); every walk submits its sims
//! through the fleet from inside its body and awaits them, then a resolve
//! unit sums the bins. Shows the one rule of bodies: await receipts inside a
//! unit, block only outside.
//!
//! Run: `cargo run --release -p fleet-bindings --example keyed_walk`.
//! Exits non-zero if a cycle's sum differs from the expected one, a receipt
//! misses its deadline, or the shutdown finds a problem.

use fleet::plan::{Plan, Profile};
use fleet::receipt::{Receipt, ReceiptResult};
use fleet::WorkerRole;
use fleet_bindings::{boot, unit_body, BootOptions, FleetHandle, SeatCtx};
use std::time::Duration;

/// Cycles to run.
const CYCLES: u64 = 20;
/// Sims each walk awaits.
const SIMS_PER_WALK: u64 = 3;
/// The longest a cycle may take before the host gives up on it.
const CYCLE_DEADLINE: Duration = Duration::from_secs(10);

/// A sim: waits on simulated I/O (a Tokio timer is current on both
/// bindings), then answers a value derived from its inputs only.
fn sim(cycle: u64, bin: u32, k: u64) -> fleet_bindings::UnitBody {
    unit_body(move |_ctx| async move {
        tokio::time::sleep(Duration::from_micros(200)).await;
        Box::new(cycle * 100 + bin as u64 * 10 + k) as _
    })
}

/// A walk over one bin: submits its sims, awaits each, returns their sum.
async fn walk(ctx: SeatCtx, cycle: u64, bin: u32) -> u64 {
    let mut receipts = Vec::new();
    for k in 0..SIMS_PER_WALK {
        match ctx
            .fleet
            .submit(WorkerRole::SimDriver, None, sim(cycle, bin, k))
        {
            Ok(r) => receipts.push(r),
            // A refused sim hands its body back; this walk counts it as 0.
            Err(refused) => eprintln!("cycle {cycle} bin {bin}: sim refused: {refused}"),
        }
    }
    let mut sum = 0;
    for r in receipts {
        if let Ok(v) = r.await {
            sum += v.downcast_ref::<u64>().copied().unwrap_or(0);
        }
    }
    sum
}

fn value(result: Option<ReceiptResult>, what: &str) -> Result<u64, String> {
    match result {
        Some(Ok(v)) => v
            .downcast_ref::<u64>()
            .copied()
            .ok_or_else(|| format!("{what}: not a u64")),
        Some(Err(reason)) => Err(format!("{what}: {reason}")),
        None => Err(format!("{what}: no receipt within {CYCLE_DEADLINE:?}")),
    }
}

fn run_cycle(handle: &FleetHandle, bins: u32, cycle: u64) -> Result<u64, String> {
    let mut walks: Vec<Receipt> = Vec::new();
    for bin in 0..bins {
        let body = unit_body(move |ctx| async move { Box::new(walk(ctx, cycle, bin).await) as _ });
        let r = handle
            .submit(WorkerRole::Solver, Some(bin), body)
            .map_err(|e| format!("cycle {cycle} bin {bin}: {e}"))?;
        walks.push(r);
    }
    // The resolve unit awaits every walk inside the fleet and sums them.
    let resolve = unit_body(move |_ctx| async move {
        let mut total = 0u64;
        for w in walks {
            if let Ok(v) = w.await {
                total += v.downcast_ref::<u64>().copied().unwrap_or(0);
            }
        }
        Box::new(total) as _
    });
    let r = handle
        .submit(WorkerRole::Resolve, None, resolve)
        .map_err(|e| format!("cycle {cycle} resolve: {e}"))?;
    value(r.wait_timeout(CYCLE_DEADLINE), &format!("cycle {cycle}"))
}

/// The sum every cycle must produce, computed without the fleet.
fn expected(bins: u32, cycle: u64) -> u64 {
    (0..bins)
        .flat_map(|b| (0..SIMS_PER_WALK).map(move |k| cycle * 100 + b as u64 * 10 + k))
        .sum()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quota = fleet::quota::detect_live();
    let plan = Plan::resolve(quota.effective_cpus(), Profile::Auto, &Default::default())?;
    let bins = plan.budget.solver_pins.max(1);
    println!("binding {:?}, {bins} bins", plan.binding);
    let fleet = boot(&plan, BootOptions::for_plan(&plan))?;
    let handle = fleet.handle();
    for cycle in 0..CYCLES {
        let got = run_cycle(&handle, bins, cycle)?;
        let want = expected(bins, cycle);
        if got != want {
            return Err(format!("cycle {cycle}: sum {got}, expected {want}").into());
        }
    }
    let report = fleet.shutdown()?;
    println!(
        "{CYCLES} cycles exact; pump counts at shutdown: {}; {} threads joined",
        report.pump, report.threads_joined
    );
    // The counts are the pump's at close: a unit whose receipt has resolved
    // may still count as in flight if its seat's "done" had not reached the
    // pump yet, so only conservation is checked here.
    if !report.pump.conserved() {
        return Err(format!("shutdown left units unaccounted: {}", report.pump).into());
    }
    Ok(())
}
