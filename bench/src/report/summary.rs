//! The terminal summary: one run's key figures, and the compare table.
//!
//! The compare table's columns are data ([`COLUMNS`]), shared with the HTML
//! page so the terminal and the page always show the same figures (issue 6:
//! makespan p50/p95/p99/max, ratio to the lower bound, threads created, peak
//! runnable threads, CPU seconds, throttle events, parity).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::model::{CounterValue, RunReport};

/// One column of the compare table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Header text (short; units in brackets).
    pub header: &'static str,
    /// What the header means, for the legend under the table.
    pub meaning: &'static str,
    /// True for text columns (left-aligned); numbers are right-aligned.
    pub text: bool,
    /// The cell's text for one run.
    pub cell: fn(&RunReport) -> String,
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A millisecond figure as the table shows it (3 significant digits, at
/// most 2 decimals).
pub(crate) fn fmt_ms(v: f64) -> String {
    ms(v)
}

fn ratio(v: f64) -> String {
    format!("{v:.2}")
}

/// The compare table's columns, in order.
pub const COLUMNS: [Column; 19] = [
    Column {
        header: "run",
        meaning: "the run's label",
        text: true,
        cell: |r| r.label.clone(),
    },
    Column {
        header: "binding",
        meaning: "what executed the units: the fleet's serial or pinned binding (serial+lent: the reserved core lent at the idle class, decision 0009), or none for a design it replaces",
        text: true,
        cell: |r| match r.lent_reserve {
            Some(_) => format!("{}+lent", r.binding),
            None => r.binding.clone(),
        },
    },
    Column {
        header: "p50 ms",
        meaning: "median cycle makespan (end − intended start), ms",
        text: false,
        cell: |r| ms(r.makespan_ms.p50),
    },
    Column {
        header: "p95 ms",
        meaning: "95th percentile of cycle makespan, ms",
        text: false,
        cell: |r| ms(r.makespan_ms.p95),
    },
    Column {
        header: "p99 ms",
        meaning: "99th percentile of cycle makespan (the cycle tail), ms",
        text: false,
        cell: |r| ms(r.makespan_ms.p99),
    },
    Column {
        header: "max ms",
        meaning: "longest cycle makespan, ms",
        text: false,
        cell: |r| ms(r.makespan_ms.max),
    },
    Column {
        header: "/proc lb p99",
        meaning: "99th percentile of makespan over the cycle's process lower bound: max(critical path, total CPU / the cores the process may use), the same bound for every contender (1 is the best possible; report key makespan_over_process_bound)",
        text: false,
        cell: |r| ratio(r.makespan_over_process_bound.p99),
    },
    Column {
        header: "/plan lb p99",
        meaning: "99th percentile of makespan over the cycle's plan lower bound: max(critical path, total CPU / the cores the plan grants the cycle's units: the serial binding's cycle threads, ⌊Q⌋ for pinned, the effective CPUs for a baseline); the CI profiles gate this one (report key makespan_over_lower_bound)",
        text: false,
        cell: |r| ratio(r.makespan_over_lower_bound.p99),
    },
    Column {
        header: "co p99 us",
        meaning: "the host's own 1 ms probe (in the same process): 99th percentile of its wake-up lateness, µs, the ticks a late wake missed included (- with --cotenant off)",
        text: false,
        cell: |r| {
            r.cotenant_lateness_us
                .map_or_else(|| "-".to_string(), |l| format!("{:.0}", l.p99))
        },
    },
    Column {
        header: "co max us",
        meaning: "the probe's largest wake-up lateness, µs",
        text: false,
        cell: |r| {
            r.cotenant_lateness_us
                .map_or_else(|| "-".to_string(), |l| format!("{:.0}", l.max))
        },
    },
    Column {
        header: "rsv p99 us",
        meaning: "the host's reserve load (a CPU burst of 20 ms × scale at each cycle start): 99th percentile of its completion lateness beyond the burst's own duration, µs (- unless --cotenant on)",
        text: false,
        cell: |r| {
            r.reserve_task_lateness_us
                .map_or_else(|| "-".to_string(), |l| format!("{:.0}", l.p99))
        },
    },
    Column {
        header: "thr created",
        meaning: "OS threads created while the run lasted",
        text: false,
        cell: |r| r.threads.created_during_run.to_string(),
    },
    Column {
        header: "peak thr",
        meaning: "most threads alive at once (the lab's own co-tenant, sampler and timer threads included)",
        text: false,
        cell: |r| r.threads.peak.to_string(),
    },
    Column {
        header: "peak run",
        meaning: "most threads runnable at once (the lab's own threads not counted)",
        text: false,
        cell: |r| r.threads.peak_runnable.to_string(),
    },
    Column {
        header: "cpu s",
        meaning: "CPU seconds the run used (user + system)",
        text: false,
        cell: |r| format!("{:.2}", r.cpu_seconds),
    },
    Column {
        header: "throttle ev",
        meaning: "CPU throttle events from the cgroup (- where none could be read)",
        text: false,
        cell: |r| {
            r.throttle
                .map_or_else(|| "-".to_string(), |t| t.events.to_string())
        },
    },
    Column {
        header: "oor",
        meaning: "values above the histograms' range (counted, never clamped; any fails a gate)",
        text: false,
        cell: |r| r.histograms_out_of_range.to_string(),
    },
    Column {
        header: "sat",
        meaning: "yes when the run ended with a growing late-cycle backlog (saturated: its tail measures the backlog; fails a gate)",
        text: true,
        cell: |r| if r.saturation.is_some() { "yes" } else { "no" }.to_string(),
    },
    Column {
        header: "parity",
        meaning: "ok when every outcome equals the golden one",
        text: true,
        cell: |r| {
            if r.parity {
                "ok".to_string()
            } else {
                "FAIL".to_string()
            }
        },
    },
];

/// The compare table: a header line, a rule, then one aligned row per run,
/// in the order given. Every line ends with `\n`.
pub fn render_compare_table(runs: &[RunReport]) -> String {
    let cells: Vec<Vec<String>> = runs
        .iter()
        .map(|r| COLUMNS.iter().map(|c| (c.cell)(r)).collect())
        .collect();
    let widths: Vec<usize> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|row| row[i].chars().count())
                .chain(std::iter::once(c.header.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |texts: Vec<&str>| {
        let mut s = String::new();
        for (i, (t, c)) in texts.iter().zip(COLUMNS.iter()).enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = widths[i].saturating_sub(t.chars().count());
            if c.text {
                s.push_str(t);
                s.extend(std::iter::repeat_n(' ', pad));
            } else {
                s.extend(std::iter::repeat_n(' ', pad));
                s.push_str(t);
            }
        }
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(COLUMNS.iter().map(|c| c.header).collect());
    let rule_len = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
    out.push_str(&"-".repeat(rule_len));
    out.push('\n');
    for row in &cells {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// One run's summary: a few `key: value` lines (run, corpus, outcomes,
/// parity with the first mismatch, latencies, threads, CPU, throttle,
/// posture, out-of-range count, perf counters), then the one-row table.
pub fn render_run_summary(r: &RunReport) -> String {
    let mut s = String::new();
    write_run(&mut s, r);
    write_latencies(&mut s, r);
    write_load(&mut s, r);
    write_throttle_and_posture(&mut s, r);
    if let Some(counters) = &r.perf_counters {
        write_perf(&mut s, counters);
    }
    s.push('\n');
    s.push_str(&render_compare_table(std::slice::from_ref(r)));
    s
}

/// The run, machine, outcome and parity lines.
fn write_run(s: &mut String, r: &RunReport) {
    let quota = r
        .machine
        .quota
        .map_or_else(|| "unlimited".to_string(), |q| format!("{q} cores"));
    let _ = writeln!(
        s,
        "run:        {} (profile {}, binding {}{}), scale {}, {} cycles, {} paths",
        r.label,
        r.profile,
        r.binding,
        if r.oversubscribed {
            ", oversubscribed"
        } else {
            ""
        },
        r.scale,
        r.cycles,
        r.paths
    );
    let _ = writeln!(
        s,
        "machine:    {} cpus, quota {quota}{}; corpus {} v{} ({})",
        r.machine.cpus,
        r.machine
            .load_average
            .map(|l| format!(", load {l:.1} at start"))
            .unwrap_or_default()
            + &r.machine
                .other_cpus
                .map(|o| format!(", other processes {o:.1} CPUs busy during the run"))
                .unwrap_or_default(),
        r.corpus.path,
        r.corpus.version,
        r.corpus.checksum
    );
    let _ = writeln!(
        s,
        "outcomes:   {} solved, {} suppressed, {} failed",
        r.outcomes.solved, r.outcomes.suppressed, r.outcomes.failed
    );
    match (&r.first_mismatch, r.parity) {
        (_, true) => {
            let _ = writeln!(s, "parity:     ok (every outcome equals the golden one)");
        }
        (Some(m), false) => {
            let _ = writeln!(
                s,
                "parity:     FAIL at cycle {} path {}: expected {}, got {}",
                m.cycle,
                m.path,
                describe_outcome(m.expected.as_ref()),
                describe_outcome(m.got.as_ref())
            );
        }
        (None, false) => {
            let _ = writeln!(s, "parity:     FAIL");
        }
    }
}

/// The latency lines: each metric's percentiles, then the co-tenant's and
/// the reserve task's lateness.
fn write_latencies(s: &mut String, r: &RunReport) {
    for (name, p, unit) in [
        ("makespan", &r.makespan_ms, " ms"),
        ("/proc lb", &r.makespan_over_process_bound, ""),
        ("/plan lb", &r.makespan_over_lower_bound, ""),
        ("bin walk", &r.bin_walk_ms, " ms"),
        ("sim", &r.sim_latency_ms, " ms"),
    ] {
        let _ = writeln!(
            s,
            "{:<11} p50 {}{unit}  p95 {}{unit}  p99 {}{unit}  max {}{unit}  mean {}{unit}  (n = {})",
            format!("{name}:"),
            ms(p.p50),
            ms(p.p95),
            ms(p.p99),
            ms(p.max),
            ms(p.mean),
            p.count
        );
    }
    let info = r.cotenant.as_ref();
    for (name, l, what) in [
        (
            "co-tenant",
            r.cotenant_lateness_us,
            info.map(|c| {
                format!(
                    "a probe waking every {} µs; {} ticks stood for by late wakes",
                    c.probe_period_us, c.probe_missed_ticks
                )
            }),
        ),
        (
            "reserve",
            r.reserve_task_lateness_us,
            info.map(|c| {
                format!(
                    "a {} µs CPU burst at each cycle start, late beyond its own duration",
                    c.reserve_burst_us
                )
            }),
        ),
    ] {
        if let Some(l) = l {
            let _ = writeln!(
                s,
                "{:<11} late p50 {:.0} µs  p99 {:.0} µs  p99.9 {:.0} µs  max {:.0} µs  (n = {}; {})",
                format!("{name}:"),
                l.p50,
                l.p99,
                l.p999,
                l.max,
                l.count,
                what.unwrap_or_default()
            );
        }
    }
    if let Some(c) = info {
        if c.mode != crate::lab::CoTenantMode::Off {
            let _ = writeln!(
                s,
                "            (the co-tenant's {:.2} CPU s are not in the run's CPU below)",
                c.cpu_seconds
            );
        }
    }
}

/// Saturation, lending, threads and CPU.
fn write_load(s: &mut String, r: &RunReport) {
    match r.saturation {
        Some(sat) => {
            let _ = writeln!(
                s,
                "saturated:  yes: from cycle {} ({} ms into the run) every cycle started over one interval late and the backlog kept growing; the last cycle started {} ms late ({:.1} cycles behind)",
                sat.since_cycle,
                ms(sat.since_ms),
                ms(sat.last_late_ms),
                sat.backlog_cycles
            );
        }
        None => {
            let _ = writeln!(
                s,
                "saturated:  no (arrivals every {} ms; the latest start was {} ms late)",
                ms(r.arrival_interval_ms),
                ms(r.peak_start_late_ms)
            );
        }
    }
    if let Some(l) = r.lent_reserve {
        let _ = writeln!(
            s,
            "lending:    the reserved core lent at the idle class (decision 0009); the guard took the cycle threads back from other processes {} time(s){}",
            l.promotions,
            if l.promoted { ", and held them at the end" } else { "" }
        );
    }
    let _ = writeln!(
        s,
        "threads:    {} at start, peak {}, {} created during the run, peak runnable {}",
        r.threads.at_start, r.threads.peak, r.threads.created_during_run, r.threads.peak_runnable
    );
    let _ = writeln!(
        s,
        "cpu:        {:.2} s over {:.2} s wall",
        r.cpu_seconds, r.wall_seconds
    );
}

/// Throttling, posture and the out-of-range warning.
fn write_throttle_and_posture(s: &mut String, r: &RunReport) {
    match r.throttle {
        Some(t) => {
            let _ = writeln!(
                s,
                "throttle:   {} events, {:.1} ms throttled ({:.1} % of wall), from {}",
                t.events,
                t.throttled_ms,
                t.throttled_share * 100.0,
                t.source.as_str()
            );
        }
        None => {
            let why = r.quota_detection.as_ref().map_or_else(
                || "no cgroup cpu.stat was read".to_string(),
                |q| {
                    format!(
                        "no cgroup cpu.stat was read (quota detection: {})",
                        q.reason
                    )
                },
            );
            let _ = writeln!(s, "throttle:   not measured: {why}");
        }
    }
    let _ = writeln!(
        s,
        "posture:    {} enters, {} exits, {:.1} ms cordoned, {} intakes suppressed",
        r.posture.enters, r.posture.exits, r.posture.cordoned_ms, r.posture.intake_suppressed
    );
    if r.histograms_out_of_range > 0 {
        let _ = writeln!(
            s,
            "WARNING:    {} values above the histogram range (not recorded, not clamped)",
            r.histograms_out_of_range
        );
    }
}

/// The perf counters: values first, then each distinct skip reason once
/// with the counters it covers.
fn write_perf(s: &mut String, counters: &BTreeMap<String, CounterValue>) {
    let mut list: Vec<String> = counters
        .iter()
        .filter_map(|(k, v)| match v {
            CounterValue::Value(n) => Some(format!("{k} {n}")),
            CounterValue::Skipped { .. } => None,
        })
        .collect();
    let mut skipped: Vec<(String, Vec<&str>)> = Vec::new();
    for (k, v) in counters {
        if let CounterValue::Skipped { skipped: why } = v {
            // One reason per kind: the counter's own name is not part of it.
            let why = why.replace(&format!(" {k} "), " such ");
            match skipped.iter_mut().find(|(w, _)| *w == why) {
                Some((_, names)) => names.push(k),
                None => skipped.push((why, vec![k.as_str()])),
            }
        }
    }
    for (why, names) in skipped {
        list.push(format!("{} skipped ({why})", names.join(" and ")));
    }
    let _ = writeln!(s, "perf:       {}", list.join(", "));
}

/// An outcome in words for tables and pages: `solved (in 5, profit 2)`,
/// `suppressed`, `failed (sim refused)`, or `none` when there was none.
pub fn describe_outcome(o: Option<&fleet::PathOutcome>) -> String {
    use fleet::PathOutcome;
    match o {
        None => "none".to_string(),
        Some(PathOutcome::Solved { amount_in, profit }) => {
            format!("solved (in {amount_in}, profit {profit})")
        }
        Some(PathOutcome::Suppressed) => "suppressed".to_string(),
        Some(PathOutcome::Failed { reason }) => {
            // The reason's stable snake_case name in words (`sim_refused`
            // reads `sim refused`), so a new reason reads right unchanged.
            let name = serde_json::to_value(reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "unknown reason".to_string());
            format!("failed ({})", name.replace('_', " "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::describe_outcome;
    use fleet::{FailReason, PathOutcome};

    #[test]
    fn outcomes_read_as_words_not_debug_text() {
        let refused = PathOutcome::Failed {
            reason: FailReason::SimRefused,
        };
        assert_eq!(describe_outcome(Some(&refused)), "failed (sim refused)");
        assert_eq!(describe_outcome(None), "none");
        assert_eq!(
            describe_outcome(Some(&PathOutcome::Suppressed)),
            "suppressed"
        );
    }
}
