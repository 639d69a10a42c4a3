//! Dawid–Skene truth inference by EM (A. P. Dawid and A. M. Skene,
//! "Maximum Likelihood Estimation of Observer Error-Rates Using the EM
//! Algorithm", Applied Statistics 28(1), 1979), in the two forms
//! crowd-kit ships: the full model, one confusion matrix per worker, and
//! the one-coin model (one accuracy per worker, errors spread evenly over
//! the other classes; Zhang, Chen, Zhou and Jordan, NeurIPS 2014).
//!
//! The steps follow crowd-kit's `DawidSkene`/`OneCoinDawidSkene` so its
//! published test values check this code (`tests`): probabilities start as
//! the majority vote's; each iteration is an M-step (class priors, worker
//! errors) then an E-step (task posteriors); a last M-step gives the
//! errors that go with the final posteriors.
//!
//! Tasks may have their own class count (`Task::classes`): content hashes
//! have no class set shared between tasks, so the routing lab's contender
//! uses the one-coin model with a uniform class prior per task, which is
//! exactly the model restricted to what the data can identify.

use serde::{Deserialize, Serialize};

/// One task: its class count and the (worker, class) labels it received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Classes this task's true label may take (labels are `0..classes`).
    pub classes: usize,
    /// (worker index, class) per label; a worker labels a task at most once.
    pub labels: Vec<(usize, usize)>,
}

/// Which error model the M-step fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Errors {
    /// One K×K confusion matrix per worker (needs every task to share K).
    Full,
    /// One accuracy per worker; a wrong label is any other class, evenly.
    OneCoin,
}

/// How the class prior is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Prior {
    /// Estimated in the M-step as the mean posterior (tasks share K).
    Estimated,
    /// Uniform over each task's classes (tasks with their own class sets).
    Uniform,
}

/// What can be wrong with a fit's input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    /// A label outside its task's classes, or a task with no class.
    #[error("task {task}: label {class} outside its {classes} classes")]
    BadLabel {
        /// Task index.
        task: usize,
        /// The label.
        class: usize,
        /// The task's class count.
        classes: usize,
    },
    /// A worker index at or above the worker count.
    #[error("task {task}: worker {worker} of {workers}")]
    BadWorker {
        /// Task index.
        task: usize,
        /// The index.
        worker: usize,
        /// Workers declared.
        workers: usize,
    },
    /// The full model or an estimated prior with tasks of different K.
    #[error("the full model and an estimated prior need one class count for every task")]
    MixedClasses,
}

/// The fitted model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// Posterior over classes per task.
    pub probas: Vec<Vec<f64>>,
    /// The class prior (estimated), or `None` (uniform per task).
    pub priors: Option<Vec<f64>>,
    /// Per worker: `errors[w][observed][true]`, P(label | true class), for
    /// the shared class count (full model, or one-coin with one K).
    /// Empty when tasks have their own class counts.
    pub errors: Vec<Vec<Vec<f64>>>,
    /// Per worker: the accuracy, Σ P(true = its label) / its labels (the
    /// one-coin skill; for the full model, the same quantity). A worker
    /// with no label has `None`.
    pub skills: Vec<Option<f64>>,
    /// EM iterations run.
    pub iterations: usize,
}

impl Fit {
    /// The most probable class of task `t` (lowest index on a tie).
    pub fn label(&self, t: usize) -> Option<usize> {
        let p = self.probas.get(t)?;
        let mut best = 0;
        for (c, v) in p.iter().enumerate() {
            if *v > p[best] {
                best = c;
            }
        }
        (!p.is_empty()).then_some(best)
    }
}

fn check(tasks: &[Task], workers: usize, errors: Errors, prior: Prior) -> Result<(), FitError> {
    for (t, task) in tasks.iter().enumerate() {
        for &(w, c) in &task.labels {
            if c >= task.classes {
                return Err(FitError::BadLabel {
                    task: t,
                    class: c,
                    classes: task.classes,
                });
            }
            if w >= workers {
                return Err(FitError::BadWorker {
                    task: t,
                    worker: w,
                    workers,
                });
            }
        }
        if task.classes == 0 {
            return Err(FitError::BadLabel {
                task: t,
                class: 0,
                classes: 0,
            });
        }
    }
    let shared = tasks.windows(2).all(|p| p[0].classes == p[1].classes);
    if !shared && (errors == Errors::Full || prior == Prior::Estimated) {
        return Err(FitError::MixedClasses);
    }
    Ok(())
}

/// The majority vote's posteriors: each class's share of the labels (a
/// task without labels: uniform).
fn majority(tasks: &[Task]) -> Vec<Vec<f64>> {
    tasks
        .iter()
        .map(|t| {
            let mut p = vec![0.0; t.classes];
            for &(_, c) in &t.labels {
                p[c] += 1.0;
            }
            let n = t.labels.len() as f64;
            if n > 0.0 {
                p.iter_mut().for_each(|v| *v /= n);
            } else {
                p.iter_mut().for_each(|v| *v = 1.0 / t.classes as f64);
            }
            p
        })
        .collect()
}

