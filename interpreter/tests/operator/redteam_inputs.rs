//! Red-team: hostile spec values and hostile artifacts (issue 13 items 3, 4 and 8) against
//! the real API server and the in-process operator.
//!
//! - A huge `interval` (`5124095576030431h`) was accepted by the API server and crashed the
//!   operator in a loop (the success requeue's jitter overflowed). The CRD now refuses any
//!   `interval`/`timeout` over 24h with a message naming the field, and an operator next to
//!   the attempt keeps reconciling its other releases.
//! - `sourceRef.apiVersion`/`name`/`namespace` that could never name a Flux source are
//!   refused by the CRD.
//! - A 2 KB tar.gz whose 100 deep names implied 101 300 directories ends as
//!   `InvalidArtifact` with almost nothing on disk and the temporary directory removed.
//!
//! Every release here runs as a ServiceAccount bound to a namespaced Role.

use std::path::Path;
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams, PostParams};
use opm_core::api::{ModuleRelease, Release};
use opm_testenv::rbac;
use serde_json::{Value, json};

use crate::harness::*;
use crate::support::{RawEntry, file, tar_gz};

const SA: &str = "deployer";

async fn tenant(ns: &str, client: &kube::Client) {
    rbac::service_account_with_role(client, ns, SA, rbac::all_rules())
        .await
        .expect("ServiceAccount with a namespaced Role");
}

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

fn mr_with(ns: &str, name: &str, extra: Value) -> ModuleRelease {
    let mut spec = json!({"serviceAccountName": SA});
    if let (Some(a), Value::Object(b)) = (spec.as_object_mut(), extra) {
        a.extend(b);
    }
    module_release(ns, name, json!({}), spec)
}

/// Whether the operator reconciles `name` again after a spec change, within `within`.
async fn still_reconciles(client: &kube::Client, ns: &str, name: &str, within: Duration) -> bool {
    let api = Api::<ModuleRelease>::namespaced(client.clone(), ns);
    let before = api.get(name).await.expect("get").metadata.generation;
    patch_mr(
        client,
        ns,
        name,
        json!({"spec": {"values": {"message": format!("after {before:?}")}}}),
    )
    .await;
    tokio::time::timeout(
        within,
        wait_mr(client, ns, name, "Ready at the new generation", |o| {
            is_ready_mr(o) && o.metadata.generation > before
        }),
    )
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_interval_is_refused_by_the_crd_and_the_operator_keeps_reconciling() {
    let (env, ns) = namespace().await;
    tenant(&ns.name, &ns.client).await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let api = Api::<ModuleRelease>::namespaced(ns.client.clone(), &ns.name);
    create_mr(&ns.client, &mr_with(&ns.name, "good", json!({}))).await;
    wait_mr(&ns.client, &ns.name, "good", "good Ready", is_ready_mr).await;

    // The attack of issue 13 item 3.
    let bomb = mr_with(&ns.name, "bomb", json!({"interval": "5124095576030431h"}));
    if try_create(&api, &bomb).await.is_ok() {
        // Today's code: stored. Watch what it does to the operator before failing: its
        // first success requeues after 5124095576030431h ± 5%, which overflows a Duration
        // whenever the jitter factor is above 1.
        let applied = tokio::time::timeout(
            Duration::from_secs(60),
            wait_mr(&ns.client, &ns.name, "bomb", "bomb applied", is_ready_mr),
        )
        .await
        .is_ok();
        let mut alive = true;
        for _ in 0..3 {
            // Each success of the bomb is another roll of the jitter dice.
            patch_mr(
                &ns.client,
                &ns.name,
                "bomb",
                json!({"spec": {"values": {"message": "again"}}}),
            )
            .await;
            alive = still_reconciles(&ns.client, &ns.name, "good", Duration::from_secs(20)).await;
            if !alive {
                break;
            }
        }
        panic!(
            "the API server accepted interval 5124095576030431h; the bomb was applied: \
             {applied}; the operator still reconciles its other releases: {alive}"
        );
    }
    let started = Instant::now();
    let mut refusals = Vec::new();
    for (field, value) in [
        ("interval", "5124095576030431h"),
        ("interval", "25h"),
        ("interval", "24h0m0.000000001s"),
        ("interval", "99999999999999999999999h"),
        ("timeout", "5124095576030431h"),
        ("timeout", "1441m"),
    ] {
        let obj = mr_with(&ns.name, "bomb", json!({ field: value }));
        let (code, message) = try_create(&api, &obj)
            .await
            .expect_err("over 24h must be refused");
        eprintln!("{field}: {value:?} -> {code}: {message}");
        assert_eq!(code, 422, "{message}");
        assert!(
            message.contains(&format!("{field} must be a duration of at most 24h")),
            "the message names the field and the bound: {message}"
        );
        refusals.push(message);
    }
    // The bound itself, and the same bound in other spellings, are fine.
    for (i, (field, value)) in [
        ("interval", "24h"),
        ("interval", "86400s"),
        ("timeout", "23h59m59.999s"),
        ("interval", "1440m"),
    ]
    .into_iter()
    .enumerate()
    {
        let obj = mr_with(&ns.name, &format!("edge{i}"), json!({ field: value }));
        try_create(&api, &obj)
            .await
            .unwrap_or_else(|e| panic!("{field}: {value:?} must be accepted: {e:?}"));
    }
    // An update is refused the same way; the stored object keeps its value.
    let patched = api
        .patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"timeout": "5124095576030431h"}})),
        )
        .await;
    assert!(
        matches!(patched, Err(kube::Error::Api(ref ae)) if ae.code == 422),
        "{patched:?}"
    );
    assert_eq!(api.get("good").await.unwrap().spec.common.timeout, None);
    eprintln!("{} refusals in {:?}", refusals.len(), started.elapsed());

    // The operator is alive and reconciles: the existing release takes a change, and the
    // releases at the bound converge like any other.
    assert!(
        still_reconciles(&ns.client, &ns.name, "good", WAIT).await,
        "the operator stopped reconciling"
    );
    for i in 0..4 {
        wait_mr(
            &ns.client,
            &ns.name,
            &format!("edge{i}"),
            "a release at 24h Ready",
            is_ready_mr,
        )
        .await;
    }
    let edge = api.get("edge0").await.unwrap();
    let retry = edge.status.unwrap().next_retry_at;
    assert_eq!(retry, None, "success leaves no retry time");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_ref_that_can_name_no_flux_source_is_refused_by_the_crd() {
    let (_env, ns) = namespace().await;
    let api = Api::<Release>::namespaced(ns.client.clone(), &ns.name);
    let with_ref = |name: &str, source_ref: Value| -> Release {
        let mut r = release(
            &ns.name,
            name,
            "src",
            ".",
            json!({"serviceAccountName": SA}),
        );
        r.spec.source_ref = serde_json::from_value(source_ref).unwrap();
        r
    };
    for (source_ref, want) in [
        (
            json!({"apiVersion": "v1", "kind": "OCIRepository", "name": "src"}),
            "sourceRef.apiVersion must be source.toolkit.fluxcd.io/v1",
        ),
        (
            json!({"apiVersion": "source.toolkit.fluxcd.io/v1beta2", "kind": "OCIRepository", "name": "src"}),
            "sourceRef.apiVersion must be source.toolkit.fluxcd.io/v1",
        ),
        (
            json!({"kind": "OCIRepository", "name": "Bad_Name"}),
            "spec.sourceRef.name",
        ),
        (
            json!({"kind": "OCIRepository", "name": "../../etc"}),
            "spec.sourceRef.name",
        ),
        (
            json!({"kind": "OCIRepository", "name": "a".repeat(254)}),
            "spec.sourceRef.name",
        ),
        (
            json!({"kind": "OCIRepository", "name": "src", "namespace": "Other NS"}),
            "spec.sourceRef.namespace",
        ),
    ] {
        let (code, message) = try_create(&api, &with_ref("bad", source_ref.clone()))
            .await
            .expect_err("refused");
        eprintln!("{source_ref}: {code}: {message}");
        assert_eq!(code, 422, "{message}");
        assert!(message.contains(want), "{want:?} in {message}");
    }
    for (i, source_ref) in [
        json!({"kind": "OCIRepository", "name": "src"}),
        json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "name": "a.b-c", "namespace": "flux-system"}),
    ]
    .into_iter()
    .enumerate()
    {
        try_create(&api, &with_ref(&format!("ok{i}"), source_ref))
            .await
            .expect("a valid sourceRef is stored");
    }
}

