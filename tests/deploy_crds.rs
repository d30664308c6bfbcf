//! `deploy/` is part of the product: these tests keep its CustomResourceDefinitions equal to
//! the Rust types (so `kubectl apply -k deploy/` never installs a stale schema), check the
//! printer columns and field descriptions users see in `kubectl get` / `kubectl explain`,
//! and check that every YAML file under `deploy/` parses and that the shipped RBAC stays
//! least-privilege (SPEC §22).
//!
//! Regenerate the checked-in CRDs after changing the API types:
//!
//! ```sh
//! UPDATE_CRDS=1 cargo test -p opm-core --test deploy_crds
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

const REGENERATE: &str = "UPDATE_CRDS=1 cargo test -p opm-core --test deploy_crds";

const HEADER: &str = "# Generated from the Rust API types (opm_core::api::crds()); do not edit.\n\
# Regenerate with: UPDATE_CRDS=1 cargo test -p opm-core --test deploy_crds\n";

/// Where each CRD is checked in: the kustomize tree and the Helm chart's `crds/`
/// (Helm installs that directory before the templates; it cannot share files with
/// `deploy/crds` because a packaged chart must be self-contained).
const CRD_DIRS: [&str; 2] = ["deploy/crds", "deploy/helm/opm-operator/crds"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `<group>_<plural>.yaml`, the file-name convention of controller-gen (and Flux's CRDs).
fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

fn targets() -> Vec<(PathBuf, CustomResourceDefinition)> {
    let mut out = Vec::new();
    for dir in CRD_DIRS {
        for crd in opm_core::api::crds() {
            out.push((repo().join(dir).join(file_name(&crd)), crd));
        }
    }
    out
}

fn render(crd: &CustomResourceDefinition) -> String {
    let yaml = serde_saphyr::to_string(crd).expect("a CRD serialises to YAML");
    format!("{HEADER}{yaml}")
}

fn write_all() {
    for (path, crd) in targets() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, render(&crd)).unwrap();
        eprintln!("wrote {}", path.display());
    }
}

fn update_requested() -> bool {
    std::env::var("UPDATE_CRDS").is_ok_and(|v| v == "1")
}

fn parse_yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()))
        .into_iter()
        // An empty document (e.g. a trailing `---`) carries nothing.
        .filter(|v| !v.is_null())
        .collect()
}

fn parse_single(path: &Path) -> Value {
    let mut docs = parse_yaml_docs(path);
    assert_eq!(
        docs.len(),
        1,
        "{} must hold one YAML document",
        path.display()
    );
    docs.remove(0)
}

/// The JSON pointer of the first place where `a` and `b` differ, with both sides.
fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let here = format!("{at}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => first_difference(p, q, &here),
                    (p, q) => Some(format!("{here}: checked in {p:?}, types give {q:?}")),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{at}/{i}"))),
        _ if a == b => None,
        _ => Some(format!("{at}: checked in {a}, types give {b}")),
    }
}

/// The generator. `cargo test` runs it only when asked (`--ignored`), and it refuses to
/// write unless `UPDATE_CRDS=1`, so a stray `--include-ignored` cannot rewrite files.
#[test]
#[ignore = "generator: UPDATE_CRDS=1 cargo test -p opm-core --test deploy_crds -- --ignored"]
fn regenerate_deploy_crds() {
    assert!(update_requested(), "set UPDATE_CRDS=1 to rewrite the CRDs");
    write_all();
}

#[test]
fn checked_in_crds_match_the_types() {
    if update_requested() {
        write_all();
    }
    for (path, crd) in targets() {
        assert!(
            path.is_file(),
            "{} is missing; generate it with `{REGENERATE}`",
            path.display()
        );
        let checked_in = parse_single(&path);
        let expected = serde_json::to_value(&crd).unwrap();
        if let Some(diff) = first_difference(&checked_in, &expected, "") {
            panic!(
                "{} is out of date with the Rust API types ({diff}); regenerate it with `{REGENERATE}`",
                path.display()
            );
        }
    }
}

