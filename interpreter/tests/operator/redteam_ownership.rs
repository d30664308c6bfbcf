//! Red team, issue 13 item 2 and item 8 (first point): ownership (SPEC §25, §9, §28).
//!
//! Every release writes with the same field manager, so before the owner check a release
//! that rendered an object it did not create took it over silently and, after dropping it,
//! pruned it. Each test here was first run against the code before the check (see the
//! report in the commit message); it now shows the write refused with `OwnershipConflict`
//! and the victim object untouched. All releases run as a ServiceAccount bound to a
//! namespaced Role.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use opm_core::Kind;
use opm_core::api::Release;
use opm_core::constants::{REQUESTED_AT_ANNOTATION, labels};
use opm_core::render_value::release_uuid;
use opm_testenv::flux::Artifact;
use opm_testenv::rbac;
use serde_json::{Value, json};

use crate::harness::*;

const SA: &str = "deployer";
/// The labels the operator stamps (SPEC §6).
const STAMPED: [&str; 5] = [
    labels::MANAGED_BY,
    labels::RELEASE_NAME,
    labels::RELEASE_NAMESPACE,
    labels::RELEASE_UUID,
    labels::COMPONENT,
];

/// A Release `name` of source `name` whose package renders `objects` (component → object),
/// as the namespace's `deployer` ServiceAccount, with `extra` merged into the spec.
async fn publish(pkg: &Package, client: &Client, ns: &str, name: &str, objects: Value) -> Artifact {
    let components: serde_json::Map<String, Value> = objects
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), json!({ "obj": v })))
        .collect();
    pkg.publish(
        client,
        ns,
        name,
        &release_package(name, &Value::Object(components)),
    )
    .await
}

async fn create(client: &Client, ns: &str, name: &str, extra: Value) {
    let mut spec = json!({"serviceAccountName": SA, "prune": true});
    if let (Some(a), Value::Object(b)) = (spec.as_object_mut(), extra) {
        a.extend(b);
    }
    create_rel(client, &release(ns, name, name, ".", spec)).await;
}

fn uuid(ns: &str, name: &str) -> String {
    release_uuid(Kind::Release, ns, name)
}

fn cms(client: &Client, ns: &str) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), ns)
}

/// Everything of a ConfigMap an unauthorised write would change.
fn fingerprint(cm: &ConfigMap) -> (Option<BTreeMap<String, String>>, Value, Value, String) {
    (
        cm.data.clone(),
        json!(cm.metadata.labels),
        json!(cm.metadata.managed_fields),
        cm.metadata.resource_version.clone().unwrap_or_default(),
    )
}

fn release_labels(cm: &ConfigMap) -> BTreeMap<String, String> {
    cm.metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| STAMPED.contains(&k.as_str()))
        .collect()
}

/// The release settled: stalled on ownership, or (the old behaviour) Ready.
fn settled(o: &Release) -> bool {
    reason_is_rel("OwnershipConflict")(o) || is_ready_rel(o)
}

/// Ready on the artifact `a`.
fn ready_on(a: &Artifact) -> impl Fn(&Release) -> bool + '_ {
    move |o| {
        is_ready_rel(o)
            && o.status
                .as_ref()
                .is_some_and(|s| s.last_applied_source_digest == a.digest)
    }
}

fn ready_message(o: &Release) -> String {
    o.status
        .as_ref()
        .and_then(|s| condition(s, "Ready"))
        .map(|c| format!("{}: {}", c.reason, c.message))
        .unwrap_or_default()
}

async fn sa(client: &Client, ns: &str) {
    rbac::service_account_with_role(client, ns, SA, rbac::all_rules())
        .await
        .unwrap();
}

