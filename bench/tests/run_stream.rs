//! `fleet-lab run --stream DIR`: each cycle's row and outcomes go to disk as
//! the run goes, nothing per cycle is kept in memory, and the report's
//! figures (cycles, outcome counts, parity, latency counts) equal those of
//! the same run kept whole; the latency interval logs are written to disk
//! as the run goes too; the resident set size is sampled into the report
//! either way.

use std::path::Path;
use std::process::Command;

fn run(dir: &Path, name: &str, extra: &[&str]) -> serde_json::Value {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/golden-v1.txt");
    let out = dir.join(name);
    let o = Command::new(env!("CARGO_BIN_EXE_fleet-lab"))
        .args(["run", "--quiet", "--cycles", "12", "--scale", "0.01"])
        .args(extra)
        .arg("--corpus")
        .arg(&corpus)
        .arg("--out")
        .arg(&out)
        .env("RUST_LOG", "error")
        .output()
        .expect("fleet-lab runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap()
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

#[test]
fn a_streamed_run_writes_rows_as_it_goes_and_reports_the_same_figures() {
    let dir = tempfile::tempdir().unwrap();
    let stream = dir.path().join("stream");
    let streamed = run(
        dir.path(),
        "streamed",
        &["--stream", stream.to_str().unwrap()],
    );
    let kept = run(dir.path(), "kept", &[]);
    for r in [&streamed, &kept] {
        assert_eq!(r["cycles"], 12);
        assert_eq!(r["parity"], true);
        assert_eq!(r["makespan_ms"]["count"], 12);
    }
    assert_eq!(streamed["outcomes"], kept["outcomes"]);
    assert_eq!(streamed["paths"], kept["paths"]);
    assert_eq!(
        streamed["bin_walk_ms"]["count"],
        kept["bin_walk_ms"]["count"]
    );
    assert_eq!(
        streamed["sim_latency_ms"]["count"],
        kept["sim_latency_ms"]["count"]
    );
    // Kept whole: the rows are in the report; streamed: on disk only.
    assert_eq!(kept["per_cycle"].as_array().unwrap().len(), 12);
    assert!(kept["streamed_to"].is_null());
    assert!(streamed["per_cycle"].as_array().unwrap().is_empty());
    assert_eq!(streamed["streamed_to"], stream.display().to_string());
    let rows = lines(&stream.join("cycles.jsonl"));
    assert_eq!(rows.len(), 12);
    assert_eq!(
        rows.iter()
            .map(|r| r["cycle"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        kept["per_cycle"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["cycle"].as_u64().unwrap())
            .collect::<Vec<_>>()
    );
    let outcomes = lines(&stream.join("outcomes.jsonl"));
    assert_eq!(outcomes.len() as u64, streamed["paths"].as_u64().unwrap());
    let kept_outcomes = lines(&dir.path().join("kept/outcomes.jsonl"));
    assert_eq!(
        outcomes, kept_outcomes,
        "the same outcomes, in the same order"
    );
    // Each metric's interval log was written to the stream directory as the
    // run went, and the report directory holds the same log, whole.
    for (file, field) in [
        ("makespan.hlog", "makespan_ms"),
        ("bin_walk.hlog", "bin_walk_ms"),
        ("sim_latency.hlog", "sim_latency_ms"),
        (
            "makespan_over_lower_bound.hlog",
            "makespan_over_lower_bound",
        ),
        (
            "makespan_over_process_bound.hlog",
            "makespan_over_process_bound",
        ),
    ] {
        let live = std::fs::read(stream.join(file)).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("streamed").join(file)).unwrap(),
            live,
            "{file}"
        );
        let total = fleet_bench::report::read_log_histogram(&live).unwrap();
        assert_eq!(
            total.len(),
            streamed[field]["count"].as_u64().unwrap(),
            "{file}"
        );
        let kept_log = std::fs::read(dir.path().join("kept").join(file)).unwrap();
        let kept_total = fleet_bench::report::read_log_histogram(&kept_log).unwrap();
        assert_eq!(kept_total.len(), total.len(), "{file}");
        assert!(String::from_utf8(live)
            .unwrap()
            .contains("out of range (not recorded): 0"));
    }
    // The resident set is sampled at least at the start and the end.
    for r in [&streamed, &kept] {
        let rss = &r["rss"];
        assert!(rss["samples"].as_array().unwrap().len() >= 2, "{rss}");
        assert!(rss["start_mb"].as_f64().unwrap() > 0.0, "{rss}");
        assert!(rss["peak_mb"].as_f64().unwrap() >= rss["end_mb"].as_f64().unwrap());
        assert!(rss["growth_kb_per_min"].as_f64().is_some(), "{rss}");
    }
    let page = std::fs::read_to_string(dir.path().join("streamed/report.html")).unwrap();
    assert!(
        page.contains("resident set"),
        "the page shows the resident set"
    );
}

#[test]
fn rss_figures_fit_a_steady_growth_and_need_samples() {
    use fleet_bench::report::RssFigures;
    assert_eq!(RssFigures::from_kib_samples(&[]), None);
    // 1 MiB at the start, growing 1 KiB a second: 61.44 KB per minute.
    let samples: Vec<(f64, u64)> = (0..120).map(|s| (s as f64, 1024 + s)).collect();
    let f = RssFigures::from_kib_samples(&samples).unwrap();
    assert!((f.growth_kb_per_min.unwrap() - 61.44).abs() < 1e-6, "{f:?}");
    assert!((f.start_mb - 1.048576).abs() < 1e-9);
    assert_eq!(f.peak_mb, f.end_mb);
    assert_eq!(f.samples.len(), 120);
    let one = RssFigures::from_kib_samples(&[(0.0, 2048)]).unwrap();
    assert_eq!(one.growth_kb_per_min, None);
}
