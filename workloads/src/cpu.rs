//! Calibrated CPU burn that does real arithmetic: it scans the price-impact
//! curve of a path at growing input sizes until a target of *thread* CPU time
//! is spent (`DESIGN.md` §5: "the CPU cost of a walk is calibrated per path
//! … and scales with the time scale"). The arithmetic never feeds the outcome.

use std::cell::Cell;
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

/// How a burn decides it has spent its target, per thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkMode {
    /// Until the thread's CPU time has grown by the target (the lab's
    /// replays: corpus µs are CPU µs on any host).
    #[default]
    ThreadCpu,
    /// A fixed amount of work: `batches_per_ms` batches of 32 evaluations
    /// per ms of target (rounded up), no clock read, and the simulated I/O
    /// waits of [`crate::simio`] are zero. What an instruction count needs:
    /// the same work on any host (the whole-cycle gungraun bench).
    Fixed {
        /// Batches of 32 evaluations per ms of target.
        batches_per_ms: u32,
    },
}

thread_local! {
    static MODE: Cell<WorkMode> = const { Cell::new(WorkMode::ThreadCpu) };
}

/// Sets the calling thread's [`WorkMode`]; other threads are unaffected.
pub fn set_work_mode(mode: WorkMode) {
    MODE.with(|m| m.set(mode));
}

/// The calling thread's [`WorkMode`].
pub fn work_mode() -> WorkMode {
    MODE.with(|m| m.get())
}

/// Batches a fixed-work burn of `target_us` runs (`None` in thread-CPU mode).
fn fixed_batches(target_us: u64) -> Option<u64> {
    match work_mode() {
        WorkMode::ThreadCpu => None,
        WorkMode::Fixed { batches_per_ms } => {
            Some((target_us * batches_per_ms as u64).div_ceil(1_000))
        }
    }
}

/// Burns `target_us` µs of this thread's CPU by evaluating the path's exact
/// output at input sizes growing by 1/8 per step from 1 (wrapping back to 1
/// past the first pool's reserve), and returns a checksum of the results so
/// the work cannot be optimised away. A target of 0 returns at once.
///
/// The caller applies the time scale (`target_us = corpus µs × scale`).
/// Overshoot is one batch of 32 evaluations (a few µs). Inside a unit body
/// on the serial binding prefer [`burn_cpu_us_async`], which yields the
/// cycle thread every slice.
pub fn burn_cpu_us(target_us: u64, pools: &PoolSet, hops: &[Hop]) -> u64 {
    if target_us == 0 {
        return 0;
    }
    let mut burner = Burner::new(pools, hops);
    if let Some(n) = fixed_batches(target_us) {
        for _ in 0..n {
            burner.batch();
        }
        return black_box(burner.sum);
    }
    let start = thread_cpu_us();
    loop {
        burner.batch();
        if thread_cpu_us().saturating_sub(start) >= target_us {
            return black_box(burner.sum);
        }
    }
}

/// [`burn_cpu_us`] for unit bodies: the same arithmetic and the same
/// checksum, with [`fleet_bindings::checkpoint`] awaited after every batch
/// of 32 evaluations. On a serial cycle thread the burn then yields once
/// per [`fleet_bindings::CHECKPOINT_SLICE`] (1 ms), so a sim granted while
/// it burns starts within a slice plus one batch (a few µs) instead of
/// after the whole burn; on the pinned binding it never yields. The target
/// counts this thread's CPU only, so time spent yielded is not counted.
pub async fn burn_cpu_us_async(target_us: u64, pools: &PoolSet, hops: &[Hop]) -> u64 {
    if target_us == 0 {
        return 0;
    }
    let mut burner = Burner::new(pools, hops);
    if let Some(n) = fixed_batches(target_us) {
        for _ in 0..n {
            burner.batch();
            fleet_bindings::checkpoint().await;
        }
        return black_box(burner.sum);
    }
    let mut spent = 0u64;
    let mut mark = thread_cpu_us();
    loop {
        burner.batch();
        let now = thread_cpu_us();
        spent += now.saturating_sub(mark);
        if spent >= target_us {
            return black_box(burner.sum);
        }
        fleet_bindings::checkpoint().await;
        // Another unit may have run on this thread while yielded.
        mark = thread_cpu_us();
    }
}

/// The checksum's multiplier (odd, so the multiply is a bijection on `u64`:
/// the golden-ratio constant of Fibonacci hashing).
const CHECKSUM_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// The burn's state: the hop reserves, the input size, the checksum.
struct Burner {
    reserves: Vec<(u128, u128)>,
    cap: u128,
    x: u128,
    sum: u64,
}

impl Burner {
    fn new(pools: &PoolSet, hops: &[Hop]) -> Self {
        let reserves = hop_reserves(pools, hops);
        let cap = reserves.first().map_or(1, |r| r.0.max(1));
        Burner {
            reserves,
            cap,
            x: 1,
            sum: 0,
        }
    }

