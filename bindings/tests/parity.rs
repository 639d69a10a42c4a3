//! Cross-binding parity: the same stream of units through the pinned and the
//! serial binding yields identical outcomes (`DESIGN.md` §4: parity is the
//! promotion gate).

use crate::common::*;
use fleet::ledger::SharedLedger;
use fleet::plan::{Binding, Profile};
use fleet_bindings::{boot, BootOptions, PinCores};
use std::collections::BTreeMap;

type Corpus = BTreeMap<
    u64,
    (
        String,
        BTreeMap<u32, String>,
        BTreeMap<String, Result<u64, String>>,
    ),
>;

fn replay(quota: f64, profile: Profile, pin: PinCores, cycles: u64) -> (Corpus, usize) {
    let plan = plan(quota, profile);
    let mut opts = BootOptions::for_plan(&plan);
    opts.pin_cores = pin;
    let fleet = boot(&plan, opts).expect("boot");
    let (fuse, trips) = recording_fuse();
    let ledger = SharedLedger::new(fuse);
    let handle = fleet.handle();
    let mut corpus = Corpus::new();
    let mut units = 0;
    for c in 1..=cycles {
        let run = run_cycle(&handle, &ledger, c, CycleOpts::default());
        let rec = run.merged.expect("exact cycle");
        assert_eq!(rec.tally.received(), rec.tally.submitted);
        units += 2 + run.bins.len() + run.side.len() - 1;
        units += rec.outcomes.keys().filter(|p| needs_sim(c, **p)).count();
        let bins = run
            .bins
            .iter()
            .map(|(b, r)| (*b, format!("{r:?}")))
            .collect();
        corpus.insert(
            c,
            (
                serde_json::to_string(&rec.outcomes).unwrap(),
                bins,
                run.side,
            ),
        );
    }
    assert!(trips.lock().unwrap().is_empty());
    let report = fleet.shutdown().expect("clean shutdown");
    assert!(report.pump.conserved(), "{}", report.pump);
    (corpus, units)
}

#[test]
fn pinned_and_serial_yield_identical_outcomes() {
    let (pinned, units) = replay(8.0, Profile::Pinned, PinCores::Off, 25);
    let (serial, _) = replay(4.0, Profile::Auto, PinCores::Off, 25);
    assert!(units >= 300, "a few hundred mixed units, got {units}");
    assert_eq!(pinned.len(), 25);
    for (c, p) in &pinned {
        assert_eq!(Some(p), serial.get(c), "cycle {c} differs between bindings");
    }
    assert_eq!(pinned, serial);
    // The outcomes are not trivially uniform.
    let all: String = pinned.values().map(|v| v.0.clone()).collect();
    for kind in ["solved", "suppressed", "failed", "sim_reverted"] {
        assert!(all.contains(kind), "corpus has {kind}");
    }
    assert_eq!(plan(8.0, Profile::Pinned).binding, Binding::Pinned);
    assert_eq!(plan(4.0, Profile::Auto).binding, Binding::Serial);
}
