//! Parsing of `/proc/self/cgroup`, `/proc/self/mountinfo` and the
//! `Cpus_allowed_list` line of `/proc/self/status`.
//!
//! Pure text parsers: the caller reads the files under a filesystem root.

use std::path::{Path, PathBuf};
use thiserror::Error;

/// A cpuset list that does not parse (`0-1,4` is the accepted shape).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("cpu list {text:?} does not parse: {detail}; expected a list such as 0-3,8")]
pub struct CpuListError {
    /// The rejected text.
    pub text: String,
    /// What was wrong.
    pub detail: String,
}

/// Parse a cpuset list such as `0-1,4` into CPU indices (ascending, no
/// duplicates). An empty or whitespace-only list is an empty vector.
/// Errors: [`CpuListError`] for anything else than numbers, ranges and commas,
/// or a range whose end is below its start.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, CpuListError> {
    let err = |detail: String| CpuListError {
        text: text.to_string(),
        detail,
    };
    let mut cpus = Vec::new();
    for part in text
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let num = |s: &str| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| err(format!("{s:?} is not a cpu number")))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a {
                    return Err(err(format!("range {part} runs backwards")));
                }
                if b - a > 65_536 {
                    return Err(err(format!("range {part} is implausibly large")));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// The `Cpus_allowed_list` value from the text of `/proc/self/status`.
pub fn cpus_allowed_list(status_text: &str) -> Option<&str> {
    status_text
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim)
}

/// One line of `/proc/self/cgroup`: `hierarchy-id:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLine {
    /// Hierarchy id (0 for the v2 unified hierarchy).
    pub hierarchy: u32,
    /// Controllers bound to the hierarchy (empty for v2; `name=systemd` kept as is).
    pub controllers: Vec<String>,
    /// The cgroup path relative to the hierarchy root, e.g. `/init.scope`.
    pub path: String,
}

/// Parse `/proc/self/cgroup`. Errors name the first malformed line.
pub fn parse_proc_cgroup(text: &str) -> Result<Vec<CgroupLine>, String> {
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(ctl), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!(
                "/proc/self/cgroup line {} {line:?} is not id:controllers:path",
                i + 1
            ));
        };
        let hierarchy = id.trim().parse::<u32>().map_err(|_| {
            format!(
                "/proc/self/cgroup line {} has a non-numeric hierarchy id {id:?}",
                i + 1
            )
        })?;
        if !path.starts_with('/') {
            return Err(format!(
                "/proc/self/cgroup line {} path {path:?} is not absolute",
                i + 1
            ));
        }
        let controllers = ctl
            .split(',')
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect();
        out.push(CgroupLine {
            hierarchy,
            controllers,
            path: path.to_string(),
        });
    }
    if out.is_empty() {
        return Err("/proc/self/cgroup is empty".into());
    }
    Ok(out)
}

/// One cgroup mount from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// `cgroup` (v1) or `cgroup2`.
    pub fstype: String,
    /// The root of the mount within the hierarchy (field 4), e.g. `/` or `/docker/ab12`.
    pub root: String,
    /// Where it is mounted (field 5), e.g. `/sys/fs/cgroup/cpu,cpuacct`.
    pub mount_point: PathBuf,
    /// Super options split on commas (v1 lists its controllers here).
    pub super_options: Vec<String>,
}

