//! The run report: its model, the terminal table, the HdrHistogram logs and
//! the HTML page with plots (`DESIGN.md` §6; issues 5–7).
//!
//! The replay driver fills a [`RunReport`] and [`LatencyRecorder`]s, then
//! calls [`write_report_dir`]; `fleet-lab report A.json B.json` reloads
//! earlier runs and renders them side by side ([`compare`]).
//!
//! A report directory holds `report.json` ([`RunReport`]), `report.html`
//! (self-contained, works offline), one `*.hlog` interval log per metric, the
//! produced outcomes (`outcomes.jsonl`) and any extra files the run adds. It
//! is written into a temporary sibling and renamed into place, so it is
//! either whole or absent.

pub mod compare;
pub mod hdr;
pub mod html;
pub mod live;
pub mod model;
mod plot;
pub(crate) use plot::{box_population_svg, BoxRun};
pub mod sample;
pub mod summary;
pub mod timeline;
pub mod verdict;
pub mod write;

pub use compare::CompareReport;
pub use compare::{load_run, load_runs, load_sim_latency};
pub use hdr::{
    read_interval_log, read_log_histogram, HdrLog, LatencyRecorder, Metric, ReadInterval,
};
pub use html::{render_html, render_html_with};
pub use live::LiveLog;
pub use model::{
    CoTenantInfo, CorpusRef, CounterValue, CycleRow, Machine, Mismatch, OutcomeCounts, Percentiles,
    PlanChange, PostureCounts, QuotaDetection, RssFigures, RunReport, SaturationFigures,
    ThreadCounts, Throttle, ThrottleSource,
};
pub use summary::{render_compare_table, render_run_summary};
pub use timeline::{TimelineEvent, TimelineKind};
pub use verdict::{render_verdict, verdict, Figures};
pub use write::{
    check_out_dir, write_compare_dir, write_dir_atomically, write_paired_dir, write_report_dir,
    write_report_dir_with, ExtraFile, OUTCOMES_FILE, REPORT_HTML, REPORT_JSON,
};

use std::path::PathBuf;

/// The advice after an I/O error, fitting what was being done.
fn io_hint(action: &str) -> &'static str {
    match action {
        "read" => "check the file exists and is readable",
        _ => "check the path exists and is writable",
    }
}

/// What can go wrong building, writing or reading a report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file or directory could not be written or read.
    #[error("{action} {path}: {error} ({})", io_hint(action))]
    Io {
        /// What was being done (`"create"`, `"write"`, `"rename"`, `"read"`).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error (in the message, so not repeated as a source).
        error: std::io::Error,
    },
    /// A `report.json` did not parse as a [`RunReport`].
    #[error("{path} is not a run report: {error} (was it written by `fleet-lab run`?)")]
    BadReport {
        /// The file read.
        path: PathBuf,
        /// Where and why parsing failed (line and column included).
        error: serde_json::Error,
    },
    /// A report could not be serialized.
    #[error("cannot serialize the report: {0}")]
    Serialize(serde_json::Error),
    /// A file name for the report directory is not a plain name.
    #[error("file name {0:?} is not a plain file name (no '/', '..' or empty names)")]
    BadFileName(String),
    /// Two files of one report directory have the same name.
    #[error("file name {0:?} is given twice for one report directory")]
    DuplicateFileName(String),
    /// An interval log could not be written or read back.
    #[error("interval log of {metric}: {reason}")]
    HdrLog {
        /// The metric's tag (or `"interval log"` when reading).
        metric: &'static str,
        /// What failed.
        reason: String,
    },
    /// Two recorders of different metrics were merged.
    #[error("cannot merge {from} values into the {into} recorder")]
    MetricMismatch {
        /// The receiving recorder's metric tag.
        into: &'static str,
        /// The other recorder's metric tag.
        from: &'static str,
    },
    /// A plot could not be drawn.
    #[error("plot {plot}: {reason}")]
    Plot {
        /// Which plot.
        plot: &'static str,
        /// The plotting library's error.
        reason: String,
    },
    /// `--out` names something that is not a report directory, or a
    /// directory with other files in it, and `--force` was not given.
    #[error("--out {path} already exists and is {what}: choose another path or pass --force to replace it")]
    OutExists {
        /// The `--out` path.
        path: PathBuf,
        /// What is there (`"a file"`, `"a directory that holds no report"`).
        what: &'static str,
    },
    /// The directory `--out` would be written in cannot be written.
    #[error("--out {path} cannot be written: creating a directory in {parent} failed ({error}); choose a writable directory")]
    OutNotWritable {
        /// The `--out` path.
        path: PathBuf,
        /// The directory the report would be created in.
        parent: PathBuf,
        /// Why the check failed.
        error: std::io::Error,
    },
    /// `fleet-lab report` was given no reports.
    #[error("no run reports given: pass one or more report.json files")]
    NoRuns,
}
