//! SPEC §15 (tenancy), §3 step 12, §12 step 2, §4: who a release's objects are written as,
//! and what a release without a ServiceAccount may write. Every refusal happens before any
//! request that could change an object (drift dry-run, apply, inspect, prune).

mod support;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use opm_core::api::{InventoryEntry, ModuleRelease};
use opm_core::effect::{Effect, EffectKind, EventType, Impersonation};
use opm_core::impersonation::NO_SERVICE_ACCOUNT;
use opm_core::input::{GroupKind, RenderOutput};
use opm_core::{AllowOperatorIdentity, Config, Outcome};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::*;

use AllowOperatorIdentity::{Cluster, Off, On};

fn cfg(allow: AllowOperatorIdentity) -> Config {
    Config::default().with_operator_identity(allow)
}

/// Effects that send a request to a managed object (dry-run included).
const TOUCHING: [EffectKind; 4] = [
    EffectKind::CheckDrift,
    EffectKind::Apply,
    EffectKind::InspectStale,
    EffectKind::Prune,
];

fn touched(r: &Run) -> Vec<EffectKind> {
    r.kinds()
        .into_iter()
        .filter(|k| TOUCHING.contains(k))
        .collect()
}

/// The example render plus `extra` components.
fn rendering(extra: Value, cluster_scoped: Vec<GroupKind>) -> Canned {
    Canned {
        render: Ok(RenderOutput {
            value: exported(extra),
            cluster_scoped,
            bytes: 0,
            platform: String::new(),
        }),
        ..Default::default()
    }
}

fn crb() -> Value {
    json!({"rbac": {"crb": {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "evil"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "demo"}]}}})
}

