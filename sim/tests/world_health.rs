//! Health in the simulated world (SPEC §26): the example scenario `slow-rollout.yaml`.

use opm_core::Outcome;
use opm_sim::scenario::Scenario;

fn scenario() -> Scenario {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/sim/slow-rollout.yaml"
    );
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_slow_rollout_waits_then_is_ready_and_a_failed_one_fails_fast() {
    let s = scenario();
    let w = s.run().expect("runs");
    let start = s.start();
    let of = |name: &str| -> Vec<(u64, Option<Outcome>, String)> {
        w.logs()
            .iter()
            .filter(|l| l.key.name == name)
            .map(|l| {
                let t = l.finished_at.duration_since(start).as_secs() as u64;
                (t, l.outcome, l.reason.clone())
            })
            .collect()
    };
    let web = of("web");
    assert_eq!(web[0].1, Some(Outcome::Applied));
    assert_eq!(web[0].2, "Progressing");
    // Waiting without applying again, until the rollout is done at 90s.
    let ready = web
        .iter()
        .position(|(_, _, r)| r == "NoOp")
        .expect("became healthy");
    assert!(
        web[1..ready]
            .iter()
            .all(|(_, o, r)| *o == Some(Outcome::Progressing) && r == "Progressing")
    );
    assert!(web[ready].0 >= 90, "{web:?}");
    assert!(web[ready].0 < 160, "{web:?}");
    let st = w
        .logs()
        .iter()
        .rev()
        .find(|l| l.key.name == "web")
        .unwrap()
        .status
        .clone()
        .unwrap();
    assert!(
        st.conditions
            .iter()
            .any(|c| c.type_ == "Healthy" && c.status == "True")
    );

    let broken = of("broken");
    let failed = broken
        .iter()
        .find(|(_, _, r)| r == "HealthCheckFailed")
        .expect("failed");
    // 30s after the apply, at the first re-check after it: not at the 5m timeout.
    assert!(failed.0 >= 30 && failed.0 < 60, "{broken:?}");
    let st = w
        .logs()
        .iter()
        .rev()
        .find(|l| l.key.name == "broken")
        .unwrap()
        .status
        .clone()
        .unwrap();
    let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "HealthCheckFailed");
    assert!(
        ready
            .message
            .contains("Deployment/demo/broken (progress deadline exceeded"),
        "{}",
        ready.message
    );
}
