//! Red team, issue 31 (items 3, 4 and 9, SPEC §24, §26, §27) on the real API server:
//!
//! - hostile lists and names in a release's spec (200 `valuesFrom` entries, a
//!   `serviceAccountName` of `a/../b`, a `dependsOn` name with an escape character, 33
//!   `healthChecks`, a 1 025-byte expression, …) are refused by the API server itself, with
//!   a message naming the field, while the same spec at the bound is stored;
//! - `valuesFrom` content over `--max-values-bytes` (a YAML anchor bomb named 16 times, or
//!   five distinct 900 KiB ConfigMaps) stalls `ValuesNotFound` "values from N objects are X
//!   bytes; the cap is M", while another tenant's release converges and the operator's peak
//!   RSS stays under 300 MiB;
//! - a `valuesFrom` Secret edited just after its release turned Ready is applied at once,
//!   every time, with and without a ServiceAccount (the edit used to be missed when it fell
//!   between the read and the start of the values watch);
//! - a `healthChecks` entry naming another namespace's ConfigMap is refused
//!   (`CrossNamespaceRefDenied`), and even with `--allow-cross-namespace-refs` it is read as
//!   the release's ServiceAccount, so the other tenant's data never reaches the attacker's
//!   status or events.

use std::process::Stdio;
use std::time::{Duration, Instant};

use kube::api::{Api, PostParams};
use opm_core::api::{ModuleRelease, Release};
use opm_testenv::{CueRegistry, rbac};
use serde_json::{Value, json};

use crate::harness::*;
use crate::values::{
    configmap_data, edit_secret, publish_vals, put_configmap, put_secret, service_account,
    vals_release,
};

const SA: &str = "deployer";

/// The API server's answer to creating `obj`: `Ok` if it was stored, else the 4xx message.
async fn try_create<K>(api: &Api<K>, obj: &K) -> Result<(), (u16, String)>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(ae)) => Err((ae.code, ae.message)),
        Err(e) => panic!("create failed without an API answer: {e}"),
    }
}

fn values_from(n: usize) -> Value {
    (0..n)
        .map(|i| json!({"kind": "ConfigMap", "name": format!("v{i}")}))
        .collect()
}

