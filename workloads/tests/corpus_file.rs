//! The shipped corpus: it loads, every outcome recomputes, it regenerates
//! byte for byte from its seed, and damaged copies are refused with the line
//! and the reason.

use std::path::{Path, PathBuf};

use fleet::PathOutcome;
use fleet_workloads::corpus::{
    generate, read_pool_file, Corpus, CorpusError, GenerateParams, PoolFile, Reason,
};
use fleet_workloads::lpt::BINS;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus")
}

fn golden_text() -> String {
    std::fs::read_to_string(corpus_dir().join("golden-v1.txt")).unwrap()
}

fn refused(text: &str) -> (usize, Reason) {
    match Corpus::parse(text, "damaged.txt") {
        Err(e @ CorpusError::At { .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with("damaged.txt:"), "{msg}");
            (e.line().unwrap(), e.reason().unwrap().clone())
        }
        Err(e) => panic!("unexpected error kind: {e}"),
        Ok(_) => panic!("damaged corpus was accepted"),
    }
}

#[test]
fn golden_corpus_loads_and_every_outcome_recomputes() {
    let path = corpus_dir().join("golden-v1.txt");
    let c = Corpus::load(&path).unwrap();
    assert_eq!(c.header.cycles, 333);
    assert_eq!(c.cycles.len(), 333);
    let r = c.verify_as(&path).unwrap();
    assert_eq!(
        r.paths,
        c.cycles.iter().map(|cy| cy.paths.len()).sum::<usize>()
    );
    assert_eq!(r.solved + r.suppressed + r.failed, r.paths);
    // A realistic mix: some solved, mostly suppressed, a few percent failed.
    assert!(
        r.solved * 100 >= r.paths * 5 && r.solved * 100 <= r.paths * 30,
        "{r:?}"
    );
    assert!(
        r.failed * 100 >= r.paths && r.failed * 100 <= r.paths * 5,
        "{r:?}"
    );
    // Calibration (DESIGN.md §5, scale 1).
    let s = &r.stats;
    assert!(
        s.paths_per_cycle.0 >= 92 && s.paths_per_cycle.1 <= 108,
        "{s:?}"
    );
    assert!(
        s.sims_per_cycle.0 >= 85 && s.sims_per_cycle.1 <= 105,
        "{s:?}"
    );
    assert!((3_100.0..3_500.0).contains(&s.sim_cpu_mean_us), "{s:?}");
    assert!(
        (2_700..=3_300).contains(&s.sim_io_us.0) && s.sim_io_us.2 <= 12_000,
        "{s:?}"
    );
    assert!(
        (36_000.0..44_000.0).contains(&s.bin_walk_cpu_mean_us),
        "{s:?}"
    );
    assert!((11_800.0..13_000.0).contains(&s.resolve_mean_us), "{s:?}");
    for cy in &c.cycles {
        assert_eq!(cy.bins.len(), BINS);
        assert!(!cy.swaps.is_empty());
    }
}

#[test]
fn golden_corpus_regenerates_byte_for_byte() {
    let pf = read_pool_file(&corpus_dir().join("pools-2020-09.txt")).unwrap();
    let c = generate(&pf.pools, &GenerateParams::default());
    assert!(
        c.to_text() == golden_text(),
        "the shipped corpus is not what the generator makes from seed 1"
    );
    // Another seed gives another corpus, deterministically.
    let p = GenerateParams {
        seed: 9,
        cycles: 5,
        ..GenerateParams::default()
    };
    let (a, b) = (generate(&pf.pools, &p), generate(&pf.pools, &p));
    assert_eq!(a.to_text(), b.to_text());
    let seed1 = generate(
        &pf.pools,
        &GenerateParams {
            cycles: 5,
            ..GenerateParams::default()
        },
    );
    assert_ne!(
        a.cycles, seed1.cycles,
        "seed 9 and seed 1 gave the same cycles"
    );
    assert_eq!(Corpus::parse(&a.to_text(), "a").unwrap(), a);
}

#[test]
fn pools_changed_between_cycles_change_outcomes() {
    let c = Corpus::load(corpus_dir().join("golden-v1.txt")).unwrap();
    // Solving cycle 200's paths on the base pools (no swaps) differs somewhere:
    // the swaps matter.
    let cy = &c.cycles[200];
    let differs = cy
        .paths
        .iter()
        .any(|p| fleet_workloads::solve_path(&c.pools, p, c.header.profit_threshold) != p.expected);
    assert!(differs);
    assert!(cy
        .paths
        .iter()
        .any(|p| matches!(p.expected, PathOutcome::Solved { .. })));
}

#[test]
fn truncated_file_is_refused_with_line_and_reason() {
    let text = golden_text();
    let lines: Vec<&str> = text.lines().collect();
    // Cut at a line boundary in the middle of the cycles.
    let keep = lines.len() / 2;
    let cut = lines[..keep].join("\n") + "\n";
    let (line, reason) = refused(&cut);
    assert!(matches!(reason, Reason::Truncated { .. }), "{reason}");
    assert_eq!(line, keep + 1);
    // Cut in the middle of a path line: the half line is a bad field.
    let mid = &text[..text.len() / 3];
    let last_line = mid.lines().count();
    let (line, reason) = refused(mid);
    assert_eq!(line, last_line, "{reason}");
    assert!(
        matches!(reason, Reason::BadField { .. } | Reason::Truncated { .. }),
        "{reason}"
    );
}

