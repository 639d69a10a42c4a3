//! `decide` at 1,000 sources × 5 archetypes × 3 dimensions, and `observe` at depth 4.

use criterion::{criterion_group, criterion_main, Criterion};
use routing::field::{Field, Layer};
use std::hint::black_box;

const OPTIONS: [&str; 5] = [
    "browser",
    "desktop",
    "container_render",
    "container_plain",
    "phone",
];

fn populated() -> Field {
    let layers = vec![
        Layer::new("source"),
        Layer::new("binding"),
        Layer::new("task"),
        Layer::new("environment"),
    ];
    let mut f = Field::new(
        layers,
        1.0,
        &OPTIONS,
        &["reliability", "latency", "financial"],
    )
    .unwrap();
    for s in 0..1_000 {
        let a = f.parse(&format!("s{s}/api/t0/x")).unwrap();
        for o in OPTIONS {
            for (d, x) in [("reliability", 0.1), ("latency", 0.7), ("financial", 0.0)] {
                f.observe(&a, o, d, x, 0.25).unwrap();
            }
        }
    }
    f
}

fn bench(c: &mut Criterion) {
    let f = populated();
    let at = f.parse("s500/api/t1/x").unwrap();
    c.bench_function("decide_1000x5x3", |b| {
        b.iter(|| black_box(f.decide(black_box(&at), 1.0, &OPTIONS).unwrap()))
    });
    let mut g = populated();
    let leaf = g.parse("s42/api/t0/x").unwrap();
    c.bench_function("observe_depth4", |b| {
        b.iter(|| {
            black_box(
                g.observe(black_box(&leaf), "browser", "reliability", 1.0, 0.25)
                    .unwrap(),
            )
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