fn foreign_deployment() -> Value {
    json!({"steal": {"d": {"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "thief", "namespace": "opm-system"}, "spec": {}}}})
}

fn apply_identity(r: &Run) -> Option<Option<Impersonation>> {
    r.effects.iter().find_map(|e| match e {
        Effect::Apply { identity, .. } => Some(identity.clone()),
        _ => None,
    })
}

#[test]
fn no_service_account_under_the_default_stalls_before_anything_is_written() {
    let r = run_mr(
        &Config::default(),
        module_release(),
        &rendering(crb(), vec![]),
    );
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (
            Outcome::FailedStalled,
            "ImpersonationFailed",
            Some(secs(1800))
        )
    );
    let (status, reason, message) = r.cond3("Ready").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ImpersonationFailed")
    );
    assert_eq!(message, NO_SERVICE_ACCOUNT);
    assert_eq!(
        message,
        "no ServiceAccount: set spec.serviceAccountName, or start the operator with --default-service-account"
    );
    assert_eq!(
        r.cond3("Stalled").map(|c| c.1),
        Some("ImpersonationFailed".into())
    );
    assert!(touched(&r).is_empty(), "{:?}", r.kinds());
    assert!(!r.kinds().contains(&EffectKind::CheckServiceAccount));
    let warning = r
        .event_tuples()
        .into_iter()
        .find(|e| e.1 == "ImpersonationFailed")
        .expect("a Warning event");
    assert_eq!(warning.0, EventType::Warning);
    assert_eq!(warning.3, NO_SERVICE_ACCOUNT);
}

#[test]
fn the_default_service_account_lifts_the_stall_and_is_sent_as_a_user_only() {
    let c = Config {
        default_service_account: Some("tenant".into()),
        ..Config::default()
    };
    let r = run_mr(&c, module_release(), &Canned::default());
    assert_eq!(r.outcome, Outcome::Applied);
    let id = apply_identity(&r).unwrap().expect("impersonated");
    assert_eq!(id.user, "system:serviceaccount:demo:tenant");
    let line = r.trace.iter().find(|l| l.contains("\"apply\"")).unwrap();
    assert!(!line.contains("groups"), "{line}");
}

#[test]
fn operator_identity_on_applies_objects_of_the_namespace_as_the_operator() {
    let r = run_mr(&cfg(On), module_release(), &Canned::default());
    assert_eq!(r.outcome, Outcome::Applied);
    assert_eq!(apply_identity(&r), Some(None));
}

#[test]
fn operator_identity_on_refuses_a_cluster_scoped_object_naming_it() {
    let r = run_mr(&cfg(On), module_release(), &rendering(crb(), vec![]));
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (Outcome::FailedStalled, "ApplyFailed", Some(secs(1800)))
    );
    let (_, _, message) = r.cond3("Ready").unwrap();
    assert_eq!(
        message,
        "ClusterRoleBinding/evil is cluster-scoped; a release applying as the operator may only write \
         objects in its own namespace demo (set spec.serviceAccountName, or --allow-operator-identity=cluster)"
    );
    assert!(touched(&r).is_empty(), "{:?}", r.kinds());
}

#[test]
fn operator_identity_on_refuses_an_object_in_another_namespace_naming_it() {
    let r = run_mr(
        &cfg(On),
        module_release(),
        &rendering(foreign_deployment(), vec![]),
    );
    assert_eq!(
        (r.outcome, r.reason.as_str()),
        (Outcome::FailedStalled, "ApplyFailed")
    );
    let (_, _, message) = r.cond3("Ready").unwrap();
    assert!(
        message.starts_with(
            "Deployment/opm-system/thief is in namespace opm-system; a release applying as the operator"
        ),
        "{message}"
    );
    assert!(touched(&r).is_empty(), "{:?}", r.kinds());
}

#[test]
fn a_kind_discovery_reports_cluster_scoped_counts_as_cluster_scoped() {
    let widget = json!({"w": {"w": {"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "demo"}}}});
    let gk = GroupKind {
        group: "example.com".into(),
        kind: "Widget".into(),
    };
    let r = run_mr(&cfg(On), module_release(), &rendering(widget, vec![gk]));
    assert_eq!(r.reason, "ApplyFailed");
    assert!(
        r.cond3("Ready")
            .unwrap()
            .2
            .starts_with("Widget/w is cluster-scoped")
    );
}

#[test]
fn operator_identity_cluster_applies_anything_as_today() {
    let mut extra = crb();
    extra
        .as_object_mut()
        .unwrap()
        .extend(foreign_deployment().as_object().unwrap().clone());
    let r = run_mr(&cfg(Cluster), module_release(), &rendering(extra, vec![]));
    assert_eq!(r.outcome, Outcome::Applied);
    assert_eq!(apply_identity(&r), Some(None));
}

#[test]
fn with_a_service_account_its_rbac_decides_not_the_confinement() {
    for allow in [Off, On, Cluster] {
        let mut mr = module_release();
        mr.spec.common.service_account_name = Some("deployer".into());
        let r = run_mr(&cfg(allow), mr, &rendering(crb(), vec![]));
        assert_eq!(r.outcome, Outcome::Applied, "{allow}");
        let id = apply_identity(&r).unwrap().expect("impersonated");
        assert_eq!(id.user, "system:serviceaccount:demo:deployer");
    }
}

/// An applied release (as the operator, `cluster`) whose inventory holds `extra`.
fn applied_with(extra: Value) -> ModuleRelease {
    let first = run_mr(&cfg(Cluster), module_release(), &rendering(extra, vec![]));
    assert_eq!(first.outcome, Outcome::Applied);
    let mut mr = module_release();
    mr.status = Some(first.status);
    mr.spec.common.prune = true;
    mr
}

fn inspected(r: &Run) -> Vec<String> {
    r.effects
        .iter()
        .filter_map(|e| match e {
            Effect::InspectStale { targets, .. } => Some(targets.clone()),
            _ => None,
        })
        .flatten()
        .map(|t| t.display())
        .collect()
}

#[test]
fn a_confined_prune_leaves_stale_objects_outside_the_namespace_alone() {
    // Applied under `cluster`; the operator now runs with `on` and the render dropped both.
    let mut extra = crb();
    extra
        .as_object_mut()
        .unwrap()
        .extend(json!({"gone": {"cm": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gone"}}}}).as_object().unwrap().clone());
    let mr = applied_with(extra);
    let r = run_mr(&cfg(On), mr, &Canned::default());
    assert_eq!(r.outcome, Outcome::AppliedAndPruned);
    assert_eq!(inspected(&r), ["ConfigMap/demo/gone"]);
    let skipped: Vec<_> = r
        .event_tuples()
        .into_iter()
        .filter(|e| e.1 == "PruneSkipped")
        .collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0].0, EventType::Warning);
    assert!(
        skipped[0].3.contains("ClusterRoleBinding/evil"),
        "{}",
        skipped[0].3
    );
    // Under `cluster` the same prune deletes it.
    let mr = applied_with(crb());
    let r = run_mr(&cfg(Cluster), mr, &Canned::default());
    assert_eq!(inspected(&r), ["ClusterRoleBinding/evil"]);
}

fn deleting(sa: Option<&str>) -> ModuleRelease {
    let mut mr = applied_with(crb());
    mr.spec.common.service_account_name = sa.map(str::to_string);
    mr.metadata.deletion_timestamp = Some(Time(t0()));
    mr
}

#[test]
fn deleting_without_any_service_account_under_the_default_counts_as_missing() {
    let r = run_mr(&Config::default(), deleting(None), &Canned::default());
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (
            Outcome::FailedStalled,
            "DeletionSAMissing",
            Some(secs(1800))
        )
    );
    let (_, _, msg) = r.cond3("Ready").unwrap();
    assert!(msg.contains("no ServiceAccount"), "{msg}");
    assert!(msg.contains("spec.prune: false"), "{msg}");
    assert!(msg.contains("opm.dev/force-delete-orphan"), "{msg}");
    assert!(touched(&r).is_empty(), "{:?}", r.kinds());
    assert!(!r.kinds().contains(&EffectKind::RemoveFinalizer));

    let mut mr = deleting(None);
    mr.metadata.annotations = Some(
        [(
            opm_core::constants::ORPHAN_ANNOTATION.to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let r = run_mr(&Config::default(), mr, &Canned::default());
    assert!(touched(&r).is_empty(), "{:?}", r.kinds());
    assert!(r.kinds().contains(&EffectKind::RemoveFinalizer));
    let orphaned = r
        .event_tuples()
        .into_iter()
        .find(|e| e.1 == "OrphanedOnDeletion")
        .unwrap();
    assert!(orphaned.3.contains("no ServiceAccount"), "{}", orphaned.3);
}

#[test]
fn deleting_as_the_confined_operator_prunes_only_the_namespace() {
    let r = run_mr(&cfg(On), deleting(None), &Canned::default());
    assert_eq!(r.reason, "Deleted");
    let pruned = inspected(&r);
    assert!(pruned.iter().all(|p| p.contains("/demo/")), "{pruned:?}");
    assert_eq!(pruned.len(), 3, "{pruned:?}");
    assert!(r.event_tuples().iter().any(|e| e.1 == "PruneSkipped"));
    let r = run_mr(&cfg(Cluster), deleting(None), &Canned::default());
    assert_eq!(r.reason, "Deleted");
    assert_eq!(inspected(&r).len(), 4);
}

// --- properties -----------------------------------------------------------------------

fn allow() -> impl Strategy<Value = AllowOperatorIdentity> {
    prop_oneof![Just(Off), Just(On), Just(Cluster)]
}

/// (kind, namespace) of a rendered object: "" = no namespace given; "-" = cluster-scoped.
fn object() -> impl Strategy<Value = (&'static str, &'static str)> {
    (
        prop_oneof![Just("ConfigMap"), Just("ClusterRole")],
        prop_oneof![Just(""), Just("demo"), Just("other"), Just("opm-system")],
    )
}

fn render_of(objs: &[(&str, &str)]) -> Value {
    let mut comps = serde_json::Map::new();
    for (i, (kind, ns)) in objs.iter().enumerate() {
        let api = if *kind == "ClusterRole" {
            "rbac.authorization.k8s.io/v1"
        } else {
            "v1"
        };
        let mut meta = json!({"name": format!("o{i}")});
        if !ns.is_empty() {
            meta["namespace"] = json!(ns);
        }
        comps.insert(
            format!("x{i}"),
            json!({"o": {"apiVersion": api, "kind": kind, "metadata": meta}}),
        );
    }
    Value::Object(comps)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever is rendered: without a ServiceAccount, `off` writes nothing; `on` writes
    /// only when every object is namespaced in the release's namespace and otherwise names
    /// each offender; `cluster` and a ServiceAccount always reach apply.
    #[test]
    fn who_may_write_what(
        allow in allow(),
        sa in prop::option::of(Just("deployer")),
        by_default in any::<bool>(),
        objs in prop::collection::vec(object(), 0..6),
    ) {
        let mut c = cfg(allow);
        let mut mr = module_release();
        match (sa, by_default) {
            (Some(s), true) => c.default_service_account = Some(s.into()),
            (Some(s), false) => mr.spec.common.service_account_name = Some(s.into()),
            (None, _) => {}
        }
        let r = run_mr(&c, mr, &rendering(render_of(&objs), vec![]));
        let outside: Vec<String> = objs
            .iter()
            .enumerate()
            .filter_map(|(i, (kind, ns))| match (*kind, *ns) {
                ("ClusterRole", _) => Some(format!("ClusterRole/o{i} is cluster-scoped")),
                (_, "" | "demo") => None,
                (_, ns) => Some(format!("ConfigMap/{ns}/o{i} is in namespace {ns}")),
            })
            .collect();
        let message = r.cond3("Ready").map(|c| c.2).unwrap_or_default();
        match (sa, allow) {
            (None, Off) => {
                prop_assert_eq!(r.reason.as_str(), "ImpersonationFailed");
                prop_assert_eq!(message.as_str(), NO_SERVICE_ACCOUNT);
                prop_assert!(touched(&r).is_empty());
            }
            (None, On) if !outside.is_empty() => {
                prop_assert_eq!(r.outcome, Outcome::FailedStalled);
                prop_assert_eq!(r.reason.as_str(), "ApplyFailed");
                prop_assert!(touched(&r).is_empty());
                for why in outside.iter().take(5) {
                    prop_assert!(message.contains(why.as_str()), "{} not in {}", why, message);
                }
                prop_assert!(message.ends_with("(set spec.serviceAccountName, or --allow-operator-identity=cluster)"));
            }
            (None, _) => {
                prop_assert_eq!(r.outcome, Outcome::Applied);
                prop_assert_eq!(apply_identity(&r), Some(None));
            }
            (Some(s), _) => {
                prop_assert_eq!(r.outcome, Outcome::Applied);
                let id = apply_identity(&r).flatten().map(|i| i.user);
                prop_assert_eq!(id, Some(format!("system:serviceaccount:demo:{s}")));
            }
        }
        // Every request to a managed object carries the ServiceAccount, or none only when
        // the operator identity is allowed.
        for e in &r.effects {
            let identity = match e {
                Effect::CheckDrift { identity, .. }
                | Effect::Apply { identity, .. }
                | Effect::InspectStale { identity, .. }
                | Effect::Prune { identity, .. } => identity,
                _ => continue,
            };
            prop_assert_eq!(identity.is_none(), sa.is_none());
            prop_assert!(identity.is_some() || allow != Off);
        }
    }

    /// The confined prune never targets an inventory entry outside the namespace.
    #[test]
    fn a_confined_prune_stays_in_the_namespace(
        stale in prop::collection::vec(object(), 1..6),
        deleting in any::<bool>(),
    ) {
        let mut mr = applied_with(render_of(&stale));
        if deleting {
            mr.metadata.deletion_timestamp = Some(Time(t0()));
        }
        let r = run_mr(&cfg(On), mr, &Canned::default());
        let entries: Vec<InventoryEntry> = r
            .effects
            .iter()
            .filter_map(|e| match e {
                Effect::InspectStale { targets, .. } => Some(targets.clone()),
                _ => None,
            })
            .flatten()
            .map(|t| InventoryEntry { group: t.group, kind: t.kind, namespace: t.namespace, name: t.name, v: t.version, component: String::new(), prune: String::new() })
            .collect();
        for e in &entries {
            prop_assert_eq!(e.namespace.as_str(), "demo");
        }
    }
}

#[test]
fn trace_headers_carry_the_flag_and_older_ones_replay_as_cluster() {
    use opm_core::trace::{TraceHeader, TraceLine, parse_line};
    let key = opm_core::ReleaseKey {
        kind: opm_core::Kind::ModuleRelease,
        namespace: "demo".into(),
        name: "web".into(),
    };
    for allow in [Off, On, Cluster] {
        let h = serde_json::to_value(TraceHeader::new(&cfg(allow), key.clone())).unwrap();
        assert_eq!(h["config"]["allowOperatorIdentity"], allow.as_str());
        let Ok(TraceLine::Header(back)) = parse_line(&h.to_string()) else {
            panic!("not a header: {h}");
        };
        assert_eq!(back.config.allow_operator_identity, allow);
    }
    let mut old = serde_json::to_value(TraceHeader::new(&Config::default(), key)).unwrap();
    old["config"]
        .as_object_mut()
        .unwrap()
        .remove("allowOperatorIdentity");
    let Ok(TraceLine::Header(back)) = parse_line(&old.to_string()) else {
        panic!("not a header: {old}");
    };
    assert_eq!(back.config.allow_operator_identity, Cluster);
}
