//! `routerd`: the router service. With no arguments it serves on
//! 127.0.0.1:8080 and keeps its data in `./router-data/` (SQLite).
//! `routerd facts get|set` talks to a running one as the operator.
//! Source: `ROUTING.md` §4; the API is documented in `docs/router.md`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

use router::config::RouterConfig;
use router::http::listener::{Bounded, Timeouts};
use router::http::serve;
use router::http::{app, wall_clock, ManualClock, Shell};
use router::store::Store;
use router::Router;

mod alloc;
mod facts;
mod limits;
mod replica;
mod stop;
mod store;

use facts::{facts, FactsOp};
use stop::StopSignal;
use store::open_store;

#[derive(Parser, Debug)]
#[command(
    name = "routerd",
    about = "The router service: leases crawling work to devices and learns from what comes back."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(clap::Args, Debug, Clone)]
struct ServeArgs {
    /// Data directory (SQLite files `router.db` and `router-log.db`, event log `events.jsonl`).
    #[arg(long, default_value = "router-data")]
    data: PathBuf,
    /// Store: absent = SQLite in the data directory; `postgres://…` =
    /// PostgreSQL (or env ROUTERD_STORE, which keeps a password off the
    /// command line). libpq's `sslmode` (disable, prefer — the default —,
    /// require, verify-ca, verify-full) and `sslrootcert` keys set TLS.
    #[arg(long, env = "ROUTERD_STORE", hide_env_values = true)]
    store: Option<String>,
    /// PostgreSQL schema holding the tables (with `--store postgres://…`).
    #[arg(long, default_value = "public")]
    store_schema: String,
    /// PostgreSQL: most connections open at once (1..=64).
    #[arg(long, default_value_t = 4)]
    store_pool: usize,
    /// PostgreSQL: longest a store call may take, seconds, (0, 3600]; past
    /// it the request gets 503 `store_unavailable` and the connection is
    /// replaced.
    #[arg(long, default_value_t = 30.0)]
    store_timeout_s: f64,
    /// PostgreSQL: longest a connect may take (TCP, TLS, authentication),
    /// seconds, (0, 3600]; the URL's `connect_timeout` wins when set.
    #[arg(long, default_value_t = 10.0)]
    store_connect_timeout_s: f64,
    /// PostgreSQL: CA certificates (PEM) for `sslmode=verify-ca` or
    /// `verify-full` (instead of the URL's `sslrootcert`).
    #[arg(long)]
    store_ca_file: Option<PathBuf>,
    /// SQLite's `synchronous`: `full` (default: an answered write survives
    /// power loss) or `normal` (it survives a kill of the process only;
    /// for a store that needs no more, such as a simulation's).
    #[arg(long, default_value = "full", value_parser = ["full", "normal"])]
    sqlite_synchronous: String,
    /// Address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Operator key (or env ROUTERD_OPERATOR_KEY); absent: a random key kept
    /// in `<data>/operator.key` (created on first start, mode 0600).
    #[arg(long, env = "ROUTERD_OPERATOR_KEY", hide_env_values = true)]
    operator_key: Option<String>,
    /// Registration token devices present (or env ROUTERD_REGISTRATION_TOKEN);
    /// absent: a random token kept in `<data>/registration.token`.
    #[arg(long, env = "ROUTERD_REGISTRATION_TOKEN", hide_env_values = true)]
    registration_token: Option<String>,
    /// More registration credentials, one `NAME TOKEN` a line (`#`
    /// comments): devices registered with different credentials count
    /// apart, and holding any, every quorum needs two credentials
    /// (docs/router.md "Threat model").
    #[arg(long, value_name = "PATH")]
    credentials_file: Option<std::path::PathBuf>,
    /// Burst window, seconds (0..=86,400; 0 turns the rule off): devices of
    /// one credential registered from different networks less than this
    /// apart count as one identity until the burst hold has passed.
    #[arg(long, default_value_t = routing::trust::BURST_S)]
    burst_s: f64,
    /// Burst hold, seconds (0..=2,592,000): how long after the later
    /// registration a burst's devices keep counting as one.
    #[arg(long, default_value_t = routing::trust::BURST_HOLD_S)]
    burst_hold_s: f64,
    /// Tick period in milliseconds (1..=60,000).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    tick_ms: u64,
    /// Lease TTL in seconds (1..=86,400).
    #[arg(long, default_value_t = 60.0)]
    lease_ttl_s: f64,
    /// Run on a manual clock starting at START_S (seconds): time moves, and
    /// a tick runs, only when the operator posts `{"advance_s": S}` to
    /// `/v1/clock`; no background ticker. For tests and replays
    /// (docs/router.md, "A manual clock"); never for a live fleet.
    #[arg(long, value_name = "START_S")]
    manual_clock: Option<f64>,
    /// Each device's request budget: CAPACITY,PER_S (requests; refill per
    /// second). Registering again does not refill it.
    #[arg(long, value_name = "CAP,PER_S", default_value = "20,10", value_parser = rate)]
    device_rate: (f64, f64),
    /// Registrations per registration credential: CAPACITY,PER_S.
    #[arg(long, value_name = "CAP,PER_S", default_value = "100000,1000", value_parser = rate)]
    registration_rate: (f64, f64),
    /// Registration attempts per source address: CAPACITY,PER_S (behind a
    /// reverse proxy every device has the proxy's address: raise it).
    #[arg(long, value_name = "CAP,PER_S", default_value = "1000,10", value_parser = rate)]
    registration_address_rate: (f64, f64),
    /// Seconds a stop (SIGTERM or SIGINT) waits for open requests before
    /// routerd stops with them still open (0..=600); the final snapshot is
    /// written either way.
    #[arg(long, default_value_t = 10.0)]
    drain_s: f64,
    /// Most targets one device may discover per price window (60 s).
    #[arg(long, default_value_t = 10_000)]
    discovery_per_window: usize,
    /// Most deposits accepted and not yet answered by the store
    /// (1..=1,000,000); past it a deposit gets 503 `overloaded` with
    /// `Retry-After` and nothing of it is kept.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    deposit_queue: u64,
    /// Least seconds between two agings of the field (0..=3,600; 0: every tick).
    #[arg(long, default_value_t = 0.0)]
    aging_period_s: f64,
    /// Age the field in place under the router's lock, not on a clone:
    /// no second copy of the field, its walk's time on the lock.
    #[arg(long)]
    aging_in_place: bool,
    /// Most long polls held at once (1..=1,000,000); past it a long poll
    /// is answered at once, empty, with its `retry_after_s`. Each held
    /// poll keeps its connection's buffers (about 26 KB).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_held_polls: u64,
    /// Most connections open at once (1..=1,000,000); at the cap new ones
    /// wait in the kernel's backlog. Keep it under `ulimit -n`.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections: u64,
    /// Memory limit in MiB the connection cap follows (0..=1,048,576; 0
    /// turns it off): fewer connections than `--max-connections` are
    /// accepted when only fewer fit under 90% of it (docs/router.md,
    /// "Cheaper connections"). Default: the control group's limit, where
    /// routerd runs under one.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_048_576))]
    memory_limit_mib: Option<u64>,
    /// Seconds a connection may send nothing before it is closed: a
    /// request that never finishes its headers or body, a kept-alive
    /// connection left idle (0 < S ≤ 3,600; above the 30 s long poll).
    #[arg(long, default_value_t = 45.0)]
    idle_s: f64,
    /// Seconds a connection may stay open between requests with nothing
    /// sent either way before it is closed (0 < S ≤ 3,600; at most
    /// `--idle-s`, to which a larger value is cut): a device working an
    /// item gives its connection's slot back (docs/router.md, "The small
    /// box").
    #[arg(long, default_value_t = 5.0)]
    keep_alive_s: f64,
    /// Seconds a logged deposit is kept once a written snapshot covers it
    /// (60..=31,536,000); then it is pruned from the log.
    #[arg(long, default_value_t = 86_400.0)]
    deposit_retention_s: f64,
    /// Seconds a device that is not live is kept, from its last
    /// registration or the end of its last live scope (60..=31,536,000;
    /// suspended and revoked ones are kept); then it is forgotten.
    #[arg(long, default_value_t = 2_592_000.0)]
    device_retention_s: f64,
    /// Size cap of `events.jsonl` in MiB (1..=65,536): at the cap it is
    /// renamed `events.jsonl.1` (replacing the older one) and restarted.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    events_max_mib: u64,
    /// Seconds from a request's first byte to its answer's first byte
    /// before the connection is closed, however often the peer sends a
    /// byte (30 < S ≤ 3,600: above the 30 s long poll).
    #[arg(long, default_value_t = 60.0)]
    request_s: f64,
    /// Serve as one of several replicas over one PostgreSQL store, under
    /// this name (1..=64 of `[A-Za-z0-9._-]`): one replica leads and the
    /// others forward to it (docs/router.md "Replicas"). Needs `--store
    /// postgres://…`, `--operator-key` and `--registration-token`.
    #[arg(long, value_name = "NAME")]
    replica_id: Option<String>,
    /// Replicas: the base URL other replicas reach this one on (default
    /// `http://` and the bound `--listen` address).
    #[arg(long, value_name = "URL", requires = "replica_id")]
    advertise: Option<String>,
    /// Replicas: how long a won or renewed lead lasts, seconds [1, 3600];
    /// a campaign runs every third of it. A dead leader is replaced within
    /// it (plus `--store-timeout-s` when it died inside a write).
    #[arg(long, default_value_t = 6.0, requires = "replica_id")]
    lead_ttl_s: f64,
    /// Milliseconds the allocator keeps freed memory before it gives it
    /// back to the system (0..=60,000; 0: at once). What it keeps counts
    /// against a memory limit ("The small box", docs/router.md).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=60_000))]
    purge_delay_ms: u32,
}

