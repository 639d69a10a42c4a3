//! One run's timeline: every cycle's makespan at its intended start, with
//! cordoned spans shaded, throttle events as red ticks and retunes as
//! purple markers.

use plotters::prelude::*;

use super::legend::{band_height, caption_and_legend, Entry, Marker};
use super::{plot_err, tick, DESC_PX, FONT, HEIGHT, TICK_PX, WIDTH};
use crate::report::model::RunReport;
use crate::report::timeline::TimelineKind;
use crate::report::ReportError;

const CORDON: RGBColor = RGBColor(255, 204, 128);
const THROTTLE: RGBColor = RGBColor(200, 30, 30);
const RETUNE: RGBColor = RGBColor(120, 60, 170);
const MAKESPAN: RGBColor = RGBColor(0, 114, 178);

/// Cordoned spans `(from, to)` in seconds, from posture enter/exit events
/// in time order; a cordon still open at the end runs to `end_s`.
pub(crate) fn cordon_spans(run: &RunReport, end_s: f64) -> Vec<(f64, f64)> {
    let mut events: Vec<_> = run
        .timeline
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                TimelineKind::PostureEnter | TimelineKind::PostureExit
            )
        })
        .collect();
    events.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
    let mut spans = Vec::new();
    let mut open: Option<f64> = None;
    for e in events {
        let t = e.t_ms / 1000.0;
        match (e.kind, open) {
            (TimelineKind::PostureEnter, None) => open = Some(t),
            (TimelineKind::PostureExit, Some(from)) => {
                spans.push((from, t));
                open = None;
            }
            _ => {}
        }
    }
    if let Some(from) = open {
        spans.push((from, end_s.max(from)));
    }
    spans
}

/// The legend of a timeline: only the markers the plot draws, in a fixed
/// order (cordoned spans, cycle makespans, throttle events, retunes).
pub(crate) fn timeline_entries(
    cordoned: bool,
    cycles: bool,
    throttles: bool,
    retunes: bool,
) -> Vec<Entry> {
    [
        (cordoned, "cordoned", Marker::Square, CORDON),
        (cycles, "cycle makespan", Marker::Dot, MAKESPAN),
        (throttles, "throttle event", Marker::Tick, THROTTLE),
        (retunes, "retune", Marker::Tick, RETUNE),
    ]
    .into_iter()
    .filter(|(drawn, ..)| *drawn)
    .map(|(_, text, marker, colour)| Entry {
        text: text.to_string(),
        marker,
        colour,
    })
    .collect()
}

/// The timeline plot of one run as one SVG document.
///
/// Errors: [`ReportError::Plot`] when drawing fails.
pub(crate) fn timeline_svg(run: &RunReport) -> Result<String, ReportError> {
    let err = plot_err("timeline");
    let cycles: Vec<(f64, f64)> = run
        .per_cycle
        .iter()
        .filter(|c| c.makespan_ms.is_finite() && c.intended_start_ms.is_finite())
        .map(|c| (c.intended_start_ms / 1000.0, c.makespan_ms))
        .collect();
    let end_s = cycles
        .iter()
        .map(|(t, ms)| t + ms / 1000.0)
        .chain(run.timeline.iter().map(|e| e.t_ms / 1000.0))
        .chain(std::iter::once(run.wall_seconds))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let y_max = cycles
        .iter()
        .map(|(_, ms)| *ms)
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.18;
    let spans = cordon_spans(run, end_s);
    let at = |kind: TimelineKind| {
        run.timeline
            .iter()
            .filter(move |e| e.kind == kind && e.t_ms.is_finite())
            .map(|e| e.t_ms / 1000.0)
    };
    let entries = timeline_entries(
        !spans.is_empty(),
        !cycles.is_empty(),
        at(TimelineKind::Throttle).next().is_some(),
        at(TimelineKind::Retune).next().is_some(),
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT + band_height(&entries)))
            .into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        let area = caption_and_legend(&root, &format!("Timeline: {}", run.label), &entries)
            .map_err(&err)?;
        let mut chart = ChartBuilder::on(&area)
            .margin(14)
            .x_label_area_size(52)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..end_s, 0f64..y_max)
            .map_err(&err)?;
        chart
            .configure_mesh()
            .x_desc("time since the run started, s")
            .y_desc("cycle makespan, ms")
            .axis_desc_style((FONT, DESC_PX))
            .label_style((FONT, TICK_PX))
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(&err)?;
        chart
            .draw_series(
                spans.iter().map(|(a, b)| {
                    Rectangle::new([(*a, 0.0), (*b, y_max)], CORDON.mix(0.5).filled())
                }),
            )
            .map_err(&err)?;
        chart
            .draw_series(LineSeries::new(
                cycles.iter().copied(),
                MAKESPAN.mix(0.5).stroke_width(1),
            ))
            .map_err(&err)?;
        chart
            .draw_series(cycles.iter().map(|p| Circle::new(*p, 2, MAKESPAN.filled())))
            .map_err(&err)?;
        let tick_len = y_max * 0.06;
        chart
            .draw_series(at(TimelineKind::Throttle).map(|t| {
                PathElement::new(
                    vec![(t, y_max), (t, y_max - tick_len)],
                    THROTTLE.stroke_width(2),
                )
            }))
            .map_err(&err)?;
        chart
            .draw_series(
                at(TimelineKind::Retune)
                    .map(|t| PathElement::new(vec![(t, 0.0), (t, y_max)], RETUNE.stroke_width(2))),
            )
            .map_err(&err)?;
        root.present().map_err(&err)?;
    }
    Ok(svg)
}
