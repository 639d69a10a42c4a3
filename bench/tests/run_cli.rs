//! `fleet-lab run`, `parity` and `gate` end to end through the binary: the
//! outcome never depends on scale, bad input is refused plainly and leaves
//! nothing behind, and the gates can fail.

use std::path::Path;
use std::process::{Command, Output};

mod common;
use common::{corpus, lab, text};

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

fn fails_saying(o: &Output, want: &str) {
    assert!(!o.status.success(), "must fail: {}", text(o));
    assert!(text(o).contains(want), "expected {want:?} in: {}", text(o));
    assert!(!text(o).contains("panicked"), "{}", text(o));
}

#[test]
fn run_refuses_an_existing_file_as_out_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("notes.txt");
    std::fs::write(&out, "keep me").unwrap();
    let c = corpus();
    let args = |force: bool| {
        let mut a = vec![
            "run", "--quiet", "--corpus", &c, "--cycles", "1", "--scale", "0.01", "--out",
        ];
        a.push(out.to_str().unwrap());
        if force {
            a.push("--force");
        }
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let refused = args(false);
    let refused: Vec<&str> = refused.iter().map(String::as_str).collect();
    let o = lab(&refused, dir.path());
    fails_saying(&o, "already exists and is not a directory");
    fails_saying(&o, "--force");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "nothing else may be written");

    let forced = args(true);
    let forced: Vec<&str> = forced.iter().map(String::as_str).collect();
    let o = lab(&forced, dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.join("report.json").is_file());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["notes.txt"], "no hidden copy is left behind");
}

#[test]
fn corpus_generate_never_replaces_a_file_without_out_and_force() {
    let dir = tempfile::tempdir().unwrap();
    let shipped = std::fs::read(corpus()).unwrap();
    let o = lab(
        &["corpus", "generate", "--seed", "2", "--cycles", "5"],
        dir.path(),
    );
    fails_saying(&o, "--out");
    assert_eq!(
        std::fs::read(corpus()).unwrap(),
        shipped,
        "shipped corpus untouched"
    );

    let out = dir.path().join("mine.txt");
    std::fs::write(&out, "keep me").unwrap();
    let gen = |extra: &[&str]| {
        let mut a = vec![
            "corpus", "generate", "--seed", "2", "--cycles", "2", "--out",
        ];
        a.push(out.to_str().unwrap());
        a.extend(extra);
        lab(&a, dir.path())
    };
    fails_saying(&gen(&[]), "already exists");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
    let o = gen(&["--force"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_ne!(std::fs::read_to_string(&out).unwrap(), "keep me");
}

#[test]
fn numeric_arguments_are_bounded_with_plain_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fails_saying(&lab(&["plan", "--quota", "1e9"], d), "at most 4096");
    let o = lab(&["plan", "--quota", "inf"], d);
    fails_saying(&o, "not finite");
    assert!(!text(&o).contains("not a positive number"), "{}", text(&o));
    fails_saying(&lab(&["plan", "--quota", "-2"], d), "--quota -2 is invalid");
    fails_saying(&lab(&["run", "--quota", "5000"], d), "at most 4096");
    fails_saying(&lab(&["run", "--cycles", "0"], d), "at least 1 cycle");
    let o = lab(&["run", "--scale", "-1"], d);
    fails_saying(&o, "--scale -1 is invalid: give a positive number");
    assert!(!text(&o).contains("unexpected argument"), "{}", text(&o));
    fails_saying(
        &lab(
            &["posture", "set", "--cordon-enter-window-ms", "86400001"],
            d,
        ),
        "one day",
    );
    fails_saying(
        &lab(&["corpus", "generate", "--cycles", "0", "--out", "x"], d),
        "at least 1 cycle",
    );
    fails_saying(
        &lab(
            &["corpus", "generate", "--cycles", "4000000000", "--out", "x"],
            d,
        ),
        "--cycles 4000000000 is invalid: at most 100000 cycles",
    );
    assert!(
        std::fs::read_dir(d).unwrap().next().is_none(),
        "nothing written"
    );
}

#[test]
fn an_unwritable_out_is_refused_before_the_run_starts() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let started = std::time::Instant::now();
    let o = lab(
        &["run", "--quiet", "--corpus", &c, "--out", "/proc/forbidden"],
        dir.path(),
    );
    fails_saying(&o, "--out /proc/forbidden cannot be written");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "refused at once, not after the run"
    );
    assert!(
        !text(&o).contains("parity"),
        "no run happened: {}",
        text(&o)
    );
}

