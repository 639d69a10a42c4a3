//! `fleet-lab route box-plot` end to end: the small box's run directories
//! (as `ci/small-box.sh` writes them) become one row each and the plot;
//! a run the box did not survive keeps its memory figure and loses its
//! rate; a directory that is not a run is refused with a sentence naming
//! it, and nothing is written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleet-lab"))
        .args(args)
        .output()
        .expect("run fleet-lab")
}

/// `fleet-lab route box-plot --out SVG DIR…`.
fn box_plot(svg: &Path, dirs: &[&PathBuf]) -> Output {
    let mut args = vec!["route", "box-plot", "--out", svg.to_str().unwrap()];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    lab(&args)
}

fn group(dir: &Path, anon_mib: u64, oom: u64) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("group.txt"),
        format!(
            "cgroup v1\ncpu_quota_cores 1\nmemory_limit_bytes 268435456\nnr_periods 600\n\
             nr_throttled 12\nthrottled_ms 40\nmemory_peak_bytes 300000000\n\
             anon_peak_bytes_sampled {}\nmemory_limit_hits 0\noom_kills {oom}\n",
            anon_mib * 1024 * 1024
        ),
    )
    .unwrap();
}

fn finished(dir: &Path, devices: u64, leases_per_s: f64, p99_us: u64) {
    group(dir, 150, 0);
    let report = serde_json::json!({
        "devices": devices, "leases_per_s": leases_per_s,
        "lease_us": [300, 900, p99_us, 9000], "deposits_per_s": 1000.0,
    });
    std::fs::write(dir.join("report.json"), report.to_string()).unwrap();
}

#[test]
fn runs_become_rows_and_a_plot_and_a_killed_run_keeps_only_its_memory() {
    let t = tempfile::tempdir().unwrap();
    let (a, b, c) = (t.path().join("a"), t.path().join("b"), t.path().join("c"));
    finished(&a, 10_000, 13_697.0, 2_400);
    finished(&b, 1_000, 10_446.0, 1_800);
    // Killed: an empty report and the population in `devices`.
    group(&c, 256, 1);
    std::fs::write(c.join("report.json"), "").unwrap();
    std::fs::write(c.join("devices"), "100000\n").unwrap();
    let svg = t.path().join("plot/population.svg");
    let o = box_plot(&svg, &[&a, &b, &c]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(1)
        .take(3)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["1000", "10446", "1.80", "150.0", "0"], "{out}");
    assert_eq!(rows[1], ["10000", "13697", "2.40", "150.0", "0"], "{out}");
    assert_eq!(rows[2], ["100000", "-", "-", "256.0", "1"], "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("×: the box did not survive"), "{text}");
}

#[test]
fn a_directory_that_is_not_a_run_is_refused_and_nothing_is_written() {
    let t = tempfile::tempdir().unwrap();
    let good = t.path().join("good");
    finished(&good, 1_000, 10_000.0, 1_000);
    let empty = t.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let killed = t.path().join("killed");
    group(&killed, 256, 1);
    let svg = t.path().join("p.svg");
    for (dir, needle) in [(&empty, "group.txt"), (&killed, "no `devices` file")] {
        let o = box_plot(&svg, &[&good, dir]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(needle) && err.contains(dir.to_str().unwrap()),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(!svg.exists());
    }
    // One population twice.
    let o = box_plot(&svg, &[&good, &good]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("same population"));
    assert!(!svg.exists());
}
