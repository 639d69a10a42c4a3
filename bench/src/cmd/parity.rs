//! `fleet-lab parity`: both bindings against the golden corpus. Exits
//! non-zero naming the first differing (cycle, path) and both outcomes.
//!
//! Parity across bindings is the promotion gate (`DESIGN.md` §4).

use anyhow::{bail, Result};
use clap::Args;
use fleet::plan::Profile;

use crate::cmd::run::ReplayArgs;
use crate::lab::{self, Contender};

/// Arguments of `fleet-lab parity`.
#[derive(Debug, Clone, Args)]
pub struct ParityArgs {
    #[command(flatten)]
    pub replay: ReplayArgs,
}

fn show(o: &Option<fleet::PathOutcome>) -> String {
    match o {
        Some(o) => serde_json::to_string(o).unwrap_or_else(|_| format!("{o:?}")),
        None => "(none)".into(),
    }
}

/// `fleet-lab parity`.
pub fn run(args: ParityArgs) -> Result<()> {
    args.replay.validate()?;
    let (path, corpus) = args.replay.load_corpus()?;
    let mut failures = Vec::new();
    for profile in [Profile::Pinned, Profile::Serial] {
        let spec = args.replay.spec(Contender::Fleet(profile), path.clone())?;
        let a = lab::run(&spec, &corpus)?;
        let r = &a.report;
        match &a.replay.first_mismatch {
            None if a.replay.parity => println!(
                "parity ok   {:<14} {} cycles, {} paths: every outcome equals the golden one",
                r.label, r.cycles, r.paths
            ),
            mm => {
                let line = match mm {
                    Some(m) => format!(
                        "parity FAIL {:<14} cycle {} path {}: golden {} but produced {}",
                        r.label,
                        m.cycle,
                        m.path,
                        show(&m.expected),
                        show(&m.got)
                    ),
                    None => format!("parity FAIL {:<14}", r.label),
                };
                println!("{line}");
                failures.push(line);
            }
        }
    }
    if !failures.is_empty() {
        bail!(
            "{} binding(s) differ from the golden corpus; first: {}",
            failures.len(),
            failures[0]
        );
    }
    Ok(())
}