/// (name, priority) of each printer column, in order.
fn columns(crd: &Value) -> Vec<(String, i64)> {
    crd["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .expect("printer columns")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["priority"].as_i64().unwrap_or(0),
            )
        })
        .collect()
}

fn checked_in(plural: &str) -> Value {
    parse_single(
        &repo()
            .join("deploy/crds")
            .join(format!("releases.opmodel.dev_{plural}.yaml")),
    )
}

#[test]
fn printer_columns_are_those_of_spec_1_3() {
    let owned = |cols: &[(&str, i64)]| -> Vec<(String, i64)> {
        cols.iter().map(|(n, p)| (n.to_string(), *p)).collect()
    };
    let mr = checked_in("modulereleases");
    assert_eq!(
        columns(&mr),
        owned(&[
            ("Ready", 0),
            ("Reason", 0),
            ("Module", 0),
            ("Version", 0),
            ("Age", 0),
            ("Retry", 1),
        ])
    );
    let rel = checked_in("releases");
    assert_eq!(
        columns(&rel),
        owned(&[
            ("Ready", 0),
            ("Reason", 0),
            ("Source", 0),
            ("Path", 0),
            ("Age", 0),
            ("Revision", 1),
            ("Retry", 1),
        ])
    );
    let plat = checked_in("platforms");
    assert_eq!(
        columns(&plat),
        owned(&[("Type", 0), ("Ready", 0), ("Reason", 0), ("Age", 0)])
    );
    assert_eq!(
        plat["spec"]["scope"], "Cluster",
        "SPEC §30: one Platform per cluster"
    );
    assert_eq!(plat["spec"]["names"]["shortNames"][0], "plat");
    for crd in [&mr, &rel] {
        let names = &crd["spec"]["names"];
        let short = names["shortNames"][0].as_str().unwrap();
        assert!(short == "mr" || short == "rel", "short name {short}");
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        assert_eq!(
            crd["spec"]["versions"][0]["subresources"]["status"],
            serde_json::json!({}),
            "status must be a subresource (status writes never bump generation)"
        );
    }
}

/// Paths of schema properties under `schema` that carry no description.
fn undescribed(schema: &Value, at: &str, out: &mut Vec<String>) {
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            let here = format!("{at}.{name}");
            let described = prop
                .get("description")
                .and_then(Value::as_str)
                .is_some_and(|d| !d.trim().is_empty());
            if !described {
                out.push(here.clone());
            }
            undescribed(prop, &here, out);
        }
    }
    if let Some(items) = schema.get("items") {
        undescribed(items, &format!("{at}[]"), out);
    }
}

