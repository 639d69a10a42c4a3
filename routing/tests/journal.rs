//! The field's journal: a clone aged while the field takes writes, with the
//! writes replayed onto it, is exactly the field aged first and written
//! after; a clone never carries the journal; an overflowed journal is refused.

use proptest::prelude::*;
use routing::field::{Edit, Field, FieldError, Layer, JOURNAL_CAP};

fn field() -> Field {
    let layers = vec![
        Layer::new("source"),
        Layer::new("binding"),
        Layer::new("task"),
    ];
    let mut f = Field::new(
        layers,
        1.0,
        &["browser", "container", "desktop"],
        &["reliability", "latency", "budget:paid"],
    )
    .unwrap();
    for (i, text) in ["a", "a/api", "a/api/t1", "b/html/t2"].iter().enumerate() {
        let at = f.parse(text).unwrap();
        f.observe(&at, "browser", "reliability", 0.2 * i as f64, 0.5)
            .unwrap();
        f.observe(&at, "desktop", "latency", -0.1 * i as f64, 2.0)
            .unwrap();
    }
    f
}

/// One write of every kind, chosen by `kind`, at one of a few addresses.
fn write(f: &mut Field, kind: u8, place: u8, x: f64) {
    let texts = ["a", "a/api", "a/api/t1", "b", "b/html/t2", "c/api/t3"];
    let at = f.parse(texts[place as usize % texts.len()]).unwrap();
    let options = ["browser", "container", "desktop"];
    let o = options[place as usize % 3];
    let dims = ["reliability", "latency"];
    let d = dims[kind as usize % 2];
    let _ = match kind % 9 {
        0 | 1 => f.observe(&at, o, d, x, 0.25 + x.abs()).map(drop),
        2 => f.set_prior(&at, o, d, x).map(drop),
        3 => f.set_weight(&at, o, d, x).map(drop),
        4 => f.set_gate(&at, o, (x > 0.0).then_some(x > 0.5)),
        5 => f.discount(&at, o, d, x.abs().min(1.0)).map(drop),
        6 => f.compact(&at).map(drop),
        7 => f.set_price("budget:paid", x.abs()),
        _ => f.set_dimension_scale(d, 0.5 + x.abs()),
    };
}

proptest! {
    #[test]
    fn a_clone_aged_meanwhile_with_the_writes_replayed_is_the_field_aged_first(
        writes in prop::collection::vec((0u8..9, 0u8..6, -1.0f64..1.0), 0..40),
        dt_hours in 0.001f64..200.0,
    ) {
        let mut live = field();
        let mut expected = live.clone();
        // Taken under the lock: the clone, and the journal opened.
        let mut aged = live.clone();
        live.begin_journal();
        // Meanwhile the field takes writes; outside the lock the clone ages.
        for &(k, p, x) in &writes {
            write(&mut live, k, p, x);
        }
        aged.age_all(dt_hours).unwrap();
        let journal = live.take_journal().expect("a journal was open");
        aged.replay(&journal).unwrap();
        // What aging under the lock and then the writes would have made.
        expected.age_all(dt_hours).unwrap();
        for &(k, p, x) in &writes {
            write(&mut expected, k, p, x);
        }
        prop_assert_eq!(aged.revision(), expected.revision());
        prop_assert_eq!(
            serde_json::to_string(&aged).unwrap(),
            serde_json::to_string(&expected).unwrap()
        );
        prop_assert!(aged == expected);
    }
}

#[test]
fn a_price_is_recorded_as_its_weights_once_and_failed_writes_not_at_all() {
    let mut f = field();
    f.begin_journal();
    f.set_price("budget:paid", 2.0).unwrap();
    let root = routing::field::Address::root();
    assert!(f.observe(&root, "robot", "reliability", 1.0, 1.0).is_err());
    assert!(f.discount(&root, "browser", "reliability", 2.0).is_err());
    let j = f.take_journal().unwrap();
    assert_eq!(j.edits().len(), 3, "one weight per option: {:?}", j.edits());
    assert!(j
        .edits()
        .iter()
        .all(|e| matches!(e, Edit::SetWeight { weight, .. } if *weight == 2.0)));
    assert!(f.take_journal().is_none(), "the journal closed");
}

#[test]
fn a_clone_or_a_snapshot_never_carries_the_journal() {
    let mut f = field();
    f.begin_journal();
    let mut c = f.clone();
    let a = c.parse("a").unwrap();
    c.observe(&a, "browser", "reliability", 1.0, 1.0).unwrap();
    assert!(c.take_journal().is_none());
    let mut back: Field = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
    assert!(back.take_journal().is_none());
    assert_eq!(f.take_journal().unwrap().edits().len(), 0);
}

#[test]
fn an_overflowed_journal_is_refused_and_changes_nothing() {
    let mut f = field();
    let a = f.parse("a").unwrap();
    f.begin_journal();
    for _ in 0..=JOURNAL_CAP {
        f.set_gate(&a, "browser", None).unwrap();
    }
    let j = f.take_journal().unwrap();
    assert!(!j.is_complete());
    assert_eq!(j.edits().len(), JOURNAL_CAP);
    let mut g = field();
    let before = g.clone();
    assert_eq!(g.replay(&j), Err(FieldError::IncompleteJournal));
    assert!(g == before && g.revision() == before.revision());
}
