//! Legends in a band of their own between a plot's caption and its chart,
//! so no legend box ever covers data; each plot lists only the markers it
//! drew.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{CAPTION_PX, FONT, TICK_PX, WIDTH};

/// How an entry's marker is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marker {
    /// A short thick line (a series drawn as a line).
    Line,
    /// A filled square (a shaded span, or a run's boxes and dots).
    Square,
    /// A dot (points).
    Dot,
    /// A vertical tick (an event at an instant).
    Tick,
}

/// One legend entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    /// The text.
    pub text: String,
    /// The marker.
    pub marker: Marker,
    /// The marker's colour.
    pub colour: RGBColor,
}

/// Width of an entry's marker, px.
const MARKER_W: i32 = 22;
/// Gap between marker and text, and after an entry, px.
const GAP: i32 = 8;
/// Space after an entry before the next one, px.
const AFTER: i32 = 26;
/// Height of one legend row, px.
pub(crate) const ROW_H: i32 = 24;
/// Left and right padding of the band, px.
const PAD: i32 = 16;
/// Estimated width of one character of legend text, px (the SVG writes the
/// tick font at 14.5 px; sans-serif averages about 0.55 em a character,
/// estimated high so entries never run into each other).
const CHAR_W: f64 = 8.6;

/// Estimated width of an entry, px.
fn entry_width(e: &Entry) -> i32 {
    MARKER_W + GAP + (e.text.chars().count() as f64 * CHAR_W).ceil() as i32 + AFTER
}

/// The top-left corner of each entry in a band `width` px wide, filled
/// row by row from the left, and the band's height (0 for no entries).
pub(crate) fn layout(entries: &[Entry], width: i32) -> (Vec<(i32, i32)>, i32) {
    let mut at = Vec::with_capacity(entries.len());
    let (mut x, mut row) = (PAD, 0);
    for e in entries {
        let w = entry_width(e);
        if x > PAD && x + w > width - PAD {
            row += 1;
            x = PAD;
        }
        at.push((x, row * ROW_H));
        x += w;
    }
    let rows = if entries.is_empty() { 0 } else { row + 1 };
    (at, rows * ROW_H + if rows > 0 { 6 } else { 0 })
}

/// The height a plot needs for its legend band, px.
pub(crate) fn band_height(entries: &[Entry]) -> u32 {
    layout(entries, WIDTH as i32).1 as u32
}

/// Draws `caption` at the top of `root` and `entries` in a band below it;
/// returns the area left for the chart (no caption of its own).
pub(crate) fn caption_and_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    caption: &str,
    entries: &[Entry],
) -> Result<DrawingArea<DB, Shift>, DrawingAreaErrorKind<DB::ErrorType>> {
    let below = root.titled(caption, (FONT, CAPTION_PX))?;
    let (positions, height) = layout(entries, WIDTH as i32);
    if height == 0 {
        return Ok(below);
    }
    let (band, chart) = below.split_vertically(height);
    for (e, &(x, y)) in entries.iter().zip(&positions) {
        let mid = y + ROW_H / 2;
        let c = e.colour;
        match e.marker {
            Marker::Line => band.draw(&PathElement::new(
                vec![(x, mid), (x + MARKER_W, mid)],
                c.stroke_width(3),
            ))?,
            Marker::Square => band.draw(&Rectangle::new(
                [(x + 4, mid - 7), (x + MARKER_W - 4, mid + 7)],
                c.filled(),
            ))?,
            Marker::Dot => band.draw(&Circle::new((x + MARKER_W / 2, mid), 4, c.filled()))?,
            Marker::Tick => band.draw(&PathElement::new(
                vec![(x + MARKER_W / 2, mid - 8), (x + MARKER_W / 2, mid + 8)],
                c.stroke_width(2),
            ))?,
        }
        band.draw(&Text::new(
            e.text.clone(),
            (x + MARKER_W + GAP, mid - 8),
            (FONT, TICK_PX).into_font().color(&BLACK),
        ))?;
    }
    Ok(chart)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> Entry {
        Entry {
            text: text.into(),
            marker: Marker::Line,
            colour: BLACK,
        }
    }

    #[test]
    fn entries_fill_rows_and_wrap_before_the_edge() {
        assert_eq!(layout(&[], 1000), (vec![], 0));
        let (at, h) = layout(&[entry("a"), entry("b")], 1000);
        assert_eq!(at, [(PAD, 0), (PAD + entry_width(&entry("a")), 0)]);
        assert_eq!(h, ROW_H + 6);
        let long = entry(&"x".repeat(60));
        let (at, h) = layout(&[long.clone(), long.clone(), long], 1000);
        assert_eq!(
            at.iter().map(|p| p.1).collect::<Vec<_>>(),
            [0, ROW_H, 2 * ROW_H]
        );
        assert_eq!(h, 3 * ROW_H + 6);
        for (x, _) in at {
            assert_eq!(x, PAD);
        }
    }

    #[test]
    fn an_entry_wider_than_the_band_gets_a_row_of_its_own() {
        let huge = entry(&"x".repeat(200));
        let (at, _) = layout(&[entry("a"), huge, entry("b")], 1000);
        assert_eq!(at[1], (PAD, ROW_H));
        assert_eq!(at[2].1, 2 * ROW_H);
    }
}
