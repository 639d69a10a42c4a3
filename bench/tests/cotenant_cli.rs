//! The host's own work, arrival rates, contention and the comparison gate,
//! end to end through the `fleet-lab` binary.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{corpus, lab, text};

/// Runs `fleet-lab run` with `extra` over 4 cycles at scale 0.01 and
/// returns its report.
fn run_report(dir: &Path, name: &str, extra: &[&str]) -> serde_json::Value {
    let out = dir.join(name);
    let c = corpus();
    let mut args = vec![
        "run",
        "--quiet",
        "--corpus",
        &c,
        "--cycles",
        "4",
        "--scale",
        "0.01",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = lab(&args, dir);
    assert!(o.status.success(), "{name}: {}", text(&o));
    serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap()
}

#[test]
fn the_cotenant_runs_by_default_and_each_mode_reports_what_ran() {
    let dir = tempfile::tempdir().unwrap();
    let on = run_report(dir.path(), "on", &[]);
    assert_eq!(on["cotenant"]["mode"], "on");
    assert!(on["cotenant_lateness_us"]["count"].as_u64().unwrap() > 0);
    // One reserve burst per cycle.
    assert_eq!(on["reserve_task_lateness_us"]["count"], 4);
    assert_eq!(on["cotenant"]["reserve_burst_us"], 200);

    let probe = run_report(dir.path(), "probe", &["--cotenant", "probe"]);
    assert!(probe["cotenant_lateness_us"]["count"].as_u64().unwrap() > 0);
    assert!(probe["reserve_task_lateness_us"].is_null());

    let off = run_report(dir.path(), "off", &["--cotenant", "off"]);
    assert!(off["cotenant_lateness_us"].is_null());
    assert!(off["reserve_task_lateness_us"].is_null());
    assert_eq!(off["parity"], true);

    let o = lab(&["run", "--cotenant", "maybe"], dir.path());
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("probe") && t.contains("off"), "{t}");
}

#[test]
fn the_arrival_rate_sets_the_interval_and_the_report_says_it() {
    let dir = tempfile::tempdir().unwrap();
    let stress = run_report(dir.path(), "stress", &["--rate", "stress"]);
    assert_eq!(stress["arrival_interval_ms"], 10.0);
    let live = run_report(dir.path(), "live", &["--rate", "live"]);
    assert_eq!(live["arrival_interval_ms"], 35.0);
    // The live cycles start 35 ms apart.
    let starts: Vec<f64> = live["per_cycle"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["intended_start_ms"].as_f64().unwrap())
        .collect();
    assert_eq!(starts, [0.0, 35.0, 70.0, 105.0]);
    let explicit = run_report(dir.path(), "explicit", &["--interval-ms", "200"]);
    assert_eq!(explicit["arrival_interval_ms"], 2.0);
    for (bad, says) in [
        (["--rate", "fast"], "live"),
        (["--interval-ms", "0"], "--interval-ms 0 is invalid"),
        (["--interval-ms", "99999999999"], "one day"),
    ] {
        let o = lab(&["run", bad[0], bad[1]], dir.path());
        assert!(!o.status.success(), "{bad:?}");
        assert!(text(&o).contains(says), "{bad:?}: {}", text(&o));
    }
}

#[test]
fn contention_runs_in_a_separate_process_and_ends_with_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let r = run_report(dir.path(), "contend", &["--contend", "1"]);
    assert_eq!(r["contend_threads"], 1);
    assert_eq!(r["contend_class"], "normal");
    let idle = run_report(
        dir.path(),
        "contend-idle",
        &["--contend", "1", "--contend-class", "idle"],
    );
    assert_eq!(idle["contend_class"], "idle");
    let quiet = run_report(dir.path(), "quiet", &[]);
    assert_eq!(quiet["contend_class"], serde_json::Value::Null);
    assert_eq!(r["parity"], true);
    // The spin process is gone once the run has returned.
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let procs = String::from_utf8_lossy(&ps.stdout);
    assert!(
        !procs
            .lines()
            .any(|l| l.contains("fleet-lab spin --threads 1") && !l.contains("--wake-us")),
        "{procs}"
    );
    let o = lab(&["run", "--contend", "999"], dir.path());
    assert!(!o.status.success());
    let o = lab(&["spin", "--threads", "0"], dir.path());
    assert!(!o.status.success());
}