/// `kubectl explain modulerelease.spec...` is how users discover the API: every spec
/// field must say what it is for.
#[test]
fn every_spec_field_has_a_description() {
    for plural in ["modulereleases", "releases"] {
        let crd = checked_in(plural);
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let spec = &schema["properties"]["spec"];
        assert!(
            spec["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{plural}: spec has no description"
        );
        let mut missing = Vec::new();
        undescribed(spec, "spec", &mut missing);
        assert!(
            missing.is_empty(),
            "{plural}: spec fields without a doc comment (shown by `kubectl explain`): {missing:?}"
        );
    }
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// Helm templates are Go templates, not YAML, until Helm renders them.
fn is_helm_template(path: &Path) -> bool {
    path.components().any(|c| c.as_os_str() == "templates")
}

#[test]
fn every_deploy_yaml_file_parses_as_kubernetes_objects() {
    let deploy = repo().join("deploy");
    let mut files = Vec::new();
    yaml_files(&deploy, &mut files);
    files.retain(|p| !is_helm_template(p));
    assert!(
        files.len() >= 10,
        "deploy/ holds too few YAML files: {files:?}"
    );
    let mut kinds = BTreeSet::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy();
        let docs = parse_yaml_docs(path);
        assert!(!docs.is_empty(), "{} is empty", path.display());
        // Helm's own files are not Kubernetes objects.
        if name == "Chart.yaml" || name == "values.yaml" {
            continue;
        }
        for doc in docs {
            let kind = doc["kind"]
                .as_str()
                .unwrap_or_else(|| panic!("{}: a document without `kind`", path.display()));
            assert!(
                doc["apiVersion"].as_str().is_some(),
                "{}: {kind} without apiVersion",
                path.display()
            );
            if kind != "Kustomization" && kind != "Component" {
                assert!(
                    doc["metadata"]["name"].as_str().is_some(),
                    "{}: {kind} without metadata.name",
                    path.display()
                );
            }
            kinds.insert(kind.to_owned());
        }
    }
    for kind in [
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "Kustomization",
    ] {
        assert!(kinds.contains(kind), "deploy/ has no {kind}");
    }
}

/// SPEC §22: the broad apply role ships only for `--allow-operator-identity`, off by
/// default: the default kustomization neither installs it nor passes the flag, and the
/// opt-in component adds both.
#[test]
fn the_broad_apply_role_is_opt_in() {
    let k = parse_single(&repo().join("deploy/kustomization.yaml"));
    for r in k["resources"].as_array().unwrap() {
        let r = r.as_str().unwrap();
        assert!(!r.contains("apply-"), "the default install lists {r}");
        assert!(!r.contains("components"), "the default install lists {r}");
    }
    assert!(k.get("components").is_none(), "no component by default");
    let d = parse_single(&repo().join("deploy/manager/deployment.yaml"));
    let args = strings(&d["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--allow-operator-identity")),
        "{args:?}"
    );
    let dir = repo().join("deploy/components/operator-identity");
    let c = parse_single(&dir.join("kustomization.yaml"));
    assert_eq!(c["kind"], "Component");
    let listed: Vec<&str> = strings(&c["resources"]);
    assert_eq!(
        listed,
        ["apply-clusterrole.yaml", "apply-clusterrolebinding.yaml"]
    );
    for r in listed {
        assert!(dir.join(r).is_file(), "{r}");
    }
    let patch = c["patches"][0]["patch"].as_str().unwrap();
    assert!(patch.contains("--allow-operator-identity=on"), "{patch}");
    let values =
        std::fs::read_to_string(repo().join("deploy/helm/opm-operator/values.yaml")).unwrap();
    assert!(
        values.contains("\nallowOperatorIdentity: \"off\"\n"),
        "the chart's default is off"
    );
}

#[test]
fn kustomization_lists_existing_files_only() {
    let path = repo().join("deploy/kustomization.yaml");
    let k = parse_single(&path);
    let resources = k["resources"].as_array().expect("resources");
    assert!(!resources.is_empty());
    for r in resources {
        let r = r.as_str().unwrap();
        let p = repo().join("deploy").join(r);
        // A file, or a directory of its own (rbac/, manager/: overlays take them alone).
        assert!(
            p.is_file() || p.join("kustomization.yaml").is_file(),
            "deploy/kustomization.yaml names {r}, which is neither a file nor a kustomization"
        );
    }
    for (path, _) in targets()
        .iter()
        .filter(|(p, _)| p.starts_with(repo().join("deploy/crds")))
    {
        let rel = path.strip_prefix(repo().join("deploy")).unwrap();
        assert!(
            resources.iter().any(|r| r.as_str() == rel.to_str()),
            "deploy/kustomization.yaml does not install {}",
            rel.display()
        );
    }
}

/// The broad apply role: only in the opt-in kustomize component (SPEC §22).
const APPLY_ROLE: &str = "deploy/components/operator-identity/apply-clusterrole.yaml";

fn rules(path: &str) -> Vec<Value> {
    let role = parse_single(&repo().join(path));
    role["rules"].as_array().expect("rules").clone()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// True if some rule grants `verb` on `group/resource`.
fn grants(rules: &[Value], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        strings(&r["apiGroups"]).contains(&group)
            && strings(&r["resources"]).contains(&resource)
            && strings(&r["verbs"]).contains(&verb)
    })
}

