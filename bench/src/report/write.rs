//! Writing a report directory atomically.
//!
//! Files go into a temporary sibling directory (`.NAME.tmp-PID-N` next to
//! the target), which is renamed into place once every file is written. An
//! existing directory at the target is first moved aside and removed only
//! after the rename succeeded. On any error the temporary directory is
//! removed and the target is left as it was: a report directory is either
//! whole or absent, never half-written (issue 5, "nothing is half-written
//! in `--out`").

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;

use super::hdr::{read_log_histogram, HdrLog, Metric};
use super::html::render_html_with;
use super::model::RunReport;
use super::CompareReport;
use super::ReportError;

/// The report's JSON file name.
pub const REPORT_JSON: &str = "report.json";
/// The report's HTML page file name.
pub const REPORT_HTML: &str = "report.html";
/// The produced outcomes' file name (bytes as the driver wrote them).
pub const OUTCOMES_FILE: &str = "outcomes.jsonl";
/// The compare's JSON file name ([`CompareReport`]).
pub const COMPARE_JSON: &str = "compare.json";
/// A paired gate's JSON file name (`fleet-lab gate`).
pub const PAIRED_JSON: &str = "paired.json";
/// The routing lab's summary over seeds (`fleet-lab route … --seeds`).
pub const SEEDS_JSON: &str = "seeds.json";

/// One more file for a report directory (a metrics dump, a flamegraph).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraFile {
    /// Plain file name inside the directory.
    pub name: String,
    /// The file's bytes.
    pub bytes: Vec<u8>,
}

/// Writes one run's report directory at `dir`: `report.json`,
/// `report.html`, every log of `logs` under its file name, and `outcomes`
/// as `outcomes.jsonl`. When `logs` holds `sim_latency.hlog`, the page
/// draws its full percentile spectrum. Returns the paths written (inside `dir`).
///
/// Errors: [`ReportError`] from serializing, rendering or writing; on error
/// nothing new is left behind and an existing `dir` is untouched.
pub fn write_report_dir(
    dir: &Path,
    report: &RunReport,
    logs: &[HdrLog],
    outcomes: &[u8],
) -> Result<Vec<PathBuf>, ReportError> {
    write_report_dir_with(dir, report, logs, outcomes, &[])
}

/// [`write_report_dir`] plus `extra` files (e.g. `metrics.prom`).
///
/// Errors: as [`write_report_dir`]; also [`ReportError::DuplicateFileName`]
/// when an extra file reuses a name.
pub fn write_report_dir_with(
    dir: &Path,
    report: &RunReport,
    logs: &[HdrLog],
    outcomes: &[u8],
    extra: &[ExtraFile],
) -> Result<Vec<PathBuf>, ReportError> {
    let json = serde_json::to_vec_pretty(report).map_err(ReportError::Serialize)?;
    let sim = logs
        .iter()
        .find(|l| l.file_name == Metric::SimLatency.file_name())
        .map(|l| read_log_histogram(&l.bytes))
        .transpose()?;
    let html = render_html_with(std::slice::from_ref(report), &[sim])?;
    let mut files: Vec<(&str, &[u8])> = vec![
        (REPORT_JSON, &json),
        (REPORT_HTML, html.as_bytes()),
        (OUTCOMES_FILE, outcomes),
    ];
    files.extend(
        logs.iter()
            .map(|l| (l.file_name.as_str(), l.bytes.as_slice())),
    );
    files.extend(extra.iter().map(|f| (f.name.as_str(), f.bytes.as_slice())));
    write_dir_atomically(dir, &files)
}

/// Writes a paired gate's directory at `dir`: `paired.json` only.
///
/// Errors: as [`write_report_dir`].
pub fn write_paired_dir(dir: &Path, json: &[u8]) -> Result<Vec<PathBuf>, ReportError> {
    write_dir_atomically(dir, &[(PAIRED_JSON, json)])
}

/// Writes a compare directory at `dir`: `compare.json` ([`CompareReport`])
/// and `report.html` with every run side by side; `sim_latency[i]`, where
/// present, is run `i`'s sim-latency histogram (see
/// [`crate::report::compare::load_sim_latency`]).
///
/// Errors: as [`write_report_dir`].
pub fn write_compare_dir(
    dir: &Path,
    compare: &CompareReport,
    sim_latency: &[Option<Histogram<u64>>],
) -> Result<Vec<PathBuf>, ReportError> {
    let json = serde_json::to_vec_pretty(compare).map_err(ReportError::Serialize)?;
    let html = render_html_with(&compare.runs, sim_latency)?;
    write_dir_atomically(
        dir,
        &[(COMPARE_JSON, &json), (REPORT_HTML, html.as_bytes())],
    )
}

