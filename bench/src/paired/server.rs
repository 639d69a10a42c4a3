//! A block server as a child process: `fleet-lab blocks …` of the
//! candidate's or the reference's build, driven over its stdin and stdout
//! ([`crate::paired::block`] has the protocol).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Lines, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use super::block::{BlockFigures, ServerLine, PROTOCOL};

/// Why a block server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The binary did not start.
    #[error("cannot start {}: {source}", exe.display())]
    Spawn {
        /// The binary.
        exe: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// It closed its stdout (exited) before answering.
    #[error("{} exited before answering{status} (its stderr is above)", exe.display())]
    Gone {
        /// The binary.
        exe: PathBuf,
        /// Its exit status, where known.
        status: String,
    },
    /// It speaks another protocol version (a build too old or too new).
    #[error("{} speaks block protocol {got}, this build {want}: build a reference that has `fleet-lab blocks` version {want}", exe.display())]
    Protocol {
        /// The binary.
        exe: PathBuf,
        /// Its version.
        got: u32,
        /// Ours.
        want: u32,
    },
    /// It reported a failed block.
    #[error("{}: {message}", exe.display())]
    Failed {
        /// The binary.
        exe: PathBuf,
        /// Its message.
        message: String,
    },
    /// Reading or writing its pipes failed.
    #[error("talking to {}: {source}", exe.display())]
    Io {
        /// The binary.
        exe: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// A running block server.
pub struct BlockServer {
    exe: PathBuf,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    /// The label it reported when ready.
    pub label: String,
}

impl BlockServer {
    /// Starts `exe blocks ARGS…` and waits for its ready line (it loads the
    /// corpus first). Its stderr is the caller's.
    pub fn start(exe: &Path, args: &[OsString]) -> Result<Self, ServerError> {
        let mut child = Command::new(exe)
            .arg("blocks")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| ServerError::Spawn {
                exe: exe.to_path_buf(),
                source,
            })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout was piped");
        let mut server = BlockServer {
            exe: exe.to_path_buf(),
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            label: String::new(),
        };
        let ready = server.next_line()?;
        match ready.ready {
            Some(label) => server.label = label,
            None => return Err(server.unexpected(ready)),
        }
        Ok(server)
    }

    /// Runs one block and returns its figures.
    pub fn block(&mut self) -> Result<BlockFigures, ServerError> {
        let exe = self.exe.clone();
        let io = |source| ServerError::Io {
            exe: exe.clone(),
            source,
        };
        let stdin = self.stdin.as_mut().expect("open until drop");
        stdin.write_all(b"block\n").map_err(io)?;
        stdin.flush().map_err(io)?;
        let line = self.next_line()?;
        match line.block {
            Some(b) => Ok(b),
            None => Err(self.unexpected(line)),
        }
    }

    /// The next protocol line; lines that are not the protocol's JSON (a
    /// library printing to stdout) are passed on to stderr, not misread.
    fn next_line(&mut self) -> Result<ServerLine, ServerError> {
        loop {
            let Some(line) = self.lines.next() else {
                let status = self
                    .child
                    .wait()
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default();
                return Err(ServerError::Gone {
                    exe: self.exe.clone(),
                    status,
                });
            };
            let line = line.map_err(|source| ServerError::Io {
                exe: self.exe.clone(),
                source,
            })?;
            let parsed = match line.trim_start().starts_with('{') {
                true => serde_json::from_str::<ServerLine>(&line).ok(),
                false => None,
            };
            match parsed {
                Some(l) if l.protocol != PROTOCOL => {
                    return Err(ServerError::Protocol {
                        exe: self.exe.clone(),
                        got: l.protocol,
                        want: PROTOCOL,
                    })
                }
                Some(l) => return Ok(l),
                None => eprintln!("[{}] {line}", self.exe.display()),
            }
        }
    }

    fn unexpected(&self, line: ServerLine) -> ServerError {
        ServerError::Failed {
            exe: self.exe.clone(),
            message: line
                .error
                .unwrap_or_else(|| "answered out of turn".to_string()),
        }
    }
}

impl Drop for BlockServer {
    /// Closes its stdin (the server exits at end of input) and reaps it.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