/// SPEC §22: least privilege. The manager role must not hold wildcards or write access to
/// workloads (those live in the opt-in apply role of components/operator-identity), and
/// impersonates ServiceAccounts only (SPEC §15: no groups, no users).
#[test]
fn manager_cluster_role_is_least_privilege() {
    let rules = rules("deploy/rbac/clusterrole.yaml");
    for r in &rules {
        for field in ["apiGroups", "resources", "verbs"] {
            assert!(
                !strings(&r[field]).contains(&"*"),
                "wildcard {field} in the manager ClusterRole: {r}"
            );
        }
        assert!(r.get("nonResourceURLs").is_none(), "non-resource URLs: {r}");
        let verbs = strings(&r["verbs"]);
        if verbs.contains(&"impersonate") {
            for res in strings(&r["resources"]) {
                assert_eq!(
                    res, "serviceaccounts",
                    "impersonation beyond ServiceAccounts"
                );
            }
            assert_eq!(verbs, ["impersonate"], "impersonate shares a rule: {r}");
        }
    }
    let g = "releases.opmodel.dev";
    for res in ["modulereleases", "releases"] {
        for verb in ["get", "list", "watch", "patch"] {
            assert!(grants(&rules, g, res, verb), "{verb} {res}");
        }
        assert!(grants(&rules, g, &format!("{res}/status"), "patch"));
        assert!(grants(&rules, g, &format!("{res}/finalizers"), "update"));
        assert!(
            !grants(&rules, g, res, "delete"),
            "the operator never deletes releases"
        );
    }
    for verb in ["get", "list", "watch"] {
        assert!(grants(&rules, g, "platforms", verb), "{verb} platforms");
    }
    assert!(grants(&rules, g, "platforms/status", "update"));
    for verb in ["create", "update", "patch", "delete"] {
        assert!(
            !grants(&rules, g, "platforms", verb),
            "the operator only reads the Platform: {verb}"
        );
    }
    for res in ["ocirepositories", "gitrepositories", "buckets"] {
        for verb in ["get", "list", "watch"] {
            assert!(grants(&rules, "source.toolkit.fluxcd.io", res, verb));
        }
        for verb in ["create", "update", "patch", "delete"] {
            assert!(
                !grants(&rules, "source.toolkit.fluxcd.io", res, verb),
                "sources are read-only: {verb} {res}"
            );
        }
    }
    for verb in ["get", "list", "watch"] {
        assert!(grants(&rules, "", "serviceaccounts", verb));
    }
    assert!(grants(&rules, "", "serviceaccounts", "impersonate"));
    assert!(
        !grants(&rules, "", "groups", "impersonate"),
        "no group impersonation: the API server adds a ServiceAccount's groups itself"
    );
    assert!(
        !grants(&rules, "", "users", "impersonate"),
        "ServiceAccount impersonation does not need `users`"
    );
    assert!(grants(&rules, "events.k8s.io", "events", "create"));
    assert!(grants(&rules, "events.k8s.io", "events", "patch"));
    for (group, res) in [
        ("", "secrets"),
        ("", "configmaps"),
        ("apps", "deployments"),
        ("coordination.k8s.io", "leases"),
    ] {
        for verb in ["get", "create", "patch", "delete"] {
            assert!(
                !grants(&rules, group, res, verb),
                "the manager ClusterRole must not {verb} {group}/{res} cluster-wide"
            );
        }
    }

    // Leader election: a namespaced Role, only in the operator's namespace.
    let role = parse_single(&repo().join("deploy/rbac/leader-election-role.yaml"));
    assert_eq!(role["kind"], "Role");
    assert_eq!(role["metadata"]["namespace"], "opm-system");
    let lr = role["rules"].as_array().unwrap();
    for verb in ["get", "create", "update"] {
        assert!(grants(lr, "coordination.k8s.io", "leases", verb));
    }
}

/// The opt-in apply role (apply/prune without a ServiceAccount) names kinds and verbs
/// explicitly; it never grants `escalate`/`bind`/`impersonate` or wildcards.
#[test]
fn apply_cluster_role_names_its_kinds() {
    let rules = rules(APPLY_ROLE);
    for r in &rules {
        for field in ["apiGroups", "resources", "verbs"] {
            assert!(!strings(&r[field]).contains(&"*"), "wildcard {field}: {r}");
        }
        for verb in ["escalate", "bind", "impersonate"] {
            assert!(!strings(&r["verbs"]).contains(&verb), "{verb}: {r}");
        }
    }
    // Enough for the example module: ConfigMap, ServiceAccount, Deployment, Service.
    for (group, res) in [
        ("", "configmaps"),
        ("", "serviceaccounts"),
        ("", "services"),
        ("apps", "deployments"),
    ] {
        for verb in ["get", "create", "patch", "delete"] {
            assert!(grants(&rules, group, res, verb), "{verb} {group}/{res}");
        }
    }
}

