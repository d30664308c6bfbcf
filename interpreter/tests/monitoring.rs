//! The shipped PrometheusRule and Grafana dashboard (SPEC §32): every expression parses
//! (`promql-parser`), every metric, label and label value they use is one the operator's
//! metrics registry serves, the kustomize copies equal the chart's files, and both install
//! paths render them only when asked (real `kubectl kustomize` and `helm template`).
//! `tests/operator/alerts.rs` holds the same expressions against a running operator.

#[path = "support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use opm_core::event_delivery::DeliveryStats;
use opm_core::{Kind, Metric, Outcome, ReleaseKey, ReleaseObject};
use opm_operator::ops::metrics::{FetchObservation, Metrics};
use serde_json::{Value, json};
use support::monitoring::*;

/// Every alert the rules must hold, and how long each condition must last.
const ALERTS: [(&str, Option<&str>); 8] = [
    ("OpmReleaseNotReady", Some("15m")),
    ("OpmReleaseStalled", Some("1m")),
    ("OpmReleaseHealthRegressed", Some("5m")),
    ("OpmReconcileErrorsRising", Some("10m")),
    ("OpmReconcileSlow", Some("15m")),
    ("OpmOperatorNotReconciling", Some("15m")),
    ("OpmOperatorDown", Some("5m")),
    ("OpmEventsWebhookDropping", None),
];

/// A registry that recorded every kind of sample for a release of each kind, with the
/// webhook on: what a busy operator serves.
fn full_exposition() -> String {
    let m = Metrics::default();
    m.serve_webhook_stats(DeliveryStats::default);
    for (kind, name) in [(Kind::ModuleRelease, "web"), (Kind::Release, "r")] {
        let key = ReleaseKey {
            kind,
            namespace: "team-a".into(),
            name: name.into(),
        };
        let object: ReleaseObject = match kind {
            Kind::ModuleRelease => ReleaseObject::ModuleRelease(
                serde_json::from_value(json!({
                    "apiVersion": "releases.opmodel.dev/v1alpha1", "kind": "ModuleRelease",
                    "metadata": {"name": name, "namespace": "team-a"},
                    "spec": {"module": {"path": "example.com/m@v0", "version": "v0.1.0"}},
                }))
                .expect("ModuleRelease"),
            ),
            Kind::Release => ReleaseObject::Release(
                serde_json::from_value(json!({
                    "apiVersion": "releases.opmodel.dev/v1alpha1", "kind": "Release",
                    "metadata": {"name": name, "namespace": "team-a"},
                    "spec": {"sourceRef": {"apiVersion": "source.toolkit.fluxcd.io/v1",
                        "kind": "OCIRepository", "name": "src"}, "path": "."},
                }))
                .expect("Release"),
            ),
        };
        m.observe_release(&key, &object);
        for outcome in [
            Outcome::NoOp,
            Outcome::Applied,
            Outcome::AppliedAndPruned,
            Outcome::FailedTransient,
            Outcome::FailedStalled,
            Outcome::Progressing,
        ] {
            m.record(
                &key,
                &Metric::Reconcile {
                    outcome,
                    duration: Duration::from_millis(20),
                },
            );
        }
        for metric in [
            Metric::ApplyResources {
                created: 1,
                updated: 1,
                unchanged: 1,
            },
            Metric::PruneResources { count: 1 },
            Metric::InventorySize { count: 3 },
            Metric::ReleaseHealthy { healthy: true },
            Metric::HealthWait {
                duration: Duration::from_secs(2),
            },
        ] {
            m.record(&key, &metric);
        }
        m.record_fetch(&key, FetchObservation::Hit);
        m.record_fetch(&key, FetchObservation::Miss { bytes: 10 });
        m.record_render(&key, Duration::from_millis(5));
    }
    m.render()
}

