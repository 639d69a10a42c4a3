//! Support for tests of the core in process (no HTTP).

use router::config::{Facts, SourceFact, TargetFact};

/// Facts: one source `board` on `jobs.example` (a politeness bucket of
/// `bucket` tokens refilling `bucket` a second) with targets `ad-0` …
/// `ad-{n-1}`.
pub fn board_facts(n: usize, bucket: f64) -> Facts {
    Facts {
        sources: vec![SourceFact {
            source: "board".into(),
            host: "jobs.example".into(),
            binding: "html-v1".into(),
            requires: vec![],
            change_timescale_s: Some(86_400.0),
            bucket: Some((bucket, bucket)),
        }],
        targets: (0..n)
            .map(|i| TargetFact {
                target: format!("ad-{i}"),
                source: "board".into(),
                listing: false,
            })
            .collect(),
        ..Facts::default()
    }
}
