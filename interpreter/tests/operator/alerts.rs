//! The shipped alert rules and dashboard against a running operator (SPEC §32, §21): after
//! real reconciles of both kinds (an apply, a health wait, a prune, an artifact download)
//! with the events webhook on, every metric and label any rule or panel uses is in what
//! `/metrics` serves over HTTP. `tests/monitoring.rs` parses the same expressions offline.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::*;
use crate::metrics::{free_addr, scrape};
use crate::support::monitoring::{Uses, all_exprs, missing, served};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_and_label_the_rules_and_dashboard_use_is_served() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |a| {
        // Nothing listens there: the webhook's series are served whatever its receiver does.
        a.events_webhook = Some(
            opm_operator::ops::events_webhook::Endpoint::parse("http://127.0.0.1:9/in")
                .expect("URL"),
        );
    })
    .await;
    let addr = free_addr();
    let server = tokio::spawn(opm_operator::ops::endpoints::serve(
        addr.parse().unwrap(),
        op.rt.clone(),
    ));
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), json!({"prune": true})),
    )
    .await;
    let pkg = Package::start().await;
    let two = json!({"c": {
        "a": configmap("al-a", json!({"k": "1"})),
        "b": configmap("al-b", json!({"k": "2"})),
    }});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &two))
        .await;
    // `wait`: the health wait's series too.
    create_rel(
        &ns.client,
        &release(
            &ns.name,
            "r",
            "src",
            ".",
            json!({"prune": true, "wait": true}),
        ),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "web", "web Ready", is_ready_mr).await;
    wait_rel(&ns.client, &ns.name, "r", "r Ready", is_ready_rel).await;
    let one = json!({"c": {"a": configmap("al-a", json!({"k": "1"}))}});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &one))
        .await;
    wait_rel(&ns.client, &ns.name, "r", "r pruned", |o| {
        is_ready_rel(o)
            && o.status
                .as_ref()
                .and_then(|s| s.inventory.as_ref())
                .is_some_and(|i| i.count == 1)
    })
    .await;

    let exprs = all_exprs();
    // Metrics land just after the status that the wait saw: scrape until nothing is missing.
    let deadline = Instant::now() + Duration::from_secs(20);
    let problems = loop {
        let text = scrape(&addr).await;
        let served = served(&text);
        let mut problems = Vec::new();
        for (what, expr) in &exprs {
            let uses = Uses::of(expr).unwrap_or_else(|e| panic!("{what}: {e}"));
            // Names and labels: which outcome or action values show depends on the run.
            problems.extend(missing(what, &uses, &served, false));
        }
        if problems.is_empty() || Instant::now() > deadline {
            break problems;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(
        problems.is_empty(),
        "used by the rules or dashboard but not served:\n{}",
        problems.join("\n")
    );
    server.abort();
    op.stop().await;
}
