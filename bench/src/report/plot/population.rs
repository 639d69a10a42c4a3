//! The router's small box by population (docs/router.md, "The small box"):
//! leases per second, lease p99 and the group's anonymous memory peak
//! against the devices registered, one point per run of `ci/small-box.sh`,
//! on a log x axis, with the box's targets as dashed lines. A run the box
//! did not survive (routerd OOM-killed, or the load never finished) has no
//! rate or latency: it is marked with a cross on the x axis of those two
//! panels, whose axis says what the cross means, and its memory peak is
//! drawn as measured.

use plotters::prelude::*;

use super::{plot_err, run_colour, tick, DESC_PX, FONT, HEIGHT, TICK_PX};
use crate::report::ReportError;

/// One run of the box, as `fleet-lab route box-plot` reads it from the
/// run's directory.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxRun {
    /// Devices registered.
    pub devices: u64,
    /// Leases per second over the driven window; `None` where the load
    /// did not finish.
    pub leases_per_s: Option<f64>,
    /// Lease latency p99 over HTTP, ms; `None` where the load did not
    /// finish.
    pub lease_p99_ms: Option<f64>,
    /// The group's anonymous memory peak (sampled every 0.25 s), MiB.
    pub anon_peak_mib: f64,
    /// The group's memory limit, MiB.
    pub limit_mib: f64,
    /// OOM kills the group counted.
    pub oom_kills: u64,
}

impl BoxRun {
    /// Whether the run ended with its figures (the load finished and
    /// nothing in the box was OOM-killed).
    pub fn survived(&self) -> bool {
        self.leases_per_s.is_some() && self.oom_kills == 0
    }
}

/// The targets drawn as dashed lines: leases/s at least this.
pub const TARGET_LEASES_PER_S: f64 = 10_000.0;
/// The targets drawn as dashed lines: lease p99 at most this, ms.
pub const TARGET_LEASE_P99_MS: f64 = 5.0;

/// Plot width, pixels: three panels side by side.
const WIDTH: u32 = 1320;

/// One panel: its caption, x and y descriptions, the value of each run
/// (where it has one) and the dashed line of its target or limit.
struct Panel {
    caption: String,
    x_desc: String,
    y_desc: &'static str,
    values: Vec<Option<f64>>,
    line: Option<f64>,
}

/// The three panels of `runs` (sorted by devices).
fn panels(runs: &[BoxRun]) -> [Panel; 3] {
    let x = "devices registered (log scale)";
    let lost = runs.iter().any(|r| !r.survived());
    let x_lost = if lost {
        format!("{x}; ×: the box did not survive")
    } else {
        x.to_string()
    };
    let limit = runs.iter().map(|r| r.limit_mib).fold(0.0, f64::max);
    [
        Panel {
            caption: "Leases/s (dashed: the target)".to_string(),
            x_desc: x_lost.clone(),
            y_desc: "leases per second",
            values: runs
                .iter()
                .map(|r| r.leases_per_s.filter(|_| r.survived()))
                .collect(),
            line: Some(TARGET_LEASES_PER_S),
        },
        Panel {
            caption: "Lease p99 (dashed: the target)".to_string(),
            x_desc: x_lost,
            y_desc: "lease latency p99, ms",
            values: runs
                .iter()
                .map(|r| r.lease_p99_ms.filter(|_| r.survived()))
                .collect(),
            line: Some(TARGET_LEASE_P99_MS),
        },
        Panel {
            caption: "Anonymous memory peak (dashed: the limit)".to_string(),
            x_desc: x.to_string(),
            y_desc: "MiB of the group",
            values: runs.iter().map(|r| Some(r.anon_peak_mib)).collect(),
            line: (limit > 0.0).then_some(limit),
        },
    ]
}

