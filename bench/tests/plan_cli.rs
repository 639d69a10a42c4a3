//! `fleet-lab plan` end to end: the "Must show" cases of the plan verb.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn lab(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleet-lab"));
    cmd.args(args);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("DEGENBOT_")) {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().copied());
    cmd.output().expect("run fleet-lab")
}

fn json(args: &[&str]) -> Value {
    let out = lab(args, &[]);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn fixture(name: &str) -> String {
    let p: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "fleet",
        "tests",
        "fixtures",
        "quota",
        name,
    ]
    .iter()
    .collect();
    p.to_string_lossy().into_owned()
}

fn assert_plain_error(out: &Output, needle: &str) {
    assert!(!out.status.success(), "must exit non-zero");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(needle),
        "stderr {err:?} should contain {needle:?}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "no panic: {err}"
    );
    assert!(!err.contains(" { "), "no Debug dump: {err}");
}

#[test]
fn quota_8_is_the_signed_off_row() {
    let v = json(&["plan", "--quota", "8", "--json"]);
    let b = &v["budget"];
    let got: Vec<i64> = [
        "reserve_cpus",
        "ambient_cpus",
        "resolve_cpus",
        "merge_cpus",
        "solver_cpus",
        "solver_pins",
        "sim_slot_cap",
    ]
    .iter()
    .map(|k| b[k].as_i64().unwrap_or_else(|| panic!("budget.{k}")))
    .collect();
    assert_eq!(got, [1, 2, 1, 1, 3, 6, 4]);
    assert_eq!(v["plan"]["binding"], "pinned");
    assert_eq!(v["plan"]["profile"], "auto");
    assert_eq!(v["plan"]["oversubscribed"], false);
    assert!(v["plan"]["tier_refused"].is_null());
    assert_eq!(v["plan"]["quota_cpus"], 8.0);
    assert_eq!(v["fleet_booted"], false);
    let census = v["census"].as_array().unwrap();
    assert!(census
        .iter()
        .any(|r| r["thread_name"] == "work-fleet-solver-5" && r["binding"] == "pinned"));
    assert!(census
        .iter()
        .any(|r| r["name"] == "ambient_io" && r["binding"] == "shared"));
    for k in ["exact_cpus", "affinity_cpus", "source", "reason"] {
        assert!(v["quota"].get(k).is_some(), "quota.{k}");
    }
}

#[test]
fn quota_6_is_pinned_with_two_solver_cores() {
    let v = json(&["plan", "--quota", "6", "--json"]);
    assert_eq!(v["plan"]["binding"], "pinned");
    assert_eq!(v["budget"]["solver_cpus"], 2);
}

#[test]
fn quota_5_is_serial_and_carries_the_refusal() {
    let v = json(&["plan", "--quota", "5", "--json"]);
    assert_eq!(v["plan"]["binding"], "serial");
    assert_eq!(
        v["plan"]["tier_refused"]["kind"],
        "quota_too_small_for_pinned_roles"
    );
    let census = v["census"].as_array().unwrap();
    assert!(census
        .iter()
        .filter(|r| !r["role"].is_null())
        .all(|r| r["binding"] == "logical"));
    let out = lab(&["plan", "--quota", "5"], &[]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("QuotaTooSmallForPinnedRoles"));
}

#[test]
fn quota_6_5_spends_the_fraction_on_io_only() {
    let v = json(&["plan", "--quota", "6.5", "--json"]);
    let rows = v["budget"]["rows"].as_array().unwrap();
    let sum: i64 = rows.iter().map(|r| r["cores"].as_i64().unwrap()).sum();
    assert_eq!(sum, 6);
    for r in rows {
        let frac = r["io_fraction"].as_f64().unwrap();
        let io = r["consumer"] == "sim_driver" || r["consumer"] == "ambient_io";
        assert_eq!(frac, if io { 0.5 } else { 0.0 }, "{}", r["consumer"]);
    }
    assert_eq!(v["budget"]["fractional_cpus"], 0.5);
}

#[test]
fn quota_1_5_is_below_the_host_floor() {
    assert_plain_error(&lab(&["plan", "--quota", "1.5"], &[]), "BelowHostFloor");
    assert_plain_error(
        &lab(&["plan", "--quota", "1.5", "--json"], &[]),
        "BelowHostFloor",
    );
}

#[test]
fn forced_pinned_on_two_cores_is_oversubscribed() {
    let v = json(&["plan", "--quota", "2", "--profile", "pinned", "--json"]);
    assert_eq!(v["plan"]["binding"], "pinned");
    assert_eq!(v["plan"]["profile"], "pinned");
    assert_eq!(v["plan"]["oversubscribed"], true);
    assert!(!v["plan"]["tier_refused"].is_null());
    let out = lab(&["plan", "--quota", "2", "--profile", "pinned"], &[]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("oversubscribed: YES"));
}

#[test]
fn plain_plan_shows_what_was_detected_and_from_where() {
    let out = lab(&["plan"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    if out.status.success() {
        for needle in [
            "Quota (detected)",
            "source:",
            "reason:",
            "Budget",
            "Census",
            "consumer",
            "thread",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    } else {
        // A host below 2 cores: the refusal must still be a plain message.
        assert_plain_error(&out, "BelowHostFloor");
    }
}

#[test]
fn root_runs_detection_on_a_captured_tree() {
    let v = json(&["plan", "--root", &fixture("v1_cpu_cpuacct_3"), "--json"]);
    assert_eq!(v["quota"]["source"], "cgroup_v1");
    assert_eq!(v["quota"]["exact_cpus"], 3.0);
    assert_eq!(v["quota"]["affinity_cpus"], 16);
    assert_eq!(v["plan"]["quota_cpus"], 3.0);
    assert_eq!(v["plan"]["binding"], "serial");
    let v = json(&["plan", "--root", &fixture("v2_fraction_8_5"), "--json"]);
    assert_eq!(v["quota"]["source"], "cgroup_v2");
    assert_eq!(v["quota"]["exact_cpus"], 8.5);
    assert_eq!(v["budget"]["solver_cpus"], 3);
    let v = json(&["plan", "--root", &fixture("bad_cgroup_garbage"), "--json"]);
    assert_eq!(v["quota"]["source"], "unknown");
    assert!(v["quota"]["exact_cpus"].is_null());
    assert!(v["quota"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("quota unknown"));
}

#[test]
fn bad_input_is_a_plain_error() {
    let out = lab(&["plan", "--profile", "legacy"], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("auto, pinned or serial"));
    assert_plain_error(
        &lab(&["plan", "--quota", "8"], &[("DEGENBOT_FLEET", "fleet")]),
        "stance switch is retired",
    );
    assert_plain_error(
        &lab(&["plan", "--root", "/nonexistent/tree"], &[]),
        "not a directory",
    );
    assert_plain_error(
        &lab(
            &[
                "plan",
                "--quota",
                "8",
                "--config",
                "/nonexistent/fleet.toml",
            ],
            &[],
        ),
        "cannot read config",
    );
}

#[test]
fn config_overrides_reach_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet.toml");
    std::fs::write(&path, "[budget]\nsolver_cpus = 2\n").unwrap();
    let v = json(&[
        "plan",
        "--quota",
        "16",
        "--config",
        path.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v["budget"]["solver_cpus"], 2);
    assert_eq!(v["budget"]["overrides"]["solver_cpus"], 2);
    std::fs::write(&path, "[budget]\nsolver_cpus = 20\n").unwrap();
    assert_plain_error(
        &lab(
            &["plan", "--quota", "16", "--config", path.to_str().unwrap()],
            &[],
        ),
        "solver_cpus=20",
    );
}