/// (a) An object nobody's release created (a stand-in for `kube-system/coredns`) is not
/// taken over; with `adoptExisting` it is, and from then on it is pruned like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlabelled_object_is_not_adopted_unless_asked() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    sa(&ns.client, &ns.name).await;
    let api = cms(&ns.client, &ns.name);
    let victim: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "coredns", "labels": {"k8s-app": "kube-dns"}},
        "data": {"Corefile": ".:53 { forward . /etc/resolv.conf }"},
    }))
    .unwrap();
    let before = api.create(&PostParams::default(), &victim).await.unwrap();
    let pkg = Package::start().await;
    publish(
        &pkg,
        &ns.client,
        &ns.name,
        "r",
        json!({
            "dns": configmap("coredns", json!({"Corefile": ".:53 { forward . 6.6.6.6 }"})),
            "app": configmap("app", json!({"k": "v"})),
        }),
    )
    .await;
    // forceConflicts takes the fields from their manager: only the owner check stops it.
    create(
        &ns.client,
        &ns.name,
        "r",
        json!({"rollout": {"forceConflicts": true}}),
    )
    .await;
    let got = wait_rel(&ns.client, &ns.name, "r", "settled", settled).await;
    let after = api.get("coredns").await.unwrap();
    assert!(
        reason_is_rel("OwnershipConflict")(&got),
        "the release took over an object it did not create: {}; coredns now {:?} labels {:?}",
        ready_message(&got),
        after.data,
        after.metadata.labels
    );
    assert!(is_stalled(&got));
    let msg = ready_message(&got);
    assert!(
        msg.contains(&format!(
            "ConfigMap {}/coredns exists and was not created by a release; set spec.rollout.adoptExisting: true to take it over",
            ns.name
        )),
        "{msg}"
    );
    assert_eq!(
        fingerprint(&after),
        fingerprint(&before),
        "coredns untouched"
    );
    assert!(
        api.get_opt("app").await.unwrap().is_none(),
        "nothing of the release is written"
    );
    let evs = events_with(&ns.client, &ns.name, "r", &["OwnershipConflict"]).await;
    assert!(reasons(&evs).contains(&"OwnershipConflict".to_string()));

    // Asked for: adopted, labelled as ours.
    patch_rel(
        &ns.client,
        &ns.name,
        "r",
        json!({"spec": {"rollout": {"adoptExisting": true}}}),
    )
    .await;
    wait_rel(
        &ns.client,
        &ns.name,
        "r",
        "Ready after adoption",
        is_ready_rel,
    )
    .await;
    let adopted = api.get("coredns").await.unwrap();
    assert_eq!(
        release_labels(&adopted).get(labels::RELEASE_UUID),
        Some(&uuid(&ns.name, "r"))
    );
    assert_eq!(
        adopted
            .data
            .as_ref()
            .and_then(|d| d.get("Corefile"))
            .cloned(),
        Some(".:53 { forward . 6.6.6.6 }".to_string())
    );
    // Dropped from the render: pruned like any object of the release.
    let a2 = publish(
        &pkg,
        &ns.client,
        &ns.name,
        "r",
        json!({"app": configmap("app", json!({"k": "v"}))}),
    )
    .await;
    wait_rel(
        &ns.client,
        &ns.name,
        "r",
        "Ready without coredns",
        ready_on(&a2),
    )
    .await;
    assert!(api.get_opt("coredns").await.unwrap().is_none());
    op.stop().await;
}

/// (b) Release B rendering release A's object is refused, naming A; A's object and A's
/// readiness are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_releases_object_is_never_written() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    sa(&ns.client, &ns.name).await;
    let api = cms(&ns.client, &ns.name);
    let pkg = Package::start().await;
    publish(
        &pkg,
        &ns.client,
        &ns.name,
        "a",
        json!({"shared": configmap("shared", json!({"owner": "a"}))}),
    )
    .await;
    create(&ns.client, &ns.name, "a", json!({})).await;
    wait_rel(&ns.client, &ns.name, "a", "A Ready", is_ready_rel).await;
    let before = api.get("shared").await.unwrap();
    publish(
        &pkg,
        &ns.client,
        &ns.name,
        "b",
        json!({"shared": configmap("shared", json!({"owner": "b"}))}),
    )
    .await;
    // Even adoptExisting does not take another release's object.
    create(
        &ns.client,
        &ns.name,
        "b",
        json!({"rollout": {"adoptExisting": true, "forceConflicts": true}}),
    )
    .await;
    let got = wait_rel(&ns.client, &ns.name, "b", "settled", settled).await;
    let after = api.get("shared").await.unwrap();
    assert!(
        reason_is_rel("OwnershipConflict")(&got),
        "B took over A's object: {}; shared now {:?} labels {:?}",
        ready_message(&got),
        after.data,
        after.metadata.labels
    );
    let msg = ready_message(&got);
    assert!(
        msg.contains(&format!(
            "ConfigMap {ns}/shared belongs to Release {ns}/a",
            ns = ns.name
        )),
        "{msg}"
    );
    assert_eq!(
        fingerprint(&after),
        fingerprint(&before),
        "A's object untouched"
    );
    let a = Api::<Release>::namespaced(ns.client.clone(), &ns.name)
        .get("a")
        .await
        .unwrap();
    assert!(is_ready_rel(&a), "A stays Ready: {}", ready_message(&a));
    op.stop().await;
}

