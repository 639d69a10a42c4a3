//! Quota detection on captured filesystem trees (`tests/fixtures/quota/`,
//! rebuilt by `make-trees.sh`). Each tree goes through the same code path as
//! the live system: `detect(root)`.

use fleet::budget::{BudgetOverrides, FleetBudget};
use fleet::quota::{detect, QuotaReport, QuotaSource};
use std::path::{Path, PathBuf};

fn tree(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/quota")
        .join(name)
}

fn run(name: &str) -> QuotaReport {
    let root = tree(name);
    assert!(root.is_dir(), "missing fixture {}", root.display());
    detect(&root)
}

#[test]
fn v1_combined_cpu_cpuacct_mount_gives_3() {
    let r = run("v1_cpu_cpuacct_3");
    assert_eq!(r.source, QuotaSource::CgroupV1, "{}", r.reason);
    assert_eq!(r.exact_cpus, Some(3.0));
    assert_eq!(r.affinity_cpus, 16);
    assert_eq!(r.effective_cpus(), 3.0);
    assert!(r
        .cgroup_dir
        .unwrap()
        .ends_with("sys/fs/cgroup/cpu,cpuacct/app"));
    assert!(r.limiting_dir.unwrap().ends_with("cpu,cpuacct/app"));
}

#[test]
fn v1_quota_minus_one_is_no_limit() {
    let r = run("v1_no_limit");
    assert_eq!(r.source, QuotaSource::Affinity, "{}", r.reason);
    assert_eq!(r.exact_cpus, None);
    assert_eq!(r.effective_cpus(), 16.0);
    assert!(r.effective_cpus() > 0.0);
}

#[test]
fn v1_container_mount_root_is_stripped() {
    let r = run("v1_container_root");
    assert_eq!(r.source, QuotaSource::CgroupV1, "{}", r.reason);
    assert_eq!(r.exact_cpus, Some(1.5));
    assert_eq!(r.effective_cpus(), 1.5);
    assert_eq!(r.schedulable_cpus(), 2);
}

#[test]
fn v2_max_is_no_limit() {
    let r = run("v2_max");
    assert_eq!(
        (r.source.clone(), r.exact_cpus),
        (QuotaSource::Affinity, None),
        "{}",
        r.reason
    );
    assert_eq!(r.effective_cpus(), 16.0);
}

#[test]
fn v2_missing_cpu_max_is_no_limit() {
    let r = run("v2_missing");
    assert_eq!(
        (r.source.clone(), r.exact_cpus),
        (QuotaSource::Affinity, None),
        "{}",
        r.reason
    );
    assert_eq!(r.effective_cpus(), 8.0);
}

#[test]
fn v2_tightest_ancestor_wins() {
    let r = run("v2_parent_4");
    assert_eq!(r.source, QuotaSource::CgroupV2, "{}", r.reason);
    assert_eq!(r.exact_cpus, Some(4.0));
    assert_eq!(r.effective_cpus(), 4.0);
    assert!(r.limiting_dir.unwrap().ends_with("bot.slice"));
    assert!(r.cgroup_dir.unwrap().ends_with("bot.slice/bot.service"));
}

#[test]
fn v2_fraction_is_published_exact_and_rounds_each_way() {
    let r = run("v2_fraction_8_5");
    assert_eq!(r.source, QuotaSource::CgroupV2);
    assert_eq!(r.exact_cpus, Some(8.5));
    assert_eq!(r.effective_cpus(), 8.5);
    assert_eq!(r.schedulable_cpus(), 9, "detection rounds up");
    let b = FleetBudget::derive(r.effective_cpus(), &BudgetOverrides::default()).unwrap();
    assert_eq!(b.integer_sum(), 8, "allocation rounds down");
    assert_eq!(b.fractional_cpus, 0.5);
}

#[test]
fn affinity_mask_tighter_than_quota() {
    let r = run("v2_affinity_tighter");
    assert_eq!(r.exact_cpus, Some(4.0));
    assert_eq!(r.affinity_cpus, 2);
    assert_eq!(r.affinity_list, vec![0, 2]);
    assert_eq!(r.effective_cpus(), 2.0);
    assert!(r.reason.contains("tighter"), "{}", r.reason);
}

