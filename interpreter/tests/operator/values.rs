//! Values from ConfigMaps and Secrets (SPEC §27, issue 20) on the real API server with the
//! real `cue`: merge order, `targetPath`, `#config` checking, Secret hygiene in status,
//! events, logs and traces, the watch on referenced objects, `ValuesNotFound`, `optional`,
//! and a ServiceAccount that may not read the Secret.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use opm_core::api::ModuleRelease;
use opm_testenv::{CueRegistry, rbac};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::harness::*;

/// A module whose `#config.password` lands in a ConfigMap (inside a URL), a Secret and a
/// container's env var; the schema refuses passwords with anything but letters, digits, `-`.
pub const VALS_MODULE: &str = "example.com/modules/vals@v0";
const VALS_CUE: &str = r#"package vals

#config: {
	password: string & =~"^[A-Za-z0-9-]+$"
	db: {
		host: string | *"db"
		port: int | *5432
	}
	replicas: int & >=0 & <=10 | *1
	greeting: string | *"hi"
}

#release: {
	name:      string
	namespace: string
}

components: app: {
	cm: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: {name: "\(#release.name)-cfg", namespace: #release.namespace}
		data: {
			url:      "postgres://app:\(#config.password)@\(#config.db.host):\(#config.db.port)/app"
			greeting: #config.greeting
			replicas: "\(#config.replicas)"
		}
	}
	secret: {
		apiVersion: "v1"
		kind:       "Secret"
		metadata: {name: "\(#release.name)-db", namespace: #release.namespace}
		stringData: password: #config.password
	}
	deploy: {
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: {name: "\(#release.name)-app", namespace: #release.namespace}
		spec: {
			replicas: 0
			selector: matchLabels: app: #release.name
			template: {
				metadata: labels: app: #release.name
				spec: containers: [{
					name:  "app"
					image: "example.invalid/app:1"
					env: [{name: "DB_PASSWORD", value: #config.password}]
				}]
			}
		}
	}
}
"#;

static PUBLISHED: OnceCell<()> = OnceCell::const_new();

/// Publishes the `vals` module (v0.1.0) to the shared registry once per test binary.
pub async fn publish_vals() {
    PUBLISHED
        .get_or_init(|| async {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(dir.path().join("cue.mod")).unwrap();
            std::fs::write(
                dir.path().join("cue.mod/module.cue"),
                format!(
                    "module: \"{VALS_MODULE}\"\nlanguage: version: \"v0.17.0\"\nsource: kind: \"self\"\n"
                ),
            )
            .unwrap();
            std::fs::write(dir.path().join("vals.cue"), VALS_CUE).unwrap();
            CueRegistry::global()
                .await
                .publish(dir.path(), "v0.1.0")
                .await
                .expect("publishing the vals module");
        })
        .await;
}

pub(crate) fn vals_release(ns: &str, name: &str, spec: Value) -> ModuleRelease {
    let mut mr = module_release(ns, name, json!({}), json!({}));
    let mut s = serde_json::to_value(&mr.spec).unwrap();
    s["module"] = json!({"path": VALS_MODULE, "version": "v0.1.0"});
    s.as_object_mut().unwrap().remove("values");
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    mr.spec = serde_json::from_value(s).unwrap();
    mr
}

pub(crate) async fn put_configmap(client: &Client, ns: &str, name: &str, data: &[(&str, &str)]) {
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .expect("create ConfigMap");
}

pub(crate) async fn put_secret(client: &Client, ns: &str, name: &str, data: &[(&str, &str)]) {
    let s = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &s)
        .await
        .expect("create Secret");
}

pub(crate) async fn edit_secret(client: &Client, ns: &str, name: &str, key: &str, value: &str) {
    let b64 = base64_encode(value.as_bytes());
    Api::<Secret>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {key: b64}})),
        )
        .await
        .expect("edit Secret");
}

fn base64_encode(bytes: &[u8]) -> String {
    serde_json::to_value(ByteString(bytes.to_vec()))
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// A ServiceAccount `name` bound to a Role with `rules`.
pub(crate) async fn service_account(
    client: &Client,
    ns: &str,
    name: &str,
    rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
) {
    rbac::create_service_account(client, ns, name)
        .await
        .unwrap();
    rbac::create_role(client, ns, name, rules).await.unwrap();
    rbac::bind_role(
        client,
        ns,
        name,
        name,
        rbac::service_account_subject(name, ns),
    )
    .await
    .unwrap();
}

pub(crate) async fn configmap_data(
    client: &Client,
    ns: &str,
    name: &str,
) -> BTreeMap<String, String> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .map(|c| c.data.unwrap_or_default())
        .unwrap_or_default()
}

