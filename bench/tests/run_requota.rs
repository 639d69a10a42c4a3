//! Re-detection through the binary, in a real cgroup (cgroup v1 `cpu`
//! writable as root; elsewhere each test says why it is skipped and
//! passes): a run plans for the quota its own cgroup grants, and a quota
//! that changes mid-run shows in `plan_changes` and on the timeline.

use std::path::Path;
use std::process::{Command, Output};

fn lab(args: &[&str], out: &Path) -> Output {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/golden-v1.txt");
    Command::new(env!("CARGO_BIN_EXE_fleet-lab"))
        .args(args)
        .arg("--corpus")
        .arg(&corpus)
        .arg("--out")
        .arg(out)
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

/// Why real cgroups cannot be used here, if they cannot.
fn no_cgroups() -> Option<String> {
    let procs = Path::new("/sys/fs/cgroup/cpu/cgroup.procs");
    if !procs.exists() {
        return Some("no cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu".into());
    }
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: the cpu controller is not writable".into());
    }
    None
}

#[test]
fn a_run_in_a_one_core_cgroup_plans_for_one_core_and_is_refused_below_the_floor() {
    if let Some(why) = no_cgroups() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = lab(
        &[
            "run",
            "--quiet",
            "--cycles",
            "2",
            "--scale",
            "0.02",
            "--cgroup-quota",
            "1",
        ],
        &out,
    );
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("inside the run's cgroup the quota is 1 cores")
            && t.contains("BelowHostFloor: quota 1 cores"),
        "the plan is for the cgroup's 1 core, not the host's CPUs: {t}"
    );
    assert!(t.contains("pass --quota"), "{t}");
    assert!(!out.exists(), "nothing is written");
    // Told to plan for 2, it runs inside the 1-core cgroup.
    let o = lab(
        &[
            "run",
            "--quiet",
            "--cycles",
            "2",
            "--scale",
            "0.02",
            "--cgroup-quota",
            "1",
            "--quota",
            "2",
        ],
        &out,
    );
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["machine"]["quota"], 2.0);
    assert_eq!(
        report["quota_detection"]["quota"], 1.0,
        "{}",
        report["quota_detection"]
    );
}

#[test]
fn two_quota_shrinks_mid_run_are_re_detected_and_show_in_plan_changes_and_the_timeline() {
    if let Some(why) = no_cgroups() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = lab(
        &[
            "run",
            "--quiet",
            "--cycles",
            "18",
            "--scale",
            "0.05",
            "--cgroup-quota",
            "2",
            "--quota-shrink-at",
            "3:1:5",
            "--quota-shrink-at",
            "11:1:100",
            "--quota-watch-ms",
            "20",
        ],
        &out,
    );
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let changes = report["plan_changes"].as_array().expect("a list");
    let shrink = changes
        .iter()
        .find(|c| c["to_cpus"] == 1.0)
        .unwrap_or_else(|| panic!("the shrink to 1 core is seen: {changes:?}"));
    assert_eq!(shrink["from_cpus"], 2.0);
    // One core is below the host floor: the re-plan is refused and says so;
    // the bounds in force stay.
    assert!(
        shrink["refused"]
            .as_str()
            .unwrap_or("")
            .contains("BelowHostFloor"),
        "{shrink}"
    );
    assert_eq!(shrink["walk_admission"][0], shrink["walk_admission"][1]);
    // Two shrinks, and the restore between them re-plans for 2 cores again
    // from a cycle boundary.
    let shrinks = changes.iter().filter(|c| c["to_cpus"] == 1.0).count();
    assert_eq!(shrinks, 2, "{changes:?}");
    let restore = changes
        .iter()
        .find(|c| c["to_cpus"] == 2.0)
        .unwrap_or_else(|| panic!("the restore is seen: {changes:?}"));
    assert!(restore["refused"].is_null(), "{restore}");
    assert_eq!(restore["binding"], "serial");
    assert!(
        restore["applied_at_cycle"].as_u64().is_some_and(|c| c >= 8),
        "{restore}"
    );
    let timeline = report["timeline"].as_array().unwrap();
    assert!(
        timeline
            .iter()
            .any(|e| e["kind"] == "quota_change"
                && e["detail"].as_str().unwrap_or("").contains("2 → 1")),
        "{timeline:?}"
    );
    assert_eq!(report["parity"], true);
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("quota_change"), "the page lists the event");
}
