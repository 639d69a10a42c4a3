//! Cycle makespan CDF: one stepped line per run on a log-scale x axis.

use plotters::prelude::*;

use super::legend::{band_height, caption_and_legend, Entry, Marker};
use super::{
    dedup_labels, log_range, log_tick, plot_err, run_colour, DESC_PX, FONT, HEIGHT, TICK_PX, WIDTH,
};
use crate::report::model::RunReport;
use crate::report::ReportError;

/// The points of one run's empirical CDF: every cycle's makespan (ms) from
/// `per_cycle`; a run without per-cycle rows falls back to its percentile
/// points (p50, p95, p99, max).
fn cdf_points(run: &RunReport) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = run
        .per_cycle
        .iter()
        .map(|c| c.makespan_ms)
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    if v.is_empty() {
        let p = &run.makespan_ms;
        return [(p.p50, 0.5), (p.p95, 0.95), (p.p99, 0.99), (p.max, 1.0)]
            .into_iter()
            .filter(|(x, _)| *x > 0.0)
            .collect();
    }
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut pts = Vec::with_capacity(v.len() * 2);
    for (i, x) in v.iter().enumerate() {
        pts.push((*x, i as f64 / n));
        pts.push((*x, (i + 1) as f64 / n));
    }
    pts
}

/// The makespan CDF of `runs` as one SVG document.
///
/// Errors: [`ReportError::Plot`] when drawing fails.
pub(crate) fn makespan_cdf_svg(runs: &[RunReport]) -> Result<String, ReportError> {
    let err = plot_err("makespan cdf");
    let series: Vec<(String, Vec<(f64, f64)>)> = runs
        .iter()
        .map(|r| (r.label.clone(), cdf_points(r)))
        .collect();
    let (lo, hi) = log_range(series.iter().flat_map(|(_, p)| p.iter().map(|(x, _)| *x)))
        .unwrap_or((1.0, 10.0));
    let entries: Vec<Entry> = series
        .iter()
        .enumerate()
        .filter(|(_, (_, pts))| !pts.is_empty())
        .map(|(i, (label, _))| Entry {
            text: label.clone(),
            marker: Marker::Line,
            colour: run_colour(i),
        })
        .collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT + band_height(&entries)))
            .into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        let area = caption_and_legend(&root, "Cycle makespan CDF (end − intended start)", &entries)
            .map_err(&err)?;
        let mut chart = ChartBuilder::on(&area)
            .margin(14)
            .x_label_area_size(52)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (lo..hi)
                    .log_scale()
                    .with_key_points(super::log_keys(lo, hi)),
                0f64..1.0,
            )
            .map_err(&err)?;
        chart
            .configure_mesh()
            .x_desc("cycle makespan, ms (log scale)")
            .y_desc("fraction of cycles ≤ x")
            .axis_desc_style((FONT, DESC_PX))
            .label_style((FONT, TICK_PX))
            .x_label_formatter(&dedup_labels(|v| log_tick(v, lo, hi)))
            .y_label_formatter(&|v| format!("{v:.2}"))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(&err)?;
        for (i, (_, pts)) in series.iter().enumerate() {
            let colour = run_colour(i);
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))
                .map_err(&err)?;
        }
        root.present().map_err(&err)?;
    }
    Ok(svg)
}