fn health_checks(n: usize) -> Value {
    (0..n)
        .map(|i| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": format!("c{i}")}))
        .collect()
}

fn exprs(n: usize, len: usize) -> Value {
    let current = format!("'{}' != ''", "x".repeat(len - 8));
    assert_eq!(current.len(), len);
    (0..n)
        .map(|i| json!({"apiVersion": "example.com/v1", "kind": format!("K{i}"), "current": current}))
        .collect()
}

/// SPEC §24 "names" and the list bounds of SPEC §1.1: refused by the API server before
/// the operator ever sees them; at the bound, stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_lists_and_names_are_refused_by_the_api_server() {
    let (_env, ns) = namespace().await;
    let api = Api::<ModuleRelease>::namespaced(ns.client.clone(), &ns.name);
    let mr = |name: &str, extra: Value| module_release(&ns.name, name, json!({}), extra);
    let refused: Vec<(Value, &str, &str)> = vec![
        (
            json!({"valuesFrom": values_from(200)}),
            "spec.valuesFrom",
            "must have at most 16 items",
        ),
        (
            json!({"serviceAccountName": "a/../b"}),
            "spec.serviceAccountName",
            "should match",
        ),
        (
            json!({"dependsOn": [{"name": "web\u{1b}[2J\u{1b}]0;owned\u{7}"}]}),
            "spec.dependsOn[0].name",
            "should match",
        ),
        (
            json!({"dependsOn": [{"name": "web", "namespace": "../kube-system"}]}),
            "spec.dependsOn[0].namespace",
            "should match",
        ),
        (
            json!({"dependsOn": [{"name": "web", "kind": "Deployment"}]}),
            "spec.dependsOn[0]",
            "needs apiVersion",
        ),
        (
            json!({"dependsOn": [{"name": "web", "apiVersion": "v1", "kind": "Config Map"}]}),
            "spec.dependsOn[0].kind",
            "should match",
        ),
        (
            json!({"dependsOn": [{"name": "web", "apiVersion": "../v1", "kind": "ConfigMap"}]}),
            "spec.dependsOn[0].apiVersion",
            "should match",
        ),
        (
            json!({"dependsOn": [{"name": "web", "apiVersion": "v1", "kind": "ConfigMap",
                                  "readyExpr": "x".repeat(1025)}]}),
            "spec.dependsOn[0].readyExpr",
            "may not be more than 1024 bytes",
        ),
        (
            json!({"healthChecks": health_checks(33)}),
            "spec.healthChecks",
            "must have at most 32 items",
        ),
        (
            json!({"healthChecks": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "namespace": "Other NS"}]}),
            "spec.healthChecks[0].namespace",
            "should match",
        ),
        (
            json!({"healthChecks": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x\ny"}]}),
            "spec.healthChecks[0].name",
            "should match",
        ),
        (
            json!({"healthCheckExprs": exprs(17, 20)}),
            "spec.healthCheckExprs",
            "must have at most 16 items",
        ),
        (
            json!({"healthCheckExprs": exprs(1, 1025)}),
            "spec.healthCheckExprs[0].current",
            "may not be more than 1024 bytes",
        ),
        (
            json!({"valuesFrom": [{"kind": "Secret", "name": "../../etc/passwd"}]}),
            "spec.valuesFrom[0].name",
            "should match",
        ),
        (
            json!({"valuesFrom": [{"kind": "Secret", "name": "db", "valuesKey": "a/b"}]}),
            "spec.valuesFrom[0].valuesKey",
            "should match",
        ),
        (
            json!({"module": {"path": "example.com/modules/web@v0", "version": "v0.2.1",
                "secretRef": {"name": "Reg Cred"}}}),
            "spec.module.secretRef.name",
            "should match",
        ),
        (
            json!({"driftDetection": {"ignore": vec![json!({"paths": ["/spec/replicas"]}); 33]}}),
            "spec.driftDetection.ignore",
            "must have at most 32 items",
        ),
    ];
    for (i, (extra, field, want)) in refused.into_iter().enumerate() {
        let (code, message) = try_create(&api, &mr(&format!("bad{i}"), extra.clone()))
            .await
            .expect_err("refused by the API server");
        eprintln!("{field}: {code}: {message}");
        assert_eq!(code, 422, "{message}");
        assert!(message.contains(field), "{field:?} in {message}");
        assert!(message.contains(want), "{want:?} in {message}");
    }
    let rels = Api::<Release>::namespaced(ns.client.clone(), &ns.name);
    let mut rel = release(&ns.name, "helm", "src", ".", json!({}));
    rel.spec.source_ref.kind = "HelmRepository".into();
    let (code, message) = try_create(&rels, &rel).await.expect_err("refused");
    assert_eq!(code, 422, "{message}");
    assert!(message.contains("spec.sourceRef.kind"), "{message}");

    // At the bounds: stored.
    let at_bounds = json!({
        "serviceAccountName": "deployer.v2",
        "valuesFrom": values_from(16),
        "healthChecks": health_checks(32),
        "healthCheckExprs": exprs(16, 1024),
        "dependsOn": [{"name": "db.primary", "namespace": "data-1", "kind": "Release"}],
        "module": {"path": "example.com/modules/web@v0", "version": "v0.2.1",
            "secretRef": {"name": "reg-cred"}},
    });
    try_create(&api, &mr("at-bounds", at_bounds))
        .await
        .expect("a spec at every bound is stored");
}

/// Peak resident memory of process `pid` in MiB (`VmHWM`).
fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kb / 1024
}

/// 20 KiB of YAML whose aliases expand to 10^7 copies of a 1 000-byte string (10 GB).
fn anchor_bomb() -> String {
    let mut y = format!("a: &a [\"{}\"]\n", "x".repeat(1000));
    let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
    for w in names.windows(2) {
        let refs = vec![format!("*{}", w[0]); 10].join(", ");
        y.push_str(&format!("{}: &{} [{refs}]\n", w[1], w[1]));
    }
    y
}

fn stalled_with(o: &ModuleRelease, reason: &str) -> Option<String> {
    let s = o.status.as_ref()?;
    let st = condition(s, "Stalled")?;
    (st.status == "True" && st.reason == reason && s.observed_generation == o.metadata.generation?)
        .then(|| st.message.clone())
}

