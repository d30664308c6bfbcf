//! The faults. Each case builds its fleet, injects one fault inside the phase it names,
//! stops the fault, and fills its row from the checks in [`crate::world`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::Api;
use opm_core::api::Release;
use opm_testenv::{Fault, RestartableApiServer};

use crate::report::Row;
use crate::world::{Fleet, OperatorProc};

const RELEASES: usize = 4;
/// ConfigMaps per release in the apply / prune cases: ~100 writes at 20 qps take seconds.
const OBJECTS: usize = 25;
/// What the prune cases shrink each release to (20 stale objects each).
const KEPT: usize = 5;
const CONVERGE: Duration = Duration::from_secs(75);
const PHASE: Duration = Duration::from_secs(40);

type CaseFn = fn(Arc<RestartableApiServer>, String) -> Pin<Box<dyn Future<Output = Row> + Send>>;

pub fn all() -> Vec<(&'static str, CaseFn)> {
    vec![
        ("api-server-kill-mid-apply", |a, n| {
            Box::pin(kill_case(a, n, Target::ApiServer, Phase::Apply))
        }),
        ("api-server-kill-mid-prune", |a, n| {
            Box::pin(kill_case(a, n, Target::ApiServer, Phase::Prune))
        }),
        ("operator-kill-mid-apply", |a, n| {
            Box::pin(kill_case(a, n, Target::Operator, Phase::Apply))
        }),
        ("operator-kill-mid-prune", |a, n| {
            Box::pin(kill_case(a, n, Target::Operator, Phase::Prune))
        }),
        ("api-server-kill-mid-deletion", |a, n| {
            Box::pin(deletion_case(a, n))
        }),
        ("artifact-500", |a, n| {
            Box::pin(artifact_case(a, n, ArtifactFault::Status500))
        }),
        ("artifact-truncated", |a, n| {
            Box::pin(artifact_case(a, n, ArtifactFault::Truncated))
        }),
        ("artifact-slow", |a, n| {
            Box::pin(artifact_case(a, n, ArtifactFault::Slow))
        }),
        ("cue-deadline", |a, n| Box::pin(cue_deadline_case(a, n))),
    ]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    ApiServer,
    Operator,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Apply,
    Prune,
}

/// Stops the fault, waits for convergence, audits, deletes `r0`: the common tail.
async fn finish(mut row: Row, fleet: &mut Fleet, op: &mut OperatorProc, healed: Instant) -> Row {
    match fleet.wait_converged(CONVERGE).await {
        Ok(_) => {
            row.converged = true;
            row.converge = Some(healed.elapsed());
        }
        Err(e) => {
            row.problems.push(format!(
                "not converged: {e}; operator log tail: {}",
                op.log_tail()
            ));
            return row;
        }
    }
    let (wrong, problems) = fleet.audit().await;
    row.wrong_deletions += wrong;
    row.problems.extend(problems);
    if !op.running() {
        row.problems.push(format!(
            "the operator process exited during the fault; log tail: {}",
            op.log_tail()
        ));
    }
    if let Err(e) = fleet.delete_and_check(0, CONVERGE).await {
        row.problems.push(format!("deletion of r0: {e}"));
    }
    // The deletion pruned r0's objects and nothing else.
    let (wrong, problems) = fleet.audit().await;
    row.wrong_deletions += wrong;
    row.problems.extend(problems);
    row
}

