//! Text format of a corpus file, version 1 (documented in `corpus/README.md`).
//!
//! Plain lines, space-separated fields. A header of `key value` lines (the
//! checksum line last), then `pool` lines, then per cycle a `cycle` line,
//! its `swap` lines, `path` lines and six `bin` lines. `#` lines are
//! comments (still covered by the checksum).

use std::fmt::Write as _;
use std::path::Path;

use fleet::{FailReason, PathOutcome};
use sha2::{Digest, Sha256};

use super::{Corpus, CorpusError, CorpusHeader, CycleCase, PathCase, Reason, SimCase, VERSION};
use crate::lpt::BINS;
use crate::paths::Hop;
use crate::pools::{Pool, PoolSet, Swap, Venue};

/// First token of the first line.
pub(super) const MAGIC: &str = "fleet-corpus";

/// sha256 of every line but the one starting `checksum `, each with `\n`.
pub(super) fn checksum_of(text: &str) -> String {
    let mut h = Sha256::new();
    for line in text.lines().filter(|l| !l.starts_with("checksum ")) {
        h.update(line.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

pub(super) fn outcome_text(o: &PathOutcome) -> String {
    match o {
        PathOutcome::Solved { amount_in, profit } => format!("solved:{amount_in}:{profit}"),
        PathOutcome::Suppressed => "suppressed".into(),
        PathOutcome::Failed { reason } => format!(
            "failed:{}",
            match reason {
                FailReason::SimReverted => "sim_reverted",
                FailReason::LaneDeath => "lane_death",
                FailReason::SimRefused => "sim_refused",
                FailReason::Overrun => "overrun",
            }
        ),
    }
}

pub(super) fn pool_line(p: &Pool) -> String {
    format!(
        "pool {} {} {} {} {} {} {}",
        p.id,
        p.venue.tag(),
        p.address,
        p.token0,
        p.token1,
        p.reserve0,
        p.reserve1
    )
}

/// The file text of `c` with a fresh checksum.
pub(super) fn write(c: &Corpus) -> String {
    let h = &c.header;
    let mut s = String::new();
    let _ = writeln!(s, "{MAGIC} {VERSION}");
    let _ = writeln!(s, "seed {}", h.seed);
    let _ = writeln!(s, "cycles {}", c.cycles.len());
    let _ = writeln!(s, "cycle_interval_us {}", h.cycle_interval_us);
    let _ = writeln!(s, "profit_threshold {}", h.profit_threshold);
    let _ = writeln!(s, "pool_source {}", h.pool_source);
    let _ = writeln!(s, "pools {}", c.pools.len());
    let _ = writeln!(s, "checksum -");
    for p in &c.pools.pools {
        let _ = writeln!(s, "{}", pool_line(p));
    }
    for cy in &c.cycles {
        let _ = writeln!(
            s,
            "cycle {} {} {} {} {}",
            cy.index,
            cy.resolve_cpu_us,
            cy.poolupd_cpu_us,
            cy.swaps.len(),
            cy.paths.len()
        );
        for w in &cy.swaps {
            let _ = writeln!(
                s,
                "swap {} {} {}",
                w.pool,
                u8::from(w.zero_for_one),
                w.amount_in
            );
        }
        for p in &cy.paths {
            let hops: Vec<String> = p
                .hops
                .iter()
                .map(|h| format!("{}:{}", h.pool, u8::from(h.zero_for_one)))
                .collect();
            let sim = match p.sim {
                None => "-".to_string(),
                Some(x) => format!(
                    "{}/{}/{}",
                    x.cpu_us,
                    x.io_us,
                    if x.reverts { "revert" } else { "ok" }
                ),
            };
            let _ = writeln!(
                s,
                "path {} {} {} {} {}",
                p.id,
                hops.join(","),
                p.walk_cpu_us,
                sim,
                outcome_text(&p.expected)
            );
        }
        for (i, b) in cy.bins.iter().enumerate() {
            let ids: Vec<String> = b.iter().map(u32::to_string).collect();
            let _ = writeln!(
                s,
                "bin {i} {}",
                if ids.is_empty() {
                    "-".into()
                } else {
                    ids.join(",")
                }
            );
        }
    }
    let sum = checksum_of(&s);
    s.replacen("checksum -\n", &format!("checksum {sum}\n"), 1)
}

/// A line cursor that turns problems into [`CorpusError::At`].
pub(super) struct Lines<'a> {
    file: &'a Path,
    it: std::iter::Peekable<std::iter::Enumerate<std::str::Lines<'a>>>,
    pub(super) last: usize,
}

impl<'a> Lines<'a> {
    /// Reads the first line, `MAGIC VERSION`, and checks both: a wrong magic
    /// is "not a {what} file", another version is `UnknownVersion`.
    pub(super) fn magic(
        &mut self,
        magic: &str,
        version: u32,
        what: &str,
    ) -> Result<(), CorpusError> {
        let (ln, f) = self.next(&format!("the `{magic}` line"))?;
        if f[0] != magic || f.len() != 2 {
            return Err(self.bad(
                ln,
                "magic",
                format!("not a {what} file: expected `{magic} {version}`"),
            ));
        }
        if f[1] != version.to_string() {
            return Err(self.err(
                ln,
                Reason::UnknownVersion {
                    found: f[1].into(),
                    supported: version,
                },
            ));
        }
        Ok(())
    }

    pub(super) fn new(text: &'a str, file: &'a Path) -> Self {
        Lines {
            file,
            it: text.lines().enumerate().peekable(),
            last: 0,
        }
    }

    pub(super) fn err(&self, line: usize, reason: Reason) -> CorpusError {
        CorpusError::At {
            file: self.file.into(),
            line,
            reason,
        }
    }

    pub(super) fn bad(&self, line: usize, field: &str, why: impl Into<String>) -> CorpusError {
        self.err(
            line,
            Reason::BadField {
                field: field.into(),
                why: why.into(),
            },
        )
    }

    /// Next non-comment line split into fields, with its 1-based number;
    /// `expected` names what was due when the file ends.
    pub(super) fn next(&mut self, expected: &str) -> Result<(usize, Vec<&'a str>), CorpusError> {
        for (i, l) in self.it.by_ref() {
            self.last = i + 1;
            if l.starts_with('#') {
                continue;
            }
            return Ok((i + 1, l.split(' ').collect()));
        }
        Err(self.err(
            self.last + 1,
            Reason::Truncated {
                expected: expected.into(),
            },
        ))
    }

    /// Next line, which must start with `tag` and have `n` fields after it.
    pub(super) fn record(
        &mut self,
        tag: &str,
        n: usize,
    ) -> Result<(usize, Vec<&'a str>), CorpusError> {
        let (ln, f) = self.next(&format!("a `{tag}` line"))?;
        if f[0] != tag {
            return Err(self.bad(
                ln,
                tag,
                format!("expected a `{tag}` line, found `{}`", f[0]),
            ));
        }
        if f.len() != n + 1 {
            return Err(self.bad(
                ln,
                tag,
                format!("expected {n} fields after `{tag}`, found {}", f.len() - 1),
            ));
        }
        Ok((ln, f))
    }

    pub(super) fn num<T: std::str::FromStr>(
        &self,
        ln: usize,
        field: &str,
        s: &str,
    ) -> Result<T, CorpusError> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.bad(ln, field, format!("`{s}` is not a non-negative integer")));
        }
        s.parse()
            .map_err(|_| self.bad(ln, field, format!("`{s}` is out of range")))
    }

    /// A `key value` header line.
    pub(super) fn header<T: std::str::FromStr>(
        &mut self,
        key: &str,
    ) -> Result<(usize, T), CorpusError> {
        let (ln, f) = self.record(key, 1)?;
        Ok((ln, self.num(ln, key, f[1])?))
    }

    pub(super) fn done(&mut self) -> Result<(), CorpusError> {
        match self.it.find(|(_, l)| !l.starts_with('#') && !l.is_empty()) {
            None => Ok(()),
            Some((i, _)) => Err(self.bad(i + 1, "end", "unexpected content after the last record")),
        }
    }
}

