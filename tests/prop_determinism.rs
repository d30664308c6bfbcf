//! Same setup, same seed, same history → byte-identical traces; and every recorded trace
//! replays: feeding an attempt's inputs to a fresh machine gives the same effects.
//! `PROPTEST_CASES` sets the case count (default 8).

mod world_support;

use opm_core::input::Input;
use opm_core::world::{AttemptLog, World};
use opm_core::{Attempt, Effect};
use proptest::prelude::*;
use world_support::*;

const HORIZON: u32 = 3600;

fn traces(w: &World) -> Vec<String> {
    w.logs()
        .iter()
        .flat_map(|l| l.trace_lines(w.config()))
        .collect()
}

/// Replays one attempt's recorded inputs (round-tripped through its JSON trace) and
/// returns the first batch that differs.
fn replay(w: &World, log: &AttemptLog) -> Result<(), String> {
    let lines = log.trace_lines(w.config());
    let mut inputs: Vec<Input> = Vec::new();
    let mut recorded: Vec<Effect> = Vec::new();
    for line in &lines[1..] {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
        if let Some(i) = v.get("in") {
            inputs.push(serde_json::from_value(i.clone()).map_err(|e| format!("input: {e}"))?);
        } else if let Some(o) = v.get("out") {
            recorded.push(serde_json::from_value(o.clone()).map_err(|e| format!("effect: {e}"))?);
        }
    }
    let mut it = inputs.into_iter();
    let first = it.next().ok_or("no input")?;
    let (mut m, mut got) = Attempt::start(w.config(), first);
    for i in it {
        got.extend(m.step(i).map_err(|e| e.to_string())?);
    }
    if got != recorded {
        let n = got
            .iter()
            .zip(&recorded)
            .take_while(|(a, b)| a == b)
            .count();
        return Err(format!(
            "effect {n} differs: replayed {:?}, recorded {:?}",
            got.get(n),
            recorded.get(n)
        ));
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
    }
}
