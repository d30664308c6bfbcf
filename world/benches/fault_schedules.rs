//! Ten thousand random fault schedules in the simulated world (`cargo bench --bench
//! fault_schedules`, a release build): each runs one virtual hour of 4–15 faults (every
//! effect kind, fixed windows, counted or open-ended), new artifacts, restarts and requests,
//! then heals; every release must converge to
//! Ready with an honest inventory and no wrong deletion. Prints the counts and the rate.
//!
//! `OPM_FAULT_SCHEDULES` sets the count (default 10 000), `OPM_FAULT_SEED` the seed.

#[path = "../tests/world_support/mod.rs"]
mod world_support;

use std::collections::BTreeMap;
use std::time::Instant;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use world_support::*;

const HORIZON: u32 = 3600;

#[derive(Default)]
struct Tally {
    schedules: usize,
    converged: usize,
    wrong_deletions: usize,
    attempts: usize,
    deletions: usize,
    faults_by_kind: BTreeMap<String, usize>,
    failures: Vec<String>,
}

fn worker(seed: u64, count: usize) -> Tally {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &key),
    );
    let strategy = (setup(), busy_history(4, 16, HORIZON, true));
    let mut t = Tally::default();
    for _ in 0..count {
        let (s, h) = strategy
            .new_tree(&mut runner)
            .expect("generating a schedule")
            .current();
        for (_, e) in &h {
            if let Ev::Fault { kind, .. } = e {
                *t.faults_by_kind.entry(format!("{kind:?}")).or_default() += 1;
            }
        }
        t.schedules += 1;
        let checked = run_and_heal(&s, &h, HORIZON).and_then(|w| {
            let wrong = wrong_deletions(&w);
            t.wrong_deletions += wrong.len();
            if !wrong.is_empty() {
                return Err(proptest::test_runner::TestCaseError::fail(format!(
                    "wrong deletions: {wrong:?}"
                )));
            }
            check_converged(&w)
        });
        match checked {
            Ok(c) => {
                t.converged += 1;
                t.attempts += c.attempts;
                t.deletions += c.deletions;
            }
            Err(e) => t
                .failures
                .push(format!("seed {seed}: {e}\n  setup {s:?}\n  history {h:?}")),
        }
    }
    t
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument that doesn't name us skips the run.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if !args.is_empty() && !args.iter().any(|a| "fault_schedules".contains(a.as_str())) {
        return;
    }
    let total: usize = std::env::var("OPM_FAULT_SCHEDULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let seed: u64 = std::env::var("OPM_FAULT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20261130);
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(8);
    #[allow(clippy::disallowed_methods)] // the bench's own stopwatch, not the core's clock
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let count = total / threads + usize::from(i < total % threads);
            std::thread::spawn(move || worker(seed.wrapping_add(i as u64), count))
        })
        .collect();
    let mut all = Tally::default();
    for h in handles {
        let t = h.join().expect("a worker panicked");
        all.schedules += t.schedules;
        all.converged += t.converged;
        all.wrong_deletions += t.wrong_deletions;
        all.attempts += t.attempts;
        all.deletions += t.deletions;
        for (k, v) in t.faults_by_kind {
            *all.faults_by_kind.entry(k).or_default() += v;
        }
        all.failures.extend(t.failures);
    }
    let secs = started.elapsed().as_secs_f64();
    println!("fault schedules: {}", all.schedules);
    println!("converged:       {}", all.converged);
    println!("wrong deletions: {}", all.wrong_deletions);
    println!(
        "attempts:        {} ({:.0}/s)",
        all.attempts,
        all.attempts as f64 / secs
    );
    println!("objects pruned:  {}", all.deletions);
    println!("faults by effect kind: {:?}", all.faults_by_kind);
    println!("elapsed:         {secs:.1} s on {threads} threads (seed {seed})");
    if !all.failures.is_empty() {
        for f in all.failures.iter().take(3) {
            eprintln!("FAILED: {f}");
        }
        eprintln!(
            "{} of {} schedules did not converge cleanly",
            all.failures.len(),
            all.schedules
        );
        std::process::exit(1);
    }
    assert_eq!(
        all.faults_by_kind.len(),
        opm_core::effect::EffectKind::AWAITED.len(),
        "every awaited effect kind must be faulted at least once"
    );
}
