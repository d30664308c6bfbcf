//! `module.secretRef` (SPEC §27) against a real registry that asks for credentials (the
//! distribution registry with htpasswd): the right credentials pull, wrong ones are
//! refused with a message saying so, and a release with other credentials (or none) never
//! gets the module from a cache filled by another release's pull.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, PostParams};
use opm_core::api::ModuleRelease;
use opm_testenv::auth_registry::AuthRegistry;
use opm_testenv::{CueRegistry, rbac};
use serde_json::json;

use crate::harness::*;

const PRIVATE_MODULE: &str = "private.example/modules/priv@v0";

async fn dockerconfig_secret(client: &Client, ns: &str, name: &str, config: &str) {
    let s = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_string(),
            ByteString(config.as_bytes().to_vec()),
        )])),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &s)
        .await
        .expect("create Secret");
}

fn private_release(ns: &str, name: &str, secret: Option<&str>) -> ModuleRelease {
    let mut module = json!({"path": PRIVATE_MODULE, "version": "v0.1.0"});
    if let Some(s) = secret {
        module["secretRef"] = json!({"name": s});
    }
    module_release(
        ns,
        name,
        json!({}),
        json!({"module": module, "serviceAccountName": "deployer"}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_module_pulls_with_the_right_credentials_only_and_caches_never_cross() {
    const PASSWORD: &str = "right-Pw-7731";
    let (env, ns) = namespace().await;
    let c = &ns.client;
    let registry = AuthRegistry::start(&[("alice", PASSWORD)])
        .await
        .expect("the distribution registry (tools/install builds it)");
    let module = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(module.path().join("cue.mod")).unwrap();
    std::fs::write(
        module.path().join("cue.mod/module.cue"),
        format!(
            "module: \"{PRIVATE_MODULE}\"\nlanguage: version: \"v0.17.0\"\nsource: kind: \"self\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        module.path().join("priv.cue"),
        "package priv\n\n#config: {msg: string | *\"from the private registry\"}\n#release: {name: string, namespace: string}\n\
         components: c: cm: {apiVersion: \"v1\", kind: \"ConfigMap\", metadata: {name: \"\\(#release.name)-priv\", namespace: #release.namespace}, data: msg: #config.msg}\n",
    )
    .unwrap();
    registry
        .publish(module.path(), "v0.1.0", "alice", PASSWORD)
        .await
        .expect("publishing with credentials");

    rbac::create_service_account(c, &ns.name, "deployer")
        .await
        .unwrap();
    rbac::create_role(c, &ns.name, "deployer", rbac::all_rules())
        .await
        .unwrap();
    rbac::bind_role(
        c,
        &ns.name,
        "deployer",
        "deployer",
        rbac::service_account_subject("deployer", &ns.name),
    )
    .await
    .unwrap();
    dockerconfig_secret(
        c,
        &ns.name,
        "good",
        &registry.docker_config("alice", PASSWORD),
    )
    .await;
    dockerconfig_secret(
        c,
        &ns.name,
        "bad",
        &registry.docker_config("alice", "wrong-pw"),
    )
    .await;

    let public = CueRegistry::global().await.registry();
    let routes = format!("private.example={}+insecure,{public}", registry.host());
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().to_path_buf();
    let op = Operator::start(env, &ns.name, |a| {
        a.cue_registry = Some(routes);
        a.cache_dir = Some(cache_dir);
    })
    .await;

    // The right credentials: pulled and applied.
    create_mr(c, &private_release(&ns.name, "priv-good", Some("good"))).await;
    wait_mr(c, &ns.name, "priv-good", "Ready", is_ready_mr).await;
    let cm = Api::<ConfigMap>::namespaced(c.clone(), &ns.name)
        .get("priv-good-priv")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["msg"], "from the private registry");

    // Wrong credentials for the same module, after the good pull filled the caches:
    // refused, and the message says the credentials were.
    create_mr(c, &private_release(&ns.name, "priv-bad", Some("bad"))).await;
    let got = wait_mr(
        c,
        &ns.name,
        "priv-bad",
        "ResolutionFailed",
        reason_is_mr("ResolutionFailed"),
    )
    .await;
    let s = got.status.unwrap();
    let msg = &condition(&s, "Ready").unwrap().message;
    assert!(msg.contains("refused the credentials"), "{msg}");
    assert!(
        !msg.contains("wrong-pw") && !msg.contains(PASSWORD),
        "{msg}"
    );

    // No credentials at all: refused too, never served from the good release's caches.
    create_mr(c, &private_release(&ns.name, "priv-none", None)).await;
    let got = wait_mr(
        c,
        &ns.name,
        "priv-none",
        "ResolutionFailed",
        reason_is_mr("ResolutionFailed"),
    )
    .await;
    let s = got.status.unwrap();
    let msg = &condition(&s, "Ready").unwrap().message;
    assert!(msg.contains("refused the module pull"), "{msg}");

    // A wrong Secret fixed in place: the watch re-triggers and the pull succeeds.
    let fixed = registry.docker_config("alice", PASSWORD);
    Api::<Secret>::namespaced(c.clone(), &ns.name)
        .patch(
            "bad",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"data": {".dockerconfigjson": base64(fixed.as_bytes())}}),
            ),
        )
        .await
        .unwrap();
    wait_mr(
        c,
        &ns.name,
        "priv-bad",
        "Ready once the credentials are right",
        is_ready_mr,
    )
    .await;
    assert!(
        !op.traces().contains(PASSWORD),
        "the password is in a trace"
    );
    op.stop().await;
    // Issue 31 item 7: nothing pulled with credentials stays on disk, where a render with
    // other credentials or none could read it; no per-credential copies either. (The
    // refused pull without credentials leaves `cue`'s empty lock file in the shared cache:
    // no content.)
    let mut left = Vec::new();
    let mut dirs = vec![cache.path().to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let is_dir = e.file_type().unwrap().is_dir();
            let private = p.to_string_lossy().contains("private.example");
            let content = !is_dir && !p.to_string_lossy().ends_with(".lock");
            if (private && (content || p.to_string_lossy().contains("@v0.1.0")))
                || p.ends_with("by-credentials")
            {
                left.push(p.clone());
            }
            if is_dir {
                dirs.push(p);
            }
        }
    }
    assert!(
        left.is_empty(),
        "private module files left in the cache: {left:?}"
    );
}

fn base64(bytes: &[u8]) -> String {
    serde_json::to_value(ByteString(bytes.to_vec()))
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}