#[test]
fn a_comparison_records_the_hosts_state_and_holds_it_awake_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    for (name, awake, period) in [
        ("as-is", false, None),
        ("awake", true, None),
        ("awake-20", true, Some("20")),
    ] {
        let out = dir.path().join(name);
        let mut args = tiny_compare(&c, "3", &out);
        if awake {
            args.push("--host-awake");
        }
        if let Some(us) = period {
            args.extend(["--awake-wake-us", us]);
        }
        let o = lab(&args, dir.path());
        assert!(o.status.success(), "{name}: {}", text(&o));
        assert!(
            text(&o).contains("Host: ") && text(&o).contains("timer slack"),
            "{}",
            text(&o)
        );
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("compare.json")).unwrap()).unwrap();
        let host = &v["host"];
        assert!(host["cpus"].as_u64().unwrap() >= 1, "{host}");
        assert!(
            host["steal_cpus"].as_f64().is_some_and(|s| s >= 0.0),
            "{host}"
        );
        assert!(host["wall_s"].as_f64().unwrap() > 0.0, "{host}");
        let want = match (awake, period) {
            (false, _) => serde_json::Value::Null,
            (true, None) => serde_json::json!(200),
            (true, Some(us)) => serde_json::json!(us.parse::<u64>().unwrap()),
        };
        assert_eq!(host["awake_wake_us"], want, "{name}: {host}");
    }
    // The waker is gone once the comparison has returned.
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let procs = String::from_utf8_lossy(&ps.stdout);
    assert!(
        !procs
            .lines()
            .any(|l| l.contains("spin --threads") && l.contains("--wake-us")),
        "{procs}"
    );
    let o = lab(&["spin", "--threads", "1", "--wake-us", "0"], dir.path());
    assert!(!o.status.success(), "a zero wake period is refused");
    // A waker's period without the waker, or out of range, is refused
    // before any run.
    for bad in [
        vec!["compare", "--awake-wake-us", "20"],
        vec!["compare", "--host-awake", "--awake-wake-us", "0"],
        vec!["compare", "--host-awake", "--awake-wake-us", "100001"],
    ] {
        let o = lab(&bad, dir.path());
        assert!(!o.status.success(), "{bad:?}: {}", text(&o));
        assert!(
            text(&o).contains("--awake-wake-us"),
            "{bad:?}: {}",
            text(&o)
        );
    }
}

/// `compare --halt-poll-ns` sets the guest's halt-polling window for the
/// comparison, records it in the host state and puts the old value back;
/// where the window cannot be set (no haltpoll driver, not root) the
/// comparison is refused before any run, saying why. Out of range is
/// refused either way.
#[test]
fn a_comparison_sets_the_halt_polling_window_when_asked_and_puts_it_back() {
    const WINDOW: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let out = dir.path().join("polled");
    let before = std::fs::read_to_string(WINDOW).ok();
    let ns: u64 = if before.as_deref().map(str::trim) == Some("12345") {
        23456
    } else {
        12345
    };
    let ns_arg = ns.to_string();
    let mut args = tiny_compare(&c, "2", &out);
    args.extend(["--halt-poll-ns", &ns_arg]);
    let o = lab(&args, dir.path());
    // The window governs the idle only under the haltpoll driver; under
    // another (`none` on some guests of this kind) it is refused.
    let in_use = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver")
        .is_ok_and(|d| d.trim() == "haltpoll");
    let writable = before.is_some() && std::fs::OpenOptions::new().write(true).open(WINDOW).is_ok();
    if writable && in_use {
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            text(&o).contains(&format!("halt polling up to {ns} ns")),
            "{}",
            text(&o)
        );
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("compare.json")).unwrap()).unwrap();
        assert_eq!(
            v["host"]["halt_poll_ns"],
            serde_json::json!(ns),
            "{}",
            v["host"]
        );
        assert_eq!(std::fs::read_to_string(WINDOW).ok(), before, "put back");
    } else {
        assert!(!o.status.success());
        assert!(
            text(&o).contains("cannot set --halt-poll-ns"),
            "{}",
            text(&o)
        );
        assert!(!out.join("compare.json").exists());
    }
    let o = lab(&["compare", "--halt-poll-ns", "10000001"], dir.path());
    assert!(!o.status.success(), "out of range is refused");
}