/// Parses a `pool` line's fields (after the tag) for dense id `want_id`.
pub(super) fn parse_pool(
    l: &Lines,
    ln: usize,
    f: &[&str],
    want_id: u32,
) -> Result<Pool, CorpusError> {
    let id: u32 = l.num(ln, "pool.id", f[1])?;
    if id != want_id {
        return Err(l.bad(ln, "pool.id", format!("expected id {want_id}, found {id}")));
    }
    let venue = Venue::from_tag(f[2])
        .ok_or_else(|| l.bad(ln, "pool.venue", format!("`{}` is not `u` or `s`", f[2])))?;
    for (i, name) in [(3, "pool.address"), (4, "pool.token0"), (5, "pool.token1")] {
        if !f[i].starts_with("0x") || f[i].len() != 42 {
            return Err(l.bad(
                ln,
                name,
                format!("`{}` is not a 0x-prefixed 20-byte address", f[i]),
            ));
        }
    }
    Ok(Pool {
        id,
        venue,
        address: f[3].into(),
        token0: f[4].into(),
        token1: f[5].into(),
        reserve0: l.num(ln, "pool.reserve0", f[6])?,
        reserve1: l.num(ln, "pool.reserve1", f[7])?,
    })
}

fn parse_outcome(l: &Lines, ln: usize, s: &str) -> Result<PathOutcome, CorpusError> {
    let parts: Vec<&str> = s.split(':').collect();
    match parts.as_slice() {
        ["suppressed"] => Ok(PathOutcome::Suppressed),
        ["solved", a, p] => Ok(PathOutcome::Solved {
            amount_in: l.num(ln, "path.amount_in", a)?,
            profit: l.num(ln, "path.profit", p)?,
        }),
        ["failed", r] => {
            let reason = match *r {
                "sim_reverted" => FailReason::SimReverted,
                "lane_death" => FailReason::LaneDeath,
                "sim_refused" => FailReason::SimRefused,
                "overrun" => FailReason::Overrun,
                _ => return Err(l.bad(ln, "path.outcome", format!("unknown fail reason `{r}`"))),
            };
            Ok(PathOutcome::Failed { reason })
        }
        _ => Err(l.bad(
            ln,
            "path.outcome",
            format!("`{s}` is not solved:IN:PROFIT, suppressed or failed:REASON"),
        )),
    }
}