/// (c) Two releases rendering one object, over several reconciles: its labels never flip,
/// and neither dropping it from B nor deleting B deletes A's object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_releases_rendering_one_object_never_fight() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    sa(&ns.client, &ns.name).await;
    let api = cms(&ns.client, &ns.name);
    let pkg = Package::start().await;
    for name in ["a", "b"] {
        publish(
            &pkg,
            &ns.client,
            &ns.name,
            name,
            json!({
                "shared": configmap("shared", json!({"owner": name})),
                "own": configmap(&format!("own-{name}"), json!({})),
            }),
        )
        .await;
    }
    create(&ns.client, &ns.name, "a", json!({})).await;
    wait_rel(&ns.client, &ns.name, "a", "A Ready", is_ready_rel).await;
    create(&ns.client, &ns.name, "b", json!({})).await;
    let rels = Api::<Release>::namespaced(ns.client.clone(), &ns.name);
    let a_uuid = uuid(&ns.name, "a");
    let mut flips = Vec::new();
    for round in 0..4 {
        for name in ["a", "b"] {
            rels.patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: format!("round-{round}")}}})),
            )
            .await
            .unwrap();
            let want = format!("round-{round}");
            wait_rel(&ns.client, &ns.name, name, "reconcile handled", |o| {
                o.status
                    .as_ref()
                    .is_some_and(|s| s.last_handled_reconcile_at == want)
            })
            .await;
            let cm = api.get("shared").await.unwrap();
            let owner = release_labels(&cm).get(labels::RELEASE_UUID).cloned();
            if owner.as_ref() != Some(&a_uuid) {
                flips.push(format!(
                    "after {name} round {round}: uuid {owner:?} data {:?}",
                    cm.data
                ));
            }
        }
    }
    assert!(
        flips.is_empty(),
        "the shared object changed hands: {flips:?}"
    );
    let b = rels.get("b").await.unwrap();
    assert!(
        reason_is_rel("OwnershipConflict")(&b),
        "{}",
        ready_message(&b)
    );
    // B drops the object, then is deleted with prune: A's object survives both.
    let b2 = publish(
        &pkg,
        &ns.client,
        &ns.name,
        "b",
        json!({"own": configmap("own-b", json!({}))}),
    )
    .await;
    wait_rel(
        &ns.client,
        &ns.name,
        "b",
        "B Ready without shared",
        ready_on(&b2),
    )
    .await;
    assert!(
        api.get_opt("shared").await.unwrap().is_some(),
        "B's prune deleted A's object"
    );
    rels.delete("b", &DeleteParams::default()).await.unwrap();
    eventually("B gone", || async {
        rels.get_opt("b").await.unwrap().is_none()
    })
    .await;
    let cm = api.get("shared").await.unwrap();
    assert_eq!(
        cm.data
            .as_ref()
            .and_then(|d| d.get("owner"))
            .map(String::as_str),
        Some("a")
    );
    assert_eq!(release_labels(&cm).get(labels::RELEASE_UUID), Some(&a_uuid));
    assert!(
        api.get_opt("own-b").await.unwrap().is_none(),
        "B's own object pruned"
    );
    op.stop().await;
}