/// The population plot of `runs` as one SVG document (three panels:
/// leases/s, lease p99, anonymous memory peak; x: devices, log scale).
///
/// Errors: [`ReportError::Plot`] when there is no run or drawing fails.
pub(crate) fn box_population_svg(runs: &[BoxRun]) -> Result<String, ReportError> {
    const PLOT: &str = "small box by population";
    if runs.is_empty() {
        return Err(ReportError::Plot {
            plot: PLOT,
            reason: "no run to plot".to_string(),
        });
    }
    let err = plot_err(PLOT);
    let mut runs = runs.to_vec();
    runs.sort_by_key(|r| r.devices);
    let x_lo = runs[0].devices.max(1) as f64 / 2.0;
    let x_hi = runs[runs.len() - 1].devices.max(1) as f64 * 2.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        for (i, (area, p)) in root
            .split_evenly((1, 3))
            .iter()
            .zip(panels(&runs))
            .enumerate()
        {
            let top = p
                .values
                .iter()
                .flatten()
                .copied()
                .chain(p.line)
                .fold(0.0f64, f64::max)
                .max(1e-9)
                * 1.15;
            let mut chart = ChartBuilder::on(area)
                .caption(&p.caption, (FONT, DESC_PX))
                .margin(12)
                .x_label_area_size(48)
                .y_label_area_size(64)
                .build_cartesian_2d((x_lo..x_hi).log_scale(), 0f64..top)
                .map_err(&err)?;
            chart
                .configure_mesh()
                .x_desc(&p.x_desc)
                .y_desc(p.y_desc)
                .axis_desc_style((FONT, DESC_PX))
                .label_style((FONT, TICK_PX))
                .x_label_formatter(&|v| tick(*v))
                .y_label_formatter(&|v| tick(*v))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(&err)?;
            let colour = run_colour(i);
            let pts: Vec<(f64, f64)> = runs
                .iter()
                .zip(&p.values)
                .filter_map(|(r, v)| v.map(|v| (r.devices as f64, v)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))
                .map_err(&err)?;
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 5, colour.filled())))
                .map_err(&err)?;
            let crosses = runs
                .iter()
                .zip(&p.values)
                .filter(|(_, v)| v.is_none())
                .map(|(r, _)| Cross::new((r.devices as f64, 0.0), 7, RED.stroke_width(3)));
            chart.draw_series(crosses).map_err(&err)?;
            if let Some(y) = p.line {
                chart
                    .draw_series(DashedLineSeries::new(
                        [(x_lo, y), (x_hi, y)],
                        8,
                        6,
                        RGBColor(120, 120, 120).stroke_width(2),
                    ))
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

    fn run(devices: u64, rate: Option<f64>, oom: u64) -> BoxRun {
        BoxRun {
            devices,
            leases_per_s: rate,
            lease_p99_ms: rate.map(|_| 2.5),
            anon_peak_mib: 120.0,
            limit_mib: 256.0,
            oom_kills: oom,
        }
    }

    #[test]
    fn a_lost_run_is_crossed_and_named_and_the_survivors_are_drawn() {
        let runs = [
            run(100_000, Some(9_000.0), 1),
            run(1_000, Some(10_400.0), 0),
            run(10_000, Some(13_700.0), 0),
        ];
        let svg = box_population_svg(&runs).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        // The OOM-killed run has no rate or latency, however its JSON read,
        // and the two panels that lose it say what the cross means.
        assert_eq!(
            svg.matches("×: the box did not survive").count(),
            2,
            "{svg}"
        );
        assert!(svg.contains("Leases/s (dashed: the target)"));
        assert!(svg.contains("Anonymous memory peak (dashed: the limit)"));
        // Two survivors drawn in each of the first two panels, three
        // memory points: seven circles in all.
        assert_eq!(svg.matches("<circle").count(), 2 + 2 + 3, "{svg}");
        let ps = panels(&{
            let mut r = runs.to_vec();
            r.sort_by_key(|r| r.devices);
            r
        });
        assert_eq!(ps[0].values, vec![Some(10_400.0), Some(13_700.0), None]);
        assert_eq!(ps[1].values, vec![Some(2.5), Some(2.5), None]);
        assert_eq!(ps[2].line, Some(256.0));
        assert_eq!(ps[0].line, Some(TARGET_LEASES_PER_S));
    }

    #[test]
    fn no_run_is_a_typed_error() {
        assert!(matches!(
            box_population_svg(&[]),
            Err(ReportError::Plot { .. })
        ));
    }
}
