//! Incremental snapshots (docs/router.md "Durability and restart"): the
//! state row no longer holds the targets; each target has a row of its
//! own, written by the snapshot after it changed, in one atomic batch with
//! the state row. The core in process on a real SQLite file, its clock
//! injected; a second `Router` opened on the same file is the restart.

use router::api::LeaseRequest;
use router::config::RouterConfig;
use router::load::{population_facts, register_in_process, success_deposit};
use router::store::{Row, SqliteStore, Table};
use router::Router;

fn cfg() -> RouterConfig {
    RouterConfig {
        device_rate: (1e9, 1e9),
        registration_rate: (1e9, 1e9),
        ..RouterConfig::default()
    }
}

fn open(dir: &std::path::Path, now: f64) -> Router {
    let store = SqliteStore::open_dir(dir).unwrap();
    Router::open(cfg(), Box::new(store), now).unwrap()
}

/// A router with `targets` targets on 4 sources and 4 devices, its
/// queues refilled; the devices' ids and secrets.
fn seeded(dir: &std::path::Path, targets: usize) -> (Router, Vec<(String, String)>) {
    let mut r = open(dir, 0.0);
    r.put_facts(&population_facts(targets, 4), 0.0).unwrap();
    let devices = register_in_process(&mut r, 4, 0.5).unwrap();
    r.tick(1.0).unwrap();
    (r, devices)
}

/// One lease per device at `now`, every item deposited; the targets
/// observed.
fn work(r: &mut Router, devices: &[(String, String)], now: f64) -> Vec<String> {
    let mut seen = Vec::new();
    for (id, secret) in devices {
        let req = LeaseRequest {
            device_id: id.clone(),
            device_secret: secret.clone(),
            max_items: 3,
            wait_s: None,
        };
        let l = r.lease(&req, now).unwrap();
        for it in &l.items {
            let dep = success_deposit(id, secret, &l.lease_id, it, &format!("h-{}", it.target));
            r.deposit(&dep, now).unwrap();
            seen.push(it.target.clone());
        }
    }
    seen
}

fn rows(r: &Router, table: Table) -> Vec<Row> {
    r.store_handle().lock().load(table).unwrap()
}

fn state_row(r: &Router) -> serde_json::Value {
    let row = r
        .store_handle()
        .lock()
        .get(Table::Meta, "snapshot")
        .unwrap();
    serde_json::from_str(&row.expect("a state row").payload).unwrap()
}

#[test]
fn a_snapshot_writes_the_changed_targets_only_and_a_restart_reads_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, devices) = seeded(dir.path(), 200);
    r.persist(2.0).unwrap();
    // Every target was new: one row each; the state row holds none.
    let first = rows(&r, Table::Targets);
    assert_eq!(first.len(), 200);
    assert!(state_row(&r).get("targets").is_none());
    let v1 = first[0].version;
    assert!(first.iter().all(|row| row.version == v1));

    let observed = work(&mut r, &devices, 3.0);
    assert!(!observed.is_empty(), "the devices were granted nothing");
    r.persist(4.0).unwrap();
    let second = rows(&r, Table::Targets);
    assert_eq!(second.len(), 200);
    let rewritten: Vec<&str> = second
        .iter()
        .filter(|row| row.version > v1)
        .map(|row| row.key.as_str())
        .collect();
    let mut want = observed.clone();
    want.sort();
    want.dedup();
    // Exactly the observed targets were written again.
    assert_eq!(rewritten, want);

    // A restart reads the same targets back.
    let again = open(dir.path(), 5.0);
    assert_eq!(again.targets_table(), r.targets_table());
    assert_eq!(again.targets(), 200);
}

#[test]
fn of_two_snapshots_taken_before_either_was_written_the_newer_alone_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, devices) = seeded(dir.path(), 200);
    r.persist(2.0).unwrap();
    let store = r.store_handle();

    // S1 takes the first work's targets; its write is still to come (a
    // tick writes outside the router's lock) when S2 is taken.
    assert!(!work(&mut r, &devices, 3.0).is_empty());
    let s1 = r.take_snapshot_now(3.5).expect("changed");
    assert!(!work(&mut r, &devices, 4.0).is_empty());
    let s2 = r.take_snapshot_now(4.5).expect("changed");
    let at_s2 = r.targets_table();
    // S2 carries S1's targets again: it is written first, and the process
    // dies before S1's write.
    for name in s1.changed_targets() {
        assert!(s2.changed_targets().contains(name), "{name} not carried");
    }
    Router::write_snapshot(&store, &s2).unwrap();
    let restarted = open(dir.path(), 5.0);
    assert_eq!(restarted.targets_table(), at_s2);
    drop(restarted);

    // S1 written late changes nothing: its rows are older than S2's.
    Router::write_snapshot(&store, &s1).unwrap();
    let restarted = open(dir.path(), 5.0);
    assert_eq!(restarted.targets_table(), at_s2);
}

