//! `fleet-lab`: the lab's command line. One subcommand per verb; each verb
//! lives in `fleet_bench::cmd::<verb>`. Errors print as one plain message
//! (with its causes) on stderr and exit with status 2.

use clap::{Parser, Subcommand};
use fleet_bench::cmd;
use std::process::ExitCode;

/// mimalloc (the default `mimalloc` feature): its per-thread heaps stay
/// warm on the pinned seats from one cycle to the next, so a cycle's small
/// allocations rarely reach the kernel. Without the feature the system
/// allocator serves the process; `fleet-lab --version` names which one.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `fleet-lab --version`: the version and the global allocator built in.
#[cfg(feature = "mimalloc")]
const LONG_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (allocator: mimalloc)");
/// `fleet-lab --version`: the version and the global allocator built in.
#[cfg(not(feature = "mimalloc"))]
const LONG_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (allocator: system)");

/// The fleet lab.
#[derive(Debug, Parser)]
#[command(
    name = "fleet-lab",
    version,
    long_version = LONG_VERSION,
    about = "The fleet lab: plan, replay, compare and gate the worker fleet"
)]
struct Cli {
    /// Keep transparent huge pages for this process. By default they are
    /// turned off (`prctl(PR_SET_THP_DISABLE)`): the kernel's collapse of
    /// sparse 2 MiB ranges would grow the resident set minutes after a
    /// heap release with no allocation behind it (docs/lab.md, "Soaks").
    #[arg(long, global = true)]
    allow_thp: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay the corpus through the fleet and write a report (the main job).
    Run(cmd::run::RunArgs),
    /// Check both bindings against the golden corpus (non-zero exit on the first difference).
    Parity(cmd::parity::ParityArgs),
    /// Run the fleet and the designs it replaces back to back; one table, one page.
    Compare(cmd::compare::CompareArgs),
    /// Run a CI profile (A = auto, B = forced pinned) paired against a reference build and enforce its budgets.
    Gate(cmd::gate::GateArgs),
    /// Serve replay blocks to a paired gate over stdin and stdout (what `gate` starts).
    Blocks(cmd::blocks::BlocksArgs),
    /// Print the detected quota, the plan, the budget table and the census projection.
    Plan(cmd::plan::PlanArgs),
    /// Generate, verify or derive the golden outcome corpus.
    Corpus(cmd::corpus::CorpusArgs),
    /// Render earlier runs' reports side by side.
    Report(cmd::report::Args),
    /// Read or retune the posture policy of a live run (its operator channel).
    Posture(cmd::posture::PostureArgs),
    /// The routing lab: simulate the crawling fleet, compare the router with its baselines, load routerd.
    #[cfg(feature = "routing-lab")]
    Route(cmd::route::RouteArgs),
    /// Keep N threads busy until stdin closes (the contention process of --contend).
    Spin(cmd::spin::SpinArgs),
}

/// Installs the process's subscriber: a `fmt` layer on stderr filtered by
/// `RUST_LOG` (default `warn`), and with the `tracy` feature a Tracy layer
/// filtered by `FLEET_TRACY_FILTER` (default `debug`: every fleet span).
/// Filters are per layer, so spans no layer wants stay disabled at their
/// call sites and cost one cached interest check.
fn install_subscriber() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    use std::io::IsTerminal;
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        );
    let registry = tracing_subscriber::registry().with(fmt);
    #[cfg(feature = "tracy")]
    let registry = registry.with(tracy::layers());
    registry.init();
}

/// The Tracy layers (only with the `tracy` feature; see `docs/profiling.md`).
#[cfg(feature = "tracy")]
mod tracy {
    use std::cell::Cell;
    use tracing::span::Id;
    use tracing::Subscriber;
    use tracing_subscriber::layer::Context;
    use tracing_subscriber::registry::LookupSpan;
    use tracing_subscriber::{EnvFilter, Layer};

    /// The env variable holding the Tracy layer's filter (`EnvFilter` syntax).
    pub const FILTER_ENV: &str = "FLEET_TRACY_FILTER";

    /// The Tracy layer (filtered by [`FILTER_ENV`], default `debug`) and the
    /// thread-naming layer beside it.
    pub fn layers<S>() -> impl Layer<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let filter =
            EnvFilter::try_from_env(FILTER_ENV).unwrap_or_else(|_| EnvFilter::new("debug"));
        let tracy = tracing_tracy::TracyLayer::new(ZoneText::default());
        ThreadNames.and_then(tracy).with_filter(filter)
    }

    /// Tracy configuration: span fields go to the zone's text, not its name,
    /// so every `solve.bin` zone aggregates under one name in Tracy's
    /// statistics (the bin, paths and walk time show when a zone is
    /// selected). No call stacks are collected (their cost is per zone).
    #[derive(Default)]
    struct ZoneText(tracing_subscriber::fmt::format::DefaultFields);

    impl tracing_tracy::Config for ZoneText {
        type Formatter = tracing_subscriber::fmt::format::DefaultFields;

        fn formatter(&self) -> &Self::Formatter {
            &self.0
        }

        fn format_fields_in_zone_name(&self) -> bool {
            false
        }
    }

    thread_local! {
        static NAMED: Cell<bool> = const { Cell::new(false) };
    }

    /// Gives Tracy each thread's full Rust name (`work-fleet-solver-3`) the
    /// first time the thread enters a span. Tracy would otherwise read the
    /// kernel's copy, cut to 15 bytes, and every solver seat's lane would
    /// read `work-fleet-solv`. The main thread keeps Tracy's own label
    /// (Tracy also renames the OS thread, and `main` would hide the
    /// process name from `top`).
    struct ThreadNames;

    impl<S: Subscriber> Layer<S> for ThreadNames {
        fn on_enter(&self, _id: &Id, _ctx: Context<'_, S>) {
            if NAMED.with(|n| n.replace(true)) {
                return;
            }
            let thread = std::thread::current();
            let name = thread.name().filter(|n| *n != "main");
            if let (Some(name), Some(client)) = (name, tracing_tracy::client::Client::running()) {
                client.set_thread_name(name);
            }
        }
    }
}

fn main() -> ExitCode {
    // Piping into `head` must end the program quietly, not panic on EPIPE.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    install_subscriber();
    let cli = Cli::parse();
    if !cli.allow_thp {
        if let Err(e) = fleet_bench::probe::heap::deny_transparent_huge_pages() {
            eprintln!("fleet-lab: warning: transparent huge pages stay on: {e}");
        }
    }
    let result = match cli.command {
        Command::Run(args) => cmd::run::run(args),
        Command::Parity(args) => cmd::parity::run(args),
        Command::Compare(args) => cmd::compare::run(args),
        Command::Gate(args) => cmd::gate::run(args),
        Command::Blocks(args) => cmd::blocks::run(args),
        Command::Plan(args) => cmd::plan::run(&args),
        Command::Corpus(args) => cmd::corpus::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Posture(args) => cmd::posture::run(args),
        #[cfg(feature = "routing-lab")]
        Command::Route(args) => cmd::route::run(args),
        Command::Spin(args) => cmd::spin::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fleet-lab: error: {}", cmd::error_text(&e));
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn the_long_version_names_the_allocator_built_in() {
        let cmd = Cli::command();
        cmd.clone().debug_assert();
        let version = cmd.render_long_version();
        let want = if cfg!(feature = "mimalloc") {
            "(allocator: mimalloc)"
        } else {
            "(allocator: system)"
        };
        assert!(version.contains(want), "{version}");
        assert!(version.contains(env!("CARGO_PKG_VERSION")), "{version}");
    }
}
