//! The host's own work, run beside every contender: a latency-critical
//! periodic probe and a calibrated reserve load.
//!
//! The fleet's budget reserves one core for the process's other work (the
//! bridge, the block pump, telemetry: `DESIGN.md` §3 "Budget"). A
//! comparison that leaves that work out measures only half of what the
//! fleet is for, so every run carries it, inside the same process and
//! cgroup, for every contender alike:
//!
//! - **the probe** (`lab-cotenant-probe`): wakes every
//!   [`PROBE_PERIOD`] on an absolute `CLOCK_MONOTONIC` deadline with a 1 µs
//!   timer slack and records how late it woke, the way `cyclictest`
//!   measures scheduling latency. A wake more than one period late also
//!   stands for the ticks it missed: each is recorded with the lateness it
//!   would have had (the wake's lateness less one period per tick), so a
//!   long stall weighs in the percentiles as the many late ticks it was,
//!   and is counted in [`CoTenantFigures::probe_missed_ticks`].
//! - **the reserve load** (`lab-cotenant-reserve`): at each cycle start a
//!   CPU burst of [`RESERVE_BURST_US`] × scale (20 ms per cycle at scale 1:
//!   2 % of one core at the corpus's one cycle per second) on real
//!   arithmetic; its completion lateness is (completion − trigger) − the
//!   burst's duration measured alone before the run (the fastest of three).
//!
//! Both threads start before the run's thread sampler (they are the lab's,
//! named `lab-…`, and left out of the contender's thread counts) and their
//! CPU is subtracted from the contender's. [`CoTenantMode::Probe`] runs the
//! probe alone, so a verdict never rests on how the reserve load was sized.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use fleet_workloads::pools::PoolSet;
use fleet_workloads::Hop;

/// How often the probe wakes.
pub const PROBE_PERIOD: Duration = Duration::from_millis(1);

/// CPU of one reserve burst at scale 1, µs (one per cycle).
pub const RESERVE_BURST_US: u64 = 20_000;

/// Which of the host's own work runs beside the contender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CoTenantMode {
    /// The probe and the reserve load (the default).
    #[default]
    On,
    /// The 1 ms probe only.
    Probe,
    /// Neither.
    Off,
}

impl CoTenantMode {
    /// The flag value: `on`, `probe`, `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            CoTenantMode::On => "on",
            CoTenantMode::Probe => "probe",
            CoTenantMode::Off => "off",
        }
    }
}

impl std::str::FromStr for CoTenantMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "on" => Ok(CoTenantMode::On),
            "probe" => Ok(CoTenantMode::Probe),
            "off" => Ok(CoTenantMode::Off),
            other => Err(format!(
                "'{other}' is not a co-tenant mode: give on (probe and reserve load), probe (the 1 ms probe only) or off"
            )),
        }
    }
}

/// Lateness percentiles of one co-tenant task, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    /// Median, µs.
    pub p50: f64,
    /// 99th percentile, µs.
    pub p99: f64,
    /// 99.9th percentile, µs.
    pub p999: f64,
    /// Largest, µs.
    pub max: f64,
    /// Samples recorded.
    pub count: u64,
}

impl Lateness {
    fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Lateness::default();
        }
        Lateness {
            p50: h.value_at_quantile(0.5) as f64,
            p99: h.value_at_quantile(0.99) as f64,
            p999: h.value_at_quantile(0.999) as f64,
            max: h.max() as f64,
            count: h.len(),
        }
    }
}

/// What the co-tenant measured over one run.
#[derive(Debug, Clone, Default)]
pub struct CoTenantFigures {
    /// The probe's wake-up lateness (`None` with the co-tenant off).
    pub probe: Option<Lateness>,
    /// The reserve bursts' completion lateness (`None` unless on).
    pub reserve: Option<Lateness>,
    /// Probe ticks a wake more than a period late stood for (recorded in
    /// the histogram with the lateness each would have had).
    pub probe_missed_ticks: u64,
    /// The reserve burst's CPU, µs (0 unless on).
    pub reserve_burst_us: u64,
    /// CPU the co-tenant threads used, seconds (not the contender's).
    pub cpu_seconds: f64,
}

