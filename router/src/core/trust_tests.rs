//! Trust events folded straight from logged deposits (no leases), so each
//! comparison is exactly the one the test names. Source: `ROUTING.md` §3
//! Trust (adapter-disagreement clusters).

use std::collections::BTreeMap;

use super::fold::Logged;
use super::state::Observation;
use crate::api::{DepositRequest, Outcome, RegisterRequest};
use crate::config::{Facts, RouterConfig, SourceFact, TargetFact};
use crate::events::Event;
use crate::store::MemoryStore;
use crate::Router;

pub(super) const TARGETS: usize = 8;

pub(super) fn router() -> Router {
    let mut r = Router::open(RouterConfig::default(), Box::new(MemoryStore::new()), 0.0).unwrap();
    r.put_facts(&facts(), 0.0).unwrap();
    r
}

/// One source, `board`, with [`TARGETS`] targets `ad-0`, `ad-1`, ….
pub(super) fn facts() -> Facts {
    Facts {
        sources: vec![SourceFact {
            source: "board".into(),
            host: "jobs.example".into(),
            binding: "html-v1".into(),
            requires: vec![],
            change_timescale_s: Some(86_400.0),
            bucket: Some((100.0, 100.0)),
        }],
        targets: (0..TARGETS)
            .map(|i| TargetFact {
                target: format!("ad-{i}"),
                source: "board".into(),
                listing: false,
            })
            .collect(),
        ..Facts::default()
    }
}

/// Registers `id` (again, for an upgrade) running `version`.
fn register(r: &mut Router, secrets: &mut BTreeMap<String, String>, id: &str, version: &str) {
    let resp = r
        .register(
            &RegisterRequest {
                device_id: id.into(),
                archetype: "desktop".into(),
                capabilities: vec![],
                adapter_version: version.into(),
                registration_token: RouterConfig::default().registration_token,
                device_secret: secrets.get(id).cloned(),
            },
            0.0,
        )
        .unwrap();
    secrets.insert(id.into(), resp.device_secret);
}

/// Folds one successful observation of `target` by `device`.
pub(super) fn observe(
    r: &mut Router,
    seq: &mut u64,
    device: &str,
    version: &str,
    target: usize,
    hash: &str,
) {
    *seq += 1;
    let l = Logged {
        device: device.into(),
        archetype: "desktop".into(),
        t_s: *seq as f64,
        req: DepositRequest {
            device_id: device.into(),
            device_secret: String::new(),
            lease_id: format!("lease-{seq}"),
            target: format!("ad-{target}"),
            deposit_token: format!("token-{seq}"),
            receipt_revision: 0,
            adapter_id: "html".into(),
            adapter_version: version.into(),
            outcome: Outcome {
                ok: true,
                content_hash: Some(hash.into()),
                latency_ms: Some(500.0),
                error_class: None,
                retry_after_s: None,
                crawl_delay_s: None,
            },
            discovered: vec![],
        },
    };
    r.fold(&l, *seq);
}

/// A device that upgrades to a buggy adapter: its observations made before
/// the upgrade are the old version's. A buggy deposit that contradicts one
/// is a disagreement across versions, so the bug's cluster restores it,
/// and no device ends below its trust at the upgrade (the world has no
/// churn: every disagreement is the bug's). Keyed by the device's current
/// version instead, those disagreements read as same-version ones and the
/// earlier observer keeps the loss.
#[test]
fn an_observation_keeps_the_adapter_version_it_was_made_with() {
    let mut r = router();
    let mut secrets = BTreeMap::new();
    for id in ["a", "b", "c", "d"] {
        register(&mut r, &mut secrets, id, "1.0");
    }
    let mut seq = 0;
    // Before the upgrade: b then a read every target right.
    for _ in 0..3 {
        for k in 0..TARGETS {
            observe(&mut r, &mut seq, "b", "1.0", k, &format!("good-{k}"));
            observe(&mut r, &mut seq, "a", "1.0", k, &format!("good-{k}"));
        }
    }
    let before: BTreeMap<&str, f64> = ["a", "b", "c", "d"]
        .into_iter()
        .map(|id| (id, r.trust(id).unwrap()))
        .collect();
    // a and c upgrade; the new version reads the board wrong.
    register(&mut r, &mut secrets, "a", "2.0");
    register(&mut r, &mut secrets, "c", "2.0");
    r.drain_events();
    for k in 0..TARGETS {
        // c contradicts a's observation, which a made with 1.0.
        observe(&mut r, &mut seq, "c", "2.0", k, &format!("bad-{k}"));
        // d, still on 1.0, contradicts c.
        observe(&mut r, &mut seq, "d", "1.0", k, &format!("good-{k}"));
    }
    let fired: Vec<_> = r
        .drain_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::AdapterDisagreement {
                source, version, ..
            } => Some((source, version)),
            _ => None,
        })
        .collect();
    assert!(
        fired.iter().any(|(s, v)| s == "board" && v == "2.0"),
        "the new version's cluster is confirmed on the board: {fired:?}"
    );
    for (id, b) in before {
        let a = r.trust(id).unwrap();
        assert!(
            a >= b - 1e-12,
            "{id} ended at {a} below its {b} at the upgrade: the bug's moves were not all restored"
        );
    }
    let obs = &r.d.targets["ad-0"].observations;
    let kept: Vec<(&str, &str)> = obs
        .iter()
        .map(|o| (&*o.device, &*o.adapter_version))
        .collect();
    assert_eq!(kept, [("c", "2.0"), ("d", "1.0")]);
}