/// Parses `CAPACITY,PER_S`: a capacity ≥ 1 and a refill > 0, both finite.
fn rate(s: &str) -> Result<(f64, f64), String> {
    let (c, r) = s
        .split_once(',')
        .ok_or_else(|| format!("expected CAPACITY,PER_S, got {s:?}"))?;
    let c: f64 = c
        .trim()
        .parse()
        .map_err(|e| format!("capacity {c:?}: {e}"))?;
    let r: f64 = r.trim().parse().map_err(|e| format!("refill {r:?}: {e}"))?;
    routing::politeness::Bucket::new(c, r).map_err(|e| e.to_string())?;
    Ok((c, r))
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve (the default).
    Serve,
    /// Read or write the operator's facts on a running routerd.
    Facts {
        #[command(subcommand)]
        op: FactsOp,
        /// Base URL of the running routerd.
        #[arg(long, default_value = "http://127.0.0.1:8080", global = true)]
        url: String,
        /// Operator key (or env ROUTERD_OPERATOR_KEY; absent: read from
        /// `router-data/operator.key`).
        #[arg(
            long,
            env = "ROUTERD_OPERATOR_KEY",
            hide_env_values = true,
            global = true
        )]
        operator_key: Option<String>,
    },
}

/// The secret in `path`, or, where no file is there, a new random one
/// written there (mode 0600). A file that is there is never overwritten:
/// one that cannot be read, is not UTF-8 or holds only blanks is an error
/// naming it (devices and operators hold the secret it kept).
fn secret_file(path: &std::path::Path) -> Result<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let t = text.trim().to_string();
            if t.is_empty() {
                bail!(
                    "{} is empty: write the secret into it, or remove it to have a new one made",
                    path.display()
                );
            }
            return Ok(t);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => bail!(
            "cannot read {}: {e} (it is kept as it is; fix or remove it)",
            path.display()
        ),
    }
    let secret = router::ids::token();
    let mut opts = std::fs::OpenOptions::new();
    // create_new: a file that appeared since the read is not overwritten.
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    use std::io::Write;
    let mut f = opts
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    writeln!(f, "{secret}")?;
    tracing::info!("created {}", path.display());
    Ok(secret)
}