/// A snapshot's clone of the state is dropped once serialized (while it
/// lives, every record the router changes is copied): it serializes once,
/// a second try is refused rather than writing nothing, and what the
/// retention reads of it (time, folded seq, version) outlives the clone.
#[test]
fn a_snapshot_serializes_once_and_keeps_its_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, devices) = seeded(dir.path(), 50);
    assert!(!work(&mut r, &devices, 3.0).is_empty());
    let snap = r.take_snapshot_now(3.5).expect("changed");
    let figures = (snap.t_s(), snap.applied_seq(), snap.version());
    assert!(figures.1 > 0, "the work's deposits were folded");
    let rows = snap.rows().unwrap();
    assert!(!rows.targets.is_empty());
    assert_eq!((snap.t_s(), snap.applied_seq(), snap.version()), figures);
    let again = snap.rows().unwrap_err();
    assert!(
        matches!(again, router::store::StoreError::BadValue(_)),
        "{again:?}"
    );
    let store = r.store_handle();
    assert!(Router::write_snapshot(&store, &snap).is_err());
}

#[test]
fn a_state_row_that_holds_the_targets_is_read_and_its_targets_written_as_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, devices) = seeded(dir.path(), 50);
    assert!(!work(&mut r, &devices, 3.0).is_empty());
    r.persist(4.0).unwrap();
    let want = r.targets_table();
    drop(r);

    // The layout written before targets had rows: the state row holds
    // them and the targets table is empty.
    let mut st = SqliteStore::open_dir(dir.path()).unwrap();
    use router::store::Store;
    let meta = st.get(Table::Meta, "snapshot").unwrap().unwrap();
    let mut state: serde_json::Value = serde_json::from_str(&meta.payload).unwrap();
    state["targets"] = serde_json::to_value(&want).unwrap();
    st.upsert(
        Table::Meta,
        &[Row {
            payload: state.to_string(),
            ..meta
        }],
    )
    .unwrap();
    let keys: Vec<String> = st
        .load(Table::Targets)
        .unwrap()
        .into_iter()
        .map(|row| row.key)
        .collect();
    st.delete(Table::Targets, &keys).unwrap();
    drop(st);

    let mut r = open(dir.path(), 5.0);
    assert_eq!(r.targets_table(), want);
    // Its next snapshot writes every target as a row.
    r.persist(6.0).unwrap();
    assert_eq!(rows(&r, Table::Targets).len(), 50);
    assert!(state_row(&r).get("targets").is_none());
    drop(r);
    assert_eq!(open(dir.path(), 7.0).targets_table(), want);
}

#[test]
fn a_failed_snapshot_write_leaves_its_targets_for_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, devices) = seeded(dir.path(), 100);
    r.persist(2.0).unwrap();
    let observed = work(&mut r, &devices, 3.0);
    assert!(!observed.is_empty());
    let s1 = r.take_snapshot_now(3.5).expect("changed");
    // Its write failed: the router is told so.
    r.snapshot_failed(&s1);
    // The next snapshot, with nothing changed since, carries them.
    let s2 = r.take_snapshot_now(4.0).expect("still dirty");
    for name in &observed {
        assert!(s2.changed_targets().contains(name), "{name} dropped");
    }
    Router::write_snapshot(&r.store_handle(), &s2).unwrap();
    let want = r.targets_table();
    drop(r);
    assert_eq!(open(dir.path(), 5.0).targets_table(), want);
}