/// (d) Prune skips an object carrying our managed-by label but no uuid: not provably ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_skips_an_object_without_our_uuid() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    sa(&ns.client, &ns.name).await;
    let api = cms(&ns.client, &ns.name);
    let pkg = Package::start().await;
    publish(
        &pkg,
        &ns.client,
        &ns.name,
        "r",
        json!({
            "x": configmap("x", json!({})),
            "y": configmap("y", json!({})),
        }),
    )
    .await;
    create(&ns.client, &ns.name, "r", json!({})).await;
    wait_rel(&ns.client, &ns.name, "r", "Ready", is_ready_rel).await;
    // Someone strips the uuid (keeping managed-by), e.g. a tool re-creating the object.
    api.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": {labels::RELEASE_UUID: null}}})),
    )
    .await
    .unwrap();
    let a2 = publish(&pkg, &ns.client, &ns.name, "r", json!({})).await;
    wait_rel(
        &ns.client,
        &ns.name,
        "r",
        "Ready on the empty render",
        ready_on(&a2),
    )
    .await;
    assert!(
        api.get_opt("x").await.unwrap().is_some(),
        "prune deleted an object with managed-by=opm-controller and no uuid"
    );
    assert!(api.get_opt("y").await.unwrap().is_none(), "y, ours, pruned");
    op.stop().await;
}

/// (e) The handover recipe of SPEC §25: A marks the object `prune: disabled` and drops it
/// (orphaned, labels removed), B adopts it with `adoptExisting`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_is_handed_from_one_release_to_another() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    sa(&ns.client, &ns.name).await;
    let api = cms(&ns.client, &ns.name);
    let pkg = Package::start().await;
    let mut handed = configmap("handed", json!({"v": "1"}));
    handed["metadata"]["annotations"] = json!({"releases.opmodel.dev/prune": "disabled"});
    publish(&pkg, &ns.client, &ns.name, "a", json!({"h": handed})).await;
    create(&ns.client, &ns.name, "a", json!({})).await;
    wait_rel(&ns.client, &ns.name, "a", "A Ready", is_ready_rel).await;
    let cm = api.get("handed").await.unwrap();
    assert!(
        cm.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("releases.opmodel.dev/prune"))
            .is_none(),
        "the policy annotation is not applied"
    );
    assert_eq!(
        release_labels(&cm).get(labels::RELEASE_UUID),
        Some(&uuid(&ns.name, "a"))
    );
    let uid = cm.metadata.uid.clone();
    // A drops it: orphaned, not deleted, and no longer claimed.
    let a2 = publish(
        &pkg,
        &ns.client,
        &ns.name,
        "a",
        json!({"other": configmap("a-other", json!({}))}),
    )
    .await;
    wait_rel(
        &ns.client,
        &ns.name,
        "a",
        "A Ready without it",
        ready_on(&a2),
    )
    .await;
    let cm = api
        .get_opt("handed")
        .await
        .unwrap()
        .expect("a prune: disabled object is never deleted");
    assert_eq!(cm.metadata.uid, uid);
    assert!(release_labels(&cm).is_empty(), "{:?}", cm.metadata.labels);
    // B adopts it.
    publish(
        &pkg,
        &ns.client,
        &ns.name,
        "b",
        json!({"h": configmap("handed", json!({"v": "2"}))}),
    )
    .await;
    create(
        &ns.client,
        &ns.name,
        "b",
        json!({"rollout": {"adoptExisting": true}}),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "b", "B Ready", is_ready_rel).await;
    let cm = api.get("handed").await.unwrap();
    assert_eq!(cm.metadata.uid, uid, "the same object, handed over");
    assert_eq!(
        release_labels(&cm).get(labels::RELEASE_UUID),
        Some(&uuid(&ns.name, "b"))
    );
    assert_eq!(cm.data.unwrap().get("v").map(String::as_str), Some("2"));
    op.stop().await;
}

fn is_stalled(o: &Release) -> bool {
    o.status
        .as_ref()
        .and_then(|s| condition(s, "Stalled"))
        .is_some_and(|c| c.status == "True")
}