#[test]
fn hybrid_net_cls_uses_v2_root() {
    let r = run("hybrid_net_cls");
    assert_eq!(r.source, QuotaSource::CgroupV2, "{}", r.reason);
    assert_eq!(r.exact_cpus, Some(3.0));
    assert!(r.cgroup_dir.unwrap().ends_with("sys/fs/cgroup/unified"));
}

#[test]
fn hybrid_systemd_uses_v2_init_scope() {
    let r = run("hybrid_systemd");
    assert_eq!(r.source, QuotaSource::CgroupV2, "{}", r.reason);
    assert_eq!(
        r.exact_cpus,
        Some(2.0),
        "the tighter of init.scope (2) and the root (6)"
    );
    assert!(r.cgroup_dir.unwrap().ends_with("unified/init.scope"));
}

#[test]
fn malformed_trees_are_quota_unknown_with_a_reason() {
    let cases = [
        ("bad_cgroup_garbage", "not id:controllers:path"),
        ("bad_cgroup_empty", "empty"),
        ("bad_mountinfo_garbage", "mountinfo"),
        ("bad_v1_quota_text", "not a number"),
        ("bad_v1_zero_period", "period is 0"),
        ("bad_v2_cpu_max_garbage", "is not a number"),
        ("bad_v2_cpu_max_empty", "is empty"),
        ("bad_v2_zero_period", "period is 0"),
    ];
    for (name, why) in cases {
        let r = run(name);
        assert!(r.source.is_unknown(), "{name}: {}", r.reason);
        assert_eq!(r.exact_cpus, None, "{name}");
        assert!(
            r.reason.starts_with("quota unknown"),
            "{name}: {}",
            r.reason
        );
        assert!(
            r.reason.contains(why),
            "{name}: reason {:?} should mention {why:?}",
            r.reason
        );
        assert_eq!(
            r.effective_cpus(),
            4.0,
            "{name}: the affinity mask still counts"
        );
    }
}

#[test]
fn quota_unknown_is_distinct_from_no_limit_with_its_reason() {
    let cases = [
        ("unknown_v2_no_cgroup2_mount", "no cgroup2 mount is visible"),
        (
            "unknown_v1_outside_mount_root",
            "is not under the root /docker/abc",
        ),
        ("unknown_v2_missing_dir", "does not exist"),
    ];
    for (name, why) in cases {
        let r = run(name);
        match &r.source {
            QuotaSource::Unknown { reason } => {
                assert!(
                    reason.contains(why),
                    "{name}: {reason:?} should say {why:?}"
                )
            }
            other => panic!(
                "{name}: expected quota unknown, got {other:?}: {}",
                r.reason
            ),
        }
        assert_eq!(r.exact_cpus, None, "{name}");
        assert_eq!(r.limiting_dir, None, "{name}");
        assert!(
            r.reason.starts_with("quota unknown"),
            "{name}: {}",
            r.reason
        );
        assert_eq!(
            r.effective_cpus(),
            8.0,
            "{name}: the affinity mask decides for now"
        );
    }
    // No limit is a known answer, not unknown.
    let none = run("v2_max");
    assert_eq!(none.source, QuotaSource::Affinity);
    assert!(!none.source.is_unknown());
}

#[test]
fn the_quota_source_serializes_as_its_name_and_reads_back() {
    let unknown = QuotaSource::Unknown {
        reason: "why".into(),
    };
    assert_eq!(serde_json::to_string(&unknown).unwrap(), "\"unknown\"");
    assert_eq!(
        serde_json::to_string(&QuotaSource::CgroupV2).unwrap(),
        "\"cgroup_v2\""
    );
    let back: QuotaSource = serde_json::from_str("\"unknown\"").unwrap();
    assert!(back.is_unknown());
    assert!(serde_json::from_str::<QuotaSource>("\"bogus\"").is_err());
}

#[test]
fn a_missing_root_is_unknown_not_a_panic() {
    let r = detect(Path::new("/nonexistent/fleet-quota-root"));
    assert!(r.source.is_unknown(), "{:?}", r.source);
    assert!(r.affinity_cpus >= 1, "falls back to this process's CPUs");
    assert!(r.reason.contains("cannot read"), "{}", r.reason);
}

