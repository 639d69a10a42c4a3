//! The posture under a real CPU quota: this process moves itself into a
//! fresh cgroup v1 `cpu` group limited to half a core, burns CPU on two
//! threads so the kernel throttles it, feeds the group's `cpu.stat` deltas
//! to a `PostureOwner` every 100 ms, and prints the transitions: Nominal →
//! Cordoned under throttling, a live retune of the exit rule, then Cordoned
//! → Nominal once the load stops. It cleans the group up on the way out.
//!
//! Needs a writable `/sys/fs/cgroup/cpu` (cgroup v1, root); elsewhere it
//! prints why it skipped and exits 0.
//!
//! `cargo run --release -p fleet-bindings --example posture_demo`

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleet::posture::{Posture, PostureOwner, PosturePolicy, PosturePolicyPatch, ThrottleSample};
use fleet::quota::ThrottleSampler;

const ROOT: &str = "/sys/fs/cgroup/cpu";

/// A cgroup v1 cpu group holding this process; restored and removed on drop.
struct Group {
    dir: PathBuf,
}

impl Group {
    fn create(quota_us: u64, period_us: u64) -> Result<Group, String> {
        let root = Path::new(ROOT);
        if !root.join("cgroup.procs").exists() {
            return Err(format!("{ROOT} is not a cgroup v1 cpu hierarchy"));
        }
        let dir = root.join(format!("fleet-posture-demo-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let group = Group { dir };
        let write = |file: &str, v: String| {
            std::fs::write(group.dir.join(file), v).map_err(|e| format!("cannot write {file}: {e}"))
        };
        write("cpu.cfs_period_us", period_us.to_string())?;
        write("cpu.cfs_quota_us", quota_us.to_string())?;
        write("cgroup.procs", std::process::id().to_string())?;
        Ok(group)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = std::fs::write(
            Path::new(ROOT).join("cgroup.procs"),
            std::process::id().to_string(),
        );
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Starts `n` threads that spin until `busy` is cleared.
fn burn(n: usize, busy: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<u64>> {
    (0..n)
        .map(|_| {
            let busy = busy.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while busy.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
                x
            })
        })
        .collect()
}

fn main() {
    let group = match Group::create(50_000, 100_000) {
        Ok(g) => g,
        Err(why) => {
            println!("posture demo skipped: {why} (needs a writable cgroup v1 cpu controller)");
            return;
        }
    };
    println!(
        "moved into {} with a quota of 0.5 core",
        group.dir.display()
    );
    let mut sampler = match ThrottleSampler::new(&group.dir) {
        Ok(s) => s,
        Err(e) => {
            println!("posture demo skipped: cannot read cpu.stat: {e}");
            return;
        }
    };
    let policy = PosturePolicy::default();
    println!(
        "policy: cordon after {} throttle events in {} ms, leave after {} ms clean",
        policy.cordon_enter_events, policy.cordon_enter_window_ms, policy.cordon_exit_clean_ms
    );
    let owner = Arc::new(PostureOwner::new(policy, 2));
    let busy = Arc::new(AtomicBool::new(true));
    let burners = burn(2, &busy);
    let start = Instant::now();
    let now_ms = || start.elapsed().as_millis() as u64;
    let mut entered = false;
    let mut left = false;
    let mut retuned = false;
    while start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
        let reading = match sampler.sample() {
            Ok(r) => r,
            Err(e) => {
                println!("cpu.stat read failed: {e}");
                break;
            }
        };
        let sample = ThrottleSample {
            events: reading.nr_throttled,
            throttled_us: reading.throttled_us,
        };
        if let Some(t) = owner.observe(sample, now_ms()) {
            println!(
                "{:>6} ms  {:?} -> {:?} ({:?})",
                t.at_ms, t.from, t.to, t.cause
            );
            match t.to {
                Posture::Cordoned => entered = true,
                Posture::Nominal => left = true,
            }
        }
        if entered && !retuned {
            // The operator's live retune: leave the cordon after 1 s clean.
            let patch = PosturePolicyPatch {
                cordon_exit_clean_ms: Some(1_000),
                ..Default::default()
            };
            match owner.retune(patch) {
                Ok(p) => println!(
                    "{:>6} ms  retuned: cordon_exit_clean_ms = {}",
                    now_ms(),
                    p.cordon_exit_clean_ms
                ),
                Err(e) => println!("retune refused: {e}"),
            }
            retuned = true;
            busy.store(false, Ordering::Relaxed);
            println!("{:>6} ms  load stopped", now_ms());
        }
        if left {
            break;
        }
    }
    busy.store(false, Ordering::Relaxed);
    for b in burners {
        let _ = b.join();
    }
    let c = owner.counters();
    println!("cordon entries {}, exits {}", c.enters, c.exits);
    drop(group);
    if !(entered && left) {
        eprintln!("expected Nominal -> Cordoned -> Nominal under a real quota");
        std::process::exit(1);
    }
}
