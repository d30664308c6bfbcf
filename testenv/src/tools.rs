//! Where the pinned tools live. `tools/install` puts them in a per-user cache; each can be
//! overridden by an environment variable (what `tools/install --env` prints).

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Pinned versions; they must match `tools/install`.
pub const CUE_VERSION: &str = "v0.17.1";
pub const K8S_VERSION: &str = "v1.37.2";
pub const FLUX_SOURCE_VERSION: &str = "v1.9.6";

/// `${XDG_CACHE_HOME:-$HOME/.cache}/opm-operator/tools`
pub fn cache_root() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    base.join("opm-operator").join("tools")
}

fn locate(tool: &'static str, var: &str, default: PathBuf) -> Result<PathBuf> {
    let (path, hint) = match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(p) => (PathBuf::from(p), format!("from ${var}")),
        None => (default, format!("default location; override with ${var}")),
    };
    if path.exists() {
        Ok(path)
    } else {
        Err(Error::ToolMissing {
            tool,
            path,
            source_hint: hint,
        })
    }
}

/// The `cue` binary (`OPM_CUE_BIN`).
pub fn cue_bin() -> Result<PathBuf> {
    locate(
        "cue",
        "OPM_CUE_BIN",
        cache_root().join(format!("cue-{CUE_VERSION}/bin/cue")),
    )
}

/// The etcd + kube-apiserver program (`OPM_APISERVER_BIN`).
pub fn apiserver_bin() -> Result<PathBuf> {
    locate(
        "opm-test-apiserver",
        "OPM_APISERVER_BIN",
        cache_root().join(format!("k8s-{K8S_VERSION}/bin/opm-test-apiserver")),
    )
}

/// `kubectl` built from the same Kubernetes module (`OPM_KUBECTL_BIN`).
pub fn kubectl_bin() -> Result<PathBuf> {
    locate(
        "kubectl",
        "OPM_KUBECTL_BIN",
        cache_root().join(format!("k8s-{K8S_VERSION}/bin/kubectl")),
    )
}

/// kwok's pinned version; it must match `tools/install`.
pub const KWOK_VERSION: &str = "v0.8.0";

/// `kube-controller-manager` of the pinned Kubernetes module (`OPM_KCM_BIN`).
pub fn controller_manager_bin() -> Result<PathBuf> {
    locate(
        "kube-controller-manager",
        "OPM_KCM_BIN",
        cache_root().join(format!(
            "k8s-controllers-{K8S_VERSION}/bin/kube-controller-manager"
        )),
    )
}

/// `kube-scheduler` of the pinned Kubernetes module (`OPM_SCHEDULER_BIN`).
pub fn scheduler_bin() -> Result<PathBuf> {
    locate(
        "kube-scheduler",
        "OPM_SCHEDULER_BIN",
        cache_root().join(format!("k8s-controllers-{K8S_VERSION}/bin/kube-scheduler")),
    )
}

/// `kwok` (`OPM_KWOK_BIN`).
pub fn kwok_bin() -> Result<PathBuf> {
    locate(
        "kwok",
        "OPM_KWOK_BIN",
        cache_root().join(format!("kwok-{KWOK_VERSION}/bin/kwok")),
    )
}

/// kwok's configuration: its own "fast" node and pod stages, copied from its module by
/// `tools/install` (`OPM_KWOK_STAGES`).
pub fn kwok_stages() -> Result<PathBuf> {
    locate(
        "kwok stages",
        "OPM_KWOK_STAGES",
        cache_root().join(format!("kwok-{KWOK_VERSION}/stages.yaml")),
    )
}

/// The directory of Flux source CRD YAML files (`OPM_FLUX_CRDS_DIR`).
pub fn flux_crds_dir() -> Result<PathBuf> {
    locate(
        "Flux source CRDs",
        "OPM_FLUX_CRDS_DIR",
        cache_root().join(format!("flux-source-{FLUX_SOURCE_VERSION}/crds")),
    )
}

/// The repository's `examples/` directory (CUE module, release package, manifests).
pub fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("examples")
}

/// Pinned `github.com/distribution/distribution/v3` version; must match `tools/install`.
pub const REGISTRY_VERSION: &str = "v3.1.2";

/// The distribution registry (`OPM_REGISTRY_BIN`), an OCI registry with htpasswd auth.
pub fn registry_bin() -> Result<PathBuf> {
    locate(
        "registry",
        "OPM_REGISTRY_BIN",
        cache_root().join(format!("registry-{REGISTRY_VERSION}/bin/registry")),
    )
}
