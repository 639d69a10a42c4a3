//! The gates through the binary: an injected fault or slowdown fails them,
//! naming the budget, and `compare` ends with its verdict and legend.

use super::*;

/// A block server written as a shell script: it speaks `protocol`, and
/// answers every `block` with a block whose mean makespan is `mean_ms`
/// (parity held, nothing else of note). The gate's decision on it is the
/// decision on those numbers, whatever the host does.
fn fake_server(dir: &Path, name: &str, protocol: u32, mean_ms: f64) -> std::path::PathBuf {
    let block = format!(
        r#"{{"protocol":{protocol},"block":{{"label":"fake","cycles":6,"makespan_mean_ms":{mean_ms},"makespan_p50_ms":{mean_ms},"makespan_max_ms":{mean_ms},"over_lower_bound_mean":1.2,"parity":true,"saturated":false,"threads_created":0,"histograms_out_of_range":0,"throttled_share":null,"throttle_in_lab_cgroup":false,"cotenant_p99_us":null,"cpu_seconds":0.1,"wall_seconds":0.1}}}}"#
    );
    let script = format!(
        "#!/bin/sh\n[ \"$1\" = blocks ] || exit 3\necho '{{\"protocol\":{protocol},\"ready\":\"fake\"}}'\nwhile read -r line; do echo '{block}'; done\n"
    );
    let path = dir.join(name);
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Runs profile B (no cgroup needed) with fake servers as both builds.
fn gate_with(dir: &Path, candidate: &Path, reference: &Path) -> Output {
    let budgets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/budgets.toml");
    lab(
        &[
            "gate",
            "--profile",
            "B",
            "--budgets",
            budgets.to_str().unwrap(),
            "--candidate",
            candidate.to_str().unwrap(),
            "--reference",
            reference.to_str().unwrap(),
            "--out",
            "g",
            "--force",
        ],
        dir,
    )
}

#[test]
fn the_paired_gate_decides_on_the_pairs_ratios_by_its_sign_test() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = fake_server(d, "base", 1, 100.0);
    let same = fake_server(d, "same", 1, 101.0);
    let slow = fake_server(d, "slow", 1, 150.0);
    let o = gate_with(d, &same, &base);
    assert!(o.status.success(), "1.01× passes: {}", text(&o));
    assert!(text(&o).contains("gate B: PASS"), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("g/paired.json")).unwrap()).unwrap();
    let pairs = report["pairs"].as_array().unwrap();
    assert_eq!(
        pairs.len() as u64,
        report["budget"]["pairs"].as_u64().unwrap()
    );
    assert_eq!(pairs[0]["first"], "candidate");
    assert_eq!(pairs[1]["first"], "reference");
    assert_eq!(report["verdict"]["above"], 0);
    let o = gate_with(d, &slow, &base);
    fails_saying(&o, "gate B: FAIL paired_slowdown: 24 of 24 pairs");
    // Against itself the timed test cannot fail.
    let o = gate_with(d, &slow, &slow);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_reference_of_another_protocol_or_none_at_all_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = fake_server(d, "base", 1, 100.0);
    let future = fake_server(d, "future", 2, 100.0);
    fails_saying(
        &gate_with(d, &base, &future),
        "speaks block protocol 2, this build 1",
    );
    fails_saying(
        &gate_with(d, &base, &d.join("missing")),
        "no such file (build the reference with ci/reference-lab.sh",
    );
}

