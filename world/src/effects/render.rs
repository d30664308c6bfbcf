//! `Render`: modules and release packages from the catalog instead of `cue` (SPEC §18),
//! through the Platform for OPM modules (SPEC §30).

use std::collections::BTreeSet;

use serde_json::Value;

use opm_core::effect::RenderRequest;
use opm_core::input::{GroupKind, InputKind, RenderError, RenderOutput};
use opm_core::object::ReleaseKey;

use super::Cx;
use crate::cluster::Cluster;
use crate::faults::FaultError;

impl Cluster {
    pub(super) fn render_effect(
        &self,
        cx: &mut Cx<'_>,
        key: &ReleaseKey,
        request: &RenderRequest,
        fault: Option<&FaultError>,
    ) -> InputKind {
        InputKind::Rendered {
            result: match fault.and_then(FaultError::as_render) {
                Some(e) => Err(e),
                None => self.render(cx, key, request),
            },
        }
    }

    fn render(
        &self,
        cx: &mut Cx<'_>,
        key: &ReleaseKey,
        request: &RenderRequest,
    ) -> Result<RenderOutput, RenderError> {
        // SPEC §30: an OPM module or instance renders through the Ready Platform (its digest
        // goes with the output into the config digest) or waits for one.
        let platform = if self.catalog.renders_through_platform(request) {
            cx.notes.opm_releases.push(key.clone());
            self.platform_ready()
                .map_err(|message| RenderError::PlatformNotReady { message })?
        } else {
            String::new()
        };
        let value = match request {
            RenderRequest::Module {
                path,
                version,
                values,
                release_name,
                release_namespace,
                ..
            } => self.catalog.render_module(
                path,
                version,
                release_name,
                release_namespace,
                values.as_ref(),
            )?,
            RenderRequest::Artifact {
                artifact_digest,
                path,
                ..
            } => self.catalog.render_artifact(artifact_digest, path)?,
        };
        // Report the cluster-scoped kinds the value uses, as discovery would for them.
        let mut cluster_scoped = BTreeSet::new();
        for obj in opm_core::desired::exported_objects(&value) {
            let (Some(av), Some(kind)) = (obj["apiVersion"].as_str(), obj["kind"].as_str()) else {
                continue;
            };
            let (group, _) = opm_core::object::split_api_version(av);
            if self.store.is_cluster_scoped(&group, kind) {
                cluster_scoped.insert(GroupKind {
                    group,
                    kind: kind.to_string(),
                });
            }
        }
        Ok(RenderOutput {
            bytes: serialized_len(&value),
            value,
            cluster_scoped: cluster_scoped.into_iter().collect(),
            platform,
        })
    }
}

/// The length of `value` serialised as compact JSON, as `cue export` would report it,
/// counted without building the text: every render of every attempt asks for it.
fn serialized_len(value: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    serde_json::to_writer(&mut n, value).map_or(0, |()| n.0)
}
