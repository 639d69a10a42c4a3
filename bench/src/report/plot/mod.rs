//! The report's plots, each drawn with `plotters` into an SVG string.
//!
//! The SVG backend writes text as `<text>` elements (font family
//! `sans-serif`), so the browser renders every label with its own fonts and
//! no font file or system font library is needed at build time. Every plot
//! has a caption, both axis descriptions and a legend of the markers it
//! drew (each run by its label), in a band between caption and chart so it
//! never covers data ([`legend`]).

mod bins;
mod cdf;
mod cotenant;
mod legend;
mod population;
mod sim;
mod timeline;

pub(crate) use bins::bin_walk_svg;
pub(crate) use cdf::makespan_cdf_svg;
pub(crate) use cotenant::{any_cotenant, cotenant_svg};
pub(crate) use population::{box_population_svg, BoxRun};
pub(crate) use sim::sim_latency_svg;
pub(crate) use timeline::timeline_svg;

use plotters::style::RGBColor;

use super::ReportError;

/// Plot width, pixels.
pub(crate) const WIDTH: u32 = 1000;
/// Plot height, pixels.
pub(crate) const HEIGHT: u32 = 430;
/// Font family of every label.
pub(crate) const FONT: &str = "sans-serif";
/// Caption font size as given to `plotters` (it writes 1/1.24 of it into
/// the SVG: 21 px).
pub(crate) const CAPTION_PX: u32 = 26;
/// Axis description font size (16 px in the SVG).
pub(crate) const DESC_PX: u32 = 20;
/// Tick label and legend font size (14.5 px in the SVG).
pub(crate) const TICK_PX: u32 = 18;

/// Series colours (a colour-blind-safe qualitative palette), by run index.
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

/// The colour of run `i` (cycles through the palette).
pub(crate) fn run_colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Wraps a plotting error into [`ReportError::Plot`].
pub(crate) fn plot_err<E: std::fmt::Display>(plot: &'static str) -> impl Fn(E) -> ReportError {
    move |e| ReportError::Plot {
        plot,
        reason: e.to_string(),
    }
}

/// A tick label for a millisecond (or ratio) value: no trailing noise, few
/// digits.
pub(crate) fn tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_string()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.1}"))
    } else if a >= 0.01 {
        trim(format!("{v:.2}"))
    } else {
        format!("{v:.1e}")
    }
}