#[test]
fn a_gate_fails_naming_the_budget_when_a_fault_is_injected() {
    let dir = tempfile::tempdir().unwrap();
    let budgets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/budgets.toml");
    let c = corpus();
    let o = lab(
        &[
            "gate",
            "--profile",
            "B",
            "--reference",
            "self",
            "--quiet",
            "--corpus",
            &c,
            "--pairs",
            "6",
            "--block-cycles",
            "3",
            "--gate-scale",
            "0.02",
            "--budgets",
            budgets.to_str().unwrap(),
            "--out",
            "g",
            "--inject-wrong-outcome",
        ],
        dir.path(),
    );
    fails_saying(&o, "gate B: FAIL parity: produced outcomes differ");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("g/paired.json")).unwrap()).unwrap();
    let pairs = report["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 6);
    for p in pairs {
        assert_eq!(p["candidate"]["cycles"], 3, "{p}");
        assert_eq!(p["candidate"]["parity"], false, "{p}");
        assert_eq!(
            p["reference"]["parity"], true,
            "the reference is not injected: {p}"
        );
    }
    // Pairs and a level that could never fail are refused before anything runs.
    let o = lab(
        &[
            "gate",
            "--profile",
            "B",
            "--budgets",
            budgets.to_str().unwrap(),
            "--reference",
            "self",
            "--pairs",
            "3",
        ],
        dir.path(),
    );
    fails_saying(&o, "pairs 3: even all of them above the tolerance");
    fails_saying(
        &lab(
            &[
                "gate",
                "--profile",
                "A",
                "--budgets",
                budgets.to_str().unwrap(),
                "--reference",
                "self",
                "--inject-slowdown",
                "0.5",
            ],
            dir.path(),
        ),
        "--inject-slowdown 0.5 is invalid: give a factor of at least 1",
    );
}

#[test]
fn compare_ends_with_the_verdict_and_a_legend_of_its_columns() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let o = lab(
        &[
            "compare",
            "--quiet",
            "--fleet-only",
            "--rounds",
            "2",
            "--corpus",
            &c,
            "--cycles",
            "3",
            "--scale",
            "0.02",
            "--out",
            "cmp",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let verdict = out.find("\nVerdict:\n").expect("a verdict");
    let legend = out.find("\nColumns:\n").expect("a legend");
    assert!(
        out.find("p99 ms").unwrap() < verdict && verdict < legend,
        "{out}"
    );
    assert!(
        out.contains("  Best cycle tail (lowest makespan p99): "),
        "{out}"
    );
    assert!(
        out.contains("  No design the fleet replaces ran: nothing to set the fleet against."),
        "{out}"
    );
    assert!(
        out.contains("  /proc lb p99: 99th percentile of makespan over"),
        "{out}"
    );
    // Two rounds: the median round's table, then every figure over rounds.
    assert!(out.contains("The median round (round "), "{out}");
    let rounds = out
        .find("\nRounds: 2 (each contender once per round")
        .expect("a rounds table");
    assert!(legend < rounds, "{out}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("cmp/compare.json")).unwrap())
            .unwrap();
    let figures = report["rounds"].as_array().unwrap();
    assert_eq!(figures.len(), 4, "two contenders, two rounds");
    // Rotated: the contender that ran first in round 1 ran second in round 2.
    let first = |round: u64| {
        figures
            .iter()
            .find(|f| f["round"] == round && f["position"] == 1)
            .map(|f| f["label"].clone())
            .unwrap()
    };
    assert_ne!(first(1), first(2));
    // The host floor ran once a round, a slot of its own in the rotation:
    // last of three in round 1, second in round 2.
    let floors = report["host_floor"].as_array().expect("the host floor");
    let at: Vec<_> = floors
        .iter()
        .map(|f| (f["round"].as_u64(), f["position"].as_u64()))
        .collect();
    assert_eq!(at, [(Some(1), Some(3)), (Some(2), Some(2))], "{floors:?}");
    assert!(
        floors.iter().all(|f| f["probe_p99_us"].as_f64().is_some()),
        "{floors:?}"
    );
    assert!(
        out.contains("The host floor (the host's own work alone on the same arrivals"),
        "{out}"
    );
    assert!(
        out.contains("each contender's co-tenant p99 ÷ the host floor"),
        "{out}"
    );
    let page = std::fs::read_to_string(dir.path().join("cmp/report.html")).unwrap();
    assert!(page.contains("<li>Best cycle tail (lowest makespan p99): "));
}

#[test]
fn compare_leaves_the_host_floor_out_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let o = lab(
        &[
            "compare",
            "--quiet",
            "--fleet-only",
            "--rounds",
            "1",
            "--no-host-floor",
            "--corpus",
            &c,
            "--cycles",
            "2",
            "--scale",
            "0.02",
            "--out",
            "cmp",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("host floor"), "{out}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("cmp/compare.json")).unwrap())
            .unwrap();
    assert!(report.get("host_floor").is_none(), "{report}");
    assert_eq!(report["rounds"].as_array().unwrap().len(), 2);
}
