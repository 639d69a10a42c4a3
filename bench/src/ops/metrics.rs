//! The lab's metrics exporter: the Prometheus recorder behind the `metrics`
//! facade the fleet records through, an optional loopback scrape endpoint
//! (`fleet-lab run --metrics-addr 127.0.0.1:PORT`), and the scrape text for
//! `metrics.prom` in a report directory.
//!
//! Source: `DESIGN.md` §3 "Telemetry" (names in `fleet::telemetry`). The
//! recorder is process-wide: the first [`install`] sets it, later calls
//! share it (values accumulate across runs in one process) and may add a
//! listener of their own. Each listener stops when its handle drops.

use super::serve::{reply, Listener, ServeError};
use fleet::telemetry;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use thiserror::Error;

/// Bucket bounds of `degenbot_fleet_bin_makespan_seconds`, seconds: 1 ms to
/// 5 s, dense around the ≈ 86 ms bin walk and the ≈ 175 ms bin window of
/// the live bot (`DESIGN.md` §5).
pub const BIN_MAKESPAN_BUCKETS_S: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.175, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// The scrape path served by the listener (any other path is a 404).
pub const SCRAPE_PATH: &str = "/metrics";

/// The file name the scrape is dumped to in a report directory.
pub const PROM_FILE: &str = "metrics.prom";

/// The exporter could not be installed or its scrape not written.
#[derive(Debug, Error)]
pub enum MetricsError {
    /// Another metrics recorder was installed in this process first.
    #[error("another metrics recorder is installed in this process: {0} (install the lab's exporter before anything else records)")]
    ForeignRecorder(String),
    /// The Prometheus recorder could not be built.
    #[error("cannot build the Prometheus recorder")]
    Build(#[from] BuildError),
    /// The scrape endpoint could not start.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// `metrics.prom` could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The process-wide recorder handle, set by the first [`install`].
static RECORDER: Mutex<Option<PrometheusHandle>> = Mutex::new(None);

/// The installed exporter, and its scrape endpoint if one was asked for.
/// Dropping it stops the endpoint; the recorder stays installed.
#[derive(Debug)]
pub struct MetricsHandle {
    prom: PrometheusHandle,
    listener: Option<Listener>,
}

/// Install the Prometheus recorder as the process's `metrics` recorder
/// (once; later calls reuse it) and, with `addr`, serve the scrape text at
/// `http://ADDR/metrics` until the handle drops. Port 0 picks a free port
/// ([`MetricsHandle::local_addr`] tells which). The bin makespan is a real
/// histogram with [`BIN_MAKESPAN_BUCKETS_S`]. Errors: [`MetricsError`]
/// (a foreign recorder, or the address cannot be bound).
pub fn install(addr: Option<SocketAddr>) -> Result<MetricsHandle, MetricsError> {
    let prom = recorder()?;
    let listener = match addr {
        None => None,
        Some(addr) => {
            let (serve, upkeep) = (prom.clone(), prom.clone());
            Some(Listener::spawn(
                addr,
                "fleet-lab-metrics",
                move |req| {
                    let ok = *req.method() == tiny_http::Method::Get
                        && req.url().split('?').next() == Some(SCRAPE_PATH);
                    if ok {
                        let text = serve.render();
                        reply(req, 200, "text/plain; version=0.0.4", text);
                    } else {
                        let msg = format!("not found: GET {SCRAPE_PATH} for the scrape\n");
                        reply(req, 404, "text/plain", msg);
                    }
                },
                move || upkeep.run_upkeep(),
            )?)
        }
    };
    Ok(MetricsHandle { prom, listener })
}

/// The process-wide handle, installing the recorder on first use.
fn recorder() -> Result<PrometheusHandle, MetricsError> {
    let mut slot = RECORDER.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(h) = slot.as_ref() {
        return Ok(h.clone());
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(telemetry::BIN_MAKESPAN_SECONDS.to_string()),
            &BIN_MAKESPAN_BUCKETS_S,
        )?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder)
        .map_err(|e| MetricsError::ForeignRecorder(e.to_string()))?;
    telemetry::describe();
    *slot = Some(handle.clone());
    Ok(handle)
}

impl MetricsHandle {
    /// The scrape text now (Prometheus text format 0.0.4), as served at
    /// [`SCRAPE_PATH`].
    pub fn render(&self) -> String {
        self.prom.render()
    }

    /// The scrape endpoint's bound address; `None` without one.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().map(Listener::local_addr)
    }

    /// Write the scrape text to `dir/metrics.prom` ([`PROM_FILE`]) and
    /// return the path. Errors: [`MetricsError::Write`].
    pub fn write_prom(&self, dir: &Path) -> Result<PathBuf, MetricsError> {
        let path = dir.join(PROM_FILE);
        std::fs::write(&path, self.render()).map_err(|source| MetricsError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }
}