/// A tick label on a log axis spanning `lo..hi`: every tick when the axis
/// spans less than a decade; else only ticks whose leading digit is 1, 2 or
/// 5, so labels never crowd at the top of a decade.
pub(crate) fn log_tick(v: f64, lo: f64, hi: f64) -> String {
    if hi / lo < 10.0 || v.is_nan() || v <= 0.0 {
        return tick(v);
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    let lead = mantissa.round();
    if (mantissa - lead).abs() < 1e-6 && matches!(lead as i64, 1 | 2 | 5 | 10) {
        tick(v)
    } else {
        String::new()
    }
}

/// Tick positions for a log axis over `[lo, hi]`: the 1-2-5 points of each
/// decade, or every 1..9 point when that gives fewer than four (a narrow
/// range would otherwise show one label, or none).
pub(crate) fn log_keys(lo: f64, hi: f64) -> Vec<f64> {
    let pick = |mantissas: &[f64]| -> Vec<f64> {
        if !(lo > 0.0 && hi > lo) {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut decade = 10f64.powf(lo.log10().floor());
        while decade <= hi {
            for m in mantissas {
                let v = m * decade;
                if v >= lo && v <= hi {
                    out.push(v);
                }
            }
            decade *= 10.0;
        }
        out
    };
    let coarse = pick(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 4 {
        coarse
    } else {
        pick(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    }
}

/// Wraps a tick formatter so a label equal to the one just before it comes
/// out empty: `plotters` can place two key points on one decade boundary,
/// which would print the same label twice on top of itself.
pub(crate) fn dedup_labels(f: impl Fn(f64) -> String) -> impl Fn(&f64) -> String {
    let last = std::cell::RefCell::new(String::new());
    move |v| {
        let text = f(*v);
        if !text.is_empty() && *last.borrow() == text {
            return String::new();
        }
        last.borrow_mut().clone_from(&text);
        text
    }
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A log-axis range `[lo, hi]` covering every positive value of `values`
/// with some room either side; `None` when no value is positive and finite.
pub(crate) fn log_range(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .into_iter()
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() {
        return None;
    }
    let (lo, hi) = if hi / lo < 2.0 {
        (lo / 1.5, hi * 1.5)
    } else {
        (lo / 1.2, hi * 1.2)
    };
    Some((lo, hi))
}

/// `Some(i)` when the axis value `v` is the whole number `i` in `0..n`
/// (a category's tick), `None` for in-between ticks.
pub(crate) fn whole_index(v: f64, n: usize) -> Option<usize> {
    let r = v.round();
    ((v - r).abs() < 1e-9 && r >= 0.0 && (r as usize) < n).then_some(r as usize)
}

/// The `q`-quantile (0..=1) of sorted values by linear interpolation;
/// 0 for no values.
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let i = pos.floor() as usize;
            let frac = pos - i as f64;
            if i + 1 < n {
                sorted[i] + (sorted[i + 1] - sorted[i]) * frac
            } else {
                sorted[n - 1]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_between_ranks() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 0.5), 3.0);
        assert_eq!(quantile(&v, 0.25), 2.0);
        assert_eq!(quantile(&v, 1.0), 5.0);
        assert_eq!(quantile(&v, 0.125), 1.5);
        assert_eq!(quantile(&[], 0.5), 0.0);
        assert_eq!(quantile(&[7.0], 0.9), 7.0);
    }

    #[test]
    fn log_range_covers_positive_values_only() {
        let (lo, hi) = log_range([0.0, -1.0, 10.0, 1000.0, f64::NAN]).unwrap();
        assert!(lo < 10.0 && lo > 0.0 && hi > 1000.0);
        assert!(log_range([0.0, -3.0]).is_none());
        let (lo, hi) = log_range([5.0]).unwrap();
        assert!(lo < 5.0 && hi > 5.0);
    }

    #[test]
    fn category_ticks_are_whole_indices_in_range() {
        assert_eq!(whole_index(0.0, 6), Some(0));
        assert_eq!(whole_index(5.0, 6), Some(5));
        assert_eq!(whole_index(6.0, 6), None);
        assert_eq!(whole_index(-0.5, 6), None);
        assert_eq!(whole_index(2.5, 6), None);
        assert_eq!(whole_index(-0.0, 6), Some(0));
    }

    #[test]
    fn log_ticks_thin_out_over_decades() {
        assert_eq!(log_tick(300.0, 100.0, 500.0), "300");
        assert_eq!(log_tick(300.0, 100.0, 2000.0), "");
        assert_eq!(log_tick(200.0, 100.0, 2000.0), "200");
        assert_eq!(log_tick(500.0, 100.0, 2000.0), "500");
        assert_eq!(log_tick(1000.0, 100.0, 2000.0), "1000");
        assert_eq!(log_tick(0.05, 0.01, 2000.0), "0.05");
        assert_eq!(log_tick(0.07, 0.01, 2000.0), "");
        assert_eq!(log_tick(900.0, 100.0, 2000.0), "");
    }

    #[test]
    fn log_keys_give_enough_ticks_on_narrow_and_wide_ranges() {
        assert_eq!(
            log_keys(40.0, 150.0),
            vec![40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]
        );
        assert_eq!(
            log_keys(1.0, 1000.0),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]
        );
        assert!(log_keys(0.0, 10.0).is_empty());
    }

    #[test]
    fn repeated_labels_are_blanked() {
        let f = dedup_labels(|v| tick(v.round()));
        let got: Vec<String> = [100.0, 200.0, 999.9, 1000.0, 2000.0]
            .iter()
            .map(&f)
            .collect();
        assert_eq!(got, ["100", "200", "1000", "", "2000"]);
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(250.0), "250");
        assert_eq!(tick(12.5), "12.5");
        assert_eq!(tick(3.0), "3");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(0.001), "1.0e-3");
    }
}
