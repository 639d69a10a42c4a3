//! The fleet config loader as the lab uses it: TOML text, then `NAME=VALUE`
//! environment lines after a NUL byte, then the command line's bounds. Any
//! input loads or is refused with a typed error, never a panic.
#![no_main]

use fleet::config::FleetConfig;
use fleet_bench::cmd::bounds::check_config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (toml, env) = text.split_once('\0').unwrap_or((text, ""));
    let env: Vec<(String, String)> = env
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Ok(cfg) = FleetConfig::load(toml, env) {
        let _ = check_config(&cfg, |key| format!("fuzz ({key})"));
        let _ = cfg.posture.cordoned_sim_cap(8);
    }
});
