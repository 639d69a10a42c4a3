//! Evidence dynamics wired to the field: whole-field aging (and aged
//! restore), the drift bank's discount on confirmation, and randomized
//! decisions with selection probabilities. Source: `ROUTING.md` §3.

use routing::dynamics::{DriftBank, DriftEvent, DynamicsError, TRACE_LEN};
use routing::field::{Field, FieldError, Layer, LossReason};

fn field() -> Field {
    Field::new(
        vec![
            Layer::new("source"),
            Layer::new("binding"),
            Layer::new("task"),
        ],
        1.0,
        &["browser", "container"],
        &["reliability", "latency", "financial"],
    )
    .unwrap()
}

#[test]
fn aging_halves_precision_every_48_hours_and_never_passes_the_prior() {
    let mut f = field();
    let a = f.parse("s/api").unwrap();
    // One observation x = 1 with variance 1 at depth 2 (prior: three δ of
    // variance 1 — root, source, binding — so θ prior variance 3 at
    // `s/api`). Posterior precision 1/3 + 1 = 4/3, mean 1/(4/3) = 3/4.
    f.observe(&a, "browser", "reliability", 1.0, 1.0).unwrap();
    let p0 = f.posterior(&a, "browser", "reliability").unwrap();
    assert!((p0.mean - 0.75).abs() < 1e-12, "{}", p0.mean);
    // After 48 h the evidence weighs ½: precision 1/3 + 1/2 = 5/6,
    // mean ½ / (5/6) = 3/5, variance 6/5.
    f.age_all(48.0).unwrap();
    let p1 = f.posterior(&a, "browser", "reliability").unwrap();
    assert!((p1.mean - 0.6).abs() < 1e-12, "{}", p1.mean);
    assert!((p1.variance - 1.2).abs() < 1e-12);
    // Ages toward the prior (mean 0, variance 3) and never beyond it.
    f.age_all(48.0 * 60.0).unwrap();
    let p2 = f.posterior(&a, "browser", "reliability").unwrap();
    assert!(p2.mean >= 0.0 && p2.mean < 1e-9);
    assert!(p2.variance <= 3.0 && p2.variance > 3.0 - 1e-9);
    assert!(matches!(f.age_all(f64::NAN), Err(FieldError::NonFinite(_))));
}

#[test]
fn an_aged_restore_equals_restore_then_aging() {
    let mut f = field();
    let leaf = f.parse("s/api/t1").unwrap();
    for i in 0..5 {
        f.observe(&leaf, "container", "latency", 0.1 * i as f64, 0.5)
            .unwrap();
    }
    f.compact(&leaf).unwrap();
    let json = serde_json::to_string(&f.snapshot()).unwrap();
    let restored = Field::restore_aged(serde_json::from_str(&json).unwrap(), 30.0).unwrap();
    let mut manual = Field::restore(serde_json::from_str(&json).unwrap()).unwrap();
    manual.age_all(30.0).unwrap();
    let at = f.parse("s/api/t2").unwrap();
    let a = restored.posterior(&at, "container", "latency").unwrap();
    let b = manual.posterior(&at, "container", "latency").unwrap();
    assert_eq!((a.mean, a.variance), (b.mean, b.variance));
    let fresh = f.posterior(&at, "container", "latency").unwrap();
    assert!(a.variance > fresh.variance, "aging regains uncertainty");
    assert!(Field::restore_aged(f.snapshot(), f64::INFINITY).is_err());
}

#[test]
fn a_confirmed_drift_discounts_the_binding_cell_then_applies_the_outcome() {
    let mut f = field();
    let cell = f.parse("s/api").unwrap();
    let mut bank = DriftBank::default();
    // 20 successes (x = 0) observed straight into the binding cell.
    for _ in 0..20 {
        let e = bank
            .fold(
                &mut f,
                &cell,
                &cell,
                "browser",
                "reliability",
                0.0,
                0.25,
                0.0,
            )
            .unwrap();
        assert_ne!(e, DriftEvent::Confirmed);
    }
    // Failures from now on: fast jumps by halves, slow by 5 %; the gap
    // exceeds 0.35 from the 1st failure (0.5 − 0.05 = 0.45), so the 3rd
    // consecutive failure confirms.
    let mut confirmed_at = None;
    for i in 1..=5 {
        let before = f.posterior(&cell, "browser", "reliability").unwrap();
        let e = bank
            .fold(
                &mut f,
                &cell,
                &cell,
                "browser",
                "reliability",
                1.0,
                0.25,
                i as f64,
            )
            .unwrap();
        if e == DriftEvent::Confirmed {
            confirmed_at = Some(i);
            let after = f.posterior(&cell, "browser", "reliability").unwrap();
            // Own evidence before: precision 20/0.25 + (i−1)/0.25 = 88 at i = 3,
            // discounted to 0.2·88 = 17.6, plus the new failure 4 → 21.6.
            // The posterior moves much further toward 1 than one outcome
            // alone could move it.
            let no_discount_shift = 1.0 / (88.0 + 4.0 + 0.5);
            assert!(after.mean - before.mean > 5.0 * no_discount_shift);
            break;
        }
    }
    assert_eq!(confirmed_at, Some(3));
    assert_eq!(bank.confirmations(), 1);
    let rec = bank.trace().next().unwrap();
    assert_eq!(rec.cell, cell);
    assert!((rec.t_s - 3.0).abs() < 1e-12);
    assert!(rec.fast - rec.slow > 0.35);
}

