//! The routing lab's reports (`ROUTING.md` §5): the summary table of one
//! simulated run, the table of every scenario, and the HTML page with its
//! plots. The lab binary writes them (`fleet-lab route`).

pub mod plot;
pub mod seeds;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::ledger::{Cause, LowerDevice};
use crate::report::{ChangeFigures, EventFigures};
use crate::world::ARCHETYPES;
use crate::{ContenderReport, SimReport};

use plot::Series;

/// What can go wrong rendering a routing report.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A plot could not be drawn.
    #[error("plot {plot}: {reason}")]
    Plot {
        /// Which plot.
        plot: &'static str,
        /// The plotting library's error.
        reason: String,
    },
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

/// Where the router ran, for the headers (`in-process` when the report
/// predates the field).
fn transport(r: &SimReport) -> &str {
    if r.transport.is_empty() {
        "in-process"
    } else {
        &r.transport
    }
}

/// The per-contender table of one run, as plain text.
pub fn render_table(r: &SimReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario {} · seed {} · {} devices · {} h · tick {} s · router {}\n{}",
        r.scenario,
        r.seed,
        r.devices,
        r.hours,
        r.tick_s,
        transport(r),
        r.description
    );
    let _ = writeln!(
        out,
        "{:<14} {:>8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>6} {:>6} {:>6} {:>6} {:>9}",
        "contender",
        "attempts",
        "regret_f",
        "regret_c",
        "regret/k",
        "correct",
        "fresh",
        "auc",
        "drift",
        "polit",
        "occup",
        "dec/s"
    );
    for c in &r.contenders {
        let _ = writeln!(
            out,
            "{:<14} {:>8} {:>9.1} {:>9.1} {:>9.2} {:>8.4} {:>8.4} {:>6} {:>6} {:>6} {:>6.3} {:>9.0}",
            c.name,
            c.attempts,
            c.regret_failures,
            c.regret_cost,
            1000.0 * c.regret_total / c.attempts.max(1) as f64,
            c.correct_fraction,
            c.fresh_fraction,
            opt(c.trust_auc, 3),
            c.drift.len(),
            c.politeness_violations,
            c.occupancy,
            c.timing.decisions_per_s
        );
    }
    let _ = writeln!(out, "{}", event_lines(r));
    out
}

/// The devices whose trust ended below its value when the bug began, by
/// the causes of the losses they had not won back (a device counts once
/// per cause), and the latest such loss before the end (`end_s`).
fn lower_devices_line(lower: &[LowerDevice], end_s: f64) -> String {
    let mut by_cause: BTreeMap<Cause, usize> = BTreeMap::new();
    for d in lower {
        let mut causes: Vec<Cause> = d.losses.iter().map(|l| l.cause).collect();
        causes.sort_unstable();
        causes.dedup();
        for c in causes {
            *by_cause.entry(c).or_default() += 1;
        }
    }
    let causes: Vec<String> = by_cause
        .iter()
        .map(|(c, n)| format!("{} {n}", cause_name(*c)))
        .collect();
    let earliest = lower
        .iter()
        .filter_map(|d| d.losses.last().map(|l| end_s - l.t_s))
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    let offline = lower.iter().filter(|d| !d.online_at_end).count();
    format!(
        "their losses not won back by cause: {} (the last of each device's at most {} s before the end; {offline} offline at the end); with a bug loss: {}",
        if causes.is_empty() {
            "none".to_string()
        } else {
            causes.join(", ")
        },
        opt(earliest, 0),
        by_cause.get(&Cause::Bug).copied().unwrap_or(0)
    )
}

/// A cause's name as the report's JSON spells it.
fn cause_name(c: Cause) -> &'static str {
    match c {
        Cause::Agreement => "agreement",
        Cause::Bug => "bug",
        Cause::Liar => "liar",
        Cause::ContentChange => "content-change",
        Cause::Restoration => "restoration",
        Cause::Unexplained => "unexplained",
    }
}

