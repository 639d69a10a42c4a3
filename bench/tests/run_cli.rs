//! `fleet-lab run`, `parity` and `gate` end to end through the binary: the
//! outcome never depends on scale, bad input is refused plainly and leaves
//! nothing behind, and the gates can fail.

use std::path::Path;
use std::process::{Command, Output};

fn lab(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleet-lab"))
        .args(args)
        .current_dir(cwd)
        .env("RUST_LOG", "error")
        .output()
        .expect("fleet-lab runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn corpus() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../corpus/golden-v1.txt")
        .display()
        .to_string()
}

#[test]
fn outcomes_are_identical_at_two_scales_and_equal_the_golden_ones() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let mut outcomes = Vec::new();
    for scale in ["0.01", "0.04"] {
        let out = dir.path().join(format!("run-{scale}"));
        let o = lab(
            &[
                "run",
                "--quiet",
                "--corpus",
                &c,
                "--cycles",
                "4",
                "--scale",
                scale,
                "--out",
                out.to_str().unwrap(),
            ],
            dir.path(),
        );
        assert!(o.status.success(), "scale {scale}: {}", text(&o));
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        assert_eq!(report["parity"], true, "scale {scale}");
        assert_eq!(report["cycles"], 4);
        for f in [
            "report.html",
            "makespan.hlog",
            "outcomes.jsonl",
            "metrics.prom",
        ] {
            assert!(out.join(f).is_file(), "{f} missing at scale {scale}");
        }
        outcomes.push(std::fs::read_to_string(out.join("outcomes.jsonl")).unwrap());
    }
    assert!(outcomes[0].lines().count() > 300, "4 cycles of ~100 paths");
    assert_eq!(
        outcomes[0], outcomes[1],
        "the outcome never depends on the scale"
    );
}

#[test]
fn bad_input_is_refused_plainly_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = lab(
        &["run", "--scale", "0", "--out", out.to_str().unwrap()],
        dir.path(),
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("--scale 0 is invalid"), "{}", text(&o));
    let o = lab(&["run", "--profile", "bogus"], dir.path());
    assert!(!o.status.success());
    assert!(text(&o).contains("bogus"), "{}", text(&o));

    // An edited corpus: one digit of one outcome changed.
    let golden = std::fs::read_to_string(corpus()).unwrap();
    let edited = dir.path().join("edited.txt");
    let at = golden
        .find(" solved:")
        .map(|i| i + 8)
        .expect("a solved path");
    let mut bytes = golden.into_bytes();
    bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(&edited, bytes).unwrap();
    let o = lab(
        &[
            "run",
            "--quiet",
            "--corpus",
            edited.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(!o.status.success());
    let msg = text(&o);
    assert!(
        msg.contains("edited.txt:8: checksum mismatch"),
        "file:line: reason expected: {msg}"
    );
    assert!(!msg.contains("panicked"), "{msg}");
    assert!(!out.exists(), "nothing may be written for a refused run");
}

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