#[test]
fn the_drift_bank_tracks_only_reliability_and_latency_and_bounds_its_trace() {
    let mut f = field();
    let cell = f.parse("s/api").unwrap();
    let mut bank = DriftBank::default();
    bank.fold(&mut f, &cell, &cell, "browser", "financial", 3.0, 1.0, 0.0)
        .unwrap();
    assert!(bank.is_empty());
    assert_eq!(bank.observations(), 0);
    // Alternating regimes produce many confirmations; the trace keeps the last TRACE_LEN.
    let mut t = 0.0;
    for round in 0..200 {
        let x = if round % 2 == 0 { 0.0 } else { 1.0 };
        for _ in 0..12 {
            t += 1.0;
            bank.fold(&mut f, &cell, &cell, "container", "reliability", x, 0.25, t)
                .unwrap();
        }
    }
    assert!(bank.confirmations() as usize > TRACE_LEN);
    assert_eq!(bank.trace().count(), TRACE_LEN);
    // Bad input changes nothing.
    let snap = f.snapshot();
    let copy = bank.clone();
    assert!(matches!(
        bank.fold(
            &mut f,
            &cell,
            &cell,
            "container",
            "reliability",
            f64::NAN,
            0.25,
            t
        ),
        Err(DynamicsError::NonFinite(_))
    ));
    assert!(matches!(
        bank.fold(&mut f, &cell, &cell, "ghost", "reliability", 1.0, 0.25, t),
        Err(DynamicsError::Field(FieldError::UnknownOption(_)))
    ));
    assert!(bank
        .fold(
            &mut f,
            &cell,
            &cell,
            "container",
            "reliability",
            1.0,
            -1.0,
            t
        )
        .is_err());
    assert_eq!(bank, copy);
    assert_eq!(f, snap);
    // The bank round-trips through JSON (the service persists it).
    let back: DriftBank = serde_json::from_str(&serde_json::to_string(&bank).unwrap()).unwrap();
    assert_eq!(back, bank);
}

#[test]
fn sampled_decisions_report_probabilities_that_follow_the_scores() {
    let mut f = field();
    let a = f.parse("s/api/t").unwrap();
    // browser: reliability mean lower (better) than container's.
    f.set_prior(&a, "container", "reliability", 1.0).unwrap();
    let r = f
        .decide_sampled(&a, 0.0, &["browser", "container"], 1.0, 0.0)
        .unwrap();
    let p = r.probabilities.clone().unwrap();
    assert_eq!(p.len(), 2);
    assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    // Scores differ by exactly 1 (the container prior), so p = e⁰/(e⁰+e⁻¹).
    let want = 1.0 / (1.0 + (-1.0f64).exp());
    assert!((p[0] - want).abs() < 1e-12, "{p:?}");
    assert_eq!(r.selected.as_deref(), Some("browser"));
    // A draw above the first probability selects the second alternative.
    let r = f
        .decide_sampled(&a, 0.0, &["browser", "container"], 1.0, 0.99)
        .unwrap();
    assert_eq!(r.selected.as_deref(), Some("container"));
    assert_eq!(r.alternatives[1].reason, LossReason::Selected);
    assert_eq!(r.alternatives[0].reason, LossReason::Score);
    // A vetoed option gets probability 0 and is never drawn.
    f.set_gate(&a, "container", Some(false)).unwrap();
    let r = f
        .decide_sampled(&a, 0.0, &["browser", "container"], 1.0, 0.99)
        .unwrap();
    assert_eq!(r.selected.as_deref(), Some("browser"));
    assert_eq!(r.probabilities.unwrap()[1], 0.0);
    // The deterministic decision reports none; bad draws are typed errors.
    assert!(f
        .decide(&a, 0.0, &["browser"])
        .unwrap()
        .probabilities
        .is_none());
    assert!(matches!(
        f.decide_sampled(&a, 0.0, &["browser"], 1.0, 1.0),
        Err(FieldError::BadFactor(_))
    ));
    assert!(matches!(
        f.decide_sampled(&a, 0.0, &["browser"], 0.0, 0.5),
        Err(FieldError::BadFactor(_))
    ));
}
