//! `fleet-lab run` reports its receipt deadline and overruns, and how the
//! quota was detected (unknown kept apart from no limit), in `report.json`
//! and on the page.

use std::path::Path;
use std::process::Command;

#[test]
fn the_report_carries_the_receipt_deadline_its_overruns_and_the_quota_detection() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/golden-v1.txt");
    let out = dir.path().join("run");
    let o = Command::new(env!("CARGO_BIN_EXE_fleet-lab"))
        .args(["run", "--quiet", "--cycles", "3", "--scale", "0.01"])
        .args(["--unit-deadline-ms", "7000", "--corpus"])
        .arg(&corpus)
        .arg("--out")
        .arg(&out)
        .current_dir(dir.path())
        .env("RUST_LOG", "error")
        .output()
        .expect("fleet-lab runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let overruns = &report["overruns"];
    assert_eq!(overruns["deadline_ms"], 7000, "{overruns}");
    for kind in ["resolve", "walk", "merge", "background", "paths"] {
        assert_eq!(overruns[kind], 0, "{kind}: {overruns}");
    }
    let q = &report["quota_detection"];
    let source = q["source"].as_str().expect("a source name");
    assert!(
        ["cgroup_v1", "cgroup_v2", "affinity", "unknown"].contains(&source),
        "{q}"
    );
    assert!(!q["reason"].as_str().unwrap_or("").is_empty(), "{q}");
    assert_eq!(
        q["unknown_reason"].is_null(),
        source != "unknown",
        "an unknown quota carries its reason, a known one none: {q}"
    );
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("deadline 7000 ms: 0 resolve, 0 walk, 0 merge, 0 background units overran; 0 paths Failed(Overrun)"),
        "the page shows the overrun row"
    );
    assert!(
        page.contains("quota detection"),
        "the page shows the quota row"
    );
}

#[test]
fn the_page_rows_name_overruns_and_an_unknown_quota_with_its_reason() {
    use fleet_bench::report::html::{overruns_text, quota_text};
    use fleet_bench::report::QuotaDetection;
    let o = [
        ("deadline_ms", 5000),
        ("resolve", 0),
        ("walk", 2),
        ("merge", 0),
        ("background", 1),
        ("paths", 31),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(
        overruns_text(&o),
        "deadline 5000 ms: 0 resolve, 2 walk, 0 merge, 1 background units overran; 31 paths Failed(Overrun)"
    );
    assert_eq!(overruns_text(&Default::default()), "not measured");
    let unknown = QuotaDetection {
        source: "unknown".into(),
        quota: None,
        unknown_reason: Some("no cgroup2 mount is visible".into()),
        reason: "quota unknown: no cgroup2 mount is visible".into(),
    };
    assert_eq!(
        quota_text(&unknown),
        "quota unknown: no cgroup2 mount is visible"
    );
    let none = QuotaDetection {
        source: "affinity".into(),
        quota: None,
        unknown_reason: None,
        reason: "cgroup v1 sets no limit".into(),
    };
    assert_eq!(quota_text(&none), "affinity (no quota)");
}
