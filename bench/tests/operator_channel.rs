//! The posture operator channel over real loopback HTTP: a retune changes
//! the posture behaviour under the same throttle, invalid patches are
//! refused with their own error and change nothing, and the `fleet-lab
//! posture` verbs reach a live channel.

use fleet::posture::{
    Posture, PostureCause, PostureOwner, PosturePolicy, PostureRetuneError, ThrottleSample,
};
use fleet_bench::ops::http;
use fleet_bench::ops::operator::{self, ErrorReply, OperatorClientError, PostureView};
use serde_json::{json, Map, Value};
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;

fn start() -> (Arc<PostureOwner>, operator::OperatorServer, SocketAddr) {
    let owner = Arc::new(PostureOwner::new(PosturePolicy::default(), 4));
    let server = operator::serve("127.0.0.1:0".parse().unwrap(), Arc::clone(&owner)).unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0, "the real port is reported");
    (owner, server, addr)
}

fn patch(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

/// One throttle event and 10 ms throttled every second from `from_ms`, for
/// ten seconds: one event per 1 s enter window, 1 % duty over 5 s. Under
/// the default policy (2 events, 2 %) this never cordons. Returns the
/// first edge, if any.
fn steady_throttle(owner: &PostureOwner, from_ms: u64) -> Option<fleet::posture::Transition> {
    let sample = ThrottleSample {
        events: 1,
        throttled_us: 10_000,
    };
    (0..10)
        .filter_map(|i| owner.observe(sample, from_ms + i * 1000))
        .next()
}

#[test]
fn a_lower_duty_threshold_cordons_under_the_same_throttle() {
    let (owner, _server, addr) = start();
    assert_eq!(
        steady_throttle(&owner, 0),
        None,
        "default policy stays nominal"
    );
    assert_eq!(operator::get(addr).unwrap().posture, Posture::Nominal);

    let view = operator::set(addr, &patch(json!({"cordon_duty_percent": 0.5}))).unwrap();
    assert_eq!(view.policy.cordon_duty_percent, 0.5);
    assert_eq!(view.posture, Posture::Nominal, "a retune alone is no edge");
    let rest = PosturePolicy {
        cordon_duty_percent: 0.5,
        ..PosturePolicy::default()
    };
    assert_eq!(view.policy, rest, "the other five keys keep their value");

    let edge = steady_throttle(&owner, 10_000).expect("cordons under the same throttle");
    match edge.cause {
        PostureCause::ThrottleDuty { duty_percent, .. } => {
            assert!(duty_percent > 0.5 && duty_percent <= 2.0, "{duty_percent}")
        }
        other => panic!("expected a duty cause, got {other:?}"),
    }
    let now = operator::get(addr).unwrap();
    assert_eq!(now.posture, Posture::Cordoned);
    assert_eq!(now.counters.enters, 1);
}

#[test]
fn fewer_enter_events_cordon_under_the_same_throttle() {
    let (owner, _server, addr) = start();
    assert_eq!(steady_throttle(&owner, 0), None);
    let view = operator::set(addr, &patch(json!({"cordon_enter_events": 1}))).unwrap();
    assert_eq!(view.policy.cordon_enter_events, 1);
    let edge = steady_throttle(&owner, 10_000).expect("one event now cordons");
    assert!(matches!(
        edge.cause,
        PostureCause::ThrottleEvents { events: 1, .. }
    ));
    assert_eq!(edge.at_ms, 10_000, "at the first sample after the retune");
    assert_eq!(operator::get(addr).unwrap().posture, Posture::Cordoned);
}

#[test]
fn invalid_patches_are_refused_with_their_own_error_and_change_nothing() {
    let (owner, _server, addr) = start();
    let before = operator::get(addr).unwrap();
    let cases: Vec<(Value, u16, &str, String)> = vec![
        (
            json!({"cordon_duty_percent": 0}),
            422,
            "invalid_policy",
            PostureRetuneError::DutyPercentOutOfRange { value: 0.0 }.to_string(),
        ),
        (
            json!({"cordon_duty_percent": 100.5}),
            422,
            "invalid_policy",
            PostureRetuneError::DutyPercentOutOfRange { value: 100.5 }.to_string(),
        ),
        (
            json!({"cordon_enter_window_ms": 0}),
            422,
            "invalid_policy",
            PostureRetuneError::EnterWindowZero.to_string(),
        ),
        (
            json!({"cordon_duty_window_ms": 0}),
            422,
            "invalid_policy",
            PostureRetuneError::DutyWindowZero.to_string(),
        ),
        (
            json!({"cordon_exit_clean_ms": 0}),
            422,
            "invalid_policy",
            PostureRetuneError::ExitCleanZero.to_string(),
        ),
        (
            json!({"cordon_sim_intake_floor": 0}),
            422,
            "invalid_policy",
            PostureRetuneError::SimIntakeFloorZero.to_string(),
        ),
        (
            json!({"cordon_enter_events": 0}),
            422,
            "invalid_policy",
            PostureRetuneError::EnterEventsBelowOne { value: 0 }.to_string(),
        ),
        (
            // A valid key beside an invalid one: the whole patch is refused.
            json!({"cordon_enter_events": 5, "cordon_duty_percent": 0}),
            422,
            "invalid_policy",
            PostureRetuneError::DutyPercentOutOfRange { value: 0.0 }.to_string(),
        ),
        (
            json!({"cordon_duty": 3}),
            400,
            "unknown_key",
            operator::WireError::UnknownKey {
                key: "cordon_duty".into(),
            }
            .to_string(),
        ),
        (
            json!({}),
            400,
            "empty_patch",
            operator::WireError::EmptyPatch.to_string(),
        ),
    ];
    let mut messages = std::collections::HashSet::new();
    for (body, status, kind, message) in cases {
        match operator::set(addr, &patch(body.clone())) {
            Err(OperatorClientError::Refused {
                status: s,
                kind: k,
                message: m,
            }) => {
                assert_eq!((s, k.as_str()), (status, kind), "{body}");
                assert_eq!(m, message, "{body}");
                messages.insert(m);
            }
            other => panic!("{body}: expected a refusal, got {other:?}"),
        }
        assert_eq!(
            operator::get(addr).unwrap(),
            before,
            "{body} changed nothing"
        );
    }
    assert_eq!(messages.len(), 9, "each refusal has its own message");
    assert_eq!(owner.policy(), PosturePolicy::default());

    // Not JSON at all, over the raw wire.
    let r = http::request(addr, "POST", "/posture", Some("duty=3")).unwrap();
    assert_eq!(r.status, 400);
    let e: ErrorReply = serde_json::from_str(&r.body).unwrap();
    assert_eq!(e.kind, "not_json");
}

#[test]
fn a_null_floor_restores_the_default() {
    let (owner, _server, addr) = start();
    let v = operator::set(addr, &patch(json!({"cordon_sim_intake_floor": 3}))).unwrap();
    assert_eq!(v.policy.cordon_sim_intake_floor, Some(3));
    let v = operator::set(addr, &patch(json!({"cordon_sim_intake_floor": null}))).unwrap();
    assert_eq!(v.policy.cordon_sim_intake_floor, None);
    assert_eq!(owner.policy(), PosturePolicy::default());
}

#[test]
fn the_server_stops_on_drop() {
    let (_owner, server, addr) = start();
    operator::get(addr).unwrap();
    drop(server);
    assert!(matches!(
        operator::get(addr),
        Err(OperatorClientError::Http(_))
    ));
}

#[test]
fn the_posture_verbs_reach_a_live_channel() {
    let (owner, _server, addr) = start();
    let lab = env!("CARGO_BIN_EXE_fleet-lab");
    let addr_s = addr.to_string();

    let out = Command::new(lab)
        .args(["posture", "get", "--addr", &addr_s])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: PostureView = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.policy, PosturePolicy::default());

    let out = Command::new(lab)
        .args(["posture", "set", "--addr", &addr_s])
        .args([
            "--cordon-duty-percent",
            "3",
            "--cordon-exit-clean-ms",
            "4000",
        ])
        .args(["--cordon-sim-intake-floor", "none"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: PostureView = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.policy.cordon_duty_percent, 3.0);
    assert_eq!(v.policy.cordon_exit_clean_ms, 4000);
    assert_eq!(owner.policy(), v.policy);

    let out = Command::new(lab)
        .args(["posture", "set", "--addr", &addr_s])
        .args(["--cordon-duty-percent", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a refused patch exits non-zero");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = PostureRetuneError::DutyPercentOutOfRange { value: 0.0 }.to_string();
    assert!(stderr.contains(&want), "stderr: {stderr}");
    assert_eq!(owner.policy().cordon_duty_percent, 3.0, "nothing changed");
}