/// `adapter-bug`'s figures of one run (empty in other scenarios): adapter
/// events, devices whose trust ended below its value when the bug began and
/// why, and the ledger's check.
fn bug_parts(e: &EventFigures, end_s: f64) -> Vec<String> {
    let mut parts = Vec::new();
    if let Some(n) = e.devices_lower_than_before {
        let (b, a) = e.mean_trust_before_after.unwrap_or((0.0, 0.0));
        parts.push(format!(
            "adapter events {}, devices lower than before the bug {n}/{}, mean trust {b:.3} → {a:.3}, largest drop {}",
            e.adapter_events.len(),
            e.devices_before.unwrap_or(0),
            opt(e.largest_drop, 4)
        ));
        if n > 0 {
            parts.push(lower_devices_line(&e.lower_devices, end_s));
        }
        if let Some((sides, wrong)) = e.ledger_checks {
            parts.push(format!(
                "ledger: {sides} comparison sides checked, {wrong} moved against their cause"
            ));
        }
    }
    parts
}

/// One timed source change: what it shut and opened, and the attempts by
/// those archetypes on its source before and after.
fn change_part(c: &ChangeFigures) -> String {
    let sum = |counts: &[u64; 4], names: &[String]| -> u64 {
        ARCHETYPES
            .iter()
            .zip(counts)
            .filter(|(a, _)| names.iter().any(|n| n == *a))
            .map(|(_, n)| n)
            .sum()
    };
    let mut line = format!(
        "{} at {:.2} h (held {:.2} h, regret on it meanwhile {:.1})",
        c.source,
        c.at_s / 3600.0,
        c.held_s / 3600.0,
        c.regret_after.failures + c.regret_after.cost
    );
    for (verb, names) in [("shut", &c.shut), ("opened", &c.opened)] {
        if names.is_empty() {
            continue;
        }
        let _ = write!(
            line,
            ", {verb} {}: their attempts {} in the hour before, {} in the first hour after, {} while it held",
            names.join("+"),
            sum(&c.hour_before, names),
            sum(&c.first_hour_after, names),
            sum(&c.after, names)
        );
    }
    line
}

/// The scenario's event figures per contender, one line each, and the
/// control's line in `adapter-bug` (empty when none).
pub fn event_lines(r: &SimReport) -> String {
    let mut out = String::new();
    for c in &r.contenders {
        let e = &c.event;
        let mut parts = Vec::new();
        if let Some(n) = e.blocked_attempts_after {
            parts.push(format!(
                "blocked-archetype attempts after the change {n} (hour before: {}), drift delay {} s",
                e.blocked_attempts_hour_before.unwrap_or(0),
                opt(e.drift_delay_s, 0)
            ));
        }
        if let Some(g) = e.browsers_gone_s {
            parts.push(format!(
                "browsers gone at {g:.0} s, re-route {} s after, browser grants while gone {}, occupancy during the drought {}",
                opt(e.reroute_delay_s, 1),
                e.browser_grants_while_gone.unwrap_or(0),
                opt(e.occupancy_during, 3)
            ));
        }
        parts.extend(bug_parts(e, r.hours * 3600.0));
        parts.extend(e.changes.iter().map(change_part));
        for (pool, cap) in &c.budget.caps {
            parts.push(format!(
                "{pool}: cap {cap}, windows over cap {}, max usage/cap {:.2}, late mean usage/cap {:.2}",
                c.budget.over_cap.get(pool).copied().unwrap_or(0),
                c.budget.max_ratio.get(pool).copied().unwrap_or(0.0),
                c.budget.late_mean_ratio.get(pool).copied().unwrap_or(0.0)
            ));
        }
        if !parts.is_empty() {
            let _ = writeln!(out, "  {}: {}", c.name, parts.join("; "));
        }
    }
    if let Some(e) = &r.control {
        let _ = writeln!(
            out,
            "  router without the bug (control: same world and seed, the upgrade scrapes correctly): {}",
            bug_parts(e, r.hours * 3600.0).join("; ")
        );
    }
    out
}