    /// One batch of 32 evaluations.
    fn batch(&mut self) {
        for _ in 0..32 {
            let out = math::path_out(black_box(self.x), black_box(&self.reserves));
            // The multiply by an odd constant keeps the checksum from
            // cancelling itself: a rotate-and-xor alone returns to 0 every
            // 396 batches on a one-pool path, as the input sizes wrap.
            self.sum = (self.sum.rotate_left(7) ^ (out as u64) ^ ((out >> 64) as u64))
                .wrapping_mul(CHECKSUM_MIX);
            self.x = self.x + self.x / 8 + 1;
            if self.x > self.cap {
                self.x = 1;
            }
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

    #[test]
    fn the_checksum_is_never_zero_whatever_the_number_of_batches() {
        // A timed burn runs as many batches as the host's speed allows, so
        // the checksum must not be 0 at any count: 100,000 batches cover the
        // input sizes' wrap (a few hundred batches) hundreds of times.
        let set = one_pool();
        let hops = [Hop {
            pool: 0,
            zero_for_one: true,
        }];
        let mut b = Burner::new(&set, &hops);
        for n in 1..=100_000u32 {
            b.batch();
            assert_ne!(b.sum, 0, "the checksum is 0 after {n} batches");
        }
    }

    #[test]
    fn a_fixed_work_burn_runs_its_batches_whatever_the_clock_and_only_on_its_thread() {
        let set = one_pool();
        let hops = [Hop {
            pool: 0,
            zero_for_one: true,
        }];
        set_work_mode(WorkMode::Fixed { batches_per_ms: 3 });
        // 2.5 ms at 3 batches per ms: 8 batches, the same checksum each time.
        let a = burn_cpu_us(2_500, &set, &hops);
        let mut b = Burner::new(&set, &hops);
        for _ in 0..8 {
            b.batch();
        }
        assert_eq!(a, b.sum);
        assert_eq!(burn_cpu_us(2_500, &set, &hops), a);
        assert_eq!(
            futures::executor::block_on(burn_cpu_us_async(2_500, &set, &hops)),
            a
        );
        let other = std::thread::spawn(work_mode).join().unwrap();
        assert_eq!(
            other,
            WorkMode::ThreadCpu,
            "another thread keeps the default"
        );
        set_work_mode(WorkMode::ThreadCpu);
        assert_eq!(work_mode(), WorkMode::ThreadCpu);
    }

    fn one_pool() -> PoolSet {
        PoolSet {
            pools: vec![Pool {
                id: 0,
                venue: Venue::UniswapV2,
                address: "0xA".into(),
                token0: "a".into(),
                token1: "b".into(),
                reserve0: 10u128.pow(21),
                reserve1: 10u128.pow(24),
            }],
        }
    }

    #[test]
    fn the_async_burn_spends_the_target() {
        let set = one_pool();
        let hops = [Hop {
            pool: 0,
            zero_for_one: true,
        }];
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let t0 = thread_cpu_us();
        let c = rt.block_on(burn_cpu_us_async(3_000, &set, &hops));
        assert!(thread_cpu_us() - t0 >= 3_000);
        assert_ne!(c, 0);
        assert_eq!(rt.block_on(burn_cpu_us_async(0, &set, &hops)), 0);
    }

    /// On a two-core serial fleet (one cycle thread) a 5 ms sim granted
    /// behind a 300 ms async burn completes before the burn does; with the
    /// blocking burn it completed after it.
    #[test]
    fn a_sim_granted_behind_an_async_burn_on_the_serial_binding_finishes_first() {
        use fleet::plan::{Plan, Profile};
        use fleet::receipt::UnitValue;
        use fleet::WorkerRole;
        use fleet_bindings::{boot, unit_body, BootOptions};
        use std::time::{Duration, Instant};

        let plan = Plan::resolve(2.0, Profile::Auto, &Default::default()).unwrap();
        assert_eq!(plan.seat_layout().cycle_threads, 1);
        let fleet = boot(&plan, BootOptions::for_plan(&plan)).unwrap();
        let h = fleet.handle();
        let burn = h
            .submit(
                WorkerRole::Resolve,
                None,
                unit_body(|_ctx| async {
                    let set = one_pool();
                    let hops = [Hop {
                        pool: 0,
                        zero_for_one: true,
                    }];
                    let c = burn_cpu_us_async(300_000, &set, &hops).await;
                    Box::new((Instant::now(), c)) as UnitValue
                }),
            )
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let sim = h
            .submit(
                WorkerRole::SimDriver,
                None,
                unit_body(|_ctx| async {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Box::new(Instant::now()) as UnitValue
                }),
            )
            .unwrap();
        let wait = |r: fleet::receipt::Receipt| {
            r.wait_timeout(Duration::from_secs(30))
                .expect("resolved")
                .expect("a value")
        };
        let sim_done = *wait(sim).downcast::<Instant>().unwrap();
        let (burn_done, _) = *wait(burn).downcast::<(Instant, u64)>().unwrap();
        assert!(sim_done < burn_done, "the sim waited for the whole burn");
        drop(h);
        fleet.shutdown().unwrap();
    }
}