/// Attempts of release `name` recorded in the trace files under `dir`.
fn attempts_in(dir: &std::path::Path, name: &str) -> usize {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            n += text
                .lines()
                .filter(|l| {
                    l.contains("\"type\":\"observed\"")
                        && l.contains(&format!("\"name\":\"{name}\""))
                })
                .count();
        }
    }
    n
}

/// The whole path on the binary with debug JSON logs and traces: values from a ConfigMap
/// and a Secret merged with `values` and `targetPath`, checked by `#config`, applied into
/// a ConfigMap, a Secret and an env var; an edited Secret re-triggers within seconds and
/// an unrelated one does not; the Secret's value (old and new, plain and base64) is in no
/// status, event, log line or trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_from_configmap_and_secret_merge_apply_retrigger_and_never_leak() {
    const SECRET: &str = "Zq7-vals-pw-41c9";
    const SECRET2: &str = "Rt2-vals-pw-88aa";
    let (env, ns) = namespace().await;
    publish_vals().await;
    let c = &ns.client;
    service_account(c, &ns.name, "deployer", rbac::all_rules()).await;
    put_configmap(
        c,
        &ns.name,
        "base",
        &[(
            "values.yaml",
            "db:\n  host: pg\n  port: 6432\ngreeting: from-configmap\nreplicas: 1\n",
        )],
    )
    .await;
    put_secret(c, &ns.name, "db", &[("password", SECRET)]).await;
    put_secret(c, &ns.name, "unrelated", &[("password", "nobody-reads-me")]).await;

    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("operator.json.log");
    let trace_dir = dir.path().join("traces");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(["run", "--log-format", "json", "--watch-label-selector"])
        .arg(format!("{TEST_LABEL}={}", ns.name))
        .arg("--cue-binary")
        .arg(opm_testenv::tools::cue_bin().unwrap())
        .arg("--cue-registry")
        .arg(CueRegistry::global().await.registry())
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .arg("--trace-dir")
        .arg(&trace_dir)
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mr = vals_release(
        &ns.name,
        "vals-main",
        json!({
            "serviceAccountName": "deployer",
            "values": {"replicas": 3},
            "valuesFrom": [
                {"kind": "ConfigMap", "name": "base"},
                {"kind": "Secret", "name": "db", "valuesKey": "password", "targetPath": "password"},
            ],
        }),
    );
    create_mr(c, &mr).await;
    let got = wait_mr(c, &ns.name, "vals-main", "Ready", is_ready_mr).await;

    // ConfigMap first, then the Secret, then `values` on top; the password at its path.
    let data = configmap_data(c, &ns.name, "vals-main-cfg").await;
    assert_eq!(data["url"], format!("postgres://app:{SECRET}@pg:6432/app"));
    assert_eq!(data["greeting"], "from-configmap");
    assert_eq!(data["replicas"], "3", "values wins over the ConfigMap");
    let s = Api::<Secret>::namespaced(c.clone(), &ns.name)
        .get("vals-main-db")
        .await
        .unwrap();
    assert_eq!(s.data.unwrap()["password"].0, SECRET.as_bytes());
    let d = Api::<Deployment>::namespaced(c.clone(), &ns.name)
        .get("vals-main-app")
        .await
        .unwrap();
    let env_value = d.spec.template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap()[0]
        .value
        .clone();
    assert_eq!(env_value.as_deref(), Some(SECRET));
    let first_status = serde_json::to_string(&got.status).unwrap();

    // An unrelated Secret changes: no attempt of the release follows.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = attempts_in(&trace_dir, "vals-main");
    assert!(before >= 1, "the attempts were traced");
    edit_secret(c, &ns.name, "unrelated", "password", "still-nobody").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        attempts_in(&trace_dir, "vals-main"),
        before,
        "an unrelated Secret re-triggered the release"
    );

    // The referenced Secret changes: the new value is applied within seconds (the
    // interval is 5m, so only the watch can have done it).
    let edited = Instant::now();
    edit_secret(c, &ns.name, "db", "password", SECRET2).await;
    let want = format!("postgres://app:{SECRET2}@pg:6432/app");
    loop {
        let data = configmap_data(c, &ns.name, "vals-main-cfg").await;
        if data.get("url") == Some(&want) {
            break;
        }
        assert!(
            edited.elapsed() < Duration::from_secs(15),
            "the Secret edit was not applied within 15s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let latency = edited.elapsed();
    eprintln!("secret edit to applied ConfigMap: {latency:?}");
    let got = wait_mr(c, &ns.name, "vals-main", "Ready again", is_ready_mr).await;
    let evs =
        serde_json::to_string(&events_with(c, &ns.name, "vals-main", &["Applied"]).await).unwrap();

    std::process::Command::new("kill")
        .args(["-TERM", &child.id().unwrap().to_string()])
        .status()
        .unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    let logs = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        logs.contains("attempt finished"),
        "debug logs were captured"
    );
    let mut traces = String::new();
    for e in std::fs::read_dir(&trace_dir).unwrap().flatten() {
        traces.push_str(&std::fs::read_to_string(e.path()).unwrap());
        let text = std::fs::read_to_string(e.path()).unwrap();
        opm_core::trace::replay(text.lines()).expect("the traces replay");
    }
    assert!(traces.contains("valuesRead"), "the reads were traced");
    let status = format!(
        "{first_status}{}",
        serde_json::to_string(&got.status).unwrap()
    );
    for (what, text) in [
        ("logs", &logs),
        ("traces", &traces),
        ("status", &status),
        ("events", &evs),
    ] {
        for needle in [
            SECRET.to_string(),
            SECRET2.to_string(),
            base64_encode(SECRET.as_bytes()),
            base64_encode(SECRET2.as_bytes()),
        ] {
            assert!(!text.contains(&needle), "{needle} appears in the {what}");
        }
    }
}

