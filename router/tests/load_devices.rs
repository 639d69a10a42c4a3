//! The load generator's devices against a real routerd: a device whose
//! liveness lapsed is told so and resumes its identity by registering
//! again with its secret, as the load's client threads and fleet devices
//! do (docs/router.md, "Load"). On a manual clock, so the lapse is an
//! advance, not a wait.

use serde_json::json;

use crate::support::routerd::{Routerd, CLOCK_START_S, TOKEN};
use router::load::{lapsed, population_facts, registration_body, resume};

#[test]
fn a_lapsed_load_device_registers_again_with_its_secret_and_leases() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &["--lease-ttl-s", "60"]);
    let facts = serde_json::to_string(&population_facts(20, 2)).unwrap();
    assert_eq!(r.send("PUT", "/v1/facts", &facts, true).0, 200);
    let (s, v) = r.post("/v1/register", &registration_body(3, TOKEN, None));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["device_id"], "load-dev-3");
    let secret = v["device_secret"].as_str().unwrap().to_string();
    let lease = json!({"device_id": "load-dev-3", "device_secret": secret, "max_items": 1});
    let (s, v) = r.post("/v1/lease", &lease);
    assert!(
        s == 200 && !lapsed(s, &v),
        "live right after registering: {s} {v}"
    );

    // Past the TTL with no lease in between: no longer live.
    r.advance(61.0);
    let (s, v) = r.post("/v1/lease", &lease);
    assert!(lapsed(s, &v), "lapsed after the TTL: {s} {v}");
    // Any other refusal is not a lapse.
    let (s, v) = r.post(
        "/v1/lease",
        &json!({"device_id": "load-dev-3", "device_secret": "x", "max_items": 1}),
    );
    assert!(!lapsed(s, &v), "a wrong secret is not a lapse: {s} {v}");

    let agent = router::load::agent();
    let (s, v) = resume(&agent, &r.base, TOKEN, 3, &secret).unwrap();
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["device_secret"].as_str(),
        Some(secret.as_str()),
        "the same identity"
    );
    assert_eq!(v["state"], "normal");
    let (s, v) = r.post("/v1/lease", &lease);
    assert_eq!(s, 200, "live again: {v}");
    // Without its secret the known id is refused: resuming needs it.
    let (s, v) = r.post("/v1/register", &registration_body(3, TOKEN, None));
    assert_eq!((s, v["error"].as_str()), (401, Some("unauthorized")), "{v}");
    r.stop();
}