/// `apiserver_request_total` summed by (verb, resource, subresource, dry_run), without
/// leases and non-resource URLs.
async fn request_totals(client: &Client) -> BTreeMap<String, f64> {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(req).await.unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels_s, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let get = |k: &str| {
            labels_s
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{k}=\"")))
                .map(|v| v.trim_end_matches('"').to_string())
                .unwrap_or_default()
        };
        let resource = get("resource");
        if resource.is_empty() || resource == "leases" {
            continue;
        }
        let key = format!(
            "{} {}{}{}",
            get("verb"),
            resource,
            match get("subresource").as_str() {
                "" => String::new(),
                s => format!("/{s}"),
            },
            if get("dry_run").is_empty() {
                ""
            } else {
                " (dry-run)"
            }
        );
        *out.entry(key).or_default() += value.parse::<f64>().unwrap_or(0.0);
    }
    out
}

fn diff(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    b.iter()
        .filter_map(|(k, v)| {
            let d = v - a.get(k).copied().unwrap_or(0.0);
            (d > 0.0).then(|| (k.clone(), d))
        })
        .collect()
}

/// Requests the operator sent: everything but the test's own reads and writes of the
/// release (`test_patches` annotation patches; the finalizer patch is the operator's).
fn operators(d: &BTreeMap<String, f64>, test_patches: f64) -> f64 {
    let total: f64 = d
        .iter()
        .filter(|(k, _)| {
            !(k.starts_with("GET releases")
                || k.starts_with("LIST releases")
                || k.starts_with("POST releases"))
        })
        .map(|(_, v)| v)
        .sum();
    total - test_patches
}

/// Measurement, not a bound: the API requests of a first apply of 3 new ConfigMaps (the
/// owner check adds one metadata GET per object the watch does not hold) and of an
/// unchanged release (no owner check at all). Run alone, the API server's counters are
/// shared: `cargo test -p opm-operator --test operator request_counts -- --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_counts_of_a_first_apply_and_an_unchanged_release() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let objects = json!({
        "a": configmap("m-a", json!({})),
        "b": configmap("m-b", json!({})),
        "c": configmap("m-c", json!({})),
    });
    let art = publish(&pkg, &ns.client, &ns.name, "m", objects).await;
    let t0 = request_totals(&ns.client).await;
    // As the operator (no ServiceAccount): the identity whose unchanged checks need no
    // dry-run once the watch vouches for the objects.
    create_rel(&ns.client, &release(&ns.name, "m", "m", ".", json!({}))).await;
    wait_rel(&ns.client, &ns.name, "m", "Ready", ready_on(&art)).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let t1 = request_totals(&ns.client).await;
    let first = diff(&t0, &t1);
    println!(
        "first apply of 3 ConfigMaps: {} operator requests: {first:?}",
        operators(&first, 0.0)
    );
    let rels = Api::<Release>::namespaced(ns.client.clone(), &ns.name);
    let mut last = None;
    for i in 0..6 {
        let before = request_totals(&ns.client).await;
        let want = format!("m-{i}");
        rels.patch(
            "m",
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: want.clone()}}}),
            ),
        )
        .await
        .unwrap();
        wait_rel(&ns.client, &ns.name, "m", "handled", |o| {
            o.status
                .as_ref()
                .is_some_and(|s| s.last_handled_reconcile_at == want)
        })
        .await;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let d = diff(&before, &request_totals(&ns.client).await);
        println!(
            "unchanged reconcile {i}: {} operator requests: {d:?}",
            operators(&d, 1.0)
        );
        last = Some(operators(&d, 1.0));
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert!(last.is_some());
    // A second release's first apply, with the ConfigMap watch already synced: the fast path
    // writes without GET or dry-run, the owner check still reads each new object once.
    let art2 = publish(
        &pkg,
        &ns.client,
        &ns.name,
        "n",
        json!({
            "a": configmap("n-a", json!({})),
            "b": configmap("n-b", json!({})),
            "c": configmap("n-c", json!({})),
        }),
    )
    .await;
    let before = request_totals(&ns.client).await;
    create_rel(&ns.client, &release(&ns.name, "n", "n", ".", json!({}))).await;
    wait_rel(&ns.client, &ns.name, "n", "Ready", ready_on(&art2)).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let d = diff(&before, &request_totals(&ns.client).await);
    println!(
        "first apply of 3 ConfigMaps, watch synced: {} operator requests: {d:?}",
        operators(&d, 0.0)
    );
    op.stop().await;
}

