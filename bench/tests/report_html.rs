//! The HTML page's structure: the summary table, one SVG per plot with its
//! axis descriptions and run labels, nothing fetched from anywhere.

use fleet_bench::report::sample::{sample_run, sample_run_with_logs, SampleShape};
use fleet_bench::report::summary::COLUMNS;
use fleet_bench::report::{
    read_log_histogram, render_html, render_html_with, Metric, ReportError, RunReport,
};

fn svgs(page: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").expect("every svg is closed") + start + 6;
        out.push(&rest[start..end]);
        rest = &rest[end..];
    }
    out
}

/// The text of every `<text>` element of an SVG, trimmed.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .map(|t| {
            let body = &t[t.find('>').unwrap() + 1..];
            body[..body.find("</text>").unwrap()].trim().to_string()
        })
        .collect()
}

/// The axis descriptions each plot must carry, in page order.
const AXES: [(&str, &str); 5] = [
    ("cycle makespan, ms (log scale)", "fraction of cycles ≤ x"),
    ("bin index", "walk time, ms"),
    (
        "percentile (log scale of 1 / (1 − q))",
        "sim latency, ms (log scale)",
    ),
    ("statistic", "lateness, µs (log)"),
    ("time since the run started, s", "cycle makespan, ms"),
];

fn assert_offline(page: &str) {
    for banned in [
        "<script", "<link", "src=", "@import", "url(", "<iframe", "<img", "<object",
    ] {
        assert!(!page.contains(banned), "page contains {banned:?}");
    }
    // The only "http" on the page is the SVG namespace, which is a name,
    // never fetched.
    let ns = "http://www.w3.org/2000/svg";
    assert_eq!(page.matches("http").count(), page.matches(ns).count());
}

fn check_page(page: &str, runs: &[RunReport]) {
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("<meta charset=\"utf-8\">"));
    assert!(page.contains("<style>"));
    assert!(page.trim_end().ends_with("</html>"));
    assert_offline(page);

    // The summary table: every column header, one row per run with its label.
    let table_start = page.find("<table id=\"summary\">").expect("summary table");
    let table = &page[table_start..table_start + page[table_start..].find("</table>").unwrap()];
    for c in &COLUMNS {
        assert!(
            table.contains(&format!("<th>{}</th>", c.header)),
            "column {}",
            c.header
        );
    }
    assert_eq!(table.matches("<tr>").count(), 1 + runs.len());
    for r in runs {
        assert!(
            table.contains(&format!("<td class=\"\">{}</td>", r.label)),
            "row for {}",
            r.label
        );
    }
    assert!(page.contains("<table id=\"details\">"));

    // 4 shared plots (the sample runs measured a co-tenant) + one timeline
    // per run.
    let svgs = svgs(page);
    assert_eq!(svgs.len(), 4 + runs.len());
    for (i, svg) in svgs.iter().enumerate() {
        let t = texts(svg);
        let (x, y) = AXES[i.min(4)];
        assert!(
            t.iter().any(|s| s == x),
            "svg {i} lacks x axis label {x:?}: {t:?}"
        );
        assert!(
            t.iter().any(|s| s == y),
            "svg {i} lacks y axis label {y:?}: {t:?}"
        );
        let numeric_ticks = t.iter().filter(|s| s.parse::<f64>().is_ok()).count();
        if i != 2 {
            assert!(
                numeric_ticks >= 4,
                "svg {i} has {numeric_ticks} numeric tick labels"
            );
        }
        let labels: Vec<&RunReport> = if i < 4 {
            runs.iter().collect()
        } else {
            vec![&runs[i - 4]]
        };
        for r in labels {
            assert!(
                t.iter().any(|s| s.contains(&r.label)),
                "svg {i} does not name run {:?}: {t:?}",
                r.label
            );
        }
        assert!(svg.contains("viewBox="), "svg {i} scales with the page");
    }
    // Percentile ticks on the sim plot.
    let sim = texts(svgs[2]);
    for p in ["90%", "99%", "99.9%"] {
        assert!(
            sim.iter().any(|s| s == p),
            "sim plot lacks the {p} tick: {sim:?}"
        );
    }
    // Bin ticks on the bin plot.
    let bins = texts(svgs[1]);
    for b in 0..6 {
        assert!(
            bins.iter().any(|s| *s == format!("bin {b}")),
            "bin {b} tick missing"
        );
    }
}

#[test]
fn one_run_page_has_table_four_plots_and_no_fetches() {
    let runs = vec![sample_run("fleet auto", SampleShape::FLEET, 120, 1.0, 5)];
    let page = render_html(&runs).unwrap();
    check_page(&page, &runs);
    assert!(
        page.contains("(percentiles only)"),
        "no histogram given: percentile points"
    );
}