/// The router's configuration from the serve flags and the data directory's
/// secrets (created on first start).
///
/// Errors: an unreadable secret or credentials file, a credentials file
/// that repeats the registration token, a flag out of its range.
pub(crate) fn router_config(args: &ServeArgs) -> Result<RouterConfig> {
    let operator_key = match &args.operator_key {
        Some(k) => k.clone(),
        None => secret_file(&args.data.join("operator.key"))?,
    };
    let registration_token = match &args.registration_token {
        Some(k) => k.clone(),
        None => secret_file(&args.data.join("registration.token"))?,
    };
    let more_credentials = match &args.credentials_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            router::credentials::parse(&text)
                .with_context(|| format!("credentials file {}", path.display()))?
        }
        None => Default::default(),
    };
    if more_credentials.values().any(|t| *t == registration_token) {
        bail!("the credentials file repeats the registration token");
    }
    let relation = routing::trust::Relation {
        burst_s: args.burst_s,
        burst_hold_s: args.burst_hold_s,
    };
    if !(relation.is_valid()
        && relation.burst_s <= 86_400.0
        && relation.burst_hold_s <= 2_592_000.0)
    {
        bail!("--burst-s must be in [0, 86400] and --burst-hold-s in [0, 2592000]");
    }
    let verify = routing::verify::VerifyConfig {
        relation,
        ..Default::default()
    };
    for (name, v) in [
        ("--deposit-retention-s", args.deposit_retention_s),
        ("--device-retention-s", args.device_retention_s),
    ] {
        if !(v.is_finite() && (60.0..=31_536_000.0).contains(&v)) {
            bail!("{name} must be in [60, 31536000], got {v}");
        }
    }
    Ok(RouterConfig {
        verify,
        deposit_retention_s: args.deposit_retention_s,
        device_retention_s: args.device_retention_s,
        operator_key,
        registration_token,
        more_credentials,
        lease_ttl_s: args.lease_ttl_s,
        device_rate: args.device_rate,
        registration_rate: args.registration_rate,
        registration_address_rate: args.registration_address_rate,
        discovery_per_window: args.discovery_per_window,
        deposit_queue: args.deposit_queue as usize,
        held_polls: args.max_held_polls as usize,
        aging_period_s: args.aging_period_s,
        aging_in_place: args.aging_in_place,
        ..RouterConfig::default()
    })
}

