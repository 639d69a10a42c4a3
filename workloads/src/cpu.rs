//! Calibrated CPU burn that does real arithmetic: it scans the price-impact
//! curve of a path at growing input sizes until a target of *thread* CPU time
//! is spent (`DESIGN.md` §5: "the CPU cost of a walk is calibrated per path
//! … and scales with the time scale"). The arithmetic never feeds the outcome.

use std::hint::black_box;

use crate::math;
use crate::paths::{hop_reserves, Hop};
use crate::pools::PoolSet;

/// The calling thread's CPU time in µs (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

/// Burns `target_us` µs of this thread's CPU by evaluating the path's exact
/// output at input sizes growing by 1/8 per step from 1 (wrapping back to 1
/// past the first pool's reserve), and returns a checksum of the results so
/// the work cannot be optimised away. A target of 0 returns at once.
///
/// The caller applies the time scale (`target_us = corpus µs × scale`).
/// Overshoot is one batch of 32 evaluations (a few µs).
pub fn burn_cpu_us(target_us: u64, pools: &PoolSet, hops: &[Hop]) -> u64 {
    if target_us == 0 {
        return 0;
    }
    let reserves = hop_reserves(pools, hops);
    let cap = reserves.first().map_or(1, |r| r.0.max(1));
    let start = thread_cpu_us();
    let mut sum = 0u64;
    let mut x: u128 = 1;
    loop {
        for _ in 0..32 {
            let out = math::path_out(black_box(x), black_box(&reserves));
            sum = sum.rotate_left(7) ^ (out as u64) ^ ((out >> 64) as u64);
            x = x + x / 8 + 1;
            if x > cap {
                x = 1;
            }
        }
        if thread_cpu_us().saturating_sub(start) >= target_us {
            return black_box(sum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pools::{Pool, Venue};

    #[test]
    fn burn_spends_at_least_the_target_and_is_repeatable() {
        let set = PoolSet {
            pools: vec![Pool {
                id: 0,
                venue: Venue::UniswapV2,
                address: "0xA".into(),
                token0: "a".into(),
                token1: "b".into(),
                reserve0: 10u128.pow(21),
                reserve1: 10u128.pow(24),
            }],
        };
        let hops = [Hop {
            pool: 0,
            zero_for_one: true,
        }];
        let t0 = thread_cpu_us();
        let c = burn_cpu_us(3_000, &set, &hops);
        assert!(thread_cpu_us() - t0 >= 3_000);
        assert_ne!(c, 0);
        assert_eq!(burn_cpu_us(0, &set, &hops), 0);
    }
}
