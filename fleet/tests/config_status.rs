//! Typed config with environment overrides, and `runtime_status()`.
//! Source: `DESIGN.md` §3 "Config", "Census and status"; seed 000 §2, §14.

use fleet::census::{Census, CensusBinding};
use fleet::config::{ConfigError, FleetConfig, ENV_KEYS};
use fleet::plan::{Plan, Profile};
use fleet::posture::PostureRetuneError;
use fleet::quota::{QuotaReport, QuotaSource};
use fleet::status::{projected_status, runtime_status};

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn empty_config_is_the_defaults() {
    let c = FleetConfig::load("", env(&[])).unwrap();
    assert_eq!(c, FleetConfig::default());
    assert_eq!((c.pump.backstop_interval_ms, c.pump.stall_ticks), (250, 8));
    assert_eq!(c.profile, Profile::Auto);
}

#[test]
fn full_file_parses() {
    let text = r#"
profile = "serial"
[budget]
ambient_cpus = 3
solver_cpus = 4
[posture]
cordon_enter_events = 4
cordon_sim_intake_floor = 1
[pump]
backstop_interval_ms = 100
stall_ticks = 3
"#;
    let c = FleetConfig::load(text, env(&[])).unwrap();
    assert_eq!(c.profile, Profile::Serial);
    assert_eq!(
        (
            c.budget.ambient_cpus,
            c.budget.solver_cpus,
            c.budget.reserve_cpus
        ),
        (Some(3), Some(4), None)
    );
    assert_eq!(
        (
            c.posture.cordon_enter_events,
            c.posture.cordon_sim_intake_floor
        ),
        (4, Some(1))
    );
    assert_eq!(
        c.posture.cordon_enter_window_ms, 1000,
        "unset keys keep their defaults"
    );
    assert_eq!((c.pump.backstop_interval_ms, c.pump.stall_ticks), (100, 3));
}

#[test]
fn unknown_keys_are_named() {
    for (text, key) in [
        ("profle = \"auto\"", "profle"),
        ("[budget]\nsolver_cpu = 3", "solver_cpu"),
        ("[posture]\ncordon_exit_ms = 5", "cordon_exit_ms"),
        ("[pump]\nstall = 3", "stall"),
        ("[fleet]\nprofile = \"auto\"", "fleet"),
    ] {
        let e = FleetConfig::load(text, env(&[])).unwrap_err();
        assert!(matches!(e, ConfigError::Parse(_)), "{text}: {e}");
        assert!(e.to_string().contains(key), "{text}: {e}");
    }
}