/// The `rules:` block of a Helm template (everything from `rules:` up to the next
/// document or template directive), which the chart keeps free of template syntax.
fn helm_template_rules(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(repo().join(path)).unwrap();
    let block: String = text
        .lines()
        .skip_while(|l| !l.starts_with("rules:"))
        .take_while(|l| !l.starts_with("---") && !l.starts_with("{{"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        !block.is_empty() && !block.contains("{{"),
        "{path}: no template-free `rules:` block"
    );
    let v: Value = serde_saphyr::from_str(&block)
        .unwrap_or_else(|e| panic!("{path}: rules block is not YAML: {e}"));
    v["rules"].as_array().unwrap().clone()
}

/// The Helm chart and the kustomize tree grant the same rights (one reviewed RBAC).
#[test]
fn helm_chart_rbac_equals_the_kustomize_rbac() {
    let t = "deploy/helm/opm-operator/templates";
    for (template, plain) in [
        ("clusterrole.yaml", "deploy/rbac/clusterrole.yaml"),
        ("apply-clusterrole.yaml", APPLY_ROLE),
        (
            "leader-election-role.yaml",
            "deploy/rbac/leader-election-role.yaml",
        ),
    ] {
        assert_eq!(
            helm_template_rules(&format!("{t}/{template}")),
            rules(plain),
            "{t}/{template} and {plain} grant different rights"
        );
    }
}

/// Every operator flag of SPEC §22 is configurable in the Helm chart and present in the
/// kustomize Deployment (set, or documented in a comment).
#[test]
fn deployments_carry_the_operator_flags() {
    let flags = [
        "--metrics-bind-address",
        "--health-probe-bind-address",
        "--leader-elect",
        "--concurrency",
        "--default-service-account",
        "--allow-cross-namespace-refs",
        "--watch-label-selector",
        "--requeue-dependency",
        "--cue-binary",
        "--cue-registry",
        "--cache-dir",
        "--max-artifact-bytes",
        "--trace-dir",
        "--log-format",
        "--kube-api-qps",
        "--kube-api-burst",
        "--allow-operator-identity",
        "--max-values-bytes",
    ];
    let plain = std::fs::read_to_string(repo().join("deploy/manager/deployment.yaml")).unwrap();
    let helm =
        std::fs::read_to_string(repo().join("deploy/helm/opm-operator/templates/deployment.yaml"))
            .unwrap();
    for flag in flags {
        assert!(
            plain.contains(flag),
            "deploy/manager/deployment.yaml lacks {flag}"
        );
        assert!(
            helm.contains(flag),
            "the Helm deployment template lacks {flag}"
        );
    }

    let d = parse_single(&repo().join("deploy/manager/deployment.yaml"));
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(pod["serviceAccountName"], "opm-controller");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    for kind in ["requests", "limits"] {
        assert!(
            c["resources"][kind]["memory"].is_string(),
            "resources.{kind}"
        );
    }
    let args = strings(&c["args"]);
    assert_eq!(args.first(), Some(&"run"));
    // The cache dir must be a writable volume: the root filesystem is read-only.
    let cache = args
        .iter()
        .find_map(|a| a.strip_prefix("--cache-dir="))
        .expect("--cache-dir");
    let mounts = c["volumeMounts"].as_array().unwrap();
    assert!(
        mounts.iter().any(|m| m["mountPath"] == cache),
        "--cache-dir={cache} is not a mounted volume"
    );
    // Probe ports are the ones the flags bind.
    let health = args
        .iter()
        .find_map(|a| a.strip_prefix("--health-probe-bind-address="))
        .expect("health address");
    let port = c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "http-health")
        .expect("http-health port");
    assert!(health.ends_with(&format!(":{}", port["containerPort"])));
}

