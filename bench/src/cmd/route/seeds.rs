//! `route sim --seeds` and `route compare --seeds`: every asked scenario
//! at every seed, the headline figures as median (min–max) with the
//! router's paired record, and the `adapter-bug` check against its control
//! (`route_lab::seeds`). The directory holds `seeds.json` (the summary),
//! `seeds.md` (the Markdown table), `report.html` (the table and a plot per
//! figure with every contender's seeds, linking each run's page) and each
//! run's `S-seed-K.json` and `S-seed-K.html`.

use anyhow::{Context, Result};
use route_lab::render::render_html;
use route_lab::render::seeds::{render_seeds, render_seeds_html, render_seeds_markdown};
use route_lab::seeds::SeedsSummary;
use route_lab::{Contender, SimReport, SimSpec};

use super::{run_one, WorldArgs};
use crate::cmd::bounds::BoundError;
use crate::report::write::{REPORT_HTML, SEEDS_JSON};
use crate::report::write_dir_atomically;

/// Most seeds one command runs.
pub const MAX_SEEDS: usize = 1000;

/// `--seeds`: a comma-separated list of seeds and inclusive ranges
/// (`1-5,9`), distinct, at most [`MAX_SEEDS`] in all, in the order given.
pub fn parse_seeds(s: &str) -> Result<Vec<u64>, BoundError> {
    const FLAG: &str = "--seeds";
    let text = s.trim();
    let number = |t: &str| -> Result<u64, BoundError> {
        t.trim().parse().map_err(|_| BoundError::NotANumber {
            flag: FLAG,
            text: t.trim().to_string(),
        })
    };
    let mut out: Vec<u64> = Vec::new();
    for part in text.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(part)?;
                (n, n)
            }
        };
        if hi < lo {
            return Err(BoundError::TooSmall {
                flag: FLAG,
                text: part.trim().to_string(),
                expected: "a range LOW-HIGH with LOW at most HIGH",
            });
        }
        if hi - lo >= MAX_SEEDS as u64 || out.len() + (hi - lo) as usize + 1 > MAX_SEEDS {
            return Err(BoundError::TooLarge {
                flag: FLAG,
                text: text.to_string(),
                max: MAX_SEEDS.to_string(),
                unit: "seeds",
            });
        }
        for k in lo..=hi {
            if out.contains(&k) {
                return Err(BoundError::TooSmall {
                    flag: FLAG,
                    text: text.to_string(),
                    expected: "each seed once",
                });
            }
            out.push(k);
        }
    }
    Ok(out)
}

/// Runs every spec of `bases` at each of `seeds` with `contenders`;
/// prints the table and writes the directory `out` (atomically).
pub fn run_seeds(
    world: &WorldArgs,
    bases: &[SimSpec],
    seeds: &[u64],
    contenders: &[Contender],
    out: &std::path::Path,
) -> Result<()> {
    let transport = world.transport()?;
    let mut runs: Vec<SimReport> = Vec::new();
    for base in bases {
        for &seed in seeds {
            let mut spec = base.clone();
            spec.seed = seed;
            runs.push(run_one(&spec, contenders, &transport, world.quiet)?);
        }
    }
    let summary = SeedsSummary::of(&runs, seeds);
    let table = render_seeds(&summary);
    print!("{table}");
    let mut files: Vec<(String, Vec<u8>)> = vec![
        (
            SEEDS_JSON.to_string(),
            serde_json::to_vec_pretty(&summary).context("cannot serialize the summary")?,
        ),
        (
            "seeds.md".to_string(),
            render_seeds_markdown(&summary).into_bytes(),
        ),
    ];
    let mut links = Vec::new();
    for r in &runs {
        let name = format!("{}-seed-{}", r.scenario, r.seed);
        files.push((format!("{name}.json"), serde_json::to_vec_pretty(r)?));
        files.push((format!("{name}.html"), render_html(r)?.into_bytes()));
        links.push((name.clone(), format!("{name}.html")));
    }
    let index = render_seeds_html(&summary, &links)?;
    files.push((REPORT_HTML.to_string(), index.into_bytes()));
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    write_dir_atomically(out, &refs)
        .with_context(|| format!("cannot write the report to {}", out.display()))?;
    println!("report: {}", out.join(REPORT_HTML).display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_read_as_lists_and_ranges() {
        assert_eq!(parse_seeds("1-5").unwrap(), [1, 2, 3, 4, 5]);
        assert_eq!(parse_seeds(" 3, 1-2 ,9").unwrap(), [3, 1, 2, 9]);
        assert_eq!(parse_seeds("18446744073709551615").unwrap(), [u64::MAX]);
    }

    #[test]
    fn bad_seed_lists_are_refused_with_a_reason() {
        for (bad, says) in [
            ("", "not a number"),
            ("a", "not a number"),
            ("1,,2", "not a number"),
            ("-3", "not a number"),
            ("5-1", "LOW at most HIGH"),
            ("1-3,2", "each seed once"),
            ("1-1000000", "at most 1000 seeds"),
            ("0-18446744073709551615", "at most 1000 seeds"),
            ("1-600,700-1200", "at most 1000 seeds"),
        ] {
            let e = parse_seeds(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }
}
