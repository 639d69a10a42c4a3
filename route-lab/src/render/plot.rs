//! The routing lab's plots, each drawn with `plotters` into an SVG string
//! (text as `<text>` elements in `sans-serif`, so the browser renders the
//! labels with its own fonts). A caption, both axis descriptions and a
//! legend of the series drawn, in a band above the chart.

use plotters::prelude::*;

use super::RenderError;

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 420;
const FONT: &str = "sans-serif";
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(120, 120, 120),
    RGBColor(0, 0, 0),
];

/// The colour of series `i`.
fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn err<E: std::fmt::Display>(plot: &'static str) -> impl Fn(E) -> RenderError {
    move |e| RenderError::Plot {
        plot,
        reason: e.to_string(),
    }
}

/// A tick label with as many decimals as an axis spanning `span` needs.
fn tick(v: f64, span: f64) -> String {
    let decimals = if span.is_finite() && span > 0.0 {
        ((-span.log10()).ceil() + 1.0).clamp(0.0, 6.0) as usize
    } else {
        1
    };
    if v.abs() >= 1e5 {
        return format!("{v:.2e}");
    }
    format!("{v:.decimals$}")
}

/// One named series of points.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points (x, y); non-finite points are skipped.
    pub points: Vec<(f64, f64)>,
}

/// A vertical band to shade (a scheduled event), x from..to.
pub type Band = Option<(f64, f64)>;

fn bounds(series: &[Series], y_floor: Option<f64>) -> (f64, f64, f64, f64) {
    let pts = series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|(x, y)| x.is_finite() && y.is_finite());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return (0.0, 1.0, 0.0, 1.0);
    }
    if let Some(f) = y_floor {
        y0 = y0.min(f);
    }
    if (x1 - x0).abs() < 1e-12 {
        x1 = x0 + 1.0;
    }
    if y1 - y0 < 1e-9 {
        // A flat series: centre it in a band of ±5 % (±1 around zero).
        let half = if y0.abs() < 1e-9 {
            1.0
        } else {
            y0.abs() * 0.05
        };
        if y_floor.is_none_or(|f| y0 - half >= f) {
            y0 -= half;
        }
        y1 += half;
    }
    let pad = (y1 - y0) * 0.08;
    (
        x0,
        x1,
        y0 - if y_floor.is_some() { 0.0 } else { pad },
        y1 + pad,
    )
}

/// Line chart of `series` with legend; `band` shades a time span.
///
/// Errors: [`RenderError::Plot`].
pub fn lines(
    plot: &'static str,
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    band: Band,
    y_floor: Option<f64>,
) -> Result<String, RenderError> {
    let e = err(plot);
    let (x0, x1, y0, y1) = bounds(series, y_floor);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(&e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, (FONT, 22))
            .margin(14)
            .x_label_area_size(48)
            .y_label_area_size(76)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(&e)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 14))
            .x_label_formatter(&|v| tick(*v, x1 - x0))
            .y_label_formatter(&|v| tick(*v, y1 - y0))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(&e)?;
        if let Some((a, b)) = band {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(a.max(x0), y0), (b.min(x1), y1)],
                    RGBColor(255, 204, 128).mix(0.35).filled(),
                )))
                .map_err(&e)?;
        }
        for (i, s) in series.iter().enumerate() {
            let c = colour(i);
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect();
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                .map_err(&e)?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font((FONT, 14))
            .draw()
            .map_err(&e)?;
        root.present().map_err(&e)?;
    }
    Ok(svg)
}

