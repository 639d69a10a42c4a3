//! Loading earlier runs to render them side by side
//! (`fleet-lab report A.json B.json`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;

use super::hdr::{read_log_histogram, Metric};
use serde::{Deserialize, Serialize};

use super::model::RunReport;
use super::ReportError;

/// Reads one `report.json`.
///
/// Errors: [`ReportError::Io`] when the file cannot be read,
/// [`ReportError::BadReport`] (with line and column) when it is not a
/// [`RunReport`].
pub fn load_run(path: &Path) -> Result<RunReport, ReportError> {
    let bytes = std::fs::read(path).map_err(|error| ReportError::Io {
        action: "read",
        path: path.to_path_buf(),
        error,
    })?;
    serde_json::from_slice(&bytes).map_err(|error| ReportError::BadReport {
        path: path.to_path_buf(),
        error,
    })
}

/// Reads every path in order into a [`CompareReport`]. Runs that share a
/// label get their source (the report's directory, or file name) appended
/// in brackets, so every legend entry names one run.
///
/// Errors: [`ReportError::NoRuns`] for no paths; otherwise as [`load_run`],
/// for the first file that fails.
pub fn load_runs(paths: &[PathBuf]) -> Result<CompareReport, ReportError> {
    if paths.is_empty() {
        return Err(ReportError::NoRuns);
    }
    let mut runs = paths
        .iter()
        .map(|p| load_run(p))
        .collect::<Result<Vec<_>, _>>()?;
    let sources: Vec<String> = paths.iter().map(|p| source_name(p)).collect();
    disambiguate(&mut runs, &sources);
    Ok(CompareReport {
        runs,
        rounds: Vec::new(),
        host: None,
        host_floor: Vec::new(),
    })
}

/// Reads the `sim_latency.hlog` beside a `report.json`, if there is one,
/// into one histogram (µs ticks).
///
/// Errors: [`ReportError::Io`] when it exists but cannot be read,
/// [`ReportError::HdrLog`] when it does not parse.
pub fn load_sim_latency(report_json: &Path) -> Result<Option<Histogram<u64>>, ReportError> {
    let path = report_json
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join(Metric::SimLatency.file_name());
    match std::fs::read(&path) {
        Ok(bytes) => read_log_histogram(&bytes).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(ReportError::Io {
            action: "read",
            path,
            error,
        }),
    }
}

/// A short name for where a report came from: its directory's name for a
/// `report.json`, else its file name.
fn source_name(p: &Path) -> String {
    let file = p
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    match p.parent().and_then(Path::file_name) {
        Some(dir) if file == super::REPORT_JSON => dir.to_string_lossy().into_owned(),
        _ => file,
    }
}

/// Appends ` [source]` to every label shared by more than one run; if that
/// still collides, appends ` #N` (1-based position) instead.
pub fn disambiguate(runs: &mut [RunReport], sources: &[String]) {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in runs.iter() {
        *counts.entry(r.label.clone()).or_default() += 1;
    }
    for (i, r) in runs.iter_mut().enumerate() {
        if counts[&r.label] > 1 {
            let src = sources.get(i).cloned().unwrap_or_default();
            r.label = format!("{} [{}]", r.label, src);
        }
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for r in runs.iter() {
        *seen.entry(r.label.clone()).or_default() += 1;
    }
    for (i, r) in runs.iter_mut().enumerate() {
        if seen[&r.label] > 1 {
            r.label = format!("{} #{}", r.label, i + 1);
        }
    }
}

/// Several runs rendered side by side (`fleet-lab report A.json B.json`,
/// `fleet-lab compare`), in the order given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// The runs, in the order they were given (`fleet-lab compare`: the
    /// median round's).
    pub runs: Vec<RunReport>,
    /// `fleet-lab compare`: every round's figures ([`crate::compare_rounds`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<crate::compare_rounds::RoundFigure>,
    /// `fleet-lab compare`: the host's state over the whole comparison
    /// ([`crate::probe::hoststate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::probe::hoststate::HostState>,
    /// `fleet-lab compare`: each round's host floor, the host's own work
    /// alone on the same arrivals ([`crate::compare_floor`]; empty with
    /// `--no-host-floor` and in older reports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_floor: Vec<crate::compare_floor::FloorRound>,
}
