//! The terminal summary and the compare table.

use fleet_bench::report::sample::{sample_run, SampleShape};
use fleet_bench::report::summary::COLUMNS;
use fleet_bench::report::{render_compare_table, render_run_summary, RunReport};

fn runs() -> Vec<RunReport> {
    let mut fleet = sample_run("fleet auto", SampleShape::FLEET, 30, 1.0, 1);
    let mut pile = sample_run("pile of pools", SampleShape::PILE, 30, 1.0, 2);
    fleet.makespan_ms.p50 = 177.0;
    fleet.makespan_ms.p99 = 352.25;
    pile.parity = false;
    pile.throttle = None;
    vec![fleet, pile]
}

#[test]
fn compare_table_has_a_header_a_rule_and_one_aligned_row_per_run() {
    let runs = runs();
    let t = render_compare_table(&runs);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 2 + runs.len());
    for c in &COLUMNS {
        assert!(lines[0].contains(c.header), "header {:?} missing", c.header);
    }
    assert!(lines[1].chars().all(|c| c == '-'));
    assert!(lines[2].starts_with("fleet auto "));
    assert!(lines[3].starts_with("pile of pools"));
    // Right-aligned numeric columns end at the same offset on every line:
    // the header's "p50 ms" ends where each row's p50 value ends.
    let end = lines[0].find("p50 ms").unwrap() + "p50 ms".len();
    assert_eq!(&lines[2][end - 3..end], "177");
    assert!(
        lines[2].contains(" 352 ") || lines[2].contains(" 352.2"),
        "{}",
        lines[2]
    );
    assert!(lines[3].trim_end().ends_with("FAIL"));
    assert!(lines[2].trim_end().ends_with("ok"));
    // A run without throttle figures shows a dash, not a zero.
    let throttle_col = COLUMNS
        .iter()
        .position(|c| c.header == "throttle ev")
        .unwrap();
    assert_eq!((COLUMNS[throttle_col].cell)(&runs[1]), "-");
}

#[test]
fn every_column_renders_for_every_run() {
    for r in runs() {
        for c in &COLUMNS {
            let cell = (c.cell)(&r);
            assert!(!cell.is_empty(), "{} empty for {}", c.header, r.label);
            assert!(!cell.contains('\n'));
        }
    }
}

#[test]
fn run_summary_names_every_part() {
    let mut r = runs().remove(0);
    r.histograms_out_of_range = 3;
    let s = render_run_summary(&r);
    for part in [
        "run:",
        "machine:",
        "outcomes:",
        "parity:     ok",
        "makespan:",
        "/proc lb:",
        "/plan lb:",
        "co-tenant:  late p50",
        "a probe waking every 1000 µs",
        "reserve:    late p50",
        "CPU burst at each cycle start",
        "saturated:  no",
        "bin walk:",
        "sim:",
        "threads:",
        "cpu:",
        "throttle:",
        "posture:",
        "perf:",
        "WARNING:",
        "3 values above",
        "instructions skipped (not supported)",
        "from injected",
    ] {
        assert!(s.contains(part), "{part:?} missing in\n{s}");
    }
    assert!(s.contains("fleet auto"));
}

#[test]
fn counters_skipped_for_one_reason_are_named_together_once() {
    use fleet_bench::report::CounterValue;
    let mut r = runs().remove(0);
    let mut c = std::collections::BTreeMap::new();
    c.insert("context_switches".to_string(), CounterValue::Value(7));
    for k in ["cycles", "instructions"] {
        c.insert(
            k.to_string(),
            CounterValue::Skipped {
                skipped: format!("not supported: this host exposes no {k} counter; errno 2"),
            },
        );
    }
    r.perf_counters = Some(c);
    r.throttle = None;
    let s = render_run_summary(&r);
    assert!(
        s.contains("perf:       context_switches 7, cycles and instructions skipped (not supported: this host exposes no such counter; errno 2)"),
        "{s}"
    );
    assert!(s.contains("throttle:   not measured: "), "{s}");
}
