//! The gates through the binary: an injected fault or slowdown fails them,
//! naming the budget, and `compare` ends with its verdict and legend.

use super::*;

#[test]
fn a_gate_fails_naming_the_budget_when_a_fault_is_injected() {
    let dir = tempfile::tempdir().unwrap();
    let budgets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/budgets.toml");
    let c = corpus();
    let base = [
        "gate",
        "--profile",
        "A",
        "--quiet",
        "--corpus",
        &c,
        "--cycles",
        "6",
        "--gate-scale",
        "0.02",
    ];
    let with = |extra: &[&str]| {
        let mut a: Vec<&str> = base.to_vec();
        a.extend(["--budgets", budgets.to_str().unwrap()]);
        a.extend(extra);
        lab(&a, dir.path())
    };
    let o = with(&["--inject-delay-ms", "200"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("makespan_over_lower_bound_p99"),
        "{}",
        text(&o)
    );
    let o = with(&["--inject-wrong-outcome"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("parity: produced outcomes differ"),
        "{}",
        text(&o)
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
    let page = std::fs::read_to_string(dir.path().join("cmp/report.html")).unwrap();
    assert!(page.contains("<li>Best cycle tail (lowest makespan p99): "));
}

/// Profile A of the shipped budgets with both ratio limits replaced by
/// `limit`.
fn profile_a_with_ratio_limit(dir: &Path, limit: f64) -> std::path::PathBuf {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/budgets.toml");
    let mut text = String::new();
    for line in std::fs::read_to_string(shipped).unwrap().lines() {
        if line.starts_with("makespan_over_lower_bound_p") {
            let key = line.split('=').next().unwrap().trim();
            text.push_str(&format!("{key} = {limit}\n"));
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    let path = dir.join("budgets.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_one_and_a_half_slowdown_puts_every_cycle_past_one_and_a_half_and_fails_a_limit_below() {
    // Slowed 1.5×, every unit's CPU and I/O take 1.5× the corpus's, while
    // the lower bound stays the corpus's: each cycle's makespan over its
    // bound is at least 1.5 on any host, fast or slow. A profile A whose
    // ratio limits are below 1.5 therefore fails; the shipped limits must
    // be (see `profile_a_ratio_limits_are_below_a_one_and_a_half_slowdown`
    // in src/gate.rs).
    let dir = tempfile::tempdir().unwrap();
    let budgets = profile_a_with_ratio_limit(dir.path(), 1.45);
    let out = dir.path().join("gate");
    let c = corpus();
    let o = lab(
        &[
            "gate",
            "--profile",
            "A",
            "--quiet",
            "--corpus",
            &c,
            "--cycles",
            "12",
            "--budgets",
            budgets.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--inject-slowdown",
            "1.5",
        ],
        dir.path(),
    );
    fails_saying(&o, "makespan_over_lower_bound_p95: ");
    assert!(text(&o).contains("> limit 1.45"), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let cycles = report["per_cycle"].as_array().unwrap();
    assert_eq!(cycles.len(), 12);
    for c in cycles {
        let ratio = c["makespan_ms"].as_f64().unwrap() / c["lower_bound_ms"].as_f64().unwrap();
        assert!(ratio >= 1.49, "cycle {}: {ratio:.3}", c["cycle"]);
    }
    fails_saying(
        &lab(
            &["gate", "--profile", "A", "--inject-slowdown", "0.5"],
            dir.path(),
        ),
        "--inject-slowdown 0.5 is invalid: give a factor of at least 1",
    );
}
