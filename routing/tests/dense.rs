//! Property test: the sparse field equals the dense Gaussian posterior
//! (joint covariance of every δ, conditioned on the observations with a
//! Cholesky solve with nalgebra) to 1e-9, before and after discounts and compactions.
//! Source: `ROUTING.md` §6, last vector.

#![allow(clippy::needless_range_loop)]

use proptest::prelude::*;
use routing::field::{Address, Field, Layer};

/// Small deterministic generator driven by the proptest seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random tree: node 0 is the root; `labels[i]` the path of node i.
struct Tree {
    labels: Vec<Vec<String>>,
    parent: Vec<Option<usize>>,
    prior: Vec<f64>,
    var: Vec<f64>,
}

fn random_tree(rng: &mut Rng, layer_vars: &[f64], root_var: f64) -> Tree {
    let mut t = Tree {
        labels: vec![vec![]],
        parent: vec![None],
        prior: vec![rng.range(-2.0, 2.0)],
        var: vec![root_var],
    };
    let mut frontier = vec![0usize];
    while let Some(n) = frontier.pop() {
        let depth = t.labels[n].len();
        if depth >= layer_vars.len() {
            continue;
        }
        let fan = rng.below(4); // 0..=3
        for k in 0..fan {
            let mut l = t.labels[n].clone();
            l.push(format!("n{k}"));
            t.labels.push(l);
            t.parent.push(Some(n));
            t.prior.push(rng.range(-2.0, 2.0));
            t.var.push(layer_vars[depth]);
            frontier.push(t.labels.len() - 1);
        }
    }
    t
}

/// Solves `a x = b` (square, symmetric positive definite) with nalgebra's
/// Cholesky factorization: an implementation independent of the field's.
fn solve(a: Vec<Vec<f64>>, b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    let m = nalgebra::DMatrix::from_fn(n, n, |r, c| a[r][c]);
    let chol = m
        .cholesky()
        .expect("covariance plus noise is positive definite");
    chol.solve(&nalgebra::DVector::from_vec(b))
        .iter()
        .copied()
        .collect()
}

/// Dense posterior (mean, variance) of θ at every node given observations
/// `(node, x, variance)`.
fn dense(t: &Tree, obs: &[(usize, f64, f64)]) -> Vec<(f64, f64)> {
    let n = t.labels.len();
    // ancestors-or-self sets
    let anc: Vec<Vec<usize>> = (0..n)
        .map(|i| {
            let mut v = vec![i];
            let mut c = i;
            while let Some(p) = t.parent[c] {
                v.push(p);
                c = p;
            }
            v
        })
        .collect();
    let mu: Vec<f64> = (0..n)
        .map(|i| anc[i].iter().map(|&j| t.prior[j]).sum())
        .collect();
    let cov = |i: usize, j: usize| -> f64 {
        anc[i]
            .iter()
            .filter(|k| anc[j].contains(k))
            .map(|&k| t.var[k])
            .sum()
    };
    let m = obs.len();
    if m == 0 {
        return (0..n).map(|i| (mu[i], cov(i, i))).collect();
    }
    let syy: Vec<Vec<f64>> = (0..m)
        .map(|a| {
            (0..m)
                .map(|b| cov(obs[a].0, obs[b].0) + if a == b { obs[a].2 } else { 0.0 })
                .collect()
        })
        .collect();
    let resid: Vec<f64> = obs.iter().map(|&(i, x, _)| x - mu[i]).collect();
    let alpha = solve(syy.clone(), resid);
    (0..n)
        .map(|i| {
            let k: Vec<f64> = obs.iter().map(|&(j, _, _)| cov(i, j)).collect();
            let mean = mu[i] + k.iter().zip(&alpha).map(|(a, b)| a * b).sum::<f64>();
            let w = solve(syy.clone(), k.clone());
            let var = cov(i, i) - k.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>();
            (mean, var)
        })
        .collect()
}

fn addr(field: &Field, labels: &[String]) -> Address {
    let l: Vec<&str> = labels.iter().map(|s| s.as_str()).collect();
    Address::from_labels(field.layers(), &l).unwrap()
}

fn check(field: &Field, t: &Tree, alive: &[bool], obs: &[(usize, f64, f64)]) {
    let want = dense(t, obs);
    for i in 0..t.labels.len() {
        if !alive[i] {
            continue;
        }
        let p = field
            .posterior(&addr(field, &t.labels[i]), "o", "d")
            .unwrap();
        assert!(
            (p.mean - want[i].0).abs() < 1e-9,
            "mean at {:?}: {} vs {}",
            t.labels[i],
            p.mean,
            want[i].0
        );
        assert!(
            (p.variance - want[i].1).abs() < 1e-9,
            "var at {:?}: {} vs {}",
            t.labels[i],
            p.variance,
            want[i].1
        );
    }
}

fn run(seed: u64) {
    let mut rng = Rng(seed | 1);
    let depth = 1 + rng.below(4);
    let layer_vars: Vec<f64> = (0..depth).map(|_| rng.range(0.2, 3.0)).collect();
    let root_var = rng.range(0.2, 3.0);
    let t = random_tree(&mut rng, &layer_vars, root_var);
    let layers: Vec<Layer> = layer_vars
        .iter()
        .enumerate()
        .map(|(i, v)| Layer::with_variance(&format!("l{i}"), *v))
        .collect();
    let mut field = Field::new(layers, root_var, &["o"], &["d"]).unwrap();
    let n = t.labels.len();
    for i in 0..n {
        field
            .set_prior(&addr(&field, &t.labels[i]), "o", "d", t.prior[i])
            .unwrap();
    }
    // Observations (node, x, variance), kept per node so discounts can be mirrored.
    let mut obs: Vec<(usize, f64, f64)> = Vec::new();
    for _ in 0..rng.below(8) + 1 {
        let i = rng.below(n);
        let (x, s) = (rng.range(-5.0, 5.0), rng.range(0.05, 2.0));
        field
            .observe(&addr(&field, &t.labels[i]), "o", "d", x, s)
            .unwrap();
        obs.push((i, x, s));
    }
    let alive = vec![true; n];
    check(&field, &t, &alive, &obs);
    // Discounts: scaling a cell's own precision by f > 0 is each of its
    // observations' variance divided by f; f = 0 drops them.
    for _ in 0..rng.below(3) {
        let i = rng.below(n);
        let f = if rng.below(4) == 0 {
            0.0
        } else {
            rng.range(0.1, 1.0)
        };
        field
            .discount(&addr(&field, &t.labels[i]), "o", "d", f)
            .unwrap();
        if f == 0.0 {
            obs.retain(|o| o.0 != i);
        } else {
            for o in obs.iter_mut().filter(|o| o.0 == i) {
                o.2 /= f;
            }
        }
    }
    check(&field, &t, &alive, &obs);
    // Compactions leave every surviving node's posterior unchanged.
    let mut alive = alive;
    for _ in 0..rng.below(3) {
        let i = rng.below(n);
        if i == 0 || !alive[i] {
            continue;
        }
        field.compact(&addr(&field, &t.labels[i])).unwrap();
        let l = t.labels[i].clone();
        for j in 0..n {
            if t.labels[j].starts_with(&l) {
                alive[j] = false;
            }
        }
        check(&field, &t, &alive, &obs);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn sparse_equals_dense(seed in any::<u64>()) {
        run(seed);
    }
}