#[test]
fn compare_page_puts_every_run_on_the_shared_charts() {
    let runs = vec![
        sample_run("fleet auto", SampleShape::FLEET, 100, 1.0, 5),
        sample_run("fleet pinned", SampleShape::FLEET, 100, 1.0, 6),
        sample_run("pile of pools", SampleShape::PILE, 100, 1.0, 7),
    ];
    let page = render_html(&runs).unwrap();
    check_page(&page, &runs);
}

#[test]
fn a_histogram_gives_the_full_sim_spectrum() {
    let (run, logs) = sample_run_with_logs("fleet auto", SampleShape::FLEET, 60, 0.1, 5);
    let log = logs
        .iter()
        .find(|l| l.file_name == Metric::SimLatency.file_name())
        .unwrap();
    let h = read_log_histogram(&log.bytes).unwrap();
    assert_eq!(h.len(), run.sim_latency_ms.count);
    let runs = vec![run];
    let page = render_html_with(&runs, &[Some(h)]).unwrap();
    check_page(&page, &runs);
    assert!(!page.contains("(percentiles only)"));
}

#[test]
fn labels_and_details_are_escaped() {
    let mut r = sample_run("<b>fleet & co</b>", SampleShape::FLEET, 10, 0.1, 5);
    r.timeline[0].detail = "<script>alert(1)</script>".into();
    let page = render_html(&[r]).unwrap();
    assert!(!page.contains("<b>fleet"));
    assert!(!page.contains("<script"));
    assert!(page.contains("&lt;b&gt;fleet &amp; co&lt;/b&gt;"));
}

#[test]
fn a_run_without_per_cycle_rows_or_events_still_renders() {
    let mut r = sample_run("bare", SampleShape::FLEET, 10, 0.1, 5);
    r.per_cycle.clear();
    r.timeline.clear();
    r.throttle = None;
    r.perf_counters = None;
    let page = render_html(&[r.clone()]).unwrap();
    assert_eq!(svgs(&page).len(), 5);
    // Without a co-tenant figure the page leaves its plot out.
    r.cotenant_lateness_us = None;
    r.reserve_task_lateness_us = None;
    let page = render_html(&[r]).unwrap();
    assert_eq!(svgs(&page).len(), 4);
    assert_offline(&page);
}

#[test]
fn no_runs_is_an_error() {
    assert!(matches!(render_html(&[]), Err(ReportError::NoRuns)));
}

#[test]
fn a_page_of_several_runs_opens_with_the_verdict_and_explains_every_column() {
    use fleet_bench::report::{verdict, Figures};
    let mut pile = sample_run("pile of pools", SampleShape::PILE, 40, 0.1, 2);
    pile.profile = "baseline".into();
    let runs = [
        sample_run("fleet auto", SampleShape::FLEET, 40, 0.1, 1),
        pile,
    ];
    let page = render_html(&runs).unwrap();
    let at = |needle: &str| {
        page.find(needle)
            .unwrap_or_else(|| panic!("{needle} missing"))
    };
    assert!(at("<ul id=\"verdict\">") < at("<table id=\"summary\">"));
    let sentences = verdict(&runs.iter().map(Figures::of).collect::<Vec<_>>());
    assert!(sentences
        .iter()
        .any(|s| s.starts_with("fleet auto against pile of pools: cycle p99 ")));
    for s in &sentences {
        let html = s
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(page.contains(&format!("<li>{html}</li>")), "{s}");
    }
    for c in &COLUMNS {
        assert!(
            page.contains(&format!(
                "<dd>{}</dd>",
                c.meaning.replace('&', "&amp;").replace('\'', "&#39;")
            )),
            "{}",
            c.header
        );
    }
    let single = render_html(&runs[..1]).unwrap();
    assert!(!single.contains("id=\"verdict\""), "one run has no verdict");
}

/// `(y, text)` of every `<text>` element of an SVG.
fn placed_texts(svg: &str) -> Vec<(f64, String)> {
    svg.split("<text")
        .skip(1)
        .map(|t| {
            let tag = &t[..t.find('>').unwrap()];
            let y = tag.split(" y=\"").nth(1).unwrap();
            let y: f64 = y[..y.find('"').unwrap()].parse().unwrap();
            let body = &t[t.find('>').unwrap() + 1..];
            (y, body[..body.find("</text>").unwrap()].trim().to_string())
        })
        .collect()
}

