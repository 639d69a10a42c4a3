//! The guest's halt-polling window (`haltpoll.guest_halt_poll_ns`) set for
//! one comparison and put back after it (`compare --halt-poll-ns`). On a
//! guest with the haltpoll cpuidle driver an idle vCPU polls for work for
//! up to that many nanoseconds before it halts; a halted vCPU is woken by
//! the hypervisor, which costs every cross-thread wake-up on it. The
//! window is a host state the comparison can ask for on purpose, the same
//! for every contender (docs/lab.md, "The host's state";
//! docs/decisions/0031-halt-polling-is-a-host-state-the-fleet-feels.md).

use std::fs;
use std::path::{Path, PathBuf};

use super::hoststate::{CPUIDLE_DRIVER, HALTPOLL_DRIVER, HALT_POLL_NS};

/// Why the window could not be set.
#[derive(Debug, thiserror::Error)]
pub enum HaltPollError {
    /// The parameter is not there: not a guest with the haltpoll driver.
    #[error("no halt-polling window at {0} (not a guest with the haltpoll cpuidle driver)")]
    Missing(PathBuf),
    /// The parameter is there but the haltpoll driver is not the cpuidle
    /// driver in use, so the window would govern nothing.
    #[error("the halt-polling window is not in effect here: the cpuidle driver in use is {driver}, not haltpoll")]
    NotInEffect { driver: String },
    /// The parameter could not be written (not root, or read-only).
    #[error("cannot set the halt-polling window at {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The window as set; dropping it writes back the value it replaced.
#[derive(Debug)]
pub struct HaltPollSet {
    path: PathBuf,
    before: String,
}

impl HaltPollSet {
    /// Sets this guest's window to `ns` until the value is dropped.
    /// Errors: [`HaltPollError`]; nothing is changed then.
    pub fn set(ns: u64) -> Result<Self, HaltPollError> {
        let driver = fs::read_to_string(CPUIDLE_DRIVER).ok();
        check_driver(driver.as_deref().map(str::trim))?;
        Self::set_at(Path::new(HALT_POLL_NS), ns)
    }

    /// [`HaltPollSet::set`] on the parameter file at `path`.
    pub fn set_at(path: &Path, ns: u64) -> Result<Self, HaltPollError> {
        let before = fs::read_to_string(path)
            .map_err(|_| HaltPollError::Missing(path.to_path_buf()))?
            .trim()
            .to_string();
        fs::write(path, ns.to_string()).map_err(|source| HaltPollError::Write {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(HaltPollSet {
            path: path.to_path_buf(),
            before,
        })
    }

    /// The value the window had before it was set.
    pub fn before(&self) -> &str {
        &self.before
    }
}

/// Whether a window set under cpuidle driver `driver` would govern the
/// guest's idle: only under `haltpoll`. A host without cpuidle (`None`)
/// is refused as [`HaltPollError::NotInEffect`] with driver `none`.
fn check_driver(driver: Option<&str>) -> Result<(), HaltPollError> {
    match driver {
        Some(HALTPOLL_DRIVER) => Ok(()),
        other => Err(HaltPollError::NotInEffect {
            driver: other.unwrap_or("none").to_string(),
        }),
    }
}

impl Drop for HaltPollSet {
    fn drop(&mut self) {
        if let Err(e) = fs::write(&self.path, &self.before) {
            eprintln!(
                "warning: could not put the halt-polling window at {} back to {}: {e}",
                self.path.display(),
                self.before
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_set_then_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("guest_halt_poll_ns");
        fs::write(&p, "0\n").unwrap();
        let set = HaltPollSet::set_at(&p, 200_000).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "200000");
        assert_eq!(set.before(), "0");
        drop(set);
        assert_eq!(fs::read_to_string(&p).unwrap(), "0");
    }

    #[test]
    fn only_the_haltpoll_driver_takes_a_window() {
        assert!(check_driver(Some("haltpoll")).is_ok());
        for (driver, named) in [
            (Some("none"), "none"),
            (Some("intel_idle"), "intel_idle"),
            (Some("acpi_idle"), "acpi_idle"),
            (None, "none"),
        ] {
            let e = check_driver(driver).unwrap_err();
            assert!(
                matches!(&e, HaltPollError::NotInEffect { driver } if driver == named),
                "{e}"
            );
            assert!(e.to_string().contains("not in effect"), "{e}");
        }
    }

    #[test]
    fn a_missing_window_is_refused_and_nothing_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("absent");
        let e = HaltPollSet::set_at(&p, 1).unwrap_err();
        assert!(matches!(e, HaltPollError::Missing(_)), "{e}");
        assert!(!p.exists());
    }

    #[test]
    fn an_unwritable_window_is_refused_unchanged() {
        // A file that reads but takes no writes, root's neither.
        let p = Path::new("/proc/version");
        let before = fs::read_to_string(p).unwrap();
        let e = HaltPollSet::set_at(p, 1).unwrap_err();
        assert!(matches!(e, HaltPollError::Write { .. }), "{e}");
        assert_eq!(fs::read_to_string(p).unwrap(), before);
    }
}
