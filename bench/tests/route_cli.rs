//! `fleet-lab route …` end to end: bad input is refused with one plain
//! sentence and exit status 2 before anything runs; a tiny simulation
//! writes its report directory and a second run refuses a foreign `--out`.

use std::process::{Command, Output};

fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleet-lab"))
        .args(args)
        .output()
        .expect("run fleet-lab")
}

/// The run's stdout, after asserting it succeeded (stderr in the message).
fn succeeded(o: &Output) -> String {
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

fn assert_refused(args: &[&str], needle: &str) {
    let out = lab(args);
    assert_eq!(out.status.code(), Some(2), "{args:?} must exit 2");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(needle),
        "{args:?}: stderr {err:?} should contain {needle:?}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "no panic: {err}"
    );
}

#[test]
fn numbers_out_of_range_are_refused_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let out = out.to_str().unwrap();
    let sim = |extra: &[&str]| {
        let mut a = vec![
            "route",
            "sim",
            "--scenario",
            "steady",
            "--out",
            out,
            "--quiet",
        ];
        a.extend_from_slice(extra);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    for (extra, needle) in [
        (vec!["--devices", "0"], "--devices 0 is invalid"),
        (vec!["--devices", "100001"], "at most 100000 devices"),
        (vec!["--devices", "-5"], "--devices -5 is invalid"),
        (vec!["--devices", "many"], "is not a number"),
        (vec!["--hours", "0"], "--hours 0 is invalid"),
        (vec!["--hours", "inf"], "not finite"),
        (vec!["--hours", "200"], "at most 168 hours"),
        (vec!["--tick-s", "0.5"], "--tick-s 0.5 is invalid"),
        (vec!["--contenders", "router,oracle"], "unknown contender"),
        (vec!["--seed", "-1"], "--seed -1 is invalid"),
        (vec!["--seeds", "5-1"], "LOW at most HIGH"),
        (vec!["--seeds", "1,1"], "each seed once"),
        (vec!["--seeds", "1-2", "--seed", "3"], "cannot be used with"),
        (vec!["--store", "postgres://x"], "--http"),
        (vec!["--routerd", "/bin/true"], "--http"),
        (
            vec!["--http", "--store", "mysql://x"],
            "must be a postgres:// URL",
        ),
        (
            vec!["--http", "--routerd", "/nonexistent/routerd"],
            "is not a file",
        ),
        (
            vec![
                "--http",
                "--routerd",
                "/bin/true",
                "--contenders",
                "router,greedy",
            ],
            "only the router runs",
        ),
    ] {
        let args = sim(&extra);
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        assert_refused(&refs, needle);
    }
    assert_refused(
        &["route", "sim", "--scenario", "monsoon", "--out", out],
        "unknown scenario",
    );
    assert!(!dir.path().join("r").exists(), "nothing was written");
    assert_refused(
        &["route", "load", "--threads", "0"],
        "--threads 0 is invalid",
    );
    assert_refused(
        &["route", "load", "--seconds", "0.01"],
        "--seconds 0.01 is invalid",
    );
    assert_refused(
        &["route", "load", "--store", "mysql://x"],
        "--store must be a postgres:// URL",
    );
    assert_refused(
        &["route", "load", "--routerd", "/nonexistent/routerd"],
        "is not a file",
    );
}

#[test]
fn a_tiny_run_writes_its_report_and_a_foreign_out_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sim");
    let o = out.to_str().unwrap();
    let args = [
        "route",
        "sim",
        "--scenario",
        "liars",
        "--devices",
        "12",
        "--hours",
        "0.1",
        "--contenders",
        "router,fixed-quorum",
        "--quiet",
        "--out",
        o,
    ];
    let run = lab(&args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains("fixed-quorum") && stdout.contains("report:"),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["scenario"], "liars");
    assert_eq!(json["contenders"].as_array().unwrap().len(), 2);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 6, "six plots");
    // A report directory may be replaced; a file may not, without --force.
    assert!(lab(&args).status.success());
    let file = dir.path().join("plain.txt");
    std::fs::write(&file, "keep me").unwrap();
    let mut foreign = args.to_vec();
    let f = file.to_str().unwrap();
    *foreign.last_mut().unwrap() = f;
    assert_refused(&foreign, "already exists");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}

