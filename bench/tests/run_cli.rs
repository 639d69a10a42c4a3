//! `fleet-lab run`, `parity` and `gate` end to end through the binary: the
//! outcome never depends on scale, bad input is refused plainly and leaves
//! nothing behind, and the gates can fail.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{corpus, lab, text};

#[path = "run_cli/gates.rs"]
mod gates;
#[path = "run_cli/refusals.rs"]
mod refusals;

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
fn the_configs_profile_and_budget_reach_the_runs_plan() {
    // `plan --config` applied the profile and `[budget]`; a run once took
    // only the posture and pump tables from the same file and planned
    // `auto` with the default budget.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("fleet.toml");
    std::fs::write(&cfg, "profile = \"pinned\"\n[budget]\nsim_slot_cap = 6\n").unwrap();
    let c = corpus();
    let run = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let out_s = out.to_str().unwrap().to_string();
        let mut args = vec![
            "run", "--quiet", "--corpus", &c, "--cycles", "1", "--scale", "0.01", "--out", &out_s,
        ];
        args.extend(extra);
        let o = lab(&args, dir.path());
        assert!(o.status.success(), "{name}: {}", text(&o));
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        let sims = report["census"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|row| row["role"] == "sim_driver")
            .count();
        (report["profile"].as_str().unwrap().to_string(), sims)
    };
    let cfg_s = cfg.to_str().unwrap();
    assert_eq!(run("plain", &[]), ("auto".to_string(), 4), "the defaults");
    assert_eq!(
        run("config", &["--config", cfg_s]),
        ("pinned".to_string(), 6),
        "the config's profile and sim slot cap"
    );
    assert_eq!(
        run("flag", &["--config", cfg_s, "--profile", "serial"]),
        ("serial".to_string(), 6),
        "the flag wins over the config's profile"
    );
}

fn fails_saying(o: &Output, want: &str) {
    assert!(!o.status.success(), "must fail: {}", text(o));
    assert!(text(o).contains(want), "expected {want:?} in: {}", text(o));
    assert!(!text(o).contains("panicked"), "{}", text(o));
}

#[test]
fn refused_background_submits_are_counted_per_kind_in_the_report_and_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let c = corpus();
    let o = lab(
        &[
            "run",
            "--quiet",
            "--corpus",
            &c,
            "--cycles",
            "5",
            "--scale",
            "0.02",
            "--rate",
            "stress",
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
            // 20 cycles at the live rate (350 ms apart at the default
            // scale): about 7 s for the two operator calls below to land.
            "--cycles",
            "20",
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
