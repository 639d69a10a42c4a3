//! The criterion flamegraph profiler the benches use (its module lives with
//! the benches so criterion stays a dev-dependency of the lab).

#[allow(dead_code)]
#[path = "../benches/support/profiler.rs"]
mod flame;

use criterion::profiler::Profiler;
use flame::{FlamegraphProfiler, ProfileError, FLAMEGRAPH_FILE};

/// Real arithmetic the sampler can see on the stack.
#[inline(never)]
fn busy_profiled_arithmetic(rounds: u64) -> u64 {
    let mut acc = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..rounds {
        acc = std::hint::black_box(acc.rotate_left(7) ^ i).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    }
    acc
}

#[test]
fn a_profiled_span_writes_an_svg_flamegraph_naming_the_hot_function() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("bench").join("profile");
    let mut p = FlamegraphProfiler::default();
    p.start_profiling("bench", &out);
    // Burn enough process CPU for many samples at 1 kHz; the assertion is
    // on the file, never on time.
    let mut x = 0;
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(400) {
        x ^= busy_profiled_arithmetic(200_000);
    }
    std::hint::black_box(x);
    p.stop_profiling("bench", &out);
    let path = out.join(FLAMEGRAPH_FILE);
    assert_eq!(p.written(), std::slice::from_ref(&path));
    let svg = std::fs::read_to_string(&path).expect("flamegraph written");
    assert!(svg.contains("<svg"), "not an SVG");
    assert!(
        svg.contains("busy_profiled_arithmetic"),
        "hot function missing from the flamegraph"
    );
}

#[test]
fn stop_without_start_is_a_typed_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut p = FlamegraphProfiler::default();
    let err = p.try_stop("b", dir.path()).unwrap_err();
    assert!(matches!(err, ProfileError::NotRunning { .. }), "{err}");
    assert!(p.written().is_empty());
}
