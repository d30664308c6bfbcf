//! Installing CustomResourceDefinitions and waiting until the server serves them.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};

use crate::error::{Error, Result};
use crate::tools;

const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);
const FIELD_MANAGER: &str = "opm-testenv";

/// Reads every CRD from the `*.yaml`/`*.yml` files of `dir` (multi-document files
/// allowed), in file-name order.
pub fn load_crds_from_dir(dir: &Path) -> Result<Vec<CustomResourceDefinition>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("read {}", dir.display()), e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    files.sort();
    let mut crds = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        let docs: Vec<CustomResourceDefinition> =
            serde_saphyr::from_multiple(&text).map_err(|e| Error::Yaml {
                path: path.clone(),
                message: e.to_string(),
            })?;
        crds.extend(docs);
    }
    Ok(crds)
}

/// The Flux source CRDs installed by `tools/install` (OCIRepository, GitRepository,
/// Bucket, HelmRepository, HelmChart, ExternalArtifact).
pub fn flux_source_crds() -> Result<Vec<CustomResourceDefinition>> {
    let crds = load_crds_from_dir(&tools::flux_crds_dir()?)?;
    if crds.is_empty() {
        return Err(Error::ToolMissing {
            tool: "Flux source CRDs",
            path: tools::flux_crds_dir()?,
            source_hint: "directory holds no CRDs".into(),
        });
    }
    Ok(crds)
}

/// Server-side applies the CRDs (so installing twice is harmless) and waits until each
/// is `Established`, i.e. its resources can be used.
pub async fn install_crds(client: &Client, crds: Vec<CustomResourceDefinition>) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::with_capacity(crds.len());
    for mut crd in crds {
        // Fields the server owns must not be part of an apply.
        crd.status = None;
        crd.metadata.resource_version = None;
        crd.metadata.managed_fields = None;
        let name = crd.name_any();
        api.patch(&name, &params, &Patch::Apply(&crd)).await?;
        names.push(name);
    }
    for name in names {
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(ESTABLISH_TIMEOUT, established).await {
            Ok(result) => {
                result.map_err(|e| Error::NotReady(format!("watching CRD {name}: {e}")))?;
            }
            Err(_) => {
                return Err(Error::Timeout {
                    what: format!("CRD {name} to become Established"),
                    secs: ESTABLISH_TIMEOUT.as_secs(),
                });
            }
        }
    }
    Ok(())
}