/// Issue 13 item 4's archive: 100 entries whose deep names (`d07/a/a/…/a/f`, 1 013
/// directories each) imply 101 300 directories.
fn directory_bomb() -> Vec<u8> {
    let entries: Vec<RawEntry> = (0..100)
        .map(|i| file(&format!("d{i:02}/{}f", "a/".repeat(1012)), b""))
        .collect();
    tar_gz(&entries)
}

/// (directories, files) under `dir`, links not followed.
fn count_tree(dir: &Path) -> (u64, u64) {
    let (mut dirs, mut files) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                dirs += 1;
                stack.push(e.path());
            } else {
                files += 1;
            }
        }
    }
    (dirs, files)
}

fn stalled(o: &Release) -> bool {
    o.status
        .as_ref()
        .and_then(|s| condition(s, "Stalled"))
        .is_some_and(|c| c.status == "True")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_bomb_is_an_invalid_artifact_and_leaves_nothing_on_disk() {
    let (env, ns) = namespace().await;
    tenant(&ns.name, &ns.client).await;
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().to_path_buf();
    let op = Operator::start(env, &ns.name, |a| a.cache_dir = Some(cache_dir)).await;
    let pkg = Package::start().await;
    let bomb = directory_bomb();
    eprintln!("directory bomb: {} bytes of tar.gz", bomb.len());
    pkg.publish_bytes(&ns.client, &ns.name, "bomb-src", bomb)
        .await;
    let good = release_package(
        "good",
        &json!({"app": {"cm": configmap("next-to-the-bomb", json!({"k": "v"}))}}),
    );
    pkg.publish(&ns.client, &ns.name, "good-src", &good).await;

    let started = Instant::now();
    let sa = json!({"serviceAccountName": SA});
    create_rel(
        &ns.client,
        &release(&ns.name, "bomb", "bomb-src", ".", sa.clone()),
    )
    .await;
    create_rel(&ns.client, &release(&ns.name, "good", "good-src", ".", sa)).await;
    let got = wait_rel(&ns.client, &ns.name, "bomb", "bomb stalled", stalled).await;
    let took = started.elapsed();
    let (dirs, files) = count_tree(cache.path());
    let ready = condition(got.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .clone();
    eprintln!(
        "bomb: {} after {took:.2?}: {:?}; the cache dir holds {dirs} directories and {files} files",
        ready.reason, ready.message
    );
    assert_eq!(ready.reason, "InvalidArtifact", "{}", ready.message);
    assert!(
        ready.message.contains("deeper than 64"),
        "the message names the depth cap: {}",
        ready.message
    );
    // The operator's own layout (artifacts/, downloads/, cue/) and the good release's
    // artifact: a handful of directories, not a hundred thousand.
    assert!(dirs < 50, "{dirs} directories left in the cache dir");
    wait_rel(
        &ns.client,
        &ns.name,
        "good",
        "the other release Ready",
        is_ready_rel,
    )
    .await;
    op.stop().await;
}
