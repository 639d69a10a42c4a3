//! Properties of the hop math: monotone, bounded, no overflow at 2^112.

use fleet_workloads::math::{amount_out, optimal_input, path_out};
use proptest::prelude::*;

const MAX: u128 = (1u128 << 112) - 1;

proptest! {
    #[test]
    fn amount_out_is_monotone_and_below_the_reserve(r_in in 1..=MAX, r_out in 1..=MAX, x in 0..=MAX, dx in 0..=MAX) {
        let a = amount_out(x, r_in, r_out);
        let b = amount_out(x.saturating_add(dx).min(MAX), r_in, r_out);
        prop_assert!(a <= b);
        prop_assert!(b < r_out);
        // More output reserve never gives less.
        prop_assert!(amount_out(x, r_in, r_out / 2) <= a);
    }

    #[test]
    fn extremes_do_not_overflow(x in prop::sample::select(vec![1u128, MAX, MAX / 3]), r in prop::sample::select(vec![1u128, MAX])) {
        let o = amount_out(x, r, MAX);
        prop_assert!(o < MAX);
        let hops = [(r, MAX), (MAX, r), (r, MAX)];
        // The path is its hops in turn; its output stays below the last
        // hop's reserve, and one unit more in never gives less out.
        let out = path_out(x, &hops);
        prop_assert_eq!(out, amount_out(amount_out(amount_out(x, r, MAX), MAX, r), r, MAX));
        prop_assert!(out < MAX);
        prop_assert!(path_out(x - 1, &hops) <= out);
        if let Some((xi, p)) = optimal_input(&hops[..2]) {
            prop_assert_eq!(path_out(xi, &hops[..2]) - xi, p);
        }
    }

    #[test]
    fn optimum_beats_its_neighbourhood(r1 in 10u128.pow(15)..10u128.pow(27), k in 1001u128..3000, r2 in 10u128.pow(15)..10u128.pow(27)) {
        // Pair priced k/1000 apart on two pools: an edge whenever k > ~1006.
        let hops = [(r1, r2 * k / 1000), (r2, r1)];
        if let Some((x, p)) = optimal_input(&hops) {
            prop_assert_eq!(path_out(x, &hops) - x, p);
            for y in [x / 2, x + x / 2, x / 10, x * 2] {
                let q = path_out(y, &hops).saturating_sub(y);
                prop_assert!(q <= p, "input {} gives {} > {}", y, q, p);
            }
        }
    }
}
