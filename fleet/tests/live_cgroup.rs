//! On a host whose cpu cgroup controller is writable (cgroup v1 at
//! `/sys/fs/cgroup/cpu` as root), create a child cgroup with quota
//! 5000/100000 µs (0.05 core), run a spinning child process in it, and check that the
//! throttle sampler sees real throttle events and the posture reacts. The
//! cgroup is removed afterwards, also on failure (a drop guard). Elsewhere
//! the test prints why it is skipped and passes.

use fleet::posture::{Posture, PostureOwner, PosturePolicy, ThrottleSample};
use fleet::quota::{detect_live, ThrottleSampler};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Owns the test cgroup: kills the child, moves nothing left behind, removes the directory.
struct CgroupGuard {
    dir: PathBuf,
    parent: PathBuf,
    child: Option<Child>,
}

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = fs::write(self.parent.join("cgroup.procs"), child.id().to_string());
            let _ = child.kill();
            let _ = child.wait();
        }
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "warning: could not remove test cgroup {}",
            self.dir.display()
        );
    }
}

fn skip(why: &str) {
    eprintln!("SKIPPED live cgroup throttle test: {why}");
    println!("SKIPPED live cgroup throttle test: {why}");
}

#[test]
fn sampler_sees_real_throttling_in_a_small_quota_cgroup() {
    // 0.05 core: a spinning process exceeds it even on a host so busy that
    // it gets a small fraction of a core (a half-core quota was not reached
    // under a load average of 11 on 2 cores, so nothing was throttled).
    let report = detect_live();
    let Some(parent) = report.cgroup_dir.clone() else {
        return skip(&format!(
            "no cpu cgroup directory was detected ({})",
            report.reason
        ));
    };
    let v1 = parent.join("cpu.cfs_quota_us").exists();
    if !v1 && !parent.join("cpu.max").exists() {
        return skip(&format!(
            "{} has no cpu quota files (controller not enabled here)",
            parent.display()
        ));
    }
    let dir = parent.join(format!("fleet-throttle-test-{}", std::process::id()));
    if let Err(e) = fs::create_dir(&dir) {
        return skip(&format!(
            "cannot create {} ({e}); needs a writable cpu controller (root)",
            dir.display()
        ));
    }
    let mut guard = CgroupGuard {
        dir: dir.clone(),
        parent: parent.clone(),
        child: None,
    };
    if v1 {
        fs::write(dir.join("cpu.cfs_period_us"), "100000").unwrap();
        fs::write(dir.join("cpu.cfs_quota_us"), "5000").unwrap();
    } else {
        fs::write(dir.join("cpu.max"), "5000 100000").unwrap();
    }
    assert_eq!(
        fleet::quota::read_limit(
            &dir,
            if v1 {
                fleet::quota::CgroupVersion::V1
            } else {
                fleet::quota::CgroupVersion::V2
            }
        )
        .unwrap(),
        Some(0.05)
    );
    let mut sampler = ThrottleSampler::new(&dir).expect("cpu.stat of the new cgroup");
    let child = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn a spinning shell");
    let pid = child.id();
    guard.child = Some(child);
    fs::write(dir.join("cgroup.procs"), pid.to_string()).expect("move the child into the cgroup");
    assert!(
        procs(&dir).contains(&pid),
        "the child is in the test cgroup"
    );

    let owner = PostureOwner::new(PosturePolicy::default(), 4);
    let start = Instant::now();
    let (mut events, mut throttled_us) = (0u64, 0u64);
    let mut cordoned = false;
    // Poll until real throttling is seen (the host may be busy; allow 15 s).
    while start.elapsed() < Duration::from_secs(15) && !(events >= 2 && cordoned) {
        std::thread::sleep(Duration::from_millis(250));
        let r = sampler.sample().expect("sample cpu.stat");
        events += r.nr_throttled;
        throttled_us += r.throttled_us;
        let now_ms = start.elapsed().as_millis() as u64;
        if owner.observe(ThrottleSample::from(r), now_ms).is_some() {
            cordoned = owner.posture() == Posture::Cordoned;
        }
    }
    eprintln!(
        "live cgroup {}: {events} throttle events, {throttled_us} µs throttled",
        dir.display()
    );
    assert!(
        events >= 1,
        "a spinning process under a 0.05-core quota is throttled"
    );
    assert!(throttled_us > 0);
    assert!(
        cordoned,
        "real throttle samples drive the posture into the cordon"
    );
    assert!(owner.counters().enters >= 1);
    drop(guard);
    assert!(!dir.exists(), "the test cgroup is removed");
}

fn procs(dir: &Path) -> Vec<u32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}