fn parse_path(
    l: &Lines,
    ln: usize,
    f: &[&str],
    want_id: u32,
    n_pools: usize,
) -> Result<PathCase, CorpusError> {
    let id: u32 = l.num(ln, "path.id", f[1])?;
    if id != want_id {
        return Err(l.bad(ln, "path.id", format!("expected id {want_id}, found {id}")));
    }
    let mut hops = Vec::new();
    for h in f[2].split(',') {
        let (p, d) = h
            .split_once(':')
            .ok_or_else(|| l.bad(ln, "path.hops", format!("`{h}` is not POOL:DIR")))?;
        let pool: u32 = l.num(ln, "path.hops", p)?;
        if pool as usize >= n_pools {
            return Err(l.bad(
                ln,
                "path.hops",
                format!("pool {pool} is not in the pool table ({n_pools} pools)"),
            ));
        }
        let zero_for_one = match d {
            "1" => true,
            "0" => false,
            _ => return Err(l.bad(ln, "path.hops", format!("direction `{d}` is not 0 or 1"))),
        };
        hops.push(Hop { pool, zero_for_one });
    }
    if !(2..=3).contains(&hops.len()) {
        return Err(l.bad(
            ln,
            "path.hops",
            format!("{} hops; a path has 2 or 3", hops.len()),
        ));
    }
    let sim = if f[4] == "-" {
        None
    } else {
        let s: Vec<&str> = f[4].split('/').collect();
        if s.len() != 3 {
            return Err(l.bad(
                ln,
                "path.sim",
                format!("`{}` is not CPU/IO/ok|revert or -", f[4]),
            ));
        }
        let reverts = match s[2] {
            "ok" => false,
            "revert" => true,
            o => return Err(l.bad(ln, "path.sim", format!("`{o}` is not ok or revert"))),
        };
        Some(SimCase {
            cpu_us: l.num(ln, "path.sim.cpu_us", s[0])?,
            io_us: l.num(ln, "path.sim.io_us", s[1])?,
            reverts,
        })
    };
    Ok(PathCase {
        id,
        hops,
        walk_cpu_us: l.num(ln, "path.walk_cpu_us", f[3])?,
        sim,
        expected: parse_outcome(l, ln, f[5])?,
    })
}