/// A ConfigMap manifest carrying the `releases.opmodel.dev/ssa` annotation `policy`.
fn configmap_with_ssa(name: &str, data: Value, policy: &str) -> Value {
    let mut cm = configmap(name, data);
    cm["metadata"]["annotations"] = json!({ "releases.opmodel.dev/ssa": policy });
    cm
}

/// Whether the release's persisted inventory lists ConfigMap `name`.
fn lists(o: &Release, name: &str) -> bool {
    o.status
        .as_ref()
        .and_then(|s| s.inventory.as_ref())
        .is_some_and(|i| i.entries.iter().any(|e| e.name == name))
}

/// Issue 31 item 5 (SPEC §25): `ssa: Ignore` and `IfNotPresent` objects skipped the owner
/// check yet entered the inventory, so the next revision (without the annotation) wrote
/// over the other release's object and the one after pruned it. Before the fix, release B
/// rendering A's ConfigMap with `ssa: Ignore` went Ready with it in its inventory. Now B
/// stalls `OwnershipConflict` naming A, A's ConfigMap stays untouched, and B's inventory
/// never lists it, with either annotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssa_ignore_or_if_not_present_does_not_launder_another_releases_object() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    sa(&ns.client, &ns.name).await;
    let api = cms(&ns.client, &ns.name);
    let pkg = Package::start().await;
    publish(
        &pkg,
        &ns.client,
        &ns.name,
        "a",
        json!({"shared": configmap("shared", json!({"owner": "a"}))}),
    )
    .await;
    create(&ns.client, &ns.name, "a", json!({})).await;
    wait_rel(&ns.client, &ns.name, "a", "A Ready", is_ready_rel).await;
    let before = api.get("shared").await.unwrap();
    for (round, policy) in ["Ignore", "IfNotPresent"].into_iter().enumerate() {
        let art = publish(
            &pkg,
            &ns.client,
            &ns.name,
            "b",
            json!({
                "shared": configmap_with_ssa("shared", json!({"owner": "b"}), policy),
                "own": configmap("b-own", json!({"k": "v"})),
            }),
        )
        .await;
        if round == 0 {
            create(&ns.client, &ns.name, "b", json!({})).await;
        }
        let got = wait_rel(&ns.client, &ns.name, "b", "settled on this artifact", |o| {
            settled(o)
                && o.status
                    .as_ref()
                    .is_some_and(|s| s.last_attempted_source_digest == art.digest)
        })
        .await;
        let msg = ready_message(&got);
        assert!(
            reason_is_rel("OwnershipConflict")(&got),
            "{policy}: B went on with A's object: {msg}; inventory lists shared: {}",
            lists(&got, "shared")
        );
        assert!(
            msg.contains(&format!(
                "ConfigMap {ns}/shared belongs to Release {ns}/a",
                ns = ns.name
            )),
            "{policy}: {msg}"
        );
        assert!(!lists(&got, "shared"), "{policy}: never in B's inventory");
        assert_eq!(
            fingerprint(&api.get("shared").await.unwrap()),
            fingerprint(&before),
            "{policy}: A's object untouched"
        );
    }
    let a = Api::<Release>::namespaced(ns.client.clone(), &ns.name)
        .get("a")
        .await
        .unwrap();
    assert!(is_ready_rel(&a), "A stays Ready: {}", ready_message(&a));
    op.stop().await;
}