/// Every number of a JSON value, in document order.
fn numbers(v: &serde_json::Value, out: &mut Vec<f64>) {
    match v {
        serde_json::Value::Number(n) => out.push(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::Array(a) => a.iter().for_each(|x| numbers(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| numbers(x, out)),
        _ => {}
    }
}

/// Aging with a period, in place (decision 0021): a tick within the period
/// leaves the evidence as it is; the next aging ages it by all the time
/// since the last aging (here since the start), as one `age_all` of that
/// time does. The default ages at every tick.
#[test]
fn aging_in_place_once_a_period_ages_by_all_the_time_since_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_dir(dir.path()).unwrap();
    let cfg = RouterConfig {
        aging_period_s: 3600.0,
        aging_in_place: true,
        ..cfg()
    };
    let mut b = Router::open(cfg, Box::new(store), 0.0).unwrap();
    b.put_facts(&population_facts(40, 4), 0.0).unwrap();
    let devices = register_in_process(&mut b, 4, 0.5).unwrap();
    b.tick(1.0).unwrap();
    assert!(!work(&mut b, &devices, 2.0).is_empty());
    let observed = b.field().clone();
    // Within the hour since the start (its last aging): untouched.
    b.tick(1802.0).unwrap();
    assert!(fields_close_to(&b, &observed, 0.0));
    // Past it: aged once by all 3,602 s.
    b.tick(3602.0).unwrap();
    let mut want = observed.clone();
    want.age_all(3602.0 / 3600.0).unwrap();
    assert!(!fields_close_to(&b, &observed, 1e-9), "not aged");
    assert!(fields_close_to(&b, &want, 1e-12), "aged by another time");

    // The default ages at every tick.
    let other = tempfile::tempdir().unwrap();
    let (mut a, devices) = seeded(other.path(), 40);
    assert!(!work(&mut a, &devices, 2.0).is_empty());
    let observed = a.field().clone();
    a.tick(1802.0).unwrap();
    assert!(
        !fields_close_to(&a, &observed, 1e-9),
        "the default did not age"
    );
}

/// Whether the cells of `r`'s field hold those of `f` within a relative
/// `tol` (its trees: the revision counter counts writes, not evidence).
fn fields_close_to(r: &Router, f: &routing::field::Field, tol: f64) -> bool {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    numbers(&serde_json::to_value(r.field()).unwrap()["trees"], &mut x);
    numbers(&serde_json::to_value(f).unwrap()["trees"], &mut y);
    assert!(!x.is_empty(), "a field without trees");
    x.len() == y.len()
        && x.iter()
            .zip(&y)
            .all(|(p, q)| (p - q).abs() <= tol * p.abs().max(q.abs()).max(1e-300))
}

/// The task subtrees the state row `v` holds: (source, binding, target)
/// under every tree.
fn task_cells_in_state(v: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    let none = serde_json::Map::new();
    let kids = |n: &serde_json::Value| n.get("children").and_then(|c| c.as_object()).cloned();
    for per in v["field"]["trees"].as_object().unwrap_or(&none).values() {
        for root in per.as_object().unwrap_or(&none).values() {
            for (s, src) in kids(root).unwrap_or_default() {
                for (b, bind) in kids(&src).unwrap_or_default() {
                    for t in kids(&bind).unwrap_or_default().keys() {
                        out.push(format!("{s}/{b}/{t}"));
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Rows of `table` that carry task cells, by key.
fn rows_with_cells(r: &Router) -> Vec<String> {
    rows(r, Table::Targets)
        .into_iter()
        .filter(|row| row.payload.contains("\"cells\""))
        .map(|row| row.key)
        .collect()
}

/// A router over 60 targets whose devices each took one lease and
/// deposited it at 3.0, aged to `at` (every tick ages) and written then,
/// so a restart at `at` ages nothing; and the targets observed.
fn observed_and_written(dir: &std::path::Path, at: f64) -> (Router, Vec<String>) {
    let (mut r, devices) = seeded(dir, 60);
    let mut observed = work(&mut r, &devices, 3.0);
    observed.sort();
    observed.dedup();
    assert!(!observed.is_empty(), "the devices were granted nothing");
    r.tick(at).unwrap();
    r.persist(at).unwrap();
    (r, observed)
}

/// Whether a restart at `at` of `r`'s store in `dir`, once `r` is
/// dropped, holds the cells of `r`'s field within a relative `tol`.
fn restart_keeps_field(r: Router, dir: &std::path::Path, at: f64, tol: f64) -> bool {
    let live = r.field().clone();
    drop(r);
    reopened_close_to(dir, at, &live, tol)
}

/// Whether a restart of the store in `dir` at `at` holds the cells of
/// `live` within a relative `tol`.
fn reopened_close_to(
    dir: &std::path::Path,
    at: f64,
    live: &routing::field::Field,
    tol: f64,
) -> bool {
    fields_close_to(&open(dir, at), live, tol)
}

/// The field's task cells live in their targets' rows (decision 0026):
/// the state row holds none, each observed target's row carries its own,
/// a snapshot with no new deposit rewrites no target row, and a restart
/// puts them back: the same field.
#[test]
fn the_task_cells_are_written_with_their_targets_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let (r, observed) = observed_and_written(dir.path(), 4.0);
    assert_eq!(task_cells_in_state(&state_row(&r)), Vec::<String>::new());
    let mut carried = rows_with_cells(&r);
    carried.sort();
    // Settled rows compact their cells away: those left are observed ones.
    assert!(!carried.is_empty());
    assert!(carried.iter().all(|t| observed.contains(t)), "{carried:?}");
    assert!(
        restart_keeps_field(r, dir.path(), 4.0, 1e-12),
        "the cells did not come back"
    );
}

/// Rows written before an aging keep the field's aging time they were
/// written at; a restart ages their cells by what the field aged since,
/// as the live field was.
#[test]
fn cells_in_rows_older_than_an_aging_are_aged_at_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, _) = observed_and_written(dir.path(), 4.0);
    let before: Vec<Row> = rows(&r, Table::Targets);
    // Two hours later, a tick ages the field; nothing is deposited.
    r.tick(7204.0).unwrap();
    r.persist(7204.0).unwrap();
    let after: Vec<Row> = rows(&r, Table::Targets);
    let unchanged = before
        .iter()
        .zip(&after)
        .filter(|(a, b)| a.payload.contains("\"cells\"") && a == b)
        .count();
    assert!(unchanged > 0, "the aging rewrote the target rows");
    assert!(
        restart_keeps_field(r, dir.path(), 7204.0, 1e-9),
        "not aged as the live field"
    );
}

/// A store written while the state row held every task's cells and the
/// target rows none is read whole; its next snapshot moves the cells into
/// the rows, and a restart after that reads the same field.
#[test]
fn a_state_row_that_holds_the_task_cells_is_read_and_they_move_to_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = observed_and_written(dir.path(), 4.0);
    let live = r.field().clone();
    let carried = rows_with_cells(&r);
    drop(r);

    // The earlier layout: the whole field in the state row, no cells in
    // the target rows.
    use router::store::Store;
    let mut st = SqliteStore::open_dir(dir.path()).unwrap();
    let meta = st.get(Table::Meta, "snapshot").unwrap().unwrap();
    let mut state: serde_json::Value = serde_json::from_str(&meta.payload).unwrap();
    state["field"] = serde_json::to_value(&live).unwrap();
    let old_rows: Vec<Row> = st
        .load(Table::Targets)
        .unwrap()
        .into_iter()
        .map(|row| {
            let mut v: serde_json::Value = serde_json::from_str(&row.payload).unwrap();
            v.as_object_mut().unwrap().remove("cells");
            Row {
                payload: v.to_string(),
                ..row
            }
        })
        .collect();
    st.delete(Table::Targets, &carried).unwrap();
    st.upsert(Table::Targets, &old_rows).unwrap();
    st.upsert(
        Table::Meta,
        &[Row {
            payload: state.to_string(),
            ..meta
        }],
    )
    .unwrap();
    drop(st);

    let mut r = open(dir.path(), 4.0);
    assert!(fields_close_to(&r, &live, 1e-12));
    assert!(rows_with_cells(&r).is_empty());
    r.persist(4.0).unwrap();
    assert_eq!(task_cells_in_state(&state_row(&r)), Vec::<String>::new());
    let mut moved = rows_with_cells(&r);
    moved.sort();
    let mut want = carried.clone();
    want.sort();
    assert_eq!(moved, want);
    drop(r);
    assert!(reopened_close_to(dir.path(), 4.0, &live, 1e-12));
}

/// An operator's prior at a target's task address is written with the
/// target's row, and one at the address of no known target stays in the
/// state row; both come back.
#[test]
fn a_prior_at_a_task_address_is_written_with_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, _devices) = seeded(dir.path(), 20);
    r.persist(2.0).unwrap();
    let prior = |address: &str| router::config::CellFact {
        address: address.into(),
        option: "browser".into(),
        dimension: "reliability".into(),
        value: 0.25,
    };
    let facts = router::config::Facts {
        priors: vec![prior("src-1/html/load-1"), prior("src-1/html/nobody")],
        ..Default::default()
    };
    r.tick(3.0).unwrap();
    r.put_facts(&facts, 3.0).unwrap();
    assert_eq!(rows_with_cells(&r), ["load-1"]);
    assert_eq!(task_cells_in_state(&state_row(&r)), ["src-1/html/nobody"]);
    let live = r.field().clone();
    drop(r);
    assert!(reopened_close_to(dir.path(), 3.0, &live, 1e-12));
}