/// One row of `route compare`: a scenario's headline figures per contender.
pub fn render_compare(reports: &[SimReport]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<18} {:<14} {:>8} {:>9} {:>9} {:>8} {:>6} {:>7} {:>6} {:>6}",
        "scenario",
        "contender",
        "attempts",
        "regret",
        "regret/k",
        "correct",
        "auc",
        "drift/f",
        "polit",
        "occup"
    );
    for r in reports {
        for c in &r.contenders {
            let _ = writeln!(
                out,
                "{:<18} {:<14} {:>8} {:>9.1} {:>9.2} {:>8.4} {:>6} {:>7} {:>6} {:>6.3}",
                r.scenario,
                c.name,
                c.attempts,
                c.regret_total,
                1000.0 * c.regret_total / c.attempts.max(1) as f64,
                c.correct_fraction,
                opt(c.trust_auc, 3),
                format!("{}/{}", c.drift.len(), c.drift_false_alarms),
                c.politeness_violations,
                c.occupancy
            );
        }
    }
    for r in reports {
        let ev = event_lines(r);
        if !ev.is_empty() {
            let _ = write!(out, "{}:\n{ev}", r.scenario);
        }
    }
    out
}

fn per_contender(r: &SimReport, f: impl Fn(&ContenderReport) -> Vec<(f64, f64)>) -> Vec<Series> {
    r.contenders
        .iter()
        .map(|c| Series {
            name: c.name.clone(),
            points: f(c),
        })
        .collect()
}

/// `s` with `&`, `<` and `>` escaped for HTML text.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The plots over time per contender: regret, correct-row fraction and
/// occupancy, the scenario's event shaded.
fn time_plots(r: &SimReport) -> Result<(String, String, String), RenderError> {
    let h = |t: f64| t / 3600.0;
    let band = r.world.event_s.map(|(a, b)| (h(a), h(b)));
    let regret = plot::lines(
        "regret",
        "Cumulative regret vs the oracle (expected failures + cloud cost)",
        "simulated time, h",
        "regret, failure-equivalents",
        &per_contender(r, |c| {
            c.series
                .iter()
                .map(|s| (h(s.t_s), s.regret_failures + s.regret_cost))
                .collect()
        }),
        band,
        Some(0.0),
    )?;
    let correct = plot::lines(
        "correct",
        "Correct-row fraction (settled rows whose hash is genuine)",
        "simulated time, h",
        "fraction of settled rows",
        &per_contender(r, |c| {
            c.series
                .iter()
                .map(|s| (h(s.t_s), s.correct_fraction))
                .collect()
        }),
        band,
        None,
    )?;
    let occupancy = plot::lines(
        "occupancy",
        "Busy share of online device time, per sampling window",
        "simulated time, h",
        "busy share",
        &per_contender(r, |c| {
            c.series.iter().map(|s| (h(s.t_s), s.busy_share)).collect()
        }),
        band,
        Some(0.0),
    )?;
    Ok((regret, correct, occupancy))
}

/// The router's own plots (the first contender): trust of honest and lying
/// devices, and each pool's price over time.
fn router_plots(r: &SimReport) -> Result<(String, String), RenderError> {
    let h = |t: f64| t / 3600.0;
    let band = r.world.event_s.map(|(a, b)| (h(a), h(b)));
    let router = r.contenders.first();
    let trust = plot::lines(
        "trust",
        &format!(
            "Trust distribution of devices with ≥ 5 deposits ({}): honest vs lying",
            router.map(|c| c.name.as_str()).unwrap_or("-")
        ),
        "trust τ (bin centre)",
        "devices",
        &router
            .map(|c| {
                let bins = |v: &[u64]| -> Vec<(f64, f64)> {
                    v.iter()
                        .enumerate()
                        .map(|(i, n)| ((i as f64 + 0.5) / 20.0, *n as f64))
                        .collect()
                };
                vec![
                    Series {
                        name: "honest".into(),
                        points: bins(&c.trust.honest),
                    },
                    Series {
                        name: "lying".into(),
                        points: bins(&c.trust.liars),
                    },
                ]
            })
            .unwrap_or_default(),
        None,
        Some(0.0),
    )?;
    let prices = plot::lines(
        "prices",
        &format!(
            "Price λ per pool over time ({})",
            router.map(|c| c.name.as_str()).unwrap_or("-")
        ),
        "simulated time, h",
        "λ (cost units per unit of usage)",
        &router
            .map(|c| {
                let pools: Vec<String> = c
                    .series
                    .first()
                    .map(|s| s.prices.keys().cloned().collect())
                    .unwrap_or_default();
                pools
                    .into_iter()
                    .map(|p| Series {
                        points: c
                            .series
                            .iter()
                            .map(|s| (h(s.t_s), s.prices.get(&p).copied().unwrap_or(0.0)))
                            .collect(),
                        name: p,
                    })
                    .collect::<Vec<Series>>()
            })
            .unwrap_or_default(),
        band,
        Some(0.0),
    )?;
    Ok((trust, prices))
}

