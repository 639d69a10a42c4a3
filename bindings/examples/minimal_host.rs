//! The smallest host of the fleet: detect the CPU quota, resolve the plan,
//! boot the binding it names, run 100 units of two roles, await every
//! receipt with a deadline, and shut down cleanly.
//!
//! Run: `cargo run --release -p fleet-bindings --example minimal_host`.
//! Exits non-zero if any unit did not resolve with its value in time or the
//! shutdown found a problem.

use fleet::plan::{Plan, Profile};
use fleet::receipt::Receipt;
use fleet::WorkerRole;
use fleet_bindings::{boot, unit_body, BootOptions};
use std::time::{Duration, Instant};

/// Units submitted per role.
const UNITS_PER_ROLE: u64 = 50;
/// How long the host waits for all receipts before giving up.
const DEADLINE: Duration = Duration::from_secs(10);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. The quota this process may use (cgroup limit, else the affinity mask).
    let quota = fleet::quota::detect_live();
    println!(
        "quota: {:.2} cores ({:?}): {}",
        quota.effective_cpus(),
        quota.source,
        quota.reason
    );

    // 2. One budget authority: the plan derives every share and the binding.
    //    A quota below the host floor (2 cores) is refused with a typed error.
    let plan = Plan::resolve(quota.effective_cpus(), Profile::Auto, &Default::default())?;
    println!("binding: {:?}", plan.binding);

    // 3. Boot. Every thread the fleet will ever use starts here.
    let fleet = boot(&plan, BootOptions::for_plan(&plan))?;
    let handle = fleet.handle();

    // 4. Submit pooled units of two roles. A refusal hands the body back.
    let mut receipts: Vec<(u64, Receipt)> = Vec::new();
    for i in 0..UNITS_PER_ROLE {
        for role in [WorkerRole::Resolve, WorkerRole::Registrar] {
            let body = unit_body(move |_ctx| async move { Box::new(i * i) as _ });
            match handle.submit(role, None, body) {
                Ok(receipt) => receipts.push((i, receipt)),
                Err(refused) => return Err(format!("unit {i} refused: {refused}").into()),
            }
        }
    }

    // 5. Await every receipt with one deadline; a terminal reason is typed.
    let until = Instant::now() + DEADLINE;
    let mut done = 0;
    for (i, receipt) in &receipts {
        let left = until.saturating_duration_since(Instant::now());
        match receipt.wait_timeout(left) {
            Some(Ok(value)) => {
                let got = value.downcast_ref::<u64>().copied();
                if got != Some(i * i) {
                    return Err(format!("unit {i}: wrong value {got:?}").into());
                }
                done += 1;
            }
            Some(Err(reason)) => return Err(format!("unit {i}: {reason}").into()),
            None => return Err(format!("unit {i}: no receipt within {DEADLINE:?}").into()),
        }
    }

    // 6. Shut down: joins every fleet thread and reports the pump's counts.
    let report = fleet.shutdown()?;
    println!(
        "{done} units resolved; {} threads joined; pump counts conserved: {}",
        report.threads_joined,
        report.pump.conserved()
    );
    if done != receipts.len() || !report.pump.conserved() {
        return Err("not every unit was accounted for".into());
    }
    Ok(())
}
