//! `fleet-lab corpus generate|verify|pools`: make, check and derive the golden
//! outcome corpus (`DESIGN.md` §5; format in `corpus/README.md`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use fleet_workloads::corpus::{
    generate, read_pool_file, write_pool_file, Corpus, GenerateParams, PoolFile, VerifyReport,
};

/// The shipped corpus directory (`<workspace>/corpus`).
pub fn corpus_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("corpus");
    dir.canonicalize().unwrap_or(dir)
}

/// The shipped golden corpus file.
pub fn default_corpus_path() -> PathBuf {
    corpus_dir().join("golden-v1.txt")
}

/// The corpus a replay uses: `given`, else `corpus/golden-v1.txt` under
/// the working directory, else the one shipped next to this build.
pub fn replay_corpus_path(given: Option<&Path>) -> PathBuf {
    if let Some(p) = given {
        return p.to_path_buf();
    }
    let local = Path::new("corpus").join("golden-v1.txt");
    if local.is_file() {
        local
    } else {
        default_corpus_path()
    }
}

/// The shipped filtered pool-state file.
pub fn default_pool_path() -> PathBuf {
    corpus_dir().join("pools-2020-09.txt")
}

/// `fleet-lab corpus …`.
#[derive(Debug, Args)]
pub struct CorpusArgs {
    /// What to do.
    #[command(subcommand)]
    pub verb: CorpusVerb,
}