/// Points on a timeline, one row per contender: each mark at (t, row);
/// `marks[i]` holds contender i's (t, is_false_alarm).
///
/// Errors: [`RenderError::Plot`].
pub fn timeline(
    plot: &'static str,
    caption: &str,
    rows: &[String],
    marks: &[Vec<(f64, bool)>],
    end_s: f64,
    band: Band,
) -> Result<String, RenderError> {
    let e = err(plot);
    let n = rows.len().max(1) as f64;
    let mut svg = String::new();
    let height = 140 + 40 * rows.len() as u32;
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(&e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, (FONT, 22))
            .margin(14)
            .x_label_area_size(48)
            .y_label_area_size(130)
            .build_cartesian_2d(0f64..end_s.max(1.0), -0.5f64..n - 0.5)
            .map_err(&e)?;
        let names = rows.to_vec();
        chart
            .configure_mesh()
            .x_desc("simulated time, h")
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 14))
            .x_label_formatter(&|v| tick(*v / 3600.0, end_s / 3600.0))
            .y_labels(rows.len().max(1))
            .y_label_formatter(&move |v| {
                let i = v.round();
                if (v - i).abs() < 0.01 && i >= 0.0 {
                    names.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(&e)?;
        if let Some((a, b)) = band {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(a, -0.5), (b.min(end_s), n - 0.5)],
                    RGBColor(255, 204, 128).mix(0.35).filled(),
                )))
                .map_err(&e)?;
        }
        let alarm = RGBColor(200, 30, 30);
        let real = RGBColor(0, 158, 115);
        chart
            .draw_series(marks.iter().enumerate().flat_map(|(row, ms)| {
                ms.iter()
                    .filter(|(t, false_alarm)| t.is_finite() && *false_alarm)
                    .map(move |(t, _)| Circle::new((*t, row as f64), 3, alarm.filled()))
            }))
            .map_err(&e)?
            .label("false alarm (no truth changed)")
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, alarm.filled()));
        chart
            .draw_series(marks.iter().enumerate().flat_map(|(row, ms)| {
                ms.iter()
                    .filter(|(t, false_alarm)| t.is_finite() && !*false_alarm)
                    .map(move |(t, _)| TriangleMarker::new((*t, row as f64), 7, real.filled()))
            }))
            .map_err(&e)?
            .label("detection of the real change")
            .legend(move |(x, y)| TriangleMarker::new((x + 8, y), 7, real.filled()));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font((FONT, 14))
            .draw()
            .map_err(&e)?;
        root.present().map_err(&e)?;
    }
    Ok(svg)
}

/// One contender's values over seeds, for [`spread`].
pub struct Spreads {
    /// Contender name (an x-axis label).
    pub name: String,
    /// One value per seed (non-finite values are skipped).
    pub values: Vec<f64>,
    /// The median, marked.
    pub median: f64,
}

/// A figure over seeds, one column per contender: every seed's value as a
/// dot, the min–max range as a line and the median as a bar across it.
///
/// Errors: [`RenderError::Plot`].
pub fn spread(
    plot: &'static str,
    caption: &str,
    y_desc: &str,
    columns: &[Spreads],
) -> Result<String, RenderError> {
    let e = err(plot);
    let series: Vec<Series> = vec![Series {
        name: String::new(),
        points: columns
            .iter()
            .enumerate()
            .flat_map(|(i, c)| c.values.iter().map(move |v| (i as f64, *v)))
            .collect(),
    }];
    let (_, _, y0, y1) = bounds(&series, None);
    let n = columns.len().max(1);
    let (x0, x1) = (-0.5, n as f64 - 0.5);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 320)).into_drawing_area();
        root.fill(&WHITE).map_err(&e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, (FONT, 20))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(76)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(&e)?;
        let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
        chart
            .configure_mesh()
            .y_desc(y_desc)
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 14))
            .x_labels(n)
            .x_label_formatter(&|v| {
                let i = v.round();
                if (v - i).abs() < 0.01 && i >= 0.0 {
                    names.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| tick(*v, y1 - y0))
            .disable_x_mesh()
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(&e)?;
        for (i, c) in columns.iter().enumerate() {
            let col = colour(i);
            let x = i as f64;
            let vals: Vec<f64> = c.values.iter().copied().filter(|v| v.is_finite()).collect();
            let (lo, hi) = vals
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(*v), b.max(*v)));
            if lo <= hi {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(x, lo), (x, hi)],
                        col.stroke_width(2),
                    )))
                    .map_err(&e)?;
            }
            chart
                .draw_series(vals.iter().map(|v| Circle::new((x, *v), 4, col.filled())))
                .map_err(&e)?;
            if c.median.is_finite() {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(x - 0.2, c.median), (x + 0.2, c.median)],
                        col.stroke_width(4),
                    )))
                    .map_err(&e)?;
            }
        }
        root.present().map_err(&e)?;
    }
    Ok(svg)
}
