//! `fleet-lab blocks`: serve blocks of a replay to a paired gate over
//! stdin and stdout ([`crate::paired::block`] has the protocol).
//!
//! The gate starts one server of the candidate's build and one of the
//! reference's with the same arguments, so both load the corpus once and
//! boot the contender afresh for every block, and the gate alternates
//! them. Not for people: `fleet-lab gate` is the verb to run.

use std::io::{BufRead, Write};

use anyhow::{bail, Context, Result};
use clap::Args;
use fleet::plan::Profile;

use crate::cmd::run::ReplayArgs;
use crate::lab::{self, Contender, Injection};
use crate::paired::block::{BlockFigures, ServerLine};

/// Arguments of `fleet-lab blocks`.
#[derive(Debug, Clone, Args)]
pub struct BlocksArgs {
    /// The fleet profile each block runs.
    #[arg(long, value_name = "auto|pinned|serial", default_value = "auto")]
    pub fleet_profile: Profile,
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Test only: multiply every unit's CPU and I/O time by F (≥ 1; the
    /// gate passes it to the candidate to show a slowdown fails).
    #[arg(long, value_name = "F", hide = true, value_parser = crate::cmd::bounds::parse_slowdown)]
    pub inject_slowdown: Option<f64>,
    /// Test only: delay every cycle's hand-off by this many ms.
    #[arg(long, value_name = "MS", default_value_t = 0, hide = true)]
    pub inject_delay_ms: u64,
    /// Test only: break one produced outcome.
    #[arg(long, hide = true)]
    pub inject_wrong_outcome: bool,
    /// Test only: refuse every background submit.
    #[arg(long, hide = true)]
    pub inject_refuse_background: bool,
}

/// `fleet-lab blocks`.
pub fn run(args: BlocksArgs) -> Result<()> {
    let out = std::io::stdout();
    let say = |line: ServerLine| -> Result<()> {
        let mut o = out.lock();
        serde_json::to_writer(&mut o, &line)?;
        o.write_all(b"\n")?;
        o.flush()?;
        Ok(())
    };
    match serve(&args, &say) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = say(ServerLine::error(&crate::cmd::error_text(&e)));
            Err(e)
        }
    }
}

fn serve(args: &BlocksArgs, say: &dyn Fn(ServerLine) -> Result<()>) -> Result<()> {
    let mut replay = args.replay.clone();
    // stdout is the protocol: no progress bar.
    replay.quiet = true;
    replay.validate()?;
    let (path, corpus) = replay.load_corpus()?;
    let mut spec = replay.spec(Contender::Fleet(args.fleet_profile), path)?;
    spec.injection = Injection {
        delay_ms: args.inject_delay_ms,
        wrong_outcome: args.inject_wrong_outcome,
        refuse_background: args.inject_refuse_background,
        slowdown: args.inject_slowdown,
    };
    say(ServerLine::ready(&spec.contender.label()))?;
    let in_lab_cgroup = spec.cgroup_quota.is_some();
    for line in std::io::stdin().lock().lines() {
        let line = line.context("reading the gate's requests")?;
        match line.trim() {
            "block" => {
                let a = lab::run(&spec, &corpus).context("block run")?;
                say(ServerLine::block(BlockFigures::from_report(
                    &a.report,
                    in_lab_cgroup,
                )))?;
            }
            "" => {}
            other => bail!("unknown request {other:?}: the protocol's one request is `block`"),
        }
    }
    Ok(())
}
