//! The examples stay consistent with each other and canonical for the pinned `cue`.

use std::path::Path;

use opm_testenv::registry::{EXAMPLE_VERSIONS, WEB_MODULE};
use opm_testenv::{cue, tools};
use serde_json::Value;

fn manifest(name: &str) -> Value {
    let path = tools::examples_dir().join("manifests").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn module_release_manifest_names_a_published_module_version() {
    let mr = manifest("modulerelease.yaml");
    assert_eq!(mr["apiVersion"], "releases.opmodel.dev/v1alpha1");
    assert_eq!(mr["kind"], "ModuleRelease");
    assert_eq!(mr["spec"]["module"]["path"], WEB_MODULE);
    let version = mr["spec"]["module"]["version"].as_str().unwrap();
    assert!(EXAMPLE_VERSIONS.contains(&version), "{version}");
}

#[tokio::test]
async fn release_manifest_matches_its_source_and_package() {
    let release = manifest("release.yaml");
    let source = manifest("ocirepository.yaml");
    assert_eq!(release["kind"], "Release");
    assert_eq!(release["spec"]["sourceRef"]["kind"], source["kind"]);
    assert_eq!(
        release["spec"]["sourceRef"]["name"],
        source["metadata"]["name"]
    );
    assert_eq!(source["apiVersion"], "source.toolkit.fluxcd.io/v1");
    assert_eq!(manifest("gitrepository.yaml")["kind"], "GitRepository");

    let path = release["spec"]["path"].as_str().unwrap();
    let package = tools::examples_dir().join("releases/web").join(path);
    let exported = cue::export(&package, &[]).await.unwrap();
    assert_eq!(exported["metadata"]["name"], release["metadata"]["name"]);
    assert_eq!(
        exported["metadata"]["namespace"],
        release["metadata"]["namespace"]
    );
}

async fn assert_cue_fmt_clean(dir: &Path) {
    let out = tokio::process::Command::new(tools::cue_bin().unwrap())
        .args(["fmt", "--check", "./..."])
        .current_dir(dir)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{} is not `cue fmt` clean:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn example_cue_is_formatted() {
    for dir in ["modules/web", "releases/web"] {
        assert_cue_fmt_clean(&tools::examples_dir().join(dir)).await;
    }
}