/// The arguments of a one-round, fleet-only comparison of `cycles` cycles
/// of `corpus` at scale 0.01, its report in `out`.
fn tiny_compare<'a>(corpus: &'a str, cycles: &'a str, out: &'a std::path::Path) -> Vec<&'a str> {
    vec![
        "compare",
        "--quiet",
        "--fleet-only",
        "--rounds",
        "1",
        "--corpus",
        corpus,
        "--cycles",
        cycles,
        "--scale",
        "0.01",
        "--out",
        out.to_str().unwrap(),
    ]
}

/// The scheduling policy and nice value of each thread of process `pid`
/// (fields 41 and 19 of `/proc/PID/task/TID/stat`).
fn classes(pid: u32) -> Vec<(u32, i64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let stat = std::fs::read_to_string(e.unwrap().path().join("stat")).unwrap();
        // The fields after the command name's closing parenthesis start at 3.
        let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        out.push((rest[41 - 3].parse().unwrap(), rest[19 - 3].parse().unwrap()));
    }
    out
}

#[test]
fn the_spin_verb_runs_its_threads_in_the_class_asked() {
    use std::io::Write;
    for (class, want) in [("normal", (0, 0)), ("nice19", (0, 19)), ("idle", (5, 0))] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fleet-lab"))
            .args(["spin", "--threads", "2", "--class", class])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The main thread sets its class before it starts the busy ones.
        let mut seen = classes(child.id());
        while seen.len() < 3 {
            assert!(child.try_wait().unwrap().is_none(), "{class}: spin ended");
            std::thread::yield_now();
            seen = classes(child.id());
        }
        // SCHED_OTHER is 0 and SCHED_IDLE 5.
        assert!(seen.iter().all(|c| *c == want), "{class}: {seen:?}");
        child.stdin.as_mut().unwrap().write_all(b"x").unwrap();
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
    }
    let o = lab(
        &["spin", "--threads", "1", "--class", "realtime"],
        Path::new("."),
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("nice19"), "{}", text(&o));
}

#[test]
fn the_spin_verb_ends_when_its_stdin_closes() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleet-lab"))
        .args(["spin", "--threads", "1"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    child.stdin.as_mut().unwrap().write_all(b"x").unwrap();
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert!(status.success());
}

/// A budgets file whose `[compare]` limits are loose enough for any quiet
/// or busy host, at scale 0.05 and the stress rate.
fn loose_budgets(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("budgets.toml");
    std::fs::write(
        &p,
        r#"
[profile.A]
description = "unused here"
fleet_profile = "auto"
scale = 0.1
block_cycles = 10
pairs = 10
slowdown_tolerance = 1.5
alpha = 0.02
throttled_share_max = 1
threads_created_per_cycle_max = 0
parity = true

[compare]
description = "loose limits for a test"
scale = 0.05
cycles = 6
rate = "stress"
cotenant_p99_over_every_baseline_max = 1000
makespan_p99_over_best_baseline_max = 2.5
makespan_p99_over_pile_max = 2.5
threads_created_per_cycle_max = 0
peak_runnable_over_floor_quota_max = 64
rounds = 5
alpha = 0.05
"#,
    )
    .unwrap();
    p
}

fn compare(dir: &Path, out: &str, budgets: &Path, extra: &[&str]) -> Output {
    let c = corpus();
    let out = dir.join(out);
    let mut args = vec![
        "compare",
        "--quiet",
        "--corpus",
        &c,
        "--cycles",
        "6",
        "--scale",
        "0.05",
        "--gate",
        "--budgets",
        budgets.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    lab(&args, dir)
}

/// A 6× slowed fleet fails both the standing (every round over the
/// baselines' limit) and the rounds paired with its reference (this build
/// as `--reference self`, its own arm slowed).
#[test]
fn a_deliberately_slowed_fleet_fails_the_comparison_gate() {
    let dir = tempfile::tempdir().unwrap();
    let budgets = paired_budgets(dir.path());
    // Every fleet unit 6× slower: its cycle tail is well past 2.5× the
    // baselines' and its mean makespan past 2× its reference's, however
    // noisy the host.
    let o = compare(
        dir.path(),
        "slow",
        &budgets,
        &["--reference", "self", "--inject-fleet-slowdown", "6"],
    );
    assert!(!o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("compare gate: FAIL makespan_p99_over_best_baseline_max"),
        "{t}"
    );
    // Judged over rounds: every round was over the limit.
    assert!(t.contains("over the limit in 5 of 5 rounds"), "{t}");
    assert!(
        t.contains("compare gate: FAIL reference.makespan_tolerance"),
        "{t}"
    );
    assert!(
        t.contains("compare against the reference, mean makespan: 5 of 5 rounds above 2.00×"),
        "{t}"
    );
    // The report is still written: the figures that failed are kept.
    assert!(dir.path().join("slow/compare.json").exists());
    let paired: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("slow/paired.json")).unwrap())
            .unwrap();
    let ratios = paired["makespan_ratios"].as_array().unwrap();
    assert_eq!(ratios.len(), 5, "{paired}");
    assert!(ratios.iter().all(|r| r.as_f64().unwrap() > 2.0), "{paired}");
    // The balanced order: the arms alternate which runs first.
    let firsts: Vec<&str> = paired["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["first"].as_str().unwrap())
        .collect();
    assert_ne!(firsts[0], firsts[1], "{firsts:?}");
    // Each arm's two blocks per round ran `block_cycles` (4) cycles each,
    // while the in-process contenders ran the comparison's 6.
    for p in paired["pairs"].as_array().unwrap() {
        for arm in ["candidate", "reference"] {
            assert_eq!(p[arm]["cycles"], 8, "{arm}: {p}");
        }
    }
    assert!(
        t.contains("2 blocks of each build per round, 4 cycles each"),
        "{t}"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("slow/compare.json")).unwrap())
            .unwrap();
    assert!(report.to_string().contains("\"cycles\":6"), "{report}");
}