/// The corpus verbs.
#[derive(Debug, Subcommand)]
pub enum CorpusVerb {
    /// Generate a corpus from the pool file (deterministic from the seed).
    Generate {
        /// Seed of the generator.
        #[arg(long, default_value_t = GenerateParams::default().seed)]
        seed: u64,
        /// Number of cycles (1 to 100,000).
        #[arg(long, default_value_t = GenerateParams::default().cycles, allow_hyphen_values = true, value_parser = crate::cmd::bounds::parse_corpus_cycles)]
        cycles: u32,
        /// Output file (required: generating never replaces the shipped
        /// corpus unless it is named here, with --force).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Replace --out when it already exists.
        #[arg(long)]
        force: bool,
        /// Pool-state file to draw from (default: `corpus/pools-2020-09.txt`).
        #[arg(long)]
        pools: Option<PathBuf>,
        /// Profit threshold in wei (`Solved` strictly above it).
        #[arg(long, default_value_t = GenerateParams::default().profit_threshold)]
        threshold: u128,
    },
    /// Load a corpus, check its checksum, recompute every outcome and bin.
    Verify {
        /// Corpus file (default: the shipped `corpus/golden-v1.txt`).
        path: Option<PathBuf>,
    },
    /// Derive the filtered pool-state file from the raw pair dumps.
    Pools {
        /// Uniswap V2 pairs JSON.
        #[arg(long)]
        univ2: PathBuf,
        /// SushiSwap pairs JSON.
        #[arg(long)]
        sushi: PathBuf,
        /// Output (default: `corpus/pools-2020-09.txt`).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn print_report(r: &VerifyReport) {
    let s = &r.stats;
    println!("cycles {}  paths {}  swaps {}", r.cycles, r.paths, r.swaps);
    println!(
        "outcomes: solved {} ({:.1} %)  suppressed {}  failed {} ({:.1} %)",
        r.solved,
        100.0 * r.solved as f64 / r.paths.max(1) as f64,
        r.suppressed,
        r.failed,
        100.0 * r.failed as f64 / r.paths.max(1) as f64
    );
    println!(
        "paths/cycle min {} max {} mean {:.1}",
        s.paths_per_cycle.0, s.paths_per_cycle.1, s.paths_per_cycle.2
    );
    println!(
        "sims/cycle  min {} max {} mean {:.1}",
        s.sims_per_cycle.0, s.sims_per_cycle.1, s.sims_per_cycle.2
    );
    println!(
        "sim cpu mean {:.2} ms; sim io p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
        s.sim_cpu_mean_us / 1e3,
        s.sim_io_us.0 as f64 / 1e3,
        s.sim_io_us.1 as f64 / 1e3,
        s.sim_io_us.2 as f64 / 1e3
    );
    println!(
        "bin walk cpu mean {:.1} ms; sims/bin {:.1}; bin span if sims are waited out in turn: mean {:.1} ms max {:.1} ms",
        s.bin_walk_cpu_mean_us / 1e3,
        s.sims_per_bin_mean,
        s.bin_span_sequential_us.0 / 1e3,
        s.bin_span_sequential_us.1 as f64 / 1e3
    );
    println!(
        "bin span with one sim in flight: mean {:.1} ms max {:.1} ms",
        s.bin_span_one_in_flight_us.0 / 1e3,
        s.bin_span_one_in_flight_us.1 as f64 / 1e3
    );
    println!(
        "resolve cpu mean {:.2} ms; pool update cpu mean {:.2} ms",
        s.resolve_mean_us / 1e3,
        s.poolupd_mean_us / 1e3
    );
}

/// Refuses to replace an existing `out` unless `force`.
fn refuse_existing(out: &Path, force: bool) -> anyhow::Result<()> {
    if out.exists() && !force {
        anyhow::bail!(
            "--out {} already exists: choose another file or pass --force to replace it",
            out.display()
        );
    }
    Ok(())
}

/// Runs a corpus verb. Errors: unreadable or refused files (with the file,
/// line and reason), an outcome or bin that does not recompute.
pub fn run(args: CorpusArgs) -> anyhow::Result<()> {
    match args.verb {
        CorpusVerb::Generate {
            seed,
            cycles,
            out,
            force,
            pools,
            threshold,
        } => {
            refuse_existing(&out, force)?;
            let pool_path = pools.unwrap_or_else(default_pool_path);
            let pf = read_pool_file(&pool_path)?;
            let params = GenerateParams {
                seed,
                cycles,
                profit_threshold: threshold,
                pool_source: pool_path
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                ..GenerateParams::default()
            };
            let corpus = generate(&pf.pools, &params);
            corpus.save(&out)?;
            let report = corpus
                .verify()
                .context("the freshly generated corpus does not verify")?;
            println!(
                "wrote {} (checksum {})",
                out.display(),
                corpus.header.checksum
            );
            print_report(&report);
            Ok(())
        }
        CorpusVerb::Verify { path } => {
            let path = path.unwrap_or_else(default_corpus_path);
            let corpus = Corpus::load(&path)?;
            let report = corpus.verify_as(&path)?;
            println!(
                "{}: ok (version {}, seed {}, checksum {})",
                path.display(),
                corpus.header.version,
                corpus.header.seed,
                corpus.header.checksum
            );
            print_report(&report);
            Ok(())
        }
        CorpusVerb::Pools { univ2, sushi, out } => {
            let pf = PoolFile::derive(&univ2, &sushi)?;
            let out = out.unwrap_or_else(default_pool_path);
            write_pool_file(&out, &pf)?;
            println!("wrote {} ({} pools)", out.display(), pf.pools.len());
            for s in &pf.sources {
                println!("  source {} sha256 {}", s.file, s.sha256);
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_then_verify_a_small_corpus() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("small.txt");
        let gen = |out: &Path| CorpusArgs {
            verb: CorpusVerb::Generate {
                seed: 5,
                cycles: 3,
                out: out.into(),
                force: false,
                pools: None,
                threshold: 10u128.pow(16),
            },
        };
        run(gen(&out)).unwrap();
        run(CorpusArgs {
            verb: CorpusVerb::Verify {
                path: Some(out.clone()),
            },
        })
        .unwrap();
        let again = dir.path().join("again.txt");
        run(gen(&again)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&again).unwrap());
        // A damaged copy is refused with the file and line in the message.
        let text = std::fs::read_to_string(&out).unwrap();
        std::fs::write(&out, &text[..text.len() / 2]).unwrap();
        let e = run(CorpusArgs {
            verb: CorpusVerb::Verify {
                path: Some(out.clone()),
            },
        })
        .unwrap_err();
        let msg = format!("{e:#}");
        assert!(msg.contains("small.txt:"), "{msg}");
    }

    #[test]
    fn missing_pool_file_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let e = run(CorpusArgs {
            verb: CorpusVerb::Generate {
                seed: 1,
                cycles: 1,
                out: dir.path().join("x.txt"),
                force: false,
                pools: Some(dir.path().join("nope.txt")),
                threshold: 1,
            },
        })
        .unwrap_err();
        assert!(format!("{e:#}").contains("nope.txt"), "{e:#}");
    }
}
