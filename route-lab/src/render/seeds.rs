//! The tables of a run over several seeds ([`crate::seeds::SeedsSummary`]):
//! plain text for the terminal and Markdown for docs/routing-lab.md.

use std::fmt::Write as _;

use super::plot::{spread, Spreads};
use super::{esc, RenderError};
use crate::seeds::{AdapterCheck, Better, Cell, Row, SeedsSummary};

/// Decimal places for a set of values shown together: none when all are
/// whole; else by magnitude (0 from 100 up, 2 from 1, 3 below), and more
/// (up to 4) when the values differ by less than that shows.
fn digits(vs: &[f64]) -> usize {
    let top = vs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if vs.iter().all(|v| *v == v.trunc()) {
        return 0;
    }
    let base = if top >= 100.0 {
        0
    } else if top >= 1.0 {
        2
    } else {
        3
    };
    let lo = vs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = hi - lo;
    if span > 0.0 {
        let need = ((-span.log10()).ceil() + 1.0).clamp(0.0, 4.0) as usize;
        base.max(need)
    } else {
        base
    }
}

/// "median (min–max)", or "–" without a value.
pub fn spread_text(c: &Cell) -> String {
    match &c.spread {
        Some(s) => {
            let d = digits(&[s.median, s.min, s.max]);
            if s.min == s.max {
                format!("{:.d$}", s.median)
            } else {
                format!("{:.d$} ({:.d$}–{:.d$})", s.median, s.min, s.max)
            }
        }
        None => "–".into(),
    }
}

fn paired_text(c: &Cell) -> String {
    c.paired
        .as_ref()
        .map(|p| {
            format!(
                "router better {}, tied {}, worse {}",
                p.router_better, p.tied, p.router_worse
            )
        })
        .unwrap_or_default()
}

fn better_text(b: Better) -> &'static str {
    match b {
        Better::Lower => "lower is better",
        Better::Higher => "higher is better",
    }
}

/// The adapter check in one paragraph of plain text.
pub fn adapter_text(a: &AdapterCheck) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "adapter-bug against its control ({} seeds, router): trust losses from the bug {}; honest devices' trust change, bug world median {:.4} mean {:.4} (n {}) vs control median {:.4} mean {:.4} (n {})",
        a.seeds.len(),
        a.bug_losses,
        a.medians.0,
        a.means.0,
        a.bug_deltas.len(),
        a.medians.1,
        a.means.1,
        a.control_deltas.len()
    );
    if let Some(t) = &a.test {
        let _ = writeln!(
            out,
            "  Mann–Whitney U (one-sided, bug world lower): U {:.1}, z {:.2}, p {:.3} at α {}: {}",
            t.u_x,
            t.z,
            t.p_less,
            a.alpha,
            if a.passes { "passes" } else { "FAILS" }
        );
    }
    let per: Vec<String> = a
        .lower_per_seed
        .iter()
        .map(|(s, b, c)| format!("{s}: {b}/{c}"))
        .collect();
    let _ = writeln!(
        out,
        "  devices ending lower per seed (bug/control): {}",
        per.join(", ")
    );
    out
}

/// The summary as plain text: per headline, every contender's median
/// (min–max) and the router's paired record; then the adapter check.
pub fn render_seeds(s: &SeedsSummary) -> String {
    let mut out = String::new();
    let seeds: Vec<String> = s.seeds.iter().map(u64::to_string).collect();
    let _ = writeln!(
        out,
        "over seeds {} · {} devices · {} h · median (min–max)",
        seeds.join(","),
        s.devices,
        s.hours
    );
    for r in &s.rows {
        let _ = writeln!(
            out,
            "{} · {} ({}) · best: {}",
            r.scenario,
            r.figure,
            better_text(r.better),
            r.best.join(", ")
        );
        for c in &r.cells {
            let _ = writeln!(
                out,
                "  {:<14} {:<28} {}",
                c.contender,
                spread_text(c),
                paired_text(c)
            );
        }
    }
    if let Some(a) = &s.adapter_check {
        out.push_str(&adapter_text(a));
    }
    out
}

fn markdown_row(r: &Row) -> String {
    let cells: Vec<String> = r
        .cells
        .iter()
        .map(|c| {
            let mut t = spread_text(c);
            if r.best.contains(&c.contender) {
                t = format!("**{t}**");
            }
            if let Some(p) = &c.paired {
                t.push_str(&format!(
                    " [{}/{}/{}]",
                    p.router_better, p.tied, p.router_worse
                ));
            }
            t
        })
        .collect();
    format!("| {} | {} | {} |", r.scenario, r.figure, cells.join(" | "))
}