/// Opens the router on `store` (state rebuilt from it) behind its shell, on
/// the manual clock when `--manual-clock` asks for one.
///
/// Errors: the manual clock's start invalid, the router or its event log
/// unopenable.
fn open_shell(
    args: &ServeArgs,
    cfg: RouterConfig,
    store: Box<dyn Store>,
) -> Result<std::sync::Arc<Shell>> {
    let manual = match args.manual_clock {
        Some(start) => {
            Some(ManualClock::new(start).map_err(|e| anyhow::anyhow!("--manual-clock: {e}"))?)
        }
        None => None,
    };
    let clock = match &manual {
        Some(m) => m.clock(),
        None => wall_clock(),
    };
    let router = Router::open(cfg, store, clock()).context("opening the router")?;
    tracing::info!(
        backend = router.backend(),
        devices = router.known_devices(),
        targets = router.targets(),
        replayed = router.counters().replayed,
        "state rebuilt"
    );
    let events = Some(args.data.join("events.jsonl"));
    let shell = match manual {
        Some(m) => Shell::new_manual(router, m, events),
        None => Shell::new(router, clock, events),
    }
    .context("opening the event log")?;
    shell.set_events_max_bytes(args.events_max_mib << 20);
    Ok(shell)
}

/// Serves `shell` on `args.listen` until a stop signal, then drains open
/// requests for at most `drain` and writes a final snapshot.
///
/// Errors: the address cannot be bound, or serving fails.
async fn run_server(
    args: ServeArgs,
    shell: std::sync::Arc<Shell>,
    drain: Duration,
    timeouts: Timeouts,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let local = listener.local_addr()?;
    let listener = Bounded::new(listener, args.max_connections as usize, timeouts);
    limits::follow_memory(&listener, &args);
    shell.count_connections(listener.cap_handle());
    // Before the line: a stop signal sent after it is never lost.
    let stop = StopSignal::install()?;
    // The line tests and scripts wait for.
    println!("routerd listening on http://{local}");
    tracing::info!("listening on http://{local}");
    let ticker = shell.clone();
    let period = Duration::from_millis(args.tick_ms);
    // On a manual clock each advance runs its own tick.
    let background = !shell.is_manual();
    tokio::spawn(async move {
        if !background {
            return;
        }
        let mut every = tokio::time::interval(period);
        loop {
            every.tick().await;
            let s = ticker.clone();
            let _ = tokio::task::spawn_blocking(move || s.tick()).await;
        }
    });
    let last = shell.clone();
    let closer = shell.clone();
    let stopping = std::sync::Arc::new(tokio::sync::Notify::new());
    let stopped = stopping.clone();
    // With the peer's address: registrations are budgeted per address.
    let server = serve::serve(listener, app(shell), async move {
        stop.recv().await;
        tracing::info!("stopping: draining open requests");
        // Held long polls answer now instead of holding the stop.
        closer.begin_close();
        stopped.notify_one();
    });
    // The drain is bounded: a connection that never finishes its
    // request does not keep routerd alive.
    tokio::select! {
        () = server => {}
        _ = async {
            stopping.notified().await;
            tokio::time::sleep(drain).await;
        } => tracing::warn!("stopping with requests still open after the {:?} drain", drain),
    }
    // A clean stop writes a final snapshot.
    let _ = tokio::task::spawn_blocking(move || last.final_tick()).await;
    Ok(())
}