/// Spec fields a tenant may write without a bound of their own, each with the reason.
/// Everything else a tenant writes must carry one (SPEC §24).
const UNBOUNDED_BY_DESIGN: [(&str, &str); 3] = [
    (
        "spec.values",
        "free-form values, checked by the module's own #config in CUE; bounded as a whole by \
         the API server's object size limit and the render's limits (SPEC §24)",
    ),
    (
        "spec.driftDetection.ignore[].target.name",
        "an exact-match filter over rendered objects, never read: names such as the \
         ClusterRole `system:aggregate-to-view` are not DNS-1123; bounded by maxLength",
    ),
    (
        "spec.registry{}.filter",
        "the Platform's retired version-range form, kept in the schema only so that the \
         CRD's CEL rule can refuse it with a message saying to pin `version`: any value is \
         refused, so nothing of it is ever stored",
    ),
];

/// Properties that name an object: each must carry a DNS-1123 pattern (SPEC §24 "names").
fn is_name_field(name: &str) -> bool {
    name == "name" || name == "namespace" || name.ends_with("Name")
}

/// Every tenant-writable list without `maxItems`, string without `maxLength` or `enum`,
/// name without a `pattern`, and free-form object, under `schema`.
fn unbounded(schema: &Value, at: &str, field: &str, out: &mut Vec<String>) {
    let allowed = |what: &str| UNBOUNDED_BY_DESIGN.iter().any(|(p, _)| *p == what);
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
        && !allowed(at)
    {
        out.push(format!(
            "{at}: free-form (x-kubernetes-preserve-unknown-fields)"
        ));
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("array") if schema.get("maxItems").is_none() && !allowed(at) => {
            out.push(format!("{at}: a list without maxItems"));
        }
        Some("string") => {
            let bounded = schema.get("maxLength").is_some() || schema.get("enum").is_some();
            if !bounded && !allowed(at) {
                out.push(format!("{at}: a string without maxLength or enum"));
            }
            let named = schema.get("pattern").is_some() || schema.get("enum").is_some();
            if is_name_field(field) && !named && !allowed(at) {
                out.push(format!("{at}: a name without a pattern"));
            }
        }
        _ => {}
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            unbounded(prop, &format!("{at}.{name}"), name, out);
        }
    }
    if let Some(items) = schema.get("items") {
        unbounded(items, &format!("{at}[]"), field, out);
    }
    if let Some(extra) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        unbounded(extra, &format!("{at}{{}}"), field, out);
    }
}

/// SPEC §24: every list and string a tenant writes in a release's spec is bounded by the
/// CRD, and every name has a pattern, so the API server refuses a hostile spec before the
/// operator reads it. A field added without a bound fails here.
#[test]
fn every_tenant_writable_list_and_string_is_bounded() {
    for crd in opm_core::api::crds() {
        let crd = serde_json::to_value(&crd).unwrap();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap().to_owned();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert!(spec.is_object(), "{plural}: no spec schema");
        let mut missing = Vec::new();
        unbounded(spec, "spec", "spec", &mut missing);
        assert!(
            missing.is_empty(),
            "{plural}: tenant-writable fields without a bound (add one, or an entry with a \
             reason to UNBOUNDED_BY_DESIGN):\n{}",
            missing.join("\n")
        );
    }
}

/// The walker above catches what it should: a schema with an unbounded list, string and
/// name is reported, field by field.
#[test]
fn the_bounds_walker_reports_unbounded_fields() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "refs": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string", "maxLength": 253},
                "key": {"type": "string"}
            }}},
            "serviceAccountName": {"type": "string", "maxLength": 253, "pattern": "^a$"},
            "mode": {"type": "string", "enum": ["A", "B"]},
            "blob": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }
    });
    let mut out = Vec::new();
    unbounded(&schema, "spec", "spec", &mut out);
    out.sort();
    assert_eq!(
        out,
        [
            "spec.blob: free-form (x-kubernetes-preserve-unknown-fields)",
            "spec.refs: a list without maxItems",
            "spec.refs[].key: a string without maxLength or enum",
            "spec.refs[].name: a name without a pattern",
        ]
    );
}