/// Issue 31 item 5 (SPEC §25): `status.inventory` is the release's own status, which a
/// tenant may be allowed to write. Objects listed there skipped the owner check, so a
/// forged entry naming another release's ConfigMap let the next render overwrite it
/// (stamping our uuid on it, after which prune would delete it). Now: a forged inventory
/// prunes nothing that is not ours (A's ConfigMap, an unlabelled one), and rendering the
/// forged-in object stalls `OwnershipConflict` with the object untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_inventory_neither_prunes_nor_launders() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    sa(&ns.client, &ns.name).await;
    let api = cms(&ns.client, &ns.name);
    let pkg = Package::start().await;
    publish(
        &pkg,
        &ns.client,
        &ns.name,
        "a",
        json!({"shared": configmap("shared", json!({"owner": "a"}))}),
    )
    .await;
    create(&ns.client, &ns.name, "a", json!({})).await;
    wait_rel(&ns.client, &ns.name, "a", "A Ready", is_ready_rel).await;
    let handmade: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "handmade", "labels": {labels::MANAGED_BY: "opm-controller"}},
        "data": {"k": "v"},
    }))
    .unwrap();
    api.create(&PostParams::default(), &handmade).await.unwrap();
    let shared_before = api.get("shared").await.unwrap();
    let handmade_before = api.get("handmade").await.unwrap();
    publish(
        &pkg,
        &ns.client,
        &ns.name,
        "b",
        json!({"own": configmap("b-own", json!({"k": "v"}))}),
    )
    .await;
    create(&ns.client, &ns.name, "b", json!({})).await;
    wait_rel(&ns.client, &ns.name, "b", "B Ready", is_ready_rel).await;

    // B's tenant forges B's inventory: A's ConfigMap and the unlabelled one are "B's".
    let rels = Api::<Release>::namespaced(ns.client.clone(), &ns.name);
    let forged = |name: &str| json!({"kind": "ConfigMap", "namespace": ns.name, "name": name, "v": "v1", "component": "x"});
    let forge = || {
        json!({"status": {"inventory": {
            "revision": 7,
            "digest": format!("sha256:{}", "0".repeat(64)),
            "count": 3,
            "entries": [forged("b-own"), forged("shared"), forged("handmade")],
        }}})
    };
    rels.patch_status("b", &PatchParams::default(), &Patch::Merge(&forge()))
        .await
        .unwrap();
    rels.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: "forged-1"}}})),
    )
    .await
    .unwrap();
    let got = wait_rel(&ns.client, &ns.name, "b", "handled", |o| {
        o.status
            .as_ref()
            .is_some_and(|s| s.last_handled_reconcile_at == "forged-1")
            && (is_ready_rel(o) || is_stalled(o))
    })
    .await;
    assert!(is_ready_rel(&got), "{}", ready_message(&got));
    assert_eq!(
        fingerprint(&api.get("shared").await.unwrap()),
        fingerprint(&shared_before),
        "A's object is not pruned through a forged inventory"
    );
    assert_eq!(
        fingerprint(&api.get("handmade").await.unwrap()),
        fingerprint(&handmade_before),
        "an unlabelled object is not pruned through a forged inventory"
    );

    // Forged again, and this time B renders the forged-in object: refused, untouched.
    rels.patch_status("b", &PatchParams::default(), &Patch::Merge(&forge()))
        .await
        .unwrap();
    let art = publish(
        &pkg,
        &ns.client,
        &ns.name,
        "b",
        json!({
            "own": configmap("b-own", json!({"k": "v"})),
            "shared": configmap("shared", json!({"owner": "b"})),
        }),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "b",
        "settled on the new artifact",
        |o| {
            settled(o)
                && o.status
                    .as_ref()
                    .is_some_and(|s| s.last_attempted_source_digest == art.digest)
        },
    )
    .await;
    let after = api.get("shared").await.unwrap();
    assert!(
        reason_is_rel("OwnershipConflict")(&got),
        "B wrote A's object through a forged inventory: {}; shared now {:?} labels {:?}",
        ready_message(&got),
        after.data,
        after.metadata.labels
    );
    assert_eq!(
        fingerprint(&after),
        fingerprint(&shared_before),
        "A's object untouched"
    );
    op.stop().await;
}
