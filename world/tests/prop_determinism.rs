//! Same setup, same seed, same history → byte-identical traces; and every recorded trace
//! replays: feeding an attempt's inputs to a fresh machine gives the same effects.
//! `PROPTEST_CASES` sets the case count (default 8).

mod world_support;

use opm_world::{AttemptLog, World};
use proptest::prelude::*;
use world_support::*;

const HORIZON: u32 = 3600;

fn traces(w: &World) -> Vec<String> {
    w.logs()
        .iter()
        .flat_map(|l| l.trace_lines(w.config()))
        .collect()
}

/// Replays one attempt's trace with the core's `trace::replay`.
fn replay(w: &World, log: &AttemptLog) -> Result<(), String> {
    let lines = log.trace_lines(w.config());
    opm_core::trace::replay(lines.iter().map(String::as_str)).map_err(|d| d.to_string())
}

/// A whole release's history as one trace (a new attempt at each `observed`) also replays.
fn replay_all(w: &World) -> Result<(), String> {
    let mut by_key: std::collections::BTreeMap<_, Vec<String>> = Default::default();
    for log in w.logs() {
        let lines = log.trace_lines(w.config());
        let entry = by_key.entry(log.key.clone()).or_default();
        if entry.is_empty() {
            entry.push(lines[0].clone());
        }
        entry.extend(lines.into_iter().skip(1));
    }
    for (k, lines) in by_key {
        opm_core::trace::replay(lines.iter().map(String::as_str))
            .map_err(|d| format!("{k:?}: {d}"))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(pt_config("proptest-regressions/prop_determinism.txt", 8))]

    #[test]
    fn same_history_gives_byte_identical_traces(s in setup(), h in history(12, HORIZON, false)) {
        let a = run(&s, &h, HORIZON);
        let b = run(&s, &h, HORIZON);
        let (ta, tb) = (traces(&a), traces(&b));
        prop_assert_eq!(ta.len(), tb.len());
        for (x, y) in ta.iter().zip(&tb) {
            prop_assert_eq!(x, y);
        }
        prop_assert_eq!(serde_json::to_string(a.timeline()).unwrap(), serde_json::to_string(b.timeline()).unwrap());
    }

    #[test]
    fn every_recorded_trace_replays(s in setup(), h in history(12, HORIZON, false)) {
        let w = run(&s, &h, HORIZON);
        for log in w.logs() {
            replay(&w, log).map_err(|e| TestCaseError::fail(format!("attempt {} of {:?}: {e}", log.id, log.key)))?;
        }
        replay_all(&w).map_err(TestCaseError::fail)?;
    }
}

/// A corrupted trace is refused with the first difference named.
#[test]
fn a_tampered_trace_does_not_replay() {
    let s = Setup {
        prune: [true; 4],
        seed: 1,
    };
    let w = run(&s, &[], 60);
    let log = w
        .logs()
        .iter()
        .find(|l| l.outcome == Some(opm_core::Outcome::Applied))
        .unwrap();
    let mut lines = log.trace_lines(w.config());
    let last = lines.len() - 1;
    lines[last] = lines[last].replace("\"applied\"", "\"noOp\"");
    let err = opm_core::trace::replay(lines.iter().map(String::as_str)).unwrap_err();
    assert_eq!(err.seq as usize, last - 1, "{err}");
}