#[test]
fn the_stance_switch_is_retired() {
    for e in [
        FleetConfig::load("[fleet]\nstance = \"fleet\"", env(&[])).unwrap_err(),
        FleetConfig::load("", env(&[("DEGENBOT_FLEET", "legacy")])).unwrap_err(),
        FleetConfig::load("", env(&[("DEGENBOT_FLEET", "")])).unwrap_err(),
    ] {
        assert!(matches!(e, ConfigError::StanceRetired { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("stance switch is retired") && msg.contains("fleet is the only stance"),
            "{msg}"
        );
    }
}

#[test]
fn env_overrides_win_and_are_checked() {
    let c = FleetConfig::load(
        "[budget]\nambient_cpus = 3\n[posture]\ncordon_sim_intake_floor = 2",
        env(&[
            ("DEGENBOT_IO_WORKERS", "1"),
            ("DEGENBOT_SOLVE_CPUS", "2"),
            ("DEGENBOT_PROFILE", "pinned"),
            ("DEGENBOT_CORDON_DUTY_PERCENT", "5.5"),
            ("DEGENBOT_CORDON_SIM_INTAKE_FLOOR", "unset"),
            ("DEGENBOT_STALL_TICKS", "12"),
            ("DEGENBOT_SOMETHING_ELSE", "ignored"),
        ]),
    )
    .unwrap();
    assert_eq!(
        (c.budget.ambient_cpus, c.budget.solver_cpus),
        (Some(1), Some(2))
    );
    assert_eq!(c.profile, Profile::Pinned);
    assert_eq!(c.posture.cordon_duty_percent, 5.5);
    assert_eq!(c.posture.cordon_sim_intake_floor, None);
    assert_eq!(c.pump.stall_ticks, 12);
    let e = FleetConfig::load("", env(&[("DEGENBOT_SOLVE_CPUS", "three")])).unwrap_err();
    assert!(
        matches!(&e, ConfigError::BadEnv { name, .. } if name == "DEGENBOT_SOLVE_CPUS"),
        "{e}"
    );
    let e = FleetConfig::load("", env(&[("DEGENBOT_CORDON_EXIT_CLEAN_MS", "0")])).unwrap_err();
    assert_eq!(e, ConfigError::Posture(PostureRetuneError::ExitCleanZero));
    let e = FleetConfig::load("[pump]\nbackstop_interval_ms = 0", env(&[])).unwrap_err();
    assert_eq!(
        e,
        ConfigError::PumpZero {
            key: "backstop_interval_ms"
        }
    );
    // Every documented variable is handled (a bad value is rejected by name).
    for (name, _) in ENV_KEYS {
        if name == "DEGENBOT_CORDON_SIM_INTAKE_FLOOR" {
            continue;
        }
        let e = FleetConfig::load("", env(&[(name, "not-a-value")])).unwrap_err();
        assert!(e.to_string().contains(name), "{name}: {e}");
    }
}

fn report(source: QuotaSource, exact: Option<f64>, affinity: u32) -> QuotaReport {
    QuotaReport {
        exact_cpus: exact,
        affinity_cpus: affinity,
        source,
        reason: "test".into(),
        cgroup_dir: None,
        limiting_dir: None,
        affinity_list: (0..affinity as usize).collect(),
    }
}

#[test]
fn status_json_has_the_script_keys() {
    let plan = Plan::resolve(8.0, Profile::Auto, &Default::default()).unwrap();
    let st = runtime_status(&plan, &report(QuotaSource::CgroupV2, Some(8.0), 16), None);
    let v = serde_json::to_value(&st).unwrap();
    assert_eq!(v["fleet_booted"], false);
    assert_eq!(v["plan"]["profile"], "auto");
    assert_eq!(v["plan"]["binding"], "pinned");
    assert_eq!(v["plan"]["oversubscribed"], false);
    assert!(v["plan"]["tier_refused"].is_null());
    assert_eq!(v["plan"]["quota_cpus"], 8.0);
    for (k, want) in [
        ("reserve_cpus", 1),
        ("ambient_cpus", 2),
        ("resolve_cpus", 1),
        ("merge_cpus", 1),
        ("solver_cpus", 3),
        ("solver_pins", 6),
        ("sim_slot_cap", 4),
    ] {
        assert_eq!(v["budget"][k], want, "budget.{k}");
    }
    assert!(v["census"].as_array().unwrap().len() >= 16);
    assert_eq!(v["quota"]["exact_cpus"], 8.0);
    assert_eq!(v["quota"]["affinity_cpus"], 16);
    assert_eq!(v["quota"]["source"], "cgroup_v2");
    assert_eq!(v["quota"]["reason"], "test");
    assert!(v["quota"]["unknown_reason"].is_null(), "a known quota");
}

#[test]
fn status_reports_registered_rows_once_booted() {
    let plan = Plan::resolve(4.0, Profile::Auto, &Default::default()).unwrap();
    let census = Census::new();
    for row in plan.census_projection().into_iter().take(3) {
        census.register(row);
    }
    let unknown = QuotaSource::Unknown {
        reason: "no cgroup2 mount is visible".into(),
    };
    let st = runtime_status(&plan, &report(unknown, None, 4), Some(&census));
    assert!(st.fleet_booted);
    assert_eq!(st.census.len(), 3);
    let v = serde_json::to_value(&st).unwrap();
    assert!(v["quota"]["exact_cpus"].is_null());
    assert_eq!(v["quota"]["source"], "unknown");
    assert_eq!(v["quota"]["unknown_reason"], "no cgroup2 mount is visible");
    assert_eq!(
        v["plan"]["tier_refused"]["kind"],
        "quota_too_small_for_pinned_roles"
    );
    assert_eq!(v["plan"]["binding"], "serial");
    assert!(st.census.iter().any(|r| r.binding == CensusBinding::Shared));
}

#[test]
fn projection_uses_the_detected_quota() {
    let st = projected_status(
        &report(QuotaSource::CgroupV1, Some(6.5), 8),
        &Default::default(),
    )
    .unwrap();
    assert!(!st.fleet_booted);
    assert_eq!(st.plan.quota_cpus, 6.5);
    assert_eq!(st.budget.budget.solver_cpus, 2);
    assert!(projected_status(
        &report(QuotaSource::CgroupV1, Some(1.5), 8),
        &Default::default()
    )
    .is_err());
}