/// Issue 31 item 4: big and anchor-bomb `valuesFrom` content is stalled with the SPEC's
/// message at `--max-values-bytes`, the operator's memory stays bounded, and another
/// tenant's release converges meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_and_anchor_values_stall_while_another_tenant_converges() {
    let (env, ns) = namespace().await;
    let other = env.namespace().await.expect("a second namespace");
    publish_vals().await;
    let c = &ns.client;
    service_account(c, &ns.name, SA, rbac::all_rules()).await;
    service_account(&other.client, &other.name, SA, rbac::all_rules()).await;
    let bomb = anchor_bomb();
    assert!(bomb.len() < 20_000, "{}", bomb.len());
    put_configmap(c, &ns.name, "bomb", &[("values.yaml", &bomb)]).await;
    let big = format!("k: \"{}\"\n", "y".repeat(900 * 1024));
    for i in 0..5 {
        put_configmap(c, &ns.name, &format!("big{i}"), &[("values.yaml", &big)]).await;
    }

    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .arg("run")
        .args([
            "--watch-label-selector",
            &format!("{TEST_LABEL}={}", ns.name),
        ])
        .args(["--metrics-bind-address", "0"])
        .args(["--health-probe-bind-address", "0"])
        .arg("--cue-binary")
        .arg(opm_testenv::tools::cue_bin().unwrap())
        .arg("--cue-registry")
        .arg(CueRegistry::global().await.registry())
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .env("KUBECONFIG", env.kubeconfig_path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().expect("pid");

    let bomb_refs: Vec<Value> = (0..16)
        .map(|_| json!({"kind": "ConfigMap", "name": "bomb"}))
        .collect();
    let big_refs: Vec<Value> = (0..5)
        .map(|i| json!({"kind": "ConfigMap", "name": format!("big{i}")}))
        .collect();
    for (name, refs) in [("bomb", bomb_refs), ("big", big_refs)] {
        let mr = vals_release(
            &ns.name,
            name,
            json!({"serviceAccountName": SA, "valuesFrom": refs}),
        );
        create_mr(c, &mr).await;
    }
    let mut victim = module_release(
        &other.name,
        "victim",
        json!({"message": "still served"}),
        json!({"serviceAccountName": SA}),
    );
    victim
        .metadata
        .labels
        .get_or_insert_default()
        .insert(TEST_LABEL.into(), ns.name.clone());
    let started = Instant::now();
    create_mr(&other.client, &victim).await;

    let bomb = wait_mr(c, &ns.name, "bomb", "bomb stalled", |o| {
        stalled_with(o, "ValuesNotFound").is_some()
    })
    .await;
    let big = wait_mr(c, &ns.name, "big", "big stalled", |o| {
        stalled_with(o, "ValuesNotFound").is_some()
    })
    .await;
    wait_mr(
        &other.client,
        &other.name,
        "victim",
        "the other tenant Ready",
        is_ready_mr,
    )
    .await;
    let victim_ready = started.elapsed();
    let cap = opm_core::config::DEFAULT_MAX_VALUES_BYTES;
    let msg = stalled_with(&bomb, "ValuesNotFound").unwrap();
    eprintln!("bomb: {msg}");
    let x: u64 = msg
        .strip_prefix("values from 1 objects are ")
        .and_then(|m| m.strip_suffix(&format!(" bytes; the cap is {cap}")))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{msg}"));
    assert!(x > cap && x < cap + 4096, "stopped at the cap: {x}");
    assert_eq!(ready(bomb.status.as_ref().unwrap()).0, "False");
    let msg = stalled_with(&big, "ValuesNotFound").unwrap();
    eprintln!("big: {msg}");
    assert!(
        msg.starts_with("values from 5 objects are ")
            && msg.ends_with(&format!("; the cap is {cap}")),
        "{msg}"
    );
    // Let a few retries of the stalled releases pass too (none: a stall waits for a
    // change), then read the peak.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let peak = peak_rss_mib(pid);
    eprintln!("peak RSS {peak} MiB; the other tenant was Ready after {victim_ready:?}");
    assert!(peak < 300, "peak RSS {peak} MiB");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the operator is still running"
    );
}

