//! The filtered pool-state file (`corpus/pools-2020-09.txt`): the base states
//! the generator draws from, derived from the raw on-chain dumps by
//! [`crate::pools::derive_filtered`]. Text, version 1, checksummed like the
//! corpus; format in `corpus/README.md`.

use std::fmt::Write as _;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::format::{checksum_of, claimed, parse_pool, pool_line, Lines};
use super::{CorpusError, Reason};
use crate::pools::{derive_filtered, PoolSet};

const MAGIC: &str = "fleet-pools";
const POOL_VERSION: u32 = 1;

/// One raw source file the pools were derived from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSource {
    /// File name (no directory).
    pub file: String,
    /// sha256 of the file, hex.
    pub sha256: String,
}

/// A filtered pool-state file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolFile {
    /// The raw sources, in derivation order.
    pub sources: Vec<PoolSource>,
    /// The pools, dense ids in derivation order.
    pub pools: PoolSet,
}

impl PoolFile {
    /// Derives the pool file from the raw Uniswap V2 and SushiSwap JSON dumps.
    ///
    /// Errors: [`CorpusError::Io`] when a file is unreadable,
    /// [`CorpusError::Json`] when it is not a pair list with integer reserves.
    pub fn derive(univ2: &Path, sushi: &Path) -> Result<PoolFile, CorpusError> {
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|source| CorpusError::Io {
                file: p.into(),
                source,
            })
        };
        let (a, b) = (read(univ2)?, read(sushi)?);
        // Parse each separately first so an error names its file.
        derive_filtered(&a, "[]").map_err(|source| CorpusError::Json {
            file: univ2.into(),
            source,
        })?;
        derive_filtered("[]", &b).map_err(|source| CorpusError::Json {
            file: sushi.into(),
            source,
        })?;
        let pools = derive_filtered(&a, &b).map_err(|source| CorpusError::Json {
            file: univ2.into(),
            source,
        })?;
        let src = |p: &Path, text: &str| PoolSource {
            file: p
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            sha256: hex::encode(Sha256::digest(text.as_bytes())),
        };
        Ok(PoolFile {
            sources: vec![src(univ2, &a), src(sushi, &b)],
            pools: PoolSet { pools },
        })
    }

    /// The file text with a fresh checksum.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{MAGIC} {POOL_VERSION}");
        for src in &self.sources {
            let _ = writeln!(s, "source {} {}", src.file, src.sha256);
        }
        let _ = writeln!(s, "pools {}", self.pools.len());
        let _ = writeln!(s, "checksum -");
        for p in &self.pools.pools {
            let _ = writeln!(s, "{}", pool_line(p));
        }
        let sum = checksum_of(&s);
        s.replacen("checksum -\n", &format!("checksum {sum}\n"), 1)
    }

    /// Parses pool-file text; `file` names it in errors (line-level reasons
    /// as for a corpus).
    pub fn parse(text: &str, file: &Path) -> Result<PoolFile, CorpusError> {
        let mut l = Lines::new(text, file);
        l.magic(MAGIC, POOL_VERSION, "pool")?;
        let mut sources = Vec::new();
        let n_pools = loop {
            let (ln, f) = l.next("a `source` or `pools` line")?;
            match (f[0], f.len()) {
                ("source", 3) => sources.push(PoolSource {
                    file: f[1].into(),
                    sha256: f[2].into(),
                }),
                ("pools", 2) => break l.num::<usize>(ln, "pools", f[1])?,
                _ => return Err(l.bad(ln, "source", "expected `source FILE SHA256` or `pools N`")),
            }
        };
        let (sum_ln, f) = l.record("checksum", 1)?;
        let checksum = f[1].to_string();
        let mut pools = Vec::with_capacity(claimed(n_pools));
        for i in 0..n_pools {
            let (ln, f) = l.record("pool", 7)?;
            pools.push(parse_pool(&l, ln, &f, i as u32)?);
        }
        l.done()?;
        let actual = checksum_of(text);
        if actual != checksum {
            return Err(l.err(
                sum_ln,
                Reason::ChecksumMismatch {
                    expected: checksum,
                    actual,
                },
            ));
        }
        Ok(PoolFile {
            sources,
            pools: PoolSet { pools },
        })
    }
}

/// Reads a pool file. Errors as [`PoolFile::parse`], or [`CorpusError::Io`].
pub fn read_pool_file(path: &Path) -> Result<PoolFile, CorpusError> {
    let text = std::fs::read_to_string(path).map_err(|source| CorpusError::Io {
        file: path.into(),
        source,
    })?;
    PoolFile::parse(&text, path)
}

/// Writes a pool file. Errors: [`CorpusError::Io`].
pub fn write_pool_file(path: &Path, f: &PoolFile) -> Result<(), CorpusError> {
    std::fs::write(path, f.to_text()).map_err(|source| CorpusError::Io {
        file: path.into(),
        source,
    })
}