/// A missing reference stalls `ValuesNotFound` naming object and key, and its creation
/// re-triggers the release at once; an `optional` missing one does not stall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_reference_stalls_and_recovers_when_it_appears_and_optional_does_not_stall() {
    let (env, ns) = namespace().await;
    publish_vals().await;
    let c = &ns.client;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        c,
        &vals_release(
            &ns.name,
            "vals-late",
            json!({
                "values": {"password": "inline-pw"},
                "valuesFrom": [{"kind": "ConfigMap", "name": "later", "valuesKey": "app.yaml"}],
            }),
        ),
    )
    .await;
    create_mr(
        c,
        &vals_release(
            &ns.name,
            "vals-opt",
            json!({
                "values": {"password": "inline-pw"},
                "valuesFrom": [{"kind": "Secret", "name": "nowhere", "optional": true}],
            }),
        ),
    )
    .await;
    let got = wait_mr(
        c,
        &ns.name,
        "vals-late",
        "ValuesNotFound",
        reason_is_mr("ValuesNotFound"),
    )
    .await;
    let s = got.status.unwrap();
    let stalled = condition(&s, "Stalled").expect("stalled");
    assert_eq!(stalled.status, "True");
    assert!(
        stalled
            .message
            .contains(&format!("ConfigMap {}/later", ns.name))
            && stalled.message.contains("app.yaml"),
        "{}",
        stalled.message
    );
    evs_contain(c, &ns.name, "vals-late", "ValuesNotFound").await;
    wait_mr(c, &ns.name, "vals-opt", "optional: Ready", is_ready_mr).await;

    let created = Instant::now();
    put_configmap(c, &ns.name, "later", &[("app.yaml", "greeting: arrived\n")]).await;
    wait_mr(
        c,
        &ns.name,
        "vals-late",
        "Ready once it exists",
        is_ready_mr,
    )
    .await;
    let latency = created.elapsed();
    eprintln!("reference created to Ready: {latency:?}");
    assert!(
        latency < Duration::from_secs(20),
        "took {latency:?}: the 30m stall recheck, not the watch"
    );
    assert_eq!(
        configmap_data(c, &ns.name, "vals-late-cfg").await["greeting"],
        "arrived"
    );
    op.stop().await;
}

async fn evs_contain(c: &Client, ns: &str, name: &str, reason: &str) {
    events_with(c, ns, name, &[reason]).await;
}