/// The self-contained HTML page of one run.
///
/// Errors: [`RenderError::Plot`].
pub fn render_html(r: &SimReport) -> Result<String, RenderError> {
    let band_s = r.world.event_s;
    let (regret, correct, occupancy) = time_plots(r)?;
    let (trust, prices) = router_plots(r)?;
    let drift = plot::timeline(
        "drift",
        "Drift detections on the timeline",
        &r.contenders
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>(),
        &r.contenders
            .iter()
            .map(|c| c.drift.iter().map(|m| (m.t_s, m.false_alarm)).collect())
            .collect::<Vec<_>>(),
        r.hours * 3600.0,
        band_s,
    )?;
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>routing lab: {sc}</title>\n<style>body{{font-family:sans-serif;margin:24px;max-width:1060px}}pre{{background:#f6f6f6;padding:12px;overflow-x:auto;font-size:13px}}h2{{margin-top:32px}}svg{{max-width:100%;height:auto}}</style></head><body>\n<h1>Routing lab: {sc}</h1>\n<p>{desc}. Seed {seed}, {dev} devices, {hours} simulated hours, router tick {tick} s, router {transport}. World: {src} sources, {tg} targets, {liars} liars, politeness capacity {pr:.1} grants/s. The shaded span is the scenario's event.</p>\n<h2>Summary</h2><pre>{table}</pre>\n",
        sc = esc(&r.scenario),
        desc = esc(&r.description),
        seed = r.seed,
        transport = esc(transport(r)),
        dev = r.devices,
        hours = r.hours,
        tick = r.tick_s,
        src = r.world.sources,
        tg = r.world.targets,
        liars = r.world.liars,
        pr = r.world.polite_rate,
        table = esc(&render_table(r)),
    );
    for (title, svg) in [
        ("Regret over time", regret),
        ("Correct-row fraction over time", correct),
        ("Trust: honest vs lying devices", trust),
        ("λ per pool over time", prices),
        ("Drift detections", drift),
        ("Occupancy", occupancy),
    ] {
        let _ = write!(html, "<h2>{title}</h2>\n{svg}\n");
    }
    html.push_str("<p>Columns: regret_f / regret_c = cumulative regret in expected failures / cloud cost against the oracle over routed items; regret/k = total regret per 1,000 attempts; correct = settled rows with a genuine hash; fresh = settled rows with today's content; auc = trust AUC honest vs liars; drift = detections; polit = grants a host's true limit would refuse; occup = busy share of online time counted over the time when admissible work existed; dec/s = decisions per wall second inside the router. See docs/routing-lab.md.</p>\n</body></html>\n");
    Ok(html)
}

#[cfg(test)]
mod tests {
    use crate::ledger::Loss;

    use super::*;

    fn device(id: &str, losses: &[(Cause, f64)], online_at_end: bool) -> LowerDevice {
        LowerDevice {
            device: id.into(),
            before: 1.0,
            after: 0.96,
            losses: losses
                .iter()
                .map(|&(cause, t_s)| Loss {
                    cause,
                    amount: 0.04,
                    t_s,
                })
                .collect(),
            online_at_end,
        }
    }

    #[test]
    fn lower_devices_are_counted_once_per_cause_with_the_oldest_last_loss() {
        let lower = [
            device(
                "a",
                &[
                    (Cause::Bug, 100.0),
                    (Cause::ContentChange, 3_550.0),
                    (Cause::ContentChange, 3_560.0),
                ],
                true,
            ),
            device("b", &[(Cause::ContentChange, 3_590.0)], false),
        ];
        assert_eq!(
            lower_devices_line(&lower, 3_600.0),
            "their losses not won back by cause: bug 1, content-change 2 (the last of each device's at most 40 s before the end; 1 offline at the end); with a bug loss: 1"
        );
        assert_eq!(
            lower_devices_line(&[], 3_600.0),
            "their losses not won back by cause: none (the last of each device's at most - s before the end; 0 offline at the end); with a bug loss: 0"
        );
    }
}