#[test]
fn every_expression_parses_and_uses_only_what_the_operator_serves() {
    let served = served(&full_exposition());
    let exprs = all_exprs();
    assert!(
        exprs.len() >= ALERTS.len() + 10,
        "{} expressions",
        exprs.len()
    );
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for (what, expr) in &exprs {
        match Uses::of(expr) {
            Ok(uses) => {
                assert!(!uses.metrics.is_empty(), "{what} selects no metric");
                used.extend(uses.metrics.keys().cloned());
                problems.extend(missing(what, &uses, &served, true));
            }
            Err(e) => problems.push(format!("{what}: does not parse: {e}\n{expr}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The release gauges, the attempt series and the webhook are all watched.
    for family in [
        "opm_controller_release_ready",
        "opm_controller_release_healthy",
        "opm_controller_release_suspended",
        "opm_controller_reconcile_total",
        "opm_controller_reconcile_duration_seconds_bucket",
        "opm_controller_events_webhook_dropped_total",
    ] {
        assert!(used.contains(family), "nothing uses {family}");
    }
}

#[test]
fn the_checker_finds_what_is_not_served() {
    // The check itself can fail: a misspelt metric, an unknown label, a value never
    // served and a grouping label no metric has are each reported.
    let served = served(&full_exposition());
    for (expr, want) in [
        ("opm_controller_release_redy == 0", "is not served"),
        (
            r#"opm_controller_release_ready{tenant="a"}"#,
            "no label tenant",
        ),
        (
            r#"opm_controller_reconcile_total{outcome="failed"}"#,
            "never served",
        ),
        (
            "sum by (cluster) (opm_controller_release_ready)",
            "none of its metrics",
        ),
    ] {
        let uses = Uses::of(expr).expect(expr);
        let found = missing(expr, &uses, &served, true);
        assert!(found.iter().any(|p| p.contains(want)), "{expr}: {found:?}");
    }
    assert!(
        Uses::of("sum(rate(x[5m])").is_err(),
        "unbalanced parenthesis"
    );
}

#[test]
fn the_alerts_are_the_documented_ones_with_severity_and_text() {
    let rules = alert_rules();
    let names: Vec<&str> = rules.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ALERTS.map(|(n, _)| n), "the alerts and their order");
    let docs =
        std::fs::read_to_string(repo().join("docs/src/alerts.md")).expect("docs/src/alerts.md");
    for ((name, rule), (_, want_for)) in rules.iter().zip(ALERTS) {
        assert_eq!(rule["for"].as_str(), want_for, "{name}: for");
        let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["warning", "critical"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        for a in ["summary", "description"] {
            assert!(
                rule["annotations"][a]
                    .as_str()
                    .is_some_and(|s| s.len() > 20),
                "{name}: annotation {a}"
            );
        }
        assert!(
            docs.contains(&format!("### `{name}`")),
            "docs/src/alerts.md lacks {name}"
        );
    }
}

#[test]
fn the_kustomize_copies_equal_the_charts_files() {
    for (canonical, copy) in [(RULES, RULES_COPY), (DASHBOARD, DASHBOARD_COPY)] {
        let a = std::fs::read(repo().join(canonical)).expect(canonical);
        let b = std::fs::read(repo().join(copy)).expect(copy);
        assert!(a == b, "{copy} differs from {canonical}: copy it over");
    }
}

fn tool(env: &str) -> String {
    std::env::var(env)
        .unwrap_or_else(|_| panic!("{env} is not set: eval \"$(tools/install --env)\""))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// Every document of a multi-document YAML stream.
fn docs(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .expect("YAML")
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn kinds(objects: &[Value]) -> BTreeSet<String> {
    objects
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .map(String::from)
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

fn dashboard_map(objects: &[Value]) -> Option<&Value> {
    objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["labels"]["grafana_dashboard"] == "1")
}

/// The canonical files as objects, to compare what the installs render with.
fn canonical() -> (Value, Value) {
    let rules = rules_doc();
    let dash: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join(DASHBOARD)).expect("dashboard"))
            .expect("JSON");
    (rules, dash)
}

/// `to` as a path relative to the directory `from`.
fn relative(from: &std::path::Path, to: &std::path::Path) -> std::path::PathBuf {
    let (from, to) = (
        from.canonicalize().expect("from"),
        to.canonicalize().expect("to"),
    );
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = std::path::PathBuf::new();
    for _ in common..from.components().count() {
        out.push("..");
    }
    out.extend(to.components().skip(common));
    out
}

#[test]
fn kustomize_renders_monitoring_only_with_the_component() {
    let kubectl = tool("OPM_KUBECTL_BIN");
    // kustomize takes only relative paths to other directories.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let deploy = relative(dir.path(), &repo().join("deploy"));
    let render = |components: &str| {
        std::fs::write(
            dir.path().join("kustomization.yaml"),
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
                 resources: [{d}]\n{components}",
                d = deploy.display()
            ),
        )
        .expect("write");
        docs(&run(Command::new(&kubectl)
            .arg("kustomize")
            .arg(dir.path())))
    };
    let plain = render("");
    let plain_kinds = kinds(&plain);
    assert!(plain_kinds.contains("Deployment"), "{plain_kinds:?}");
    for k in ["PrometheusRule", "ServiceMonitor"] {
        assert!(!plain_kinds.contains(k), "{k} without the component");
    }
    assert!(
        dashboard_map(&plain).is_none(),
        "a dashboard without the component"
    );

    let with = render(&format!(
        "components: [{}]\n",
        deploy.join("components/monitoring").display()
    ));
    let (rules, dash) = canonical();
    let rule = find(&with, "PrometheusRule");
    assert_eq!(rule["spec"], rules["spec"], "the rules as shipped");
    assert_eq!(rule["metadata"]["namespace"], "opm-system");
    let sm = find(&with, "ServiceMonitor");
    assert_eq!(sm["spec"]["endpoints"][0]["honorLabels"], true);
    // It selects the metrics Service of deploy/.
    let service = with
        .iter()
        .find(|o| o["kind"] == "Service" && o["metadata"]["name"] == "opm-controller-metrics")
        .expect("the metrics Service");
    for (k, v) in sm["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
    {
        assert_eq!(&service["metadata"]["labels"][k], v, "selector {k}");
    }
    assert_eq!(
        service["metadata"]["labels"][sm["spec"]["jobLabel"].as_str().expect("jobLabel")],
        "opm-operator",
        "the job OpmOperatorDown watches"
    );
    let map = dashboard_map(&with).expect("the dashboard ConfigMap");
    let json: Value =
        serde_json::from_str(map["data"]["opm-operator.json"].as_str().expect("data"))
            .expect("JSON");
    assert_eq!(json, dash);
}

#[test]
fn helm_renders_each_part_only_when_asked() {
    let helm = tool("OPM_HELM_BIN");
    let chart = repo().join("deploy/helm/opm-operator");
    let render = |sets: &[&str]| {
        let mut cmd = Command::new(&helm);
        cmd.args([
            "template",
            "opm",
            "-n",
            "opm-system",
            "--kube-version",
            "1.37.2",
        ])
        .arg(&chart);
        for s in sets {
            cmd.args(["--set", s]);
        }
        docs(&run(&mut cmd))
    };
    let defaults = render(&[]);
    let k = kinds(&defaults);
    assert!(k.contains("Deployment"));
    assert!(
        !k.contains("PrometheusRule") && !k.contains("ServiceMonitor"),
        "{k:?}"
    );
    assert!(dashboard_map(&defaults).is_none());

    let (rules, dash) = canonical();
    let only_rules = render(&[
        "monitoring.rules.enabled=true",
        "monitoring.rules.labels.release=kps",
    ]);
    let rule = find(&only_rules, "PrometheusRule");
    assert_eq!(rule["spec"], rules["spec"], "the rules as shipped");
    assert_eq!(rule["metadata"]["namespace"], "opm-system");
    assert_eq!(rule["metadata"]["labels"]["release"], "kps");
    assert!(!kinds(&only_rules).contains("ServiceMonitor"));
    assert!(dashboard_map(&only_rules).is_none());

    let only_dash = render(&["monitoring.dashboard.enabled=true"]);
    let map = dashboard_map(&only_dash).expect("dashboard ConfigMap");
    let json: Value =
        serde_json::from_str(map["data"]["opm-operator.json"].as_str().expect("data"))
            .expect("JSON");
    assert_eq!(json, dash);
    assert!(!kinds(&only_dash).contains("PrometheusRule"));

    let only_sm = render(&["monitoring.serviceMonitor.enabled=true"]);
    let sm = find(&only_sm, "ServiceMonitor");
    assert_eq!(sm["spec"]["endpoints"][0]["honorLabels"], true);
    let service = only_sm
        .iter()
        .find(|o| o["kind"] == "Service")
        .expect("the metrics Service");
    for (k, v) in sm["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
    {
        assert_eq!(&service["metadata"]["labels"][k], v, "selector {k}");
    }
    assert_eq!(
        service["metadata"]["labels"]["app.kubernetes.io/name"],
        "opm-operator"
    );
    assert!(!kinds(&only_sm).contains("PrometheusRule"));

    // A ServiceMonitor without the Service it scrapes is refused with the reason.
    let out = Command::new(&helm)
        .args(["template", "opm", "--kube-version", "1.37.2"])
        .arg(&chart)
        .args(["--set", "monitoring.serviceMonitor.enabled=true"])
        .args(["--set", "metrics.service.enabled=false"])
        .output()
        .expect("helm");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs metrics.service.enabled"));
}

/// The manager container's args and env of a rendered chart.
fn manager(objects: &[Value]) -> (Vec<String>, Vec<Value>) {
    let c = &find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    let args = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("arg").to_string())
        .collect();
    (args, c["env"].as_array().cloned().unwrap_or_default())
}

#[test]
fn helm_passes_the_events_webhook_from_a_value_or_a_secret_never_in_the_args() {
    let helm = tool("OPM_HELM_BIN");
    let chart = repo().join("deploy/helm/opm-operator");
    let render = |sets: &[&str]| {
        let mut cmd = Command::new(&helm);
        cmd.args(["template", "opm", "--kube-version", "1.37.2"])
            .arg(&chart);
        for s in sets {
            cmd.args(["--set", s]);
        }
        docs(&run(&mut cmd))
    };
    let (args, env) = manager(&render(&[]));
    assert!(
        args.contains(&"--events-webhook-queue-size=10000".to_string()),
        "{args:?}"
    );
    assert!(
        args.contains(&"--events-webhook-max-backoff=1m".to_string()),
        "{args:?}"
    );
    assert!(
        !args.iter().any(|a| a.starts_with("--events-webhook=")),
        "off by default"
    );
    assert!(!env.iter().any(|e| e["name"] == "OPM_EVENTS_WEBHOOK"));

    let (args, env) = manager(&render(&[
        "eventsWebhook.url=https://u:s3cret@hooks.example/in",
    ]));
    assert!(
        args.contains(&"--events-webhook=$(OPM_EVENTS_WEBHOOK)".to_string()),
        "{args:?}"
    );
    assert!(!args.iter().any(|a| a.contains("s3cret")), "{args:?}");
    let var = env
        .iter()
        .find(|e| e["name"] == "OPM_EVENTS_WEBHOOK")
        .expect("env");
    assert_eq!(var["value"], "https://u:s3cret@hooks.example/in");

    let (args, env) = manager(&render(&[
        "eventsWebhook.existingSecret=hook",
        "eventsWebhook.secretKey=endpoint",
    ]));
    assert!(args.contains(&"--events-webhook=$(OPM_EVENTS_WEBHOOK)".to_string()));
    let var = env
        .iter()
        .find(|e| e["name"] == "OPM_EVENTS_WEBHOOK")
        .expect("env");
    assert_eq!(
        var["valueFrom"]["secretKeyRef"],
        json!({"name": "hook", "key": "endpoint"})
    );
}

#[test]
fn the_dashboard_is_well_formed_for_grafana() {
    let dash: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join(DASHBOARD)).expect("dashboard"))
            .expect("JSON");
    assert_eq!(dash["uid"], "opm-operator");
    let vars: BTreeSet<&str> = dash["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .map(|v| v["name"].as_str().expect("name"))
        .collect();
    let panels = dash["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    for p in panels {
        let title = p["title"].as_str().expect("title");
        assert!(
            ids.insert(p["id"].as_u64().expect("id")),
            "{title}: id taken"
        );
        let g = &p["gridPos"];
        let (x, w) = (g["x"].as_u64().expect("x"), g["w"].as_u64().expect("w"));
        assert!(
            x + w <= 24 && w > 0 && g["h"].as_u64() > Some(0),
            "{title}: {g}"
        );
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        // Every variable a query uses is defined (Grafana's own `$__…` aside).
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            for var in expr.split('$').skip(1) {
                let name: String = var
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                assert!(
                    name.starts_with("__") || vars.contains(name.as_str()),
                    "{title}: ${name} is not a dashboard variable"
                );
            }
        }
    }
    // No two panels overlap.
    let cells: Vec<(u64, u64, u64, u64)> = panels
        .iter()
        .map(|p| {
            let g = &p["gridPos"];
            let n = |k: &str| g[k].as_u64().expect("gridPos");
            (n("x"), n("y"), n("w"), n("h"))
        })
        .collect();
    for (i, a) in cells.iter().enumerate() {
        for b in &cells[i + 1..] {
            let apart =
                a.0 + a.2 <= b.0 || b.0 + b.2 <= a.0 || a.1 + a.3 <= b.1 || b.1 + b.3 <= a.1;
            assert!(apart, "panels at {a:?} and {b:?} overlap");
        }
    }
}
