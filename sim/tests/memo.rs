//! Answering unchanged NoOp attempts from the world's memo changes nothing: every example
//! scenario, the 10 000-release one shortened to 300 releases and 3 hours, and one made to
//! exercise the memo (events of every kind, windowed, counted and random faults, a delay,
//! a slow rollout), give the same timeline, releases, objects and metrics with the memo as
//! without it.

use std::path::Path;

use opm_sim::scenario::Scenario;
use opm_world::{Retention, World};

fn load(path: &Path) -> Scenario {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

fn run(s: &Scenario, memo: bool) -> (World, Vec<opm_world::TimelineEntry>) {
    let end = s.end().unwrap();
    let mut w = s
        .build()
        .unwrap()
        .with_retention(Retention::Timeline)
        .with_attempt_memo(memo);
    let mut timeline = Vec::new();
    while w.next_wakeup().is_some_and(|t| t <= end) {
        w.step().unwrap();
        timeline.extend(w.drain_timeline());
    }
    (w, timeline)
}

fn same_with_and_without_memo(s: &Scenario, name: &str) {
    let (plain, plain_timeline) = run(s, false);
    let (memo, memo_timeline) = run(s, true);
    assert_eq!(plain.memoised_attempts(), 0);
    assert_eq!(memo_timeline, plain_timeline, "{name}: timeline");
    assert_eq!(memo.releases(), plain.releases(), "{name}: releases");
    assert_eq!(memo.store(), plain.store(), "{name}: objects");
    assert_eq!(memo.metrics(), plain.metrics(), "{name}: metrics");
    assert_eq!(memo.now(), plain.now(), "{name}: clock");
}

#[test]
fn the_memo_changes_no_example_scenario() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/sim");
    for name in [
        "artifact-outage.yaml",
        "rbac-fixed.yaml",
        "stalled-render.yaml",
        "flaky-fleet.yaml",
        "slow-rollout.yaml",
        "missing-platform.yaml",
        "hooks.yaml",
    ] {
        same_with_and_without_memo(&load(&dir.join(name)), name);
    }
    let text = std::fs::read_to_string(dir.join("scale-10k.yaml"))
        .unwrap()
        .replace("copies: 7000", "copies: 210")
        .replace("copies: 3000", "copies: 90")
        .replace("\nduration: 24h", "\nduration: 3h");
    let scaled: Scenario = serde_saphyr::from_str(&text).unwrap();
    same_with_and_without_memo(&scaled, "scale-10k.yaml at 300 releases, 3 h");
}

#[test]
fn the_memo_changes_nothing_through_events_and_faults_of_every_kind() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/memo-events.yaml");
    let mut s = load(&file);
    for seed in [3, 7, 11] {
        s.seed = seed;
        same_with_and_without_memo(&s, &format!("memo-events.yaml, seed {seed}"));
    }
    let (w, timeline) = run(&s, true);
    // A random health fault can hit every release until the faults are cleared at 3h20m,
    // and every event starts the memos again: about a quarter are answered from them.
    assert!(
        w.memoised_attempts() * 5 > timeline.len() as u64,
        "the memo answered {} of {} attempts",
        w.memoised_attempts(),
        timeline.len()
    );
}