#[test]
fn error_texts_say_each_thing_once_and_fit_what_failed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = lab(&["run", "--quiet", "--corpus", "missing.txt"], d);
    fails_saying(&o, "missing.txt");
    assert_eq!(
        text(&o).matches("No such file or directory").count(),
        1,
        "{}",
        text(&o)
    );
    let o = lab(&["plan", "--quota", "0"], d);
    fails_saying(&o, "--quota 0 is invalid");
    assert_eq!(text(&o).matches("is invalid").count(), 1, "{}", text(&o));
    let o = lab(&["report", "missing.json", "--out", "r"], d);
    fails_saying(&o, "missing.json");
    assert!(
        !text(&o).contains("writable"),
        "a read failure: {}",
        text(&o)
    );
}

#[test]
fn compare_gate_and_report_refuse_an_existing_file_as_out() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("notes.txt");
    std::fs::write(&out, "keep me").unwrap();
    let o = out.to_str().unwrap();
    let c = corpus();
    let budgets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/budgets.toml");
    let b = budgets.to_str().unwrap();
    for args in [
        vec![
            "compare", "--quiet", "--corpus", &c, "--cycles", "1", "--out", o,
        ],
        vec![
            "gate",
            "--profile",
            "A",
            "--budgets",
            b,
            "--quiet",
            "--corpus",
            &c,
            "--out",
            o,
        ],
        vec!["report", "missing.json", "--out", o],
    ] {
        fails_saying(
            &lab(&args, dir.path()),
            "already exists and is not a directory",
        );
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
    }
}

#[test]
fn refused_background_submits_are_counted_per_kind_in_the_report_and_page() {
    let dir = tempfile::tempdir().unwrap();
    let budgets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/budgets.toml");
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
            "5",
            "--gate-scale",
            "0.02",
            "--budgets",
            budgets.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--inject-refuse-background",
        ],
        dir.path(),
    );
    assert!(!text(&o).contains("panicked"), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let bg = &report["background"];
    // One pool update per cycle, refused; the crawl stops at its first
    // refusal each cycle and tries again on the next.
    assert_eq!(bg["poolupd_refused"], 5, "{bg}");
    assert_eq!(bg["crawl_refused"], 5, "{bg}");
    assert_eq!(bg["poolupd_submitted"], 0, "{bg}");
    assert_eq!(bg["crawl_submitted"], 0, "{bg}");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("pool updates: 0 submitted, 0 completed, 5 refused"),
        "the page shows the refusals"
    );
    assert!(page.contains("crawl units: 0 submitted, 0 completed, 5 refused"));
}