fn unescape(field: &str) -> String {
    // mountinfo escapes space, tab, newline and backslash as \ooo octal.
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = (bytes[i + 1] - b'0') as u32 * 64
                + (bytes[i + 2] - b'0') as u32 * 8
                + (bytes[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse the cgroup (v1 and v2) mounts from `/proc/self/mountinfo`; other
/// mounts are skipped. Errors name the first malformed cgroup line.
pub fn parse_mountinfo(text: &str) -> Result<Vec<CgroupMount>, String> {
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            return Err(format!(
                "/proc/self/mountinfo line {} has no ' - ' separator",
                i + 1
            ));
        };
        if sep < 6 || fields.len() < sep + 3 {
            return Err(format!(
                "/proc/self/mountinfo line {} has too few fields",
                i + 1
            ));
        }
        let fstype = fields[sep + 1];
        if fstype != "cgroup" && fstype != "cgroup2" {
            continue;
        }
        // A cgroup line needs its super options (they name the controllers).
        let Some(super_options) = fields.get(sep + 3) else {
            return Err(format!(
                "/proc/self/mountinfo line {} (a {fstype} mount) has no super options",
                i + 1
            ));
        };
        out.push(CgroupMount {
            fstype: fstype.to_string(),
            root: unescape(fields[3]),
            mount_point: PathBuf::from(unescape(fields[4])),
            super_options: super_options.split(',').map(String::from).collect(),
        });
    }
    Ok(out)
}

/// The directory of cgroup `path` under `mount`, as seen under `fs_root`.
///
/// The mount's root is stripped from the path when the path lies under it
/// (a container that sees its own cgroup mounted at the hierarchy root).
pub fn cgroup_dir(fs_root: &Path, mount: &CgroupMount, path: &str) -> PathBuf {
    let rel = if mount.root == "/" {
        path
    } else {
        match path.strip_prefix(mount.root.as_str()) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => path,
        }
    };
    let mut dir = under_root(fs_root, &mount.mount_point);
    for comp in rel
        .split('/')
        .filter(|c| !c.is_empty() && *c != "." && *c != "..")
    {
        dir.push(comp);
    }
    dir
}

/// Whether the cgroup `path` (from `/proc/self/cgroup`) lies under the
/// mount's root (mountinfo's fourth field): only then is its directory
/// under the mount point. `false` means its limits cannot be read there.
pub fn under_mount_root(mount: &CgroupMount, path: &str) -> bool {
    let root = mount.root.trim_end_matches('/');
    root.is_empty()
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// `abs` re-rooted under `fs_root` (`/` leaves it unchanged).
pub fn under_root(fs_root: &Path, abs: &Path) -> PathBuf {
    match abs.strip_prefix("/") {
        Ok(rel) => fs_root.join(rel),
        Err(_) => fs_root.join(abs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_mount_line_without_super_options_is_an_error_not_a_panic() {
        // Found by fuzzing: two fields after the separator used to index past the end.
        let line = "30 25 0:26 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup";
        let e = parse_mountinfo(line).unwrap_err();
        assert!(e.contains("no super options"), "{e}");
        // A non-cgroup mount with the same shape is skipped, and a full line parses.
        assert!(parse_mountinfo("30 25 0:26 / /proc rw - proc proc")
            .unwrap()
            .is_empty());
        let ok =
            parse_mountinfo("30 25 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct")
                .unwrap();
        assert_eq!(ok[0].super_options, vec!["rw", "cpu", "cpuacct"]);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1,4").unwrap(), vec![0, 1, 4]);
        assert_eq!(parse_cpu_list("3").unwrap(), vec![3]);
        assert_eq!(
            parse_cpu_list(" 0-3,2,8-9\n").unwrap(),
            vec![0, 1, 2, 3, 8, 9]
        );
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<usize>::new());
        for bad in ["a", "1-", "3-1", "0-x", "-1"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mountinfo_unescapes_and_filters() {
        let text = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
                    32 31 0:29 /docker/x /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
                    41 31 0:38 / /sys/fs/my\\040dir rw shared:1 - cgroup2 cgroup2 rw\n";
        let m = parse_mountinfo(text).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].root, "/docker/x");
        assert!(m[0].super_options.iter().any(|o| o == "cpu"));
        assert_eq!(m[1].mount_point, PathBuf::from("/sys/fs/my dir"));
    }

    #[test]
    fn dir_strips_the_mount_root() {
        let m = CgroupMount {
            fstype: "cgroup".into(),
            root: "/docker/x".into(),
            mount_point: "/sys/fs/cgroup/cpu".into(),
            super_options: vec![],
        };
        assert_eq!(
            cgroup_dir(Path::new("/r"), &m, "/docker/x"),
            PathBuf::from("/r/sys/fs/cgroup/cpu")
        );
        assert_eq!(
            cgroup_dir(Path::new("/"), &m, "/docker/x/a"),
            PathBuf::from("/sys/fs/cgroup/cpu/a")
        );
    }
}
