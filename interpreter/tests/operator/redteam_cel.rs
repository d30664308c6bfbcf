//! Red team, issue 31 items 1 and 2 (and the CEL half of 3), SPEC §24: a tenant's
//! `healthCheckExprs` over its own big ConfigMaps. Before, one of these expressions took
//! the operator to 2.7 GiB (and the pod into a crash loop) or held a worker for minutes.
//! Now each evaluation is stopped at 1 000 000 steps / 8 MiB, or at the attempt's
//! `--health-eval-timeout`, on a blocking thread: the tenant's object is `Failed` with a
//! message saying so, the ConfigMaps stay applied, another tenant's release converges
//! meanwhile, and the operator's peak RSS stays under 300 MiB.
//!
//! The operator runs in this test process, so its peak RSS is the process's `VmHWM`, reset
//! through `/proc/self/clear_refs` first (run alone for a clean figure:
//! `cargo test -p opm-operator --test operator redteam_cel -- --nocapture --test-threads=1`).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use opm_core::api::Release;
use serde_json::{Map, Value, json};

use crate::harness::*;

/// `VmHWM` or `VmRSS` of this process, in MiB.
fn mem(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// The operator's memory bound under every SPEC §24 limit, for this test's attacks.
const RSS_CAP_MIB: f64 = 300.0;

/// A Release in `ns` of one ConfigMap `name` with `data`, judged by `current`, watched by
/// the operator of `owner`.
async fn attack(
    ns: &opm_testenv::TestNamespace,
    owner: &str,
    pkg: &Package,
    name: &str,
    data: Map<String, Value>,
    current: &str,
) {
    let src = format!("{name}-src");
    let components = json!({"c": {"cm": configmap(name, Value::Object(data))}});
    pkg.publish(
        &ns.client,
        &ns.name,
        &src,
        &release_package(name, &components),
    )
    .await;
    let mut r = release(
        &ns.name,
        name,
        &src,
        ".",
        json!({"wait": true, "timeout": "10m",
            "healthCheckExprs": [{"apiVersion": "v1", "kind": "ConfigMap", "current": current}]}),
    );
    r.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(TEST_LABEL.into(), owner.into());
    create_rel(&ns.client, &r).await;
}

fn ready_msg(o: &Release) -> String {
    o.status
        .as_ref()
        .and_then(|s| condition(s, "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

fn keys(n: usize, value: impl Fn(usize) -> String) -> Map<String, Value> {
    (0..n)
        .map(|i| (format!("k{i:05}"), json!(value(i))))
        .collect()
}

const TOKEN: &str = "t0ken-the-tenant-must-never-read-back";

/// Every attack of the issue at once, next to an honest tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_health_expressions_fail_their_object_and_the_operator_lives() {
    let (env, a) = namespace().await;
    let b = env.namespace().await.unwrap();
    let op = Operator::start(env, &a.name, |_| {}).await;
    let pkg = Package::start().await;
    // The honest tenant's package is ready before the attacks start.
    let honest_src = "honest-src";
    pkg.publish(
        &b.client,
        &b.name,
        honest_src,
        &release_package(
            "honest",
            &json!({"c": {"cm": configmap("honest", json!({"k": "v"}))}}),
        ),
    )
    .await;

    let before = mem("VmRSS:");
    // "5" resets the peak resident set size (Linux ≥ 4.0).
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
    let started = Instant::now();

    // Item 1: strings doubled in three nested maps over a 46-key ConfigMap (2.7 GiB before).
    let mut strings = keys(45, |_| "v".repeat(16));
    strings.insert("big".into(), json!("x".repeat(32 * 1024)));
    attack(
        &a,
        &a.name,
        &pkg,
        "strings",
        strings,
        "size(data.map(a, data.map(b, data.map(c, data.big + data.big)))) > 0",
    )
    .await;
    // Item 2: a regular expression per key, from the tenant's own values (177 s before).
    let regexes = keys(2_000, |i| {
        format!("^(k0*{i}|[a-z]{{1,40}}[0-9]{{1,40}}){{1,30}}$")
    });
    attack(
        &a,
        &a.name,
        &pkg,
        "regexes",
        regexes,
        "data.all(k, k.matches(data[k]))",
    )
    .await;
    // Item 2: a big map compared with itself once per key (minutes before).
    attack(
        &a,
        &a.name,
        &pkg,
        "selfeq",
        keys(20_000, |_| "v".into()),
        "data.all(k, self == self)",
    )
    .await;
    // Item 3: an error that used to quote the value it failed on.
    let mut leak = Map::new();
    leak.insert("token".into(), json!(TOKEN));
    attack(&a, &a.name, &pkg, "leak", leak, "data.token - 1 > 0").await;

    // The honest tenant, created while the attacks run: converges.
    let mut honest = release(&b.name, "honest", honest_src, ".", json!({"wait": true}));
    honest
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(TEST_LABEL.into(), a.name.clone());
    let t = Instant::now();
    create_rel(&b.client, &honest).await;
    wait_rel(
        &b.client,
        &b.name,
        "honest",
        "honest tenant Ready",
        is_ready_rel,
    )
    .await;
    let honest_took = t.elapsed();

    for name in ["strings", "regexes", "selfeq"] {
        let got = wait_rel(
            &a.client,
            &a.name,
            name,
            "HealthCheckFailed",
            reason_is_rel("HealthCheckFailed"),
        )
        .await;
        let msg = ready_msg(&got);
        eprintln!("{name}: {msg}");
        assert!(
            msg.contains(&format!("ConfigMap/{}/{name}", a.name))
                && msg.contains("health expression of ConfigMap stopped after ")
                && msg.contains("the budget of one evaluation is 1000000 steps and 8388608 bytes"),
            "{name}: {msg}"
        );
    }
    let leak = wait_rel(
        &a.client,
        &a.name,
        "leak",
        "Progressing with the CEL error",
        |r| ready_msg(r).contains("no matching overload for _-_ (string, int)"),
    )
    .await;
    let msg = ready_msg(&leak);
    eprintln!("leak: {msg}");
    assert!(!msg.contains(TOKEN), "{msg}");
    assert!(
        !serde_json::to_string(&leak.status).unwrap().contains(TOKEN),
        "the status quotes the value"
    );

    // Nothing lost: the attackers' ConfigMaps are applied whole.
    let cms: Api<ConfigMap> = Api::namespaced(a.client.clone(), &a.name);
    assert_eq!(cms.get("selfeq").await.unwrap().data.unwrap().len(), 20_000);
    assert_eq!(cms.get("regexes").await.unwrap().data.unwrap().len(), 2_000);
    assert_eq!(cms.get("strings").await.unwrap().data.unwrap().len(), 46);

    let peak = mem("VmHWM:");
    eprintln!(
        "attacks settled in {:.1}s; honest tenant Ready in {:.1}s; operator RSS before \
         {before:.0} MiB, peak {peak:.0} MiB",
        started.elapsed().as_secs_f64(),
        honest_took.as_secs_f64(),
    );
    assert!(
        honest_took < Duration::from_secs(45),
        "the honest tenant took {honest_took:?}"
    );
    assert!(peak < RSS_CAP_MIB, "peak RSS {peak:.0} MiB");
    op.stop().await;
}

/// SPEC §24: an attempt's expressions get `--health-eval-timeout` of a blocking thread;
/// past it the evaluation is stopped and the object is `Failed` naming the time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evaluation_over_the_eval_timeout_fails_its_object_naming_the_time() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |args| {
        args.health_eval_timeout = Duration::from_millis(2);
    })
    .await;
    let pkg = Package::start().await;
    // Under the step budget (20 000 keys, five comparisons each), but far over 2 ms.
    attack(
        &ns,
        &ns.name,
        &pkg,
        "slow",
        keys(20_000, |_| "v".into()),
        "data.all(k, self == self) || true",
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "slow",
        "HealthCheckFailed",
        reason_is_rel("HealthCheckFailed"),
    )
    .await;
    let msg = ready_msg(&got);
    eprintln!("slow: {msg}");
    assert!(
        msg.contains("health expression of ConfigMap stopped after ")
            && msg.contains("ran over 2ms (--health-eval-timeout)"),
        "{msg}"
    );
    op.stop().await;
}