/// One round of issue 31's missed edit: a release reading Secret `secret` Ready, the
/// Secret edited at once, the new value applied well before the 5m interval. Returns how
/// long the new value took to be applied.
async fn edit_right_after_ready(
    client: &kube::Client,
    ns: &str,
    name: &str,
    with_sa: bool,
) -> Duration {
    let secret = format!("{name}-pw");
    put_secret(client, ns, &secret, &[("password", "first-pw")]).await;
    let mut spec = json!({"valuesFrom": [
        {"kind": "Secret", "name": secret, "valuesKey": "password", "targetPath": "password"}]});
    if with_sa {
        spec["serviceAccountName"] = json!(SA);
    }
    create_mr(client, &vals_release(ns, name, spec)).await;
    wait_mr(client, ns, name, "Ready", is_ready_mr).await;
    edit_secret(client, ns, &secret, "password", "second-pw").await;
    let edited = Instant::now();
    let want = "postgres://app:second-pw@db:5432/app";
    loop {
        let data = configmap_data(client, ns, &format!("{name}-cfg")).await;
        if data.get("url").map(String::as_str) == Some(want) {
            return edited.elapsed();
        }
        assert!(
            edited.elapsed() < Duration::from_secs(20),
            "{name} (ServiceAccount: {with_sa}): the edit was missed; applied {:?}",
            data.get("url")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 31: "a `valuesFrom` Secret edited just after its release turned Ready is missed"
/// (3 of 4 runs). Four fresh releases each with and without a ServiceAccount: every edit
/// is applied within seconds (the interval is 5m).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_values_secret_edited_right_after_ready_is_never_missed() {
    let (env, ns) = namespace().await;
    publish_vals().await;
    service_account(&ns.client, &ns.name, SA, rbac::all_rules()).await;
    let _op = Operator::start(env, &ns.name, |_| {}).await;
    let mut took = Vec::new();
    for round in 0..4 {
        for with_sa in [true, false] {
            let name = format!("edit-{}-{round}", if with_sa { "sa" } else { "op" });
            took.push(edit_right_after_ready(&ns.client, &ns.name, &name, with_sa).await);
        }
    }
    eprintln!("edits applied after {took:?}");
}

/// Issue 31 item 3: a `healthChecks` entry naming another namespace's ConfigMap is
/// refused with `CrossNamespaceRefDenied`; with `--allow-cross-namespace-refs` it is read
/// as the release's ServiceAccount, which may not read it. Either way the other tenant's
/// token is in no status and no event of the attacker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_check_on_another_namespace_never_reads_it() {
    const TOKEN: &str = "victim-token-5b1e9";
    let (env, ns) = namespace().await;
    let victim = env.namespace().await.expect("a second namespace");
    put_configmap(&victim.client, &victim.name, "token", &[("token", TOKEN)]).await;
    // The attacker's ServiceAccount may do anything, in its own namespace only.
    service_account(&ns.client, &ns.name, SA, rbac::all_rules()).await;
    let spec = json!({
        "serviceAccountName": SA,
        "wait": true,
        "healthChecks": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "token", "namespace": victim.name}],
        "healthCheckExprs": [{"apiVersion": "v1", "kind": "ConfigMap",
            "current": "data.token == 'guess'", "failed": "int(data.token) > 0"}],
    });
    let attacker = |name: &str| module_release(&ns.name, name, json!({}), spec.clone());
    let leaked = |o: &ModuleRelease, evs: &[k8s_openapi::api::events::v1::Event]| {
        serde_json::to_string(&o.status).unwrap().contains(TOKEN)
            || evs
                .iter()
                .any(|e| e.note.as_deref().unwrap_or_default().contains(TOKEN))
    };

    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(&ns.client, &attacker("peek")).await;
    let o = wait_mr(&ns.client, &ns.name, "peek", "refused", |o| {
        stalled_with(o, "CrossNamespaceRefDenied").is_some()
    })
    .await;
    assert_eq!(
        stalled_with(&o, "CrossNamespaceRefDenied").unwrap(),
        format!(
            "cross-namespace health check of ConfigMap {}/token is not allowed (--allow-cross-namespace-refs is off)",
            victim.name
        )
    );
    let evs = events(&ns.client, &ns.name, "peek").await;
    assert!(!leaked(&o, &evs), "the token reached the attacker");
    op.stop().await;

    // Cross-namespace references allowed: still read as the attacker's ServiceAccount.
    let op = Operator::start(env, &ns.name, |a| a.allow_cross_namespace_refs = true).await;
    create_mr(&ns.client, &attacker("peek2")).await;
    let o = wait_mr(&ns.client, &ns.name, "peek2", "health read", |o| {
        o.status
            .as_ref()
            .and_then(|s| s.health.as_ref())
            .is_some_and(|h| {
                h.objects
                    .iter()
                    .any(|x| x.name == "token" && x.namespace == victim.name)
            })
    })
    .await;
    let h = o.status.as_ref().unwrap().health.as_ref().unwrap();
    let token = h.objects.iter().find(|x| x.name == "token").unwrap();
    eprintln!("{}: {}", token.status, token.message);
    assert_eq!(token.status, "Unknown", "{token:?}");
    assert!(token.message.contains("forbidden"), "{token:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let o = Api::<ModuleRelease>::namespaced(ns.client.clone(), &ns.name)
        .get("peek2")
        .await
        .unwrap();
    let evs = events(&ns.client, &ns.name, "peek2").await;
    assert!(!leaked(&o, &evs), "the token reached the attacker");
    // The victim's ConfigMap is untouched.
    let data = configmap_data(&victim.client, &victim.name, "token").await;
    assert_eq!(data["token"], TOKEN);
    op.stop().await;
}