#[test]
fn compare_runs_every_scenario_into_one_table_and_a_page_each() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let run = lab(&[
        "route",
        "compare",
        "--devices",
        "8",
        "--hours",
        "0.05",
        "--contenders",
        "router",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let table = String::from_utf8_lossy(&run.stdout);
    for s in [
        "steady",
        "drought",
        "regime-change",
        "liars",
        "adapter-bug",
        "budget-saturation",
        "cold-start",
    ] {
        assert!(table.contains(s), "{s} in {table}");
        assert!(out.join(format!("{s}.html")).is_file(), "{s}.html");
    }
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 7);
}

#[test]
fn a_run_over_seeds_writes_the_spread_and_the_adapter_check() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("seeds");
    let o = lab(&[
        "route",
        "sim",
        "--scenario",
        "adapter-bug",
        "--seeds",
        "1-2",
        "--devices",
        "30",
        "--hours",
        "0.5",
        "--contenders",
        "router,dawid-skene",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = succeeded(&o);
    assert!(stdout.contains("over seeds 1,2"), "{stdout}");
    assert!(
        stdout.contains("adapter-bug against its control (2 seeds, router)"),
        "{stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("seeds.json")).unwrap()).unwrap();
    assert_eq!(summary["seeds"], serde_json::json!([1, 2]));
    let rows = summary["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["scenario"] == "adapter-bug"));
    let cells = rows[0]["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    assert_eq!(cells[1]["contender"], "dawid-skene");
    assert_eq!(cells[0]["spread"]["values"].as_array().unwrap().len(), 2);
    let check = &summary["adapter_check"];
    assert_eq!(check["seeds"], serde_json::json!([1, 2]));
    assert!(check["bug_deltas"].as_array().unwrap().len() >= 2);
    assert!(check["test"]["p_less"].is_number());
    for f in [
        "seeds.md",
        "report.html",
        "adapter-bug-seed-1.json",
        "adapter-bug-seed-2.html",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
}

#[test]
fn a_world_file_runs_and_a_bad_one_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("w.toml");
    std::fs::write(
        &world,
        "name = \"two-waves\"\ndescription = \"two waves of sources, a short drought\"\n\
         [sources]\ncount = 6\ntargets_per_source = 3\narrival_waves = 2\n\
         [events.drought]\nfrom = \"1/4\"\nto = 0.5\n",
    )
    .unwrap();
    let out = dir.path().join("r");
    let o = lab(&[
        "route",
        "sim",
        "--world",
        world.to_str().unwrap(),
        "--devices",
        "20",
        "--hours",
        "0.5",
        "--contenders",
        "router",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = succeeded(&o);
    assert!(stdout.contains("scenario two-waves"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["scenario"], "two-waves");
    assert_eq!(report["world"]["sources"], 6);
    assert_eq!(
        report["world"]["event_s"],
        serde_json::json!([450.0, 900.0])
    );

    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "name = \"x\"\ndescription = \"d\"\n[sources]\ncount = 6\ntargets_per_source = 3\n\
         [events.regime_change]\nsource = 9\narchetype = \"browser\"\nat = 0.5\n",
    )
    .unwrap();
    let o = lab(&[
        "route",
        "sim",
        "--world",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("events.regime_change.source"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    std::fs::write(&bad, "name = \"x\"\nwalls = 3\n").unwrap();
    let o = lab(&[
        "route",
        "sim",
        "--world",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown field `walls`"));
    assert_refused(
        &["route", "sim", "--world", "w.toml", "--scenario", "steady"],
        "cannot be used with",
    );
    let o = lab(&[
        "route",
        "sim",
        "--world",
        "/nonexistent/w.toml",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read the world file"));
}
