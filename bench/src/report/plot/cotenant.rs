//! The host's own work per run: the co-tenant probe's wake-up lateness and
//! the reserve load's completion lateness at p50, p99, p99.9 and max, one
//! bar per run in each group, on a log axis (µs).

use plotters::prelude::*;

use super::legend::{band_height, caption_and_legend, Entry, Marker};
use super::{plot_err, run_colour, tick, DESC_PX, FONT, HEIGHT, TICK_PX, WIDTH};
use crate::lab::Lateness;
use crate::report::model::RunReport;
use crate::report::ReportError;

/// One group along the x axis: its label, whether it reads the probe (else
/// the reserve load), and the statistic it shows.
type Group = (&'static str, bool, fn(&Lateness) -> f64);

/// The groups along the x axis.
const GROUPS: [Group; 8] = [
    ("probe p50", true, |l| l.p50),
    ("probe p99", true, |l| l.p99),
    ("probe p99.9", true, |l| l.p999),
    ("probe max", true, |l| l.max),
    ("reserve p50", false, |l| l.p50),
    ("reserve p99", false, |l| l.p99),
    ("reserve p99.9", false, |l| l.p999),
    ("reserve max", false, |l| l.max),
];

fn figure(r: &RunReport, probe: bool) -> Option<Lateness> {
    if probe {
        r.cotenant_lateness_us
    } else {
        r.reserve_task_lateness_us
    }
}

/// Whether any run measured a co-tenant (the page leaves the plot out
/// otherwise).
pub(crate) fn any_cotenant(runs: &[RunReport]) -> bool {
    runs.iter().any(|r| r.cotenant_lateness_us.is_some())
}

/// The co-tenant plot of `runs` as one SVG document; runs without a figure
/// draw no bar in its groups.
///
/// Errors: [`ReportError::Plot`] when drawing fails.
pub(crate) fn cotenant_svg(runs: &[RunReport]) -> Result<String, ReportError> {
    let err = plot_err("co-tenant");
    let values: Vec<f64> = runs
        .iter()
        .flat_map(|r| {
            GROUPS
                .iter()
                .filter_map(|(_, probe, stat)| figure(r, *probe).map(|l| stat(&l)))
        })
        .collect();
    let y_max = values.iter().copied().fold(1.0f64, f64::max) * 2.0;
    let entries: Vec<Entry> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.cotenant_lateness_us.is_some() || r.reserve_task_lateness_us.is_some())
        .map(|(i, r)| Entry {
            text: r.label.clone(),
            marker: Marker::Square,
            colour: run_colour(i),
        })
        .collect();
    let slot = 0.8 / runs.len().max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT + band_height(&entries)))
            .into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        let area = caption_and_legend(
            &root,
            "The host's own work: how late the 1 ms probe woke and the reserve burst finished",
            &entries,
        )
        .map_err(&err)?;
        let mut chart = ChartBuilder::on(&area)
            .margin(14)
            .x_label_area_size(52)
            .y_label_area_size(80)
            .build_cartesian_2d(
                -0.5f64..GROUPS.len() as f64 - 0.5,
                (1.0f64..y_max).log_scale(),
            )
            .map_err(&err)?;
        chart
            .configure_mesh()
            .x_desc("statistic")
            .y_desc("lateness, µs (log)")
            .axis_desc_style((FONT, DESC_PX))
            .label_style((FONT, TICK_PX))
            .x_labels(GROUPS.len() + 1)
            .x_label_formatter(&|v| {
                let i = v.round();
                if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < GROUPS.len() {
                    GROUPS[i as usize].0.to_string()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| tick(*v))
            .disable_x_mesh()
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(&err)?;
        for (r, run) in runs.iter().enumerate() {
            let colour = run_colour(r);
            let offset = (r as f64 - (runs.len() as f64 - 1.0) / 2.0) * slot;
            let bars: Vec<Rectangle<(f64, f64)>> = GROUPS
                .iter()
                .enumerate()
                .filter_map(|(g, (_, probe, stat))| {
                    let v = stat(&figure(run, *probe)?).max(1.0);
                    let x = g as f64 + offset;
                    Some(Rectangle::new(
                        [(x - slot * 0.45, 1.0), (x + slot * 0.45, v)],
                        colour.filled(),
                    ))
                })
                .collect();
            chart.draw_series(bars).map_err(&err)?;
        }
        root.present().map_err(&err)?;
    }
    Ok(svg)
}