/// What the probe thread returns: its histogram (µs late), the ticks it
/// skipped and its CPU, seconds.
type ProbeResult = (Histogram<u64>, u64, f64);

/// What the reserve thread returns: its histogram (µs late) and its CPU,
/// seconds.
type ReserveResult = (Histogram<u64>, f64);

/// The running co-tenant of one run.
pub struct CoTenant {
    mode: CoTenantMode,
    stop: Arc<AtomicBool>,
    probe: Option<JoinHandle<ProbeResult>>,
    reserve: Option<(Sender<Instant>, JoinHandle<ReserveResult>)>,
    burst_us: u64,
}

/// Triggers one reserve burst (cloneable into the replay's cycle-start hook).
#[derive(Clone)]
pub struct ReserveTrigger(Option<Sender<Instant>>);

impl ReserveTrigger {
    /// A cycle starts: queue one burst (a no-op without a reserve load).
    pub fn cycle_start(&self) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(Instant::now());
        }
    }
}

fn histogram() -> Histogram<u64> {
    // 1 µs .. 60 s, 3 significant digits; larger values saturate.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("static bounds")
}

fn record(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.max(1));
}

impl CoTenant {
    /// Starts the co-tenant for `mode`; the reserve burst is
    /// [`RESERVE_BURST_US`] × `scale`, burnt on `pools`/`hops` (any path of
    /// the corpus). Errors: the OS refused a thread.
    pub fn start(
        mode: CoTenantMode,
        scale: f64,
        pools: Arc<PoolSet>,
        hops: Vec<Hop>,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut me = CoTenant {
            mode,
            stop: stop.clone(),
            probe: None,
            reserve: None,
            burst_us: 0,
        };
        if mode == CoTenantMode::Off {
            return Ok(me);
        }
        let flag = stop.clone();
        me.probe = Some(
            std::thread::Builder::new()
                .name("lab-cotenant-probe".into())
                .spawn(move || probe_loop(&flag))?,
        );
        if mode == CoTenantMode::On {
            let burst_us = ((RESERVE_BURST_US as f64) * scale).round().max(1.0) as u64;
            me.burst_us = burst_us;
            let (tx, rx) = crossbeam_channel::unbounded();
            let flag = stop.clone();
            let join = std::thread::Builder::new()
                .name("lab-cotenant-reserve".into())
                .spawn(move || reserve_loop(rx, &flag, burst_us, &pools, &hops))?;
            me.reserve = Some((tx, join));
        }
        Ok(me)
    }

    /// The handle the cycle-start hook fires.
    pub fn trigger(&self) -> ReserveTrigger {
        ReserveTrigger(self.reserve.as_ref().map(|(tx, _)| tx.clone()))
    }

    /// The mode it runs in.
    pub fn mode(&self) -> CoTenantMode {
        self.mode
    }

    /// Stops both tasks (a queued burst still runs) and returns the figures.
    pub fn finish(mut self) -> CoTenantFigures {
        self.stop.store(true, Ordering::Relaxed);
        let mut f = CoTenantFigures {
            reserve_burst_us: self.burst_us,
            ..Default::default()
        };
        if let Some(j) = self.probe.take() {
            if let Ok((h, missed, cpu)) = j.join() {
                f.probe = Some(Lateness::of(&h));
                f.probe_missed_ticks = missed;
                f.cpu_seconds += cpu;
            }
        }
        if let Some((tx, j)) = self.reserve.take() {
            drop(tx);
            if let Ok((h, cpu)) = j.join() {
                f.reserve = Some(Lateness::of(&h));
                f.cpu_seconds += cpu;
            }
        }
        f
    }
}