#[test]
fn an_operator_retune_on_a_live_run_reaches_the_timeline_and_the_page() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let c = corpus();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleet-lab"))
        .args([
            "run",
            "--quiet",
            "--corpus",
            &c,
            "--cycles",
            "80",
            "--operator-addr",
            "127.0.0.1:0",
            "--out",
            out.to_str().unwrap(),
        ])
        .current_dir(dir.path())
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fleet-lab runs");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut addr = None;
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        if let Some(rest) = line
            .trim()
            .strip_prefix("fleet-lab: posture operator channel on http://")
        {
            addr = rest.strip_suffix("/posture").map(str::to_string);
            break;
        }
        line.clear();
    }
    let addr = addr.unwrap_or_else(|| panic!("no operator address announced: {line}"));
    let set = lab(
        &[
            "posture",
            "set",
            "--addr",
            &addr,
            "--cordon-duty-percent",
            "3",
        ],
        dir.path(),
    );
    assert!(set.status.success(), "{}", text(&set));
    let same = lab(
        &[
            "posture",
            "set",
            "--addr",
            &addr,
            "--cordon-duty-percent",
            "3",
        ],
        dir.path(),
    );
    assert!(same.status.success(), "{}", text(&same));
    // Drain the rest of stderr so the run never blocks on a full pipe.
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{rest}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let retunes: Vec<&serde_json::Value> = report["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "retune")
        .collect();
    assert_eq!(retunes.len(), 2, "{}", report["timeline"]);
    assert_eq!(retunes[0]["detail"], "cordon_duty_percent: 2 -> 3");
    assert_eq!(retunes[1]["detail"], "no change");
    assert!(retunes[0]["t_ms"].as_f64().unwrap() > 0.0);
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("cordon_duty_percent: 2 -&gt; 3"),
        "the page lists the retune"
    );
}

/// Busy loops in other processes, one per CPU this process may use; killed
/// on drop.
struct BusyLoops(Vec<std::process::Child>);

impl BusyLoops {
    fn start() -> Self {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
        BusyLoops(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("sh runs")
                })
                .collect(),
        )
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn the_busy_host_warning_counts_other_processes_and_names_each_run() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let busy = BusyLoops::start();
    let o = lab(
        &[
            "parity", "--quiet", "--corpus", &c, "--cycles", "8", "--scale", "0.05",
        ],
        dir.path(),
    );
    drop(busy);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    for run in ["fleet pinned", "fleet serial"] {
        assert!(
            err.contains(&format!(
                "warning: the host was busy during the {run} run: other processes kept"
            )),
            "{err}"
        );
    }
}

#[test]
fn config_values_are_bounded_like_the_command_line_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let cfg = dir.path().join("fleet.toml");
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    std::fs::write(&cfg, "[posture]\ncordon_exit_clean_ms = 99999999999\n").unwrap();
    let cf = cfg.to_str().unwrap();
    for verb in ["run", "compare", "parity"] {
        let mut args = vec![verb, "--quiet", "--corpus", &c, "--config", cf];
        if verb != "parity" {
            args.extend(["--out", o]);
        }
        let r = lab(&args, dir.path());
        fails_saying(
            &r,
            &format!(
                "config {cf}: [posture] cordon_exit_clean_ms = 99999999999 is invalid: at most 86400000 ms (one day)"
            ),
        );
        assert!(!text(&r).contains("parity ok"), "nothing ran: {}", text(&r));
        assert!(!out.exists(), "nothing written for {verb}");
    }
    std::fs::write(&cfg, "[budget]\nsolver_cpus = 1000000000\n").unwrap();
    fails_saying(
        &lab(
            &["run", "--corpus", &c, "--config", cf, "--out", o],
            dir.path(),
        ),
        "[budget] solver_cpus = 1000000000 is invalid: at most 4096 cores",
    );
    std::fs::write(&cfg, "[posture]\ncordon_enter_window_ms = 0\n").unwrap();
    fails_saying(
        &lab(
            &["run", "--corpus", &c, "--config", cf, "--out", o],
            dir.path(),
        ),
        &format!("config {cf}: fleet config [posture]: cordon_enter_window_ms = 0 is invalid"),
    );
    let r = Command::new(env!("CARGO_BIN_EXE_fleet-lab"))
        .args(["run", "--corpus", &c, "--out", o])
        .current_dir(dir.path())
        .env("DEGENBOT_PUMP_UNUSED", "1")
        .env("DEGENBOT_BACKSTOP_INTERVAL_MS", "86400001")
        .output()
        .unwrap();
    fails_saying(
        &r,
        "environment variable DEGENBOT_BACKSTOP_INTERVAL_MS: [pump] backstop_interval_ms = 86400001",
    );
    assert!(!out.exists());
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