async fn kill_case(
    api: Arc<RestartableApiServer>,
    ns: String,
    target: Target,
    phase: Phase,
) -> Row {
    let what = match target {
        Target::ApiServer => "kube-apiserver+etcd SIGKILL, restart on same data/port",
        Target::Operator => "opm-operator SIGKILL, restart",
    };
    let when = match phase {
        Phase::Apply => "during apply",
        Phase::Prune => "during prune",
    };
    let mut row = Row::new("", format!("{what} {when}"), RELEASES);
    let client = api.client().await.expect("client");
    let mut fleet = Fleet::new(client, &ns, RELEASES).await;
    fleet.create_sentinels().await;
    fleet.publish_all(OBJECTS).await;
    let mut op = OperatorProc::start(&api, &ns, &[]);
    fleet.create_releases().await;
    let total = RELEASES * OBJECTS;
    let at = match phase {
        Phase::Apply => {
            fleet
                .wait_owned("a third of the objects applied", PHASE, |n| n >= total / 3)
                .await
        }
        Phase::Prune => {
            if let Err(e) = fleet.wait_converged(CONVERGE).await {
                row.problems.push(format!("setup did not converge: {e}"));
                return row;
            }
            fleet.publish_all(KEPT).await;
            fleet
                .wait_owned("a third of the stale objects pruned", PHASE, |n| {
                    n <= total - (total - RELEASES * KEPT) / 3
                })
                .await
        }
    };
    match target {
        Target::ApiServer => api.kill(),
        Target::Operator => op.kill().await,
    }
    // What was there right after the kill (the API server is down: use the count before).
    let (lo, hi) = match phase {
        Phase::Apply => (0, total),
        Phase::Prune => (RELEASES * KEPT, total),
    };
    let after = if target == Target::Operator {
        fleet.owned_total().await.unwrap_or(at)
    } else {
        at
    };
    row.hit = format!("{after} of {total} objects present at the kill (phase range {lo}..{hi})");
    if !(after > lo && after < hi) {
        row.problems
            .push(format!("the kill missed the {when} window: {}", row.hit));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    match target {
        Target::ApiServer => match api.restart().await {
            Ok(took) => row.hit.push_str(&format!(
                "; API server back after {:.1}s",
                took.as_secs_f64()
            )),
            Err(e) => {
                row.problems.push(format!("restart: {e}"));
                return row;
            }
        },
        Target::Operator => op.restart().await,
    }
    let healed = Instant::now();
    finish(row, &mut fleet, &mut op, healed).await
}

#[derive(Clone, Copy)]
enum ArtifactFault {
    Status500,
    Truncated,
    Slow,
}

async fn artifact_case(api: Arc<RestartableApiServer>, ns: String, kind: ArtifactFault) -> Row {
    let fault = match kind {
        ArtifactFault::Status500 => "artifact server answers 500",
        ArtifactFault::Truncated => {
            "artifact bodies truncated (half: short with honest length, half: connection dropped)"
        }
        ArtifactFault::Slow => "artifact server answers after 4s (--fetch-timeout 1s)",
    };
    let mut row = Row::new("", fault, RELEASES);
    let client = api.client().await.expect("client");
    let mut fleet = Fleet::new(client.clone(), &ns, RELEASES).await;
    fleet.create_sentinels().await;
    fleet.publish_all(10).await;
    for (i, p) in fleet.paths.iter().enumerate() {
        let f = match kind {
            ArtifactFault::Status500 => Fault::status(500),
            ArtifactFault::Truncated if i % 2 == 0 => Fault::truncate_to(200),
            ArtifactFault::Truncated => Fault::abort_after(200),
            ArtifactFault::Slow => Fault::delay(Duration::from_secs(4)),
        };
        fleet.server.set_fault(p, f);
    }
    let mut op = OperatorProc::start(&api, &ns, &["--fetch-timeout".into(), "1s".into()]);
    fleet.create_releases().await;
    match wait_reasons(&client, &ns, &fleet.releases, "FetchFailed").await {
        Ok(()) => {
            let hits: u64 = fleet.paths.iter().map(|p| fleet.server.hits(p)).sum();
            row.hit = format!("all {RELEASES} releases FetchFailed; {hits} faulty responses");
        }
        Err(e) => row.problems.push(e),
    }
    for p in &fleet.paths {
        fleet.server.clear_fault(p);
    }
    let healed = Instant::now();
    finish(row, &mut fleet, &mut op, healed).await
}

/// Polls until every release's Ready reason is `reason` (each saw the fault).
async fn wait_reasons(
    client: &kube::Client,
    ns: &str,
    names: &[String],
    reason: &str,
) -> Result<(), String> {
    let api = Api::<Release>::namespaced(client.clone(), ns);
    let start = Instant::now();
    let mut seen = vec![String::new(); names.len()];
    let mut hit = vec![false; names.len()];
    loop {
        for (i, n) in names.iter().enumerate() {
            if let Ok(r) = api.get(n).await {
                let got = r
                    .status
                    .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"))
                    .map(|c| c.reason)
                    .unwrap_or_default();
                hit[i] |= got == reason;
                seen[i] = got;
            }
        }
        if hit.iter().all(|h| *h) {
            return Ok(());
        }
        if start.elapsed() > PHASE {
            return Err(format!(
                "not every release reported {reason}: last reasons {seen:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `cue` that sleeps past `--render-timeout` for its first `RELEASES` export calls, and
/// records their pids so the case can prove they were killed.
async fn cue_deadline_case(api: Arc<RestartableApiServer>, ns: String) -> Row {
    let mut row = Row::new(
        "",
        format!("first {RELEASES} `cue export` runs hang (--render-timeout 2s)"),
        RELEASES,
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let real = opm_testenv::tools::cue_bin().expect("cue");
    let script = dir.path().join("cue");
    let state = dir.path();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             if [ \"$1\" = export ]; then\n\
               n=$(flock '{s}/lock' sh -c 'n=$(cat {s}/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > {s}/count; echo $n')\n\
               if [ \"$n\" -le {RELEASES} ]; then echo $$ >> '{s}/hung'; exec sleep 60; fi\n\
             fi\n\
             exec '{real}' \"$@\"\n",
            s = state.display(),
            real = real.display()
        ),
    )
    .expect("wrapper");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let client = api.client().await.expect("client");
    let mut fleet = Fleet::new(client.clone(), &ns, RELEASES).await;
    fleet.create_sentinels().await;
    fleet.publish_all(10).await;
    let mut op = OperatorProc::start(
        &api,
        &ns,
        &[
            "--cue-binary".into(),
            script.display().to_string(),
            "--render-timeout".into(),
            "2s".into(),
        ],
    );
    fleet.create_releases().await;
    if let Err(e) = wait_reasons(&client, &ns, &fleet.releases, "RenderFailed").await {
        row.problems.push(e);
    }
    let healed = Instant::now();
    let hung: Vec<String> = std::fs::read_to_string(state.join("hung"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    let alive: Vec<&String> = hung
        .iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| !s.contains(") Z "))
        })
        .collect();
    row.hit = format!(
        "{} hung cue runs, {} still alive after the deadline",
        hung.len(),
        alive.len()
    );
    if hung.len() != RELEASES || !alive.is_empty() {
        row.problems
            .push(format!("cue not killed at its deadline: {}", row.hit));
    }
    finish(row, &mut fleet, &mut op, healed).await
}

/// Every release deleted at once; the API server is killed a third of the way into the
/// deletion prunes. Afterwards every release is gone (no finalizer left), every owned
/// object pruned, every sentinel kept.
async fn deletion_case(api: Arc<RestartableApiServer>, ns: String) -> Row {
    let mut row = Row::new(
        "",
        "kube-apiserver+etcd SIGKILL, restart on same data/port during deletion of every release",
        RELEASES,
    );
    let client = api.client().await.expect("client");
    let mut fleet = Fleet::new(client.clone(), &ns, RELEASES).await;
    fleet.create_sentinels().await;
    fleet.publish_all(OBJECTS).await;
    let mut op = OperatorProc::start(&api, &ns, &[]);
    fleet.create_releases().await;
    if let Err(e) = fleet.wait_converged(CONVERGE).await {
        row.problems.push(format!("setup did not converge: {e}"));
        return row;
    }
    let rels = Api::<Release>::namespaced(client.clone(), &ns);
    for r in &fleet.releases {
        rels.delete(r, &Default::default()).await.expect("delete");
    }
    let total = RELEASES * OBJECTS;
    let at = fleet
        .wait_owned("a third of the objects pruned", PHASE, |n| {
            n <= total - total / 3
        })
        .await;
    api.kill();
    row.hit = format!("{at} of {total} objects present at the kill (phase range 0..{total})");
    if at == 0 || at >= total {
        row.problems
            .push(format!("the kill missed the deletion window: {}", row.hit));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    match api.restart().await {
        Ok(took) => row.hit.push_str(&format!(
            "; API server back after {:.1}s",
            took.as_secs_f64()
        )),
        Err(e) => {
            row.problems.push(format!("restart: {e}"));
            return row;
        }
    }
    let healed = Instant::now();
    loop {
        let left = match rels.list(&Default::default()).await {
            Ok(l) => l.items,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if left.is_empty() {
            row.converged = true;
            row.converge = Some(healed.elapsed());
            break;
        }
        if healed.elapsed() > CONVERGE {
            let fins: Vec<_> = left
                .iter()
                .map(|r| (r.metadata.name.clone(), r.metadata.finalizers.clone()))
                .collect();
            row.problems.push(format!(
                "releases left after deletion: {fins:?}; {}",
                op.log_tail()
            ));
            return row;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for e in fleet.expected.iter_mut() {
        e.clear();
    }
    let (wrong, problems) = fleet.audit().await;
    row.wrong_deletions += wrong;
    row.problems.extend(problems);
    if !op.running() {
        row.problems.push(format!(
            "the operator process exited during the fault; log tail: {}",
            op.log_tail()
        ));
    }
    row
}

/// The checks can fail: a sentinel deleted by hand and a desired object that is missing
/// are both counted as wrong deletions (no operator involved).
pub async fn audit_control(api: &RestartableApiServer) {
    let client = api.client().await.expect("client");
    let mut fleet = Fleet::new(client.clone(), "chaos-control", 1).await;
    fleet.create_sentinels().await;
    assert_eq!(fleet.audit().await.0, 0, "a clean namespace audits clean");
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client, "chaos-control")
        .delete("sentinel-plain", &Default::default())
        .await
        .expect("delete sentinel");
    fleet.expected[0].insert("r0-cm-0".into());
    let (wrong, problems) = fleet.audit().await;
    assert_eq!(wrong, 2, "{problems:?}");
}