impl Drop for CoTenant {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until `at_ns` on `CLOCK_MONOTONIC` (absolute; retried on EINTR).
fn sleep_until_ns(at_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is valid; a null remainder is allowed with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

fn thread_cpu_seconds() -> f64 {
    fleet_workloads::cpu::thread_cpu_us() as f64 / 1e6
}

/// The probe: returns its histogram (µs late), the ticks it skipped and its
/// own CPU, seconds.
fn probe_loop(stop: &AtomicBool) -> ProbeResult {
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000u64, 0, 0, 0) };
    let period = PROBE_PERIOD.as_nanos() as u64;
    let mut h = histogram();
    let mut missed = 0u64;
    let mut next = monotonic_ns() + period;
    while !stop.load(Ordering::Relaxed) {
        sleep_until_ns(next);
        let woke = monotonic_ns();
        let late_ns = woke.saturating_sub(next);
        record(&mut h, late_ns / 1_000);
        let skipped = late_ns / period;
        // The ticks this wake stood for, each as late as it would have been.
        for k in 1..=skipped {
            record(&mut h, (late_ns - k * period) / 1_000);
        }
        missed += skipped;
        next += (skipped + 1) * period;
    }
    (h, missed, thread_cpu_seconds())
}

/// The reserve load: one burst per trigger until `stop` (then the bursts
/// already queued still run; a trigger handle kept alive does not hold it
/// up); returns its histogram (µs late) and its own CPU, seconds.
fn reserve_loop(
    rx: Receiver<Instant>,
    stop: &AtomicBool,
    burst_us: u64,
    pools: &PoolSet,
    hops: &[Hop],
) -> ReserveResult {
    let burst = || fleet_workloads::cpu::burn_cpu_us(burst_us, pools, hops);
    // The burst's duration alone: the fastest of three, before the run.
    let nominal = (0..3)
        .map(|_| {
            let t = Instant::now();
            burst();
            t.elapsed()
        })
        .min()
        .unwrap_or_default();
    let mut h = histogram();
    let cpu0 = thread_cpu_seconds();
    let mut one = |triggered: Instant| {
        burst();
        let late = triggered.elapsed().saturating_sub(nominal);
        record(&mut h, late.as_micros() as u64);
    };
    loop {
        match rx.recv_timeout(Duration::from_millis(5)) {
            Ok(triggered) => one(triggered),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if stop.load(Ordering::Relaxed) {
                    while let Ok(triggered) = rx.try_recv() {
                        one(triggered);
                    }
                    break;
                }
            }
        }
    }
    (h, thread_cpu_seconds() - cpu0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modes_parse_and_a_bad_one_says_what_to_give() {
        for m in [CoTenantMode::On, CoTenantMode::Probe, CoTenantMode::Off] {
            assert_eq!(m.as_str().parse::<CoTenantMode>(), Ok(m));
        }
        let e = "maybe".parse::<CoTenantMode>().unwrap_err();
        assert!(
            e.contains("on") && e.contains("probe") && e.contains("off"),
            "{e}"
        );
    }

    #[test]
    fn the_probe_records_about_one_wake_per_period_and_off_records_nothing() {
        let corpus = fleet_workloads::Corpus::load(crate::cmd::corpus::default_corpus_path())
            .expect("the shipped corpus");
        let path = corpus.cycles[0].paths[0].hops.clone();
        let pools = Arc::new(corpus.pools.clone());
        let c = CoTenant::start(CoTenantMode::On, 0.01, pools.clone(), path.clone()).unwrap();
        let t = c.trigger();
        for _ in 0..5 {
            t.cycle_start();
            std::thread::sleep(Duration::from_millis(20));
        }
        let f = c.finish();
        let probe = f.probe.expect("probe figures");
        // 100 ms of 1 ms ticks: every tick is either recorded or counted as
        // skipped.
        assert!(probe.count + f.probe_missed_ticks >= 50, "{probe:?}");
        assert!(probe.p50 <= probe.p99 && probe.p99 <= probe.max);
        assert_eq!(f.reserve.expect("reserve figures").count, 5);
        assert_eq!(f.reserve_burst_us, 200);
        assert!(f.cpu_seconds > 0.0);

        let off = CoTenant::start(CoTenantMode::Off, 0.01, pools, path).unwrap();
        off.trigger().cycle_start();
        let f = off.finish();
        assert!(f.probe.is_none() && f.reserve.is_none());
    }
}