/// The summary as a Markdown table: one row per headline, one column per
/// contender, "median (min–max)", the best median in bold, and after each
/// other contender's cell the router's paired record [better/tied/worse].
pub fn render_seeds_markdown(s: &SeedsSummary) -> String {
    let mut out = String::new();
    let Some(first) = s.rows.first() else {
        return out;
    };
    let names: Vec<&str> = first.cells.iter().map(|c| c.contender.as_str()).collect();
    let _ = writeln!(out, "| scenario | figure | {} |", names.join(" | "));
    let _ = writeln!(out, "|---|---|{}", "---|".repeat(names.len()));
    for r in &s.rows {
        let _ = writeln!(out, "{}", markdown_row(r));
    }
    out
}

/// The page of a run over seeds: the table, the adapter check, and one
/// plot per headline figure with every contender's seeds, range and median;
/// `links` are the runs' pages (name, file).
///
/// Errors: [`RenderError::Plot`].
pub fn render_seeds_html(
    s: &SeedsSummary,
    links: &[(String, String)],
) -> Result<String, RenderError> {
    let mut plots = String::new();
    for r in &s.rows {
        let columns: Vec<Spreads> = r
            .cells
            .iter()
            .map(|c| Spreads {
                name: c.contender.clone(),
                values: c
                    .spread
                    .as_ref()
                    .map(|s| s.values.clone())
                    .unwrap_or_default(),
                median: c.spread.as_ref().map_or(f64::NAN, |s| s.median),
            })
            .collect();
        let caption = format!("{} · {}", r.scenario, r.figure);
        let svg = spread("seeds", &caption, better_text(r.better), &columns)?;
        plots.push_str(&format!("<figure>{svg}</figure>\n"));
    }
    let list: String = links
        .iter()
        .map(|(name, file)| format!("<li><a href=\"{}\">{}</a></li>", esc(file), esc(name)))
        .collect();
    Ok(format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>routing lab: over seeds</title><style>body{{font-family:sans-serif;margin:24px}}pre{{background:#f6f6f6;padding:12px;font-size:13px}}figure{{margin:12px 0}}</style></head><body><h1>Routing lab over seeds</h1><p>Each plot: one dot per seed, the line spans min–max, the bar is the median.</p><pre>{}</pre>{plots}<h2>Runs</h2><ul>{list}</ul></body></html>\n",
        esc(&render_seeds(s))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seeds::Paired;
    use crate::stats::Spread;

    fn row() -> Row {
        Row {
            scenario: "steady".into(),
            figure: "regret per 1,000 attempts".into(),
            better: Better::Lower,
            cells: vec![
                Cell {
                    contender: "router".into(),
                    spread: Spread::of(vec![4.0, 2.5, 6.0]),
                    paired: None,
                },
                Cell {
                    contender: "greedy".into(),
                    spread: Spread::of(vec![0.0, 0.0, 0.0]),
                    paired: Some(Paired {
                        router_better: 0,
                        tied: 1,
                        router_worse: 2,
                    }),
                },
            ],
            best: vec!["greedy".into()],
        }
    }

    #[test]
    fn cells_read_as_median_and_range() {
        let r = row();
        assert_eq!(spread_text(&r.cells[0]), "4.00 (2.50–6.00)");
        assert_eq!(spread_text(&r.cells[1]), "0");
        let near_one = Cell {
            contender: "fixed-quorum".into(),
            spread: Spread::of(vec![0.9959, 1.0, 0.998]),
            paired: None,
        };
        assert_eq!(spread_text(&near_one), "0.9980 (0.9959–1.0000)");
        assert_eq!(
            markdown_row(&r),
            "| steady | regret per 1,000 attempts | 4.00 (2.50–6.00) | **0** [0/1/2] |"
        );
    }

    #[test]
    fn the_text_names_the_best_and_the_paired_record() {
        let s = SeedsSummary {
            seeds: vec![1, 2, 3],
            devices: 150,
            hours: 6.0,
            rows: vec![row()],
            adapter_check: None,
            wall_s: Default::default(),
        };
        let t = render_seeds(&s);
        assert!(t.contains("best: greedy"), "{t}");
        assert!(t.contains("router better 0, tied 1, worse 2"), "{t}");
        let html = render_seeds_html(&s, &[("steady-seed-1".into(), "steady-seed-1.html".into())])
            .unwrap();
        assert!(
            html.contains("<svg") && html.contains("steady · regret per 1,000 attempts"),
            "a plot per row"
        );
        assert!(html.contains("href=\"steady-seed-1.html\""));
        let md = render_seeds_markdown(&s);
        assert!(
            md.starts_with("| scenario | figure | router | greedy |\n|---|---|---|---|\n"),
            "{md}"
        );
    }
}
