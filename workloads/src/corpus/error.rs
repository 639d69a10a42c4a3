//! Corpus errors: every one names the file and, for content, the line.

use std::path::PathBuf;

use fleet::PathOutcome;

/// Why a line of a corpus or pool file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    /// The content does not hash to the header's checksum: the file was
    /// edited or truncated after it was written.
    #[error("checksum mismatch: header says {expected}, content hashes to {actual} (the file was edited; regenerate it with `fleet-lab corpus generate`)")]
    ChecksumMismatch { expected: String, actual: String },
    /// A field is missing, malformed or out of range.
    #[error("bad field `{field}`: {why}")]
    BadField { field: String, why: String },
    /// The file ends before the records its header announces.
    #[error("truncated: expected {expected}, found end of file")]
    Truncated { expected: String },
    /// The format version is not one this build reads.
    #[error("unknown version `{found}`: this build reads version {supported}")]
    UnknownVersion { found: String, supported: u32 },
}

/// A corpus or pool file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// Content refused at a line (1-based).
    #[error("{}:{line}: {reason}", file.display())]
    At {
        file: PathBuf,
        line: usize,
        reason: Reason,
    },
    /// The file could not be read or written.
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    /// The raw pool JSON could not be parsed.
    #[error("{}: not a pool dump: {source}", file.display())]
    Json {
        file: PathBuf,
        source: serde_json::Error,
    },
    /// A recorded outcome differs from the recomputed one.
    #[error("{}: cycle {cycle} path {path}: recorded {recorded:?}, recomputed {recomputed:?} (the corpus disagrees with this build's solver; regenerate it or fix the math)", file.display())]
    OutcomeMismatch {
        file: PathBuf,
        cycle: u32,
        path: u32,
        recorded: Box<PathOutcome>,
        recomputed: Box<PathOutcome>,
    },
    /// Bins are not the LPT partition of the cycle's paths.
    #[error("{}: cycle {cycle}: bins are not the LPT partition of its paths (recorded {recorded:?}, recomputed {recomputed:?})", file.display())]
    BinsMismatch {
        file: PathBuf,
        cycle: u32,
        recorded: Vec<Vec<u32>>,
        recomputed: Vec<Vec<u32>>,
    },
}

impl CorpusError {
    /// The line-level reason, when the error is one.
    pub fn reason(&self) -> Option<&Reason> {
        match self {
            CorpusError::At { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// The 1-based line, when the error is line-level.
    pub fn line(&self) -> Option<usize> {
        match self {
            CorpusError::At { line, .. } => Some(*line),
            _ => None,
        }
    }
}
