//! Writing report directories: whole or absent, never half-written; and
//! `fleet-lab report` over earlier runs.

use std::fs;
use std::path::Path;

use fleet_bench::cmd::report::{run, Args};
use fleet_bench::report::sample::{sample_run_with_logs, SampleShape};
use fleet_bench::report::{
    load_run, load_runs, load_sim_latency, read_interval_log, write_dir_atomically,
    write_report_dir, write_report_dir_with, CompareReport, ExtraFile, HdrLog, Metric, ReportError,
};

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_run_directory_holds_json_html_logs_and_outcomes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let (report, logs) = sample_run_with_logs("fleet auto", SampleShape::FLEET, 40, 0.1, 1);
    let written = write_report_dir_with(
        &dir,
        &report,
        &logs,
        b"{\"cycle\":0}\n",
        &[ExtraFile {
            name: "metrics.prom".into(),
            bytes: b"x 1\n".to_vec(),
        }],
    )
    .unwrap();
    assert_eq!(written.len(), 4 + logs.len());
    assert_eq!(
        names(&dir),
        [
            "bin_walk.hlog",
            "makespan.hlog",
            "makespan_over_lower_bound.hlog",
            "metrics.prom",
            "outcomes.jsonl",
            "report.html",
            "report.json",
            "sim_latency.hlog",
        ]
    );
    assert_eq!(load_run(&dir.join("report.json")).unwrap(), report);
    assert_eq!(
        fs::read(dir.join("outcomes.jsonl")).unwrap(),
        b"{\"cycle\":0}\n"
    );
    for m in [Metric::Makespan, Metric::BinWalk, Metric::SimLatency] {
        let intervals = read_interval_log(&fs::read(dir.join(m.file_name())).unwrap()).unwrap();
        assert!(intervals.iter().all(|i| i.tag.as_deref() == Some(m.tag())));
    }
    let sim = load_sim_latency(&dir.join("report.json"))
        .unwrap()
        .expect("log beside the report");
    assert_eq!(sim.len(), report.sim_latency_ms.count);
    // Only the target directory is left in the parent: no temporaries.
    assert_eq!(names(tmp.path()), ["out"]);
}

#[test]
fn rewriting_replaces_the_whole_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let (a, logs) = sample_run_with_logs("first", SampleShape::FLEET, 10, 0.1, 1);
    write_report_dir(&dir, &a, &logs, b"").unwrap();
    let (b, _) = sample_run_with_logs("second", SampleShape::PILE, 10, 0.1, 2);
    write_report_dir(&dir, &b, &[], b"").unwrap();
    assert_eq!(load_run(&dir.join("report.json")).unwrap().label, "second");
    assert!(
        !dir.join("makespan.hlog").exists(),
        "files of the old report are gone"
    );
    assert_eq!(names(tmp.path()), ["out"]);
}

#[test]
fn a_failure_mid_write_leaves_nothing_new_and_the_old_report_intact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let (old, old_logs) = sample_run_with_logs("old", SampleShape::FLEET, 10, 0.1, 1);
    write_report_dir(&dir, &old, &old_logs, b"old").unwrap();
    let before = names(&dir);

    let (new, mut logs) = sample_run_with_logs("new", SampleShape::FLEET, 10, 0.1, 2);
    // report.json, report.html, outcomes and two logs are written before
    // this one fails.
    logs.insert(
        2,
        HdrLog {
            file_name: "../escape.hlog".into(),
            bytes: b"x".to_vec(),
        },
    );
    let err = write_report_dir(&dir, &new, &logs, b"new").unwrap_err();
    assert!(
        matches!(err, ReportError::BadFileName(ref n) if n == "../escape.hlog"),
        "{err}"
    );
    assert_eq!(
        names(tmp.path()),
        ["out"],
        "no temporary directory, no escaped file"
    );
    assert_eq!(names(&dir), before);
    assert_eq!(load_run(&dir.join("report.json")).unwrap().label, "old");
    assert_eq!(fs::read(dir.join("outcomes.jsonl")).unwrap(), b"old");

    // A duplicate name fails the same way.
    let dup = [("a.txt", &b"1"[..]), ("a.txt", &b"2"[..])];
    assert!(matches!(
        write_dir_atomically(&dir, &dup),
        Err(ReportError::DuplicateFileName(_))
    ));
    assert_eq!(names(tmp.path()), ["out"]);
    assert_eq!(names(&dir), before);
}

#[test]
fn a_failure_with_no_previous_report_leaves_no_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nested").join("out");
    let files = [("report.json", &b"{}"[..]), ("", &b""[..])];
    assert!(matches!(
        write_dir_atomically(&dir, &files),
        Err(ReportError::BadFileName(_))
    ));
    assert!(!dir.exists());
    assert!(names(&tmp.path().join("nested")).is_empty());
}

#[test]
fn an_unwritable_parent_is_an_io_error_naming_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("plain-file");
    fs::write(&file, b"").unwrap();
    let err = write_dir_atomically(&file.join("out"), &[("a", &b"1"[..])]).unwrap_err();
    assert!(matches!(err, ReportError::Io { .. }), "{err}");
    assert!(err.to_string().contains("plain-file"), "{err}");
}

#[test]
fn report_verb_renders_earlier_runs_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, a_logs) = sample_run_with_logs("fleet auto", SampleShape::FLEET, 30, 0.1, 1);
    let (b, _) = sample_run_with_logs("fleet auto", SampleShape::PILE, 30, 0.1, 2);
    write_report_dir(&tmp.path().join("auto"), &a, &a_logs, b"").unwrap();
    write_report_dir(&tmp.path().join("pinned"), &b, &[], b"").unwrap();
    let inputs = vec![
        tmp.path().join("auto/report.json"),
        tmp.path().join("pinned/report.json"),
    ];

    // Same label twice: each run is named by its directory.
    let loaded = load_runs(&inputs).unwrap();
    let labels: Vec<&str> = loaded.runs.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["fleet auto [auto]", "fleet auto [pinned]"]);

    let out = tmp.path().join("side-by-side");
    run(Args {
        reports: inputs,
        out: out.clone(),
        force: false,
    })
    .unwrap();
    assert_eq!(names(&out), ["compare.json", "report.html"]);
    let compare: CompareReport =
        serde_json::from_slice(&fs::read(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(compare, loaded);
    let page = fs::read_to_string(out.join("report.html")).unwrap();
    // makespan, bin walk, sim latency, co-tenant, one timeline per run.
    assert_eq!(page.matches("<svg").count(), 6);
    assert!(page.contains("fleet auto [auto]") && page.contains("fleet auto [pinned]"));
    // The first run had its sim log beside it, the second did not.
    assert_eq!(page.matches("(percentiles only)").count(), 1);
}

#[test]
fn report_verb_refuses_a_bad_report_naming_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.json");
    fs::write(&bad, "{\n  \"label\": 1\n}").unwrap();
    let out = tmp.path().join("out");
    let err = run(Args {
        reports: vec![bad],
        out: out.clone(),
        force: false,
    })
    .unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("bad.json") && msg.contains("line 2"), "{msg}");
    assert!(!out.exists(), "nothing written on error");
    let missing = run(Args {
        reports: vec![tmp.path().join("nope.json")],
        out,
        force: false,
    })
    .unwrap_err();
    assert!(format!("{missing:#}").contains("nope.json"));
}
