//! Simulation latency as a percentile spectrum (HdrHistogram's classic
//! plot): latency (log y) against percentile, on an x axis of `1 / (1 − q)`
//! in log scale so 90 %, 99 %, 99.9 % sit one decade apart and the tail is
//! as wide as the body.
//!
//! With the run's histogram (read from `sim_latency.hlog`) the whole
//! spectrum is drawn; without it, the report's p50/p95/p99/max points are.

use hdrhistogram::Histogram;
use plotters::prelude::*;

use super::legend::{band_height, caption_and_legend, Entry, Marker};
use super::{
    dedup_labels, log_range, log_tick, plot_err, run_colour, tick, DESC_PX, FONT, HEIGHT, TICK_PX,
    WIDTH,
};
use crate::report::hdr::TICKS_PER_UNIT;
use crate::report::model::{Percentiles, RunReport};
use crate::report::ReportError;

/// Where the max sits on the x axis: `1 / (1 − q)` for `q = (n − ½) / n`,
/// at least 200 so it lies right of p99.
fn max_x(count: u64) -> f64 {
    (2.0 * count as f64).max(200.0)
}

/// The x coordinate of quantile `q < 1`.
fn x_of(q: f64) -> f64 {
    1.0 / (1.0 - q)
}

/// The axis label for an x coordinate: the percentile it stands for.
pub(crate) fn percentile_label(x: f64) -> String {
    if x < 1.0 {
        return String::new();
    }
    let p = (1.0 - 1.0 / x) * 100.0;
    let mut digits = 0;
    while digits < 6 && ((p * 10f64.powi(digits)).round() - p * 10f64.powi(digits)).abs() > 1e-6 {
        digits += 1;
    }
    format!("{p:.*}%", digits as usize)
}

/// Points from the report's percentiles only.
fn points_from_percentiles(p: &Percentiles) -> Vec<(f64, f64)> {
    [
        (x_of(0.5), p.p50),
        (x_of(0.95), p.p95),
        (x_of(0.99), p.p99),
        (max_x(p.count), p.max),
    ]
    .into_iter()
    .filter(|(_, v)| v.is_finite() && *v > 0.0)
    .collect()
}

/// Points of the full spectrum of a histogram in ticks (µs), in ms.
pub(crate) fn points_from_histogram(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut pts: Vec<(f64, f64)> = h
        .iter_quantiles(4)
        .map(|v| (v.quantile_iterated_to(), v.value_iterated_to()))
        .filter(|(q, _)| *q < 1.0)
        .map(|(q, v)| (x_of(q), v as f64 / TICKS_PER_UNIT))
        .filter(|(_, v)| *v > 0.0)
        .collect();
    pts.push((max_x(h.len()), h.max() as f64 / TICKS_PER_UNIT));
    pts
}

/// One run's line: its label, its points, and whether they are the full
/// spectrum (else the percentile points only).
type Series = (String, Vec<(f64, f64)>, bool);

/// The sim-latency plot of `runs` as one SVG document; `hists[i]`, where
/// present, is run `i`'s sim-latency histogram (ticks = µs).
///
/// Errors: [`ReportError::Plot`] when drawing fails.
pub(crate) fn sim_latency_svg(
    runs: &[RunReport],
    hists: &[Option<Histogram<u64>>],
) -> Result<String, ReportError> {
    let err = plot_err("sim latency");
    let series: Vec<Series> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| match hists.get(i).and_then(Option::as_ref) {
            Some(h) if !h.is_empty() => (r.label.clone(), points_from_histogram(h), true),
            _ => (
                r.label.clone(),
                points_from_percentiles(&r.sim_latency_ms),
                false,
            ),
        })
        .collect();
    let (lo, hi) = log_range(
        series
            .iter()
            .flat_map(|(_, p, _)| p.iter().map(|(_, v)| *v)),
    )
    .unwrap_or((0.1, 10.0));
    let x_hi = series
        .iter()
        .flat_map(|(_, p, _)| p.iter().map(|(x, _)| *x))
        .fold(1000.0f64, f64::max)
        * 1.5;
    let entries: Vec<Entry> = series
        .iter()
        .zip(runs)
        .enumerate()
        .filter(|(_, ((_, pts, _), _))| !pts.is_empty())
        .map(|(i, ((label, _, full), run))| {
            let p = &run.sim_latency_ms;
            Entry {
                text: format!(
                    "{label}: n = {}, mean {} ms{}",
                    p.count,
                    tick(p.mean),
                    if *full { "" } else { " (percentiles only)" }
                ),
                marker: if *full { Marker::Line } else { Marker::Dot },
                colour: run_colour(i),
            }
        })
        .collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT + band_height(&entries)))
            .into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        let area = caption_and_legend(
            &root,
            "Simulation latency by percentile (submit to result)",
            &entries,
        )
        .map_err(&err)?;
        let mut chart = ChartBuilder::on(&area)
            .margin(14)
            .x_label_area_size(52)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (1f64..x_hi).log_scale(),
                (lo..hi)
                    .log_scale()
                    .with_key_points(super::log_keys(lo, hi)),
            )
            .map_err(&err)?;
        chart
            .configure_mesh()
            .x_desc("percentile (log scale of 1 / (1 − q))")
            .y_desc("sim latency, ms (log scale)")
            .axis_desc_style((FONT, DESC_PX))
            .label_style((FONT, TICK_PX))
            .x_label_formatter(&dedup_labels(percentile_label))
            .y_label_formatter(&dedup_labels(|v| log_tick(v, lo, hi)))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(&err)?;
        for (i, (_, pts, full)) in series.iter().enumerate() {
            let colour = run_colour(i);
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))
                .map_err(&err)?;
            if !*full {
                chart
                    .draw_series(pts.iter().map(|p| Circle::new(*p, 4, colour.filled())))
                    .map_err(&err)?;
            }
        }
        root.present().map_err(&err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_labels_read_as_percentiles() {
        assert_eq!(percentile_label(1.0), "0%");
        assert_eq!(percentile_label(2.0), "50%");
        assert_eq!(percentile_label(10.0), "90%");
        assert_eq!(percentile_label(100.0), "99%");
        assert_eq!(percentile_label(1000.0), "99.9%");
        assert_eq!(percentile_label(10000.0), "99.99%");
        assert_eq!(percentile_label(0.5), "");
    }

    #[test]
    fn spectrum_ends_at_the_exact_max_and_rises() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 100).unwrap();
        }
        let pts = points_from_histogram(&h);
        assert!(pts.len() > 10);
        assert!(pts.windows(2).all(|w| w[1].0 >= w[0].0 && w[1].1 >= w[0].1));
        let last = pts.last().unwrap();
        assert_eq!(last.0, 2000.0);
        assert!((last.1 - 100.0).abs() / 100.0 < 1e-3, "max {last:?}");
    }
}