struct Params {
    priors: Option<Vec<f64>>,
    /// Per worker `[observed][true]` (full or one-coin with shared K).
    errors: Vec<Vec<Vec<f64>>>,
    skills: Vec<Option<f64>>,
}

fn m_step(
    tasks: &[Task],
    probas: &[Vec<f64>],
    workers: usize,
    model: Errors,
    prior: Prior,
) -> Params {
    let shared_k = tasks
        .first()
        .map(|t| t.classes)
        .filter(|k| tasks.iter().all(|t| t.classes == *k));
    let priors = (prior == Prior::Estimated).then(|| {
        let k = shared_k.unwrap_or(0);
        let mut p = vec![0.0; k];
        for q in probas {
            for (c, v) in q.iter().enumerate() {
                p[c] += v;
            }
        }
        let n = probas.len().max(1) as f64;
        p.iter_mut().for_each(|v| *v /= n);
        p
    });
    let (mut hit, mut seen) = (vec![0.0; workers], vec![0.0; workers]);
    for (t, task) in tasks.iter().enumerate() {
        for &(w, c) in &task.labels {
            hit[w] += probas[t][c];
            seen[w] += 1.0;
        }
    }
    let skills: Vec<Option<f64>> = (0..workers)
        .map(|w| (seen[w] > 0.0).then(|| hit[w] / seen[w]))
        .collect();
    let errors = match (model, shared_k) {
        (Errors::Full, Some(k)) => {
            // counts[w][observed][true] = Σ P(true) over w's labels `observed`.
            let mut counts = vec![vec![vec![0.0; k]; k]; workers];
            for (t, task) in tasks.iter().enumerate() {
                for &(w, c) in &task.labels {
                    for (z, p) in probas[t].iter().enumerate() {
                        counts[w][c][z] += p;
                    }
                }
            }
            for m in &mut counts {
                for z in 0..k {
                    let col: f64 = (0..k).map(|o| m[o][z]).sum();
                    for row in m.iter_mut() {
                        row[z] = if col > 0.0 {
                            row[z] / col
                        } else {
                            1.0 / k as f64
                        };
                    }
                }
            }
            counts
        }
        (Errors::OneCoin, Some(k)) => skills
            .iter()
            .map(|s| one_coin_matrix(s.unwrap_or(1.0 / k as f64), k))
            .collect(),
        _ => Vec::new(),
    };
    Params {
        priors,
        errors,
        skills,
    }
}

fn one_coin_matrix(skill: f64, k: usize) -> Vec<Vec<f64>> {
    let off = if k > 1 {
        (1.0 - skill) / (k - 1) as f64
    } else {
        0.0
    };
    (0..k)
        .map(|o| (0..k).map(|z| if o == z { skill } else { off }).collect())
        .collect()
}

/// P(worker labels `observed` | true class `z`) in a task of `k` classes.
fn likelihood(p: &Params, w: usize, observed: usize, z: usize, k: usize) -> f64 {
    if let Some(m) = p.errors.get(w).filter(|m| m.len() == k) {
        return m[observed][z];
    }
    // One-coin with the task's own K.
    let s = p.skills[w].unwrap_or(1.0 / k as f64);
    if observed == z {
        s
    } else if k > 1 {
        (1.0 - s) / (k - 1) as f64
    } else {
        0.0
    }
}

fn e_step(tasks: &[Task], p: &Params) -> Vec<Vec<f64>> {
    tasks
        .iter()
        .map(|task| {
            let k = task.classes;
            let mut log: Vec<f64> = (0..k)
                .map(|z| {
                    let prior = p.priors.as_ref().map_or(1.0 / k as f64, |pr| pr[z]);
                    prior.max(1e-300).ln()
                })
                .collect();
            for &(w, c) in &task.labels {
                for (z, l) in log.iter_mut().enumerate() {
                    *l += likelihood(p, w, c, z, k).max(1e-300).ln();
                }
            }
            let top = log.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mut q: Vec<f64> = log.iter().map(|l| (l - top).exp()).collect();
            let sum: f64 = q.iter().sum();
            q.iter_mut().for_each(|v| *v /= sum);
            q
        })
        .collect()
}

/// Fits the model to `tasks` labelled by `workers` workers: majority-vote
/// start, then up to `max_iter` EM iterations, stopping early when no
/// posterior moves by more than `tol`. Errors: [`FitError`].
pub fn fit(
    tasks: &[Task],
    workers: usize,
    errors: Errors,
    prior: Prior,
    max_iter: usize,
    tol: f64,
) -> Result<Fit, FitError> {
    check(tasks, workers, errors, prior)?;
    let mut probas = majority(tasks);
    let mut iterations = 0;
    while iterations < max_iter {
        let params = m_step(tasks, &probas, workers, errors, prior);
        let next = e_step(tasks, &params);
        iterations += 1;
        let moved = probas
            .iter()
            .flatten()
            .zip(next.iter().flatten())
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        probas = next;
        if moved <= tol {
            break;
        }
    }
    let params = m_step(tasks, &probas, workers, errors, prior);
    Ok(Fit {
        probas,
        priors: params.priors,
        errors: params.errors,
        skills: params.skills,
        iterations,
    })
}

#[cfg(test)]
#[path = "dawid_skene_tests.rs"]
mod tests;
