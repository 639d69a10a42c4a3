//! Per-bin walk time: for each bin index, one box per run (quartiles, median,
//! whiskers at min and max) over a strip of every cycle's walk.

use plotters::prelude::*;

use super::legend::{band_height, caption_and_legend, Entry, Marker};
use super::{
    plot_err, quantile, run_colour, tick, whole_index, DESC_PX, FONT, HEIGHT, TICK_PX, WIDTH,
};
use crate::report::model::RunReport;
use crate::report::ReportError;

/// Walk times (ms) of every cycle, grouped by bin index, each group sorted.
fn by_bin(run: &RunReport) -> Vec<Vec<f64>> {
    let mut bins: Vec<Vec<f64>> = Vec::new();
    for row in &run.per_cycle {
        for (b, ms) in row.bins_walk_ms.iter().enumerate() {
            if !ms.is_finite() {
                continue;
            }
            if bins.len() <= b {
                bins.resize_with(b + 1, Vec::new);
            }
            bins[b].push(*ms);
        }
    }
    for b in &mut bins {
        b.sort_by(f64::total_cmp);
    }
    bins
}

/// A small deterministic jitter in `[-1, 1]` for strip point `i`, so equal
/// values do not hide each other and the page is the same on every render.
fn jitter(i: usize) -> f64 {
    let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    (h as f64 / (1u64 << 24) as f64) * 2.0 - 1.0
}

/// One run's marks: the strip of every cycle's walk, and per bin a box
/// (quartiles), the median line and the whiskers to min and max; `offset`
/// places the run's slot beside the bin index, `half` is half its width.
fn run_marks(
    bins: &[Vec<f64>],
    offset: f64,
    half: f64,
    colour: RGBColor,
) -> (
    Vec<(f64, f64)>,
    Vec<Rectangle<(f64, f64)>>,
    Vec<PathElement<(f64, f64)>>,
) {
    let mut points = Vec::new();
    let mut shapes: Vec<PathElement<(f64, f64)>> = Vec::new();
    let mut boxes = Vec::new();
    for (b, vals) in bins.iter().enumerate() {
        if vals.is_empty() {
            continue;
        }
        let x = b as f64 + offset;
        for (i, v) in vals.iter().enumerate() {
            points.push((x + jitter(i + 7919 * b) * half * 0.8, *v));
        }
        let (q1, med, q3) = (
            quantile(vals, 0.25),
            quantile(vals, 0.5),
            quantile(vals, 0.75),
        );
        let (lo, hi) = (vals[0], vals[vals.len() - 1]);
        boxes.push(Rectangle::new(
            [(x - half, q1), (x + half, q3)],
            colour.stroke_width(2),
        ));
        shapes.push(PathElement::new(
            vec![(x - half, med), (x + half, med)],
            colour.stroke_width(3),
        ));
        shapes.push(PathElement::new(
            vec![(x, lo), (x, q1)],
            colour.stroke_width(1),
        ));
        shapes.push(PathElement::new(
            vec![(x, q3), (x, hi)],
            colour.stroke_width(1),
        ));
        for w in [lo, hi] {
            shapes.push(PathElement::new(
                vec![(x - half / 2.0, w), (x + half / 2.0, w)],
                colour.stroke_width(1),
            ));
        }
    }
    (points, boxes, shapes)
}

/// The per-bin walk-time plot of `runs` as one SVG document.
///
/// Errors: [`ReportError::Plot`] when drawing fails.
pub(crate) fn bin_walk_svg(runs: &[RunReport]) -> Result<String, ReportError> {
    let err = plot_err("bin walk");
    let groups: Vec<Vec<Vec<f64>>> = runs.iter().map(by_bin).collect();
    let nbins = groups.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let y_max = groups
        .iter()
        .flatten()
        .flatten()
        .copied()
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.12;
    let slot = 0.8 / runs.len().max(1) as f64;
    let entries: Vec<Entry> = groups
        .iter()
        .enumerate()
        .filter(|(_, bins)| bins.iter().any(|b| !b.is_empty()))
        .map(|(r, _)| Entry {
            text: runs[r].label.clone(),
            marker: Marker::Square,
            colour: run_colour(r),
        })
        .collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT + band_height(&entries)))
            .into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        let area = caption_and_legend(&root, "Solver walk time per bin (every cycle)", &entries)
            .map_err(&err)?;
        let mut chart = ChartBuilder::on(&area)
            .margin(14)
            .x_label_area_size(52)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..nbins as f64 - 0.5, 0f64..y_max)
            .map_err(&err)?;
        chart
            .configure_mesh()
            .x_desc("bin index")
            .y_desc("walk time, ms")
            .axis_desc_style((FONT, DESC_PX))
            .label_style((FONT, TICK_PX))
            .x_labels(nbins + 1)
            .x_label_formatter(&|v| match whole_index(*v, nbins) {
                Some(b) => format!("bin {b}"),
                None => String::new(),
            })
            .y_label_formatter(&|v| tick(*v))
            .disable_x_mesh()
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(&err)?;
        for (r, bins) in groups.iter().enumerate() {
            let colour = run_colour(r);
            let offset = (r as f64 - (runs.len() as f64 - 1.0) / 2.0) * slot;
            let half = slot * 0.35;
            let (points, boxes, shapes) = run_marks(bins, offset, half, colour);
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 2, colour.mix(0.35).filled())),
                )
                .map_err(&err)?;
            chart.draw_series(boxes).map_err(&err)?;
            chart.draw_series(shapes).map_err(&err)?;
        }
        root.present().map_err(&err)?;
    }
    Ok(svg)
}
