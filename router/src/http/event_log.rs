//! The event log: JSON lines appended to a file that is rotated at a size
//! cap, so a long-running routerd's log stays bounded (docs/router.md
//! "Threat model", retention). At the cap the file is renamed to
//! `<path>.1` (replacing the one before) and a new file is started: at
//! most twice the cap is on disk.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Default size cap of one event log file, bytes (64 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

/// An append-only, size-capped JSON-lines file.
#[derive(Debug)]
pub struct EventLog {
    path: PathBuf,
    file: File,
    bytes: u64,
    max_bytes: u64,
    /// Rotations done since it was opened.
    pub rotations: u64,
}

impl EventLog {
    /// Opens `path` for appending (created if absent), rotating at
    /// `max_bytes` (at least 4,096). Errors: the file cannot be opened.
    pub fn open(path: &Path, max_bytes: u64) -> io::Result<EventLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let bytes = file.metadata()?.len();
        Ok(EventLog {
            path: path.to_path_buf(),
            file,
            bytes,
            max_bytes: max_bytes.max(4096),
            rotations: 0,
        })
    }

    /// Sets the size cap (at least 4,096 bytes).
    pub fn set_max_bytes(&mut self, max_bytes: u64) {
        self.max_bytes = max_bytes.max(4096);
    }

    /// Appends `line` and a newline, first rotating when the line would
    /// take the file past the cap. Errors: the write's or the rotation's
    /// (the line is then lost, the log goes on).
    pub fn append(&mut self, line: &str) -> io::Result<()> {
        let len = line.len() as u64 + 1;
        if self.bytes > 0 && self.bytes + len > self.max_bytes {
            self.rotate()?;
        }
        writeln!(self.file, "{line}")?;
        self.bytes += len;
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        std::fs::rename(&self.path, &old)?;
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.bytes = 0;
        self.rotations += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rotates_at_its_cap_and_keeps_one_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut log = EventLog::open(&path, 4096).unwrap();
        let line = "x".repeat(99); // 100 bytes with its newline
        for _ in 0..100 {
            log.append(&line).unwrap();
        }
        // 40 lines fill 4,000 bytes; the 41st rotates: 100 lines make
        // two rotations and leave 20 lines in the current file.
        assert_eq!(log.rotations, 2);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2000);
        let old = dir.path().join("events.jsonl.1");
        assert_eq!(std::fs::metadata(&old).unwrap().len(), 4000);
        // Reopened, it counts the bytes already there.
        let mut again = EventLog::open(&path, 4096).unwrap();
        for _ in 0..21 {
            again.append(&line).unwrap();
        }
        assert_eq!(again.rotations, 1);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 100);
    }
}
