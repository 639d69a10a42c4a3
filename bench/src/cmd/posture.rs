//! `fleet-lab posture get|set`: read or retune the posture policy of a live
//! run through its operator channel (`fleet-lab run --operator-addr`).
//!
//! Source: seed 000 §6 (the runtime retune channel). `set` sends a partial
//! patch of the flags given (absent flags keep the live value;
//! `--cordon-sim-intake-floor none` restores half the sim slot cap) and
//! prints the effective policy and posture the run echoes; a refused patch
//! exits non-zero with the run's typed error message.

use crate::ops::operator::{self, PostureView, DEFAULT_OPERATOR_ADDR};
use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Map, Value};
use std::net::SocketAddr;
use std::str::FromStr;

/// `fleet-lab posture`.
#[derive(Debug, Args)]
pub struct PostureArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: PostureAction,
}

/// The two posture verbs.
#[derive(Debug, Subcommand)]
pub enum PostureAction {
    /// Print the effective policy (six keys), the posture and the counters.
    Get(GetArgs),
    /// Retune a live run with a partial patch; prints the effective policy.
    Set(SetArgs),
}

/// `fleet-lab posture get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The run's operator channel, 127.0.0.1:PORT.
    #[arg(long, default_value = DEFAULT_OPERATOR_ADDR)]
    pub addr: SocketAddr,
}

/// The floor flag: a seat count, or `none` to restore the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorArg {
    /// Sims in flight allowed while cordoned, seats.
    Seats(u32),
    /// Unset: half the sim slot cap.
    Default,
}

impl FromStr for FloorArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("none") {
            return Ok(FloorArg::Default);
        }
        s.parse::<u32>()
            .map(FloorArg::Seats)
            .map_err(|_| format!("{s:?} is not a seat count: give N or none"))
    }
}

/// `fleet-lab posture set`. Values are sent as given; the run validates.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// The run's operator channel, 127.0.0.1:PORT.
    #[arg(long, default_value = DEFAULT_OPERATOR_ADDR)]
    pub addr: SocketAddr,
    /// Throttle events that enter the cordon within the enter window (≥ 1).
    #[arg(long)]
    pub cordon_enter_events: Option<u32>,
    /// Rolling window for the event count, ms (> 0).
    #[arg(long, allow_hyphen_values = true, value_parser = crate::cmd::bounds::parse_window_ms)]
    pub cordon_enter_window_ms: Option<u64>,
    /// Throttled duty that enters the cordon, percent, in (0, 100].
    #[arg(long, allow_negative_numbers = true)]
    pub cordon_duty_percent: Option<f64>,
    /// Trailing window for the duty, ms (> 0).
    #[arg(long, allow_hyphen_values = true, value_parser = crate::cmd::bounds::parse_window_ms)]
    pub cordon_duty_window_ms: Option<u64>,
    /// Clean time that exits the cordon, ms (> 0).
    #[arg(long, allow_hyphen_values = true, value_parser = crate::cmd::bounds::parse_window_ms)]
    pub cordon_exit_clean_ms: Option<u64>,
    /// Sims in flight while cordoned, seats (≥ 1), or `none` for half the cap.
    #[arg(long, value_name = "N|none")]
    pub cordon_sim_intake_floor: Option<FloorArg>,
}

impl SetArgs {
    /// The JSON patch of the flags given (possibly empty: the run refuses it).
    pub fn patch(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.to_string(), v);
            }
        };
        put(
            "cordon_enter_events",
            self.cordon_enter_events.map(Value::from),
        );
        put(
            "cordon_enter_window_ms",
            self.cordon_enter_window_ms.map(Value::from),
        );
        put(
            "cordon_duty_percent",
            self.cordon_duty_percent.map(Value::from),
        );
        put(
            "cordon_duty_window_ms",
            self.cordon_duty_window_ms.map(Value::from),
        );
        put(
            "cordon_exit_clean_ms",
            self.cordon_exit_clean_ms.map(Value::from),
        );
        put(
            "cordon_sim_intake_floor",
            self.cordon_sim_intake_floor.map(|f| match f {
                FloorArg::Seats(n) => Value::from(n),
                FloorArg::Default => Value::Null,
            }),
        );
        m
    }
}

/// Run the verb: print the view as pretty JSON on stdout. Errors: the
/// channel unreachable, or the patch refused (the run's message).
pub fn run(args: PostureArgs) -> anyhow::Result<()> {
    let (addr, view) = match args.action {
        PostureAction::Get(a) => (a.addr, operator::get(a.addr)),
        PostureAction::Set(a) => (a.addr, operator::set(a.addr, &a.patch())),
    };
    let view: PostureView = view.with_context(|| format!("posture channel at {addr}"))?;
    println!("{}", serde_json::to_string_pretty(&view)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        set: SetArgs,
    }

    #[test]
    fn flags_become_a_partial_patch_and_none_becomes_null() {
        let cli = Cli::parse_from([
            "x",
            "--cordon-duty-percent",
            "3",
            "--cordon-enter-events",
            "1",
            "--cordon-sim-intake-floor",
            "none",
        ]);
        let p = cli.set.patch();
        assert_eq!(p.len(), 3);
        assert_eq!(p["cordon_duty_percent"], Value::from(3.0));
        assert_eq!(p["cordon_enter_events"], Value::from(1));
        assert_eq!(p["cordon_sim_intake_floor"], Value::Null);
        let cli = Cli::parse_from(["x", "--cordon-sim-intake-floor", "2"]);
        assert_eq!(cli.set.patch()["cordon_sim_intake_floor"], Value::from(2));
        assert!(Cli::parse_from(["x"]).set.patch().is_empty());
        assert!(Cli::try_parse_from(["x", "--cordon-sim-intake-floor", "half"]).is_err());
    }
}