/// A target keeps the newest observation and the newest earlier one by
/// another device, in a vector with no spare room (one is held per
/// target: docs/router.md, "Where the memory goes"). Together they answer
/// the fold's two questions, the newest observation and the newest by a
/// device other than a given one, as the whole history would, through
/// runs of one device longer than the eight kept before.
#[test]
fn a_target_keeps_what_answers_the_fold_as_its_whole_history_would() {
    let mut r = router();
    let mut secrets = BTreeMap::new();
    for id in ["a", "b", "c"] {
        register(&mut r, &mut secrets, id, "1.0");
    }
    let mut seq = 0;
    let mut history: Vec<(String, String)> = Vec::new();
    let order = "aaaaaaaaaaabbacccccccccccbcabbbbbbbbbbbbaa";
    for (n, device) in order.chars().map(String::from).enumerate() {
        let hash = format!("h-{n}");
        observe(&mut r, &mut seq, &device, "1.0", 0, &hash);
        history.push((device, hash));
        let obs = &r.d.targets["ad-0"].observations;
        assert!(obs.len() <= super::state::KEEP_OBSERVATIONS);
        assert_eq!(obs.capacity(), obs.len(), "after {} observations", n + 1);
        assert_eq!(
            obs.last().map(|o| o.hash.to_string()),
            history.last().map(|(_, h)| h.clone())
        );
        for asker in ["a", "b", "c", "d"] {
            let kept = obs.iter().rev().find(|o| *o.device != *asker);
            let whole = history.iter().rev().find(|(d, _)| d != asker);
            assert_eq!(
                kept.map(|o| o.hash.to_string()),
                whole.map(|(_, h)| h.clone()),
                "the newest by another device than {asker} after {} observations",
                n + 1
            );
        }
    }
}

/// A row written when eight observations were kept is cut, as it is
/// read, to the two kept now: the newest and the newest by another device.
#[test]
fn observations_of_an_older_row_are_cut_to_the_two_kept() {
    use super::state::{Observation, TargetRec};
    let o = |device: &str, n: usize| Observation {
        device: device.into(),
        hash: format!("h-{n}").into(),
        t_s: n as f64,
        adapter: "html".into(),
        adapter_version: "1.0".into(),
    };
    let mut rec = TargetRec {
        source: "board".into(),
        listing: false,
        observations: Vec::new(),
        verification: Default::default(),
        last_attempt_s: None,
        due_s: 0.0,
        churn: Default::default(),
    };
    for (older, want) in [
        (vec![], vec![]),
        (vec![o("a", 0)], vec!["h-0"]),
        (vec![o("a", 0), o("a", 1)], vec!["h-1"]),
        (
            (0..8).map(|n| o(["a", "b"][n % 2], n)).collect(),
            vec!["h-6", "h-7"],
        ),
        (
            vec![o("b", 0), o("a", 1), o("c", 2), o("c", 3), o("c", 4)],
            vec!["h-1", "h-4"],
        ),
    ] {
        rec.observations = older;
        rec.keep_observations();
        let kept: Vec<String> = rec
            .observations
            .iter()
            .map(|o| o.hash.to_string())
            .collect();
        assert_eq!(kept, want);
        assert_eq!(rec.observations.capacity(), rec.observations.len());
    }
}