/// Checks, before a run starts, that its report can be written at `dir`,
/// leaving nothing behind: unless `force`, an existing `dir` must be a
/// report directory (or empty); and the nearest existing ancestor of `dir`
/// must accept a new directory (probed by creating and removing one).
///
/// Errors: [`ReportError::OutExists`], [`ReportError::OutNotWritable`].
pub fn check_out_dir(dir: &Path, force: bool) -> Result<(), ReportError> {
    if !force {
        refuse_foreign(dir)?;
    }
    probe_writable(dir)
}

fn refuse_foreign(dir: &Path) -> Result<(), ReportError> {
    let Ok(meta) = fs::symlink_metadata(dir) else {
        return Ok(());
    };
    let what = if !meta.is_dir() {
        "not a directory"
    } else if holds_report_or_nothing(dir) {
        return Ok(());
    } else {
        "a directory that holds no report"
    };
    Err(ReportError::OutExists {
        path: dir.to_path_buf(),
        what,
    })
}

fn holds_report_or_nothing(dir: &Path) -> bool {
    dir.join(REPORT_JSON).is_file()
        || dir.join(COMPARE_JSON).is_file()
        || dir.join(PAIRED_JSON).is_file()
        || dir.join(SEEDS_JSON).is_file()
        || fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
}

/// The parent `dir` is written in, climbing to the nearest one that exists.
fn nearest_existing_parent(dir: &Path) -> PathBuf {
    let mut at = dir.parent();
    while let Some(p) = at {
        if p.as_os_str().is_empty() {
            break;
        }
        if fs::symlink_metadata(p).is_ok() {
            return p.to_path_buf();
        }
        at = p.parent();
    }
    PathBuf::from(".")
}

fn probe_writable(dir: &Path) -> Result<(), ReportError> {
    let parent = nearest_existing_parent(dir);
    let probe = parent.join(format!(".fleet-lab.probe-{}", std::process::id()));
    match fs::create_dir(&probe) {
        Ok(()) => {
            // The probe proved the point; failing to remove an empty
            // directory we just made is not a reason to refuse the run.
            let _ = fs::remove_dir(&probe);
            Ok(())
        }
        Err(error) => Err(ReportError::OutNotWritable {
            path: dir.to_path_buf(),
            parent,
            error,
        }),
    }
}

/// Removes `path`, a directory tree or a single file.
fn remove_any(path: &Path) -> std::io::Result<()> {
    if fs::symlink_metadata(path)?.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ReportError {
    let path = path.to_path_buf();
    move |error| ReportError::Io {
        action,
        path,
        error,
    }
}

fn check_name(name: &str) -> Result<(), ReportError> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\\')
        && !name.contains('\0');
    if plain {
        Ok(())
    } else {
        Err(ReportError::BadFileName(name.to_string()))
    }
}

/// Writes `files` (plain name, bytes) as the whole content of directory
/// `dir`, atomically: into a temporary sibling, then renamed into place,
/// replacing an existing `dir`. Creates `dir`'s parent if missing. Returns
/// the final paths in the order given.
///
/// Errors: [`ReportError::BadFileName`], [`ReportError::DuplicateFileName`],
/// [`ReportError::Io`]; on any error the temporary directory is removed and
/// an existing `dir` is left as it was.
pub fn write_dir_atomically(
    dir: &Path,
    files: &[(&str, &[u8])],
) -> Result<Vec<PathBuf>, ReportError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| ReportError::BadFileName(dir.display().to_string()))?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(io("create", &parent))?;
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    let tmp = parent.join(format!(".{name}.tmp-{pid}-{seq}"));
    let old = parent.join(format!(".{name}.old-{pid}-{seq}"));

    let result = fill_then_swap(dir, &tmp, &old, files);
    if result.is_err() {
        // Best effort: the error being returned matters more than a failed
        // cleanup of a directory we created.
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

fn fill_then_swap(
    dir: &Path,
    tmp: &Path,
    old: &Path,
    files: &[(&str, &[u8])],
) -> Result<Vec<PathBuf>, ReportError> {
    fs::create_dir(tmp).map_err(io("create", tmp))?;
    let mut seen = BTreeSet::new();
    for (name, bytes) in files {
        check_name(name)?;
        if !seen.insert(*name) {
            return Err(ReportError::DuplicateFileName(name.to_string()));
        }
        let path = tmp.join(name);
        fs::write(&path, bytes).map_err(io("write", &path))?;
    }
    let replaced = dir.exists();
    if replaced {
        fs::rename(dir, old).map_err(io("rename", dir))?;
    }
    if let Err(e) = fs::rename(tmp, dir) {
        if replaced {
            // Put the previous report back where it was.
            let _ = fs::rename(old, dir);
        }
        return Err(io("rename", tmp)(e));
    }
    if replaced {
        // The new report is in place; a leftover previous copy is only
        // clutter, so its removal failing is not the write failing.
        let _ = remove_any(old);
    }
    Ok(files.iter().map(|(n, _)| dir.join(n)).collect())
}