/// The multi-threaded runtime, sized from the host's CPU quota
/// (`fleet::quota`, logged with its reason).
///
/// Errors: the runtime cannot be built.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    let quota = fleet::quota::detect_live();
    let workers = quota.schedulable_cpus().max(1) as usize;
    tracing::info!(
        workers,
        effective_cpus = quota.effective_cpus(),
        "runtime sized from the CPU quota: {}",
        quota.reason
    );
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .max_blocking_threads(workers * 4)
        .enable_all()
        .build()
        .context("building the runtime")
}

fn serve(args: ServeArgs) -> Result<()> {
    alloc::set_purge_delay_ms(args.purge_delay_ms);
    let (drain, timeouts) = limits::serve_limits(&args)?;
    if let Some(name) = args.replica_id.clone() {
        return replica::serve_replica(args, name, drain, timeouts);
    }
    std::fs::create_dir_all(&args.data)
        .with_context(|| format!("creating the data directory {}", args.data.display()))?;
    // Held until serve returns (the process ends with it).
    let _data_lock = store::lock_data_dir(&args.data)?;
    let store = open_store(&args)?;
    let cfg = router_config(&args)?;
    let shell = open_shell(&args, cfg, store)?;
    runtime()?.block_on(run_server(args, shell, drain, timeouts))
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        None | Some(Command::Serve) => serve(cli.serve),
        Some(Command::Facts {
            op,
            url,
            operator_key,
        }) => facts(op, &url, operator_key),
    }
}
