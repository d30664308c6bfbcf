//! Inputs per second through the machine alone: a full successful attempt (finalizer,
//! render, apply, status) and a NoOp attempt, replayed from inputs the world recorded.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use opm_core::input::Input;
use opm_core::world::{ModuleDef, World, fixtures};
use opm_core::{Attempt, Config, Outcome};

const MODULE: &str = "example.com/modules/web@v0";

/// Inputs of the first (Applied) and second (NoOp) attempt of a web-module release.
fn recorded() -> (Vec<Input>, Vec<Input>) {
    let start = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut w = World::new(Config::default(), start, 1);
    w.add_module(MODULE, "v0.2.1", ModuleDef::web());
    let key = w
        .create_release(fixtures::module_release("demo", "app", MODULE, "v0.2.1"))
        .unwrap();
    let applied = w.run_attempt(&key).unwrap().clone();
    assert_eq!(applied.outcome, Some(Outcome::Applied));
    let noop = w.run_attempt(&key).unwrap().clone();
    assert_eq!(noop.outcome, Some(Outcome::NoOp));
    (applied.inputs, noop.inputs)
}

fn drain(cfg: &Config, inputs: &[Input]) -> usize {
    let (mut m, first) = Attempt::start(cfg, inputs[0].clone());
    let mut n = first.len();
    for i in &inputs[1..] {
        n += m.step(i.clone()).expect("recorded input accepted").len();
    }
    n
}

fn bench(c: &mut Criterion) {
    let cfg = Config::default();
    let (applied, noop) = recorded();
    let mut g = c.benchmark_group("step");
    for (name, inputs) in [("full_success_attempt", &applied), ("noop_attempt", &noop)] {
        g.throughput(Throughput::Elements(inputs.len() as u64));
        g.bench_function(name, |b| b.iter(|| drain(&cfg, black_box(inputs))));
    }
    g.finish();
    println!(
        "step: full successful attempt = {} inputs, NoOp attempt = {} inputs (criterion's thrpt = inputs/s)",
        applied.len(),
        noop.len()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
