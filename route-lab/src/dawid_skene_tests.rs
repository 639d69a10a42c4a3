//! Reference values: crowd-kit's own tests of its `DawidSkene`
//! (tests/aggregation/test_ds_aggregation.py in github.com/Toloka/crowd-kit:
//! `test_dawid_skene_step_by_step` with its fixtures `data`,
//! `probas_iter_0/1`, `priors_iter_0/1`, `errors_iter_0/1`, compared there
//! at atol 0.005, and `test_dawid_skene_overlap`), plus cases solved by hand.

use super::*;

const NO: usize = 0;
const YES: usize = 1;

/// crowd-kit's `data` fixture: tasks t1..t5, workers w1..w5 (0..4), classes
/// no = 0, yes = 1 (crowd-kit orders labels by name). w3 did not label t1.
fn toy() -> Vec<Task> {
    let rows: [&[(usize, usize)]; 5] = [
        &[(0, NO), (1, YES), (3, YES), (4, NO)],
        &[(0, YES), (1, YES), (2, YES), (3, NO), (4, NO)],
        &[(0, YES), (1, NO), (2, NO), (3, YES), (4, NO)],
        &[(0, YES), (1, YES), (2, YES), (3, YES), (4, YES)],
        &[(0, YES), (1, NO), (2, NO), (3, NO), (4, NO)],
    ];
    rows.iter()
        .map(|l| Task {
            classes: 2,
            labels: l.to_vec(),
        })
        .collect()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

fn assert_probas(f: &Fit, want: [[f64; 2]; 5]) {
    for (t, w) in want.iter().enumerate() {
        for c in 0..2 {
            assert!(
                close(f.probas[t][c], w[c], 0.005),
                "t{} class {c}: {} vs {}",
                t + 1,
                f.probas[t][c],
                w[c]
            );
        }
    }
}

/// errors[w][observed][true] against crowd-kit's rows (worker, observed) →
/// (true no, true yes).
fn assert_errors(f: &Fit, want: [[[f64; 2]; 2]; 5]) {
    for w in 0..5 {
        for o in 0..2 {
            for z in 0..2 {
                assert!(
                    close(f.errors[w][o][z], want[w][o][z], 0.005),
                    "w{} observed {o} true {z}: {} vs {}",
                    w + 1,
                    f.errors[w][o][z],
                    want[w][o][z]
                );
            }
        }
    }
}

#[test]
fn full_model_iteration_0_is_crowd_kits() {
    let f = fit(&toy(), 5, Errors::Full, Prior::Estimated, 0, 1e-5).unwrap();
    assert_eq!(f.iterations, 0);
    assert_probas(
        &f,
        [[0.5, 0.5], [0.4, 0.6], [0.6, 0.4], [0.0, 1.0], [0.8, 0.2]],
    );
    let p = f.priors.as_ref().unwrap();
    assert!(
        close(p[NO], 0.46, 0.005) && close(p[YES], 0.54, 0.005),
        "{p:?}"
    );
    assert_errors(
        &f,
        [
            [[0.22, 0.19], [0.78, 0.81]],
            [[0.61, 0.22], [0.39, 0.78]],
            [[0.78, 0.27], [0.22, 0.73]],
            [[0.52, 0.30], [0.48, 0.70]],
            [[1.00, 0.63], [0.00, 0.37]],
        ],
    );
}

#[test]
fn full_model_iteration_1_is_crowd_kits() {
    let f = fit(&toy(), 5, Errors::Full, Prior::Estimated, 1, 1e-5).unwrap();
    assert_eq!(f.iterations, 1);
    assert_probas(
        &f,
        [
            [0.35, 0.65],
            [0.26, 0.74],
            [0.87, 0.13],
            [0.0, 1.0],
            [0.95, 0.05],
        ],
    );
    let p = f.priors.as_ref().unwrap();
    assert!(
        close(p[NO], 0.49, 0.005) && close(p[YES], 0.51, 0.005),
        "{p:?}"
    );
    assert_errors(
        &f,
        [
            [[0.14, 0.25], [0.86, 0.75]],
            [[0.75, 0.07], [0.25, 0.93]],
            [[0.87, 0.09], [0.13, 0.91]],
            [[0.50, 0.31], [0.50, 0.69]],
            [[1.00, 0.61], [0.00, 0.39]],
        ],
    );
    // crowd-kit's labels after one iteration: yes, yes, no, yes, no.
    let labels: Vec<usize> = (0..5).map(|t| f.label(t).unwrap()).collect();
    assert_eq!(labels, [YES, YES, NO, YES, NO]);
}

#[test]
fn full_model_on_crowd_kits_overlap_case() {
    // Three tasks; worker w labels task t "yes" unless (w − t) mod 3 = 0.
    // crowd-kit: after 20 iterations every task is 1/3 no, 2/3 yes, and the
    // prior is (1/3, 2/3).
    for overlap in [3usize, 300] {
        let tasks: Vec<Task> = (0..3)
            .map(|t| Task {
                classes: 2,
                labels: (0..overlap)
                    .map(|w| (w, if (w + 3 - t) % 3 == 0 { NO } else { YES }))
                    .collect(),
            })
            .collect();
        let f = fit(&tasks, overlap, Errors::Full, Prior::Estimated, 20, 1e-5).unwrap();
        for p in &f.probas {
            assert!(
                close(p[NO], 1.0 / 3.0, 0.005) && close(p[YES], 2.0 / 3.0, 0.005),
                "{p:?}"
            );
        }
        let pr = f.priors.unwrap();
        assert!(close(pr[NO], 1.0 / 3.0, 0.005), "{pr:?}");
    }
}

#[test]
fn one_coin_by_hand() {
    // Two tasks of two classes; workers 0 and 1 agree on both, worker 2
    // disagrees on both. Majority start: (1/3, 2/3) per task toward the
    // pair's class; skills then 2/3, 2/3, 1/3. E-step, uniform prior:
    // P(pair's class) ∝ (2/3)(2/3)(2/3) vs (1/3)(1/3)(1/3) → 8/9.
    let tasks = vec![
        Task {
            classes: 2,
            labels: vec![(0, 1), (1, 1), (2, 0)],
        },
        Task {
            classes: 2,
            labels: vec![(0, 0), (1, 0), (2, 1)],
        },
    ];
    let f = fit(&tasks, 3, Errors::OneCoin, Prior::Uniform, 1, 0.0).unwrap();
    assert!(close(f.probas[0][1], 8.0 / 9.0, 1e-12), "{:?}", f.probas);
    assert!(close(f.probas[1][0], 8.0 / 9.0, 1e-12));
    // Final M-step: skills 8/9, 8/9, 1/9.
    let s: Vec<f64> = f.skills.iter().map(|s| s.unwrap()).collect();
    assert!(
        close(s[0], 8.0 / 9.0, 1e-12) && close(s[2], 1.0 / 9.0, 1e-12),
        "{s:?}"
    );
    let want = [[1.0 / 9.0, 8.0 / 9.0], [8.0 / 9.0, 1.0 / 9.0]];
    for o in 0..2 {
        for z in 0..2 {
            assert!(
                close(f.errors[2][o][z], want[o][z], 1e-12),
                "{:?}",
                f.errors[2]
            );
        }
    }
}

#[test]
fn one_coin_with_a_class_set_per_task_finds_a_colluding_minority() {
    // Twenty tasks, each with its own classes: 0 = the genuine value,
    // 1 = a forgery two colluders share, 2 = unobserved. Five honest
    // workers label 0, the two colluders label 1 everywhere.
    let tasks: Vec<Task> = (0..20)
        .map(|_| Task {
            classes: 3,
            labels: (0..7).map(|w| (w, usize::from(w >= 5))).collect(),
        })
        .collect();
    let f = fit(&tasks, 7, Errors::OneCoin, Prior::Uniform, 50, 1e-9).unwrap();
    for t in 0..20 {
        assert_eq!(f.label(t), Some(0));
        assert!(f.probas[t][0] > 0.99, "{:?}", f.probas[t]);
    }
    let s: Vec<f64> = f.skills.iter().map(|s| s.unwrap()).collect();
    assert!(
        s[..5].iter().all(|&v| v > 0.99) && s[5..].iter().all(|&v| v < 0.01),
        "{s:?}"
    );
}

#[test]
fn bad_input_is_a_typed_error() {
    let bad = vec![Task {
        classes: 2,
        labels: vec![(0, 2)],
    }];
    assert!(matches!(
        fit(&bad, 1, Errors::OneCoin, Prior::Uniform, 5, 0.0),
        Err(FitError::BadLabel { class: 2, .. })
    ));
    let bad = vec![Task {
        classes: 2,
        labels: vec![(3, 0)],
    }];
    assert!(matches!(
        fit(&bad, 2, Errors::OneCoin, Prior::Uniform, 5, 0.0),
        Err(FitError::BadWorker { worker: 3, .. })
    ));
    let mixed = vec![
        Task {
            classes: 2,
            labels: vec![],
        },
        Task {
            classes: 3,
            labels: vec![],
        },
    ];
    assert_eq!(
        fit(&mixed, 0, Errors::Full, Prior::Uniform, 5, 0.0),
        Err(FitError::MixedClasses)
    );
    assert_eq!(
        fit(&mixed, 0, Errors::OneCoin, Prior::Estimated, 5, 0.0),
        Err(FitError::MixedClasses)
    );
    // Mixed class counts are fine for one coin with a uniform prior; an
    // unlabelled task stays uniform.
    let f = fit(&mixed, 0, Errors::OneCoin, Prior::Uniform, 5, 0.0).unwrap();
    assert_eq!(f.probas[1], [1.0 / 3.0; 3]);
    assert!(fit(&[], 0, Errors::Full, Prior::Estimated, 5, 0.0)
        .unwrap()
        .probas
        .is_empty());
}