#[test]
fn edited_file_is_refused_with_line_and_reason() {
    let text = golden_text();
    // An edited outcome that still parses: the checksum line (8) refuses it.
    let edited = text.replacen("suppressed\n", "solved:1:1\n", 1);
    let (line, reason) = refused(&edited);
    assert_eq!(line, 8);
    assert!(
        matches!(reason, Reason::ChecksumMismatch { .. }),
        "{reason}"
    );
    assert!(reason.to_string().contains("regenerate"));
    // An edited reserve: same.
    let first_pool = text.lines().nth(8).unwrap();
    let bumped = format!("{first_pool}1"); // reserve1 gains a digit: still a valid line
    let (line, reason) = refused(&text.replacen(first_pool, &bumped, 1));
    assert_eq!(
        (line, matches!(reason, Reason::ChecksumMismatch { .. })),
        (8, true),
        "{reason}"
    );
    // A bad field: a non-number walk cost, at its own line.
    let target = text.lines().position(|l| l.starts_with("path ")).unwrap();
    let l = text.lines().nth(target).unwrap();
    let f: Vec<&str> = l.split(' ').collect();
    let bad = l.replacen(&format!(" {} ", f[3]), " 12x ", 1);
    let (line, reason) = refused(&text.replacen(l, &bad, 1));
    assert_eq!(line, target + 1);
    assert!(
        matches!(&reason, Reason::BadField { field, .. } if field == "path.walk_cpu_us"),
        "{reason}"
    );
    // An unknown version.
    let (line, reason) = refused(&text.replacen("fleet-corpus 1\n", "fleet-corpus 7\n", 1));
    assert_eq!(line, 1);
    assert_eq!(
        reason,
        Reason::UnknownVersion {
            found: "7".into(),
            supported: 1
        }
    );
    // A path id out of order.
    let (line, reason) = refused(&text.replacen(l, &l.replacen("path 0 ", "path 3 ", 1), 1));
    assert_eq!(line, target + 1, "{reason}");
}

#[test]
fn edited_outcome_with_a_fresh_checksum_fails_verification() {
    let mut c = Corpus::parse(&golden_text(), "golden").unwrap();
    let p = c.cycles[3]
        .paths
        .iter_mut()
        .find(|p| p.expected == PathOutcome::Suppressed)
        .unwrap();
    p.expected = PathOutcome::Solved {
        amount_in: 1,
        profit: 1,
    };
    let id = p.id;
    let reparsed = Corpus::parse(&c.to_text(), "edited").unwrap();
    match reparsed.verify_as("edited") {
        Err(CorpusError::OutcomeMismatch { cycle: 3, path, .. }) => assert_eq!(path, id),
        other => panic!("{other:?}"),
    }
}

#[test]
fn pool_file_matches_its_sources_and_rule() {
    let pf = read_pool_file(&corpus_dir().join("pools-2020-09.txt")).unwrap();
    assert_eq!(pf.pools.len(), 2739);
    let names: Vec<_> = pf
        .sources
        .iter()
        .map(|s| (s.file.as_str(), s.sha256.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (
                "univ2-pairs-2020-09.json",
                "c414d581def5feaa7d819359ba8326d8d9965b6daeda80b4288e8218280d776e"
            ),
            (
                "sushi-pairs-2020-09.json",
                "5ab8855336822b7b0858fa273b2883badf0e8a6dfea440bdd490ba49a5d6571e"
            ),
        ]
    );
    assert!(pf
        .pools
        .pools
        .iter()
        .all(|p| p.reserve0 < 1 << 112 && p.reserve1 < 1 << 112));
    // Round trip and damage detection.
    let text = pf.to_text();
    assert_eq!(PoolFile::parse(&text, Path::new("p")).unwrap(), pf);
    let cut: String = text.lines().take(100).map(|l| format!("{l}\n")).collect();
    let e = PoolFile::parse(&cut, Path::new("p")).unwrap_err();
    assert!(matches!(e.reason(), Some(Reason::Truncated { .. })), "{e}");
    // When the raw dumps are on this machine, deriving again gives the same file.
    let raw = Path::new("/work/shared/data");
    if raw.join("univ2-pairs-2020-09.json").exists() {
        let again = PoolFile::derive(
            &raw.join("univ2-pairs-2020-09.json"),
            &raw.join("sushi-pairs-2020-09.json"),
        )
        .unwrap();
        assert_eq!(again.to_text(), text);
    }
}

/// Found by the `corpus_text` and `pool_file` fuzz targets: a header that
/// claims more records than any file holds aborted the process reserving
/// room for them. It is refused as truncated at the first missing record.
#[test]
fn a_header_claiming_huge_counts_is_refused_as_truncated_not_an_abort() {
    let header = |cycles: &str, pools: &str| {
        format!(
            "fleet-corpus 1\nseed 1\ncycles {cycles}\ncycle_interval_us 1000000\nprofit_threshold 1\npool_source p.txt\npools {pools}\nchecksum 0\n"
        )
    };
    let (line, reason) = refused(&header("1", &usize::MAX.to_string()));
    assert_eq!(line, 9);
    assert!(matches!(reason, Reason::Truncated { .. }), "{reason}");
    let (line, reason) = refused(&header(&u32::MAX.to_string(), "0"));
    assert_eq!(line, 9);
    assert!(matches!(reason, Reason::Truncated { .. }), "{reason}");
    let huge_cycle = header("1", "0") + &format!("cycle 0 1 1 {} {}\n", usize::MAX, usize::MAX);
    let (line, reason) = refused(&huge_cycle);
    assert_eq!(line, 10);
    assert!(matches!(reason, Reason::Truncated { .. }), "{reason}");

    let pools = format!(
        "fleet-pools 1\nsource n x\npools {}\nchecksum 0\n",
        usize::MAX
    );
    match PoolFile::parse(&pools, Path::new("huge.pools")) {
        Err(e) => assert!(matches!(e.reason(), Some(Reason::Truncated { .. })), "{e}"),
        Ok(_) => panic!("a pool file claiming {} pools was accepted", usize::MAX),
    }
}