/// SPEC §24 "an entry named twice is read once", and nothing is read past the cap: the
/// `ReadValues` executor against the real API server. Sixteen entries naming one
/// ConfigMap (two keys of it) cost one GET; seven 900 KiB ConfigMaps under a 4 MiB cap
/// cost five GETs, the entries after the cap reported unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_named_twice_is_read_once_and_nothing_past_the_cap() {
    use opm_core::InputKind;
    use opm_core::api::values_from::ValuesReference;
    use opm_core::values_from::ValuesContent;
    let (_env, ns) = namespace().await;
    let c = &ns.client;
    put_configmap(
        c,
        &ns.name,
        "shared",
        &[("values.yaml", "a: 1\n"), ("other.yaml", "b: 2\n")],
    )
    .await;
    let big = format!("k: \"{}\"\n", "y".repeat(900 * 1024));
    for i in 0..7 {
        put_configmap(c, &ns.name, &format!("big{i}"), &[("values.yaml", &big)]).await;
    }
    let refs: Vec<ValuesReference> = (0..16)
        .map(|i| {
            serde_json::from_value(json!({"kind": "ConfigMap", "name": "shared",
                "valuesKey": if i % 2 == 0 { "values.yaml" } else { "other.yaml" }}))
            .unwrap()
        })
        .collect();
    let cap = opm_core::config::DEFAULT_MAX_VALUES_BYTES;
    let read = |refs: Vec<ValuesReference>| {
        let client = c.clone();
        let ns = ns.name.clone();
        async move {
            let mut seen = Vec::new();
            let mut secrets = opm_operator::cue::secrets::SecretTable::default();
            let got = opm_operator::steps::values_from::read(
                Ok(client),
                &ns,
                &refs,
                None,
                &mut secrets,
                cap,
                &mut seen,
            )
            .await;
            let InputKind::ValuesRead { values, .. } = got else {
                panic!("{got:?}")
            };
            (values, seen)
        }
    };
    let (values, seen) = read(refs.clone()).await;
    assert_eq!(seen.len(), 1, "one GET for sixteen entries: {seen:?}");
    assert_eq!(values.len(), 16);
    assert_eq!(
        values[0].as_ref().unwrap(),
        &ValuesContent::Found {
            value: json!({"a": 1})
        }
    );
    assert_eq!(
        values[1].as_ref().unwrap(),
        &ValuesContent::Found {
            value: json!({"b": 2})
        }
    );
    opm_core::values_from::check_size(&refs, &values, cap).expect("small");

    let refs: Vec<ValuesReference> = (0..7)
        .map(|i| {
            serde_json::from_value(json!({"kind": "ConfigMap", "name": format!("big{i}")})).unwrap()
        })
        .collect();
    let (values, seen) = read(refs.clone()).await;
    assert_eq!(seen.len(), 5, "nothing read past the cap: {seen:?}");
    assert!(matches!(values[4], Ok(ValuesContent::TooLarge { bytes }) if bytes > 0));
    assert!(matches!(
        values[5],
        Ok(ValuesContent::TooLarge { bytes: 0 })
    ));
    assert!(matches!(
        values[6],
        Ok(ValuesContent::TooLarge { bytes: 0 })
    ));
    let f = opm_core::values_from::check_size(&refs, &values, cap).unwrap_err();
    assert!(
        f.message.starts_with("values from 7 objects are "),
        "{}",
        f.message
    );
}
