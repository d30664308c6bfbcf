//! Remote clusters (SPEC §31) in single attempts with canned answers: the kubeconfig is
//! read before any object is touched, refused with `InvalidKubeConfig` naming what runs a
//! command or reads a file, every object effect then carries the cluster, an unreachable
//! cluster is a transient `ClusterUnreachable`, and a release being deleted whose
//! kubeconfig is unusable is let go only by the orphan annotation.

mod support;

use opm_core::api::{KubeConfigReference, KubeConfigSecretRef, ModuleRelease};
use opm_core::constants::{FINALIZER, ORPHAN_ANNOTATION};
use opm_core::effect::{Effect, EffectKind};
use opm_core::outcome::Outcome;
use opm_core::remote::KubeConfigFacts;
use opm_core::{ApiError, Config};
use support::*;

const SERVER: &str = "https://10.9.8.7:6443";

fn remote_mr() -> ModuleRelease {
    let mut mr = module_release();
    mr.spec.common.kube_config = Some(KubeConfigReference {
        secret_ref: KubeConfigSecretRef {
            name: "prod".into(),
            key: None,
        },
    });
    mr
}

fn facts(insecure: &[&str]) -> KubeConfigFacts {
    KubeConfigFacts {
        key: "value".into(),
        digest: opm_core::digest::sha256(b"kubeconfig"),
        server: SERVER.into(),
        insecure: insecure.iter().map(|s| s.to_string()).collect(),
    }
}

fn object_effects(r: &support::Run) -> Vec<&Effect> {
    r.effects
        .iter()
        .filter(|e| {
            matches!(
                e.kind(),
                EffectKind::CheckServiceAccount
                    | EffectKind::CheckDrift
                    | EffectKind::Apply
                    | EffectKind::InspectOwners
                    | EffectKind::InspectStale
                    | EffectKind::Prune
                    | EffectKind::AssessHealth
                    | EffectKind::AwaitTermination
            )
        })
        .collect()
}

#[test]
fn an_exec_kubeconfig_stalls_naming_the_field_before_any_object_is_touched() {
    let canned = Canned {
        kube_config: Ok(facts(&["users[ci].user.exec"])),
        ..Canned::default()
    };
    let r = run_mr(&Config::default(), remote_mr(), &canned);
    let msg = "kubeconfig in Secret demo/prod (key value) uses users[ci].user.exec, which runs a command or reads a file on the operator's host; use inline credentials (token, client-certificate-data, certificate-authority-data) or start the operator with --allow-insecure-kubeconfig";
    assert_stall(&r, "InvalidKubeConfig", "Connect", msg);
    assert!(object_effects(&r).is_empty(), "{:?}", r.kinds());
    match r.find(EffectKind::ReadKubeConfig) {
        Some(Effect::ReadKubeConfig {
            namespace,
            name,
            key,
            max_bytes,
        }) => {
            assert_eq!((namespace.as_str(), name.as_str()), ("demo", "prod"));
            assert_eq!(key, &None);
            assert_eq!(*max_bytes, 64 * 1024);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn with_the_flag_it_applies_and_every_object_effect_names_the_cluster() {
    let canned = Canned {
        kube_config: Ok(facts(&["users[ci].user.exec"])),
        ..Canned::default()
    };
    let cfg = Config {
        allow_insecure_kubeconfig: true,
        ..Config::default()
    };
    // No ServiceAccount and operator identity off: in a remote cluster the kubeconfig's
    // own identity is used.
    let r = run_mr(&cfg, remote_mr(), &canned);
    assert_eq!(r.outcome, Outcome::Applied, "{r:#?}");
    let effects = object_effects(&r);
    assert!(effects.iter().any(|e| e.kind() == EffectKind::Apply));
    for e in effects {
        assert_eq!(
            e.cluster().map(|c| c.server.as_str()),
            Some(SERVER),
            "{e:?}"
        );
    }
    assert_eq!(r.status.inventory.as_ref().unwrap().cluster, SERVER);
}

#[test]
fn an_unreachable_cluster_is_transient_cluster_unreachable() {
    let mut canned = Canned {
        kube_config: Ok(facts(&[])),
        ..Canned::default()
    };
    canned.apply_errors.insert(
        "web".into(),
        ApiError::Unreachable {
            message: "connection refused".into(),
        },
    );
    let r = run_mr(&Config::default(), remote_mr(), &canned);
    assert_transient(
        &r,
        "ClusterUnreachable",
        "Connect",
        &format!("cluster {SERVER} cannot be reached: connection refused"),
        1,
    );
}

#[test]
fn a_missing_secret_holds_a_deletion_until_the_orphan_annotation_lets_it_go() {
    let canned = Canned {
        kube_config: Ok(facts(&[])),
        ..Canned::default()
    };
    let first = run_mr(&Config::default(), remote_mr(), &canned);
    assert_eq!(first.outcome, Outcome::Applied);
    let mut deleting = remote_mr();
    deleting.spec.common.prune = true;
    deleting.status = Some(first.status.clone());
    deleting.metadata.finalizers = Some(vec![FINALIZER.into()]);
    deleting.metadata.deletion_timestamp = Some(time(t0()));
    let missing = Canned::default();
    let r = run_mr(&Config::default(), deleting.clone(), &missing);
    assert_eq!(r.reason, "InvalidKubeConfig");
    assert!(r.find(EffectKind::RemoveFinalizer).is_none());
    assert!(r.find(EffectKind::Prune).is_none());
    deleting.metadata.annotations =
        Some([(ORPHAN_ANNOTATION.to_string(), "true".to_string())].into());
    let r = run_mr(&Config::default(), deleting, &missing);
    assert!(
        r.find(EffectKind::RemoveFinalizer).is_some(),
        "{:?}",
        r.kinds()
    );
    assert!(r.find(EffectKind::Prune).is_none());
}