/// A Secret value that breaks `#config` is a `RenderFailed` naming the field, never the
/// value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_value_breaking_config_is_render_failed_naming_the_field_not_the_value() {
    const BAD: &str = "not allowed! Xk29";
    let (env, ns) = namespace().await;
    publish_vals().await;
    let c = &ns.client;
    put_secret(c, &ns.name, "bad", &[("pw", BAD)]).await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        c,
        &vals_release(
            &ns.name,
            "vals-bad",
            json!({"valuesFrom": [{"kind": "Secret", "name": "bad", "valuesKey": "pw", "targetPath": "password"}]}),
        ),
    )
    .await;
    let got = wait_mr(
        c,
        &ns.name,
        "vals-bad",
        "RenderFailed",
        reason_is_mr("RenderFailed"),
    )
    .await;
    let status = serde_json::to_string(&got.status).unwrap();
    assert!(status.contains("password"), "the field is named: {status}");
    assert!(!status.contains("Xk29"), "the value leaked: {status}");
    let evs = serde_json::to_string(&events_with(c, &ns.name, "vals-bad", &["RenderFailed"]).await)
        .unwrap();
    assert!(!evs.contains("Xk29"), "the value leaked into events");
    assert!(
        !op.traces().contains("Xk29"),
        "the value leaked into traces"
    );
    op.stop().await;
}

/// The effective ServiceAccount may read ConfigMaps but not Secrets: the read of the
/// Secret is forbidden, an `ImpersonationFailed` stall naming the ServiceAccount.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_without_get_on_the_secret_is_impersonation_failed() {
    let (env, ns) = namespace().await;
    publish_vals().await;
    let c = &ns.client;
    service_account(
        c,
        &ns.name,
        "no-secrets",
        vec![rbac::rule("", &["configmaps"], &["*"])],
    )
    .await;
    put_secret(c, &ns.name, "db", &[("password", "pw-1234")]).await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        c,
        &vals_release(
            &ns.name,
            "vals-forbidden",
            json!({
                "serviceAccountName": "no-secrets",
                "valuesFrom": [{"kind": "Secret", "name": "db", "valuesKey": "password", "targetPath": "password"}],
            }),
        ),
    )
    .await;
    let got = wait_mr(
        c,
        &ns.name,
        "vals-forbidden",
        "ImpersonationFailed",
        reason_is_mr("ImpersonationFailed"),
    )
    .await;
    let s = got.status.unwrap();
    let msg = &condition(&s, "Ready").unwrap().message;
    assert!(
        msg.contains(&format!("Secret {}/db", ns.name))
            && msg.contains(&format!("system:serviceaccount:{}:no-secrets", ns.name)),
        "{msg}"
    );
    assert!(!msg.contains("pw-1234"));
    op.stop().await;
}

/// Issue 31 item 8 (SPEC §23, §27): numbers from a `valuesFrom` Secret (its YAML merged at
/// the root, no `targetPath`) were handed to the core as they were, so `port: 93847261`
/// sat in the traces, and `password: 0042` became the float `42.0` (here a `#config`
/// type error). Now the number is a digest wherever the core sees it (traces, status,
/// events) and the applied objects get it exactly, and `0042` stays `0042`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_numbers_are_digested_and_applied_exactly() {
    const PORT: &str = "93847261";
    let (env, ns) = namespace().await;
    publish_vals().await;
    let c = &ns.client;
    put_secret(
        c,
        &ns.name,
        "nums",
        &[(
            "values.yaml",
            &format!("password: 0042\ndb:\n  port: {PORT}\n"),
        )],
    )
    .await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        c,
        &vals_release(
            &ns.name,
            "nums",
            json!({"valuesFrom": [{"kind": "Secret", "name": "nums"}]}),
        ),
    )
    .await;
    let got = wait_mr(c, &ns.name, "nums", "Ready", |o| {
        is_ready_mr(o) || reason_is_mr("RenderFailed")(o)
    })
    .await;
    assert!(is_ready_mr(&got), "{:?}", got.status.as_ref().map(ready));
    let cm = configmap_data(c, &ns.name, "nums-cfg").await;
    assert_eq!(
        cm.get("url").map(String::as_str),
        Some(format!("postgres://app:0042@db:{PORT}/app").as_str()),
        "applied exactly"
    );
    let s = Api::<Secret>::namespaced(c.clone(), &ns.name)
        .get("nums-db")
        .await
        .unwrap();
    assert_eq!(
        s.data.unwrap()["password"].0,
        b"0042".to_vec(),
        "leading zeros kept"
    );
    let status = serde_json::to_string(&got.status).unwrap();
    assert!(!status.contains(PORT), "in the status: {status}");
    let evs = serde_json::to_string(&events(c, &ns.name, "nums").await).unwrap();
    assert!(!evs.contains(PORT), "in events");
    assert!(
        !op.traces().contains(PORT),
        "the Secret number is in a trace"
    );
    op.stop().await;
}