/// An observation's content hash is held once: its vote shares it.
#[test]
fn an_observation_and_its_vote_share_one_copy_of_the_hash() {
    let mut r = router();
    let mut secrets = BTreeMap::new();
    register(&mut r, &mut secrets, "a", "1.0");
    let mut seq = 0;
    observe(&mut r, &mut seq, "a", "1.0", 0, "h-shared");
    let t = &r.d.targets["ad-0"];
    let obs = t.observations.last().expect("observed");
    let votes = t.verification.votes();
    assert_eq!(votes.len(), 1);
    assert_eq!(&*votes[0].hash, "h-shared");
    assert!(
        std::sync::Arc::ptr_eq(&votes[0].hash, &obs.hash),
        "the vote holds its own copy of the hash"
    );
}

/// Observations by one device share its id, adapter and version with
/// each other, whatever target they observed: one copy each, held while
/// an observation holds it, and the JSON is plain strings as before.
#[test]
fn observations_share_their_device_adapter_and_version() {
    use std::sync::Arc;
    let mut r = router();
    let mut secrets = BTreeMap::new();
    register(&mut r, &mut secrets, "a", "1.0");
    let mut seq = 0;
    observe(&mut r, &mut seq, "a", "1.0", 0, "h-0");
    observe(&mut r, &mut seq, "a", "1.0", 1, "h-1");
    r.take_snapshot_now(1e6)
        .expect("a snapshot (it prunes the names)");
    let first = r.d.targets["ad-0"].observations[0].clone();
    let second = r.d.targets["ad-1"].observations[0].clone();
    assert!(Arc::ptr_eq(&first.device, &second.device), "one device id");
    assert!(
        Arc::ptr_eq(&first.adapter, &second.adapter),
        "one adapter id"
    );
    assert!(
        Arc::ptr_eq(&first.adapter_version, &second.adapter_version),
        "one version"
    );
    assert_eq!(
        (&*first.device, &*first.adapter, &*first.adapter_version),
        ("a", "html", "1.0")
    );
    let json = serde_json::to_value(&first).unwrap();
    assert_eq!(json["device"], "a");
    assert_eq!(json["adapter_version"], "1.0");
}

/// Rows written before observations carried their adapter still load: the
/// two fields read empty, and the device's current adapter stands in.
#[test]
fn an_observation_row_without_its_adapter_loads_with_empty_fields() {
    let o: Observation = serde_json::from_str(r#"{"device":"a","hash":"h","t_s":1.5}"#).unwrap();
    assert_eq!(&*o.adapter, "");
    assert_eq!(&*o.adapter_version, "");
    let back: Observation = serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
    assert_eq!(back, o);
}

/// `GET /v1/field` is open to anyone: a device whose trust state changes
/// shows there as a `device_state` event with its id withheld (the event
/// log, for the operator, keeps it).
#[test]
fn the_field_view_withholds_the_device_of_a_state_change() {
    let mut r = router();
    let mut secrets = BTreeMap::new();
    for id in ["a", "b", "liar-device-7"] {
        register(&mut r, &mut secrets, id, "1.0");
    }
    let mut seq = 0;
    let mut logged = Vec::new();
    for _ in 0..60 {
        for k in 0..TARGETS {
            observe(&mut r, &mut seq, "a", "1.0", k, &format!("good-{k}"));
            observe(&mut r, &mut seq, "b", "1.0", k, &format!("good-{k}"));
            let lie = format!("bad-{seq}");
            observe(&mut r, &mut seq, "liar-device-7", "1.0", k, &lie);
        }
        logged.extend(r.drain_events());
        if logged
            .iter()
            .any(|e| matches!(e, Event::DeviceState { device, .. } if device == "liar-device-7"))
        {
            break;
        }
    }
    assert!(
        logged
            .iter()
            .any(|e| matches!(e, Event::DeviceState { device, .. } if device == "liar-device-7")),
        "the liar's state changed, with its id in the log: {logged:?}"
    );
    let view = serde_json::to_string(&r.field_view()).unwrap();
    assert!(!view.contains("liar-device-7"), "{view}");
    assert!(
        r.field_view().recent_events.iter().any(|e| matches!(
            e,
            Event::DeviceState { device, .. } if device == crate::events::WITHHELD
        )),
        "the event is shown, its device withheld"
    );
}
