//! Verification's bookkeeping around a settled row: an answer that comes
//! in after the row settled closes the verification it answers, and the
//! row's cells of the field compact with it (`core/fold.rs`).

use crate::router_core::{cfg, deposit_req, facts, lease, register, Dev};
use router::api::LeaseItem;
use router::events::Event;
use router::store::MemoryStore;
use router::Router;

/// `d`'s lease at `now` and its item for `target`, if it was granted one.
fn granted(r: &mut Router, d: &Dev, target: &str, now: f64) -> Option<(String, LeaseItem)> {
    let l = lease(r, d, 8, now);
    let item = l.items.iter().find(|i| i.target == target)?.clone();
    Some((l.lease_id, item))
}

/// Whether the field holds a cell at the row's task address in any tree.
fn has_task_cells(r: &Router, target: &str) -> bool {
    serde_json::to_string(r.field())
        .unwrap()
        .contains(&format!("\"{target}\""))
}

/// The row settles on a quorum while one more device's verification is
/// out; that device's answer, the same content, closes it at once: the
/// row has nothing open, its cells are compacted, and no expiry is
/// reported at the TTL for a verification that was answered.
#[test]
fn an_answer_after_the_row_settled_closes_its_verification() {
    let mut r = Router::open(cfg(), Box::new(MemoryStore::default()), 0.0).unwrap();
    r.put_facts(&facts(), 0.0).unwrap();
    let devs: Vec<Dev> = ["browser", "desktop", "container_plain", "browser"]
        .iter()
        .enumerate()
        .map(|(i, a)| register(&mut r, &format!("dev-{i}"), a, 0.0))
        .collect();
    r.tick(1.0).unwrap();
    let la = lease(&mut r, &devs[0], 1, 2.0);
    let first = la.items[0].clone();
    let target = first.target.clone();
    r.deposit(&deposit_req(&devs[0], &la.lease_id, &first, "h1"), 3.0)
        .unwrap();
    r.tick(4.0).unwrap();
    // Two verifications out at once (the default most open per row).
    let (b_lease, b_item) = granted(&mut r, &devs[1], &target, 5.0).expect("b verifies");
    let (c_lease, c_item) = granted(&mut r, &devs[2], &target, 5.0).expect("c verifies");
    r.deposit(&deposit_req(&devs[1], &b_lease, &b_item, "h1"), 6.0)
        .unwrap();
    r.tick(7.0).unwrap();
    let (d_lease, d_item) = granted(&mut r, &devs[3], &target, 8.0).expect("d verifies");
    let settled = r
        .deposit(&deposit_req(&devs[3], &d_lease, &d_item, "h1"), 9.0)
        .unwrap();
    assert!(settled.settled, "a, b and d agree: a quorum of three");
    let view = r.target_view(&target).unwrap();
    assert_eq!(view.open_verifications, 1, "c's is still out");
    assert!(has_task_cells(&r, &target), "open: not compacted yet");
    r.deposit(&deposit_req(&devs[2], &c_lease, &c_item, "h1"), 10.0)
        .unwrap();
    assert_eq!(r.target_view(&target).unwrap().open_verifications, 0);
    assert!(!has_task_cells(&r, &target), "compacted with the answer");
    drop(r.drain_events());
    r.tick(10.0 + cfg().verify.ttl_s + 1.0).unwrap();
    let expired = r
        .drain_events()
        .into_iter()
        .any(|e| matches!(e, Event::VerificationExpired { .. }));
    assert!(!expired, "an answered verification never lapses");
}