fn parse_cycle(l: &mut Lines, want: u32, n_pools: usize) -> Result<CycleCase, CorpusError> {
    let (ln, f) = l.record("cycle", 5)?;
    let index: u32 = l.num(ln, "cycle.index", f[1])?;
    if index != want {
        return Err(l.bad(
            ln,
            "cycle.index",
            format!("expected cycle {want}, found {index}"),
        ));
    }
    let resolve_cpu_us = l.num(ln, "cycle.resolve_cpu_us", f[2])?;
    let poolupd_cpu_us = l.num(ln, "cycle.poolupd_cpu_us", f[3])?;
    let n_swaps: usize = l.num(ln, "cycle.swaps", f[4])?;
    let n_paths: usize = l.num(ln, "cycle.paths", f[5])?;
    let mut swaps = Vec::with_capacity(claimed(n_swaps));
    for _ in 0..n_swaps {
        let (ln, f) = l.record("swap", 3)?;
        let pool: u32 = l.num(ln, "swap.pool", f[1])?;
        if pool as usize >= n_pools {
            return Err(l.bad(
                ln,
                "swap.pool",
                format!("pool {pool} is not in the pool table"),
            ));
        }
        let zero_for_one = match f[2] {
            "1" => true,
            "0" => false,
            d => return Err(l.bad(ln, "swap.dir", format!("`{d}` is not 0 or 1"))),
        };
        swaps.push(Swap {
            pool,
            zero_for_one,
            amount_in: l.num(ln, "swap.amount_in", f[3])?,
        });
    }
    let mut paths = Vec::with_capacity(claimed(n_paths));
    for i in 0..n_paths {
        let (ln, f) = l.record("path", 5)?;
        paths.push(parse_path(l, ln, &f, i as u32, n_pools)?);
    }
    let mut bins = Vec::with_capacity(BINS);
    let mut seen = vec![false; n_paths];
    for b in 0..BINS {
        let (ln, f) = l.record("bin", 2)?;
        let k: usize = l.num(ln, "bin.index", f[1])?;
        if k != b {
            return Err(l.bad(ln, "bin.index", format!("expected bin {b}, found {k}")));
        }
        let mut ids = Vec::new();
        if f[2] != "-" {
            for s in f[2].split(',') {
                let id: u32 = l.num(ln, "bin.paths", s)?;
                if id as usize >= n_paths || std::mem::replace(&mut seen[id as usize], true) {
                    return Err(l.bad(
                        ln,
                        "bin.paths",
                        format!("path {id} is out of range or already in a bin"),
                    ));
                }
                ids.push(id);
            }
        }
        bins.push(ids);
    }
    if let Some(missing) = seen.iter().position(|s| !s) {
        return Err(l.bad(
            l.last,
            "bin.paths",
            format!("path {missing} of cycle {index} is in no bin"),
        ));
    }
    Ok(CycleCase {
        index,
        resolve_cpu_us,
        swaps,
        poolupd_cpu_us,
        paths,
        bins,
    })
}

/// Room to reserve for `n` records a header claims: never more than a
/// few thousand up front, because the count is the file's word, not its
/// content (a header claiming 10^12 pools must be refused as truncated,
/// not abort the process allocating for them); the vector grows past it
/// as records are actually read.
pub(super) fn claimed(n: usize) -> usize {
    n.min(4096)
}

/// Parses a whole corpus; `file` names it in errors.
pub(super) fn parse(text: &str, file: &Path) -> Result<Corpus, CorpusError> {
    let mut l = Lines::new(text, file);
    l.magic(MAGIC, VERSION, "corpus")?;
    let (_, seed) = l.header("seed")?;
    let (_, cycles) = l.header::<u32>("cycles")?;
    let (_, cycle_interval_us) = l.header("cycle_interval_us")?;
    let (_, profit_threshold) = l.header("profit_threshold")?;
    let (_, f) = l.record("pool_source", 1)?;
    let pool_source = f[1].to_string();
    let (_, n_pools) = l.header::<usize>("pools")?;
    let (sum_ln, f) = l.record("checksum", 1)?;
    let checksum = f[1].to_string();
    let mut pools = Vec::with_capacity(claimed(n_pools));
    for i in 0..n_pools {
        let (ln, f) = l.record("pool", 7)?;
        pools.push(parse_pool(&l, ln, &f, i as u32)?);
    }
    let mut out = Vec::with_capacity(claimed(cycles as usize));
    for c in 0..cycles {
        out.push(parse_cycle(&mut l, c, n_pools)?);
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
    Ok(Corpus {
        header: CorpusHeader {
            version: VERSION,
            seed,
            cycles,
            cycle_interval_us,
            profit_threshold,
            pool_source,
            checksum,
        },
        pools: PoolSet { pools },
        cycles: out,
    })
}