#[test]
fn sampler_reads_fixture_cpu_stat_of_both_versions() {
    use fleet::quota::CpuStat;
    let v1 = CpuStat::read(&run("v1_cpu_cpuacct_3").cgroup_dir.unwrap()).unwrap();
    assert_eq!(
        (v1.nr_periods, v1.nr_throttled, v1.throttled_us),
        (40, 3, 12_000)
    );
    let v2 = CpuStat::read(&run("v2_parent_4").cgroup_dir.unwrap()).unwrap();
    assert_eq!(
        (v2.nr_periods, v2.nr_throttled, v2.throttled_us),
        (10, 2, 5_000)
    );
}

/// Copies a fixture tree into a fresh temporary directory (so a test can
/// advance its counters).
fn scratch_copy(name: &str) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let dest = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &dest);
            } else {
                std::fs::copy(entry.path(), &dest).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    copy(&tree(name), dir.path());
    dir
}

#[test]
fn throttling_is_counted_in_the_limiting_parent_on_both_versions() {
    use fleet::quota::ThrottleSampler;
    let cases = [
        (
            "throttle_v2_parent_limited",
            "sys/fs/cgroup/bot.slice",
            "usage_usec 1900\nnr_periods 80\nnr_throttled 12\nthrottled_usec 30000\n",
            Some(("cpu.stat.local", "throttled_usec 10000\n", 6000)),
        ),
        (
            "throttle_v1_parent_limited",
            "sys/fs/cgroup/cpu,cpuacct/bot",
            "nr_periods 80\nnr_throttled 12\nthrottled_time 30000000\n",
            None,
        ),
    ];
    for (name, parent, later, local) in cases {
        let root = scratch_copy(name);
        let r = detect(root.path());
        let parent_dir = root.path().join(parent);
        assert_eq!(r.exact_cpus, Some(2.0), "{name}: {}", r.reason);
        assert_eq!(
            r.limiting_dir.as_deref(),
            Some(parent_dir.as_path()),
            "{name}"
        );
        assert_eq!(r.throttle_dir(), Some(parent_dir.as_path()), "{name}");
        let leaf = r.cgroup_dir.clone().unwrap();

        // The leaf alone reports no throttle events; the limiting parent reports 5.
        assert_eq!(
            fleet::quota::CpuStat::read(&leaf).unwrap().nr_throttled,
            0,
            "{name}"
        );
        let mut at_leaf = ThrottleSampler::new(&leaf).unwrap();
        let mut sampler = ThrottleSampler::for_report(&r).unwrap();
        assert_eq!(sampler.dir(), parent_dir.as_path(), "{name}");
        assert_eq!(sampler.sample().unwrap().total.nr_throttled, 5, "{name}");

        // Seven more throttled periods land on the parent (and, on v2, 6 ms
        // more of this leaf's own throttled time in cpu.stat.local).
        std::fs::write(parent_dir.join("cpu.stat"), later).unwrap();
        if let Some((file, text, _)) = local {
            std::fs::write(leaf.join(file), text).unwrap();
        }
        let leaf_view = at_leaf.sample().unwrap();
        assert_eq!(leaf_view.nr_throttled, 0, "{name}: the leaf sees nothing");
        let seen = sampler.sample().unwrap();
        assert_eq!(
            (seen.nr_throttled, seen.throttled_us),
            (7, 21_000),
            "{name}"
        );
        let sample = fleet::posture::ThrottleSample::from(seen);
        assert_eq!(sample.events, 7, "{name}");
        match local {
            Some((_, _, us)) => {
                assert_eq!(sampler.local_dir(), Some(leaf.as_path()), "{name}");
                assert_eq!(seen.local_throttled_us, Some(us), "{name}");
                assert_eq!(sample.throttled_us, us, "{name}: the leaf's own time wins");
            }
            None => {
                assert_eq!(seen.local_throttled_us, None, "{name}");
                assert_eq!(sample.throttled_us, 21_000, "{name}");
            }
        }
    }
}

#[test]
fn a_malformed_cpu_stat_local_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        fleet::quota::read_local_throttled_us(dir.path()).unwrap(),
        None
    );
    for bad in ["", "throttled_usec x\n", "other 3\n"] {
        std::fs::write(dir.path().join("cpu.stat.local"), bad).unwrap();
        assert!(
            fleet::quota::read_local_throttled_us(dir.path()).is_err(),
            "{bad:?}"
        );
    }
}
