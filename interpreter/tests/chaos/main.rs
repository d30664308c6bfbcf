//! Chaos on the real test cluster: faults injected into a running fleet of releases
//! reconciled by the real `opm-operator` binary, and the proof that nothing is lost once
//! they stop (issue 7, reliability).
//!
//! One API server of its own ([`opm_testenv::RestartableApiServer`]: killable and
//! restartable on the same etcd data and port), one namespace and one operator process per
//! case, the cases one after another (several of them kill shared parts). Each case records
//! a row: fault, releases, evidence that the fault hit the phase it claims, converged,
//! wrong deletions, time to converge. The table is printed and written to
//! `$CARGO_TARGET_DIR/chaos-report.md`; the test fails after all cases ran if any row
//! is not clean.

mod cases;
mod report;
mod world;

use std::sync::Arc;
use std::time::{Duration, Instant};

use opm_testenv::RestartableApiServer;

use crate::report::Row;

/// Each case's own bound; a case over it is a failed row, and the run goes on.
const CASE_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos() {
    let begun = Instant::now();
    let api = Arc::new(RestartableApiServer::start().await.expect("API server"));
    let client = api.client().await.expect("client");
    opm_testenv::install_crds(&client, opm_testenv::flux_source_crds().expect("Flux CRDs"))
        .await
        .expect("Flux CRDs");
    opm_testenv::install_crds(&client, opm_core::api::crds())
        .await
        .expect("our CRDs");

    cases::audit_control(&api).await;

    let mut rows = Vec::new();
    for (n, (name, case)) in cases::all().into_iter().enumerate() {
        let ns = format!("chaos-{n}");
        let started = Instant::now();
        let task = tokio::spawn(case(api.clone(), ns.clone()));
        let row = match tokio::time::timeout(CASE_TIMEOUT, task).await {
            Ok(Ok(mut row)) => {
                row.case = name;
                row
            }
            Ok(Err(panic)) => Row::failed(name, format!("panicked: {}", report::panic_text(panic))),
            Err(_) => Row::failed(name, format!("over the case bound of {CASE_TIMEOUT:?}")),
        };
        eprintln!(
            "chaos: {name} in {:.1}s: {}",
            started.elapsed().as_secs_f64(),
            if row.ok() { "ok" } else { "FAILED" }
        );
        rows.push(row);
    }
    let table = report::markdown(&rows, begun.elapsed(), api.starts());
    println!("\n{table}");
    report::write(&table);
    let bad: Vec<&Row> = rows.iter().filter(|r| !r.ok()).collect();
    assert!(bad.is_empty(), "chaos cases failed:\n{table}");
}
