//! Boot: a plan in, a running fleet of the plan's binding out.
//!
//! `DESIGN.md` §4; seed 000 §13 ("a binding instantiates these seams per the
//! boot plan") and §14 (the tier table: no call site decides a tier; the
//! plan's `binding` does).

use crate::options::pin_plan;
use crate::running::Fleet;
use fleet::plan::{Binding, Plan};

pub use crate::options::{BootError, BootOptions, PinPlan};

/// Boots a running fleet of `plan.binding`.
///
/// Pinned: a pump thread (`work-fleet-pump-0`), one thread per seat of
/// `plan.seat_layout()`, and the ambient Tokio runtime (`work-fleet-io-N`,
/// A workers). Serial: a pump thread and the plan's cycle threads
/// (`work-fleet-serial-0..C-1`, C = ⌊Q⌋ − H below the pinned tier).
/// It returns once every one of those threads runs (and so carries its
/// name in `/proc/self/task`, as [`Fleet::census`] lists it), not merely
/// once each was spawned.
///
/// Errors: [`BootError`]; nothing is left running on error.
///
/// ```
/// use fleet::plan::{Plan, Profile};
/// use fleet::WorkerRole;
/// use fleet_bindings::{boot, unit_body, BootOptions};
/// use std::time::Duration;
///
/// let plan = Plan::resolve(2.0, Profile::Auto, &Default::default()).unwrap();
/// let fleet = boot(&plan, BootOptions::for_plan(&plan)).unwrap();
/// let receipt = fleet
///     .handle()
///     .submit(WorkerRole::Resolve, None, unit_body(|_ctx| async { Box::new(42u32) as _ }))
///     .unwrap();
/// let value = receipt.wait_timeout(Duration::from_secs(5)).expect("in time").unwrap();
/// assert_eq!(value.downcast_ref::<u32>(), Some(&42));
/// let report = fleet.shutdown().unwrap();
/// assert!(report.pump.conserved());
/// ```
pub fn boot(plan: &Plan, opts: BootOptions) -> Result<Fleet, BootError> {
    if plan.seat_layout().seats.is_empty() {
        return Err(BootError::EmptyLayout);
    }
    let pins = pin_plan(plan, opts.pin_cores)?;
    tracing::info!(
        binding = plan.binding.name(),
        oversubscribed = plan.oversubscribed,
        pins = ?pins.decision,
        "booting the fleet"
    );
    match plan.binding {
        Binding::Pinned => crate::pinned::boot(plan, opts, pins),
        Binding::Serial => crate::serial::boot(plan, opts, pins),
    }
}
