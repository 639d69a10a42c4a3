//! The cgroup and procfs readers: v2 `cpu.max`, v1 `cpu.cfs_quota_us` and
//! `cpu.cfs_period_us` (through real files), `/proc/self/cgroup`,
//! `mountinfo`, `cpu.stat`, CPU lists, and the lab's `/proc/stat` and
//! `/proc/self/stat` readers. The first byte picks the reader; any input is
//! read or refused with an error, never a panic.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fleet::quota::{
    cpus_allowed_list, parse_cpu_list, parse_cpu_max, parse_mountinfo, parse_proc_cgroup,
    read_limit, CgroupVersion, CpuStat,
};
use fleet_bench::probe::hostload::{busy_ticks, own_ticks};
use libfuzzer_sys::fuzz_target;

/// A directory for the v1 files, made once per fuzzing process.
fn v1_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("fleet-fuzz-cgroup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match which % 8 {
        0 => {
            if let Ok(Some(cores)) = parse_cpu_max(text, Path::new("cpu.max")) {
                assert!(cores > 0.0, "a set limit is positive: {cores}");
            }
        }
        1 => {
            let (quota, period) = text.split_once('\n').unwrap_or((text, "100000"));
            let dir = v1_dir();
            std::fs::write(dir.join("cpu.cfs_quota_us"), quota).unwrap();
            std::fs::write(dir.join("cpu.cfs_period_us"), period).unwrap();
            if let Ok(Some(cores)) = read_limit(dir, CgroupVersion::V1) {
                assert!(cores > 0.0, "a set limit is positive: {cores}");
            }
        }
        2 => {
            let _ = parse_proc_cgroup(text);
        }
        3 => {
            let _ = parse_mountinfo(text);
        }
        4 => {
            let _ = CpuStat::parse(text);
        }
        5 => {
            let _ = parse_cpu_list(text);
            let _ = cpus_allowed_list(text).map(parse_cpu_list);
        }
        6 => {
            let _ = busy_ticks(text, &[0, 1]);
        }
        _ => {
            let _ = own_ticks(text);
        }
    }
});