/// `loose_budgets` with a `[compare.reference]` table: each round's fleet
/// is paired with the reference's, at tolerances no unslowed build misses.
fn paired_budgets(dir: &Path) -> std::path::PathBuf {
    let p = loose_budgets(dir);
    let mut text = std::fs::read_to_string(&p).unwrap();
    // The pairs' blocks shorter than the comparison's own 6 cycles.
    text.push_str(
        "\n[compare.reference]\nmakespan_tolerance = 2.0\ncotenant_tolerance = 1000\nblock_cycles = 4\n",
    );
    let q = dir.join("paired.toml");
    std::fs::write(&q, text).unwrap();
    q
}

#[test]
fn the_paired_rounds_need_both_the_table_and_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let paired = paired_budgets(dir.path());
    let o = compare(dir.path(), "none", &paired, &[]);
    assert!(!o.status.success());
    assert!(text(&o).contains("no --reference"), "{}", text(&o));
    assert!(!dir.path().join("none").exists());
    let loose = loose_budgets(dir.path());
    let o = compare(dir.path(), "extra", &loose, &["--reference", "self"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--reference without a [compare.reference] table"),
        "{}",
        text(&o)
    );
    let o = compare(
        dir.path(),
        "missing",
        &paired,
        &["--reference", "/no/such/fleet-lab"],
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("no such file"), "{}", text(&o));
}

#[test]
fn the_comparison_gate_refuses_a_run_at_other_conditions_than_its_limits_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let budgets = loose_budgets(dir.path());
    let o = compare(
        dir.path(),
        "live",
        &budgets,
        &["--rate", "live", "--fleet-only"],
    );
    assert!(!o.status.success());
    let t = text(&o);
    // Refused before any run: nothing is written.
    assert!(
        t.contains("cannot be judged") && t.contains("rate live") && t.contains("--fleet-only"),
        "{t}"
    );
    assert!(!dir.path().join("live").exists());
    let o = compare(dir.path(), "off", &budgets, &["--cotenant", "off"]);
    assert!(text(&o).contains("--cotenant off"), "{}", text(&o));
    // A budgets file without [compare] is refused before anything runs.
    let bare = dir.path().join("bare.toml");
    std::fs::write(&bare, "[profile]\n").unwrap();
    let o = compare(dir.path(), "bare", &bare, &[]);
    assert!(!o.status.success());
    assert!(text(&o).contains("no [compare] table"), "{}", text(&o));
    assert!(!dir.path().join("bare").exists());
}
