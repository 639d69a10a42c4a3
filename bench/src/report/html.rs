//! `report.html`: one self-contained page for one run or several side by
//! side (issue 7 "Report with plots").
//!
//! The page has inline CSS and inline SVG only: no scripts, no links, no
//! fetches, so it works offline and from a CI artifact. Sections: for
//! several runs the verdict ([`mod@super::verdict`], the sentences the terminal
//! prints), the summary table (the same [`COLUMNS`] as the terminal) and its
//! legend, run details, the
//! makespan CDF (all runs on one chart), per-bin walk time, sim latency, one
//! posture/throttle timeline per run, and the timeline events.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::model::{CounterValue, RunReport};
use super::plot;
use super::summary::COLUMNS;
use super::verdict::{verdict, Figures};
use super::ReportError;

/// Timeline events listed per run in the events table; the rest are
/// counted, not listed, to keep the page small.
pub const MAX_EVENT_ROWS: usize = 200;

const CSS: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#1a1a1a;background:#fff;padding:0 16px}\
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}\
p.meta{color:#555;margin:0 0 12px}\
table{border-collapse:collapse;font-size:14px;margin:6px 0 12px}\
th,td{border:1px solid #d0d0d0;padding:4px 8px}th{background:#f3f3f3;text-align:left}\
td.num{text-align:right;font-variant-numeric:tabular-nums}\
td.fail{color:#b00020;font-weight:bold}td.ok{color:#176d2c;font-weight:bold}\
figure{margin:8px 0 16px}figure svg{max-width:100%;height:auto;border:1px solid #e4e4e4}\
figcaption{font-size:13px;color:#555}#verdict li{margin:2px 0}\
dl#legend{display:grid;grid-template-columns:max-content auto;gap:2px 12px;font-size:13px;color:#444;margin:0 0 12px}dl#legend dt{font-weight:600}dl#legend dd{margin:0}\
caption{text-align:left;font-weight:600;padding:4px 0}\
th{white-space:nowrap}#details td{font-size:13px;overflow-wrap:anywhere}#details{table-layout:fixed;width:100%}";

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Strips an XML declaration so the SVG can sit inline in HTML.
fn inline_svg(svg: &str) -> &str {
    match (svg.starts_with("<?xml"), svg.find("?>")) {
        (true, Some(end)) => svg[end + 2..].trim_start(),
        _ => svg,
    }
}

fn figure(out: &mut String, id: &str, svg: &str, caption: &str) {
    let _ = writeln!(
        out,
        "<figure class=\"plot\" id=\"{}\">{}<figcaption>{}</figcaption></figure>",
        escape(id),
        inline_svg(svg),
        escape(caption)
    );
}

fn summary_table(out: &mut String, runs: &[RunReport]) {
    out.push_str("<table id=\"summary\"><thead><tr>");
    for c in &COLUMNS {
        let _ = write!(out, "<th>{}</th>", escape(c.header));
    }
    out.push_str("</tr></thead><tbody>\n");
    for r in runs {
        out.push_str("<tr>");
        for c in &COLUMNS {
            let text = (c.cell)(r);
            let class = match (c.header, text.as_str()) {
                ("parity", "ok") => "ok",
                ("parity", _) => "fail",
                _ if c.text => "",
                _ => "num",
            };
            let _ = write!(out, "<td class=\"{class}\">{}</td>", escape(&text));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
}

/// One run's detail rows: (key, value), the same keys in the same order for
/// every run; perf counters are added by [`details_table`].
fn detail_rows(r: &RunReport) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut kv = |k: &str, v: String| rows.push((k.to_string(), v));
    run_rows(r, &mut kv);
    load_rows(r, &mut kv);
    latency_rows(r, &mut kv);
    rows
}

/// What ran: profile, scale, outcomes, parity, machine and corpus.
fn run_rows(r: &RunReport, kv: &mut impl FnMut(&str, String)) {
    kv(
        "profile / binding",
        format!(
            "{} / {}{}",
            r.profile,
            r.binding,
            if r.oversubscribed {
                " (oversubscribed)"
            } else {
                ""
            }
        ),
    );
    kv("scale", r.scale.to_string());
    kv("cycles / paths", format!("{} / {}", r.cycles, r.paths));
    kv(
        "outcomes",
        format!(
            "{} solved, {} suppressed, {} failed",
            r.outcomes.solved, r.outcomes.suppressed, r.outcomes.failed
        ),
    );
    let parity = match (&r.first_mismatch, r.parity) {
        (_, true) => "ok".to_string(),
        (Some(m), false) => format!(
            "FAIL at cycle {} path {}: expected {}, got {}",
            m.cycle,
            m.path,
            super::summary::describe_outcome(m.expected.as_ref()),
            super::summary::describe_outcome(m.got.as_ref())
        ),
        (None, false) => "FAIL".to_string(),
    };
    kv("parity", parity);
    let quota = r
        .machine
        .quota
        .map_or_else(|| "unlimited".to_string(), |q| format!("{q} cores"));
    let others = r.machine.other_cpus.map_or_else(
        || "other processes not measured".to_string(),
        |o| format!("other processes kept {o:.1} CPUs busy during the run"),
    );
    kv(
        "machine",
        format!("{} cpus, quota {quota}; {others}", r.machine.cpus),
    );
    kv(
        "corpus",
        format!(
            "{} v{} ({})",
            r.corpus.path, r.corpus.version, r.corpus.checksum
        ),
    );
}

/// What it cost: threads, CPU, throttling, posture, arrivals, saturation.
fn load_rows(r: &RunReport, kv: &mut impl FnMut(&str, String)) {
    kv(
        "threads",
        format!(
            "{} at start, peak {}, {} created, peak runnable {}",
            r.threads.at_start,
            r.threads.peak,
            r.threads.created_during_run,
            r.threads.peak_runnable
        ),
    );
    kv(
        "cpu / wall",
        format!("{:.2} s / {:.2} s", r.cpu_seconds, r.wall_seconds),
    );
    let throttle = r.throttle.map_or_else(
        || "not measured".to_string(),
        |t| {
            format!(
                "{} events, {:.1} ms ({:.2} % of wall), from {}",
                t.events,
                t.throttled_ms,
                t.throttled_share * 100.0,
                t.source.as_str()
            )
        },
    );
    kv("throttle", throttle);
    kv(
        "posture",
        format!(
            "{} enters, {} exits, {:.1} ms cordoned, {} intakes suppressed",
            r.posture.enters, r.posture.exits, r.posture.cordoned_ms, r.posture.intake_suppressed
        ),
    );
    kv(
        "arrivals",
        format!(
            "every {:.1} ms{}; the latest cycle start was {:.1} ms late",
            r.arrival_interval_ms,
            if r.contend_threads > 0 {
                format!(
                    ", {} busy threads ({} class) in a separate process",
                    r.contend_threads,
                    r.contend_class.unwrap_or_default().as_str()
                )
            } else {
                String::new()
            },
            r.peak_start_late_ms
        ),
    );
    kv(
        "saturated",
        r.saturation.map_or_else(
            || "no".to_string(),
            |s| {
                format!(
                    "yes: from cycle {} ({:.0} ms in) the backlog kept growing; the last cycle started {:.0} ms late ({:.1} cycles behind)",
                    s.since_cycle, s.since_ms, s.last_late_ms, s.backlog_cycles
                )
            },
        ),
    );
}

/// How late things were: the co-tenant, sim I/O, the reserve burst, the
/// background, overruns, memory, and each metric's percentiles.
fn latency_rows(r: &RunReport, kv: &mut impl FnMut(&str, String)) {
    let late = |l: Option<crate::lab::Lateness>| {
        l.map_or_else(
            || "not run".to_string(),
            |l| {
                format!(
                    "p50 {:.0} · p99 {:.0} · p99.9 {:.0} · max {:.0} µs · n {}",
                    l.p50, l.p99, l.p999, l.max, l.count
                )
            },
        )
    };
    kv("co-tenant probe lateness", late(r.cotenant_lateness_us));
    kv(
        "sim I/O wake-up",
        r.sim_io_mean_late_us.map_or_else(
            || "no sim waited".to_string(),
            |us| format!("{us:.1} µs after its deadline on average (the shared timer)"),
        ),
    );
    kv("reserve burst lateness", late(r.reserve_task_lateness_us));
    kv("background", background_text(&r.background));
    if let Some(l) = r.lent_reserve {
        kv(
            "reserved core",
            format!(
                "lent at the idle class (decision 0009); the guard took the cycle threads back {} time(s){}",
                l.promotions,
                if l.promoted { ", and held them at the end" } else { "" }
            ),
        );
    }
    kv("receipt overruns", overruns_text(&r.overruns));
    kv("resident set", rss_text(r.rss.as_ref()));
    if let Some(q) = &r.quota_detection {
        kv("quota detection", quota_text(q));
    }
    kv(
        "values above histogram range",
        r.histograms_out_of_range.to_string(),
    );
    for (name, p) in [
        ("makespan ms", &r.makespan_ms),
        (
            "makespan / process lower bound",
            &r.makespan_over_process_bound,
        ),
        ("makespan / plan lower bound", &r.makespan_over_lower_bound),
        ("bin walk ms", &r.bin_walk_ms),
        ("sim latency ms", &r.sim_latency_ms),
    ] {
        kv(
            name,
            format!(
                "p50 {:.3} · p95 {:.3} · p99 {:.3} · max {:.3} · mean {:.3} · n {}",
                p.p50, p.p95, p.p99, p.max, p.mean, p.count
            ),
        );
    }
}

/// The background row: per kind, submitted / completed / refused, then the
/// terminal receipts; "none driven" for a run that drove none.
pub fn background_text(b: &std::collections::BTreeMap<String, u64>) -> String {
    if b.values().all(|&v| v == 0) {
        return "none driven".to_string();
    }
    let get = |k: &str| b.get(k).copied().unwrap_or(0);
    let mut parts = Vec::new();
    for (kind, name) in [("poolupd", "pool updates"), ("crawl", "crawl units")] {
        parts.push(format!(
            "{name}: {} submitted, {} completed, {} refused",
            get(&format!("{kind}_submitted")),
            get(&format!("{kind}_completed")),
            get(&format!("{kind}_refused")),
        ));
    }
    parts.push(format!("{} ended terminally", get("terminal")));
    parts.join("; ")
}

/// The overrun row: the deadline, then units past it by kind and the paths
/// failed as overrun; "not measured" for a report without the figures.
pub fn overruns_text(o: &std::collections::BTreeMap<String, u64>) -> String {
    let Some(deadline) = o.get("deadline_ms") else {
        return "not measured".to_string();
    };
    let get = |k: &str| o.get(k).copied().unwrap_or(0);
    format!(
        "deadline {deadline} ms: {} resolve, {} walk, {} merge, {} background units overran; {} paths Failed(Overrun)",
        get("resolve"),
        get("walk"),
        get("merge"),
        get("background"),
        get("paths"),
    )
}

/// The resident-set row: start, end, peak and the steady growth.
pub fn rss_text(rss: Option<&crate::report::RssFigures>) -> String {
    let Some(r) = rss else {
        return "not measured".to_string();
    };
    let growth = r.growth_kb_per_min.map_or_else(
        || "growth not measured (one sample)".to_string(),
        |g| format!("growth {g:.1} KB/min"),
    );
    let huge = match r.huge_pages_denied {
        Some(true) => "; transparent huge pages off",
        Some(false) => "; transparent huge pages allowed",
        None => "",
    };
    format!(
        "{:.1} MB at the start, {:.1} MB at the end, peak {:.1} MB; {growth} over {} samples{huge}",
        r.start_mb,
        r.end_mb,
        r.peak_mb,
        r.samples.len()
    )
}

/// The quota detection row: the source, the quota, and for an unknown quota
/// the reason.
pub fn quota_text(q: &crate::report::QuotaDetection) -> String {
    let quota = q
        .quota
        .map_or_else(|| "no quota".to_string(), |c| format!("{c} cores"));
    match &q.unknown_reason {
        Some(why) => format!("quota unknown: {why}"),
        None => format!("{} ({quota})", q.source),
    }
}

/// The details table: one row per key, one column per run (side by side).
fn details_table(out: &mut String, runs: &[RunReport]) {
    out.push_str("<table id=\"details\"><thead><tr><th></th>");
    for r in runs {
        let _ = write!(out, "<th>{}</th>", escape(&r.label));
    }
    out.push_str("</tr></thead><tbody>\n");
    let per_run: Vec<Vec<(String, String)>> = runs.iter().map(detail_rows).collect();
    let mut counters: Vec<&String> = runs
        .iter()
        .filter_map(|r| r.perf_counters.as_ref())
        .flat_map(|c| c.keys())
        .collect();
    counters.sort();
    counters.dedup();
    let row = |out: &mut String, key: &str, cells: Vec<String>| {
        let _ = write!(out, "<tr><th>{}</th>", escape(key));
        for c in cells {
            let _ = write!(out, "<td>{}</td>", escape(&c));
        }
        out.push_str("</tr>\n");
    };
    // Every key any run has, in first-seen order; a run without a row
    // (a detail only some runs have, e.g. the lent reserve) shows "—".
    let mut keys: Vec<&str> = Vec::new();
    for rows in &per_run {
        for (k, _) in rows {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
    }
    for key in keys {
        let cells = per_run
            .iter()
            .map(|rows| {
                rows.iter()
                    .find(|(k, _)| k == key)
                    .map_or_else(|| "—".to_string(), |(_, v)| v.clone())
            })
            .collect();
        row(out, key, cells);
    }
    for name in counters {
        let cells = runs
            .iter()
            .map(
                |r| match r.perf_counters.as_ref().and_then(|c| c.get(name)) {
                    Some(CounterValue::Value(n)) => n.to_string(),
                    Some(CounterValue::Skipped { skipped }) => format!("skipped: {skipped}"),
                    None => "-".to_string(),
                },
            )
            .collect();
        row(out, &format!("perf {name}"), cells);
    }
    out.push_str("</tbody></table>\n");
}

fn events_table(out: &mut String, r: &RunReport) {
    let _ = write!(
        out,
        "<table class=\"events\"><caption>{}: {} events</caption><thead><tr><th>t (ms)</th><th>kind</th><th>detail</th></tr></thead><tbody>",
        escape(&r.label),
        r.timeline.len()
    );
    for e in r.timeline.iter().take(MAX_EVENT_ROWS) {
        let _ = write!(
            out,
            "<tr><td class=\"num\">{:.1}</td><td>{}</td><td>{}</td></tr>",
            e.t_ms,
            e.kind.as_str(),
            escape(&e.detail)
        );
    }
    if r.timeline.len() > MAX_EVENT_ROWS {
        let _ = write!(
            out,
            "<tr><td colspan=\"3\">… {} more in report.json</td></tr>",
            r.timeline.len() - MAX_EVENT_ROWS
        );
    }
    out.push_str("</tbody></table>\n");
}

/// [`render_html_with`] without histograms: the sim-latency plot shows each
/// run's percentile points only.
///
/// Errors: as [`render_html_with`].
pub fn render_html(runs: &[RunReport]) -> Result<String, ReportError> {
    render_html_with(runs, &[])
}

/// Renders the page for `runs` (one run, or several side by side in the
/// order given). The page holds `3 + runs.len()` inline SVGs (one more when
/// any run measured the co-tenant): makespan CDF, bin walk, sim latency,
/// the co-tenant's lateness, then one timeline per run. `sim_latency[i]`, where
/// present, is run `i`'s sim-latency histogram (µs ticks, as read back from
/// `sim_latency.hlog`), drawn as a full percentile spectrum.
///
/// Errors: [`ReportError::NoRuns`] for an empty slice, [`ReportError::Plot`]
/// when a plot cannot be drawn.
pub fn render_html_with(
    runs: &[RunReport],
    sim_latency: &[Option<Histogram<u64>>],
) -> Result<String, ReportError> {
    if runs.is_empty() {
        return Err(ReportError::NoRuns);
    }
    let labels: Vec<&str> = runs.iter().map(|r| r.label.as_str()).collect();
    let mut out = String::with_capacity(256 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>fleet-lab report: {}</title><style>{CSS}</style></head><body>\n",
        escape(&labels.join(" vs "))
    );
    let _ = writeln!(
        out,
        "<h1>fleet-lab report</h1><p class=\"meta\">{} run(s): {}</p>",
        runs.len(),
        escape(&labels.join(", "))
    );
    if runs.len() > 1 {
        out.push_str("<h2>Verdict</h2>\n<ul id=\"verdict\">");
        let figures: Vec<Figures> = runs.iter().map(Figures::of).collect();
        for line in verdict(&figures) {
            let _ = write!(out, "<li>{}</li>", escape(&line));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<h2>Summary</h2>\n");
    summary_table(&mut out, runs);
    out.push_str(
        "<p class=\"meta\">Makespan is end − intended start per cycle.</p>\n<dl id=\"legend\">",
    );
    for c in &COLUMNS {
        let _ = write!(
            out,
            "<dt>{}</dt><dd>{}</dd>",
            escape(c.header),
            escape(c.meaning)
        );
    }
    out.push_str("</dl>\n");
    out.push_str("<h2>Runs</h2>\n");
    details_table(&mut out, runs);
    out.push_str("<h2>Cycle makespan</h2>\n");
    figure(
        &mut out,
        "makespan-cdf",
        &plot::makespan_cdf_svg(runs)?,
        "Empirical CDF of cycle makespan, one line per run, log-scale x axis.",
    );
    out.push_str("<h2>Bin walk time</h2>\n");
    figure(&mut out, "bin-walk", &plot::bin_walk_svg(runs)?, "Each bin's solver walk over every cycle: box = quartiles, bar = median, whiskers = min and max, dots = cycles.");
    out.push_str("<h2>Simulation latency</h2>\n");
    figure(&mut out, "sim-latency", &plot::sim_latency_svg(runs, sim_latency)?, "Every simulation's latency by percentile; the x axis spreads the tail (90 %, 99 %, 99.9 % one decade apart); the last point of each line is the max.");
    if plot::any_cotenant(runs) {
        out.push_str("<h2>The host's own work</h2>\n");
        figure(&mut out, "cotenant", &plot::cotenant_svg(runs)?, "The co-tenant beside every run, in the same process and cgroup: a probe that wakes every 1 ms (how late it woke) and a CPU burst at each cycle start (how late it finished, beyond its duration alone). Lower is better: the host's latency-critical work is not held up.");
    }
    out.push_str("<h2>Posture and throttle timeline</h2>\n");
    for (i, r) in runs.iter().enumerate() {
        figure(
            &mut out,
            &format!("timeline-{i}"),
            &plot::timeline_svg(r)?,
            &format!("{}: cycle makespan at its intended start; shaded = cordoned; red ticks = throttle events; purple lines = retunes.", r.label),
        );
    }
    out.push_str("<h2>Timeline events</h2>\n");
    for r in runs {
        events_table(&mut out, r);
    }
    out.push_str("</body></html>\n");
    Ok(out)
}
