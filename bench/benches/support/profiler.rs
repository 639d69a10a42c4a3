//! A sampling CPU profiler for criterion benches: `--profile-time` writes a
//! flamegraph.
//!
//! [`FlamegraphProfiler`] implements criterion's
//! [`Profiler`](criterion::profiler::Profiler) over a `pprof`
//! [`ProfilerGuard`]: profiling starts when criterion starts a profiled
//! benchmark and the SVG is written when it stops, so
//!
//! ```text
//! cargo bench -p fleet-bench --bench cores -- --profile-time 2
//! ```
//!
//! leaves `target/criterion/<bench>/profile/flamegraph.svg` for every bench
//! it ran (`DESIGN.md` §6: profiling hooks for pprof). Sampling uses
//! `SIGPROF` (process CPU time), so only CPU the process burns is sampled;
//! time a thread spends blocked does not appear.

use criterion::profiler::Profiler;
use pprof::{ProfilerGuard, ProfilerGuardBuilder};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// The flamegraph file name inside criterion's per-bench profile directory.
pub const FLAMEGRAPH_FILE: &str = "flamegraph.svg";

/// The default sampling frequency, Hz (one sample per ms of CPU).
pub const DEFAULT_FREQUENCY_HZ: i32 = 1000;

/// Frames from these libraries are dropped from samples (signal and unwinder
/// internals that would otherwise sit on top of every stack).
const BLOCKLIST: [&str; 4] = ["libc", "libgcc", "pthread", "vdso"];

/// Why a profile could not be taken or written. The bench itself is not
/// affected; the flamegraph is simply missing.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The sampler could not start (another profiler is running in this
    /// process, or `SIGPROF` cannot be installed). Run one profiled bench
    /// process at a time.
    #[error("cannot start the pprof sampler: {0}; run one profiled bench process at a time")]
    Start(#[source] pprof::Error),
    /// `stop_profiling` came without a matching `start_profiling`.
    #[error("no profile is running for {benchmark}: criterion called stop before start")]
    NotRunning {
        /// The benchmark id criterion passed.
        benchmark: String,
    },
    /// The samples could not be turned into a report or a flamegraph.
    #[error("cannot build the flamegraph for {benchmark}: {source}")]
    Report {
        /// The benchmark id.
        benchmark: String,
        /// The pprof error.
        #[source]
        source: pprof::Error,
    },
    /// The SVG file could not be created.
    #[error("cannot write {path}: {source}; check the target directory is writable")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Criterion's profiler hook over pprof: one `ProfilerGuard` per profiled
/// benchmark, a flamegraph SVG per benchmark directory.
///
/// Use it as `Criterion::default().with_profiler(FlamegraphProfiler::default())`
/// (or [`FlamegraphProfiler::new`] for another frequency). Without
/// `--profile-time` criterion never calls it and it costs nothing.
pub struct FlamegraphProfiler {
    frequency_hz: i32,
    guard: Option<ProfilerGuard<'static>>,
    written: Vec<PathBuf>,
}

impl Default for FlamegraphProfiler {
    fn default() -> Self {
        FlamegraphProfiler::new(DEFAULT_FREQUENCY_HZ)
    }
}

impl FlamegraphProfiler {
    /// A profiler sampling at `frequency_hz` (samples per second of process
    /// CPU time; values below 1 are raised to 1).
    pub fn new(frequency_hz: i32) -> Self {
        FlamegraphProfiler {
            frequency_hz: frequency_hz.max(1),
            guard: None,
            written: Vec::new(),
        }
    }

    /// The flamegraphs written so far, in order.
    pub fn written(&self) -> &[PathBuf] {
        &self.written
    }

    /// Starts sampling. Errors: [`ProfileError::Start`].
    pub fn try_start(&mut self) -> Result<(), ProfileError> {
        let guard = ProfilerGuardBuilder::default()
            .frequency(self.frequency_hz)
            .blocklist(&BLOCKLIST)
            .build()
            .map_err(ProfileError::Start)?;
        self.guard = Some(guard);
        Ok(())
    }

    /// Stops sampling and writes `<dir>/flamegraph.svg`, creating `dir`.
    /// Returns the file's path.
    ///
    /// Errors: [`ProfileError::NotRunning`], [`ProfileError::Report`],
    /// [`ProfileError::Io`].
    pub fn try_stop(&mut self, benchmark: &str, dir: &Path) -> Result<PathBuf, ProfileError> {
        let guard = self.guard.take().ok_or_else(|| ProfileError::NotRunning {
            benchmark: benchmark.to_string(),
        })?;
        let report_err = |source| ProfileError::Report {
            benchmark: benchmark.to_string(),
            source,
        };
        let report = guard.report().build().map_err(report_err)?;
        drop(guard);
        std::fs::create_dir_all(dir).map_err(|source| ProfileError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(FLAMEGRAPH_FILE);
        let file = File::create(&path).map_err(|source| ProfileError::Io {
            path: path.clone(),
            source,
        })?;
        report
            .flamegraph(BufWriter::new(file))
            .map_err(report_err)?;
        self.written.push(path.clone());
        Ok(path)
    }
}

impl Profiler for FlamegraphProfiler {
    fn start_profiling(&mut self, benchmark_id: &str, _benchmark_dir: &Path) {
        if let Err(e) = self.try_start() {
            eprintln!("profiler: {benchmark_id}: {e}");
        }
    }

    fn stop_profiling(&mut self, benchmark_id: &str, benchmark_dir: &Path) {
        match self.try_stop(benchmark_id, benchmark_dir) {
            Ok(path) => eprintln!("profiler: {benchmark_id}: wrote {}", path.display()),
            Err(e) => eprintln!("profiler: {benchmark_id}: {e}"),
        }
    }
}
