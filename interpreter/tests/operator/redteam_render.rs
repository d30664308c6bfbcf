//! Red team, issue 13 items 4 and 7 (SPEC §23, §24): a render at and over the caps, with
//! the operator's peak RSS printed, and a `cue` error quoting a Secret value.
//!
//! The operator runs in this test process, so its peak RSS is the process's `VmHWM`,
//! reset through `/proc/self/clear_refs` before each release (run these tests alone:
//! `cargo test -p opm-operator --test operator redteam_render -- --nocapture --test-threads=1`).
//! The releases name a ServiceAccount that does not exist: the attempt renders, builds
//! every object in the core, then stalls `ImpersonationFailed` before any apply, so the
//! figure is the render → objects path of the issue (5000 applies would measure the API
//! server's pace instead).

use std::time::Instant;

use serde_json::json;

use crate::harness::*;

/// `VmHWM` / `VmRSS` of this process, in MiB.
fn mem(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

fn reset_peak() {
    // "5" resets the peak resident set size (Linux ≥ 4.0).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// A package rendering `n` ConfigMaps of `data_bytes` each.
fn big_package(name: &str, n: usize, data_bytes: usize) -> Vec<(&'static str, String)> {
    vec![
        (
            "cue.mod/module.cue",
            "module: \"example.com/test@v0\"\nlanguage: version: \"v0.17.0\"\n".to_string(),
        ),
        (
            "release.cue",
            format!(
                r#"package release

import (
	"list"
	"strings"
)

kind: "ModuleRelease"
metadata: {{name: "{name}", namespace: "default"}}
_v: strings.Repeat("x", {data_bytes})
components: c: {{for i in list.Range(0, {n}, 1) {{"cm\(i)": {{apiVersion: "v1", kind: "ConfigMap", metadata: name: "cm\(i)", data: v: _v}}}}}}
"#
            ),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renders_at_and_over_the_caps_with_the_peak_rss() {
    let (env, ns) = namespace().await;
    let pkg = Package::start().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    // (name, objects, bytes of data each, reason expected, what the message must say)
    let cases: [(&str, usize, usize, &str, &str); 4] = [
        ("at-cap", 5000, 6400, "ImpersonationFailed", "not found"),
        (
            "over-objects",
            5001,
            100,
            "RenderFailed",
            "rendered 5001 objects; the cap is 5000",
        ),
        (
            "over-bytes",
            5000,
            6800,
            "RenderFailed",
            "the cap is 33554432",
        ),
        // The issue's reference: 60 000 ConfigMaps, ~46 MiB (1.1 GiB peak RSS before).
        (
            "issue-13",
            60000,
            660,
            "RenderFailed",
            "the cap is 33554432",
        ),
    ];
    let mut report = Vec::new();
    for (name, n, data, reason, says) in cases {
        pkg.publish(&ns.client, &ns.name, name, &big_package(name, n, data))
            .await;
        let before = mem("VmRSS:");
        reset_peak();
        let started = Instant::now();
        create_rel(
            &ns.client,
            &release(
                &ns.name,
                name,
                name,
                ".",
                json!({"serviceAccountName": "no-such-sa"}),
            ),
        )
        .await;
        let got = wait_rel(&ns.client, &ns.name, name, reason, reason_is_rel(reason)).await;
        let peak = mem("VmHWM:");
        let msg = condition(got.status.as_ref().unwrap(), "Ready")
            .map(|c| c.message.clone())
            .unwrap_or_default();
        assert!(msg.contains(says), "{name}: {msg}");
        report.push(format!(
            "{name:>13}: {n} objects x {data} B: peak RSS {peak:.0} MiB (RSS before {before:.0} MiB) in {:.1}s; Ready: {msg}",
            started.elapsed().as_secs_f64()
        ));
    }
    for line in &report {
        println!("{line}");
    }
    // The operator is alive: a small release still converges.
    pkg.publish(
        &ns.client,
        &ns.name,
        "small",
        &release_package(
            "small",
            &json!({"a": {"one": configmap("small-one", json!({"k": "v"}))}}),
        ),
    )
    .await;
    create_rel(
        &ns.client,
        &release(
            &ns.name,
            "small",
            "small",
            ".",
            json!({"serviceAccountName": "no-such-sa"}),
        ),
    )
    .await;
    wait_rel(
        &ns.client,
        &ns.name,
        "small",
        "the small release rendered",
        reason_is_rel("ImpersonationFailed"),
    )
    .await;
    op.stop().await;
}

/// Item 7: a `cue` error quoting a Secret's `stringData` value. The value must appear
/// nowhere: not in the status (conditions, history), the events or the traces; the
/// trace files are 0600.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cue_error_quoting_a_secret_value_leaks_it_nowhere() {
    use std::os::unix::fs::PermissionsExt;
    const SECRET: &str = "hunter2-Zq9x";
    let (env, ns) = namespace().await;
    let pkg = Package::start().await;
    let files = vec![
        (
            "cue.mod/module.cue",
            "module: \"example.com/test@v0\"\nlanguage: version: \"v0.17.0\"\n".to_string(),
        ),
        (
            "release.cue",
            format!(
                r#"package release

kind: "ModuleRelease"
metadata: {{name: "leak", namespace: "default"}}
components: db: s: {{
	apiVersion: "v1", kind: "Secret", metadata: name: "db"
	stringData: password: "{SECRET}" & =~"^[0-9]+$"
}}
"#
            ),
        ),
    ];
    pkg.publish(&ns.client, &ns.name, "leak", &files).await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_rel(
        &ns.client,
        &release(
            &ns.name,
            "leak",
            "leak",
            ".",
            json!({"serviceAccountName": "deployer"}),
        ),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "leak",
        "RenderFailed",
        reason_is_rel("RenderFailed"),
    )
    .await;
    let status = serde_json::to_string(&got.status).unwrap();
    println!("status: {status}");
    assert!(status.contains("<redacted>"), "{status}");
    assert!(status.contains("stringData.password"), "{status}");
    assert!(
        !status.contains(SECRET),
        "status leaks the secret: {status}"
    );
    let evs = events_with(&ns.client, &ns.name, "leak", &["RenderFailed"]).await;
    let evs_text = serde_json::to_string(&evs).unwrap();
    assert!(
        !evs_text.contains(SECRET),
        "events leak the secret: {evs_text}"
    );
    let traces = op.traces();
    assert!(traces.contains("RenderFailed"), "the attempt was traced");
    assert!(!traces.contains(SECRET), "a trace leaks the secret");
    for e in std::fs::read_dir(&op.trace_dir).unwrap().flatten() {
        let mode = e.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}: {mode:o}", e.path().display());
    }
    op.stop().await;
}

/// Item 4: a package that allocates without bound, under `--render-memory-limit 256Mi`:
/// the `cue` run dies of its limit, the release stalls `RenderFailed` naming the limit,
/// and the operator (this process) is alive and renders the next release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_stalls_render_failed_and_the_operator_lives() {
    let (env, ns) = namespace().await;
    let pkg = Package::start().await;
    let files = vec![
        (
            "cue.mod/module.cue",
            "module: \"example.com/test@v0\"\nlanguage: version: \"v0.17.0\"\n".to_string(),
        ),
        (
            "release.cue",
            r#"package release

import "list"

kind: "ModuleRelease"
metadata: {name: "bomb", namespace: "default"}
_big: [for i in list.Range(0, 50000000, 1) {n: i, s: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}]
components: c: cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "bomb", data: n: "\(len(_big))"}
"#
            .to_string(),
        ),
    ];
    pkg.publish(&ns.client, &ns.name, "bomb", &files).await;
    let op = Operator::start(env, &ns.name, |a| a.render_memory_limit = 256 << 20).await;
    let started = Instant::now();
    create_rel(
        &ns.client,
        &release(
            &ns.name,
            "bomb",
            "bomb",
            ".",
            json!({"serviceAccountName": "no-such-sa"}),
        ),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "bomb",
        "RenderFailed",
        reason_is_rel("RenderFailed"),
    )
    .await;
    let msg = condition(got.status.as_ref().unwrap(), "Stalled")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    println!(
        "memory bomb under --render-memory-limit 256Mi: {msg} after {:.1}s; operator peak RSS {:.0} MiB",
        started.elapsed().as_secs_f64(),
        mem("VmHWM:")
    );
    assert!(
        msg.contains("cue ran out of memory: the limit of one render is 256.0 MiB"),
        "{msg}"
    );
    pkg.publish(
        &ns.client,
        &ns.name,
        "small",
        &release_package(
            "small",
            &json!({"a": {"one": configmap("small-one", json!({"k": "v"}))}}),
        ),
    )
    .await;
    create_rel(
        &ns.client,
        &release(
            &ns.name,
            "small",
            "small",
            ".",
            json!({"serviceAccountName": "no-such-sa"}),
        ),
    )
    .await;
    wait_rel(
        &ns.client,
        &ns.name,
        "small",
        "the next release rendered",
        reason_is_rel("ImpersonationFailed"),
    )
    .await;
    op.stop().await;
}