/// The `cy` of every data dot (radius 2) of an SVG.
fn data_dot_ys(svg: &str) -> Vec<f64> {
    svg.split("<circle")
        .skip(1)
        .filter(|c| c[..c.find('>').unwrap()].contains(" r=\"2\""))
        .map(|c| {
            let y = c.split(" cy=\"").nth(1).unwrap();
            y[..y.find('"').unwrap()].parse().unwrap()
        })
        .collect()
}

#[test]
fn legends_sit_above_the_data_and_list_only_markers_that_occur() {
    use fleet_bench::report::{TimelineEvent, TimelineKind};
    let mut quiet = sample_run("quiet run", SampleShape::FLEET, 40, 0.1, 1);
    quiet.timeline.clear();
    let mut tuned = sample_run("tuned run", SampleShape::PILE, 40, 0.1, 2);
    tuned.timeline = vec![TimelineEvent {
        t_ms: 500.0,
        kind: TimelineKind::Retune,
        detail: "cordon_duty_percent: 2 -> 3".into(),
    }];
    let mut busy = sample_run("busy run", SampleShape::PILE, 40, 0.1, 3);
    let event = |t_ms: f64, kind| TimelineEvent {
        t_ms,
        kind,
        detail: String::new(),
    };
    busy.timeline = vec![
        event(300.0, TimelineKind::Throttle),
        event(310.0, TimelineKind::PostureEnter),
        event(900.0, TimelineKind::PostureExit),
    ];
    let runs = [quiet, tuned, busy];
    let page = render_html(&runs).unwrap();
    let svgs = svgs(&page);
    let legend = |svg: &str| -> Vec<String> {
        let kinds = ["cordoned", "cycle makespan", "throttle event", "retune"];
        placed_texts(svg)
            .into_iter()
            .map(|(_, t)| t)
            .filter(|t| kinds.contains(&t.as_str()))
            .collect()
    };
    assert_eq!(legend(svgs[4]), ["cycle makespan"], "quiet run");
    assert_eq!(legend(svgs[5]), ["cycle makespan", "retune"], "tuned run");
    assert_eq!(
        legend(svgs[6]),
        ["cordoned", "cycle makespan", "throttle event"],
        "busy run"
    );
    // Every legend text is above every data dot: the legend has its own
    // band between the caption and the chart.
    for (i, svg) in svgs.iter().enumerate() {
        let names: Vec<String> = if i == 1 {
            runs.iter().map(|r| r.label.clone()).collect()
        } else if i >= 4 {
            legend(svg)
        } else {
            continue;
        };
        let texts = placed_texts(svg);
        let lowest_legend = texts
            .iter()
            .filter(|(_, t)| names.contains(t))
            .map(|(y, _)| *y)
            .fold(f64::NEG_INFINITY, f64::max);
        assert!(lowest_legend.is_finite(), "svg {i} has a legend");
        let top_dot = data_dot_ys(svg).into_iter().fold(f64::INFINITY, f64::min);
        assert!(
            lowest_legend + 15.0 < top_dot,
            "svg {i}: legend text at y {lowest_legend} overlaps data at y {top_dot}"
        );
    }
}

#[test]
fn the_run_details_say_how_busy_other_processes_kept_the_host() {
    let mut r = sample_run("fleet auto", SampleShape::FLEET, 10, 0.1, 1);
    r.machine.other_cpus = Some(0.64);
    let page = render_html(std::slice::from_ref(&r)).unwrap();
    assert!(page.contains("other processes kept 0.6 CPUs busy during the run"));
    r.machine.other_cpus = None;
    let page = render_html(&[r]).unwrap();
    assert!(page.contains("other processes not measured"));
}

/// A detail only some runs have (the lent reserve of a serial fleet) gets
/// its row, with "—" for the runs without it; a page of such runs renders
/// (it once indexed every run by the first run's rows and panicked).
#[test]
fn a_detail_only_some_runs_have_gets_a_row_with_a_dash_for_the_others() {
    let mut lent = sample_run("fleet auto", SampleShape::FLEET, 20, 0.1, 1);
    lent.lent_reserve = Some(fleet_bindings::LentReserve {
        promotions: 2,
        promoted: false,
    });
    let plain = sample_run("fleet pinned", SampleShape::FLEET, 20, 0.1, 2);
    for runs in [vec![plain.clone(), lent.clone()], vec![lent, plain]] {
        let page = render_html(&runs).expect("renders");
        let row = page
            .split("<tr>")
            .find(|r| r.contains("<th>reserved core</th>"))
            .expect("a reserved-core row");
        assert!(
            row.contains("took the cycle threads back 2 time(s)"),
            "{row}"
        );
        assert!(row.contains("<td>—</td>"), "{row}");
    }
}
