//! Reading CPU limits from cgroup directories and walking the hierarchy.
//!
//! Source: `DESIGN.md` §3 "Quota detection". v2: `cpu.max` (`max PERIOD`
//! or `QUOTA PERIOD`, µs). v1: `cpu.cfs_quota_us` (−1 = no limit) over
//! `cpu.cfs_period_us`, µs. A missing file is "no limit at this level".

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Cgroup version of the hierarchy holding the cpu controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// cgroup v1 (`cpu.cfs_quota_us`).
    V1,
    /// cgroup v2 (`cpu.max`).
    V2,
}

/// Read a small file; `Ok(None)` when it does not exist.
pub(crate) fn read_opt(path: &Path) -> Result<Option<String>, String> {
    match fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

fn parse_period(text: &str, path: &Path) -> Result<u64, String> {
    let p = text.trim().parse::<u64>().map_err(|_| {
        format!(
            "{}: period {:?} is not a number",
            path.display(),
            text.trim()
        )
    })?;
    if p == 0 {
        return Err(format!("{}: period is 0", path.display()));
    }
    Ok(p)
}

/// Parse the text of a v2 `cpu.max`: `Ok(None)` for `max`, the limit in
/// cores otherwise. Errors describe the malformed content.
pub fn parse_cpu_max(text: &str, path: &Path) -> Result<Option<f64>, String> {
    let mut it = text.split_whitespace();
    let Some(quota) = it.next() else {
        return Err(format!("{} is empty", path.display()));
    };
    let period = match it.next() {
        Some(p) => parse_period(p, path)?,
        None => 100_000,
    };
    if it.next().is_some() {
        return Err(format!(
            "{}: {:?} has more than two fields",
            path.display(),
            text.trim()
        ));
    }
    if quota == "max" {
        return Ok(None);
    }
    let q = quota.parse::<u64>().map_err(|_| {
        format!(
            "{}: quota {quota:?} is neither a number nor max",
            path.display()
        )
    })?;
    if q == 0 {
        return Err(format!("{}: quota is 0", path.display()));
    }
    Ok(Some(q as f64 / period as f64))
}

/// The limit one directory sets, in cores; `Ok(None)` when it sets none.
pub fn read_limit(dir: &Path, version: CgroupVersion) -> Result<Option<f64>, String> {
    match version {
        CgroupVersion::V2 => {
            let path = dir.join("cpu.max");
            match read_opt(&path)? {
                Some(t) => parse_cpu_max(&t, &path),
                None => Ok(None),
            }
        }
        CgroupVersion::V1 => {
            let qpath = dir.join("cpu.cfs_quota_us");
            let Some(qt) = read_opt(&qpath)? else {
                return Ok(None);
            };
            let q = qt.trim().parse::<i64>().map_err(|_| {
                format!("{}: quota {:?} is not a number", qpath.display(), qt.trim())
            })?;
            if q == -1 {
                return Ok(None);
            }
            if q <= 0 {
                return Err(format!(
                    "{}: quota {q} is neither -1 (no limit) nor positive",
                    qpath.display()
                ));
            }
            let ppath = dir.join("cpu.cfs_period_us");
            let Some(pt) = read_opt(&ppath)? else {
                return Err(format!(
                    "{} is missing next to a set quota",
                    ppath.display()
                ));
            };
            Ok(Some(q as f64 / parse_period(&pt, &ppath)? as f64))
        }
    }
}

/// The tightest limit on the way from `leaf` up to `top` (inclusive):
/// `(cores, the directory that sets it)`, or `None` when no level limits.
/// Errors: the first malformed file on the way.
pub fn tightest(
    leaf: &Path,
    top: &Path,
    version: CgroupVersion,
) -> Result<Option<(f64, PathBuf)>, String> {
    let mut best: Option<(f64, PathBuf)> = None;
    let mut dir = leaf.to_path_buf();
    loop {
        if let Some(cores) = read_limit(&dir, version)? {
            if best.as_ref().is_none_or(|(b, _)| cores < *b) {
                best = Some((cores, dir.clone()));
            }
        }
        if dir == top || !dir.starts_with(top) || !dir.pop() {
            break;
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_shapes() {
        let p = Path::new("cpu.max");
        assert_eq!(parse_cpu_max("max 100000\n", p).unwrap(), None);
        assert_eq!(parse_cpu_max("max", p).unwrap(), None);
        assert_eq!(parse_cpu_max("850000 100000", p).unwrap(), Some(8.5));
        for bad in [
            "",
            "  \n",
            "abc 100000",
            "100000 0",
            "100000 x",
            "0 100000",
            "1 2 3",
        ] {
            assert!(parse_cpu_max(bad, p).is_err(), "{bad:?}");
        }
    }
}
