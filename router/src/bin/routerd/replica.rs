//! `routerd --replica-id NAME`: one of several replicas over one
//! PostgreSQL store. The replica serves the front (`router::replica::front`)
//! on `--listen`, campaigns for the lead, and opens the router, fenced by
//! its term, whenever it wins. Source:
//! `docs/decisions/0020-replicas-over-one-postgresql.md`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use router::http::listener::{Bounded, Timeouts};
use router::http::serve;
use router::http::{wall_clock, Shell};
use router::replica::{check_name, forward_key, front::front, Opener, Replica, ReplicaConfig};
use router::store::PgStore;
use router::Router;

use crate::store::{is_postgres, pg_options};
use crate::{router_config, ServeArgs, StopSignal};

/// The checks replica mode adds to the serve flags: a PostgreSQL store,
/// the wall clock, and the operator key and registration token given (all
/// replicas must share them), and the lead's TTL in range.
fn check_replica_args(args: &ServeArgs, name: &str) -> Result<String> {
    check_name(name).map_err(anyhow::Error::msg)?;
    let url = match &args.store {
        Some(u) if is_postgres(u) => u.clone(),
        _ => bail!("--replica-id needs --store postgres://… (replicas share one PostgreSQL store)"),
    };
    if args.manual_clock.is_some() {
        bail!("--replica-id runs on the wall clock; --manual-clock is for one routerd");
    }
    if args.operator_key.is_none() || args.registration_token.is_none() {
        bail!("--replica-id needs --operator-key and --registration-token (or their env variables): every replica must hold the same ones");
    }
    if let Some(a) = &args.advertise {
        let ok = a.starts_with("http://")
            && a.parse::<axum::http::Uri>()
                .is_ok_and(|u| u.host().is_some() && u.path() == "/" && u.query().is_none());
        if !ok {
            bail!(
                "--advertise must be a base URL such as http://10.0.0.11:8080 (no path), got {a:?}"
            );
        }
    }
    let ttl = args.lead_ttl_s;
    if !(ttl.is_finite() && (1.0..=3600.0).contains(&ttl)) {
        bail!("--lead-ttl-s must be in [1, 3600], got {ttl}");
    }
    Ok(url)
}

/// Serves as replica `name` until a stop signal; then drains, writes the
/// final snapshot when leading and resigns the lead.
///
/// Errors: a flag out of range, the data directory locked by another
/// routerd, the store unreachable at start, the address not bindable.
pub(crate) fn serve_replica(
    args: ServeArgs,
    name: String,
    drain: Duration,
    timeouts: Timeouts,
) -> Result<()> {
    let url = check_replica_args(&args, &name)?;
    std::fs::create_dir_all(&args.data)
        .with_context(|| format!("creating the data directory {}", args.data.display()))?;
    let _data_lock = crate::store::lock_data_dir(&args.data)?;
    let cfg = router_config(&args)?;
    let opts = pg_options(&args)?;
    // The campaign's own handle: one connection, unfenced.
    let campaign = PgStore::open(
        &url,
        &router::store::PgOptions {
            pool_size: 1,
            ..opts.clone()
        },
    )
    .context("connecting to PostgreSQL")?;
    let campaign = Arc::new(campaign);
    let events = args.data.join("events.jsonl");
    let max_events = args.events_max_mib << 20;
    let forward = forward_key(&cfg.operator_key);
    let open: Opener = Arc::new(move |fence| {
        let clock = wall_clock();
        let store = PgStore::open(
            &url,
            &router::store::PgOptions {
                fence: Some(fence),
                ..opts.clone()
            },
        )
        .map_err(|e| format!("connecting to PostgreSQL: {e}"))?;
        let router = Router::open(cfg.clone(), Box::new(store), clock())
            .map_err(|e| format!("opening the router: {e}"))?;
        let shell = Shell::new(router, clock, Some(events.clone()))
            .map_err(|e| format!("opening the event log: {e}"))?;
        shell.set_events_max_bytes(max_events);
        Ok(shell)
    });
    crate::runtime()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("binding {}", args.listen))?;
        let local = listener.local_addr()?;
        let advertise = args.advertise.clone().unwrap_or_else(|| format!("http://{local}"));
        let replica = Replica::new(ReplicaConfig {
            name: name.clone(),
            url: advertise,
            ttl: Duration::from_secs_f64(args.lead_ttl_s),
            forward_key: forward,
            tick: Duration::from_millis(args.tick_ms),
        });
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let campaigns = tokio::spawn(replica.clone().campaign_loop(campaign.clone(), open, stop_rx));
        let listener = Bounded::new(listener, args.max_connections as usize, timeouts);
        crate::limits::follow_memory(&listener, &args);
        // Before the line: a stop signal sent after it is never lost.
        let stop = StopSignal::install()?;
        println!("routerd listening on http://{local}");
        tracing::info!(replica = %name, holder = replica.holder(), "replica listening on http://{local}");
        let stopping = Arc::new(tokio::sync::Notify::new());
        let stopped = stopping.clone();
        let server = serve::serve(listener, front(replica.clone()), async move {
            stop.recv().await;
            tracing::info!("stopping: draining open requests");
            stopped.notify_one();
        });
        let closer = replica.clone();
        tokio::select! {
            () = server => {}
            _ = async {
                stopping.notified().await;
                closer.close_long_polls();
                tokio::time::sleep(drain).await;
            } => tracing::warn!("stopping with requests still open after the {:?} drain", drain),
        }
        let _ = stop_tx.send(true);
        let _ = campaigns.await;
        replica.finish(&campaign).await;
        Ok(())
    })
}
